"""Confirm a job, showing its dry-run preview (``pipeline.preview.JobPreview``).

Dismisses with ``JobConfirmation(run, job, preview)``: ``run`` is True only for "Run".
"Run" is disabled when the preview has nothing to do. When the write lock is held (a
``LockProbe`` is passed), the dialog says by whom: the job would wait and then stop with
``CONCURRENT_UPDATE``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from memory_tui.core.format.text import sanitize

MAX_BATCH_ROWS = 8
MAX_FILE_ROWS = 12

# The buttons are docked at the dialog's foot: on a short screen the text above them is
# clipped, never the way to answer.
DIALOG_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 90%; max-width: 110; height: auto; max-height: 90%;
    border: thick $primary; background: $surface; padding: 0 1;
}}
{name} .dialog-title {{ text-style: bold; width: 100%; padding: 0 0 1 0; }}
{name} .dialog-body {{ height: auto; max-height: 30; }}
{name} .dialog-buttons {{ dock: bottom; height: auto; align: right middle; padding-top: 1; }}
{name} .dialog-buttons Button {{ margin-left: 1; }}
{name} .dialog-warning {{ color: $warning; }}
{name}.-low .dialog-title {{ padding: 0; }}
{name}.-low .dialog-buttons {{ padding-top: 0; }}
{name}.-slim .dialog-buttons Button {{ min-width: 0; }}
"""


SHORT = 16  # rows: below this a dialog drops its spacing
NARROW = 60  # columns: below this its buttons drop their minimum width


def dialog_css(name: str) -> str:
    return DIALOG_CSS.format(name=name)


class FitsBody:
    """A dialog whose text pane (``BODY``, at most ``BODY_MAX`` rows) gets the room the screen
    leaves beside its title, notes and docked buttons, and scrolls past it: sized by its
    content alone it ran below the box's foot, clipped, its last lines out of reach."""

    BODY = ".dialog-body"
    BODY_MAX = 30

    def fitted_body(self):
        """The text pane, or None for a dialog that has none this time (a refusal's lone reason)."""
        found = self.query(self.BODY)  # type: ignore[attr-defined]
        return found.first() if found else None

    def on_mount(self) -> None:
        self.call_after_refresh(self.fit_body)  # type: ignore[attr-defined]

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit_body)  # type: ignore[attr-defined]

    def room(self) -> int:
        """The rows inside the box at its largest (its max-height less its border)."""
        return int(self.size.height * 0.9) - 2  # type: ignore[attr-defined]

    def fit_body(self) -> None:
        # a short screen gives the text the blank rows that part title, text and buttons
        self.set_class(self.size.height < SHORT, "-low")  # type: ignore[attr-defined]
        # and a narrow one sizes its buttons by their labels, so a row of them fits the box
        self.set_class(self.size.width < NARROW, "-slim")  # type: ignore[attr-defined]
        box = self.query_one(Vertical)  # type: ignore[attr-defined]
        body = self.fitted_body()
        if body is None:
            return
        room = self.room()
        others = sum(w.outer_size.height for w in box.children if w is not body and w.display)
        fit = max(1, min(self.BODY_MAX, room - others))
        if body.styles.max_height is None or body.styles.max_height.value != fit:
            body.styles.max_height = fit


@dataclass(frozen=True)
class JobConfirmation:
    run: bool
    job: str
    preview: object  # the JobPreview shown


class FoldedPaths:
    """Paths one a line; one wider than its column folds after a ``/`` (its continuation
    indented), so a file or folder name is cut only when it alone is wider than the column."""

    def __init__(self, paths: list[str], tail: Text | None = None) -> None:
        self.paths, self.tail = paths, tail

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        names = [part for path in self.paths for part in _path_parts(path)]
        return Measurement(max(map(cell_len, names)), max(map(cell_len, self.paths)))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        indent = "  " if width > 12 else ""
        for path in self.paths:
            line = ""
            for part in _path_parts(path):
                if line.strip() and cell_len(line + part) > width:
                    yield Text(line, overflow="fold")
                    # a name wider than the column folds anyway: then from the column's start
                    line = indent if cell_len(indent + part) <= width else ""
                line += part
            yield Text(line, overflow="fold")
        if self.tail is not None:
            yield self.tail


def _path_parts(path: str) -> list[str]:
    """``a/b/c.md`` as ``a/``, ``b/``, ``c.md``: the places a path may fold."""
    return re.findall(r"[^/]*/|[^/]+$", path)


def preview_renderable(preview) -> Table:
    """The preview as a two-column table (also used by the CLI-facing tests)."""
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")  # a path or revision wider than the box folds, never loses its end
    t.add_row("job", sanitize(preview.title))
    t.add_row("writer", sanitize(preview.writer or "—"))
    t.add_row(preview.unit, f"{preview.count}" + (f" · {preview.tokens} tokens" if preview.tokens else ""))
    t.add_row("batches", str(sum(1 for b in preview.batches if b.result == "planned")))
    t.add_row("revision", preview.revision or "—")
    rows = Text()
    for b in preview.batches[:MAX_BATCH_ROWS]:
        where = " ".join(sanitize(x) for x in (b.session_id, b.tip) if x)
        what = f"{len(b.ids)} {preview.unit}" if preview.unit != "record ops" else f"{b.note} {b.ids[0]}"
        rows.append(f"{where + ': ' if where else ''}{what}" + (f", {b.tokens} tokens" if b.tokens else "")
                    + (f" — {b.result}" if b.result != "planned" else "") + "\n")
    if len(preview.batches) > MAX_BATCH_ROWS:
        rows.append(f"… {len(preview.batches) - MAX_BATCH_ROWS} more\n", style="dim")
    if rows:
        rows.rstrip()
        t.add_row("", rows)
    files: RenderableType = Text("none", style="dim")
    if preview.files:
        more = len(preview.files) - MAX_FILE_ROWS
        files = FoldedPaths([sanitize(f) for f in preview.files[:MAX_FILE_ROWS]],
                            Text(f"… {more} more", style="dim") if more > 0 else None)
    t.add_row("files likely to change", files)
    for note in preview.notes:
        t.add_row("note", Text(sanitize(note), style="italic"))
    return t


class ConfirmJobDialog(FitsBody, ModalScreen[JobConfirmation]):
    """``ConfirmJobDialog(preview, lock=None)``."""

    DEFAULT_CSS = dialog_css("ConfirmJobDialog")
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="dialog.cancel"),
        Binding("y", "run", "Run", id="dialog.confirm"),
    ]

    def __init__(self, preview, *, lock=None) -> None:
        super().__init__()
        self.preview = preview
        self.lock = lock

    def compose(self) -> ComposeResult:
        p = self.preview
        with Vertical():
            yield Label(f"Run {sanitize(p.title)}?", classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(preview_renderable(p), id="preview")
            if self.lock is not None and self.lock.held:
                yield Label(f"{self.lock.describe()}: the job would wait, then stop with CONCURRENT_UPDATE (retry later).",
                            classes="dialog-warning", id="lock-warning")
            if p.nothing_to_do:
                yield Label("Nothing to do.", classes="dialog-warning", id="nothing")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Run", id="run", variant="primary", disabled=p.nothing_to_do)

    def on_mount(self) -> None:
        self.query_one("#cancel" if self.preview.nothing_to_do else "#run", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "run":
            self.action_run()
        else:
            self.action_cancel()

    def action_run(self) -> None:
        if not self.preview.nothing_to_do:
            self.dismiss(JobConfirmation(True, self.preview.job, self.preview))

    def action_cancel(self) -> None:
        self.dismiss(JobConfirmation(False, self.preview.job, self.preview))
