"""The file changed on disk while it was being edited: the owner decides.

"See diff" shows (and hides) the difference between the file on disk ("theirs") and the
buffer ("mine") in the project's own ``DiffView``; it does not close the dialog. "Keep
mine" keeps the buffer (the caller re-validates it against the new base), "Take theirs"
replaces the buffer with the file on disk. ``escape`` decides nothing (``None``): the
buffer stays as it is and the conflict stays open — it is never discarded silently.
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

from ..widgets.diff_view import DiffView
from .confirm_job import SHORT, FitsBody, dialog_css

KEEP_MINE = "keep_mine"
TAKE_THEIRS = "take_theirs"


@dataclass(frozen=True)
class ConflictResolution:
    choice: Literal["keep_mine", "take_theirs"]
    text: str  # the text the buffer should hold now


class ConflictDialog(FitsBody, ModalScreen["ConflictResolution | None"]):
    """``ConflictDialog(path, mine, theirs)``."""

    DEFAULT_CSS = dialog_css("ConflictDialog") + """
    ConflictDialog DiffView { height: 18; display: none; }
    ConflictDialog DiffView.shown { display: block; }
    ConflictDialog #kept { width: 100%; }
    ConflictDialog.-low DiffView { border: none; }
    """
    BODY = "DiffView"
    BODY_MAX = 18
    BINDINGS = [
        Binding("escape", "later", "Decide later", id="dialog.cancel"),
        Binding("d", "toggle_diff", "See diff", id="conflict.diff"),
        Binding("m", "keep_mine", "Keep mine", id="conflict.mine"),
        Binding("t", "take_theirs", "Take theirs", id="conflict.theirs"),
    ]

    def __init__(self, path: str, mine: str, theirs: str) -> None:
        super().__init__()
        self.path, self.mine, self.theirs = path, mine, theirs

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{sanitize(self.path)} changed on disk while you were editing it", classes="dialog-title")
            yield Label("Your buffer is kept until you choose.", id="kept")
            yield DiffView(self.theirs, self.mine, old_label="on disk (theirs)", new_label="buffer (mine)", id="diff")
            with Horizontal(classes="dialog-buttons"):
                yield Button("See diff", id="diff-toggle")
                yield Button("Take theirs", id="theirs", variant="warning")
                yield Button("Keep mine", id="mine", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#mine", Button).focus()

    @property
    def diff_shown(self) -> bool:
        return self.query_one(DiffView).has_class("shown")

    def action_toggle_diff(self) -> None:
        self.query_one(DiffView).toggle_class("shown")
        self.label_buttons()
        self.call_after_refresh(self.fit_body)

    def label_buttons(self) -> None:
        # a narrow box holds three buttons only under one-word labels (the keys d, t, m still work)
        narrow = self.has_class("-slim")
        shown = self.diff_shown
        labels = {"diff-toggle": ("Hide" if shown else "Diff") if narrow else ("Hide diff" if shown else "See diff"),
                  "theirs": "Theirs" if narrow else "Take theirs", "mine": "Mine" if narrow else "Keep mine"}
        for button_id, label in labels.items():
            button = self.query_one(f"#{button_id}", Button)
            if str(button.label) != label:
                button.label = label

    def fit_body(self) -> None:
        # on a short screen the open diff takes the note's row (the title says what happened)
        self.query_one("#kept").display = not (self.size.height < SHORT and self.diff_shown)
        super().fit_body()
        self.label_buttons()

    def action_keep_mine(self) -> None:
        self.dismiss(ConflictResolution(KEEP_MINE, self.mine))

    def action_take_theirs(self) -> None:
        self.dismiss(ConflictResolution(TAKE_THEIRS, self.theirs))

    def action_later(self) -> None:
        self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        {"diff-toggle": self.action_toggle_diff, "mine": self.action_keep_mine, "theirs": self.action_take_theirs}[event.button.id]()
