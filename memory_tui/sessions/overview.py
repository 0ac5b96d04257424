"""What the Sessions list and graph need of a session, in one pass over its DAG.

The reasons engine (:mod:`.records`, :mod:`.reasons`) explains every tip over its own walk
from the root: on a session whose 325 tips share most of their history that is 1.1 M
per-tip entries. The list row (pending turns and tokens, stranded, foreign, runtime-only
tips) and each node's best verdict (its glyph) depend only on which tips a node's subtree
holds and whether a marked record lies between the node and each of them, so here they are
computed once per node: top-down (token totals of the pending suffix, "a record above")
and bottom-up (the tips below a node, and those reachable without crossing a marked record).

The answers equal the engine's (``tests/property/test_overview_props.py`` compares them on
random DAGs); where this shortcut's premises fail — a predecessor cycle (a walk's end then
depends on where it starts), or a record whose message id is not its node id (a metadata
``id`` shadowing it: marks are matched by message id) — :func:`session_overview` returns
``None`` and the caller uses the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from memory_tui.core.format.tokens import TokenCounter

from .dag import Branch, forced_pass_branch_order, list_branches, tips_of
from .records import BranchFacts, CachedCounter, cached_counter
from .store import Node, Session

# A node's best verdict, as the graph draws it (the engine's ``SessionExplanation.nodes``):
ROOT_K = "root"  # the graph root
OFFLINE_K = "offline"  # on no tip's walk (its verdict is reasons' offline verdict)
REWOUND_K = "rewound"
EXCLUDED_K = "excluded"  # on a walk, not a record (tool row, runtime turn, empty, authority)
WRITTEN_K = "written"  # a record marked by this workspace
PENDING_K = "pending"  # an unmarked record a live tip would offer
ARCHIVED_K = "archived"  # an unmarked record pending only on an archived non-head tip
STRANDED_K = "stranded"  # an unmarked record behind a newer mark on the tip its verdict names

_INF = 1 << 60


@dataclass(frozen=True)
class SessionOverview:
    session: Session
    rows: tuple[Branch, ...]  # list_branches
    tips: tuple[str, ...]  # tips_of, in the engine's order
    forced_order: tuple[str, ...]
    kinds: Mapping[str, str]  # node id -> one of the *_K kinds (every node)
    foreign_ids: frozenset[str]  # records on some tip's branch marked by another workspace
    best_tip: Mapping[str, str]  # unmarked record -> the tip whose verdict the engine keeps for it
    tip_of: Mapping[str, str]  # node on some walk -> the tip whose view explains it (SessionsModel.tip_for)
    archived: Mapping[str, bool]  # tip -> archived (as TipAnalysis.archived)
    pending_turns: int  # distinct unmarked records on the branches a pass offers
    pending_tokens: int  # the largest pending total of one offered tip
    stranded: int  # distinct records stranded on some tip
    foreign: int
    runtime_only_tips: tuple[str, ...]
    walk_total: int  # sum of the tips' walk lengths: what the engine's per-tip path costs

    @property
    def live_tips(self) -> int:
        return sum(not self.archived[t] for t in self.tips)


def session_overview(
    session: Session,
    workspace_id: str,
    counter: TokenCounter | CachedCounter | None = None,
    rows: tuple[Branch, ...] | None = None,
) -> SessionOverview | None:
    """The overview of one session, or ``None`` where only the engine's per-tip path is exact."""
    facts = BranchFacts(session, workspace_id)
    if not facts.acyclic:
        return None
    cc = cached_counter(counter)
    rows = list_branches(session) if rows is None else rows
    tips = tips_of(session, rows)
    order = forced_pass_branch_order(session, rows)
    nodes = session.nodes
    per_node = _node_records(session, facts)
    if per_node is None:
        return None
    record, code_of = per_node
    children, topo = _topological(nodes)
    tokens, has_rec, has_rt, depth = _top_down(nodes, topo, record, code_of, facts.mine, cc)
    archived = _tips_archived(session, tips, rows)
    offered = set(order)
    below = _Below.of(topo, children, {t: i for i, t in enumerate(tips)}, session.head_id, archived, offered, record,
                      facts.mine)
    verdicts = _verdicts(session, tips, below, record, facts.mine, facts.foreign)
    tip_tokens = [tokens[t] for t in tips if t in offered]
    return SessionOverview(
        session=session,
        rows=rows,
        tips=tips,
        forced_order=order,
        kinds=verdicts.kinds,
        foreign_ids=frozenset(verdicts.foreign),
        best_tip=verdicts.best_tip,
        tip_of=verdicts.tip_of,
        archived=archived,
        pending_turns=verdicts.pending_turns,
        pending_tokens=max(tip_tokens, default=0),
        stranded=verdicts.stranded,
        foreign=len(verdicts.foreign),
        runtime_only_tips=tuple(t for t in tips if not has_rec[t] and has_rt[t]),
        walk_total=sum(depth[t] for t in tips),
    )


def _node_records(session: Session, facts: BranchFacts) -> tuple[dict[str, object], dict[str, str | None]] | None:
    """Per node: is it a record, and its exclusion code (hidden nodes are on no branch);
    ``None`` where a record's id is not its node's (only the per-tip path is exact then)."""
    record: dict[str, object] = {}
    code_of: dict[str, str | None] = {}
    hidden = facts.hidden
    for nid, node in session.nodes.items():
        if nid in hidden:
            continue
        rec, code, _problem = facts.entry(node)[1]
        if rec is not None and rec.id != nid:
            return None
        record[nid] = rec
        code_of[nid] = code
    return record, code_of


def _topological(nodes: Mapping[str, Node]) -> tuple[dict[str, list[str]], list[str]]:
    """The predecessor tree's children, and every node after its parent."""
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for nid, node in nodes.items():
        pred = node.predecessor
        if pred and pred in nodes:
            children.setdefault(pred, []).append(nid)
        else:
            roots.append(nid)
    topo: list[str] = []  # every parent before its children
    stack = roots[::-1]
    while stack:
        nid = stack.pop()
        topo.append(nid)
        stack.extend(children.get(nid, ()))
    return children, topo


def _top_down(nodes: Mapping[str, Node], topo: list[str], record: Mapping[str, object],
              code_of: Mapping[str, str | None], mine: frozenset[str], cc: CachedCounter
              ) -> tuple[dict[str, int], dict[str, bool], dict[str, bool], dict[str, int]]:
    """Top-down: the pending suffix's tokens, "a record / a runtime turn above", walk length."""
    tokens: dict[str, int] = {}
    has_rec: dict[str, bool] = {}
    has_rt: dict[str, bool] = {}
    depth: dict[str, int] = {}
    for nid in topo:
        pred = nodes[nid].predecessor
        up = pred if pred and pred in nodes else None
        t, hr, ht, d = (tokens[up], has_rec[up], has_rt[up], depth[up]) if up is not None else (0, False, False, 0)
        rec = record.get(nid)
        if rec is not None:
            hr = True
            t = 0 if nid in mine else t + cc.count(rec.content)  # type: ignore[attr-defined]
        elif code_of.get(nid) == "runtime_turn":
            ht = True
        tokens[nid], has_rec[nid], has_rt[nid], depth[nid] = t, hr, ht, d + 1
    return tokens, has_rec, has_rt, depth


def _tips_archived(session: Session, tips: tuple[str, ...], rows: tuple[Branch, ...]) -> dict[str, bool]:
    archived: dict[str, bool] = {}
    listed = {r.head_msg_id: r for r in rows}
    for tip in tips:
        row = listed.get(tip)
        if row is not None:
            archived[tip] = row.archived
        else:
            entry = session.branches_meta.get(tip)
            archived[tip] = bool(entry.get("archived", False)) if isinstance(entry, Mapping) else False
    return archived


@dataclass
class _Below:
    """Bottom-up over the tips below each node. S: every tip whose walk holds the node;
    C: those reached without crossing a marked record below it (the node is pending there)."""

    n_s: dict[str, int]
    n_c: dict[str, int]
    min_s: dict[str, int]
    min_c: dict[str, int]
    min_live_c: dict[str, int]
    head_s: dict[str, bool]
    head_c: dict[str, bool]
    off_s: dict[str, bool]
    index: dict[str, int]  # tip -> its position in the tips' order

    @classmethod
    def of(cls, topo: list[str], children: Mapping[str, list[str]], index: dict[str, int], head: str | None,
           archived: Mapping[str, bool], offered: set[str], record: Mapping[str, object], mine: frozenset[str]
           ) -> "_Below":
        b = cls({}, {}, {}, {}, {}, {}, {}, {}, index)
        for nid in reversed(topo):
            ns = nc = 0
            ms = mc = mlc = _INF
            hs = hc = os_ = False
            i = index.get(nid)
            if i is not None:
                ns = nc = 1
                ms = mc = i
                if nid == head or not archived[nid]:
                    mlc = i  # an archived tip that is not the head offers nothing
                hs = hc = nid == head
                os_ = nid in offered
            for c in children.get(nid, ()):
                ns += b.n_s[c]
                ms = min(ms, b.min_s[c])
                hs = hs or b.head_s[c]
                os_ = os_ or b.off_s[c]
                if record.get(c) is not None and c in mine:
                    continue  # a marked record: the tips below it hold this node behind the mark
                nc += b.n_c[c]
                mc = min(mc, b.min_c[c])
                mlc = min(mlc, b.min_live_c[c])
                hc = hc or b.head_c[c]
            b.n_s[nid], b.n_c[nid], b.min_s[nid], b.min_c[nid], b.min_live_c[nid] = ns, nc, ms, mc, mlc
            b.head_s[nid], b.head_c[nid], b.off_s[nid] = hs, hc, os_
        return b


@dataclass
class _NodeVerdicts:
    kinds: dict[str, str]
    best_tip: dict[str, str]
    tip_of: dict[str, str]
    foreign: set[str]
    pending_turns: int
    stranded: int


def _verdicts(session: Session, tips: tuple[str, ...], below: _Below, record: Mapping[str, object],
              mine: frozenset[str], foreign_marks: frozenset[str]) -> _NodeVerdicts:
    """Every node's kind and the tip whose verdict it keeps, from the bottom-up sets."""
    head = session.head_id
    index = below.index
    n_s, n_c, min_s, min_c, min_live_c = below.n_s, below.n_c, below.min_s, below.min_c, below.min_live_c
    head_s, head_c, off_s = below.head_s, below.head_c, below.off_s
    out = _NodeVerdicts({}, {}, {}, set(), 0, 0)
    kinds, best_tip, tip_of = out.kinds, out.best_tip, out.tip_of
    for nid, node in session.nodes.items():
        if n_s[nid]:
            # Shared verdicts name the first tip (in order) whose walk holds the node; the graph
            # root has no verdict: itself if a tip, else the head if it holds it, else that first tip.
            first = tips[min_s[nid]]
            if node.is_root:
                tip_of[nid] = nid if nid in index else (head if head_s[nid] else first)  # type: ignore[assignment]
            else:
                tip_of[nid] = first
        if node.is_root:
            kinds[nid] = ROOT_K
            continue
        if not n_s[nid]:
            kinds[nid] = OFFLINE_K
            continue
        if node.rewound:
            kinds[nid] = REWOUND_K
            continue
        if record.get(nid) is None:
            kinds[nid] = EXCLUDED_K
            continue
        if nid in foreign_marks:
            out.foreign.add(nid)
        if nid in mine:
            kinds[nid] = WRITTEN_K
            continue
        out.pending_turns += off_s[nid]
        out.stranded += n_s[nid] > n_c[nid]
        # The engine ranks a pending turn on a live tip above one that is never written, and
        # among equals keeps the first tip in order, unless the head is among them.
        if head_c[nid] or min_live_c[nid] < _INF:
            kinds[nid] = PENDING_K
            best_tip[nid] = head if head_c[nid] else tips[min_live_c[nid]]  # type: ignore[assignment]
        elif head_s[nid]:
            kinds[nid] = STRANDED_K  # behind a mark on the head (pending on it would be live)
            best_tip[nid] = head  # type: ignore[assignment]
        else:
            best = min_s[nid]
            kinds[nid] = ARCHIVED_K if min_c[nid] == best else STRANDED_K
            best_tip[nid] = tips[best]
        tip_of[nid] = best_tip[nid]
    return out


__all__ = [
    "ARCHIVED_K", "EXCLUDED_K", "OFFLINE_K", "PENDING_K", "REWOUND_K", "ROOT_K", "STRANDED_K", "WRITTEN_K",
    "SessionOverview", "session_overview",
]
