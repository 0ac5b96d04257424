"""The job runner: one pipeline job at a time in a thread worker.

The worker builds the job's ``Context`` (progress and cancellation wired to the app), calls
the pipeline and only posts messages (``JobProgress`` per ``JobEvent``, one
``JobFinished``); the app owns every bit of state and redraws from those messages.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from textual import work
from textual.dom import DOMNode

from memory_tui.core.errors import MemoryError
from memory_tui.pipeline.backfill import backfill
from memory_tui.pipeline.context import Context, JobCancelled, JobEvent
from memory_tui.pipeline.reorganize import reorganize
from memory_tui.pipeline.settings import WriterSettings
from memory_tui.pipeline.write import write

from .messages import JobFinished, JobProgress

Job = Callable[[Context], Any]


@dataclass
class JobSpec:
    """A job to run: ``run`` gets the built ``Context`` and returns the job's report."""

    name: str
    run: Job
    settings: WriterSettings = field(default_factory=WriterSettings)
    context_options: dict[str, Any] = field(default_factory=dict)  # e.g. a writer or clock for tests


def write_job(settings: WriterSettings, *, force: bool = False) -> JobSpec:
    return JobSpec("write", lambda ctx: write(ctx, force=force), settings)


def reorganize_job(settings: WriterSettings) -> JobSpec:
    return JobSpec("reorganize", lambda ctx: reorganize(ctx), settings)


def backfill_job(settings: WriterSettings) -> JobSpec:
    return JobSpec("backfill", lambda ctx: backfill(ctx), settings)


# sessions-ui: the Sessions view's `w` (one branch, forced, as `write SESSION --branch TIP --force`)
def branch_write_job(settings: WriterSettings, session_id: str, tip: str) -> JobSpec:
    return JobSpec("write", lambda ctx: write(ctx, session_id, branch=tip, force=True), settings)


def write_summary(result: Any, memory_root: Path, title: str) -> Any:
    """The ``JobResultDialog`` summary of a write report."""
    from memory_tui.pipeline.jobresult import summarize_write

    return summarize_write(result, memory_root=memory_root, title=title)


class JobRunner:
    """Mixed into the app: ``start_job`` runs a ``JobSpec``, ``cancel_job`` asks it to stop."""

    state_dir: Path
    _job_cancel: threading.Event | None = None

    def start_job(self, spec: JobSpec) -> None:
        self._job_cancel = threading.Event()
        self._job_worker(spec, self._job_cancel)

    def cancel_job(self) -> bool:
        """Ask the running job to stop at its next safe point; False if none runs."""
        if self._job_cancel is None or self._job_cancel.is_set():
            return False
        self._job_cancel.set()
        return True

    @work(thread=True, exclusive=True, group="job", exit_on_error=False)
    def _job_worker(self, spec: JobSpec, cancel: threading.Event) -> None:
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
        problem = failure_of(result)
        node.post_message(JobFinished(spec.name, problem is None, result=result, error=problem))


def failure_of(result: Any) -> str | None:
    """Why a job's report says it failed (``None``: it did not). Write reports carry an
    outcome; reorganize and backfill return dicts with a status and maybe an error."""
    outcome = getattr(result, "outcome", None)
    if outcome in ("retryable", "non-retryable"):
        return f"{result.reason_code}: {result.message}"
    if isinstance(result, dict):
        error = result.get("error")
        if error:
            return f"{error.get('code')}: {error.get('message')}"
        if result.get("status") in ("failed", "busy", "disabled"):
            return str(result["status"])
    return None
