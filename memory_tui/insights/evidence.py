"""How well-founded each record is, from its footnote citations and the cited source frames.

Per record (every unit of the topic tree, aliases included):

* ``sessions`` — distinct episodes cited: an episode is one conversation thread
  (``openprogram/<session>``, ``claude-code/<thread>``, ``D<n>``), counted once however many
  of its turns the record cites;
* ``days`` — distinct calendar days of the cited turns: the date of the frame's own timestamp
  as written (the speaker's local day); a frame without one falls back to the footnote's
  ``Time`` when that is a full ``YYYY-MM-DD``;
* ``branches`` — distinct lines of conversation: within one session, cited nodes of which one
  is an ancestor of another lie on one line, so the count is the number of cited nodes no
  other cited node descends from; an episode without a session DAG is one line;
* ``owner_backed`` — some cited turn was spoken by the owner (v2 ``source-meta``
  ``speaker_kind`` ``owner``, or a human turn with authority tier ``owner``);
  ``assistant_only`` — every resolved cited turn is the agent's own (``runtime`` /
  ``assistant`` speaker, or an ``llm`` node of the session);
* ``pending_sources`` — cited source ids whose archive frame is pending (unpaired speech);
  ``untrusted_sources`` — cited ids that are pending, not archived at all, or unresolvable;
* ``single_episode`` — at most one session and at most one day.

Nothing here writes; the inputs are a :class:`~memory_tui.core.store.workspace.StateView` and,
optionally, a :class:`~memory_tui.sessions.store.SessionSnapshot` (without it, branches and
node roles are not known and every episode counts as one line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, Callable, Iterable, Sequence

from memory_tui.core.format.sources import FrameFacts, SourceFrame
from memory_tui.core.format.topics import Unit
from memory_tui.sessions.store import SessionSnapshot

from .lineage import Lineages, SourcePlace, episode_lines, place_of

OWNER, ASSISTANT, OTHER, UNKNOWN = "owner", "assistant", "other", "unknown"
TRUSTED, PENDING, MISSING, UNRESOLVED = "trusted", "pending", "missing", "unresolved"
ASSISTANT_KINDS = frozenset({"runtime", "assistant", "agent", "model"})
_DAY_RE = re.compile(r"(\d{4}-\d{2}-\d{2})")


@dataclass(frozen=True, slots=True)  # one per record/citation, built on every reload
class CitedSource:
    """One cited source of a record, placed in its episode."""

    source_id: str | None  # None when the link target does not resolve to a source
    target: str  # the link target as written
    evidence_id: str
    episode: str | None
    session_id: str | None
    node_id: str | None
    day: str | None
    speaker: str  # owner | assistant | other | unknown
    trust: str  # trusted | pending | missing | unresolved

    def to_json(self) -> dict[str, Any]:
        return {
            "source_id": self.source_id,
            "target": self.target,
            "evidence_id": self.evidence_id,
            "episode": self.episode,
            "session_id": self.session_id,
            "node_id": self.node_id,
            "day": self.day,
            "speaker": self.speaker,
            "trust": self.trust,
        }


@dataclass(frozen=True, slots=True)
class EvidenceFigures:
    """One record's figures, what every view of its evidence shows and sorts by (the app's row
    is this with its text sanitised: ``tui.model.insights.EvidenceRowVM``)."""

    memory_id: str
    topic_path: str  # workspace-relative, "topics/people/ada.md"
    line: int
    content: str
    sessions: int
    days: int
    branches: int
    owner_backed: bool
    assistant_only: bool
    pending_sources: int
    untrusted_sources: int
    single_episode: bool

    @property
    def strength(self) -> tuple[int, int, int, int]:
        """A sort key, weakest first: episodes, days, lines, then owner backing."""
        return (self.sessions, self.days, self.branches, 1 if self.owner_backed else 0)


# the figures after the text fields, in field order (a view that rewrites the text keeps these)
COUNT_FIELDS = ("sessions", "days", "branches", "owner_backed", "assistant_only", "pending_sources",
                "untrusted_sources", "single_episode")


@dataclass(frozen=True, slots=True)  # one per record/citation, built on every reload
class RecordEvidence(EvidenceFigures):
    citations: tuple[CitedSource, ...]
    episodes: tuple[str, ...]  # distinct episodes, first-cited first
    day_list: tuple[str, ...]  # distinct days, sorted

    def to_json(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "topic_path": self.topic_path,
            "sessions": self.sessions,
            "days": self.days,
            "branches": self.branches,
            "owner_backed": self.owner_backed,
            "pending_sources": self.pending_sources,
            "single_episode": self.single_episode,
            "assistant_only": self.assistant_only,
            "untrusted_sources": self.untrusted_sources,
            "line": self.line,
            "episodes": list(self.episodes),
            "day_list": list(self.day_list),
            "citations": [c.to_json() for c in self.citations],
        }


# ------------------------------------------------------------------------------- classification


def speaker_kind(frame: SourceFrame | FrameFacts | None, node_role: str | None) -> str:
    """Who spoke a cited turn. The v2 meta decides; the session node's role breaks a tie."""
    if frame is None:
        return UNKNOWN
    meta = frame.meta
    if meta is not None:
        if meta.speaker_kind == OWNER or (meta.speaker_kind == "human" and meta.authority_tier == OWNER):
            return OWNER
        if meta.speaker_kind in ASSISTANT_KINDS:
            return ASSISTANT
    if node_role == "llm":
        return ASSISTANT
    label = (frame.speaker_label or "").strip().lower()
    if label == "assistant":
        return ASSISTANT
    if meta is not None and meta.speaker_kind not in ("", "unknown"):
        return OTHER
    return UNKNOWN


def _day(frame: SourceFrame | FrameFacts | None, when: str | None) -> str | None:
    if frame is not None and frame.timestamp:
        m = _DAY_RE.match(frame.timestamp)
        if m:
            return m.group(1)
    if when and len(when) == 10 and _DAY_RE.fullmatch(when):
        return when
    return None


def _trust(view: Any, source_id: str | None, frame: SourceFrame | FrameFacts | None) -> str:
    if source_id is None:
        return UNRESOLVED
    if view.sources.is_pending(source_id):
        return PENDING
    if view.sources.is_trusted(source_id):
        return TRUSTED
    if frame is None:
        return MISSING
    return PENDING if frame.pending else MISSING


# ------------------------------------------------------------------------------- computation


class CitedNodes:
    """What the evidence of a set of records needs of their cited sessions, gathered one session
    at a time (:meth:`Lineages.visit`): each cited node's role, which nodes their session holds,
    and the lines of each record's cited nodes of one episode, answered from tables."""

    def __init__(self, units: Iterable[Unit]) -> None:
        # session -> the node sets some record cites of it (one per record and episode)
        self.asked: dict[str, set[frozenset[str]]] = {}
        for unit in units:
            for sid, nodes in _episodes(_places(unit)).values():
                if sid is not None and nodes:
                    self.asked.setdefault(sid, set()).add(nodes)
        self._roles: dict[str, dict[str, str | None]] = {}  # session -> node it holds -> role
        self._lines: dict[str, dict[frozenset[str], int]] = {}

    def visit(self, sid: str, lineage: Any) -> None:
        session = lineage.session
        roles = self._roles.setdefault(sid, {})
        lines = self._lines.setdefault(sid, {})
        for nodes in self.asked.get(sid, ()):
            for n in nodes:
                node = session.get(n)
                if node is not None:
                    roles[n] = node.role
            lines[nodes] = episode_lines(lineage, nodes)

    def role(self, place: SourcePlace) -> str | None:
        return self._roles.get(place.session_id or "", {}).get(place.node_id or "")

    def episode_lines(self, session_id: str | None, nodes: frozenset[str]) -> int:
        return self._lines.get(session_id or "", {}).get(nodes, 1)


def _places(unit: Unit) -> list[SourcePlace]:
    return [place_of(link.source_id) for ev in unit.evidence for link in ev.links if link.source_id]


def _episodes(places: Iterable[SourcePlace]) -> dict[str, tuple[str | None, frozenset[str]]]:
    """episode -> (its session id, the node ids cited of it)."""
    nodes: dict[str, tuple[str | None, set[str]]] = {}
    for p in places:
        entry = nodes.setdefault(p.episode, (p.session_id, set()))
        if p.node_id is not None:
            entry[1].add(p.node_id)
    return {ep: (sid, frozenset(ids)) for ep, (sid, ids) in nodes.items()}


def _cited(view: Any, unit: Unit, facts: CitedNodes) -> list[tuple[CitedSource, SourcePlace | None]]:
    out: list[tuple[CitedSource, SourcePlace | None]] = []
    for ev in unit.evidence:
        for link in ev.links:
            sid = link.source_id
            frame = view.sources.frame_facts(sid) if sid else None  # no frame text is built
            place = place_of(sid) if sid else None
            role = facts.role(place) if place is not None and place.node_id is not None else None
            out.append((
                CitedSource(
                    source_id=sid,
                    target=link.target,
                    evidence_id=ev.id,
                    episode=place.episode if place else None,
                    session_id=place.session_id if place else None,
                    node_id=place.node_id if place else None,
                    day=_day(frame, ev.when),
                    speaker=speaker_kind(frame, role),
                    trust=_trust(view, sid, frame),
                ),
                place,
            ))
    return out


def _lines(places: Sequence[SourcePlace], facts: CitedNodes) -> int:
    """Distinct lines of conversation over the cited places (see the module docstring)."""
    return sum(facts.episode_lines(sid, nodes) for sid, nodes in _episodes(places).values())


def record_evidence(view: Any, unit: Unit, facts: CitedNodes) -> RecordEvidence:
    cited = _cited(view, unit, facts)
    places = [p for _, p in cited if p is not None]
    episodes = tuple(dict.fromkeys(p.episode for p in places))
    days = tuple(sorted({c.day for c, _ in cited if c.day is not None}))
    resolved = [c for c, _ in cited if c.speaker != UNKNOWN]
    owner_backed = any(c.speaker == OWNER for c, _ in cited)
    assistant_only = bool(resolved) and all(c.speaker == ASSISTANT for c in resolved)
    pending_ids = {c.source_id for c, _ in cited if c.trust == PENDING}
    untrusted = {c.source_id or c.target for c, _ in cited if c.trust != TRUSTED}
    return RecordEvidence(
        memory_id=unit.memory_id,
        topic_path=unit.path,
        line=unit.line,
        content=unit.content,
        sessions=len(episodes),
        days=len(days),
        branches=_lines(places, facts),
        owner_backed=owner_backed,
        assistant_only=assistant_only,
        pending_sources=len(pending_ids),
        untrusted_sources=len(untrusted),
        single_episode=len(episodes) <= 1 and len(days) <= 1,
        citations=tuple(c for c, _ in cited),
        episodes=episodes,
        day_list=days,
    )


_FIGURES = attrgetter(*(f.name for f in fields(EvidenceFigures)))


def evidence_for(view: Any, sessions: SessionSnapshot | None = None, *, lineages: Lineages | None = None,
                 facts: CitedNodes | None = None, figures: bool = False) -> tuple[RecordEvidence, ...] | tuple[EvidenceFigures, ...]:
    """Figures for every unit of ``view.tree`` (tree order). ``facts``: the units' cited nodes
    already visited (``summarize`` visits each session once for this and the alternatives).
    ``figures``: each row only its :class:`EvidenceFigures`, its citations let go at once (what
    the header and the Evidence list show, without 80 000 records' citations alive together)."""
    if view.tree is None:
        return ()
    if facts is None:
        facts = CitedNodes(view.tree.units)
        (lineages if lineages is not None else Lineages(sessions)).visit(sorted(facts.asked), facts.visit)
    rows = (record_evidence(view, unit, facts) for unit in view.tree.units)
    if figures:
        return tuple(EvidenceFigures(*_FIGURES(r)) for r in rows)
    return tuple(rows)


# ------------------------------------------------------------------------------- sorting

SORT_KEYS: dict[str, Callable[[RecordEvidence], Any]] = {
    "weakest": lambda r: (r.strength, r.topic_path, r.line, r.memory_id),
    "sessions": lambda r: (r.sessions, r.topic_path, r.line, r.memory_id),
    "days": lambda r: (r.days, r.topic_path, r.line, r.memory_id),
    "branches": lambda r: (r.branches, r.topic_path, r.line, r.memory_id),
    "pending": lambda r: (-r.pending_sources, -r.untrusted_sources, r.topic_path, r.line, r.memory_id),
    "topic": lambda r: (r.topic_path, r.line, r.memory_id),
    "id": lambda r: (r.memory_id,),
}


def sort_evidence(rows: Iterable[RecordEvidence], key: str = "weakest", *, reverse: bool = False) -> list[RecordEvidence]:
    """Rows ordered by one of :data:`SORT_KEYS` (ties broken by topic, line, id)."""
    if key not in SORT_KEYS:
        raise ValueError(f"unknown sort key {key!r} (one of {', '.join(SORT_KEYS)})")
    return sorted(rows, key=SORT_KEYS[key], reverse=reverse)
