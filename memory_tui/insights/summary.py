"""The header's plain-language counts, from one call: single-episode records, records that
have an alternative, records citing pending sources (each names the records behind it, so a
click can open the list). Alternatives are counted per record, never by listing the pairs,
so the call stays cheap however many records sit on each side of a fork."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_tui.sessions.store import SessionSnapshot

from .alternatives import Rivals, contested
from .evidence import CitedNodes, EvidenceFigures, evidence_for
from .lineage import Lineages


@dataclass(frozen=True)
class InsightSummary:
    records: int
    single_episode: tuple[str, ...]  # memory ids
    pending_sources: tuple[str, ...]  # memory ids of records citing a pending source
    assistant_only: tuple[str, ...]
    alternative_records: tuple[str, ...]  # memory ids of records that have an alternative
    alternative_forks: int  # fork points with rival records
    evidence: tuple[EvidenceFigures, ...] = ()  # each record's figures (``evidence_for`` has the citations)

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "single_episode": len(self.single_episode),
            "alternatives": len(self.alternative_records),
            "alternative_forks": self.alternative_forks,
            "pending_sources": len(self.pending_sources),
            "assistant_only": len(self.assistant_only),
        }


def summarize(view: Any, sessions: SessionSnapshot | None) -> InsightSummary:
    """Evidence and alternatives over the whole tree, computed once and counted; each cited
    session's lineage is read once, for both, and let go before the next one's. Over sessions
    read on demand (their shapes, from the shape table), the table is left holding no session
    that has left the state."""
    from memory_tui.sessions.ondemand import is_on_demand
    from memory_tui.sessions.shapes import prune as prune_shapes

    units = view.tree.units if view.tree is not None else ()
    facts, rivals = CitedNodes(units), Rivals(units)
    Lineages(sessions).visit(sorted(set(facts.asked) | set(rivals.asked)), facts.visit, rivals.visit)
    if is_on_demand(sessions):
        prune_shapes(sessions.state_dir, sessions.sessions)
    rows = evidence_for(view, sessions, facts=facts, figures=True)
    rival = contested(view, sessions, rivals=rivals)
    return InsightSummary(
        records=len(rows),
        single_episode=tuple(r.memory_id for r in rows if r.single_episode),
        pending_sources=tuple(r.memory_id for r in rows if r.pending_sources),
        assistant_only=tuple(r.memory_id for r in rows if r.assistant_only),
        alternative_records=rival.records,
        alternative_forks=rival.forks,
        evidence=rows,
    )
