"""Leaving an editor with unsaved changes asks first.

Dismisses with ``UnsavedChoice(action)``: ``"save"`` (save, then leave), ``"discard"``
(leave without saving) or ``"cancel"`` (stay; also ``escape``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from memory_tui.core.format.text import sanitize

from .confirm_job import dialog_css


@dataclass(frozen=True)
class UnsavedChoice:
    action: Literal["save", "discard", "cancel"]


class UnsavedDialog(ModalScreen[UnsavedChoice]):
    """``UnsavedDialog(path)``."""

    DEFAULT_CSS = dialog_css("UnsavedDialog")
    BINDINGS = [
        Binding("escape", "choose('cancel')", "Stay", id="dialog.cancel"),
        # One key per choice, as the conflict dialog has: no Tab-hunting for a button.
        Binding("d", "choose('discard')", "Discard", id="unsaved.discard"),
        Binding("s", "choose('save')", "Save", id="unsaved.save"),
    ]

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{sanitize(self.path)} has unsaved changes", classes="dialog-title")
            yield Label("Save them before leaving?  s save · d discard · esc stay")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Stay", id="cancel")
                yield Button("Discard", id="discard", variant="error")
                yield Button("Save", id="save", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def action_choose(self, action: str) -> None:
        self.dismiss(UnsavedChoice(action))  # type: ignore[arg-type]

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_choose(event.button.id or "cancel")
