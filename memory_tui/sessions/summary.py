"""One line per tip that tells the same story as its turns (used by ``why`` and the TUI).

OpenProgram's pending set for a tip is the unmarked suffix; on an archived non-head branch no
pass ever writes it, and its turns say "never". Those are counted here as *held*, not pending,
so a tip is never summarised as "2 pending" while both its turns say "never archived_branch".
"""

from __future__ import annotations

from .reasons import NEVER, TipExplanation


def held_ids(te: TipExplanation) -> tuple[str, ...]:
    """The part of the tip's pending set whose turns no pass writes."""
    verdicts = {t.id: t.verdict for t in te.turns}
    return tuple(r.id for r in te.analysis.pending if verdicts.get(r.id) == NEVER)


def tip_summary(te: TipExplanation, threshold: int) -> str:
    ta = te.analysis
    held = set(held_ids(te))
    waiting = [r.id for r in ta.pending if r.id not in held]
    head = f"{len(ta.recordset.records)} records, {len(ta.marked_record_ids)} written"
    if held and not waiting:
        return f"{head}, 0 pending; {len(held)} unwritten and never written ({ta.pending_tokens} tokens held)"
    if held:
        return f"{head}, {len(waiting)} pending, {len(held)} never written ({ta.pending_tokens}/{threshold} tokens)"
    return f"{head}, {len(waiting)} pending ({ta.pending_tokens}/{threshold} tokens)"
