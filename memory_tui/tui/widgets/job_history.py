"""The job-history panel: this run's jobs first, then the persisted history.

``JobHistoryList(this_run=(), history=None)``: ``this_run`` are ``JobSummary`` values (the
app's own jobs, newest first), ``history`` a ``JobHistory`` (``pipeline.history``:
writer-status + agent-history, newest first). Each option carries its object; selecting
one posts ``JobHistoryList.Selected(item)``, where ``item`` is that ``JobSummary`` or
``HistoryEntry``, so the screen can open ``JobResultDialog`` for a summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from rich.text import Text
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from memory_tui.core.format.text import sanitize

from ..jobs import CANCELLED


def _mark(ok: bool, ascii_mode: bool) -> tuple[str, str]:
    if ascii_mode:
        return ("ok " if ok else "ERR", "green" if ok else "red")
    return ("✓" if ok else "✗", "green" if ok else "red")


class JobOption(Option):
    def __init__(self, summary: Any, ascii_mode: bool = False) -> None:
        if summary.outcome.code == CANCELLED:  # stopped by the owner: neither done nor failed
            mark, style = ("-  " if ascii_mode else "–", "yellow")
        else:
            mark, style = _mark(not summary.outcome.failed, ascii_mode)
        text = Text()
        text.append(f"{mark} ", style=style)
        text.append("this run  ", style="bold")
        text.append(f"{sanitize(summary.title)}: {summary.outcome.code}")
        if summary.outcome.failed and summary.outcome.retryable:
            text.append(" (retryable)", style="yellow")
        if summary.changed_files:
            text.append(f" · {len(summary.changed_files)} file(s)", style="dim")
        super().__init__(text)
        self.item = summary


class HistoryOption(Option):
    def __init__(self, entry: Any, ascii_mode: bool = False) -> None:
        mark, style = _mark(entry.ok, ascii_mode)
        text = Text()
        text.append(f"{mark} ", style=style)
        text.append(f"{(entry.at or f'run {entry.line}')[:19]:<19}  ", style="dim")
        text.append(f"{sanitize(entry.stage):<14} ", style="bold")
        text.append(sanitize(entry.summary))
        if entry.code:
            text.append(f" [{entry.code}{', retryable' if entry.retryable else ''}]", style="red")
        if entry.topic_paths:
            text.append(" → " + ", ".join(sanitize(p) for p in entry.topic_paths), style="dim")
        super().__init__(text)
        self.item = entry


class JobHistoryList(OptionList):
    DEFAULT_CSS = "JobHistoryList { height: 1fr; }"

    @dataclass
    class Selected(Message):
        history_list: "JobHistoryList"
        item: Any  # JobSummary | HistoryEntry

        @property
        def control(self) -> "JobHistoryList":
            return self.history_list

    def __init__(self, this_run: Iterable[Any] = (), history: Any = None, *, ascii: bool = False,
                 name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.ascii = ascii
        self.set_items(this_run, history)

    def set_items(self, this_run: Iterable[Any] = (), history: Any = None) -> None:
        self.clear_options()
        options: list[Option] = [JobOption(s, self.ascii) for s in this_run]
        if history is not None:
            options.extend(HistoryOption(e, self.ascii) for e in history.entries)
        self.add_options(options)
        problems = len(history.problems) if history is not None else 0
        self.border_title = f"jobs ({len(options)})" + (f" · {problems} unreadable line(s)" if problems else "")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list is self and isinstance(event.option, (JobOption, HistoryOption)):
            event.stop()
            self.post_message(self.Selected(self, event.option.item))
