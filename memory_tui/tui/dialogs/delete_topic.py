"""Confirm deleting a topic, listing the links it would leave dangling (``TopicDeleteCheck``).

``topics/core.md`` cannot be deleted (OpenProgram pitfall 10): the dialog says why and
offers only "Close". Dismisses with ``TopicDeleteDecision(delete, path)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from memory_tui.core.format.text import sanitize

from .confirm_job import FitsBody, dialog_css


@dataclass(frozen=True)
class TopicDeleteDecision:
    delete: bool
    path: str


def delete_buttons() -> ComposeResult:
    """Cancel and Delete, the row every delete confirmation ends with (Cancel takes focus)."""
    with Horizontal(classes="dialog-buttons"):
        yield Button("Cancel", id="cancel")
        yield Button("Delete", id="delete", variant="error")


class DeleteTopicDialog(FitsBody, ModalScreen[TopicDeleteDecision]):
    """``DeleteTopicDialog(check)`` with ``check`` from ``core.recordops.topic_delete_check``."""

    # the reason is a long sentence: it wraps inside the dialog instead of running off its edge
    DEFAULT_CSS = dialog_css("DeleteTopicDialog") + "\nDeleteTopicDialog #reason { width: 100%; }\n"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def __init__(self, check) -> None:
        super().__init__()
        self.check = check

    def compose(self) -> ComposeResult:
        c = self.check
        with Vertical():
            if not c.allowed:
                yield Label(f"{sanitize(c.path)} cannot be deleted", classes="dialog-title")
                yield Label(sanitize(c.reason), id="reason")
                with Horizontal(classes="dialog-buttons"):
                    yield Button("Close", id="cancel", variant="primary")
                return
            yield Label(f"Delete {sanitize(c.path)} and its {c.records} record(s)?", classes="dialog-title")
            body = Text()
            if c.dangling:
                body.append(f"{len(c.dangling)} record(s) in other topics link here; those links would dangle and the "
                            "transaction will refuse the delete until they are removed:\n", style="yellow")
                for link in c.dangling:
                    body.append(f"  {link.memory_id}  {sanitize(link.path)}:{link.line}  ", style="bold")
                    body.append(sanitize(link.content) + "\n")
                body.rstrip()
            else:
                body.append("No other record links to it.", style="dim")
            with VerticalScroll(classes="dialog-body"):
                yield Static(body, id="links")
            yield from delete_buttons()

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def action_cancel(self) -> None:
        self.dismiss(TopicDeleteDecision(False, self.check.path))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(TopicDeleteDecision(event.button.id == "delete" and self.check.allowed, self.check.path))
