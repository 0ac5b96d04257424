"""The app's job flow: a request is previewed (in a worker), confirmed in a dialog, run by
``JobRunner`` with its progress in the header, reported, and followed by a reload; one job at
a time. While a job runs the watcher's changes wait: the job's finished batches reload.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.worker import Worker, WorkerState

from ..jobs import JobPreviewReady, JobRequest, JobRunner, JobSpec, progress_bar, spec_for, summarize
from ..messages import JobFinished, JobProgress

if TYPE_CHECKING:
    from memory_tui.pipeline.context import JobEvent


class JobFlow(JobRunner):
    """Mixed into the app: ``start_job`` and the messages of a job's life."""

    def _init_jobs(self) -> None:
        self.jobs: dict[str, JobEvent] = {}  # the running job's last progress step
        self._job_paths: set[str] = set()  # what the watcher saw change while a job runs
        self._job_batches = 0  # batches the running job has finished (its last progress said)
        self._job_reload_due = False  # a batch finished before the watcher named its files
        self.job_context_options: dict = {}  # extra Context fields for jobs (tests: git_env, clock)
        self.job_results: list = []  # every JobSummary shown this session: the job history lists them
        self._job_request: JobRequest | None = None
        self._job_revision_before: str | None = None
        self._job_preview = None  # the confirmed JobPreview of the running job (what it planned)
        self._job_pending = False  # a preview/confirm is open: a second request waits for it
        self.preparing_job: JobRequest | None = None  # its preview is being built in a worker
        self._job_planned: int | None = None  # batches the running job's preview planned

    def job_label(self) -> str:
        if not self.jobs and self.preparing_job is not None:
            return f"{self.preparing_job.kind}: preparing preview…"
        if not self.jobs:
            return f"loading {self.loading}…" if self.loading else ""
        job, event = next(iter(self.jobs.items()))
        # ``x`` is answered at once, although the job stops only before its next transaction
        stopping = " cancelling…" if self._job_cancel is not None and self._job_cancel.is_set() else ""
        if event.total:
            phase = "" if event.phase in (job, "batch", "writer", "organize", "backfill") else f" {event.phase}"
            return (f"{job} {progress_bar(event.done, event.total, ascii=self.ascii_mode)} {event.done}/{event.total}"
                    f"{phase}{stopping}")
        return f"{job} {event.phase} {event.done}{stopping}"

    def action_run_job(self, kind: str) -> None:
        self.start_job(JobRequest(kind))

    def start_job(self, request: JobRequest) -> None:
        """Preview ``request`` (in a worker: "preparing preview…" meanwhile), ask, run it with
        progress in the header, report, reload.

        One job at a time: while one runs (or its preview is prepared, or waits for its
        confirmation) this says so and starts nothing."""
        if self.jobs or self._job_pending:
            running = next(iter(self.jobs), None) or (
                f"{self.preparing_job.kind} (preparing its preview)" if self.preparing_job else "another job")
            self.notify(f"{running} is still running (x cancels it); {request.kind} was not started.", severity="warning")
            return
        self._job_pending = True
        self.preparing_job = request
        self._redraw_header()
        self.prepare_preview(request, self.settings.writer, dict(self.job_context_options))

    def on_job_preview_ready(self, message: JobPreviewReady) -> None:
        from ..dialogs.confirm_job import ConfirmJobDialog

        request, preview = message.request, message.preview
        self.preparing_job = None
        self._redraw_header()
        if message.error is not None:
            self._job_pending = False
            self.notify(f"{request.kind}: no preview: {message.error.code}: {message.error.message}", severity="error")
            return

        def confirmed(answer) -> None:
            self._job_pending = False
            if answer is not None and answer.run:
                self._job_request = request
                self._job_revision_before = preview.revision
                self._job_preview = preview
                # a write reports batches without a total; the preview planned them
                self._job_planned = sum(1 for b in preview.batches if b.result == "planned") or None
                self.launch_job(spec_for(request, self.settings.writer, self.job_context_options))

        self.push_screen(ConfirmJobDialog(preview, lock=message.lock), confirmed)

    def launch_job(self, spec: JobSpec) -> None:
        """Start ``spec`` in the job worker (one job at a time); the app keeps its progress."""
        from memory_tui.pipeline.context import JobEvent

        self.jobs[spec.name] = JobEvent("starting")
        self._job_batches = 0
        self._job_paths = set()
        self.run_spec(spec)
        self._redraw_header()

    def _show_job_result(self, message: JobFinished) -> None:
        request, self._job_request = self._job_request, None
        if request is None or request.kind != message.job:
            return  # a job started without the flow (tests' launch_job): notifications only
        from ..dialogs.job_result import JobResultDialog

        summary = summarize(request, message, memory_root=self.state_dir / "memory", revision_before=self._job_revision_before,
                            preview=self._job_preview)
        self.job_results.append(summary)

        def chosen(choice) -> None:
            if choice is not None and choice.retry:
                self.start_job(request)

        self.push_screen(JobResultDialog(summary), chosen)

    def action_job_history(self) -> None:
        from ..dialogs.job_history import JobHistoryDialog

        self.push_screen(JobHistoryDialog(reversed(self.job_results), self.state_dir / "memory", ascii=self.ascii_mode))

    def action_cancel_job(self) -> None:
        if self.cancel_job():
            self._redraw_header()
            self.notify("Cancelling: the job stops before its next transaction.")
        else:
            self.notify("No job is running.", severity="information")

    def on_job_progress(self, message: JobProgress) -> None:
        if message.event.phase == "warning":
            self.notify(f"{message.job}: {message.event.message}", severity="warning")
            return
        from memory_tui.pipeline.context import JobEvent

        event = message.event
        request = self._job_request
        if (event.total is None and event.phase in ("batch", "writer") and self._job_planned
                and request is not None and request.kind == message.job):
            event = JobEvent(event.phase, event.done, max(self._job_planned, event.done), event.message)
        self.jobs[message.job] = event
        self._redraw_header()
        if event.phase == "batch" and event.done > self._job_batches:
            # a batch was written (its marks, topics and commit are in): the header's pending
            # count and the views follow it, from the files the batch touched
            self._job_batches = event.done
            self._reload_job_paths()

    def _reload_job_paths(self) -> None:
        if self.watch_enabled and not self._job_paths:
            self._job_reload_due = True  # the watcher has not reported the batch's files yet
            return
        if self.watch_enabled and self.jobs:
            # While the job runs, a batch's reload is its sessions' (the header's pending count
            # follows each batch); rebuilding the topic views after every batch was most of
            # what the app spent beside the CLI's work, and the reload at the job's end checks
            # everything. The memory/ paths wait for that reload.
            sessions = {p for p in self._job_paths if not p.startswith("memory/")}
            if not sessions:
                self._job_reload_due = True  # the batch's marks are not reported yet
                return
            self._job_paths -= sessions
            self._job_reload_due = False
            self.load_in_background(sessions)
            return
        self._job_reload_due = False
        paths, self._job_paths = set(self._job_paths), set()
        # without a watcher nothing says which files the batch touched: check everything
        self.load_in_background(paths if self.watch_enabled else None)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # A job that raised something no job handler expects: say so, never hide it.
        if event.worker.group == "job-preview" and event.state == WorkerState.ERROR:
            self._job_pending = False
            self.preparing_job = None
            self._redraw_header()
            self.notify(f"job preview crashed: {event.worker.error!r}", severity="error", timeout=30)
        if event.worker.group == "job" and event.state == WorkerState.ERROR:
            self.jobs.clear()
            self._redraw_header()
            self.notify(f"job crashed: {event.worker.error!r}", severity="error", timeout=30)

    def on_job_finished(self, message: JobFinished) -> None:
        self.jobs.pop(message.job, None)
        self._job_paths, self._job_reload_due = set(), False  # the reload below checks everything
        self._redraw_header()
        if self._job_request is not None:
            # a cancelled job too: the result says what it wrote before it stopped
            self._show_job_result(message)
        elif message.cancelled:
            self.notify(f"{message.job} cancelled: nothing was written after its last whole step")
            self._show_job_result(message)
        elif message.ok:
            self.notify(f"{message.job} finished")
        else:
            self.notify(f"{message.job} failed: {message.error}", severity="error")
        self.load_in_background(None)
