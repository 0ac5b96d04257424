"""Backfill (memory spec §7.6): distil trusted archived sources that no topic cites yet.

Candidates are the trusted source events (v2 preferred over legacy copies; pending excluded)
that no topic unit cites, in (file path, line, ref) order. Node marks are ignored and none
are added or removed. Candidates are batched by token budget (sum of ``max(1, tokens)``
stays ≤ budget, at least one per batch) and handed to the configured writer on a restricted
stage whose allowed references are that batch's ids. The job repeats while a pass changes
something and candidates remain. No git commit (the next commit picks the files up).

Report: ``{"status": "ok"|"incomplete", "candidates", "processed", "remaining", "revision"}``;
``ok`` iff nothing remains. ``--dry-run`` lists the batches and changes no byte.

Not done: OpenProgram's legacy root ``core.md`` archiving as an ``openprogram-migration``
source (the transaction's install still promotes a parseable root ``core.md``).
"""

from __future__ import annotations

from typing import Any

from memory_tui.core.errors import MemoryError, classify_write_failure
from memory_tui.pipeline.batching import budget_batches
from memory_tui.pipeline.writers.base import Turn, WriteTask

MAX_PASSES = 50


def _cited(memory_root) -> set[str]:
    from memory_tui.pipeline.reorganize import _tree

    tree = _tree(memory_root)
    return {ref for u in tree.units for ref in u.source_refs}


def candidates(memory_root) -> list[Any]:
    from memory_tui.core.sources import SourceIndex

    index = SourceIndex.load(memory_root)
    cited = _cited(memory_root)
    out = []
    for fr in index.events():
        if not fr.trusted or fr.pending or fr.source_id in cited:
            continue
        out.append(fr)
    out.sort(key=lambda fr: (fr.path, fr.line, fr.source_id))
    return out


def _role(fr: Any) -> str:
    kind = getattr(fr.meta, "speaker_kind", "unknown") if fr.meta is not None else "unknown"
    if kind in ("runtime", "agent", "assistant"):
        return "assistant"
    label = (fr.speaker_label or "").lower()
    if label.startswith("agent/") or label == "assistant" or "runtime/" in label:
        return "assistant"
    return "user"


def _turn(fr: Any, titles: dict[str, str], counter: Any) -> Turn:
    from memory_tui.core.sources import split_source_id

    parts = split_source_id(fr.source_id) or ("", "", "")
    display = fr.speaker_label.split(" (", 1)[0] if fr.speaker_label else ""
    return Turn(
        source_id=fr.source_id,
        role=_role(fr),
        speaker=fr.speaker_label,
        text=fr.text,
        timestamp=fr.timestamp,
        speaker_kind=getattr(fr.meta, "speaker_kind", "unknown") if fr.meta is not None else "unknown",
        speaker_display=display,
        session_id=parts[1],
        session_title=titles.get(parts[1], ""),
        tokens=counter.count(fr.text),
    )


def _titles(ctx: Any) -> dict[str, str]:
    try:
        from memory_tui.pipeline.write import load_snapshot

        snap = load_snapshot(ctx)
        return {sid: s.title for sid, s in snap.sessions.items()}
    except Exception:
        return {}


def backfill(ctx: Any, *, dry_run: bool = False) -> dict[str, Any]:
    from memory_tui.pipeline import status as st
    from memory_tui.pipeline.write import EDIT_LOCK_SECONDS, _locked, _run_writer, revision

    budget = int(ctx.settings.backfill_budget)
    root = ctx.memory_root
    if not (root / "sources").is_dir():
        return {"status": "ok", "candidates": 0, "processed": 0, "remaining": 0, "revision": revision(root) if root.is_dir() else None}
    titles = _titles(ctx)
    first = candidates(root)
    text_of = lambda fr: fr.text  # noqa: E731
    if dry_run:
        batches = budget_batches(first, ctx.counter, budget, text_of=text_of)
        return {
            "status": "ok" if not first else "incomplete",
            "dry_run": True,
            "candidates": len(first),
            "processed": 0,
            "remaining": len(first),
            "revision": revision(root),
            "writer": getattr(ctx.writer, "name", "?"),
            "batches": [{"ids": [fr.source_id for fr in b.records], "tokens": b.tokens} for b in batches],
        }
    processed: set[str] = set()
    error: dict[str, Any] | None = None
    try:
        with _locked(ctx, EDIT_LOCK_SECONDS):
            remaining = first
            for _ in range(MAX_PASSES):
                if not remaining:
                    break
                changed_any = False
                for b in budget_batches(remaining, ctx.counter, budget, text_of=text_of):
                    turns = tuple(_turn(fr, titles, ctx.counter) for fr in b.records)
                    task = WriteTask("backfill", turns, "", "", ctx.settings.topic)
                    ctx.emit("backfill", turns=len(turns), tokens=b.tokens)
                    outcome = _run_writer(ctx, task)
                    processed.update(t.source_id for t in turns)
                    changed_any = changed_any or outcome.changed
                new_remaining = candidates(root)
                if not changed_any or [f.source_id for f in new_remaining] == [f.source_id for f in remaining]:
                    remaining = new_remaining
                    break
                remaining = new_remaining
    except MemoryError as exc:
        code, retry = classify_write_failure(exc)
        error = {"code": code, "message": exc.message, "retryable": retry}
        remaining = candidates(root)
    except Exception as exc:  # a writer failure of another kind
        code, retry = classify_write_failure(exc)
        error = {"code": code, "message": str(exc), "retryable": retry}
        remaining = candidates(root)
    out = {
        "status": "ok" if not remaining else "incomplete",
        "candidates": len(first),
        "processed": len(processed),
        "remaining": len(remaining),
        "revision": revision(root),
    }
    if error:
        out["error"] = error
    del st
    return out
