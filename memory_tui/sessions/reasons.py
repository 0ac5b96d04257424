"""Why a turn or branch was (not) written: reasons as data (session spec §5, memory spec §9).

Every :class:`Reason` carries a stable lower_snake ``code``, the on-disk ``evidence`` it was
derived from (state-relative file, field, value) and a human ``message``, so the CLI and the
TUI word it the same way. Reading never writes: the write-lock probe opens an existing lock
file read-only and releases it at once; a missing lock file is simply "not held".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

from memory_tui.core.format.config import IDLE_ALLOWANCE_SECONDS, IDLE_MINUTES, MemoryConfig, load_memory_config
from memory_tui.core.format.errors import Problem
from memory_tui.core.format.paths import Layout, read_workspace_id
from memory_tui.core.format.tokens import TokenCounter
from memory_tui.core.store.lockprobe import flock_held

from .records import (
    MARK_KEY,
    CachedCounter,
    PendingCount,
    SessionAnalysis,
    TipAnalysis,
    analyze_session,
    cached_counter,
    status_pending_count,
)
from .dag import acyclic, walk_chain
from .store import Node, Session, SessionSnapshot, read_json, rel_path

WRITTEN, PENDING, NEVER = "written", "pending", "never"
_RANK = {WRITTEN: 2, PENDING: 1, NEVER: 0}

# Every code this module emits (stable; the UI maps them to glyphs and help text).
CODES = (
    "written",
    "rewound",
    "filtered_role",
    "empty_text",
    "runtime_turn",
    "authority_denied",
    "authority_missing",
    "missing_id",
    "not_on_live_branch",
    "archived_branch",
    "below_threshold_non_head",
    "remainder_below_threshold",
    "below_threshold_per_turn",
    "batch_cap",
    "awaiting_idle_pass",
    "session_not_idle",
    "already_processed",
    "marked_other_workspace",
    "stranded_behind_mark",
    "memory_disabled",
    "writer_disabled",
    "watcher_disabled",
    "watcher_lock_busy",
    "watcher_state_unreadable",
    "compaction_summary",
    "last_writer_failure",
    "lock_busy",
    "special_token_blocks_writer",
    "not_in_registry",
    "runtime_turns_only",
    "broken_chain",
    "no_head",
    "workspace_id_missing",
    "graph_root",
)


@dataclass(frozen=True)
class Evidence:
    file: str  # state-relative posix path
    field: str
    value: Any

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "field": self.field, "value": self.value}


@dataclass(frozen=True)
class Reason:
    code: str
    evidence: tuple[Evidence, ...]
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "evidence": [e.to_json() for e in self.evidence], "message": self.message}


@dataclass(frozen=True)
class TurnVerdict:
    id: str
    role: str  # stored role
    verdict: str  # written | pending | never
    reasons: tuple[Reason, ...]
    tip: str | None = None  # the tip whose view gave this verdict

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "role": self.role, "verdict": self.verdict, "reasons": [r.to_json() for r in self.reasons]}


@dataclass(frozen=True)
class TipExplanation:
    analysis: TipAnalysis
    reasons: tuple[Reason, ...]
    turns: tuple[TurnVerdict, ...]

    def to_json(self) -> dict[str, Any]:
        out = self.analysis.to_json()
        out["reasons"] = [r.to_json() for r in self.reasons]
        out["turns"] = [t.to_json() for t in self.turns]
        return out


class RowFigures(NamedTuple):
    """A session's figures in the Sessions list (``overview.SessionOverview`` is their fast path)."""

    live_tips: int
    tips: int
    pending_turns: int  # distinct unmarked records over the tips ``status`` offers (not archived ones)
    pending_tokens: int  # the largest pending token count among those tips
    foreign: int
    stranded: int
    runtime_only_tips: tuple[str, ...]


@dataclass(frozen=True)
class SessionExplanation:
    analysis: SessionAnalysis
    reasons: tuple[Reason, ...]  # session-level
    tips: Mapping[str, TipExplanation]
    nodes: Mapping[str, TurnVerdict]  # every node but the graph root, best verdict over all tips
    runtime_only_tips: tuple[str, ...] = ()

    @property
    def session(self) -> Session:
        return self.analysis.session

    def row_figures(self) -> RowFigures:
        """The list's figures from the tips' analyses alone (no tip's verdicts are built)."""
        pending: set[str] = set()
        foreign: set[str] = set()
        stranded: set[str] = set()
        tokens = live = 0
        offered = set(self.analysis.forced_order)  # what ``status`` counts: an archived tip's turns are held
        for tip, ta in self.analysis.tips.items():
            foreign.update(r.id for r in ta.foreign)
            stranded.update(r.id for r in ta.stranded)
            live += not ta.archived
            if tip in offered:
                pending.update(r.id for r in ta.recordset.records if r.id not in ta.marked)
                tokens = max(tokens, ta.pending_tokens)
        return RowFigures(live, len(self.tips), len(pending), tokens, len(foreign), len(stranded),
                          tuple(self.runtime_only_tips))

    def tip_for(self, node_id: str) -> str | None:
        """The tip whose verdict explains ``node_id``: the one its best verdict came from, else
        the node itself when it is a tip, else the first tip (the head first) whose chain holds
        it. ``overview.SessionOverview.tip_of`` is the fast path of this (a property test)."""
        verdict = self.nodes.get(node_id)
        if verdict is not None and verdict.tip in self.tips:
            return verdict.tip
        if node_id in self.tips:
            return node_id
        head = self.session.head_id
        order = [head, *self.tips] if head in self.tips else list(self.tips)
        for tip in order:
            if any(n.id == node_id for n in self.analysis.tips[tip].chain):
                return tip
        return None

    def to_json(self) -> dict[str, Any]:
        out = self.analysis.to_json()
        out["reasons"] = [r.to_json() for r in self.reasons]
        out["runtime_only_tips"] = list(self.runtime_only_tips)
        out["tips"] = {t: e.to_json() for t, e in self.tips.items()}
        return out


@dataclass(frozen=True)
class WriterContext:
    """Everything outside the session files that decides whether OpenProgram writes."""

    workspace_id: str
    config: MemoryConfig
    now: float
    memory_rel: str = "memory"
    runtime_rel: str = "memory/.scriptorium"
    writer_status: Mapping[str, Any] | None = None
    session_end: Mapping[str, Any] | None = None
    session_end_problem: Problem | None = None
    lock_busy: bool = False
    watcher_lock_busy: bool = False
    watcher_disabled_env: bool = False
    workspace_id_valid: bool = True
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Explanation:
    context: WriterContext
    reasons: tuple[Reason, ...]  # global
    sessions: Mapping[str, SessionExplanation]
    pending: PendingCount

    def to_json(self) -> dict[str, Any]:
        return {
            "workspace_id": self.context.workspace_id,
            "trigger_tokens": self.context.config.trigger_tokens,
            "status_pending_turns": self.pending.value,
            "reasons": [r.to_json() for r in self.reasons],
            "sessions": {sid: s.to_json() for sid, s in self.sessions.items()},
        }


# --------------------------------------------------------------------------- context


def probe_lock(path: Path) -> bool:
    """True when another process holds an exclusive flock on ``path``. Never creates it; a
    file that cannot be opened reads as not held (the reasons are a view, never an error)."""
    try:
        return flock_held(path)
    except OSError:
        return False


def load_context(
    state_dir: str | os.PathLike[str],
    *,
    now: float,
    config: MemoryConfig | None = None,
    env: Mapping[str, str] | None = None,
    probe: Callable[[Path], bool] = probe_lock,
) -> WriterContext:
    state = Path(state_dir)
    env = os.environ if env is None else env
    layout = Layout(state / "memory")
    runtime_rel = rel_path(layout.runtime_dir, state)
    config = config if config is not None else load_memory_config(state)
    ws_id = read_workspace_id(layout.root, layout)
    ws, ws_ok = ws_id or "", ws_id is not None
    problems: list[Problem] = list(config.problems)
    status, status_problems = read_json(layout.writer_status, f"{runtime_rel}/writer-status.json")
    problems.extend(status_problems)
    if not isinstance(status, dict) or status.get("version") != 1:
        status = None  # a different version reads as all-null
    end, end_problems = read_json(layout.session_end, f"{runtime_rel}/session-end.json")
    end_problem = end_problems[0] if end_problems else None
    if end is not None and not isinstance(end, dict):
        end_problem = Problem("CORRUPT_FILE", "session-end.json is not an object", f"{runtime_rel}/session-end.json", 1, 1)
        end = None
    problems.extend(end_problems)
    watcher_off = (env.get("OPENPROGRAM_NO_SESSION_END") or "").strip().lower() in ("1", "true", "yes")
    return WriterContext(
        workspace_id=ws,
        config=config,
        now=float(now),
        memory_rel=rel_path(layout.root, state),
        runtime_rel=runtime_rel,
        writer_status=status,
        session_end=end if end is not None else ({} if end_problem is None else None),
        session_end_problem=end_problem,
        lock_busy=probe(layout.lock_file),
        watcher_lock_busy=probe(layout.runtime_dir / "session-end.lock"),
        watcher_disabled_env=watcher_off,
        workspace_id_valid=ws_ok,
        problems=tuple(problems),
    )


# --------------------------------------------------------------------------- reasons


def _r(code: str, message: str, *evidence: Evidence) -> Reason:
    return Reason(code, tuple(evidence), message)


def global_reasons(ctx: WriterContext) -> tuple[Reason, ...]:
    cfg = "config.json"
    rt = ctx.runtime_rel
    out: list[Reason] = []
    if not ctx.config.enabled:
        out.append(_r("memory_disabled", "memory is disabled (memory.backend is \"none\"): nothing is written",
                      Evidence(cfg, "memory.backend", ctx.config.backend)))
    if not ctx.config.writer_enabled:
        out.append(_r("writer_disabled", "the memory writer is off (memory.writer.enabled is false)",
                      Evidence(cfg, "memory.writer.enabled", False)))
    if not ctx.workspace_id_valid:
        out.append(_r("workspace_id_missing",
                      "the workspace id is missing or invalid; OpenProgram will mint a new one and every mark will count as foreign",
                      Evidence(f"{rt}/workspace-id", "", None)))
    if ctx.watcher_disabled_env:
        out.append(_r("watcher_disabled", "the idle watcher is disabled by OPENPROGRAM_NO_SESSION_END",
                      Evidence("(environment)", "OPENPROGRAM_NO_SESSION_END", True)))
    if ctx.session_end_problem is not None:
        p = ctx.session_end_problem
        out.append(_r("watcher_state_unreadable",
                      f"session-end.json is unreadable ({p.message}); every idle pass aborts and nothing is processed",
                      Evidence(p.path or f"{rt}/session-end.json", f"line {p.line}" if p.line else "", p.message)))
    if ctx.watcher_lock_busy:
        out.append(_r("watcher_lock_busy", "another idle-watcher pass holds session-end.lock; this pass is skipped",
                      Evidence(f"{rt}/session-end.lock", "flock", "held")))
    if ctx.lock_busy:
        out.append(_r("lock_busy", "the workspace write lock is held right now; a writer would fail with CONCURRENT_UPDATE (retryable)",
                      Evidence(f"{rt}/write.lock", "flock", "held")))
    status = ctx.writer_status or {}
    if status.get("last_outcome") == "failure" and isinstance(status.get("last_failure"), Mapping):
        fail = status["last_failure"]
        code = fail.get("reason_code")
        out.append(_r("last_writer_failure",
                      f"OpenProgram's last write failed with {code} at {fail.get('at')} "
                      f"({'retryable' if fail.get('retryable') else 'not retried'})",
                      Evidence(f"{rt}/writer-status.json", "last_failure.reason_code", code),
                      Evidence(f"{rt}/writer-status.json", "last_failure.retryable", fail.get("retryable"))))
    return tuple(out)


def session_reasons(session: Session, sa: SessionAnalysis, ctx: WriterContext) -> list[Reason]:
    """Why the session as a whole is (not) written: registry, head, preconditions, idle watcher."""
    return [*session_file_reasons(session, sa),
            *session_clock_reasons(session.id, session.rel, session.in_registry, session.updated_at, ctx)]


def _registry_file(session_rel: str) -> str:
    head, _, _ = session_rel.partition("/")
    return f"{head}/index.json" if head in ("sessions", "sessions-git") else "sessions/index.json"


def session_file_reasons(session: Session, sa: SessionAnalysis) -> list[Reason]:
    """The session reasons that follow from its files alone (the registry entry, the head,
    the preconditions, special tokens, a broken chain): no clock, no writer context beyond
    the workspace id and threshold the analysis was made with. The summary index keeps them."""
    out: list[Reason] = []
    state_meta = session.meta_file
    reg = _registry_file(session.rel)
    if not session.in_registry:
        out.append(_r("not_in_registry",
                      f"session {session.id} is not in the registry: OpenProgram's idle watcher never visits it until its next turn",
                      Evidence(reg, session.id, None)))
    if session.head_id is None or session.get(session.head_id) is None:
        out.append(_r("no_head", "the session has no usable head: the head branch is empty, nothing is written from it",
                      Evidence(state_meta, "head_id", session.head_id)))
    for p in sa.precondition_problems:
        reason = (p.details or {}).get("reason", "authority_missing")
        out.append(_r(reason, p.message + " (WRITER_PRECONDITION_FAILED, not retried until the session changes)",
                      Evidence(p.path or "", "metadata.authority_schema" if reason == "authority_missing" else "id",
                               (p.details or {}).get("node_id"))))
    # Special tokens make OpenProgram's counter raise while it counts pending text.
    seen: set[str] = set()
    for tip in sa.forced_order:
        ta = sa.tips.get(tip)
        if ta is None:
            continue
        for rec in ta.pending:
            toks = ta.special_tokens.get(rec.id)
            if toks and rec.id not in seen:
                seen.add(rec.id)
                out.append(_r("special_token_blocks_writer",
                              f"turn {rec.id} contains {', '.join(toks)}; OpenProgram's token counter raises on it and the "
                              "whole session write fails (WRITER_PRECONDITION_FAILED)",
                              Evidence(rec.node.file, "output", list(toks))))
        if ta.broken_at:
            node = session.nodes[ta.broken_at]
            out.append(_r("broken_chain",
                          f"node {node.id} has no predecessor but is not a legal chain start; OpenProgram's branch walk raises",
                          Evidence(node.file, "predecessor", None)))
    return out


def session_clock_reasons(session_id: str, session_rel: str, in_registry: bool, updated: float | None,
                          ctx: WriterContext) -> list[Reason]:
    """The session reasons that depend on the clock and the idle watcher's state: from the
    session's id, folder, registry membership and ``updated_at`` only (what the summary
    index keeps), so an index-backed ``status`` words them as a full load does."""
    out: list[Reason] = []
    state_meta = f"{session_rel}/meta.json"
    reg = _registry_file(session_rel)
    upd_ev = Evidence(reg if in_registry else state_meta, f"{session_id}.updated_at" if in_registry else "updated_at", updated)
    if updated is not None and updated > ctx.now - IDLE_MINUTES * 60:
        out.append(_r("session_not_idle",
                      f"the session was active {max(0, int(ctx.now - updated))} s ago; the idle watcher waits {IDLE_MINUTES} min",
                      upd_ev))
    if ctx.session_end is not None and session_id in ctx.session_end and ctx.session_end.get(session_id) == updated:
        out.append(_r("already_processed",
                      "the idle watcher already handled the session at this exact updated_at; it waits for a new turn",
                      Evidence(f"{ctx.runtime_rel}/session-end.json", session_id, ctx.session_end.get(session_id)), upd_ev))
    return out


_WATCH_BLOCKERS = frozenset({"not_in_registry", "session_not_idle", "already_processed"})


def tip_reasons(sa: SessionAnalysis, ta: TipAnalysis, ctx: WriterContext, session_reasons: list[Reason]) -> list[Reason]:
    """Why one tip's pending turns are (not) written; ``session_reasons`` as :func:`session_reasons` gave them."""
    session = sa.session
    threshold = ctx.config.trigger_tokens
    out: list[Reason] = []
    meta_file = session.meta_file
    if ta.runtime_only:
        out.append(_r("runtime_turns_only", "this tip holds only runtime-scheduled turns (job/merge notifications); nothing here is memory",
                      Evidence(ta.chain[-1].file if ta.chain else meta_file, "metadata.display", "runtime")))
    if ta.stranded:
        newest = next((r for r in reversed(ta.recordset.records) if r.id in ta.marked), None)
        out.append(_r("stranded_behind_mark",
                      f"{len(ta.stranded)} unmarked turn(s) sit before a newer mark; the pending walk stops at the mark and never offers them",
                      *(Evidence(r.node.file, f"metadata.{MARK_KEY}", None) for r in ta.stranded),
                      *((Evidence(newest.node.file, f"metadata.{MARK_KEY}", ctx.workspace_id),) if newest else ())))
    if not ta.pending:
        return out
    if ta.archived and not ta.is_head:
        out.append(_r("archived_branch", "the branch is archived and not the current head: no pass ever writes it",
                      Evidence(meta_file, f"branches.{ta.tip}.archived", True)))
        return out + [r for r in session_reasons if r.code not in _WATCH_BLOCKERS]
    if ta.is_head:
        newest = max((r.timestamp or ctx.now) for r in ta.pending)
        if ta.pending_tokens < threshold and newest > ctx.now - IDLE_ALLOWANCE_SECONDS:
            out.append(_r("below_threshold_per_turn",
                          f"{ta.pending_tokens} pending tokens < {threshold} and the newest turn is under 1 h old: the per-turn "
                          "path waits; the idle pass writes it",
                          Evidence("config.json", "memory.writer.trigger_tokens", threshold),
                          Evidence(ta.pending[-1].node.file, "created_at", ta.pending[-1].timestamp)))
        if len(ta.batch) < len(ta.pending):
            out.append(_r("batch_cap", f"one unforced write takes only the first batch ({len(ta.batch)} of {len(ta.pending)} turns)",
                          Evidence("config.json", "memory.writer.trigger_tokens", threshold)))
    else:
        if ta.pending_tokens < threshold:
            head_ids = set(sa.tips[session.head_id].record_ids) if session.head_id in sa.tips else set()
            own_marked = [i for i in ta.marked_record_ids if i not in head_ids]
            code = "remainder_below_threshold" if own_marked else "below_threshold_non_head"
            what = "the unwritten remainder of this branch" if own_marked else "this non-head branch"
            out.append(_r(code,
                          f"{what} holds {ta.pending_tokens} pending tokens < {threshold}; the idle pass writes other branches only "
                          "from the threshold up",
                          Evidence("config.json", "memory.writer.trigger_tokens", threshold),
                          Evidence(meta_file, "head_id", session.head_id)))
            return out + [r for r in session_reasons if r.code not in _WATCH_BLOCKERS]
    blockers = [r for r in session_reasons if r.code in _WATCH_BLOCKERS]
    if not blockers and not ctx.watcher_disabled_env:
        out.append(_r("awaiting_idle_pass", "the idle watcher will write this at its next poll (every 300 s)",
                      Evidence(meta_file, "updated_at", session.updated_at)))
    return out + session_reasons


def not_record_reason(node: Node, code: str, ta: TipAnalysis) -> Reason:
    """Why a node on a branch is no record (``code``: its exclusion code)."""
    if code == "filtered_role":
        role = node.metadata.get("role") if node.role == "llm" else node.role
        return _r(code, f"a {role or node.role!r} row is never memory (only user and assistant turns are)",
                  Evidence(node.file, "role", node.role))
    if code == "runtime_turn":
        field_, value = ("metadata.display", "runtime") if node.display == "runtime" else ("metadata.source", node.source)
        return _r(code, "a runtime-scheduled turn (job follow-up, merge prompt, attach pointer) is never memory",
                  Evidence(node.file, field_, value))
    if code == "empty_text":
        return _r(code, "the turn has no text (blank, still running, or not text)", Evidence(node.file, "output", _short(node.output)))
    if code == "authority_denied":
        return _r(code, f"the speaker's tier {node.metadata.get('authority_tier')!r} may not append memory sources",
                  Evidence(node.file, "metadata.authority_tier", node.metadata.get("authority_tier")))
    if code == "authority_missing":
        return _r(code, "stamped node (authority_schema) without complete authority: OpenProgram's writer raises on it",
                  Evidence(node.file, "metadata.authority_schema", node.metadata.get("authority_schema")))
    if code == "missing_id":
        return _r(code, "the message has no id: OpenProgram's writer raises on it", Evidence(node.file, "id", None))
    return _r(code, code.replace("_", " "), Evidence(node.file, "", None))


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > 80:
        return value[:77] + "..."
    return value if isinstance(value, (str, int, float, bool, type(None))) else type(value).__name__


_SKIP = object()  # memo value of a node no tip shows a turn for (the graph root)
_PER_TIP = object()  # memo value of an unmarked record: its verdict depends on the tip


class TurnMemo:
    """What :func:`turns_for_tip` shares between the tips of one session.

    ``verdicts``: node id -> the one verdict of a turn that cannot depend on the tip
    (rewound, not a record, written). ``prefix``: node id -> (turns, n) when every node from
    the root to it has such a verdict: the first ``n`` turns of ``turns`` are then the turns
    of every walk through that node, so a later tip copies them in one slice.
    """

    def __init__(self, share_walks: bool = False) -> None:
        # Walks share their root side only without predecessor cycles (dag.acyclic):
        # with one, where a walk stops depends on where it started.
        self.share_walks = share_walks
        self.verdicts: dict[str, object] = {}
        self.prefix: dict[str, tuple[tuple[TurnVerdict, ...], int]] = {}


def turns_for_tip(sa: SessionAnalysis, ta: TipAnalysis, tip_reasons: list[Reason], ctx: WriterContext,
                  memo: TurnMemo | None = None) -> tuple[TurnVerdict, ...]:
    """Per-turn verdicts on one tip. Pass one ``memo`` for all tips of a session: a turn
    whose verdict cannot depend on the tip is decided once per session and reused, and the
    all-shared part of the walk is copied from an earlier tip; only the rest of the walk is
    looked at node by node. Equal to computing every turn of the tip on its own
    (``tests/reference/reasons_plain.py``; the property test compares them)."""
    memo = TurnMemo() if memo is None else memo
    chain = ta.chain
    prefix = memo.prefix
    start, head = 0, ()
    for i in range(len(chain) - 1 if memo.share_walks else -1, -1, -1):
        known = prefix.get(chain[i].id)
        if known is not None:
            walked, count = known
            head, start = walked[:count], i + 1
            break
    pending_ids = {r.id for r in ta.pending}
    stranded_ids = {r.id for r in ta.stranded}
    foreign_ids = {r.id for r in ta.foreign}
    excluded = ta.recordset.excluded
    marked = ta.marked
    never_archived = ta.archived and not ta.is_head
    turns: list[TurnVerdict] = list(head)
    append = turns.append
    verdicts = memo.verdicts
    get = verdicts.get
    others: list[Reason] | None = None
    static_upto = start - 1  # chain index up to which every node has a shared verdict
    counts: list[int] = []  # turns so far after each node of that all-shared run
    for i in range(start, len(chain)):
        node = chain[i]
        nid = node.id
        shared = get(nid)
        if shared is None:
            shared = verdicts[nid] = _shared_verdict(node, ta, ctx, excluded, marked)
        if shared is not None and shared is not _PER_TIP:
            if shared is not _SKIP:
                append(shared)
            if static_upto == i - 1:
                static_upto = i
                counts.append(len(turns))
            continue
        if nid in stranded_ids or nid in pending_ids:
            if others is None:
                others = [r for r in tip_reasons if r.code not in ("stranded_behind_mark", "runtime_turns_only")]
            append(_tip_turn(node, ta, tip_reasons, ctx, stranded_ids, foreign_ids, never_archived, others))
    out = tuple(turns)
    if memo.share_walks:
        for j, n in enumerate(counts):
            prefix[chain[start + j].id] = (out, n)
    return out


def _shared_verdict(node: Node, ta: TipAnalysis, ctx: WriterContext, excluded: Mapping[str, str],
                    marked: Any) -> object:
    """The verdict of a turn that cannot depend on the tip (``_SKIP`` for the graph root),
    or ``_PER_TIP`` for an unmarked record. The first tip to see a node decides it."""
    nid = node.id
    if node.is_root:
        return _SKIP
    if node.rewound:
        return TurnVerdict(nid, node.role, NEVER, (
            _r("rewound", "the turn was rewound; every branch and message view hides it",
               Evidence(node.file, "metadata.rewound", True)),), ta.tip)
    code = excluded.get(nid)
    if code is not None:
        return TurnVerdict(nid, node.role, NEVER, (not_record_reason(node, code, ta),), ta.tip)
    if nid in marked:
        return TurnVerdict(nid, node.role, WRITTEN, (
            _r("written", "handed to a writer run that changed memory (marked with this workspace id)",
               Evidence(node.file, f"metadata.{MARK_KEY}", ctx.workspace_id)),), ta.tip)
    return _PER_TIP


def _tip_turn(node: Node, ta: TipAnalysis, tip_reasons: list[Reason], ctx: WriterContext, stranded_ids: Any,
              foreign_ids: Any, never_archived: bool, others: list[Reason]) -> TurnVerdict:
    """The verdict of an unmarked record that is stranded or pending on this tip (the caller
    checks which): it names the tip and carries the tip's reasons."""
    nid = node.id
    local: list[Reason] = []
    if nid in foreign_ids:
        mark = node.metadata.get(MARK_KEY)
        local.append(_r("marked_other_workspace",
                        f"marked by workspace {mark}, not this one ({ctx.workspace_id}): it counts as unwritten and will be re-written",
                        Evidence(node.file, f"metadata.{MARK_KEY}", mark)))
    if nid in stranded_ids:
        stranded = next(r for r in tip_reasons if r.code == "stranded_behind_mark")
        return TurnVerdict(nid, node.role, NEVER, (
            _r("stranded_behind_mark", "unmarked, but older than a newer mark on this branch: never offered again",
               Evidence(node.file, f"metadata.{MARK_KEY}", node.metadata.get(MARK_KEY)), *stranded.evidence[-1:]),
            *local), ta.tip)
    toks = ta.special_tokens.get(nid)
    if toks:
        local.append(_r("special_token_blocks_writer",
                        f"contains {', '.join(toks)}: OpenProgram's counter raises and the session write fails",
                        Evidence(node.file, "output", list(toks))))
    return TurnVerdict(nid, node.role, NEVER if never_archived else PENDING, tuple(local + others), ta.tip)


def is_compaction_summary(node: Node) -> bool:
    """A compaction summary: never on a branch (the turns it covers are written raw)."""
    return node.covers_ids is not None or node.id.startswith("summary_") or node.name == "context/summary"


def offline_verdict(session: Session, node: Node, under_merged: Mapping[str, str] | None = None) -> TurnVerdict:
    """The verdict of a node on no live tip's branch. ``under_merged``: node id -> the first
    merged head whose chain holds it (see :func:`_merged_chains`); computed here when not given."""
    if is_compaction_summary(node):
        return TurnVerdict(node.id, node.role, NEVER, (
            _r("compaction_summary", "a compaction summary is never on a branch; the turns it covers are written raw",
               Evidence(node.file, "metadata.covers_ids", list(node.covers_ids or ()))),
        ))
    if node.rewound:
        return TurnVerdict(node.id, node.role, NEVER, (
            _r("rewound", "the turn was rewound; every branch and message view hides it", Evidence(node.file, "metadata.rewound", True)),
        ))
    if node.role == "code":
        return TurnVerdict(node.id, node.role, NEVER, (
            _r("filtered_role", "a tool row is never memory", Evidence(node.file, "role", node.role)),
        ))
    why = "it is on no live branch"
    ev = Evidence(node.file, "predecessor", node.predecessor)
    if node.is_attach:
        why, ev = "it is an attach pointer", Evidence(node.file, "metadata.function", "attach")
    else:
        # Find the hidden tip it leads to (merged head or similar).
        under_merged = _merged_chains(session) if under_merged is None else under_merged
        hidden = under_merged.get(node.id)
        if hidden is not None:
            why, ev = f"it lies only under merged head {hidden}", Evidence(session.meta_file, "merged_heads", list(session.merged_heads))
    return TurnVerdict(node.id, node.role, NEVER, (_r("not_on_live_branch", f"not written: {why}", ev),))


def _merged_chains(session: Session) -> dict[str, str]:
    """Node id -> the first merged head (in ``merged_heads`` order) whose predecessor chain holds
    it. One walk per merged head, instead of one per (node, merged head) pair."""
    out: dict[str, str] = {}
    for head in session.merged_heads:
        for node in walk_chain(session, head).nodes:
            out.setdefault(node.id, head)
    return out


class _Verdicts:
    """The verdict engine of one session: a tip's explanation and a node's best verdict,
    each computed when first asked for, in any order, with the same result.

    Built once: every node on some tip's walk gets its tip-independent verdict (the first tip
    in order to see it names it), and every unmarked record the tip whose verdict it keeps:
    written over pending over never, among equals the first tip in order unless the head is
    among them. A tip's turns then copy the verdicts of the walk's all-shared root side from
    an earlier tip (:class:`TurnMemo`), and a record's best verdict is one turn of one tip."""

    def __init__(self, session: Session, sa: SessionAnalysis, ctx: WriterContext, sreasons: list[Reason]) -> None:
        self.session, self.sa, self.ctx, self.sreasons = session, sa, ctx, sreasons
        self.reasons: dict[str, list[Reason]] = {}
        self.sets: dict[str, tuple[frozenset[str], frozenset[str], list[Reason]]] = {}  # tip -> stranded, foreign, others
        self.tips: dict[str, TipExplanation] = {}
        self.nodes: dict[str, TurnVerdict] = {}
        self.under_merged: dict[str, str] | None = None
        verdicts: dict[str, object] = {}
        share = acyclic(session)
        head = session.head_id
        best: dict[str, tuple[int, str]] = {}  # node -> (rank, tip) of the verdict it keeps
        for tip, ta in sa.tips.items():
            chain = ta.chain
            excluded, marked = ta.recordset.excluded, ta.marked
            # Newest first: without cycles a node seen already has had its whole root side seen.
            for i in range(len(chain) - 1, -1, -1):
                node = chain[i]
                if node.id in verdicts:
                    if share:
                        break
                    continue
                verdicts[node.id] = _shared_verdict(node, ta, ctx, excluded, marked)
            stranded_ids = {r.id for r in ta.stranded}
            pending_rank = _RANK[NEVER if ta.archived and not ta.is_head else PENDING]
            # Pending and stranded records come from this tip's walk: each gets a turn here.
            for r, rank in [*((r, _RANK[NEVER]) for r in ta.stranded),
                            *((r, pending_rank) for r in ta.pending if r.id not in stranded_ids)]:
                if verdicts.get(r.id) is not _PER_TIP:
                    continue
                old = best.get(r.id)
                if old is None or rank > old[0] or (rank == old[0] and tip == head):
                    best[r.id] = (rank, tip)
        self.memo = TurnMemo(share_walks=share)
        self.memo.verdicts = verdicts  # every node of every walk is decided already: shared objects
        self.verdicts = verdicts
        self.best = best

    def tip_reasons(self, tip: str) -> list[Reason]:
        out = self.reasons.get(tip)
        if out is None:
            out = self.reasons[tip] = tip_reasons(self.sa, self.sa.tips[tip], self.ctx, self.sreasons)
        return out

    def tip(self, tip: str) -> TipExplanation:
        te = self.tips.get(tip)
        if te is None:
            ta = self.sa.tips[tip]
            treasons = self.tip_reasons(tip)
            te = self.tips[tip] = TipExplanation(ta, tuple(treasons), turns_for_tip(self.sa, ta, treasons, self.ctx, self.memo))
        return te

    def node(self, nid: str) -> TurnVerdict:
        tv = self.nodes.get(nid)
        if tv is not None:
            return tv
        node = self.session.nodes[nid]
        if node.is_root:
            raise KeyError(nid)
        hit = self.best.get(nid)
        shared = self.verdicts.get(nid)
        if hit is not None:
            tv = self._turn(node, hit[1])
        elif isinstance(shared, TurnVerdict):
            tv = shared
        else:
            if self.under_merged is None:
                self.under_merged = _merged_chains(self.session) if self.session.merged_heads else {}
            tv = offline_verdict(self.session, node, self.under_merged)
        self.nodes[nid] = tv
        return tv

    def _turn(self, node: Node, tip: str) -> TurnVerdict:
        """The turn of ``node`` (an unmarked record on ``tip``'s walk) as ``tip``'s explanation
        has it, made on its own (finding it among the tip's turns would cost a walk)."""
        ta = self.sa.tips[tip]
        treasons = self.tip_reasons(tip)
        sets = self.sets.get(tip)
        if sets is None:
            sets = self.sets[tip] = (frozenset(r.id for r in ta.stranded), frozenset(r.id for r in ta.foreign),
                                     [r for r in treasons if r.code not in ("stranded_behind_mark", "runtime_turns_only")])
        return _tip_turn(node, ta, treasons, self.ctx, sets[0], sets[1], ta.archived and not ta.is_head, sets[2])


class _LazyTips(Mapping[str, TipExplanation]):
    def __init__(self, engine: _Verdicts) -> None:
        self._engine = engine

    def __getitem__(self, tip: str) -> TipExplanation:
        if tip not in self._engine.sa.tips:
            raise KeyError(tip)
        return self._engine.tip(tip)

    def __iter__(self):
        return iter(self._engine.sa.tips)

    def __len__(self) -> int:
        return len(self._engine.sa.tips)


class _LazyNodes(Mapping[str, TurnVerdict]):
    def __init__(self, engine: _Verdicts) -> None:
        self._engine = engine
        self._order = tuple(n for n in engine.session.order if not engine.session.nodes[n].is_root)

    def __getitem__(self, nid: str) -> TurnVerdict:
        node = self._engine.session.nodes.get(nid)
        if node is None or node.is_root:
            raise KeyError(nid)
        return self._engine.node(nid)

    def __iter__(self):
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)


def explain_session(session: Session, ctx: WriterContext, counter: TokenCounter | CachedCounter | None = None,
                    analysis: SessionAnalysis | None = None, *, lazy: bool = False) -> SessionExplanation:
    """Every tip's and turn's verdict. ``lazy``: a tip's reasons and turns are computed when
    that tip is first looked up, and a node's best verdict when that node is (what a view
    that shows one tip at a time needs); otherwise all of them now, into plain dicts that
    any thread may read. The same verdicts either way.

    The Sessions list and graph take their figures from ``overview.session_overview``, this
    engine's one-pass fast path (``tests/property/test_overview_props.py`` compares them)."""
    cc = cached_counter(counter)
    sa = analysis or analyze_session(session, ctx.workspace_id, ctx.config.trigger_tokens, cc)
    sreasons = session_reasons(session, sa, ctx)
    engine = _Verdicts(session, sa, ctx, sreasons)
    tips: Mapping[str, TipExplanation] = _LazyTips(engine)
    nodes: Mapping[str, TurnVerdict] = _LazyNodes(engine)
    if not lazy:
        tips, nodes = dict(tips), dict(nodes)
    runtime_only = tuple(t for t, ta in sa.tips.items() if ta.runtime_only)
    return SessionExplanation(sa, tuple(sreasons), tips, nodes, runtime_only)


def explain(snapshot: SessionSnapshot, ctx: WriterContext, counter: TokenCounter | CachedCounter | None = None,
            *, lazy: bool = False) -> Explanation:
    """Every session explained (``lazy`` as for :func:`explain_session`)."""
    cc = cached_counter(counter)
    sessions = {sid: explain_session(s, ctx, cc, lazy=lazy) for sid, s in snapshot.sessions.items()}
    pending = status_pending_count(snapshot, ctx.workspace_id, {sid: e.analysis for sid, e in sessions.items()})
    return Explanation(ctx, global_reasons(ctx), sessions, pending)
