"""Backfill (memory spec §7.6): distil trusted archived sources that no topic cites yet.

Candidates are the trusted source events (v2 preferred over legacy copies; pending excluded)
that no topic unit cites, in (file path, line, ref) order. Node marks are ignored and none
are added or removed. Candidates are batched by token budget (sum of ``max(1, tokens)``
stays ≤ budget, at least one per batch) and handed to the configured writer on a restricted
stage whose allowed references are that batch's ids.

Each batch is one committed step (lock, install, ``memory: backfill topics`` commit, unlock),
where OpenProgram leaves its installs for the next commit: a kill never leaves an install git
does not hold once the next locked open has run.

A source the writer was given and did not cite is *declined*: it is remembered in
``<rt>/memory-tui-backfill-declined.json`` with the writer's answer and not offered again (a
second run on the same state is a no-op) unless the owner asks (``--retry-declined``).

Report: a ``BackfillReport``. Its ``--json`` object has the spec's keys in OpenProgram's
meaning -- ``status`` (``ok`` only when no trusted source is left uncited, else
``incomplete``), ``candidates`` (uncited when the run began), ``processed`` (of those, cited
now), ``remaining`` (uncited now), ``revision`` -- plus ``declined`` (the remaining sources a
writer declined, each with its answer) and ``error`` when a batch failed. ``--dry-run``
lists the batches it would offer and changes no byte.

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
from memory_tui.core.store import gitlog
from memory_tui.core.store.install import recover
from memory_tui.core.store.lock import TIMEOUT_EDIT
from memory_tui.pipeline.batching import budget_batches
from memory_tui.pipeline.context import Context, JobPhase, git_commit, load_snapshot, locked, revision, run_writer, topic_tree
from memory_tui.pipeline.reports import BackfillBatch, BackfillReport, DeclinedSource, JobOutcome
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


DECLINED_NAME = "memory-tui-backfill-declined.json"


def _declined_path(ctx: Context):
    return ctx.layout.runtime_dir / DECLINED_NAME


def load_declined(ctx: Context) -> dict[str, dict[str, str]]:
    """Sources a writer was given by an earlier backfill and chose not to cite: source id →
    {"writer", "answer"}. Unreadable → none (they are offered again: a cost, never a loss)."""
    import json

    try:
        body = json.loads(_declined_path(ctx).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    items = body.get("declined") if isinstance(body, dict) else None
    if not isinstance(items, dict):
        return {}
    return {k: {"writer": str(v.get("writer", "")), "answer": str(v.get("answer", ""))}
            for k, v in items.items() if isinstance(k, str) and isinstance(v, dict)}


def _save_declined(ctx: Context, declined: dict[str, dict[str, str]]) -> None:
    import json

    from memory_tui.pipeline.status import atomic_write

    body = {"version": 1, "declined": dict(sorted(declined.items()))}
    atomic_write(_declined_path(ctx), (json.dumps(body, ensure_ascii=False, indent=1) + "\n").encode("utf-8"))


def _finish(ctx: Context, first: list[Any], ran: list[BackfillBatch], changed: list[str], legacy: str | None,
            declined: dict[str, dict[str, str]], failure: JobOutcome | None) -> BackfillReport:
    """OpenProgram's accounting (spec §7.6): ``remaining`` = trusted sources still uncited,
    ``processed`` = candidates that are cited now, ``ok`` only when none remain (else
    ``incomplete``; a failed batch says why in ``error``). The sources a writer declined are
    part of ``remaining`` and listed apart, with the writer's answer."""
    root = ctx.memory_root
    left = candidates(root)
    left_ids = {fr.source_id for fr in left}
    first_ids = [fr.source_id for fr in first]
    outcome = failure or JobOutcome("ok" if not left else "incomplete")
    decl = tuple(DeclinedSource(sid, d["writer"], d["answer"]) for sid, d in sorted(declined.items()) if sid in left_ids)
    return BackfillReport(outcome, len(first), sum(1 for s in first_ids if s not in left_ids), len(left), revision(root),
                          batches=tuple(ran), changed_files=tuple(sorted(set(changed))), legacy_core=legacy, declined=decl,
                          offered=sum(len(b.ids) for b in ran))


def backfill(ctx: Context, *, dry_run: bool = False, retry_declined: bool = False) -> BackfillReport:
    """The backfill job. Each batch is its own committed step: under the write lock, the
    writer's install and its git commit (``memory: backfill topics``); the lock is released
    between batches, so a kill leaves the workspace before or after a whole batch (the next
    locked open finishes an interrupted install and its commit). Sources a writer declined in
    an earlier run are not offered again unless ``retry_declined``."""
    budget = int(ctx.settings.backfill_budget)
    root = ctx.memory_root
    legacy: str | None = None
    if not dry_run and _legacy_core_text(root) is not None:
        try:
            ctx.checkpoint(JobPhase.BACKFILL)
            with locked(ctx, TIMEOUT_EDIT):
                recover(root)
                legacy = migrate_legacy_core(ctx)
                git_commit(ctx, BACKFILL_MESSAGE)
        except MemoryError as exc:
            # the legacy core is still waiting: it counts as one remaining item
            left = (len(candidates(root)) if (root / "sources").is_dir() else 0) + 1
            return BackfillReport(_incomplete(exc), left, 0, left, revision(root))
    if not (root / "sources").is_dir():
        return BackfillReport(JobOutcome("ok"), revision=revision(root) if root.is_dir() else None,
                              changed_files=_legacy_changed(legacy), legacy_core=legacy)
    titles = _titles(ctx)
    first = candidates(root)
    declined = {} if retry_declined else load_declined(ctx)
    offer = [fr for fr in first if fr.source_id not in declined]
    text_of = lambda fr: fr.text  # noqa: E731
    if dry_run:
        planned = budget_batches(offer, ctx.counter, budget, text_of=text_of)
        left = {fr.source_id for fr in first}
        decl = tuple(DeclinedSource(sid, d["writer"], d["answer"]) for sid, d in sorted(declined.items()) if sid in left)
        # A plan is not a run: it fails only when it cannot be made ("incomplete" belongs to runs).
        return BackfillReport(JobOutcome("ok"), len(first), 0, len(first), revision(root), dry_run=True,
                              writer=getattr(ctx.writer, "name", "?"), declined=decl, offered=len(offer),
                              batches=tuple(BackfillBatch(tuple(fr.source_id for fr in b.records), b.tokens) for b in planned))
    ran: list[BackfillBatch] = []
    changed: list[str] = list(_legacy_changed(legacy))
    writer_name = getattr(ctx.writer, "name", "?")
    failure: JobOutcome | None = None
    earlier = set(declined)  # declined by an earlier run: not offered again
    try:
        pending = offer
        # OpenProgram's passes: again over what is still uncited while a pass changes something
        for _ in range(MAX_PASSES):
            if not pending:
                break
            changed_any = False
            for b in budget_batches(pending, ctx.counter, budget, text_of=text_of):
                turns = tuple(_turn(fr, titles, ctx.counter) for fr in b.records)
                task = WriteTask("backfill", turns, "", "", ctx.settings.topic)
                done = sum(len(x.ids) for x in ran)
                # before each batch: a cancel here leaves every earlier batch installed and committed
                ctx.checkpoint(JobPhase.BACKFILL, len(ran), _finish(ctx, first, ran, changed, legacy, declined, None))
                ctx.emit(JobPhase.BACKFILL, done, len(offer), f"{len(turns)} sources, {b.tokens} tokens")
                with locked(ctx, TIMEOUT_EDIT):
                    recover(root)  # a killed run's install and commit first
                    # OpenProgram leaves backfill's installs for its next `git add -A` (spec §7.6); we
                    # commit each batch at once, so no kill leaves an install git does not hold.
                    gitlog.mark_pending(root)
                    written = run_writer(ctx, task)
                    git_commit(ctx, BACKFILL_MESSAGE)
                    ran.append(BackfillBatch(tuple(t.source_id for t in turns), b.tokens))
                    changed.extend(written.changed_topics)
                    changed_any = changed_any or written.changed
                    cited_now = _cited(root)
                    answer = written.summary or "the writer changed nothing"
                    for t in turns:
                        if t.source_id in cited_now:
                            declined.pop(t.source_id, None)
                        else:
                            declined[t.source_id] = {"writer": writer_name, "answer": answer}
                    _save_declined(ctx, declined)
            new_pending = [fr for fr in candidates(root) if fr.source_id not in earlier]
            if not changed_any or [f.source_id for f in new_pending] == [f.source_id for f in pending]:
                break
            pending = new_pending
    except MemoryError as exc:
        failure = _incomplete(exc)
    except Exception as exc:  # a writer failure of another kind
        failure = _incomplete(exc)
    return _finish(ctx, first, ran, changed, legacy, declined, failure)
