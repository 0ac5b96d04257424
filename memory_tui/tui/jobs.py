"""The job runner: one pipeline job at a time in a thread worker.

The worker builds the job's ``Context`` (progress and cancellation wired to the app), calls
the pipeline and only posts messages (``JobProgress`` per ``JobEvent``, one
``JobFinished``); the app owns every bit of state and redraws from those messages.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from textual import work
from textual.dom import DOMNode
from textual.message import Message

from memory_tui.core.format.errors import MemoryError
from memory_tui.pipeline.reports import JobReport
from memory_tui.pipeline.settings import WriterSettings

from .messages import JobFinished, JobProgress

if TYPE_CHECKING:
    from memory_tui.pipeline.context import Context, JobEvent

# The pipeline (writer, reorganize, backfill and the engine under them) is imported when a
# job runs: at import it is most of the app's start, and the first paint needs none of it.
Job = Callable[["Context"], Any]


def write(ctx: Context, *args: Any, **kwargs: Any) -> Any:
    from memory_tui.pipeline.write import write

    return write(ctx, *args, **kwargs)


def reorganize(ctx: Context) -> Any:
    from memory_tui.pipeline.reorganize import reorganize

    return reorganize(ctx)


def backfill(ctx: Context) -> Any:
    from memory_tui.pipeline.backfill import backfill

    return backfill(ctx)


@dataclass
class JobSpec:
    """A job to run: ``run`` gets the built ``Context`` and returns the job's report."""

    name: str
    run: Job
    settings: WriterSettings = field(default_factory=WriterSettings)
    context_options: dict[str, Any] = field(default_factory=dict)  # e.g. a writer or clock for tests


# --- the owner's job flow (MemoryApp.start_job takes a JobRequest) ---------------
JOB_KINDS = ("write", "write-all-forced", "reorganize", "backfill", "migrate")


@dataclass(frozen=True)
class JobRequest:
    """What the owner asked for; the app previews it, confirms it, runs it, reports it."""

    kind: str  # one of JOB_KINDS
    session_id: str | None = None
    branch: str | None = None
    force: bool = False

    def __post_init__(self) -> None:
        if self.kind not in JOB_KINDS:
            raise ValueError(f"unknown job {self.kind!r}; expected one of {', '.join(JOB_KINDS)}")


def spec_for(request: JobRequest, settings: WriterSettings, context_options: dict[str, Any] | None = None) -> JobSpec:
    """The runnable job for ``request`` (the name is the request's kind)."""
    opts = dict(context_options or {})
    kind = request.kind
    if kind == "write":
        run: Job = lambda ctx: write(ctx, request.session_id, branch=request.branch, force=request.force)
    elif kind == "write-all-forced":
        run = lambda ctx: write(ctx, None, force=True)
    elif kind == "reorganize":
        run = lambda ctx: reorganize(ctx)
    elif kind == "backfill":
        run = lambda ctx: backfill(ctx)
    else:
        run = _migrate
    return JobSpec(kind, run, settings, opts)


def _migrate(ctx: Context) -> Any:
    # The CLI's ``migrate`` verb: the one-time cursor migration, under the lock.
    from memory_tui.pipeline.migrate import migrate_if_needed

    return {"migrate": migrate_if_needed(ctx)}


CANCELLED = "cancelled"  # the outcome code of a job the owner stopped (``x``)
CANCELLED_MEANING = ("Stopped at your request before its next transaction: what is listed here was written whole; "
                     "nothing was begun after it, and what it did not reach is still to do.")


def _title(request: JobRequest) -> str:
    return {"write-all-forced": "write all sessions (forced)"}.get(request.kind, request.kind)


def summarize(request: JobRequest, finished: JobFinished, *, memory_root: Path, revision_before: str | None,
              preview: Any = None) -> Any:
    """The ``JobSummary`` the result dialog shows for one finished job (``preview``: the
    confirmed ``JobPreview``, which says how much a cancelled job had planned)."""
    from memory_tui.core.format.outcomes import describe_outcome
    from memory_tui.pipeline import jobresult

    if finished.cancelled:
        return summarize_cancelled(request, finished, memory_root=memory_root, revision_before=revision_before,
                                   preview=preview)
    title = _title(request)
    err = finished.error
    if isinstance(err, MemoryError):
        return jobresult.JobSummary(request.kind, title, describe_outcome(err.code, err.retryable), (), 0,
                                    revision_before, revision_before, None, err.message)
    result = finished.result
    if request.kind in ("write", "write-all-forced"):
        return jobresult.summarize_write(result, memory_root=memory_root, title=title)
    if request.kind == "reorganize":
        return jobresult.summarize_reorganize(result, revision_before=revision_before, memory_root=memory_root)
    if request.kind == "backfill":
        return jobresult.summarize_backfill(result, revision_before=revision_before, memory_root=memory_root)
    return jobresult.summarize_migrate((result or {}).get("migrate"), revision_before=revision_before)


def _of(planned: int | None) -> str:
    return f" of {planned}" if planned is not None else ""


def summarize_cancelled(request: JobRequest, finished: JobFinished, *, memory_root: Path, revision_before: str | None,
                        preview: Any = None) -> Any:
    """What a cancelled job wrote before it stopped: its outcome is ``cancelled`` (no
    failure, nothing to retry), the rest is read from the job's partial report, or, for
    the jobs that stop without one, from the workspace itself (revision, git HEAD)."""
    from dataclasses import replace

    from memory_tui.core.format.outcomes import Outcome
    from memory_tui.pipeline import jobresult
    from memory_tui.pipeline.context import revision

    outcome = Outcome(CANCELLED, CANCELLED_MEANING, False, True)
    kind, steps, result = request.kind, finished.steps, finished.result
    count = getattr(preview, "count", None)
    if kind in ("write", "write-all-forced") and result is not None:
        base = jobresult.summarize_write(result, memory_root=memory_root, title=_title(request))
        data = result.to_json()
        planned = sum(1 for b in preview.batches if b.result == "planned") if preview is not None else None
        message = (f"{data['written_batches']}{_of(planned)} batch(es) written, {data['marked_turns']}{_of(count)} turn(s) "
                   "marked before the cancel; the other turns are still pending")
        base = replace(base, revision_before=base.revision_before or revision_before)
    elif kind == "reorganize" and result is not None:
        base = jobresult.summarize_reorganize(result, revision_before=revision_before, memory_root=memory_root)
        message = (f"{steps} transaction(s) installed and committed before the cancel, "
                   f"{len(result.changed_files)} file(s) changed")
    elif kind == "backfill" and result is not None:
        base = jobresult.summarize_backfill(result, revision_before=revision_before, memory_root=memory_root)
        message = (f"{len(result.batches)} batch(es), {result.offered} source(s) offered before the cancel, each batch "
                   f"installed and committed; {base.message}")
    elif kind == "reorganize":
        # a cancelled reorganize commits what it installed but reports no files (pipeline.reorganize)
        base = jobresult.summarize_reorganize({"status": "ok", "changed_files": []}, revision_before=revision_before,
                                              memory_root=memory_root)
        chunks = -(-count // 64) if count else None  # the organizer installs 64 record ops per transaction
        message = f"{steps}{_of(chunks)} transaction(s) installed before the cancel"
        if base.revision != revision_before:
            message += "; the files it changed are in its git commit"
    elif kind == "backfill":
        root = Path(memory_root)
        rev = revision(root) if root.is_dir() else None
        base = jobresult.summarize_backfill({"processed": steps, "candidates": count or 0, "revision": rev},
                                            revision_before=revision_before, memory_root=memory_root)
        message = f"{steps}{_of(count)} source(s) processed before the cancel"
        if base.revision != revision_before:
            # pipeline.backfill commits once at its end, which a cancel skips: HEAD is older
            base = replace(base, git_commit=None)
            message += "; what it installed is not committed to git yet"
    else:  # migrate stops before it marks anything; a write without a report, before its first batch
        base = jobresult.JobSummary(kind if kind == "migrate" else "write", _title(request), outcome, (), 0,
                                    revision_before, revision_before)
        message = "stopped before its first transaction: nothing was written"
    return replace(base, outcome=outcome, message=message)


class JobPreviewReady(Message):
    """The dry-run preview of ``request`` is built (``preview``, with the lock probe taken at
    the same time), or could not be (``error``)."""

    def __init__(self, request: JobRequest, preview: Any = None, lock: Any = None, error: MemoryError | None = None) -> None:
        super().__init__()
        self.request = request
        self.preview = preview
        self.lock = lock
        self.error = error


class JobRunner:
    """Mixed into the app: ``run_spec`` runs a ``JobSpec``, ``cancel_job`` asks it to stop,
    ``prepare_preview`` builds a request's dry-run preview off the UI thread."""

    state_dir: Path
    _job_cancel: threading.Event | None = None

    @work(thread=True, exclusive=True, group="job-preview", exit_on_error=False, description="job-preview")
    def prepare_preview(self, request: JobRequest, settings: WriterSettings, options: dict[str, Any]) -> None:
        # A preview reads every pending session and counts tokens: seconds on a big state,
        # so never on the UI thread. It answers with one JobPreviewReady.
        from memory_tui.core.store.lockprobe import probe_write_lock
        from memory_tui.pipeline.context import Context
        from memory_tui.pipeline.preview import preview_job

        node: DOMNode = self  # type: ignore[assignment]
        try:
            ctx = Context(self.state_dir, settings=settings, **options)
            preview = preview_job(ctx, request.kind, session_id=request.session_id, branch=request.branch,
                                  force=request.force)
        except MemoryError as exc:
            node.post_message(JobPreviewReady(request, error=exc))
            return
        node.post_message(JobPreviewReady(request, preview, probe_write_lock(self.state_dir / "memory")))

    def run_spec(self, spec: JobSpec) -> None:
        self._job_cancel = threading.Event()
        self._job_worker(spec, self._job_cancel)

    def cancel_job(self) -> bool:
        """Ask the running job to stop at its next safe point; False if none runs."""
        if self._job_cancel is None or self._job_cancel.is_set():
            return False
        self._job_cancel.set()
        return True

    @work(thread=True, exclusive=True, group="job", exit_on_error=False, description="job")
    def _job_worker(self, spec: JobSpec, cancel: threading.Event) -> None:
        from memory_tui.pipeline.context import Context, JobCancelled

        node: DOMNode = self  # type: ignore[assignment]

        def progress(event: JobEvent) -> None:
            node.post_message(JobProgress(spec.name, event))

        try:
            ctx = Context(self.state_dir, settings=spec.settings, progress=progress, cancelled=cancel.is_set, **spec.context_options)
            result = spec.run(ctx)
        except JobCancelled as exc:
            node.post_message(JobFinished(spec.name, False, result=exc.result, cancelled=True, steps=exc.done))
            return
        except MemoryError as exc:
            node.post_message(JobFinished(spec.name, False, error=exc))
            return
        # a report says whether it failed; migrate's result is no report (it fails by raising)
        problem = result.outcome.failure if isinstance(result, JobReport) else None
        node.post_message(JobFinished(spec.name, problem is None, result=result, error=problem))


def progress_bar(done: int, total: int, *, width: int = 10, ascii: bool = False) -> str:
    """``done`` of ``total`` as a bar of ``width`` cells for the header (text, so it shows on
    every screen and in a snapshot exactly as drawn)."""
    filled = 0 if total <= 0 else min(width, max(0, done) * width // total)
    full, empty, left, right = ("#", "-", "[", "]") if ascii else ("█", "░", "▕", "▏")
    return left + full * filled + empty * (width - filled) + right
