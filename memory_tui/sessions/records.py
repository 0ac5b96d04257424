"""Memory's view of a branch: records, marks, pending, batches (session spec §4.2-§4.4).

Everything works on the projected message dicts (§2.4), exactly as OpenProgram's writer does,
so a metadata key that shadows a native field behaves the same way here.

Where OpenProgram *raises* (a stamped node without authority, a row without an id, a
special token its counter refuses) we do not: the offending node is reported as a
precondition :class:`Problem` naming its file, and the computation continues so the UI can
still show everything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from memory_tui.core.format.errors import Problem
from memory_tui.core.format.tokens import TokenCounter

from .dag import (Branch, Chain, MessageView, acyclic, forced_pass_branch_order, get_branch, list_branches, tips_of,
                  walk_chain)
from .store import Node, Session, SessionSnapshot

MARK_KEY = "memory_written_scriptorium"
RUNTIME_SOURCES = frozenset({"job_followup", "merge_turn"})
AUTHORITY_FIELDS = ("speaker_kind", "speaker_id", "speaker_display", "principal_id", "authority_tier", "interaction")
# Tiers holding the ``memory.source.append`` capability.
APPEND_TIERS = frozenset({"owner", "paired"})
PRECONDITION = "WRITER_PRECONDITION_FAILED"


@dataclass(frozen=True)
class Record:
    id: str
    role: str  # "user" | "assistant"
    content: str
    timestamp: float | None
    node: Node
    legacy: bool = False  # no authority, no authority_schema: attributed to the local owner


@dataclass(frozen=True)
class RecordSet:
    records: tuple[Record, ...]
    excluded: Mapping[str, str]  # node id -> reason code (filtered_role, runtime_turn, empty_text, authority_denied, ...)
    problems: tuple[Problem, ...] = ()  # precondition failures (OpenProgram raises on the first)

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.records)


def message_text(content: Any) -> str | None:
    """The text memory reads from a message ``content`` (string, or joined text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        return "\n".join(parts)
    return None


def is_runtime_message(msg: Mapping[str, Any] | MessageView) -> bool:
    source = msg.get("source")  # a list there (bad input) is no runtime source, not a TypeError
    return msg.get("display") == "runtime" or (isinstance(source, str) and source in RUNTIME_SOURCES)


def authority_state(msg: Mapping[str, Any] | MessageView) -> str:
    """'allowed' | 'denied' | 'missing' (stamped, incomplete) | 'legacy' (unstamped, incomplete)."""
    values = [msg.get(k) for k in AUTHORITY_FIELDS]
    complete = all(isinstance(v, str) and v.strip() for v in values)
    if complete:
        return "allowed" if msg.get("authority_tier") in APPEND_TIERS else "denied"
    if msg.get("authority_schema") is not None:
        return "missing"
    return "legacy"


def classify_message(msg: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(exclusion code or None, text). ``None`` code means the message is a record."""
    code, text, _auth = _classify(msg)
    return code, text


def _classify(msg: Mapping[str, Any] | MessageView) -> tuple[str | None, str | None, str | None]:
    """:func:`classify_message` plus the authority state it decided on (None when it did not look)."""
    if msg.get("role") not in ("user", "assistant"):
        return "filtered_role", None, None
    if is_runtime_message(msg):
        return "runtime_turn", None, None
    text = message_text(msg.get("content"))
    if text is None or not text.strip():
        return "empty_text", None, None
    mid = msg.get("id")
    if not isinstance(mid, str) or not mid:
        return "missing_id", text, None
    auth = authority_state(msg)
    if auth == "denied":
        return "authority_denied", text, auth
    if auth == "missing":
        return "authority_missing", text, auth
    return None, text, auth


def _classified(session: Session, node: Node, cache: dict | None) -> tuple[MessageView, str | None, str | None, bool]:
    """The node's message (read lazily), exclusion code, text, and whether a record of it is legacy."""
    if cache is not None:
        hit = cache.get(node.id)
        if hit is not None and hit[0] is node:
            return hit[1], hit[2], hit[3], hit[4]
    msg = MessageView(session, node)
    code, text, auth = _classify(msg)
    legacy = code is None and auth == "legacy"
    if cache is not None:
        cache[node.id] = (node, msg, code, text, legacy)
    return msg, code, text, legacy


def _node_entry(session: Session, node: Node, cache: dict | None) -> tuple[Record | None, str | None, Problem | None]:
    """What one branch node contributes to §4.2: its record, or why it is not one (and the
    precondition problem that exclusion raises in OpenProgram's writer, if any)."""
    msg, code, text, legacy = _classified(session, node, cache)
    if code is None:
        ts = msg.get("timestamp")
        return (
            Record(
                id=msg.get("id"),
                role=msg.get("role"),
                content=text or "",
                timestamp=float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None,
                node=node,
                legacy=legacy,
            ),
            None,
            None,
        )
    problem = None
    if code == "missing_id":
        problem = Problem(
            PRECONDITION,
            f"node {node.id!r} projects to a message without an id; OpenProgram's writer raises "
            "'memory source message requires a stable id' and the whole session write fails",
            node.file,
            1,
            1,
            {"node_id": node.id, "reason": "missing_id"},
        )
    elif code == "authority_missing":
        problem = Problem(
            PRECONDITION,
            f"node {node.id!r} has authority_schema but incomplete authority; OpenProgram's writer raises "
            f"'memory source message requires authority: {node.id}' and the whole session write fails",
            node.file,
            1,
            1,
            {"node_id": node.id, "reason": "authority_missing"},
        )
    return None, code, problem


def _recordset(entries: Iterable[tuple[Node, tuple[Record | None, str | None, Problem | None]]]) -> RecordSet:
    records: list[Record] = []
    excluded: dict[str, str] = {}
    problems: list[Problem] = []
    for node, (rec, code, problem) in entries:
        if rec is not None:
            records.append(rec)
            continue
        excluded[node.id] = code  # type: ignore[assignment]
        if problem is not None:
            problems.append(problem)
    return RecordSet(tuple(records), excluded, tuple(problems))


def records_for(session: Session, nodes: Sequence[Node], cache: dict | None = None) -> RecordSet:
    """§4.2 over one branch (root→tip). ``cache`` memoizes projections across branches."""
    return _recordset((node, _node_entry(session, node, cache)) for node in nodes)


def marked_ids(nodes: Iterable[Node], workspace_id: str, key: str = MARK_KEY) -> frozenset[str]:
    """Ids of every node on the branch whose mark equals this workspace id (§4.4)."""
    return frozenset(n.id for n in nodes if n.metadata.get(key) == workspace_id)


def pending_records(records: Sequence[Record], marked: frozenset[str]) -> tuple[Record, ...]:
    """The unmarked suffix after the newest marked record (§4.4)."""
    out: list[Record] = []
    for rec in reversed(records):
        if rec.id in marked:
            break
        out.append(rec)
    out.reverse()
    return tuple(out)


def stranded_records(records: Sequence[Record], marked: frozenset[str]) -> tuple[Record, ...]:
    """Unmarked records older than the newest marked record: the suffix walk never reaches them."""
    last = -1
    for i, rec in enumerate(records):
        if rec.id in marked:
            last = i
    return tuple(r for r in records[:last] if r.id not in marked) if last > 0 else ()


def foreign_marked(records: Sequence[Record], workspace_id: str, key: str = MARK_KEY) -> tuple[Record, ...]:
    out = []
    for rec in records:
        mark = rec.node.metadata.get(key)
        if mark not in (None, "") and mark != workspace_id:
            out.append(rec)
    return tuple(out)


class CachedCounter:
    """Memoizes token counts per text (branches share prefixes)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._counts: dict[str, int] = {}
        self._special: dict[str, tuple[str, ...]] = {}

    def count(self, text: str) -> int:
        value = self._counts.get(text)
        if value is None:
            value = self._counts[text] = self.counter.count(text)
        return value

    def special_tokens_in(self, text: str) -> tuple[str, ...]:
        value = self._special.get(text)
        if value is None:
            value = self._special[text] = tuple(self.counter.special_tokens_in(text))
        return value


def cached_counter(counter: TokenCounter | CachedCounter | None) -> CachedCounter:
    """``counter`` memoised per text (the default counter when ``None``)."""
    if isinstance(counter, CachedCounter):
        return counter
    if counter is None:
        from memory_tui.core.format.tokens import DEFAULT_COUNTER

        counter = DEFAULT_COUNTER
    return CachedCounter(counter)


def first_batch(pending: Sequence[Record], threshold: int, counter: TokenCounter | CachedCounter) -> tuple[tuple[Record, ...], int]:
    """§4.4 ``_first_batch``: leading records until the running total reaches the threshold."""
    total = 0
    batch: list[Record] = []
    for rec in pending:
        batch.append(rec)
        total += counter.count(rec.content)
        if total >= threshold:
            break
    return tuple(batch), total


@dataclass(frozen=True)
class TipAnalysis:
    """Everything expected.json records per tip, plus what we need to explain it."""

    session_id: str
    tip: str
    is_head: bool
    listed: bool
    archived: bool
    chain: tuple[Node, ...]  # raw walk, root→tip (includes ROOT and rewound nodes)
    branch: tuple[Node, ...]
    recordset: RecordSet
    marked: frozenset[str]
    pending: tuple[Record, ...]
    pending_tokens: int
    batch: tuple[Record, ...]
    batch_tokens: int
    stranded: tuple[Record, ...]
    foreign: tuple[Record, ...]
    special_tokens: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # pending record id -> tokens
    broken_at: str | None = None

    @property
    def record_ids(self) -> list[str]:
        return [r.id for r in self.recordset.records]

    @property
    def marked_record_ids(self) -> list[str]:
        return [r.id for r in self.recordset.records if r.id in self.marked]

    @property
    def runtime_only(self) -> bool:
        """Pitfall 9: a branch holding no records, only runtime turns (besides empty/tool rows)."""
        return not self.recordset.records and any(c == "runtime_turn" for c in self.recordset.excluded.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "is_head": self.is_head,
            "listed": self.listed,
            "archived": self.archived,
            "branch_ids": [n.id for n in self.branch],
            "record_ids": self.record_ids,
            "marked_record_ids": self.marked_record_ids,
            "pending_ids": [r.id for r in self.pending],
            "pending_tokens": self.pending_tokens,
            "first_batch_ids": [r.id for r in self.batch],
            "first_batch_tokens": self.batch_tokens,
            "stranded_ids": [r.id for r in self.stranded],
            "foreign_marked_ids": [r.id for r in self.foreign],
        }


class BranchFacts:
    """What every tip of one session shares: per-node facts (projection, record, mark,
    hidden) computed once, and root→node walks reused by every tip whose walk reaches a
    node an earlier tip already walked (branches share their prefix with the trunk).

    Used only when the predecessor links have no cycle: then the walk from any node is the
    tail of the walk from every node below it, with the same end (``broken``/``dangling``).
    With a cycle, where a walk stops depends on where it started, so each tip walks alone.
    """

    def __init__(self, session: Session, workspace_id: str, cache: dict | None = None) -> None:
        self.session = session
        self.workspace_id = workspace_id
        self._cache = {} if cache is None else cache
        nodes = session.nodes.values()
        self.hidden = frozenset(n.id for n in nodes if n.is_root or n.rewound)
        marks = [(n.id, n.metadata.get(MARK_KEY)) for n in nodes]
        self.mine = frozenset(i for i, m in marks if m == workspace_id)
        self.foreign = frozenset(i for i, m in marks if m not in (None, "") and m != workspace_id)
        self._entries: dict[str, tuple[Node, tuple[Record | None, str | None, Problem | None]]] = {}
        self._walked: dict[str, tuple[tuple[Node, ...], int, str | None, str | None]] = {}
        self.acyclic = acyclic(session)

    def entry(self, node: Node) -> tuple[Node, tuple[Record | None, str | None, Problem | None]]:
        hit = self._entries.get(node.id)
        if hit is None or hit[0] is not node:
            hit = self._entries[node.id] = (node, _node_entry(self.session, node, self._cache))
        return hit

    def records(self, branch: Sequence[Node]) -> RecordSet:
        return _recordset(map(self.entry, branch))

    def chain(self, tip: str) -> Chain:
        """``walk_chain(session, tip)``, reusing the walks of earlier tips."""
        return walk_chain(self.session, tip, self._walked if self.acyclic else None)


def analyze_tip(
    session: Session,
    tip: str,
    workspace_id: str,
    threshold: int,
    counter: TokenCounter | CachedCounter | None = None,
    rows: tuple[Branch, ...] | None = None,
    cache: dict | None = None,
    *,
    facts: BranchFacts | None = None,
) -> TipAnalysis:
    """One tip's analysis. Pass one ``facts`` for every tip of a session to share the work
    of their common prefix; the result is the same as walking this tip alone
    (``tests/reference/reasons_plain.py``; the property test compares them)."""
    cc = cached_counter(counter)
    rows = list_branches(session) if rows is None else rows
    facts = facts if facts is not None and facts.session is session else BranchFacts(session, workspace_id, cache)
    chain = facts.chain(tip)
    hidden = facts.hidden
    branch = tuple(n for n in chain.nodes if n.id not in hidden)
    rs = facts.records(branch)
    marked = facts.mine.intersection(n.id for n in branch)
    foreign = facts.foreign
    return tip_analysis(session, tip, threshold, cc, rows, chain, branch, rs, marked,
                         tuple(r for r in rs.records if r.id in foreign))


def tip_analysis(session: Session, tip: str, threshold: int, cc: CachedCounter, rows: Sequence[Branch], chain: Chain,
                 branch: tuple[Node, ...], rs: RecordSet, marked: frozenset[str], foreign: tuple[Record, ...]) -> TipAnalysis:
    """A tip's analysis from its walk, branch, records and marks (pending, batch, stranded)."""
    row = next((r for r in rows if r.head_msg_id == tip), None)
    if row is not None:
        archived = row.archived
    else:
        entry = session.branches_meta.get(tip)
        archived = bool(entry.get("archived", False)) if isinstance(entry, Mapping) else False
    pending = pending_records(rs.records, marked)
    pending_tokens = sum(cc.count(r.content) for r in pending)
    batch, batch_tokens = first_batch(pending, threshold, cc)
    special = {r.id: cc.special_tokens_in(r.content) for r in pending}
    return TipAnalysis(
        session_id=session.id,
        tip=tip,
        is_head=tip == session.head_id,
        listed=row is not None,
        archived=archived,
        chain=chain.nodes,
        branch=branch,
        recordset=rs,
        marked=marked,
        pending=pending,
        pending_tokens=pending_tokens,
        batch=batch,
        batch_tokens=batch_tokens,
        stranded=stranded_records(rs.records, marked),
        foreign=foreign,
        special_tokens={k: v for k, v in special.items() if v},
        broken_at=chain.broken,
    )


@dataclass(frozen=True)
class SessionAnalysis:
    session: Session
    rows: tuple[Branch, ...]
    forced_order: tuple[str, ...]
    tips: Mapping[str, TipAnalysis]

    @property
    def precondition_problems(self) -> tuple[Problem, ...]:
        """What makes OpenProgram's writer raise for this session (deduplicated by node)."""
        seen: set[tuple[str | None, str]] = set()
        out: list[Problem] = []
        for tip in self.forced_order:
            analysis = self.tips.get(tip)
            if analysis is None:
                continue
            for p in analysis.recordset.problems:
                key = (p.path, p.message)
                if key not in seen:
                    seen.add(key)
                    out.append(p)
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        return {
            "head_id": self.session.head_id,
            "in_registry": self.session.in_registry,
            "updated_at": self.session.updated_at,
            "list_branches": [r.to_json() for r in self.rows],
            "forced_pass_branch_order": list(self.forced_order),
            "tips": {t: a.to_json() for t, a in self.tips.items()},
        }


def analyze_session(
    session: Session,
    workspace_id: str,
    threshold: int,
    counter: TokenCounter | CachedCounter | None = None,
) -> SessionAnalysis:
    cc = cached_counter(counter)
    rows = list_branches(session)
    order = forced_pass_branch_order(session, rows)
    tips = tips_of(session, rows)
    facts = BranchFacts(session, workspace_id)
    analyses = {t: analyze_tip(session, t, workspace_id, threshold, cc, rows, facts=facts) for t in tips}
    return SessionAnalysis(session, rows, order, analyses)


@dataclass(frozen=True)
class PendingCount:
    """OpenProgram's ``pending_turns`` (memory spec §7.9), and what it could not count."""

    value: int | None  # None where OpenProgram reports null (a session raised)
    lenient: int  # the same count, skipping nodes that make OpenProgram raise
    problems: tuple[Problem, ...] = ()


def status_pending_count(
    snapshot: SessionSnapshot,
    workspace_id: str,
    analyses: Mapping[str, SessionAnalysis] | None = None,
) -> PendingCount:
    """Distinct unmarked eligible records over all sessions (archived included) and every
    eligible branch (head first, then non-archived tips). Not a suffix walk."""
    ids: set[tuple[str, str]] = set()
    problems: list[Problem] = []
    for sid, session in snapshot.sessions.items():
        if analyses is not None and sid in analyses:
            tips = analyses[sid].tips
            order = analyses[sid].forced_order
            branches = [(tips[t].branch, tips[t].recordset, tips[t].marked) if t in tips else None for t in order]
        else:
            order = forced_pass_branch_order(session)
            branches = []
            for t in order:
                br = get_branch(session, t)
                branches.append((br, records_for(session, br), marked_ids(br, workspace_id)))
        for item in branches:
            if item is None:
                br = get_branch(session, session.head_id)
                item = (br, records_for(session, br), marked_ids(br, workspace_id))
            _br, rs, marked = item
            problems.extend(p for p in rs.problems if p not in problems)
            for rec in rs.records:
                if rec.id not in marked:
                    ids.add((sid, rec.id))
    return PendingCount(None if problems else len(ids), len(ids), tuple(problems))
