"""Records that came from mutually exclusive branches of one conversation.

Two records are *alternatives* when one cites a turn on one branch of a session and the
other cites a turn on a sibling branch: the two turns' chains fork from the same node and
neither turn contains the other ("uses Flask" after one retry, "uses FastAPI" after
another). The topic format cannot say this; it is display only and nothing is written.

A pair is reported once per record pair and session, with the most specific fork point
(the deepest common node of any two such turns), and which side the session's current
head is on (``"a"``, ``"b"``, or None when the head is on neither line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from memory_tui.sessions.store import SessionSnapshot

from .lineage import Lineages, SessionLineage, place_of


@dataclass(frozen=True)
class AlternativeSide:
    side: str  # "a" | "b"
    memory_id: str
    topic_path: str  # workspace-relative
    line: int
    content: str
    node_id: str  # the cited turn on this side's branch
    on_head: bool  # the session's head descends from (or is) this turn

    def to_json(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "topic_path": self.topic_path,
            "line": self.line,
            "content": self.content,
            "node_id": self.node_id,
            "on_head": self.on_head,
        }


@dataclass(frozen=True)
class AlternativePair:
    session_id: str
    fork_point: str
    head_id: str | None
    a: AlternativeSide
    b: AlternativeSide

    @property
    def head_side(self) -> str | None:
        if self.a.on_head:
            return "a"
        if self.b.on_head:
            return "b"
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "fork_point": self.fork_point,
            "head_id": self.head_id,
            "head_side": self.head_side,
            "a": self.a.to_json(),
            "b": self.b.to_json(),
        }


def alternatives(view: Any, sessions: SessionSnapshot | None, *, lineages: Lineages | None = None) -> tuple[AlternativePair, ...]:
    """Every pair of records citing sibling branches of one session, in tree order."""
    if view.tree is None or sessions is None:
        return ()
    lineages = lineages if lineages is not None else Lineages(sessions)
    # session -> [(unit index, unit, node id)] of every cited node that exists in the session
    cited: dict[str, list[tuple[int, Any, str]]] = {}
    for index, unit in enumerate(view.tree.units):
        if unit.is_alias:  # an alias repeats its identity's content and evidence
            continue
        seen: set[tuple[str, str]] = set()
        for ref in unit.source_refs:
            place = place_of(ref)
            if place.node_id is None or not lineages.has_node(place):
                continue
            key = (place.session_id or "", place.node_id)
            if key not in seen:
                seen.add(key)
                cited.setdefault(key[0], []).append((index, unit, place.node_id))
    pairs: list[tuple[tuple[int, int, str], AlternativePair]] = []
    for session_id, entries in cited.items():
        lineage = lineages.get(session_id)
        assert lineage is not None  # has_node() found it
        head = lineage.session.head_id
        nodes_of: dict[int, list[str]] = {}
        for idx, _unit, nid in entries:
            nodes_of.setdefault(idx, []).append(nid)

        def crosses(idx: int, other: str, depth: int) -> bool:
            """Does record ``idx`` also cite a turn on ``other``'s side of the fork? Then it
            summarises both branches and is no alternative to a record of that side."""
            for x in nodes_of[idx]:
                fp = lineage.fork_point(x, other)
                if fp is not None and len(lineage.chain(fp)) > depth:
                    return True
            return False

        # sibling tests run over distinct cited nodes (few per session), not over record pairs
        records_of: dict[str, list[int]] = {}
        for idx, _unit, nid in entries:
            records_of.setdefault(nid, []).append(idx)
        nodes = sorted(records_of)
        best: dict[tuple[int, int], tuple[int, str, str, str]] = {}  # -> (depth, fork, node a, node b)
        for i, na in enumerate(nodes):
            for nb in nodes[i + 1:]:
                if not lineage.siblings(na, nb):
                    continue
                fork = lineage.fork_point(na, nb)
                assert fork is not None  # siblings() checked it
                depth = len(lineage.chain(fork))
                for ia in records_of[na]:
                    for ib in records_of[nb]:
                        if ia == ib or crosses(ia, nb, depth) or crosses(ib, na, depth):
                            continue
                        (lo, nlo), (hi, nhi) = sorted(((ia, na), (ib, nb)))
                        key = (lo, hi)
                        if key not in best or depth > best[key][0] or (depth == best[key][0] and (nlo, nhi) < best[key][2:]):
                            best[key] = (depth, fork, nlo, nhi)
        units = view.tree.units
        for (lo, hi), (_depth, fork, nlo, nhi) in best.items():
            def side(name: str, idx: int, node_id: str) -> AlternativeSide:
                unit = units[idx]
                on_head = bool(head) and lineage.contains(node_id, head)
                return AlternativeSide(name, unit.memory_id, unit.path, unit.line, unit.content, node_id, on_head)

            pairs.append(((lo, hi, session_id), AlternativePair(session_id, fork, head, side("a", lo, nlo), side("b", hi, nhi))))
    pairs.sort(key=lambda item: item[0])
    return tuple(p for _, p in pairs)


@dataclass(frozen=True)
class ForkBranch:
    """One line leaving a fork point: the records citing it (each record once)."""

    first_node: str  # the fork point's child this line starts with
    on_head: bool
    records: tuple[AlternativeSide, ...]


@dataclass(frozen=True)
class ForkGroup:
    session_id: str
    fork_point: str
    head_id: str | None
    branches: tuple[ForkBranch, ...]  # in the order their first pair was reported


def group_by_fork(pairs: tuple[AlternativePair, ...], sessions: SessionSnapshot | None,
                  *, lineages: Lineages | None = None) -> tuple[ForkGroup, ...]:
    """The pairs folded per (session, fork point), one :class:`ForkBranch` per line leaving it:
    the readable form when many records sit on each side."""
    lineages = lineages if lineages is not None else Lineages(sessions)
    groups: dict[tuple[str, str], dict[str, list[AlternativeSide]]] = {}
    heads: dict[tuple[str, str], str | None] = {}
    for pair in pairs:
        lineage = lineages.get(pair.session_id)
        if lineage is None:
            continue
        key = (pair.session_id, pair.fork_point)
        heads[key] = pair.head_id
        lines = groups.setdefault(key, {})
        for side in (pair.a, pair.b):
            chain = lineage.chain(side.node_id)
            first = chain[chain.index(pair.fork_point) + 1]
            members = lines.setdefault(first, [])
            if all(m.memory_id != side.memory_id for m in members):
                members.append(side)
    out = []
    for (sid, fork), lines in groups.items():
        lineage = lineages.get(sid)
        head = heads[(sid, fork)]
        branches = tuple(
            ForkBranch(first, bool(head) and lineage is not None and lineage.contains(first, head), tuple(members))
            for first, members in lines.items()
        )
        out.append(ForkGroup(sid, fork, head, branches))
    return tuple(out)


@dataclass(frozen=True)
class Contested:
    """Which records have at least one alternative, and at how many fork points — without
    listing the pairs (whose number grows with the square of the records on each side)."""

    records: tuple[str, ...]  # memory ids, tree order
    forks: int  # (session, fork point) pairs with rival records on two of its lines


class Rivals:
    """What :func:`contested` asks of each cited session, answered one session at a time
    (:meth:`Lineages.visit`): the records whose cited nodes lie on rival lines of a fork."""

    def __init__(self, units: Sequence[Any]) -> None:
        self.asked: dict[str, dict[str, set[int]]] = {}  # session -> node -> record indexes
        for index, unit in enumerate(units):
            if unit.is_alias:
                continue
            for ref in unit.source_refs:
                place = place_of(ref)
                if place.node_id is not None and place.session_id is not None:
                    self.asked.setdefault(place.session_id, {}).setdefault(place.node_id, set()).add(index)
        self.hit: set[int] = set()
        self.forks = 0

    def visit(self, sid: str, lineage: SessionLineage) -> None:
        nodes = {n: recs for n, recs in self.asked.get(sid, {}).items() if lineage.session.get(n) is not None}
        if not nodes:
            return
        for fork in lineage.forks():
            lines: dict[str, set[int]] = {}  # first node of a line leaving the fork -> records on it
            for nid, recs in nodes.items():
                child = lineage.line_of(fork, nid)
                if child is not None:
                    lines.setdefault(child, set()).update(recs)
            if len(lines) < 2:
                continue
            found = False
            for l1, recs1 in lines.items():
                for l2, recs2 in lines.items():
                    if l1 == l2 or not (recs2 - recs1):
                        continue
                    winners = recs1 - recs2
                    if winners:
                        self.hit |= winners
                        found = True
            self.forks += found


def contested(view: Any, sessions: SessionSnapshot | None, *, lineages: Lineages | None = None,
              rivals: Rivals | None = None) -> Contested:
    """Record R has an alternative at fork f when R cites a line L1 leaving f, does not cite
    another line L2 leaving f, and some record cites L2 but not L1 — exactly when R is in a
    pair :func:`alternatives` reports. Cited nodes times fork points, each an O(1) test.
    ``rivals``: the units' sessions already visited (``summarize``)."""
    if view.tree is None or sessions is None:
        return Contested((), 0)
    units = view.tree.units
    if rivals is None:
        rivals = Rivals(units)
        (lineages if lineages is not None else Lineages(sessions)).visit(sorted(rivals.asked), rivals.visit)
    return Contested(tuple(units[i].memory_id for i in sorted(rivals.hit)), rivals.forks)
