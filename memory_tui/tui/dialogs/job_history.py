"""The job-history panel: this run's jobs (newest first), then the persisted history.

The persisted part (``writer-status.json`` + ``agent-history.jsonl``, ``pipeline.history``)
is read in a worker: the history file grows with every run, so the panel opens at once with
"loading…" and fills in. Selecting one of this run's jobs shows its result again
(``JobResultDialog``); Esc closes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Label

from ..widgets.job_history import JobHistoryList
from .confirm_job import dialog_css


class JobHistoryLoaded(Message):
    def __init__(self, history: Any) -> None:
        super().__init__()
        self.history = history


class JobHistoryDialog(ModalScreen[None]):
    """``JobHistoryDialog(this_run, memory_root, ascii=False)``; ``this_run`` newest first."""

    DEFAULT_CSS = dialog_css("JobHistoryDialog") + """
    JobHistoryDialog > Vertical { height: 80%; }
    JobHistoryDialog JobHistoryList { height: 1fr; }
    JobHistoryDialog #history-status { color: $text-muted; }
    """
    BINDINGS = [Binding("escape", "close", "Close", id="dialog.cancel")]

    def __init__(self, this_run: Iterable[Any], memory_root: Path, *, ascii: bool = False) -> None:
        super().__init__()
        self.this_run = tuple(this_run)
        self.memory_root = Path(memory_root)
        self.ascii = ascii

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Jobs: this run, then writer-status.json and agent-history.jsonl", classes="dialog-title")
            yield Label("loading the persisted history…", id="history-status")
            yield JobHistoryList(self.this_run, None, ascii=self.ascii, id="job-history")

    def on_mount(self) -> None:
        lst = self.query_one(JobHistoryList)
        if lst.option_count:
            lst.highlighted = 0
        lst.focus()
        self._load(self.memory_root)

    @work(thread=True, exclusive=True, group="job-history", exit_on_error=False, description="job-history")
    def _load(self, memory_root: Path) -> None:
        from memory_tui.pipeline.history import read_job_history

        self.post_message(JobHistoryLoaded(read_job_history(memory_root)))

    def on_job_history_loaded(self, message: JobHistoryLoaded) -> None:
        lst = self.query_one(JobHistoryList)
        lst.set_items(self.this_run, message.history)
        if lst.option_count:
            lst.highlighted = 0  # enter acts on the newest job at once
        h = message.history
        status = f"{len(self.this_run)} job(s) this run · {h.total_runs} persisted run(s), {len(h.entries)} shown"
        if h.problems:
            status += f" · {len(h.problems)} unreadable line(s): " + "; ".join(str(p) for p in h.problems[:3])
        self.query_one("#history-status", Label).update(status)

    def on_job_history_list_selected(self, message: JobHistoryList.Selected) -> None:
        message.stop()
        if hasattr(message.item, "outcome"):  # one of this run's JobSummary values
            from .job_result import JobResultDialog

            self.app.push_screen(JobResultDialog(message.item))

    def action_close(self) -> None:
        self.dismiss(None)
