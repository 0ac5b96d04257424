"""The header's plain-language counts, from one call: single-episode records, alternatives,
records citing pending sources (each names the records behind it, so a click can open the
list)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_tui.sessions.store import SessionSnapshot

from .alternatives import AlternativePair, alternatives
from .evidence import RecordEvidence, evidence_for
from .lineage import Lineages


@dataclass(frozen=True)
class InsightSummary:
    records: int
    single_episode: tuple[str, ...]  # memory ids
    pending_sources: tuple[str, ...]  # memory ids of records citing a pending source
    assistant_only: tuple[str, ...]
    alternatives: int  # pairs
    alternative_records: tuple[str, ...]  # memory ids in any pair
    evidence: tuple[RecordEvidence, ...] = ()
    pairs: tuple[AlternativePair, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "single_episode": len(self.single_episode),
            "alternatives": self.alternatives,
            "alternative_records": len(self.alternative_records),
            "pending_sources": len(self.pending_sources),
            "assistant_only": len(self.assistant_only),
        }


def summarize(view: Any, sessions: SessionSnapshot | None) -> InsightSummary:
    """Evidence and alternatives over the whole tree, computed once and counted."""
    lineages = Lineages(sessions)
    rows = evidence_for(view, sessions, lineages=lineages)
    pairs = alternatives(view, sessions, lineages=lineages)
    in_pairs = tuple(dict.fromkeys(m for p in pairs for m in (p.a.memory_id, p.b.memory_id)))
    return InsightSummary(
        records=len(rows),
        single_episode=tuple(r.memory_id for r in rows if r.single_episode),
        pending_sources=tuple(r.memory_id for r in rows if r.pending_sources),
        assistant_only=tuple(r.memory_id for r in rows if r.assistant_only),
        alternatives=len(pairs),
        alternative_records=in_pairs,
        evidence=rows,
        pairs=pairs,
    )
