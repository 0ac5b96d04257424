"""Messages the app's workers post. Workers never touch widgets; the app owns state."""

from __future__ import annotations

from typing import Any

from textual.message import Message


class WorkspaceChanged(Message):
    """Files changed under ``memory/`` or ``sessions/`` (paths relative to the state dir)."""

    def __init__(self, paths: frozenset[str]) -> None:
        super().__init__()
        self.paths = paths


class JobProgress(Message):
    """A long job (write, reorganize, backfill) reports progress.

    Jobs run in ``@work(thread=True, exclusive=True, group="job", exit_on_error=False)``
    workers and post this with ``app.call_from_thread``-safe ``post_message``.
    """

    def __init__(self, job: str, done: int, total: int | None = None, note: str = "") -> None:
        super().__init__()
        self.job = job
        self.done = done
        self.total = total
        self.note = note


class JobFinished(Message):
    """A job ended: ``ok`` with its ``result``, or failed with ``error`` (a MemoryError/Problem)."""

    def __init__(self, job: str, ok: bool, result: Any = None, error: Any = None, cancelled: bool = False) -> None:
        super().__init__()
        self.job = job
        self.ok = ok
        self.result = result
        self.error = error
        self.cancelled = cancelled
