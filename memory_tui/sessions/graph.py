"""The session DAG as rows of lane cells: a pure layout, no Textual (session spec §3, memory spec §9).

Data first, glyphs second (the idea of lazygit's graph presentation, our own code):

1. :func:`nodes_from_session` turns a :class:`SessionExplanation` into :class:`LayoutNode` s:
   one display parent list per node (the conversation edge, else the spawn/tool ``caller``,
   plus merge sources) and one *state* per node taken from the reasons engine.
2. :func:`layout` folds tool runs and long linear runs into collapsed rows, orders rows
   oldest first (topologically, ``seq`` breaking ties), and gives every open edge a lane.
   Each row records which edge occupies each lane just above and just below its horizontal
   line, and per-cell connection flags (up/down/left/right).
3. :func:`draw_row` / :func:`draw` map flags to box glyphs (rounded corners) or ASCII.

Lanes are two cells wide: the lane cell itself and a gap cell carrying horizontal lines. A new
branch takes the leftmost free lane; holes left after that are compacted by moving lanes left.
Reversing (newest first) flips the finished rows, so both directions share one lane assignment.
"""

from __future__ import annotations

import heapq
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from memory_tui.core.cache.registry import keeps
from memory_tui.core.format.text import sanitize

from . import overview as O
from .dag import Branch
from .reasons import PENDING, WRITTEN, SessionExplanation, TurnVerdict, is_compaction_summary
from .records import message_text
from .store import Session

# --------------------------------------------------------------------------- meanings and glyphs

# Node states (one glyph each, drawn in the node's lane cell).
WRITTEN_S = "written"  # marked by this workspace
PENDING_S = "pending"  # unwritten, a pass would offer it
HELD_S = "held"  # unwritten, and no pass writes it (archived branch, on no live branch)
INELIGIBLE_S = "ineligible"  # tool, runtime turn, empty, authority denied: never memory
REWOUND_S = "rewound"
FOREIGN_S = "foreign"  # marked by another workspace: counts as unwritten
STRANDED_S = "stranded"  # unmarked behind a newer mark: never offered again
SUMMARY_S = "summary"  # compaction summary (side branch)
ROOT_S = "root"  # the graph root node
COLLAPSED_S = "collapsed"  # a folded run of rows
DROPPED_S = "dropped"  # marked by this workspace, but no record cites it: written, nothing kept
UNREADABLE_S = "unreadable"  # a node file that cannot be read (its error is in the node detail)
LINK_S = "link"  # a node of another session this one is linked to (cross-session spawn)

STATES = (WRITTEN_S, PENDING_S, HELD_S, INELIGIBLE_S, REWOUND_S, FOREIGN_S, STRANDED_S, SUMMARY_S, ROOT_S, COLLAPSED_S,
          DROPPED_S, UNREADABLE_S, LINK_S)

# Structural markers (drawn after the lanes; a node may carry several).
HEAD_M = "head"
TIP_M = "tip"  # another live tip (a list_branches row that is not the head)
SPAWN_M = "spawn"  # spawn branch root (same or cross session)
MERGE_M = "merge"  # a node that absorbed other tips (merged_heads)
KEPT_M = "kept"  # cited by a record although this workspace never marked it: kept without a mark
SUMMARY_HEAD_M = "summary_head"  # a compaction summary on the head's line (an unwritten restatement)

MARKERS = (HEAD_M, TIP_M, SPAWN_M, MERGE_M, KEPT_M, SUMMARY_HEAD_M)


@dataclass(frozen=True)
class GlyphSet:
    states: Mapping[str, str]
    markers: Mapping[str, str]
    box: Mapping[int, str]  # connection flags -> glyph
    horizontal: str
    fold: str  # lanes beyond the width limit
    gap: str  # a seq gap row's label prefix


U, D, L, R = 1, 2, 4, 8

_BOX_UTF8 = {
    0: " ", U: "│", D: "│", U | D: "│", L: "─", R: "─", L | R: "─",
    D | R: "╭", D | L: "╮", U | R: "╰", U | L: "╯",
    U | D | R: "├", U | D | L: "┤", L | R | D: "┬", L | R | U: "┴", U | D | L | R: "┼",
}
_BOX_ASCII = {
    0: " ", U: "|", D: "|", U | D: "|", L: "-", R: "-", L | R: "-",
    D | R: ",", D | L: ",", U | R: "`", U | L: "`",
    U | D | R: "+", U | D | L: "+", L | R | D: "+", L | R | U: "+", U | D | L | R: "+",
}

UTF8 = GlyphSet(
    states={WRITTEN_S: "●", PENDING_S: "○", HELD_S: "◌", INELIGIBLE_S: "·", REWOUND_S: "↺", FOREIGN_S: "◐",
            STRANDED_S: "⊘", SUMMARY_S: "≡", ROOT_S: "◎", COLLAPSED_S: "⋮", DROPPED_S: "◍", UNREADABLE_S: "✖",
            LINK_S: "⇄"},
    markers={HEAD_M: "◆", TIP_M: "◇", SPAWN_M: "↳", MERGE_M: "⊕", KEPT_M: "✓", SUMMARY_HEAD_M: "⚑"},
    box=_BOX_UTF8,
    horizontal="─",
    fold="⋯",
    gap="┆",
)
ASCII = GlyphSet(
    states={WRITTEN_S: "*", PENDING_S: "o", HELD_S: "!", INELIGIBLE_S: ".", REWOUND_S: "~", FOREIGN_S: "%",
            STRANDED_S: "x", SUMMARY_S: "=", ROOT_S: "#", COLLAPSED_S: ":", DROPPED_S: "@", UNREADABLE_S: "?",
            LINK_S: "&"},
    markers={HEAD_M: "H", TIP_M: "T", SPAWN_M: "S", MERGE_M: "M", KEPT_M: "K", SUMMARY_HEAD_M: "F"},
    box=_BOX_ASCII,
    horizontal="-",
    fold=">",
    gap=":",
)

LEGEND = (
    (WRITTEN_S, "written by this workspace (and a record keeps it, where the topics are read)"),
    (DROPPED_S, "written, nothing kept: marked, but no record cites it"),
    (PENDING_S, "unwritten, pending (a pass would offer it)"),
    (HELD_S, "unwritten, held (no pass writes it: archived or off every live branch)"),
    (INELIGIBLE_S, "not eligible (tool, runtime turn, empty, authority)"),
    (REWOUND_S, "rewound"),
    (FOREIGN_S, "marked by another workspace (counts as unwritten)"),
    (STRANDED_S, "stranded behind a newer mark (never offered again)"),
    (SUMMARY_S, "compaction summary"),
    (ROOT_S, "graph root"),
    (COLLAPSED_S, "collapsed run (expand it)"),
    (UNREADABLE_S, "unreadable node file (the error is in the node detail)"),
    (LINK_S, "a node of another session (cross-session spawn; g crosses)"),
)
MARKER_LEGEND = (
    (HEAD_M, "head"),
    (TIP_M, "other live tip"),
    (SPAWN_M, "spawn root"),
    (MERGE_M, "merge"),
    (KEPT_M, "kept without a mark: a record cites it, no mark of this workspace"),
    (SUMMARY_HEAD_M, "compaction summary on the head's line (restates turns)"),
)


def glyphs(ascii: bool = False) -> GlyphSet:
    return ASCII if ascii else UTF8


def legend_lines(ascii: bool = False) -> list[str]:
    g = glyphs(ascii)
    out = [f"{g.states[k]}  {text}" for k, text in LEGEND]
    out += [f"{g.markers[k]}  {text}" for k, text in MARKER_LEGEND]
    return out


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class LayoutNode:
    """One node as the layout sees it. ``parents[0]`` is the main (conversation) parent."""

    id: str
    parents: tuple[str, ...] = ()
    seq: int = 0
    state: str = PENDING_S
    markers: tuple[str, ...] = ()
    role: str = "user"  # stored role (user | llm | code)
    text: str = ""  # first line of the text, sanitised
    note: str = ""  # structural note: "attach → X", "spawned from another session", ...
    tool: bool = False  # folds into a tool run


@dataclass(frozen=True)
class LayoutOptions:
    reverse: bool = False  # newest first
    collapse: bool = True
    expanded: frozenset[str] = frozenset()  # ids of collapsed rows to show expanded
    linear_min: int = 16  # a linear run longer than this folds (its first and last two stay)
    linear_keep: int = 2
    tool_min: int = 2  # this many tool rows under one node fold into one row


@dataclass(frozen=True)
class Row:
    """One drawn line. ``kind``: node | collapsed | gap.

    ``cells[i]`` are the connection flags of lane ``i``; ``hgap[i]`` is True when a horizontal
    line crosses the gap cell right of lane ``i``. ``above`` / ``below`` name the edge
    ``(upper id, lower id)`` occupying each lane just above and below the row's line.
    """

    kind: str
    id: str  # node id, collapsed-row id, or "gap:<seq>"
    lane: int  # node lane (-1 for gap rows)
    cells: tuple[int, ...]
    hgap: tuple[bool, ...]
    above: tuple[tuple[str, str] | None, ...]
    below: tuple[tuple[str, str] | None, ...]
    node: LayoutNode | None = None
    members: tuple[str, ...] = ()  # the node ids this row stands for (one for a node row)
    text: str = ""

    @property
    def width(self) -> int:
        return len(self.cells)


@dataclass(frozen=True)
class Layout:
    rows: tuple[Row, ...]
    nodes: Mapping[str, LayoutNode]
    row_of: Mapping[str, int]  # node id -> row index (collapsed members map to their row)
    parents: Mapping[str, tuple[str, ...]]  # resolved parents (unknown ids dropped)
    collapsible: Mapping[str, tuple[str, ...]]  # every foldable group id -> members (folded or not)
    lanes: int  # widest row
    options: LayoutOptions = field(default_factory=LayoutOptions)
    dropped_edges: tuple[tuple[str, str], ...] = ()  # parent edges dropped to break a cycle
    children: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # the reverse of ``parents``


# --------------------------------------------------------------------------- session -> nodes


def first_line(value: object, limit: int = 200) -> str:
    text = message_text(value) if not isinstance(value, str) else value
    if text is None:
        text = "" if value is None else str(type(value).__name__)
    # Look at the head of a long text first (a spilled tool output runs to megabytes); only a
    # text that opens with that much blank space is scanned whole.
    head = limit * 8 + 512
    for chunk in (text[:head], text[head:]) if len(text) > head else (text,):
        for line in sanitize(chunk).splitlines():
            line = line.strip()
            if line:
                return line[:limit]
    return ""


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: one per session per load
class Decorations:
    """What the graph shows beyond the session's own files: the kept state of each turn
    (``sessions.kept``: ``kept`` / ``dropped`` / ``unmarked_kept``), the unreadable node files
the links to other sessions (cross-session spawns, :mod:`.links`) and the
    compaction summaries on the head's line. An empty one draws the session as before."""

    kept: Mapping[str, str] = field(default_factory=dict)
    links_in: tuple[tuple[str, str, str], ...] = ()  # (local node, other session, other node): spawned from there
    links_out: tuple[tuple[str, str, str], ...] = ()  # (local node, other session, other node): spawned there
    summaries_on_head: frozenset[str] = frozenset()


NO_DECORATIONS = Decorations()


def nodes_from_session(se: SessionExplanation, deco: Decorations = NO_DECORATIONS) -> tuple[LayoutNode, ...]:
    """Layout input for a session: edges from the files, states from the reasons engine."""
    session, verdicts = se.session, se.nodes
    return _layout_nodes(session, se.analysis.rows, lambda nid: node_state(session, nid, *verdict_kind(session, verdicts, nid)),
                         deco)


def nodes_from_overview(ov: O.SessionOverview, deco: Decorations = NO_DECORATIONS) -> tuple[LayoutNode, ...]:
    """:func:`nodes_from_session` from the engine's fast path, the one-pass overview (equal
    states, no per-tip work)."""
    return _layout_nodes(ov.session, ov.rows, lambda nid: node_state(ov.session, nid, ov.kinds[nid], nid in ov.foreign_ids),
                         deco)


def link_id(other_session: str, other_node: str) -> str:
    """The id of the graph node standing for a node of another session."""
    return f"@{other_session}/{other_node}"


def unreadable_id(u: Any) -> str:
    """The graph id of an unreadable node file: its node id (from the file name), else the file."""
    return u.id or f"!{u.file.rsplit('/', 1)[-1]}"


def _decorate(out: list[LayoutNode], session: Session, deco: Decorations) -> list[LayoutNode]:
    kept = deco.kept
    if kept or deco.summaries_on_head:
        from .kept import DROPPED, UNMARKED_KEPT

        for i, n in enumerate(out):
            k = kept.get(n.id)
            state, markers, note = n.state, n.markers, n.note
            if k == DROPPED and state == WRITTEN_S:
                state = DROPPED_S
            elif k == UNMARKED_KEPT:
                markers = (*markers, KEPT_M)
            if n.id in deco.summaries_on_head:
                markers = (*markers, SUMMARY_HEAD_M)
                note = (note + "; " if note else "") + "on the head's line"
            if (state, markers, note) != (n.state, n.markers, n.note):
                out[i] = LayoutNode(n.id, n.parents, n.seq, state, markers, n.role, n.text, note, n.tool)
    if deco.links_in or deco.links_out:
        by_id = {n.id: i for i, n in enumerate(out)}
        for local, osid, onode in deco.links_in:
            i = by_id.get(local)
            if i is None:
                continue
            lid = link_id(osid, onode)
            n = out[i]
            seq = n.seq
            out.append(LayoutNode(lid, (), seq, LINK_S, (), "link", f"session {sanitize(osid)}, node {sanitize(onode)}",
                                  "spawned this branch"))
            out[i] = LayoutNode(n.id, (lid, *n.parents), n.seq, n.state, n.markers, n.role, n.text,
                                f"spawned from {sanitize(onode)} in session {sanitize(osid)}", n.tool)
        for local, osid, onode in deco.links_out:
            if local not in by_id:
                continue
            lid = link_id(osid, onode)
            seq = out[by_id[local]].seq
            out.append(LayoutNode(lid, (local,), seq, LINK_S, (), "link", f"session {sanitize(osid)}, node {sanitize(onode)}",
                                  "a sub-agent branch spawned here"))
    return out


def _layout_nodes(session: Session, rows: Sequence[Branch], state_of, deco: Decorations = NO_DECORATIONS
                  ) -> tuple[LayoutNode, ...]:
    listed = {r.head_msg_id for r in rows}
    merge_sources = _merge_sources(session)
    nodes = session.nodes
    head_id = session.head_id
    out: list[LayoutNode] = []
    append = out.append
    # A node file that does not parse is still a node: drawn in its place (its id and seq are
    # in its name), so its children keep their parent and its predecessor is no tip.
    unreadable = {unreadable_id(u): u for u in session.unreadable}
    # One pass over 10 000 nodes on a big session's open: each metadata key is read once
    # (Node's properties each look one up), with the same meaning as those properties.
    for nid in session.order:
        node = nodes[nid]
        md = node.metadata
        pred = node.predecessor
        spawn_root = bool(md.get("spawn_branch_root")) or md.get("source") == "agent_spawn"
        parents: list[str] = []
        note = ""
        if pred and (pred in nodes or pred in unreadable):
            parents.append(pred)
        elif pred:
            note = f"predecessor {pred} is missing"
        elif node.caller not in ("", "ROOT"):
            if node.caller in nodes:
                parents.append(node.caller)
            elif spawn_root:
                note = f"spawned from {node.caller} in another session"
        merged = merge_sources.get(nid)
        if merged:
            parents.extend(p for p in merged if p not in parents)
        markers: list[str] = []
        if nid == head_id:
            markers.append(HEAD_M)
        elif nid in listed:
            markers.append(TIP_M)
        if spawn_root and not pred:  # replies in a spawn branch share its source
            markers.append(SPAWN_M)
        if merged:
            markers.append(MERGE_M)
        if md.get("function") == "attach":
            target = md.get("attach")
            head = target.get("head_id") if hasattr(target, "get") else None
            note = f"attach pointer to {head}" if head else "attach pointer"
        covers = md.get("covers_ids")
        if isinstance(covers, tuple):
            note = f"covers {len(covers)} turns"
        role = node.role
        if md.get("display") == "root":
            text = "ROOT"
        elif role == "code":
            text = f"tool {sanitize(node.name) or '?'}"
        else:
            text = first_line(node.output)
        append(LayoutNode(
            id=nid,
            parents=tuple(parents),
            seq=node.seq,
            state=state_of(nid),
            markers=tuple(markers),
            role=role,
            text=text,
            note=note,
            tool=role == "code" and not pred,
        ))
    for uid, u in unreadable.items():
        pred = u.predecessor
        append(LayoutNode(
            id=uid,
            parents=(pred,) if pred and (pred in nodes or pred in unreadable) else (),
            seq=u.seq if u.seq is not None else 0,
            state=UNREADABLE_S,
            role="unreadable",
            text=sanitize(u.file.rsplit("/", 1)[-1]),
            note=sanitize(f"unreadable: {u.code}: {u.message}"),
        ))
    if deco is not NO_DECORATIONS:
        out = _decorate(out, session, deco)
    return tuple(out)


def _merge_sources(session: Session) -> dict[str, tuple[str, ...]]:
    """Which merge turn absorbed which hidden tip.

    The files record the absorbed tips (``merged_heads``, non-primary context-commit parents)
    but not the merge turn that absorbed them, so each goes to the first runtime ``merge_turn``
    user node appended after it (a merge always follows the heads it merges).
    """
    absorbed = [h for h in (*session.merged_heads, *session.commit_parent_heads) if session.get(h) is not None]
    merges = [session.nodes[i] for i in session.order
              if session.nodes[i].role == "user" and session.nodes[i].source == "merge_turn"]
    out: dict[str, list[str]] = {}
    for head in dict.fromkeys(absorbed):
        seq = session.nodes[head].seq
        target = next((m for m in merges if m.seq > seq), None)
        if target is not None and target.id != head:
            out.setdefault(target.id, []).append(head)
    return {k: tuple(v) for k, v in out.items()}


def verdict_kind(session: Session, verdicts: Mapping[str, TurnVerdict], nid: str) -> tuple[str, bool]:
    """The kind (``overview.*_K``) of a node's best verdict as the engine gives it, and whether
    that verdict counts a mark of another workspace: what the overview computes in one pass."""
    if session.nodes[nid].is_root:
        return O.ROOT_K, False
    verdict = verdicts[nid]
    if verdict.tip is None:  # only a node on no tip's walk has a verdict naming no tip
        return O.OFFLINE_K, False
    codes = {r.code for r in verdict.reasons}
    if verdict.verdict == WRITTEN:
        return O.WRITTEN_K, False
    if verdict.verdict == PENDING:
        kind = O.PENDING_K
    elif "stranded_behind_mark" in codes:
        kind = O.STRANDED_K
    elif "archived_branch" in codes:
        kind = O.ARCHIVED_K  # pending on an archived tip that is not the head: its reasons say so
    elif "rewound" in codes:
        kind = O.REWOUND_K
    else:
        kind = O.EXCLUDED_K
    return kind, "marked_other_workspace" in codes


def node_state(session: Session, nid: str, kind: str, foreign: bool) -> str:
    """The graph state of a node from the kind of its best verdict (``overview.*_K``) and
    whether it is marked by another workspace (``overview.foreign_ids``)."""
    if kind == O.ROOT_K:
        return ROOT_S
    if kind == O.WRITTEN_K:
        return WRITTEN_S
    node = session.nodes[nid]
    if node.rewound or kind == O.REWOUND_K:
        return REWOUND_S
    if node.covers_ids is not None or (kind == O.OFFLINE_K and is_compaction_summary(node)):
        return SUMMARY_S
    if kind == O.STRANDED_K:
        return STRANDED_S
    if foreign and kind in (O.PENDING_K, O.ARCHIVED_K):
        return FOREIGN_S
    if kind == O.PENDING_K:
        return PENDING_S
    if node.is_attach or node.role == "code":
        return INELIGIBLE_S
    if kind in (O.ARCHIVED_K, O.OFFLINE_K):
        return HELD_S  # its verdict carries archived_branch, or not_on_live_branch
    return INELIGIBLE_S


# --------------------------------------------------------------------------- layout


@dataclass
class _DNode:
    id: str
    parents: list[str]
    seq: int
    members: tuple[str, ...]
    node: LayoutNode | None  # None for a collapsed row
    text: str = ""


def _resolve(nodes: Sequence[LayoutNode]) -> tuple[dict[str, LayoutNode], dict[str, tuple[str, ...]]]:
    by_id: dict[str, LayoutNode] = {}
    for n in nodes:
        by_id.setdefault(n.id, n)  # a duplicate id keeps its first occurrence
    parents = {nid: tuple(dict.fromkeys(p for p in n.parents if p in by_id and p != nid)) for nid, n in by_id.items()}
    return by_id, parents


def _children(parents: Mapping[str, tuple[str, ...]], seq: Mapping[str, tuple[int, int]]) -> dict[str, list[str]]:
    kids: dict[str, list[str]] = {}
    for nid in sorted(parents, key=seq.__getitem__):
        for p in parents[nid]:
            kids.setdefault(p, []).append(nid)
    return kids


def _groups(by_id: Mapping[str, LayoutNode], parents: Mapping[str, tuple[str, ...]],
            kids: Mapping[str, list[str]], seq: Mapping[str, tuple[int, int]], opts: LayoutOptions) -> dict[str, tuple[str, ...]]:
    """Every foldable group: tool runs under one node, and long linear runs."""
    groups: dict[str, tuple[str, ...]] = {}
    taken: set[str] = set()
    for pid, children in kids.items():
        tools = [c for c in children if by_id[c].tool and not kids.get(c) and parents[c] == (pid,)]
        if len(tools) >= opts.tool_min:
            groups[f"tools:{pid}"] = tuple(tools)
            taken.update(tools)

    def plain(nid: str) -> bool:
        n = by_id[nid]
        return (nid not in taken and len(parents[nid]) == 1 and len(kids.get(nid, ())) == 1
                and not n.markers and n.state not in (ROOT_S, SUMMARY_S))

    for nid in sorted(by_id, key=seq.__getitem__):
        if not plain(nid) or nid in taken:
            continue
        prev = parents[nid][0]
        if plain(prev) and kids.get(prev) == [nid]:
            continue  # not the start of a run
        run = [nid]
        cur = nid
        while True:
            nxt = kids[cur][0]
            if not plain(nxt) or parents[nxt] != (cur,):
                break
            run.append(nxt)
            cur = nxt
        keep = opts.linear_keep
        if len(run) > opts.linear_min and len(run) > 2 * keep + 1:
            inner = tuple(run[keep:len(run) - keep])
            groups[f"run:{inner[0]}"] = inner
            taken.update(inner)
    return groups


def _topo(dnodes: dict[str, _DNode]) -> tuple[list[str], list[tuple[str, str]]]:
    """Parents before children, ``seq`` breaking ties; edges that close a cycle are dropped."""
    indeg = {k: 0 for k in dnodes}
    kids: dict[str, list[str]] = {}
    for k, d in dnodes.items():
        for p in d.parents:
            indeg[k] += 1
            kids.setdefault(p, []).append(k)
    heap = [(dnodes[k].seq, k) for k, v in indeg.items() if v == 0]
    heapq.heapify(heap)
    order: list[str] = []
    done: set[str] = set()
    dropped: list[tuple[str, str]] = []
    remaining: list[str] | None = None  # sorted only when a cycle needs it
    while len(order) < len(dnodes):
        if not heap:  # a cycle: release the oldest blocked node, dropping its unmet edges
            if remaining is None:
                remaining = sorted(dnodes, key=lambda k: (dnodes[k].seq, k))
            k = next(x for x in remaining if x not in done)
            unmet = [p for p in dnodes[k].parents if p not in done]
            dropped.extend((p, k) for p in unmet)
            dnodes[k].parents = [p for p in dnodes[k].parents if p in done]
            for p in unmet:
                kids[p].remove(k)
            indeg[k] = 0
            heapq.heappush(heap, (dnodes[k].seq, k))
        _, k = heapq.heappop(heap)
        if k in done:
            continue
        done.add(k)
        order.append(k)
        for c in kids.get(k, ()):
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(heap, (dnodes[c].seq, c))
    return order, dropped


def _hline(cells: list[int], hgap: list[bool], a: int, b: int) -> None:
    if a == b:
        return
    lo, hi = min(a, b), max(a, b)
    cells[lo] |= R
    cells[hi] |= L
    for i in range(lo + 1, hi):
        cells[i] |= L | R
    for i in range(lo, hi):
        hgap[i] = True


def _grow(lst: list, n: int, fill) -> None:
    while len(lst) < n:
        lst.append(fill)


def layout(nodes: Sequence[LayoutNode], options: LayoutOptions | None = None) -> Layout:
    """Rows of lane cells for ``nodes`` (any order; unknown parent ids are ignored)."""
    opts = options or LayoutOptions()
    by_id, parents = _resolve(nodes)
    seq = {nid: (n.seq, i) for i, (nid, n) in enumerate(by_id.items())}
    kids = _children(parents, seq)
    groups = _groups(by_id, parents, kids, seq, opts)
    folded = {gid: m for gid, m in groups.items() if opts.collapse and gid not in opts.expanded}
    dnodes = _display_nodes(by_id, parents, folded)
    order, dropped = _topo(dnodes)
    dkids = _display_children(dnodes, order)
    gap_at = _seq_gaps(by_id)

    rows: list[Row] = []
    lanes: list[tuple[str, str] | None] = []
    for k in order:
        d = dnodes[k]
        gap = _gap_row(d, by_id, gap_at, lanes)
        if gap is not None:
            rows.append(gap)
        row, lanes = _node_row(k, d, lanes, dkids.get(k, []))
        rows.append(row)

    rows = [r if r.kind != "gap" else _trim(r) for r in rows]
    if opts.reverse:
        rows = [_flip(r) for r in reversed(rows)]
    row_of: dict[str, int] = {}
    for i, r in enumerate(rows):
        for m in r.members:
            row_of[m] = i
    return Layout(
        rows=tuple(rows),
        nodes=by_id,
        row_of=row_of,
        parents=parents,
        collapsible=groups,
        lanes=max((r.width for r in rows), default=0),
        options=opts,
        dropped_edges=tuple(dropped),
        children={k: tuple(v) for k, v in kids.items()},
    )


def _display_nodes(by_id: Mapping[str, LayoutNode], parents: Mapping[str, tuple[str, ...]],
                   folded: Mapping[str, tuple[str, ...]]) -> dict[str, _DNode]:
    """One display node per node, except that a folded group is one node for all its members;
    a display node's parents are its members' parents, seen through the folding."""
    owner = {m: gid for gid, members in folded.items() for m in members}
    dnodes: dict[str, _DNode] = {}
    for nid, n in by_id.items():
        gid = owner.get(nid)
        if gid is not None:
            if gid not in dnodes:
                members = folded[gid]
                dnodes[gid] = _DNode(gid, [], by_id[members[0]].seq, members, None, _group_text(gid, members, by_id))
            continue
        dnodes[nid] = _DNode(nid, [], n.seq, (nid,), n, n.text)
    for key, d in dnodes.items():
        ps: list[str] = []
        for m in d.members:
            for p in parents[m]:
                pk = owner.get(p, p)
                if pk != key and pk not in ps:
                    ps.append(pk)
        d.parents = ps
    return dnodes


def _display_children(dnodes: Mapping[str, _DNode], order: list[str]) -> dict[str, list[str]]:
    """Each display node's children in row order, the conversation's own next turn first (it
    keeps its parent's lane)."""
    pos = {k: i for i, k in enumerate(order)}
    dkids: dict[str, list[str]] = {}
    for k in order:
        for p in dnodes[k].parents:
            dkids.setdefault(p, []).append(k)
    for p, cs in dkids.items():
        cs.sort(key=pos.__getitem__)
        main = next((c for c in cs if dnodes[c].parents[0] == p and _conversational(dnodes[c])
                     and SPAWN_M not in dnodes[c].node.markers), None)
        if main is not None:
            cs.remove(main)
            cs.insert(0, main)
    return dkids


def _seq_gaps(by_id: Mapping[str, LayoutNode]) -> dict[int, tuple[int, int]]:
    """Seq gaps: reported before the row holding the first node after the hole (keyed by its seq)."""
    seqs = sorted({n.seq for n in by_id.values()})
    gap_at: dict[int, tuple[int, int]] = {}
    for a, b in zip(seqs, seqs[1:]):
        if b > a + 1:
            gap_at[b] = (a + 1, b - 1)
    return gap_at


def _gap_row(d: _DNode, by_id: Mapping[str, LayoutNode], gap_at: dict[int, tuple[int, int]],
             lanes: list[tuple[str, str] | None]) -> Row | None:
    """The gap row due before ``d``'s row (its hole is taken out of ``gap_at``), if any."""
    for m in d.members:
        hole = gap_at.pop(by_id[m].seq, None)
        if hole is not None:
            live = tuple(lanes)
            return Row("gap", f"gap:{hole[0]}", -1, tuple(U | D if e else 0 for e in live),
                       tuple(False for _ in live), live, live, text=_gap_text(*hole))
    return None


def _node_row(k: str, d: _DNode, lanes: list[tuple[str, str] | None],
              children: list[str]) -> tuple[Row, list[tuple[str, str] | None]]:
    """The row of display node ``k`` under the ``lanes`` coming down from above, and the lanes
    that leave it downwards (one per edge still to be drawn)."""
    above = list(lanes)
    incoming = [i for i, e in enumerate(above) if e is not None and e[1] == k]
    if incoming:
        p = incoming[0]
        # Slide into a free block directly to the left: that is where lanes compact.
        while p > 0 and above[p - 1] is None:
            p -= 1
    else:
        p = next((i for i, e in enumerate(above) if e is None), len(above))
    _grow(above, p + 1, None)
    width = len(above)
    cells = [0] * width
    hgap = [False] * width
    for i, e in enumerate(above):
        if e is not None:
            cells[i] |= U
    for i in incoming:
        _hline(cells, hgap, i, p)
    below = list(above)
    for i in incoming:
        below[i] = None
    src: dict[int, int] = {}  # lane in ``below`` -> where its line leaves this row
    for i, e in enumerate(below):
        if e is not None:
            src[i] = i
    if children:
        below[p] = (k, children[0])
        src[p] = p
        for c in children[1:]:
            # Not a lane an incoming line used in this row: the two would share a cell.
            q = next((i for i, e in enumerate(below) if e is None and (i == p or i not in incoming)), len(below))
            _grow(below, q + 1, None)
            below[q] = (k, c)
            src[q] = p
    placed = _compact(below, src, p, cells, hgap)
    final: list[tuple[str, str] | None] = [None] * (max(placed) + 1 if placed else 0)
    for j, e in placed.items():
        final[j] = e
    width = max(len(cells), len(above), len(final))
    _grow(cells, width, 0)
    _grow(hgap, width, False)
    _grow(above, width, None)
    _grow(final, width, None)
    # Drop empty lanes on the right (as _trim does) so a row's width is what it draws.
    n = width
    while n > 0 and cells[n - 1] == 0 and above[n - 1] is None and final[n - 1] is None and p != n - 1:
        n -= 1
    row = Row("node" if d.node is not None else "collapsed", k, p, tuple(cells[:n]), tuple(hgap[:n]),
              tuple(above[:n]), tuple(final[:n]), d.node, d.members, d.text)
    return row, final[:len(placed) and max(placed) + 1]


def _compact(below: list[tuple[str, str] | None], src: Mapping[int, int], p: int, cells: list[int],
             hgap: list[bool]) -> dict[int, tuple[str, str]]:
    """Where each lane of ``below`` leaves the row (drawing its line into ``cells``/``hgap``).
    Compaction: lanes passing through slide left over the holes that are left, but never
    across this row's node or its new edges (a crossing there would read as their edge)."""
    fixed = {i for i, e in enumerate(below) if e is not None and src[i] == p}
    placed: dict[int, tuple[str, str]] = {i: below[i] for i in fixed}
    for i in fixed:
        _grow(cells, i + 1, 0)
        _grow(hgap, i + 1, False)
        _hline(cells, hgap, p, i)
        cells[i] |= D
    prev = -1
    for i, e in enumerate(below):
        if e is None or i in fixed:
            continue
        lo = max(prev + 1, p + 1 if i > p else 0, max((f + 1 for f in fixed if f < i), default=0))
        # Only over cells this row leaves empty, so no two lines share a cell.
        j = i
        while j - 1 >= lo and (j - 1) not in placed and cells[j - 1] == 0 and not hgap[j - 1]:
            j -= 1
        placed[j] = e
        prev = j
        _hline(cells, hgap, i, j)
        cells[j] |= D
    return placed


def _conversational(d: _DNode) -> bool:
    n = d.node
    return n is not None and not n.tool and n.state != SUMMARY_S and "attach" not in n.note


def _group_text(gid: str, members: tuple[str, ...], by_id: Mapping[str, LayoutNode]) -> str:
    if gid.startswith("tools:"):
        names = list(dict.fromkeys(by_id[m].text.removeprefix("tool ") for m in members))
        shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
        return f"{len(members)} tool rows ({shown})"
    counts: dict[str, int] = {}
    for m in members:
        counts[by_id[m].state] = counts.get(by_id[m].state, 0) + 1
    parts = ", ".join(f"{v} {k}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"{len(members)} turns ({parts})"


def _gap_text(lo: int, hi: int) -> str:
    span = f"seq {lo}" if lo == hi else f"seq {lo}-{hi}"
    return f"{span} missing (deleted nodes)"


def _trim(r: Row) -> Row:
    """Drop empty lanes on the right so a row's width is what it draws."""
    n = len(r.cells)
    while n > 0 and r.cells[n - 1] == 0 and r.above[n - 1] is None and r.below[n - 1] is None and r.lane != n - 1:
        n -= 1
    hgap = tuple(r.hgap[:n])
    return Row(r.kind, r.id, r.lane, r.cells[:n], hgap, r.above[:n], r.below[:n], r.node, r.members, r.text)


def _flip(r: Row) -> Row:
    cells = tuple((c & ~(U | D)) | (D if c & U else 0) | (U if c & D else 0) for c in r.cells)
    return Row(r.kind, r.id, r.lane, cells, r.hgap, r.below, r.above, r.node, r.members, r.text)


# --------------------------------------------------------------------------- caching


_CACHE: "OrderedDict[tuple, tuple[tuple[LayoutNode, ...], Layout]]" = keeps(OrderedDict())
_CACHE_SIZE = 32


def session_fingerprint(session_id: str, nodes: Sequence[LayoutNode]) -> tuple:
    """Everything the layout depends on (node ids, edges, states, markers, texts), hashed. A hit
    is confirmed against the stored nodes, so two session states never share a layout."""
    return (session_id, hash(tuple(nodes)), len(nodes))


def _cached(key: tuple, nodes: tuple[LayoutNode, ...], opts: LayoutOptions, compute: Callable | None = None) -> Layout | None:
    hit = _CACHE.get(key)
    if hit is not None and (hit[0] is nodes or hit[0] == nodes):
        _CACHE.move_to_end(key)
        return hit[1]
    # ``compute`` may read a big session's layout from the table kept between processes
    # (``layout_table.layout``: the app's open of an unchanged session).
    result = (compute or layout)(nodes, opts)
    if result is None:  # ``compute`` only looked (``layout_table.lookup``): nothing to keep
        return None
    _CACHE[key] = (nodes, result)
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return result


def cached_layout(session_id: str, nodes: Sequence[LayoutNode], options: LayoutOptions | None = None) -> Layout:
    """:func:`layout`, computed once per (session fingerprint, options)."""
    opts = options or LayoutOptions()
    frozen = tuple(nodes)
    return _cached((session_fingerprint(session_id, frozen), opts), frozen, opts)


_NODES: "OrderedDict[tuple, tuple[weakref.ref, tuple[LayoutNode, ...], tuple]]" = keeps(OrderedDict())


def _memo_nodes(source: Any, build: Callable[..., tuple[LayoutNode, ...]], deco: Decorations = NO_DECORATIONS
                ) -> tuple[tuple[LayoutNode, ...], tuple]:
    """Layout nodes and fingerprint of one explanation or overview object (with its
    decorations), derived once (both are immutable snapshots; a reload makes new ones)."""
    key = (id(source), deco)
    hit = _NODES.get(key)
    if hit is not None and hit[0]() is source:
        _NODES.move_to_end(key)
        return hit[1], hit[2]
    nodes = build(source, deco)
    fp = session_fingerprint(source.session.id, nodes)
    _NODES[key] = (weakref.ref(source), nodes, fp)
    if len(_NODES) > _CACHE_SIZE:
        _NODES.popitem(last=False)
    return nodes, fp


def layout_overview(ov: O.SessionOverview, options: LayoutOptions | None = None, compute: Callable | None = None,
                    deco: Decorations = NO_DECORATIONS) -> Layout | None:
    """:func:`layout_session` from the one-pass overview: equal nodes, the same cache (``None``
    only when ``compute`` returns it: a lookup that does not lay out)."""
    nodes, fp = _memo_nodes(ov, nodes_from_overview, deco)
    opts = options or LayoutOptions()
    return _cached((fp, opts), nodes, opts, compute)


def layout_session(se: SessionExplanation, options: LayoutOptions | None = None, compute: Callable | None = None,
                   deco: Decorations = NO_DECORATIONS) -> Layout:
    """The session's layout, computed once per (session fingerprint, options)."""
    nodes, fp = _memo_nodes(se, nodes_from_session, deco)
    opts = options or LayoutOptions()
    return _cached((fp, opts), nodes, opts, compute)


# --------------------------------------------------------------------------- lineage


@dataclass(frozen=True)
class Lineage:
    node: str
    ancestors: frozenset[str]  # back to the root(s), the node excluded
    descendants: frozenset[str]  # forward to every tip, the node excluded

    @property
    def ids(self) -> frozenset[str]:
        return self.ancestors | self.descendants | {self.node}


def lineage(lay: Layout, node_id: str) -> Lineage:
    """Ancestors to the root and descendants to the tips of ``node_id`` (for highlighting)."""
    return Lineage(node_id, _reach(node_id, lay.parents), _reach(node_id, lay.children))


def _reach(start: str, edges: Mapping[str, Iterable[str]]) -> frozenset[str]:
    seen = {start}
    stack = list(edges.get(start, ()))
    get, add, extend, pop = edges.get, seen.add, stack.extend, stack.pop
    while stack:
        cur = pop()
        if cur in seen:
            continue
        add(cur)
        extend(get(cur, ()))
    seen.discard(start)
    return frozenset(seen)


# --------------------------------------------------------------------------- drawing


@dataclass(frozen=True)
class DrawnRow:
    graph: str  # the lane cells, at most 2 * max_lanes characters
    markers: str
    label: str

    def line(self) -> str:
        parts = [self.graph.rstrip()]
        if self.markers:
            parts.append(self.markers)
        if self.label:
            parts.append(self.label)
        return " ".join(parts)


def draw_graph(row: Row, g: GlyphSet, max_lanes: int | None = None) -> str:
    """The lane part of one row. Lanes from ``max_lanes`` on fold into one marker slot."""
    width = row.width
    limit = width if max_lanes is None or width <= max_lanes else max(1, max_lanes)
    folded = width > limit
    shown = limit - 1 if folded else limit
    out: list[str] = []
    for i in range(shown):
        if i == row.lane:
            out.append(_node_glyph(row, g))
        else:
            out.append(g.box[row.cells[i]])
        out.append(g.horizontal if i < len(row.hgap) and row.hgap[i] else " ")
    if folded:
        out.append(g.fold)
        out.append(_node_glyph(row, g) if row.lane >= shown else " ")
    return "".join(out)


def _node_glyph(row: Row, g: GlyphSet) -> str:
    if row.kind == "collapsed":
        return g.states[COLLAPSED_S]
    if row.node is None:
        return g.box[row.cells[row.lane]] if 0 <= row.lane < len(row.cells) else " "
    return g.states.get(row.node.state, "?")


def draw_row(row: Row, g: GlyphSet, max_lanes: int | None = None, *, short_ids: bool = False) -> DrawnRow:
    graph = draw_graph(row, g, max_lanes)
    if row.kind == "gap":
        return DrawnRow(graph, "", f"{g.gap} {row.text}")
    if row.kind == "collapsed":
        return DrawnRow(graph, "", f"[+] {row.text}")
    n = row.node
    assert n is not None
    markers = "".join(g.markers[m] for m in n.markers)
    ident = n.id if not short_ids or len(n.id) <= 14 else n.id[:13] + "…"
    label = ident
    if n.text:
        label += f"  {n.text}"
    if n.note:
        label += f"  ({n.note})"
    return DrawnRow(graph, markers, label)


def draw(lay: Layout, *, ascii: bool = False, max_lanes: int | None = None, width: int | None = None) -> list[str]:
    """The whole graph as plain strings (golden tests, ``why --graph``)."""
    g = glyphs(ascii)
    out = []
    for row in lay.rows:
        line = draw_row(row, g, max_lanes).line()
        if width is not None and len(line) > width:
            cut = "..." if ascii else "…"
            line = line[: max(0, width - len(cut))] + cut
        out.append(line.rstrip())
    return out


__all__ = [
    "ASCII", "UTF8", "GlyphSet", "LEGEND", "MARKER_LEGEND", "Layout", "LayoutNode", "LayoutOptions", "Lineage", "Row",
    "DrawnRow", "STATES", "MARKERS", "cached_layout", "first_line", "draw", "draw_graph", "draw_row", "glyphs", "layout",
    "layout_session", "legend_lines", "lineage", "nodes_from_session", "session_fingerprint",
]
