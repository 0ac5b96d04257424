"""Where a cited source sits in its conversation: session, node, and the node's ancestry.

A source id ``openprogram/<session>/<node>`` names one session node (memory spec §4.1). Other
providers (``claude-code``, ``channel-*``, legacy ``D<n>:<m>`` refs) have a thread but no
session DAG; their thread is still an episode, just one without branches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from memory_tui.core.format.sources import parse_d_ref, split_source_id
from memory_tui.sessions.dag import walk_chain
from memory_tui.sessions.store import ROOT_ID, Session, SessionSnapshot

OPENPROGRAM = "openprogram"


@dataclass(frozen=True, slots=True)  # one per record/citation, built on every reload
class SourcePlace:
    """The episode a source id belongs to: ``episode`` = ``provider/thread`` (or ``D<n>``)."""

    source_id: str
    episode: str
    session_id: str | None  # the session id when the provider is ``openprogram``
    node_id: str | None


def place_of(source_id: str) -> SourcePlace:
    parts = split_source_id(source_id)
    if parts is not None:
        provider, thread, message = parts
        if provider == OPENPROGRAM:
            return SourcePlace(source_id, f"{provider}/{thread}", thread, message)
        return SourcePlace(source_id, f"{provider}/{thread}", None, None)
    d = parse_d_ref(source_id)
    if d is not None:
        return SourcePlace(source_id, f"D{d[0]}", None, None)
    return SourcePlace(source_id, source_id, None, None)


_SHIFT = 32  # DFS clocks count 2 per node: a session would need 2**31 nodes to overflow
_LOW = (1 << _SHIFT) - 1


def _within(inner: int, outer: int) -> bool:
    """Packed DFS times: is ``inner``'s interval inside ``outer``'s?"""
    return outer >> _SHIFT <= inner >> _SHIFT and inner & _LOW <= outer & _LOW


@dataclass
class SessionLineage:
    """Predecessor ancestry of the nodes of one session, computed once per node.

    The conversation chain is the ``predecessor`` edge (session spec §3.1); a predecessor of
    ``"ROOT"`` with no ROOT node on disk is kept as a virtual common root, so two first-turn
    retries still share a fork point.
    """

    session: Session
    _chains: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    _members: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)
    # a node's DFS (entry, exit) times packed in one int, entry << 32 | exit, and a
    # single child kept as its id rather than a one-element list.
    _times: dict[str, int] | None = field(default=None, repr=False)
    _children: dict[str, str | list[str]] = field(default_factory=dict, repr=False)

    def chain(self, node_id: str) -> tuple[str, ...]:
        """Node ids root→``node_id`` (empty when the node is unknown)."""
        hit = self._chains.get(node_id)
        if hit is not None:
            return hit
        nodes = walk_chain(self.session, node_id).nodes
        ids = tuple(n.id for n in nodes)
        if ids and ids[0] != ROOT_ID and nodes[0].predecessor == ROOT_ID:
            ids = (ROOT_ID,) + ids
        self._chains[node_id] = ids
        return ids

    def contains(self, ancestor: str, node_id: str) -> bool:
        """Is ``ancestor`` on ``node_id``'s chain (a node contains itself)?

        Answered from DFS entry/exit times over the predecessor tree in O(1); a node the
        DFS never reached (it sits on a predecessor cycle) falls back to its walked chain."""
        times = self._ensure_times()
        tn, ta = times.get(node_id), times.get(ancestor)
        if tn is not None and ta is not None:
            return _within(tn, ta)
        members = self._members.get(node_id)
        if members is None:
            members = self._members[node_id] = frozenset(self.chain(node_id))
        return ancestor in members

    def _ensure_times(self) -> dict[str, int]:
        if self._times is None:
            self._times = self._euler()
        return self._times

    def forks(self) -> list[str]:
        """Nodes (the virtual ROOT included) with two or more predecessor-children."""
        self._ensure_times()
        return [n for n, kids in self._children.items() if type(kids) is list and len(kids) >= 2]

    def line_of(self, fork: str, node_id: str) -> str | None:
        """The child of ``fork`` whose subtree holds ``node_id`` (None: not below ``fork``)."""
        times = self._ensure_times()
        t = times.get(node_id)
        if t is None:
            return None
        kids = self._children.get(fork, ())
        for child in (kids,) if type(kids) is str else kids:
            tc = times.get(child)
            if tc is not None and _within(t, tc):
                return child
        return None

    def _euler(self) -> dict[str, int]:
        nodes = self.session.nodes
        children: dict[str, list[str]] = {}
        roots: list[str] = []
        for nid in self.session.order:
            pred = nodes[nid].predecessor
            if pred and pred in nodes:
                children.setdefault(pred, []).append(nid)
            elif pred == ROOT_ID:  # the virtual common root of first turns (see chain())
                children.setdefault(ROOT_ID, []).append(nid)
            else:
                roots.append(nid)
        if ROOT_ID in children and ROOT_ID not in nodes:
            roots.append(ROOT_ID)
        times: dict[str, int] = {}
        clock = 0
        for root in roots:
            stack: list[tuple[str, bool]] = [(root, False)]
            entered: dict[str, int] = {}
            while stack:
                nid, done = stack.pop()
                if done:
                    times[nid] = entered[nid] << _SHIFT | clock
                    clock += 1
                    continue
                if nid in entered or nid in times:
                    continue
                entered[nid] = clock
                clock += 1
                stack.append((nid, True))
                stack.extend((c, False) for c in reversed(children.get(nid, ())))
        self._children = {k: v[0] if len(v) == 1 else v for k, v in children.items()}
        return times

    def fork_point(self, a: str, b: str) -> str | None:
        """The last node both chains share, or None when they share none."""
        last = None
        for x, y in zip(self.chain(a), self.chain(b)):
            if x != y:
                break
            last = x
        return last

    def siblings(self, a: str, b: str) -> bool:
        """Two lines forking from one node, neither containing the other."""
        if not self.chain(a) or not self.chain(b):
            return False
        if self.contains(a, b) or self.contains(b, a):
            return False
        return self.fork_point(a, b) is not None


def episode_lines(lineage: SessionLineage | None, nodes: frozenset[str]) -> int:
    """Distinct lines of conversation over one episode's cited ``nodes``: the nodes the
    session holds of which no other one descends; an episode with none of them (no DAG, no
    such node) is one line."""
    if lineage is None:
        return 1
    known = sorted(n for n in nodes if lineage.session.get(n) is not None)
    if not known:
        return 1
    return sum(1 for n in known if not any(other != n and lineage.contains(n, other) for other in known))


class Lineages:
    """One :class:`SessionLineage` per session of a snapshot, built on first use (and kept), or
    handed out one session at a time by :meth:`visit`."""

    def __init__(self, sessions: SessionSnapshot | None) -> None:
        from memory_tui.sessions.ondemand import is_on_demand

        self._sessions: Mapping[str, Session] = sessions.sessions if sessions is not None else {}
        self._cache: dict[str, SessionLineage] = {}
        # sessions read when asked for are not held by the snapshot: a lineage kept of each
        # cited one keeps its shape, not every turn's words (the app's peak memory)
        self._shape = is_on_demand(sessions)

    def get(self, session_id: str | None) -> SessionLineage | None:
        if session_id is None:
            return None
        hit = self._cache.get(session_id)
        if hit is None:
            hit = self._build(session_id)
            if hit is not None:
                self._cache[session_id] = hit
        return hit

    def _build(self, session_id: str) -> SessionLineage | None:
        # sessions read on demand: their shape, from the shape table (unchanged node files
        # are not read again)
        session = self._sessions.shape_of(session_id) if self._shape else self._sessions.get(session_id)
        return SessionLineage(session) if session is not None else None

    def visit(self, session_ids: Iterable[str], *visitors: Callable[[str, SessionLineage], None]) -> None:
        """Hand each session's lineage to every visitor, one session at a time: one not already
        held here is let go after its visit. Every cited session's lineage alive at once was
        the app's peak memory (the insight figures at scale 4: 800 shapes, ~160 MB)."""
        for sid in session_ids:
            lineage = self._cache.get(sid) or self._build(sid)
            if lineage is not None:
                for visitor in visitors:
                    visitor(sid, lineage)

    def has_node(self, place: SourcePlace) -> bool:
        lineage = self.get(place.session_id)
        return lineage is not None and place.node_id is not None and lineage.session.get(place.node_id) is not None
