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


def summarize(request: JobRequest, finished: JobFinished, *, memory_root: Path, revision_before: str | None) -> Any:
    """The ``JobSummary`` the result dialog shows for one finished job."""
    from memory_tui.core.format.outcomes import describe_outcome
    from memory_tui.pipeline import jobresult

    title = {"write-all-forced": "write all sessions (forced)"}.get(request.kind, request.kind)
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
            node.post_message(JobFinished(spec.name, False, result=exc.result, cancelled=True))
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
