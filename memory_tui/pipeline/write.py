"""The write job (memory spec §7.3-§7.5, session spec §4.4-§4.7).

Per-turn (unforced) mode: the head branch (or ``--branch``) only, one batch, written only
when its tokens reach the threshold or its newest record is at least an hour old.
Forced mode: the head branch in repeated batches until nothing is pending, then every other
non-archived live tip while its pending tokens reach the threshold. A batch whose writer
changed nothing stops the pass with ``WRITER_NO_PROGRESS`` (remaining branches are not
visited), as OpenProgram does.

One batch, in order, all under the write lock (1 s):
  archive the batch (trusted, 0600, idempotent) → run the writer on a restricted stage →
  if an accepted commit changed topic files: mark exactly the batch, oldest first →
  counters / organize triggers in ``runtime.json`` → git commit
  ``memory: incremental transaction``; after the lock, ``writer-status.json`` success.

A crash between install and marking leaves the batch unmarked; the next run offers the
same batch again. If its writer then has nothing new to add *and* the topics already cite
one of the batch's turns, the earlier install evidently landed, so the batch is marked
("recovered") instead of stalling the pass on ``WRITER_NO_PROGRESS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from memory_tui.core.store import gitlog
from memory_tui.core.format.errors import OS_ERROR_CODES, MemoryError, classify_write_failure, os_failure
from memory_tui.core.store.install import recover
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records
from memory_tui.core.store.workspace import load_runtime_state
from memory_tui.pipeline import recovery
from memory_tui.pipeline import status as st
from memory_tui.pipeline.bounded import clipped_note
from memory_tui.pipeline.batching import Batch, first_batch, plan_batches, total_tokens, unforced_gate
from memory_tui.pipeline.context import (
    Context,
    JobCancelled,
    JobPhase,
    ensure_workspace,
    git_commit,
    load_snapshot,
    locked,
    revision,
    run_writer,
    topics_cite_any,
    workspace_id_or_none,
)
from memory_tui.pipeline.migrate import migrate_if_needed
from memory_tui.pipeline.reorganize import organize_locked
from memory_tui.pipeline.reports import BatchReport, WriteReport
from memory_tui.pipeline.writers.base import Turn, WriteTask
from memory_tui.sessions.dag import forced_pass_branch_order, get_branch, to_message
from memory_tui.sessions import marks
from memory_tui.sessions.records import authority_state, marked_ids, pending_records, records_for

INCREMENTAL_MESSAGE = "memory: incremental transaction"
MAX_BATCHES_PER_BRANCH = 10_000


# ------------------------------------------------------------------------------ records


@dataclass(frozen=True)
class BranchState:
    session: Any
    tip: str
    nodes: tuple[Any, ...]
    records: tuple[Any, ...]
    pending: tuple[Any, ...]
    problems: tuple[Any, ...]
    ordinals: dict[str, int]


def branch_state(session: Any, tip: str, workspace_id: str | None) -> BranchState:
    nodes = tuple(get_branch(session, tip))
    rs = records_for(session, nodes)
    marked = marked_ids(nodes, workspace_id) if workspace_id else frozenset()
    pending = pending_records(rs.records, marked)
    ordinals = {n.id: i for i, n in enumerate(nodes)}
    return BranchState(session, tip, nodes, rs.records, pending, rs.problems, ordinals)


def iso_local(ts: float | None, tz: tzinfo | None) -> str:
    if ts is None:
        return ""
    if tz is not None:
        return datetime.fromtimestamp(ts, tz=tz).isoformat()
    return datetime.fromtimestamp(ts).astimezone().isoformat()


def source_record(session: Any, record: Any, ordinal: int, tz: tzinfo | None):
    """§7.2: the trusted archive record for one branch record."""
    msg = to_message(session, record.node)

    def s(key: str) -> str | None:
        v = msg.get(key)
        return v if isinstance(v, str) and v else None

    if authority_state(msg) == "allowed":
        kind, principal, tier = s("speaker_kind") or "unknown", s("principal_id") or "unknown", s("authority_tier")
    else:
        kind, principal, tier = "unknown", "unknown", None
    return SourceRecord(
        provider="openprogram",
        thread_id=session.id or "session",
        message_id=record.id,
        ordinal=ordinal,
        role=record.role,
        content=record.content,
        timestamp=iso_local(record.timestamp, tz),
        speaker_id=s("speaker_id"),
        speaker_display=s("speaker_display"),
        speaker_kind=kind,
        principal_id=principal,
        authority_tier=tier,
        trust_state="trusted",
    )


def turn_for(sr: Any, session_title: str, tokens: int) -> Turn:
    return Turn(
        source_id=sr.source_id,
        role=sr.role,
        speaker=sr.label,
        text=sr.content,
        timestamp=sr.timestamp,
        speaker_kind=sr.speaker_kind,
        speaker_display=sr.speaker_display or "",
        session_id=sr.thread_id,
        session_title=session_title,
        tokens=tokens,
    )


# ------------------------------------------------------------------------------ one batch


def write_batch(ctx: Context, bs: BranchState, batch: Batch, workspace_id: str, report: WriteReport) -> BatchReport:
    """Archive → writer → marks → counters for one batch. The caller holds the lock."""
    session = bs.session
    marks.check_markable(session.dir)  # before anything is archived or written
    gitlog.mark_pending(ctx.memory_root)  # archive frames appended below reach git even if this batch fails
    ids = [r.id for r in batch.records]
    br = BatchReport(session.id, bs.tip, ids, batch.tokens, "nothing")
    srecs = [source_record(session, r, bs.ordinals.get(r.id, 0), ctx.tz) for r in batch.records]
    append_records(ctx.memory_root, srecs, runtime_dir=ctx.layout.runtime_dir)
    turns = tuple(turn_for(sr, session.title, ctx.counter.count(sr.content)) for sr in srecs)
    task = WriteTask("write", turns, session.id, session.title, ctx.settings.topic)
    # Before the install: everything the batch's end does once its install lands (marks,
    # counters, organize), so a kill anywhere after the install is finished by the next open
    # exactly as this run would have finished it.
    plan = {**recovery.batch_plan(ctx.memory_root, batch.tokens, ctx.clock()), "dir": str(session.dir)}
    source_ids = [sr.source_id for sr in srecs]
    marks.write_intent(ctx.layout.runtime_dir, session.id, ids, workspace_id, source_ids=source_ids, extra=plan)
    ctx.emit(JobPhase.WRITER, len(report.batches), None, f"{session.id} {bs.tip}: writing {len(ids)} turns, {batch.tokens} tokens")
    outcome = run_writer(ctx, task)
    clipped = clipped_note(turns, ctx.threshold)
    if outcome.changed:
        br.result = "written"
        br.changed_topics = list(outcome.changed_topics)
        br.message = clipped
    elif topics_cite_any(ctx.memory_root, source_ids):
        br.result = "recovered"
        br.message = "the topics already cite this batch (an earlier install landed before its marks)"
    else:
        marks.clear_intent(ctx.layout.runtime_dir)
        br.message = outcome.summary or "the writer changed no topic file"
        return br
    body = {"session": session.id, "ids": ids, "workspace_id": workspace_id, **plan}
    res, organized = recovery.finish_batch(ctx.memory_root, body, ctx)
    br.marked = list(res.marked) + list(res.already)
    if res.problems:
        marks.clear_intent(ctx.layout.runtime_dir)
        raise MemoryError("SESSION_NODES_UNAVAILABLE", "; ".join(str(p) for p in res.problems))
    if organized is not None:
        report.organize.append(organized)
    git_commit(ctx, INCREMENTAL_MESSAGE)
    return br


# ------------------------------------------------------------------------------ sessions


# A batch is one transaction plus its marks (the marks intent finishes them at the next open):
# a failure leaves its turns pending and every batch before it written.
BATCH_KEPT = "this batch's turns stay pending; earlier batches are kept"


def _attempt(ctx: Context, report: WriteReport, bs: BranchState, batch: Batch, wid: str) -> BatchReport:
    ctx.checkpoint(JobPhase.BATCH, len(report.written), report)  # before the transaction, never inside it
    try:
        with locked(ctx):
            recover(ctx.memory_root)  # a killed run's journal, intents, temp files and git step, before anything new
            wid = ensure_workspace(ctx)
            br = write_batch(ctx, bs, batch, wid, report)
    except Exception as exc:  # classified: the closed code set and a retry verdict
        code, retry = classify_write_failure(exc)
        if isinstance(exc, MemoryError) and code == "WRITER_FAILURE_UNKNOWN" and exc.code in st.WRITE_FAILURE_CODES:
            code = exc.code
        br = BatchReport(bs.session.id, bs.tip, [r.id for r in batch.records], batch.tokens, "failed")
        if isinstance(exc, OSError):  # named: the file, and what this batch kept
            exc = os_failure(exc, root=ctx.memory_root, kept=BATCH_KEPT)
        if isinstance(exc, MemoryError) and exc.code in OS_ERROR_CODES:
            br.message = str(exc)  # path: CODE: reason; kept
        else:
            br.message = str(getattr(exc, "message", exc))
        br.reason_code, br.retryable = code, retry
        return br
    return br


def write_session(ctx: Context, report: WriteReport, session_id: str, *, branch: str | None = None, force: bool = False, dry_run: bool = False, snapshot: Any = None) -> None:
    snap = snapshot or load_snapshot(ctx)
    session = snap.get(session_id)
    if not session_id:
        report.fail("MISSING_SESSION_ID", False, "no session id given")
        return
    if session is None:
        report.fail("SESSION_NODES_UNAVAILABLE", False, f"no readable session {session_id!r}")
        return
    report.sessions.append(session_id)
    wid = workspace_id_or_none(ctx)
    threshold = ctx.threshold
    if branch is not None and session.get(branch) is None:
        report.fail("SESSION_NODES_UNAVAILABLE", False, f"session {session_id} has no node {branch!r}")
        return

    if not force:
        tip = branch or session.head_id
        if not tip:
            return
        bs = branch_state(session, tip, wid)
        _warn(report, bs)
        batch = first_batch(bs.pending, ctx.counter, threshold, text_of=lambda r: r.content)
        if not batch:
            return
        if not unforced_gate(batch, threshold, ctx.clock(), time_of=lambda r: r.timestamp):
            report.batches.append(BatchReport(session_id, tip, [r.id for r in batch.records], batch.tokens, "below-threshold",
                                              message=f"{batch.tokens} of {threshold} tokens and the newest turn is under an hour old"))
            return
        if dry_run:
            report.batches.append(BatchReport(session_id, tip, [r.id for r in batch.records], batch.tokens, "planned"))
            return
        br = _attempt(ctx, report, bs, batch, wid or "")
        report.batches.append(br)
        if br.result == "failed":
            report.fail(br.reason_code or "WRITER_FAILURE_UNKNOWN", br.retryable, br.message)
        return

    order = [branch] if branch else list(forced_pass_branch_order(session))
    for idx, tip in enumerate(order):
        head_like = idx == 0
        if dry_run:
            bs = branch_state(session, tip, wid)
            _warn(report, bs)
            # Shared prefixes planned on an earlier branch are not offered again.
            planned = {i for b in report.batches if b.session_id == session_id for i in b.ids}
            pending = _suffix_after(bs, planned)
            for b in plan_batches(pending, ctx.counter, threshold, forced=head_like, text_of=lambda r: r.content):
                report.batches.append(BatchReport(session_id, tip, [r.id for r in b.records], b.tokens, "planned"))
            continue
        seen_pending: tuple[str, ...] | None = None
        for _ in range(MAX_BATCHES_PER_BRANCH):
            # this session's files again (the batch before marked some of them), not every
            # session's: re-reading them all per batch was most of a forced write's time
            session = load_snapshot(ctx, only=(session_id,)).get(session_id)
            if session is None or session.get(tip) is None:
                report.fail("SESSION_NODES_UNAVAILABLE", False, f"branch {tip} of {session_id} disappeared during the write")
                return
            wid = workspace_id_or_none(ctx)
            bs = branch_state(session, tip, wid)
            if not bs.pending:
                break
            if not head_like and total_tokens(bs.pending, ctx.counter, text_of=lambda r: r.content) < threshold:
                break
            key = tuple(r.id for r in bs.pending)
            if key == seen_pending:
                report.fail("WRITER_NO_PROGRESS", False, f"marks did not advance on {tip}")
                return
            seen_pending = key
            batch = first_batch(bs.pending, ctx.counter, threshold, text_of=lambda r: r.content)
            ctx.emit(JobPhase.BATCH, len(report.written), None, f"{session_id} {tip}: {len(batch)} turns, {batch.tokens} tokens")
            br = _attempt(ctx, report, bs, batch, wid or "")
            report.batches.append(br)
            if br.result == "failed":
                report.fail(br.reason_code or "WRITER_FAILURE_UNKNOWN", br.retryable, br.message)
                return
            if br.result == "nothing":
                br.reason_code = "WRITER_NO_PROGRESS"
                report.fail("WRITER_NO_PROGRESS", False, f"the writer changed nothing for a batch of {session_id} ({tip}): {br.message}")
                return


def _suffix_after(bs: BranchState, planned: set[str]) -> tuple[Any, ...]:
    out = []
    for rec in reversed(bs.pending):
        if rec.id in planned:
            break
        out.append(rec)
    return tuple(reversed(out))


def _warn(report: WriteReport, bs: BranchState) -> None:
    for p in bs.problems:
        msg = str(p)
        if msg not in report.warnings:
            report.warnings.append(msg)


def write(
    ctx: Context,
    session_id: str | None = None,
    *,
    branch: str | None = None,
    force: bool = False,
    dry_run: bool = False,
) -> WriteReport:
    """The ``write`` job. ``session_id=None`` means every readable session."""
    report = WriteReport("forced" if force else "per-turn", getattr(ctx.writer, "name", "?"), dry_run)
    if not ctx.config.enabled:  # type: ignore[union-attr]
        report.say("memory is disabled (memory.backend: none)")
        return report
    if ctx.memory_root.is_dir():
        report.revision_before = revision(ctx.memory_root)
    if not dry_run:
        try:
            report.migration = migrate_if_needed(ctx)
        except MemoryError as exc:
            code, retry = classify_write_failure(exc)
            report.fail(code, retry, f"legacy cursor migration: {exc.message}")
            _finish(ctx, report)
            return report
    if not dry_run:
        _finish_interrupted(ctx)
    snap = load_snapshot(ctx)
    ids = [session_id] if session_id is not None else list(snap.sessions)
    try:
        for sid in ids:
            write_session(ctx, report, sid, branch=branch, force=force, dry_run=dry_run, snapshot=snap)
            if session_id is None and report.outcome.retryable and report.outcome.code == "CONCURRENT_UPDATE":
                break
    except JobCancelled:
        _finish(ctx, report)  # the batches before the cancel are whole: record them
        raise
    _finish(ctx, report)
    return report


def _finish_interrupted(ctx: Context) -> None:
    """Before the sessions are read: finish the marks of a batch a killed run installed, so its
    unmarked tail is never offered to the writer as a batch of its own."""
    if not (ctx.layout.runtime_dir / marks.INTENT_NAME).exists():
        return
    try:
        with locked(ctx):
            recover(ctx.memory_root)  # finishes the batch intent among the rest
    except MemoryError as exc:
        if exc.code != "CONCURRENT_UPDATE":
            raise
        # busy: the holder (or the next run) finishes it; this run's batches wait for the lock anyway


def _finish(ctx: Context, report: WriteReport) -> None:
    if report.dry_run:
        report.revision = report.revision_before
        return
    now = ctx.clock()
    try:
        if report.outcome.failed:
            if ctx.layout.runtime_dir.is_dir():
                st.record_failure(ctx.layout.runtime_dir, now, report.outcome.code or "WRITER_FAILURE_UNKNOWN",
                                  report.outcome.retryable)
        elif report.written:
            report.succeed()
            st.record_success(ctx.layout.runtime_dir, now)
    except (MemoryError, OSError) as exc:
        # The job's own outcome stands (the memory it wrote is kept); only its bookkeeping line is
        # missing, said as a warning: a linked runtime dir or status file, a full disk.
        err = os_failure(exc, root=ctx.memory_root) if isinstance(exc, OSError) else exc
        if isinstance(exc, MemoryError) and exc.code != "PATH_OUTSIDE_WORKSPACE":
            raise
        report.warnings.append(f"writer-status.json not updated: {err}")
    if ctx.memory_root.is_dir():
        report.revision = revision(ctx.memory_root)


__all__ = ["Context", "WriteReport", "BatchReport", "revision", "write", "write_session", "branch_state", "source_record"]
