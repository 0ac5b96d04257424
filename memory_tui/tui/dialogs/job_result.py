"""A finished job: what changed and what the outcome means (``pipeline.jobresult.JobSummary``).

Dismisses with ``JobResultChoice(retry)``; "Retry" is offered only for a failed job whose
outcome is retryable (e.g. ``CONCURRENT_UPDATE``: another writer held the lock).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from memory_tui.core.format.text import sanitize

from ..jobs import CANCELLED
from .confirm_job import FitsBody, dialog_css

MAX_FILES = 15


@dataclass(frozen=True)
class JobResultChoice:
    retry: bool


def summary_renderable(summary) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")  # a path or revision wider than the box folds, never loses its end
    o = summary.outcome
    cancelled = o.code == CANCELLED
    status = Text(o.code, style="bold yellow" if cancelled else "bold green" if not o.failed else "bold red")
    t.add_row("outcome", status)
    t.add_row("meaning", sanitize(o.meaning))
    if o.failed and not cancelled:
        t.add_row("retryable", "yes — nothing was lost; try again" if o.retryable else "no")
    if summary.message:
        t.add_row("message", Text(sanitize(summary.message)))
    files = Text()
    for f in summary.changed_files[:MAX_FILES]:
        files.append(sanitize(f) + "\n")
    if len(summary.changed_files) > MAX_FILES:
        files.append(f"… {len(summary.changed_files) - MAX_FILES} more\n", style="dim")
    files.rstrip()
    t.add_row("changed files", files if files else Text("none", style="dim"))
    t.add_row("marks added", str(summary.marks_added))
    if summary.revision_before and summary.revision != summary.revision_before:
        t.add_row("revision", f"{summary.revision_before} → {summary.revision}")
    else:
        t.add_row("revision", f"{summary.revision or '—'} (unchanged)")
    t.add_row("git commit", summary.git_commit[:12] if summary.git_commit else Text("none", style="dim"))
    for w in summary.warnings:
        t.add_row("warning", Text(sanitize(w), style="yellow"))
    return t


class JobResultDialog(FitsBody, ModalScreen[JobResultChoice]):
    """``JobResultDialog(summary)``."""

    DEFAULT_CSS = dialog_css("JobResultDialog")
    BINDINGS = [Binding("escape", "close", "Close", id="dialog.cancel")]

    def __init__(self, summary) -> None:
        super().__init__()
        self.summary = summary

    @property
    def can_retry(self) -> bool:
        return self.summary.outcome.failed and self.summary.outcome.retryable

    def compose(self) -> ComposeResult:
        s = self.summary
        # "incomplete" ran without failing but left work (declined or remaining sources): no tick
        mark = ("–" if s.outcome.code == CANCELLED else "✗" if s.outcome.failed
                else "!" if s.outcome.code == "incomplete" else "✓")
        with Vertical():
            yield Label(f"{mark} {sanitize(s.title)}", classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(summary_renderable(s), id="summary")
            with Horizontal(classes="dialog-buttons"):
                if self.can_retry:
                    yield Button("Retry", id="retry", variant="warning")
                yield Button("Close", id="close", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(JobResultChoice(event.button.id == "retry" and self.can_retry))

    def action_close(self) -> None:
        self.dismiss(JobResultChoice(False))
