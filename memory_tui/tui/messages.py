"""Messages the app and its workers post. Workers never touch widgets; the app owns state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:  # the pipeline is imported when a job runs, not when the app starts
    from memory_tui.pipeline.context import JobEvent


class WorkspaceChanged(Message):
    """Files changed under ``memory/`` or ``sessions/`` (paths relative to the state dir)."""

    def __init__(self, paths: frozenset[str]) -> None:
        super().__init__()
        self.paths = paths


class ModelApplied(Message):
    """The app applied a new model: ``views`` are the views it redrew (every view for an
    explicit reload). A reload that found nothing visible changed applies none and posts
    nothing; an observer (``App.run_test(message_hook=...)``) sees each one."""

    def __init__(self, revision: str, views: frozenset[str]) -> None:
        super().__init__()
        self.revision = revision
        self.views = views


class JobProgress(Message):
    """A running job (write, reorganize, backfill) reached a step (``tui/jobs.py`` posts it)."""

    def __init__(self, job: str, event: JobEvent) -> None:
        super().__init__()
        self.job = job
        self.event = event


class JobFinished(Message):
    """A job ended: ``ok`` with its ``result``, failed with ``error``, or was ``cancelled``
    at a safe point (every transaction before it whole, none begun after): then ``result`` is
    the job's partial report when it has one, and ``steps`` the steps it had done."""

    def __init__(self, job: str, ok: bool, result: Any = None, error: Any = None, cancelled: bool = False,
                 steps: int = 0) -> None:
        super().__init__()
        self.job = job
        self.ok = ok
        self.result = result
        self.error = error
        self.cancelled = cancelled
        self.steps = steps


class InsightsReady(Message):
    """The insight figures (``model.insights.InsightsVM``) of the model at ``revision`` are computed;
    ``key`` is that model's ``model.insights.insights_key``."""

    def __init__(self, revision: str, insights: Any, key: tuple[Any, ...] = ()) -> None:
        super().__init__()
        self.revision = revision
        self.insights = insights
        self.key = key
