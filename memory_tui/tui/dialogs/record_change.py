"""The dialogs of a record change.

* ``ConfirmRecordDelete(memory_id, content)`` → ``bool``.
* ``RecordTextDialog(memory_id, text, save=..., base_revision=..., fresh_revision=...)``: a
  TextArea prefilled with the record's text. ``save(text, base_revision)`` runs in a worker
  (it is ``model.records.update_record_text`` bound to the state dir); a refusal shows the
  core's errors inline and keeps the buffer; ``CONCURRENT_UPDATE`` says so and the next save
  goes against the new revision. Dismisses with the successful ``ActionOutcome`` or ``None``.
* ``RecordOutcomeDialog(outcome)`` → ``bool`` (True: retry on the new revision; offered only
  for ``CONCURRENT_UPDATE``).
"""

from __future__ import annotations

from typing import Any, Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static, TextArea

from memory_tui.core.format.text import sanitize

from ..model.records import ActionOutcome, short
from .confirm_job import FitsBody, dialog_css
from .delete_topic import delete_buttons


def outcome_text(outcome: ActionOutcome) -> Text:
    out = Text()
    for n, line in enumerate(outcome.lines()):
        if n == 0:
            out.append(sanitize(line) + "\n", "bold green" if outcome.ok else "bold red")
        elif outcome.concurrent and line.startswith("The workspace changed"):
            out.append(sanitize(line) + "\n", "yellow")
        else:
            out.append(sanitize(line) + "\n")
    out.rstrip()
    return out


class ConfirmRecordDelete(FitsBody, ModalScreen[bool]):
    DEFAULT_CSS = dialog_css("ConfirmRecordDelete")
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def __init__(self, memory_id: str, content: str) -> None:
        super().__init__()
        self.memory_id = memory_id
        self.content = content

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Delete record ^{sanitize(self.memory_id)}?", classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(Text.assemble(sanitize(self.content), ("\n\nIts sources stay in the archive; "
                             "the delete is refused while another record links to it.", "dim")), id="record-text")
            yield from delete_buttons()

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    def action_cancel(self) -> None:
        self.dismiss(False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "delete")


class RecordTextDialog(FitsBody, ModalScreen["ActionOutcome | None"]):
    DEFAULT_CSS = dialog_css("RecordTextDialog") + """
    RecordTextDialog TextArea { height: 8; }
    RecordTextDialog.-low TextArea { border: none; }
    RecordTextDialog #text-errors-pane { height: auto; max-height: 10; display: none; }
    RecordTextDialog #text-errors-pane.shown { display: block; }
    """
    BODY = "TextArea"
    BODY_MAX = 8
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="dialog.cancel"),
        Binding("ctrl+s", "save", "Save", id="record_text.save", priority=True),
    ]

    def __init__(self, memory_id: str, text: str, *, save: Callable[[str, "str | None"], ActionOutcome],
                 base_revision: str | None, fresh_revision: Callable[[], "str | None"]) -> None:
        super().__init__()
        self.memory_id = memory_id
        self.original = text
        self.save_fn = save
        self.base_revision = base_revision
        self.fresh_revision = fresh_revision
        self.saving = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Edit the text of ^{sanitize(self.memory_id)} (its sources are kept)", classes="dialog-title")
            yield TextArea(self.original, id="record-text", soft_wrap=True, show_line_numbers=False)
            with VerticalScroll(id="text-errors-pane"):
                yield Static("", id="text-errors")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Save (ctrl+s)", id="save", variant="primary")

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    @property
    def text(self) -> str:
        return self.query_one(TextArea).text

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_save(self) -> None:
        if self.saving:
            return
        if not self.text.strip():
            self.show_errors(Text("A record needs some text; to remove it, delete the record (d).", "bold red"))
            return
        self.saving = True
        self.query_one("#save", Button).disabled = True
        self._save(self.text, self.base_revision)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self.action_save()

    @work(thread=True, exclusive=True, group="record-op", exit_on_error=False, description="record-op")
    def _save(self, text: str, base: str | None) -> None:
        outcome = self.save_fn(text, base)
        fresh = self.fresh_revision() if outcome.concurrent else None
        self.app.call_from_thread(self._saved, outcome, fresh)

    def _saved(self, outcome: ActionOutcome, fresh: str | None) -> None:
        self.saving = False
        self.query_one("#save", Button).disabled = False
        if outcome.ok:
            self.dismiss(outcome)
            return
        # Refused: the buffer stays exactly as typed; the reasons show under it.
        text = outcome_text(outcome)
        for p in outcome.problems:
            where = f"{p.path}:{p.line}" if getattr(p, "path", None) and getattr(p, "line", None) else (p.path or "")
            if p.message and p.message not in outcome.message:
                text.append(f"\n{sanitize(where)} {p.code}: {sanitize(p.message)}", "red")
        if outcome.concurrent and fresh:
            self.base_revision = fresh
            text.append(f"\nSave again to apply this text on revision {short(fresh)}.", "bold yellow")
        self.show_errors(text)

    def show_errors(self, text: Text) -> None:
        self.query_one("#text-errors", Static).update(text)
        self.query_one("#text-errors-pane").set_class(bool(text.plain), "shown")  # no blank row under the text
        self.call_after_refresh(self.fit_body)

    def fit_body(self) -> None:
        # the reasons of a refusal share the room with the text: each keeps a part, and scrolls
        errors = self.query_one("#text-errors-pane", VerticalScroll)
        share = max(2, min(10, self.room() // 3))
        if errors.styles.max_height is None or errors.styles.max_height.value != share:
            errors.styles.max_height = share
        super().fit_body()

    def on_worker_state_changed(self, event: Any) -> None:
        from textual.worker import WorkerState

        if event.worker.group == "record-op" and event.state == WorkerState.ERROR:
            self.saving = False
            self.query_one("#save", Button).disabled = False
            self.show_errors(Text(f"The save crashed: {event.worker.error!r}. The text is still here.", "bold red"))


class RecordOutcomeDialog(FitsBody, ModalScreen[bool]):
    DEFAULT_CSS = dialog_css("RecordOutcomeDialog")
    BINDINGS = [Binding("escape", "close", "Close", id="dialog.cancel")]

    def __init__(self, outcome: ActionOutcome) -> None:
        super().__init__()
        self.outcome = outcome

    def compose(self) -> ComposeResult:
        o = self.outcome
        with Vertical():
            yield Label(("✓ " if o.ok else "✗ ") + ("Done" if o.ok else "Refused: nothing was changed"), classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(outcome_text(o), id="outcome")
            with Horizontal(classes="dialog-buttons"):
                if o.concurrent:
                    yield Button("Retry on the new revision", id="retry", variant="warning")
                yield Button("Close", id="close", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()

    def action_close(self) -> None:
        self.dismiss(False)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "retry" and self.outcome.concurrent)
