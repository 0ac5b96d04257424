"""What memory *kept* of a session, beside what its marks say was *written*.

A mark (``metadata.memory_written_scriptorium``) means "handed to a writer run that changed
memory", not "cited": a writer that folds a five-turn batch into one paragraph citing one turn
marks all five. Whether a record holds a turn is a different fact, read from the topics: a
record cites ``openprogram/<session>/<node>`` and the archive holds that frame. So for every
turn this module tells apart

* ``kept`` — marked by this workspace and cited (the citing records are named);
* ``dropped`` — marked by this workspace, cited by no record ("written, nothing kept": the
  writer dropped it, or a later edit removed the record);
* ``unmarked_kept`` — cited by a record but carrying no mark of this workspace (backfill, a
  removed mark, another machine's mark).

and, per session, the *drift* between two pending sets over the turns a live tip reaches: the
mark-based one (OpenProgram's ``pending_ids``) and the citation-based one (records whose
content no record cites). Both are computed from the snapshot each time they are asked for;
nothing here is kept between calls (the inputs' own caches make it cheap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping


from .records import MARK_KEY, SessionAnalysis
from .store import Session, thaw

KEPT, DROPPED, UNMARKED_KEPT = "kept", "dropped", "unmarked_kept"
KEPT_STATES = (KEPT, DROPPED, UNMARKED_KEPT)
PROVIDER = "openprogram"

# drift kinds: the marks and the citations disagree about a turn a live tip reaches
MARKED_NOT_CITED = "marks_done_not_cited"  # not pending by the marks, but no record cites it
CITED_BUT_PENDING = "cited_but_pending"  # pending by the marks, but a record already cites it


@dataclass(frozen=True, slots=True)
class CitingRecord:
    """One record citing one turn's source id."""

    memory_id: str
    topic_path: str  # workspace-relative ("topics/people/ada.md")
    line: int
    source_id: str

    def to_json(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "topic_path": self.topic_path, "line": self.line, "source_id": self.source_id}


FrameLookup = Callable[[str], "tuple[str, int] | None"]  # source id -> (archive path, line) or None


class Citations:
    """Which records cite which session turn, and where each turn's archive frame is.

    Built from the records' source refs (the topic tree, or the app's record view models);
    only ``openprogram/<session>/<node>`` refs name a turn. ``frame`` finds a turn's archive
    frame when a verdict is worded (never for every turn at once)."""

    def __init__(self, refs: Iterable[tuple[str, str, str, int]], frame: FrameLookup | None = None,
                 memory_rel: str = "memory", *, known: bool = True, sessions: Iterable[str] | None = None) -> None:
        # ``known``: the records were read. Unknown citations (the topics could not be read,
        # or the caller has none to give) claim nothing: no turn is called dropped or kept.
        self.known = known
        # ``sessions``: the only sessions these citations were read for (the per-session
        # index); asking about another is a bug, not "cited by nothing"
        self.sessions: frozenset[str] | None = None if sessions is None else frozenset(sessions)
        # whether this process parsed the topics to make them (the readers' copy is then worth keeping)
        self.parsed = False
        # Grouped as plain tuples, first citation per record kept; the CitingRecord objects
        # are made only for the turns a verdict names (a workspace has ~10^4 citations, a
        # verdict reads a handful).
        by_node: dict[tuple[str, str], dict[str, tuple[str, int, str]]] = {}
        prefix = PROVIDER + "/"
        for source_id, memory_id, topic_path, line in refs:
            if type(source_id) is not str or not source_id.startswith(prefix):
                continue
            parts = source_id.split("/", 2)
            if len(parts) != 3 or not parts[1] or not parts[2]:
                continue
            key = (parts[1], parts[2])
            bucket = by_node.get(key)
            if bucket is None:
                bucket = by_node[key] = {}
            if memory_id not in bucket:
                bucket[memory_id] = (topic_path, line, source_id)
        self._grouped: dict[tuple[str, str], dict[str, tuple[str, int, str]]] | None = by_node
        self._entries: Mapping[str, tuple[tuple, tuple]] | None = None  # ``from_entries``: grouped on first use
        self._by_session: dict[str, set[str]] | frozenset | None = None  # ``cited_nodes``, made on first use
        self._by_node: dict[tuple[str, str], tuple[CitingRecord, ...]] = {}
        self._frame = frame
        self.memory_rel = memory_rel

    @classmethod
    def from_view(cls, view: Any, memory_rel: str = "memory") -> "Citations":
        """From a :class:`~memory_tui.core.store.workspace.StateView` (its topic tree and archives)."""
        tree = getattr(view, "tree", None)
        sources = getattr(view, "sources", None)
        refs = ((ref, u.memory_id, u.path, u.line) for u in (tree.units if tree is not None else ()) for ref in u.source_refs)

        def frame(source_id: str) -> tuple[str, int] | None:
            fr = sources.frame(source_id) if sources is not None else None
            return None if fr is None else (fr.path, fr.line)

        return cls(refs, frame, memory_rel)

    @classmethod
    def from_entries(cls, entries: Mapping[str, tuple[tuple, tuple]], memory_rel: str = "memory", *,
                     scoped: bool = True) -> "Citations":
        """From the per-session index's entries (``citeindex.Entry`` by session id): citations
        that know exactly those sessions (every session when not ``scoped``)."""
        frames = {src: (path, line) for _groups, fr in entries.values() for src, path, line in fr}
        out = cls((), frames.get, memory_rel, sessions=entries.keys() if scoped else None)
        # The entries hold ``_raw``'s grouping already (``citeindex.entries_of``): taken as it
        # is, when first asked for, not flattened into refs and grouped again. ``status`` asks
        # only which nodes are cited, which the entries answer without it.
        out._grouped, out._entries = None, entries
        return out

    @property
    def _raw(self) -> dict[tuple[str, str], dict[str, tuple[str, int, str]]]:
        """(session, node) -> {citing memory id: (topic path, line, source id)}, first citation
        of each record, in the records' order."""
        grouped = self._grouped
        if grouped is None:
            grouped = self._grouped = {
                (sid, nid): {mid: (path, line, src) for mid, path, line, src in cites}
                for sid, (groups, _frames) in (self._entries or {}).items() for nid, cites in groups}
        return grouped

    def session_answers(self, session_id: str, node_ids: Iterable[str]) -> tuple:
        """Everything these citations say about ``session_id``'s turns ``node_ids`` (and every
        cited one): what ``MEMORY_TUI_TEST_DERIVE=check`` compares between two derivations."""
        nids = set(node_ids)
        nids.update(nid for sid, nid in self._raw if sid == session_id)
        return (self.known, tuple((nid, self.of(session_id, nid), self.frame(session_id, nid)) for nid in sorted(nids)))

    def _scope(self, session_id: str) -> None:
        if self.sessions is not None and session_id not in self.sessions:
            raise KeyError(f"the citations of session {session_id!r} were not read (read: {sorted(self.sessions)})")

    @classmethod
    def empty(cls) -> "Citations":
        """Citations not known (no topics read): every kept verdict is withheld."""
        return cls((), known=False)

    def of(self, session_id: str, node_id: str) -> tuple[CitingRecord, ...]:
        key = (session_id, node_id)
        hit = self._by_node.get(key)
        if hit is None:
            if self.sessions is not None:
                self._scope(session_id)
            raw = self._raw.get(key)
            if raw is None:
                return ()
            hit = self._by_node[key] = tuple(CitingRecord(mid, path, int(line or 0), src)
                                             for mid, (path, line, src) in raw.items())
        return hit

    def cited(self, session_id: str, node_id: str) -> bool:
        if self.sessions is not None:
            self._scope(session_id)
        return (session_id, node_id) in self._raw

    def cited_nodes(self, session_id: str) -> frozenset[str] | set[str]:
        """The node ids of ``session_id`` that some record cites (``cited`` of each, at once)."""
        if self.sessions is not None:
            self._scope(session_id)
        by = self._by_session
        if by is None:
            if self._grouped is None and self._entries is not None:
                by = {sid: {nid for nid, _cites in groups} for sid, (groups, _frames) in self._entries.items()}
            else:
                by = {}
                for sid, nid in self._raw:
                    bucket = by.get(sid)
                    if bucket is None:
                        bucket = by[sid] = set()
                    bucket.add(nid)
            self._by_session = by
        return by.get(session_id, frozenset())

    def frame(self, session_id: str, node_id: str) -> tuple[str, int] | None:
        if self.sessions is not None:
            self._scope(session_id)
        if self._frame is None:
            return None
        for c in self.of(session_id, node_id):
            hit = self._frame(c.source_id)
            if hit is not None:
                return hit
        return self._frame(f"{PROVIDER}/{session_id}/{node_id}")


def kept_states(session: Session, citations: Citations, workspace_id: str) -> dict[str, str]:
    """Node id -> ``kept`` / ``dropped`` / ``unmarked_kept`` for every turn that is marked by
    this workspace or cited (other nodes are absent)."""
    out: dict[str, str] = {}
    if not citations.known:
        return out
    sid = session.id
    for nid, node in session.nodes.items():
        if node.is_root:
            continue
        mine = bool(workspace_id) and node.metadata.get(MARK_KEY) == workspace_id
        cited = citations.cited(sid, nid)
        if mine:
            out[nid] = KEPT if cited else DROPPED
        elif cited:
            out[nid] = UNMARKED_KEPT
    return out


@dataclass(frozen=True)
class KeptVerdict:
    """One turn's kept state with what proves it (``evidence``: (file, field, value))."""

    node_id: str
    state: str
    records: tuple[CitingRecord, ...]
    mark: Any
    archive: tuple[str, int] | None  # the archive frame of the turn, when it is archived
    message: str
    evidence: tuple[tuple[str, str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.node_id,
            "state": self.state,
            "records": [r.to_json() for r in self.records],
            "mark": self.mark,
            "archive": None if self.archive is None else {"path": self.archive[0], "line": self.archive[1]},
            "message": self.message,
            "evidence": [{"file": f, "field": k, "value": v} for f, k, v in self.evidence],
        }


def kept_verdict(session: Session, node_id: str, state: str, citations: Citations) -> KeptVerdict:
    """The verdict of one node of :func:`kept_states`, worded with its evidence."""
    node = session.nodes[node_id]
    mark = node.metadata.get(MARK_KEY)
    records = citations.of(session.id, node_id)
    archive = citations.frame(session.id, node_id)
    mem = citations.memory_rel
    ev: list[tuple[str, str, Any]] = [(node.file, f"metadata.{MARK_KEY}", mark)]
    source_id = records[0].source_id if records else f"{PROVIDER}/{session.id}/{node_id}"
    if archive is not None:
        ev.append((f"{mem}/{archive[0]}", f"line {archive[1]}", source_id))
    for r in records:
        ev.append((f"{mem}/{r.topic_path}", f"line {r.line} ^{r.memory_id}", r.source_id))
    names = ", ".join(f"^{r.memory_id} ({r.topic_path}:{r.line})" for r in records[:3])
    if len(records) > 3:
        names += f" and {len(records) - 3} more"
    if state == KEPT:
        message = f"written and kept: cited by {names}"
    elif state == DROPPED:
        where = f"archived at {archive[0]}:{archive[1]}" if archive is not None else "not archived"
        message = f"written, nothing kept: marked by this workspace, {where}, but no record cites it"
        ev.append((f"{mem}/topics", "records citing", source_id))
    else:
        why = "no mark" if mark is None else f"marked by {mark}, not this workspace"
        message = f"kept without a mark: cited by {names}, but the turn has {why}"
    return KeptVerdict(node_id, state, records, mark, archive, message, tuple(ev))


def kept_counts(states: Mapping[str, str]) -> dict[str, int]:
    out = {k: 0 for k in KEPT_STATES}
    for s in states.values():
        out[s] += 1
    return out


@dataclass(frozen=True)
class DriftItem:
    node_id: str
    kind: str  # MARKED_NOT_CITED | CITED_BUT_PENDING
    tips: tuple[str, ...]  # the live tips whose walk reaches it
    file: str
    mark: Any
    records: tuple[CitingRecord, ...]

    def to_json(self) -> dict[str, Any]:
        return {"id": self.node_id, "kind": self.kind, "tips": list(self.tips), "file": self.file, "mark": self.mark,
                "records": [r.to_json() for r in self.records]}


@dataclass(frozen=True)
class SessionDrift:
    """The two pending sets of one session over the turns its live tips reach."""

    session_id: str
    mark_pending: tuple[str, ...]  # OpenProgram's pending set (union of the live tips' pending_ids)
    cite_pending: tuple[str, ...]  # records on a live walk that no record cites
    items: tuple[DriftItem, ...]  # where they disagree, in seq order

    @property
    def count(self) -> int:
        return len(self.items)

    def of_kind(self, kind: str) -> tuple[DriftItem, ...]:
        return tuple(i for i in self.items if i.kind == kind)

    def to_json(self) -> dict[str, Any]:
        return {
            "mark_pending_ids": list(self.mark_pending),
            "cite_pending_ids": list(self.cite_pending),
            "marks_done_not_cited": [i.to_json() for i in self.of_kind(MARKED_NOT_CITED)],
            "cited_but_pending": [i.to_json() for i in self.of_kind(CITED_BUT_PENDING)],
        }


# One turn a live tip reaches, as the drift needs it: (node id, the live tips reaching it, its
# node file, its mark's value as plain JSON, pending by the marks). A function of the session's
# files alone, so the session summary index can hold it beside the pending count; the drift
# itself (which also depends on the records) is always worked out afresh.
LiveTurn = tuple[str, tuple[str, ...], str, Any, bool]


def live_turns(sa: SessionAnalysis) -> tuple[LiveTurn, ...]:
    """The turns reachable from a live tip (a tip of a branch that is not archived, or the
    head), in seq order, each with what :func:`drift_of` needs."""
    session = sa.session
    reach: dict[str, list[str]] = {}  # record id -> live tips reaching it
    pending: set[str] = set()
    for tip, ta in sa.tips.items():
        if ta.archived and not ta.is_head:
            continue
        for rec in ta.recordset.records:
            reach.setdefault(rec.id, []).append(tip)
        pending.update(r.id for r in ta.pending)
    order = {nid: i for i, nid in enumerate(session.order)}
    out: list[LiveTurn] = []
    for nid in sorted(reach, key=lambda n: order.get(n, len(order))):
        node = session.nodes.get(nid)
        out.append((nid, tuple(reach[nid]), node.file if node else "",
                    thaw(node.metadata.get(MARK_KEY)) if node else None, nid in pending))
    return tuple(out)


def session_drift(sa: SessionAnalysis, citations: Citations) -> SessionDrift:
    """Mark-based versus citation-based pending set over the turns reachable from a live tip
    (a tip of a branch that is not archived, or the head)."""
    return drift_of(sa.session.id, live_turns(sa), citations)


def drift_of(sid: str, live: Iterable[LiveTurn], citations: Citations) -> SessionDrift:
    """The drift of session ``sid`` from its :func:`live_turns` and the records' citations."""
    live = tuple(live)
    mark_pending = tuple(t[0] for t in live if t[4])
    if not citations.known:  # without the records nothing can be said to disagree
        return SessionDrift(sid, mark_pending, (), ())
    cite_pending: list[str] = []
    items: list[DriftItem] = []
    for nid, tips, file, mark, pending in live:
        cited = citations.cited(sid, nid)
        if not cited:
            cite_pending.append(nid)
        if pending == cited:  # pending and cited, or done by the marks and cited by nothing
            items.append(DriftItem(nid, CITED_BUT_PENDING if pending else MARKED_NOT_CITED, tips, file, mark,
                                   citations.of(sid, nid)))
    return SessionDrift(sid, mark_pending, tuple(cite_pending), tuple(items))


def citations_for_state(state_dir: Any, view: Any = None, *, sessions: Iterable[str] | None = None,
                        switches: Any = None) -> tuple[Citations, str | None]:
    """The citations of the workspace under ``state_dir`` and, when its topics could not be
    read, why (then every turn reads as cited by nothing, and callers say so). ``view``: a
    snapshot of this state the caller has just read (``open_state``): its strict topic tree
    and archives are the very parse this would make, so they are used instead of a second.

    Without a view they come from the per-session citations index (``citeindex``) when it
    was made from the topic and archive files as they are now, so no topic is parsed;
    ``sessions``: the only sessions the caller asks about (only their entries are decoded,
    and the citations refuse a question about any other). Otherwise the topics are parsed
    (``parsecache.load_tree``) and the index made again. ``switches`` (default: the
    process's): ``full`` parses and keeps nothing, ``check`` does both and compares."""
    from pathlib import Path

    from memory_tui.core import switches as switches_mod

    state = Path(state_dir)
    if not (state / "memory").is_dir():
        return Citations.empty(), "no memory workspace (memory/ is missing)"
    if view is not None and not getattr(view, "memory_missing", True) and view.tree is not None \
            and view.sources is not None:
        return Citations.from_view(view), None
    sw = switches if switches is not None else switches_mod.current()
    root = state / "memory"
    if sw.full:
        citations, reason, _entries, _keep = _parse_citations(root)
        return citations, reason
    from . import citeindex

    wanted = None if sessions is None else tuple(dict.fromkeys(sessions))
    stamps = citeindex.stamps_now(root)  # before anything is read: a later write moves one
    stored = None if stamps is None else citeindex.read(root, *stamps, sessions=wanted)
    indexed = None if stored is None else _from_index(stored, wanted)
    if indexed is not None and not sw.check:
        return indexed
    parsed: list[Any] = []

    def full() -> tuple[Citations, str | None]:
        parsed.append(_parse_citations(root))
        return parsed[0][0], parsed[0][1]

    if indexed is not None:
        def same(a: tuple[Citations, str | None], b: tuple[Citations, str | None]) -> bool:
            return _same_answers(a, b, stored, parsed[0][2], wanted)

        sw.choose("session citations", lambda: indexed, full, same)
    else:
        full()
    citations, reason, entries, keep = parsed[0]
    if keep and stamps is not None:
        citeindex.write(root, *stamps, reason, entries)
    return citations, reason


def _parse_citations(root: Any) -> tuple[Citations, str | None, dict[str, Any], bool]:
    """``(citations, unread reason, the index's entries, whether the answer may be kept)``
    from a parse of the topic tree and the archives (through the parse cache: no derived
    views, only the records' source refs and the frames are needed). A reason that follows
    from the files (a format error) is kept like any answer; one from the system (an
    unreadable file, a failure of this code) is not."""
    from types import SimpleNamespace

    from memory_tui.core.format.errors import MemoryError as FormatError
    from memory_tui.core.store import parsecache

    from .citeindex import entries_of

    try:
        index, tree = parsecache.load_tree(root)
    except FormatError as exc:
        return Citations.empty(), f"the topics could not be read: {exc}", {}, True
    except Exception as exc:  # noqa: BLE001 - the sessions' verdicts stand without the topics
        return Citations.empty(), f"the topics could not be read: {exc}", {}, False
    if tree is None:
        return Citations.empty(), "the topics could not be read", {}, True
    citations = Citations.from_view(SimpleNamespace(tree=tree, sources=index))
    citations.parsed = True
    return citations, None, entries_of(citations._raw, index), True


def _from_index(stored: Any, wanted: tuple[str, ...] | None) -> tuple[Citations, str | None] | None:
    """The citations of ``wanted`` (every session when ``None``) from an index that holds;
    ``None`` when an entry is not one this code wrote (then the topics are parsed)."""
    if stored.reason is not None:
        return Citations.empty(), stored.reason
    entries = {}
    for sid in (stored.sessions() if wanted is None else wanted):
        entry = stored.entry(sid)
        if entry is None:
            return None
        entries[sid] = entry
    return Citations.from_entries(entries, scoped=wanted is not None), None


def _same_answers(a: tuple[Citations, str | None], b: tuple[Citations, str | None], stored: Any,
                  fresh: Mapping[str, Any], wanted: tuple[str, ...] | None) -> bool:
    """``check``: the indexed citations ``a`` answer as the parsed ones ``b`` for every
    session asked about (every one either knows of when ``wanted`` is ``None``): the same
    reason, and per turn the same citing records and archive frame."""
    if a[1] != b[1] or a[0].known != b[0].known:
        return False
    sids = wanted if wanted is not None else sorted({*stored.sessions(), *fresh})
    for sid in sids:
        nids = set()
        for entry in (stored.entry(sid), fresh.get(sid, ((), ()))):
            nids.update(src.split("/", 2)[2] for src, _path, _line in (entry or ((), ()))[1])
        if a[0].session_answers(sid, nids) != b[0].session_answers(sid, nids):
            return False
    return True


def kept_report(session: Session, citations: Citations, workspace_id: str, analysis: SessionAnalysis | None = None
                ) -> dict[str, Any]:
    """The JSON of one session's kept verdicts (and its drift when ``analysis`` is given)."""
    states = kept_states(session, citations, workspace_id)
    out: dict[str, Any] = {
        "counts": kept_counts(states),
        "turns": [kept_verdict(session, nid, st, citations).to_json() for nid, st in states.items()],
    }
    if analysis is not None:
        out["drift"] = session_drift(analysis, citations).to_json()
    return out


__all__ = [
    "CITED_BUT_PENDING", "CitingRecord", "Citations", "DROPPED", "DriftItem", "KEPT", "KEPT_STATES", "KeptVerdict",
    "LiveTurn", "MARKED_NOT_CITED", "SessionDrift", "UNMARKED_KEPT", "citations_for_state", "kept_counts", "kept_report", "kept_states",
    "kept_verdict", "drift_of", "live_turns", "session_drift",
]
