"""Backfill (memory spec §7.6): distil trusted archived sources that no topic cites yet.

Candidates are the trusted source events (v2 preferred over legacy copies; pending excluded)
that no topic unit cites, in (file path, line, ref) order. Node marks are ignored and none
are added or removed. Candidates are batched by token budget (sum of ``max(1, tokens)``
stays ≤ budget, at least one per batch) and handed to the configured writer on a restricted
stage whose allowed references are that batch's ids. The job repeats while a pass changes
something and candidates remain. No git commit (the next commit picks the files up).

Report: a ``BackfillReport`` whose ``--json`` object has exactly the spec's keys,
``{"status": "ok"|"incomplete", "candidates", "processed", "remaining", "revision"}``, as
OpenProgram prints it; ``incomplete`` only when a batch failed (``error`` says why).
``--dry-run`` lists the batches and changes no byte. The report also carries the batches
it ran and ``changed_files``, the topic files its writer runs changed, for the app's job
result; neither is in the spec's object.

Legacy core first (§7.6): when ``topics/core.md`` is absent and a non-blank root ``core.md``
exists, a transaction promotes it if it parses; otherwise it is archived as one trusted
``openprogram-migration/legacy-core/<hex24 of its SHA-256>`` source spoken by the runtime
for the owner, so it becomes a backfill candidate like any other uncited source. The report
then carries ``legacy_core``: ``"promoted"`` or ``"archived"``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from memory_tui.core.format.errors import MemoryError, classify_write_failure
from memory_tui.core.store.lock import TIMEOUT_EDIT
from memory_tui.pipeline.batching import budget_batches
from memory_tui.pipeline.context import Context, JobPhase, git_commit, load_snapshot, locked, revision, run_writer, topic_tree
from memory_tui.pipeline.reports import BackfillBatch, BackfillReport, JobOutcome
from memory_tui.pipeline.writers.base import Turn, WriteTask

MAX_PASSES = 50
LEGACY_CORE_PROVIDER = "openprogram-migration"
LEGACY_CORE_THREAD = "legacy-core"
LEGACY_CORE_SPEAKER = "runtime:legacy-core"
LEGACY_CORE_DISPLAY = "Legacy core migration"

BACKFILL_MESSAGE = "memory: backfill topics"


def _legacy_core_text(memory_root) -> str | None:
    """The root ``core.md`` when §7.6 applies to it: no ``topics/core.md``, and non-blank."""
    master, legacy = memory_root / "topics" / "core.md", memory_root / "core.md"
    if master.exists() or master.is_symlink() or legacy.is_symlink() or not legacy.is_file():
        return None
    try:
        text = legacy.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # unreadable: the transaction reports it when it tries to promote
    return text if text.strip() else None


def legacy_core_record(text: str, owner_principal: str):
    """The trusted source a non-promotable root ``core.md`` is archived as (§7.6)."""
    from memory_tui.core.format.sources import SourceRecord

    return SourceRecord(
        provider=LEGACY_CORE_PROVIDER,
        thread_id=LEGACY_CORE_THREAD,
        message_id=hashlib.sha256(text.encode("utf-8")).hexdigest()[:24],
        ordinal=0,
        role="system",
        content=text,
        timestamp="",
        speaker_id=LEGACY_CORE_SPEAKER,
        speaker_display=LEGACY_CORE_DISPLAY,
        speaker_kind="runtime",
        principal_id=owner_principal,
        authority_tier="owner",
        trust_state="trusted",
    )


def migrate_legacy_core(ctx: Context) -> str | None:
    """Promote or archive a legacy root ``core.md`` (call under the write lock).

    Returns ``"promoted"``, ``"archived"`` or ``None`` (nothing to do, or archived by an
    earlier run: the id is content addressed, so the frame is never duplicated). A transaction that
    fails for another reason raises its error rather than archiving a core that may parse.
    """
    from memory_tui.core.tx import api as tx
    from memory_tui.core.tx.provenance import read_owner_principal
    from memory_tui.core.store.archives import append_records

    root = ctx.memory_root
    if _legacy_core_text(root) is None:
        return None
    result = tx.rebuild_views(root, counter=ctx.counter)  # its install promotes a parseable root core.md
    if not result.ok:
        raise result.error()
    if (root / "topics" / "core.md").is_file():
        return "promoted"
    text = _legacy_core_text(root)
    if text is None:
        return None
    record = legacy_core_record(text, read_owner_principal(ctx.state_dir))
    done = append_records(root, [record], runtime_dir=ctx.layout.runtime_dir)
    return "archived" if done.written_ids else None  # archived by an earlier run: nothing new


def _legacy_changed(legacy: str | None) -> tuple[str, ...]:
    # a promoted root core.md became topics/core.md; an archived one is a source, not a topic
    return ("topics/core.md",) if legacy == "promoted" else ()


def _cited(memory_root) -> set[str]:
    tree = topic_tree(memory_root)
    return {ref for u in tree.units for ref in u.source_refs}


def candidates(memory_root) -> list[Any]:
    from memory_tui.core.format.sources import SourceIndex

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
    from memory_tui.core.format.sources import split_source_id

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


def _titles(ctx: Context) -> dict[str, str]:
    try:
        snap = load_snapshot(ctx)
        return {sid: s.title for sid, s in snap.sessions.items()}
    except Exception:
        return {}


def _incomplete(exc: Exception) -> JobOutcome:
    """A failed batch (or legacy core step): the closed code set and a retry verdict."""
    code, retry = classify_write_failure(exc)
    message = exc.message if isinstance(exc, MemoryError) else str(exc)
    return JobOutcome("incomplete", True, code, message, retry)


def backfill(ctx: Context, *, dry_run: bool = False) -> BackfillReport:

    budget = int(ctx.settings.backfill_budget)
    root = ctx.memory_root
    legacy: str | None = None
    if not dry_run and _legacy_core_text(root) is not None:
        try:
            ctx.checkpoint(JobPhase.BACKFILL)
            with locked(ctx, TIMEOUT_EDIT):
                legacy = migrate_legacy_core(ctx)
        except MemoryError as exc:
            # the legacy core is still waiting: it counts as one remaining item
            left = (len(candidates(root)) if (root / "sources").is_dir() else 0) + 1
            return BackfillReport(_incomplete(exc), left, 0, left, revision(root))
    if not (root / "sources").is_dir():
        return BackfillReport(JobOutcome("ok"), revision=revision(root) if root.is_dir() else None,
                              changed_files=_legacy_changed(legacy), legacy_core=legacy)
    titles = _titles(ctx)
    first = candidates(root)
    text_of = lambda fr: fr.text  # noqa: E731
    if dry_run:
        planned = budget_batches(first, ctx.counter, budget, text_of=text_of)
        # A plan is not a failure: "incomplete" is kept for a run in which a batch failed.
        return BackfillReport(JobOutcome("ok"), len(first), 0, len(first), revision(root), dry_run=True,
                              writer=getattr(ctx.writer, "name", "?"),
                              batches=tuple(BackfillBatch(tuple(fr.source_id for fr in b.records), b.tokens) for b in planned))
    processed: set[str] = set()
    ran: list[BackfillBatch] = []
    changed: list[str] = list(_legacy_changed(legacy))
    outcome = JobOutcome("ok")
    try:
        ctx.checkpoint(JobPhase.BACKFILL)
        with locked(ctx, TIMEOUT_EDIT):
            remaining = first
            for _ in range(MAX_PASSES):
                if not remaining:
                    break
                changed_any = False
                for b in budget_batches(remaining, ctx.counter, budget, text_of=text_of):
                    turns = tuple(_turn(fr, titles, ctx.counter) for fr in b.records)
                    task = WriteTask("backfill", turns, "", "", ctx.settings.topic)
                    ctx.checkpoint(JobPhase.BACKFILL, len(processed))  # each writer run is its own transaction
                    ctx.emit(JobPhase.BACKFILL, len(processed), len(first), f"{len(turns)} sources, {b.tokens} tokens")
                    written = run_writer(ctx, task)
                    ran.append(BackfillBatch(tuple(t.source_id for t in turns), b.tokens))
                    processed.update(t.source_id for t in turns)
                    changed.extend(written.changed_topics)
                    changed_any = changed_any or written.changed
                new_remaining = candidates(root)
                if not changed_any or [f.source_id for f in new_remaining] == [f.source_id for f in remaining]:
                    remaining = new_remaining
                    break
                remaining = new_remaining
            if processed:
                # OpenProgram leaves backfill's installs for its next `git add -A` (spec §7.6); we
                # commit them at once, so the history says what backfill wrote.
                git_commit(ctx, BACKFILL_MESSAGE)
    except Exception as exc:  # a MemoryError, or a writer failure of another kind
        outcome = _incomplete(exc)
        remaining = candidates(root)
    # "incomplete" only when a batch failed (the outcome says which code and why); sources the
    # writer chose not to cite stay in ``remaining`` without failing the run.
    return BackfillReport(outcome, len(first), len(processed), len(remaining), revision(root), batches=tuple(ran),
                          changed_files=tuple(sorted(set(changed))), legacy_core=legacy)
