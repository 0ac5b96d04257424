"""The Sessions view's adapter to the engine: frozen, sanitised view models.

No Textual here: the graph widget, node detail and branch verdict take these objects and
only draw them. Everything shown comes from the engine (``sessions.reasons`` verdicts,
``sessions.graph`` layout, ``pipeline.write`` dry run); nothing is re-derived.

Public API::

    model = SessionsModel.load(state_dir, now=..., records=workspace_model.records.values())
    model.session_ids                       -> tuple[str, ...]
    model.layout(sid, LayoutOptions())      -> sessions.graph.Layout (cached per fingerprint)
    model.layout_ready(sid)                 -> the open's Layout if it needs no laying out, else None
    model.node_detail(sid, node_id)         -> NodeDetailVM
    model.branch_verdict(sid, tip, plan=None) -> BranchVerdictVM
    model.tip_for(sid, node_id)             -> the tip whose verdict explains that node
    model.locate(source_id)                 -> (sid, node_id) | None   (a citation's "openprogram/<sid>/<node>")
    dry_run(state_dir, sid, tip, clock=...) -> DryRunVM  (what writing this branch now would do)
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from memory_tui.core.format.text import sanitize
from memory_tui.core.format.tokens import TokenCounter
from memory_tui.sessions import layout_table
from memory_tui.sessions.graph import (
    UNREADABLE_S, Decorations, Layout, LayoutOptions, first_line, layout_overview, layout_session, unreadable_id,
)
from memory_tui.sessions.kept import (
    Citations, SessionDrift, kept_counts, kept_states, kept_verdict, session_drift,
)
from memory_tui.sessions.schedule import next_write
from memory_tui.sessions.links import SpawnLinks, session_decorations, summary_facts, summary_reason
from memory_tui.sessions.overview import SessionOverview
from memory_tui.sessions.overview_table import cached_overview
from memory_tui.sessions.reasons import Explanation, Reason, SessionExplanation, WriterContext, explain, load_context
from memory_tui.sessions.records import MARK_KEY, CachedCounter, cached_counter, message_text
from memory_tui.sessions.store import Session, SessionSnapshot, load_sessions, thaw
from memory_tui.sessions.summary import held_ids, tip_summary

PROVIDER = "openprogram"
WRITTEN_V, PARTLY_V, UNWRITTEN_V, NOTHING_V = "written", "partly written", "unwritten", "nothing to write"


# --------------------------------------------------------------------------- view models


@dataclass(frozen=True)
class EvidenceVM:
    file: str
    field: str
    value: str  # JSON text of the value, sanitised and cut

    @property
    def line(self) -> str:
        where = self.file or "(no file)"
        return f"{where} {self.field} = {self.value}" if self.field else f"{where} = {self.value}"


@dataclass(frozen=True)
class ReasonVM:
    code: str
    message: str
    evidence: tuple[EvidenceVM, ...]


@dataclass(frozen=True)
class CitationVM:
    """A topic record citing a node: what the node detail lists and jumps to."""

    memory_id: str
    topic_path: str
    headings: tuple[str, ...]
    label: str
    source_id: str


@dataclass(frozen=True)
class NodeDetailVM:
    session_id: str
    node_id: str
    role: str  # user | assistant | tool | system | root (as memory sees it)
    stored_role: str
    time: str  # UTC, "YYYY-MM-DD HH:MM:SS UTC"
    text: str  # sanitised full text
    first_line: str
    file: str  # state-relative node file
    state: str  # the graph state (one glyph each)
    verdict: str | None  # written | pending | never (None for the graph root)
    tip: str | None  # the tip whose view gave the verdict
    reasons: tuple[ReasonVM, ...]
    forked_from: str | None = None
    edit_of: str | None = None
    rewound: bool = False
    spawn_branch_root: bool = False
    spawn_caller: str | None = None
    covers_ids: tuple[str, ...] = ()
    display: str | None = None
    source: str | None = None
    mark: str | None = None  # the mark value on disk
    mark_by: str | None = None  # "this workspace" | "another workspace" | None
    citations: tuple[CitationVM, ...] = ()
    analysing: bool = False  # the verdict and its reasons are still being computed (a big session)
    kept: str | None = None  # sessions.kept state: kept | dropped | unmarked_kept (None: neither marked nor cited)
    kept_reason: ReasonVM | None = None  # the kept verdict with its evidence
    error: str | None = None  # an unreadable node file: its error, "path:line:col: CODE: message"
    link: tuple[str, str] | None = None  # a node of another session: (session, node), what `g` crosses to
    summary: ReasonVM | None = None  # a compaction summary on the head's line: the turns it covers and their state

    def preview(self, limit: int = 600) -> tuple[str, bool]:
        """The text cut for display, and whether it was cut ("show more")."""
        if len(self.text) <= limit:
            return self.text, False
        return self.text[:limit].rstrip() + "…", True


@dataclass(frozen=True)
class PlannedBatchVM:
    tip: str
    ids: tuple[str, ...]
    tokens: int


@dataclass(frozen=True)
class DryRunVM:
    """The pipeline's dry run of writing one branch now (``write --branch TIP --force --dry-run``),
    as ``pipeline.preview.preview_write`` reports it for the confirm dialog."""

    session_id: str
    tip: str
    batches: tuple[PlannedBatchVM, ...]
    outcome: str
    reason_code: str | None
    message: str
    warnings: tuple[str, ...]
    files: tuple[str, ...] = ()  # likely to change, relative to the state dir
    preview: Any = field(default=None, compare=False, repr=False)  # the pipeline.preview.JobPreview itself

    @property
    def turns(self) -> int:
        return sum(len(b.ids) for b in self.batches)

    @property
    def tokens(self) -> int:
        return sum(b.tokens for b in self.batches)


@dataclass(frozen=True)
class BranchVerdictVM:
    session_id: str
    tip: str
    is_head: bool
    listed: bool
    archived: bool
    verdict: str  # written | partly written | unwritten | nothing to write
    records: int
    written: int
    pending_ids: tuple[str, ...]  # OpenProgram's pending set for this tip
    held_ids: tuple[str, ...]  # the part of it no pass writes (archived branch)
    stranded_ids: tuple[str, ...]
    foreign_ids: tuple[str, ...]
    pending_tokens: int
    threshold: int
    reasons: tuple[ReasonVM, ...]  # tip and session reasons, in the engine's order
    plan: DryRunVM | None = None
    planning: bool = False  # the dry run is being computed (off the UI thread); plan follows
    summary: str = ""  # sessions.summary.tip_summary: the same story as the turns
    next_write: str = ""  # sessions.schedule: the rule that writes its pending turns next, and when
    next_at: float | None = None  # the idle pass's time (the panel counts down to it)
    next_evidence: tuple[EvidenceVM, ...] = ()


@dataclass(frozen=True)
class SessionRowVM:
    """One row of the Sessions list: what memory did with a session, at a glance."""

    session_id: str
    title: str
    updated_at: float | None
    updated: str  # UTC text of updated_at ("" when unknown)
    head: str | None
    live_tips: int  # tips of branches that are not archived
    tips: int
    pending_turns: int  # unwritten turns on the branches a pass offers (as `status` counts them)
    pending_tokens: int  # the largest pending total of one branch (what the threshold compares)
    threshold: int
    watcher_at: float | None  # session-end.json: the updated_at the idle watcher last handled
    watcher: str  # UTC text of watcher_at ("never" when the watcher has no entry)
    foreign: int  # turns marked by another workspace
    stranded: int
    in_registry: bool
    runtime_only_tips: tuple[str, ...]  # grouped: "runtime turns only"
    kept: int = 0  # marked and cited
    dropped: int = 0  # marked, cited by no record: written, nothing kept
    unmarked_kept: int = 0  # cited without a mark of this workspace
    drift: int | None = None  # turns where the mark- and citation-based pending sets disagree (None: not yet known)
    unreadable: int = 0  # node files that do not parse

    @property
    def warnings(self) -> tuple[str, ...]:
        out: list[str] = []
        if self.unreadable:
            out.append(f"{self.unreadable} unreadable node file{'s' if self.unreadable != 1 else ''}")
        if self.drift:
            out.append(f"drift {self.drift}: marks and records disagree")
        if self.dropped:
            out.append(f"{self.dropped} written, nothing kept")
        if self.unmarked_kept:
            out.append(f"{self.unmarked_kept} kept without a mark")
        if self.foreign:
            out.append(f"{self.foreign} marked by another workspace")
        if self.stranded:
            out.append(f"{self.stranded} stranded")
        if not self.in_registry:
            out.append("not in registry")
        if self.runtime_only_tips:
            n = len(self.runtime_only_tips)
            out.append(f"{n} tip{'s' if n != 1 else ''}: runtime turns only")
        return tuple(out)


# --------------------------------------------------------------------------- conversion


def _value(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    text = sanitize(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reason_vm(reason: Reason) -> ReasonVM:
    return ReasonVM(
        sanitize(reason.code),
        sanitize(reason.message),
        tuple(EvidenceVM(sanitize(e.file), sanitize(e.field), _value(e.value)) for e in reason.evidence),
    )


def _utc(ts: float | None) -> str:
    if not ts:
        return ""
    try:
        return datetime.fromtimestamp(float(ts), timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return str(ts)


def _str_or_none(value: Any) -> str | None:
    return sanitize(value) if isinstance(value, str) and value else None


def _memory_role(session: Session, nid: str) -> str:
    node = session.nodes[nid]
    if node.is_root:
        return "root"
    if node.role == "code":
        return "tool"
    if node.role == "llm":
        role = node.metadata.get("role")
        return role if isinstance(role, str) and role else "assistant"
    return node.role or "?"


def _full_text(node: Any) -> str:
    text = message_text(thaw(node.output)) if not isinstance(node.output, str) else node.output
    if text is None:
        text = json.dumps(thaw(node.output), ensure_ascii=False, default=str, indent=1)
    return sanitize(text)


def citation_index(records: Iterable[Any]) -> dict[str, tuple[CitationVM, ...]]:
    """Source id -> the records citing it, from record view models (``memory_id``,
    ``topic_path``, ``headings``, ``source_links`` with ``label`` and ``source_id``)."""
    out: dict[str, list[CitationVM]] = {}
    for rec in records:
        for link in getattr(rec, "source_links", ()):
            sid = getattr(link, "source_id", None)
            if not sid:
                continue
            cite = CitationVM(rec.memory_id, rec.topic_path, tuple(rec.headings), sanitize(link.label or ""), sid)
            bucket = out.setdefault(sid, [])
            if all(c.memory_id != cite.memory_id for c in bucket):
                bucket.append(cite)
    return {k: tuple(v) for k, v in out.items()}


def citations_from_records(records: Iterable[Any], frame: Callable[[str], Any] | None = None) -> Citations:
    """The engine's citation index (``sessions.kept``) from record view models; ``frame``
    (the workspace model's) finds a turn's archive frame (a ``FrameVM`` with path and line)."""
    refs = []
    seen: set[str] = set()
    for rec in records:
        if rec.memory_id in seen:
            continue  # aliases map to the same record
        seen.add(rec.memory_id)
        for link in getattr(rec, "source_links", ()):
            if getattr(link, "source_id", None):
                refs.append((link.source_id, rec.memory_id, rec.topic_path, getattr(rec, "line", 0)))

    def where(source_id: str) -> tuple[str, int] | None:
        hit = frame(source_id) if frame is not None else None
        path, line = getattr(hit, "path", None), getattr(hit, "line", None)
        return (path, line) if isinstance(path, str) and isinstance(line, int) else None

    return Citations(refs, where if frame is not None else None)


def citations_from_vms(index: Mapping[str, tuple[CitationVM, ...]]) -> Citations:
    return Citations((c.source_id, c.memory_id, c.topic_path, 0) for cs in index.values() for c in cs)


# --------------------------------------------------------------------------- the model


# The explanation (every tip's reasons, the node detail's and verdict panel's source) is built
# before the first paint when the tips' walks total fewer entries than this (a few tens of ms);
# above it the list and the graph paint from the one-pass overviews and the explanation follows
# in a worker (the Sessions screen shows "analysing…" until it is in).
INLINE_WALKS = 60_000


class SessionsModel:
    """Every session's overview (list rows, graph states) plus, computed once on first use,
    its full explanation (reasons, verdicts), and the lookups the Sessions view needs."""

    def __init__(
        self,
        explanation: Explanation | None = None,
        *,
        citations: Mapping[str, tuple[CitationVM, ...]] | None = None,
        snapshot: SessionSnapshot | None = None,
        context: WriterContext | None = None,
        counter: TokenCounter | CachedCounter | None = None,
        overviews: Mapping[str, SessionOverview | None] | None = None,
        kept_index: Citations | None = None,
    ) -> None:
        if explanation is None and (snapshot is None or context is None):
            raise ValueError("SessionsModel needs an explanation, or a snapshot and a writer context")
        self._explanation = explanation
        self._lock = threading.Lock()
        self.snapshot = snapshot
        self.context: WriterContext = context if context is not None else explanation.context  # type: ignore[union-attr]
        self._counter = counter
        self.overviews: dict[str, SessionOverview | None] = dict(overviews or {})
        self.citations = dict(citations or {})
        self.kept_index: Citations = (kept_index if kept_index is not None
                                      else citations_from_vms(self.citations) if citations is not None else Citations.empty())
        self._decorations: dict[str, Decorations] = {}
        self._drift: dict[str, SessionDrift] = {}
        self._links: SpawnLinks | None = None

    @classmethod
    def load(
        cls,
        state_dir: str | Path,
        *,
        now: float | None = None,
        counter: TokenCounter | None = None,
        records: Iterable[Any] | None = None,
        snapshot: SessionSnapshot | None = None,
        frame: Callable[[str], Any] | None = None,
    ) -> "SessionsModel":
        state = Path(state_dir)
        snap = snapshot if snapshot is not None else load_sessions(state)
        ctx = load_context(state, now=time.time() if now is None else now)
        cc = cached_counter(counter)
        overviews = {sid: cached_overview(s, ctx.workspace_id, cc) for sid, s in snap.sessions.items()}
        # without the records (``None``) what memory kept is unknown, and no turn is called dropped
        known = records is not None
        records = tuple(records or ())
        cites = citation_index(records)
        model = cls(snapshot=snap, context=ctx, counter=cc, overviews=overviews, citations=cites,
                    kept_index=citations_from_records(records, frame) if known else Citations.empty())
        if any(o is None for o in overviews.values()) or sum(o.walk_total for o in overviews.values() if o) < INLINE_WALKS:
            model.explain_now()
        return model

    # ---- the explanation
    @property
    def explained(self) -> bool:
        return self._explanation is not None

    def explain_now(self) -> Explanation:
        """The explanation, computed on the first call (any thread; later calls wait for it).
        Lazy: the view shows one tip's verdict at a time; the graph needs only each node's best one."""
        hit = self._explanation
        if hit is not None:
            return hit
        with self._lock:
            if self._explanation is None:
                self._explanation = explain(self.snapshot, self.context, self._counter, lazy=True)  # type: ignore[arg-type]
            return self._explanation

    @property
    def explanation(self) -> Explanation:
        return self.explain_now()

    # ---- lookups
    def _sessions(self) -> Mapping[str, Session]:
        if self.snapshot is not None:
            return self.snapshot.sessions
        return {sid: se.session for sid, se in self.explain_now().sessions.items()}

    @property
    def session_ids(self) -> tuple[str, ...]:
        return tuple(self._sessions())

    @property
    def workspace_id(self) -> str:
        return self.context.workspace_id

    @property
    def threshold(self) -> int:
        return int(self.context.config.trigger_tokens)

    def session(self, sid: str) -> SessionExplanation:
        se = self.explain_now().sessions.get(sid)
        if se is None:
            raise KeyError(f"no such session: {sid}")
        return se

    def session_data(self, sid: str) -> Session:
        """The session as read (no explanation needed)."""
        s = self._sessions().get(sid)
        if s is None:
            raise KeyError(f"no such session: {sid}")
        return s

    def row(self, sid: str) -> SessionRowVM:
        ov = self.overviews.get(sid)
        if ov is not None:
            session = ov.session
            figures = (ov.live_tips, len(ov.tips), ov.pending_turns, ov.pending_tokens, ov.foreign, ov.stranded,
                       ov.runtime_only_tips)
        else:
            se = self.session(sid)
            session = se.session
            figures = se.row_figures()
        live, tips, pending_turns, tokens, foreign_n, stranded_n, runtime_only = figures
        counts = kept_counts(self.decorations(sid).kept)
        drift = self.drift(sid)
        ends = self.context.session_end or {}
        handled = ends.get(sid) if isinstance(ends, Mapping) else None
        handled = float(handled) if isinstance(handled, (int, float)) and not isinstance(handled, bool) else None
        return SessionRowVM(
            session_id=sanitize(sid),
            title=sanitize(session.title),
            updated_at=session.updated_at,
            updated=_utc(session.updated_at),
            head=sanitize(session.head_id) if session.head_id else None,
            live_tips=live,
            tips=tips,
            pending_turns=pending_turns,
            pending_tokens=tokens,
            threshold=self.threshold,
            watcher_at=handled,
            watcher=_utc(handled) if handled is not None else "never",
            foreign=foreign_n,
            stranded=stranded_n,
            in_registry=session.in_registry,
            runtime_only_tips=tuple(sanitize(t) for t in runtime_only),
            kept=counts["kept"],
            dropped=counts["dropped"],
            unmarked_kept=counts["unmarked_kept"],
            drift=drift.count if drift is not None else None,
            unreadable=len(session.unreadable),
        )

    def rows(self) -> tuple[SessionRowVM, ...]:
        return tuple(self.row(sid) for sid in self._sessions())

    # ---- beyond the marks: kept, drift, links, summaries (issue: "beyond the mark")
    @property
    def spawn_links(self) -> SpawnLinks:
        if self._links is None:
            self._links = SpawnLinks(self._sessions())
        return self._links

    def kept(self, sid: str) -> dict[str, str]:
        return dict(self.decorations(sid).kept)

    def decorations(self, sid: str) -> Decorations:
        """What the graph draws beyond the session's files, once per session per load."""
        hit = self._decorations.get(sid)
        if hit is None:
            hit = self._decorations[sid] = session_decorations(self.session_data(sid), self.kept_index, self.workspace_id,
                                                               self.spawn_links)
        return hit

    def drift(self, sid: str) -> SessionDrift | None:
        """The session's drift, once it is explained (``None`` before: a big session's
        analysis runs in the background)."""
        hit = self._drift.get(sid)
        if hit is None:
            if not self.explained:
                return None
            hit = self._drift[sid] = session_drift(self.session(sid).analysis, self.kept_index)
        return hit

    def layout(self, sid: str, options: LayoutOptions | None = None) -> Layout:
        ov = self.overviews.get(sid)
        deco = self.decorations(sid)
        if ov is not None:
            laid = layout_overview(ov, options, layout_table.layout, deco)
            assert laid is not None  # None only from a compute that looks up without laying out
            return laid
        return layout_session(self.session(sid), options, layout_table.layout, deco)

    def layout_ready(self, sid: str) -> Layout | None:
        """The open's layout when it is had without laying a big session out (a small session,
        this process's memo, the layout table), else ``None``: :meth:`layout` then computes it
        (the Sessions screen does, in a worker)."""
        ov = self.overviews.get(sid)
        if ov is None or len(ov.session.nodes) < layout_table.MIN_NODES:
            return self.layout(sid)
        return layout_overview(ov, None, layout_table.lookup, self.decorations(sid))

    def locate(self, source_id: str) -> tuple[str, str] | None:
        """A citation's source id -> (session, node) when that node exists here."""
        provider, _, rest = source_id.partition("/")
        sid, _, nid = rest.partition("/")
        if provider != PROVIDER or not sid or not nid:
            return None
        session = self._sessions().get(sid)
        if session is None or nid not in session.nodes:
            return None
        return sid, nid

    def tip_for(self, sid: str, node_id: str) -> str | None:
        """The tip whose verdict explains ``node_id``: the one the engine's best verdict came
        from, else the head if the node is on its branch, else the first tip that holds it."""
        ov = self.overviews.get(sid)
        if ov is not None:
            return ov.tip_of.get(node_id)
        return self.session(sid).tip_for(node_id)

    def node_detail(self, sid: str, node_id: str) -> NodeDetailVM:
        """The node as the detail pane shows it. Before the session is explained (see
        ``explained``) everything but the verdict and its reasons is there (``analysing``)."""
        analysing = not self.explained
        session = self.session_data(sid)
        node = session.nodes.get(node_id)
        if node is None:
            special = self._special_detail(session, node_id)
            if special is None:
                raise KeyError(f"no node {node_id} in session {sid}")
            return special
        verdict = None if analysing else self.session(sid).nodes.get(node_id)
        state = self.layout(sid).nodes[node_id].state
        mark = node.metadata.get(MARK_KEY)
        mark_by = None
        if isinstance(mark, str) and mark:
            mark_by = "this workspace" if mark == self.workspace_id else "another workspace"
        covers = node.covers_ids or ()
        kept_state = self.decorations(sid).kept.get(node_id)
        kept_reason = None
        if kept_state is not None:
            kv = kept_verdict(session, node_id, kept_state, self.kept_index)
            kept_reason = ReasonVM(sanitize(kept_state), sanitize(kv.message),
                                   tuple(EvidenceVM(sanitize(f), sanitize(k), _value(v)) for f, k, v in kv.evidence))
        summary = None
        if covers:
            facts = next((f for f in summary_facts(session, self.kept_index, self.workspace_id) if f.node_id == node_id), None)
            if facts is not None:
                summary = reason_vm(summary_reason(facts, session))
        caller = node.caller if node.is_spawn_root and not node.predecessor and node.caller not in ("", "ROOT") else None
        return NodeDetailVM(
            session_id=sid,
            node_id=node_id,
            role=_memory_role(session, node_id),
            stored_role=sanitize(node.role),
            time=_utc(node.created_at),
            text=_full_text(node),
            first_line=first_line(node.output) if node.role != "code" else f"tool {sanitize(node.name)}",
            file=node.file,
            state=state,
            verdict=verdict.verdict if verdict is not None else None,
            tip=verdict.tip if verdict is not None else None,
            reasons=tuple(reason_vm(r) for r in (verdict.reasons if verdict is not None else ())),
            forked_from=_str_or_none(node.metadata.get("forked_from")),
            edit_of=_str_or_none(node.metadata.get("edit_of")),
            rewound=node.rewound,
            spawn_branch_root=bool(node.metadata.get("spawn_branch_root")),
            spawn_caller=sanitize(caller) if caller else None,
            covers_ids=tuple(sanitize(c) for c in covers if isinstance(c, str)),
            display=_str_or_none(node.display),
            source=_str_or_none(node.source),
            mark=sanitize(mark) if isinstance(mark, str) else None,
            mark_by=mark_by,
            citations=self.citations.get(f"{PROVIDER}/{sid}/{node_id}", ()),
            analysing=analysing,
            kept=kept_state,
            kept_reason=kept_reason,
            summary=summary,
        )

    def is_special_node(self, sid: str, node_id: str) -> bool:
        """A graph node that is no readable node: an unreadable file, or another session's node."""
        return self._special_detail(self.session_data(sid), node_id) is not None

    def cross_target(self, sid: str, node_id: str) -> tuple[str, str] | None:
        """Where `g` goes from ``node_id``: the other half of a cross-session spawn."""
        links = self.spawn_links
        for local, osid, onode in (*links.links_in(sid), *links.links_out(sid)):
            if node_id in (local, f"@{osid}/{onode}"):
                return osid, onode
        return None

    def _special_detail(self, session: Session, node_id: str) -> NodeDetailVM | None:
        """The detail of a graph node that is no readable node of this session: an unreadable
        node file (its error) or a node of another session (the link `g` crosses)."""
        for u in session.unreadable:
            if unreadable_id(u) == node_id:
                where = u.file + (f":{u.line}" if u.line else "") + (f":{u.column}" if u.column else "")
                error = sanitize(f"{where}: {u.code}: {u.message}")
                reason = ReasonVM("unreadable_node_file", sanitize(
                    "the node file does not parse: OpenProgram cannot read this turn either; its children keep "
                    "their place and its predecessor is no tip"),
                    (EvidenceVM(sanitize(u.file), "", _value(u.message)),))
                return NodeDetailVM(
                    session_id=session.id, node_id=node_id, role="unreadable", stored_role="?", time="",
                    text="", first_line=sanitize(u.file.rsplit("/", 1)[-1]), file=u.file, state=UNREADABLE_S,
                    verdict=None, tip=None, reasons=(reason,), error=error)
        if node_id.startswith("@"):
            for local, osid, onode in (*self.spawn_links.links_in(session.id), *self.spawn_links.links_out(session.id)):
                if node_id == f"@{osid}/{onode}":
                    reasons = tuple(reason_vm(r) for r in self.spawn_links.reasons(session.id)
                                    if onode in r.message and osid in r.message)
                    other = self._sessions().get(osid)
                    title = sanitize(other.title) if other is not None else ""
                    return NodeDetailVM(
                        session_id=session.id, node_id=node_id, role="link", stored_role="link", time="",
                        text=sanitize(f"session {osid} ({title}), node {onode}: press g to open it there"),
                        first_line=sanitize(f"session {osid}, node {onode}"), file=other.meta_file if other else "",
                        state="link", verdict=None, tip=None, reasons=reasons, link=(osid, onode))
        return None

    def branch_verdict(self, sid: str, tip: str, *, plan: DryRunVM | None = None, planning: bool = False) -> BranchVerdictVM:
        se = self.session(sid)
        te = se.tips.get(tip)
        if te is None:
            raise KeyError(f"{tip} is not a tip of {sid}")
        ta = te.analysis
        nw = next_write(se.analysis, ta, self.context) if ta.pending else None
        pending = tuple(r.id for r in ta.pending)
        held = held_ids(te)
        records = len(ta.recordset.records)
        written = len(ta.marked_record_ids)
        unwritten = records - written
        if records == 0:
            verdict = NOTHING_V
        elif unwritten == 0:
            verdict = WRITTEN_V
        elif written == 0:
            verdict = UNWRITTEN_V
        else:
            verdict = PARTLY_V
        return BranchVerdictVM(
            session_id=sid,
            tip=tip,
            is_head=ta.is_head,
            listed=ta.listed,
            archived=ta.archived,
            verdict=verdict,
            records=records,
            written=written,
            pending_ids=pending,
            held_ids=held,
            stranded_ids=tuple(r.id for r in ta.stranded),
            foreign_ids=tuple(r.id for r in ta.foreign),
            pending_tokens=ta.pending_tokens,
            threshold=self.threshold,
            reasons=tuple(reason_vm(r) for r in te.reasons),
            plan=plan,
            planning=planning and plan is None,
            summary=tip_summary(te, self.threshold),
            next_write=sanitize(nw.text) if nw is not None else "",
            next_at=nw.at if nw is not None else None,
            next_evidence=tuple(EvidenceVM(sanitize(f), sanitize(k), _value(v)) for f, k, v in nw.evidence) if nw else (),
        )


def dry_run(
    state_dir: str | Path,
    sid: str,
    tip: str,
    *,
    clock: Callable[[], float] = time.time,
    counter: TokenCounter | None = None,
    sessions_read: Any = None,
) -> DryRunVM:
    """What writing this one branch now would do: the same ``pipeline.preview`` job preview the
    confirm dialog shows (the forced dry run of ``write SESSION --branch TIP``), so the panel and
    the dialog cannot disagree. Reads only: the dry run plans batches and never calls the writer.
    ``sessions_read``: the snapshot the caller holds (its unchanged node files are not read again)."""
    from memory_tui.pipeline.preview import preview_write
    from memory_tui.pipeline.context import Context

    kwargs: dict[str, Any] = {"clock": clock, "sessions_read": sessions_read}
    if counter is not None:
        kwargs["counter"] = counter
    preview = preview_write(Context(Path(state_dir), **kwargs), sid, branch=tip, force=True)
    raw = preview.raw or {}
    return DryRunVM(
        session_id=sid,
        tip=tip,
        batches=tuple(PlannedBatchVM(b.tip or tip, tuple(b.ids), b.tokens) for b in preview.batches if b.result == "planned"),
        outcome=str(raw.get("outcome", "none")),
        reason_code=raw.get("reason_code"),
        message=sanitize(str(raw.get("message") or "")),
        warnings=tuple(sanitize(n) for n in preview.notes),
        files=tuple(sanitize(f) for f in preview.files),
        preview=preview,
    )


__all__ = [
    "BranchVerdictVM", "CitationVM", "DryRunVM", "EvidenceVM", "NodeDetailVM", "PlannedBatchVM", "ReasonVM",
    "SessionRowVM", "SessionsModel", "citation_index", "dry_run", "reason_vm",
]
