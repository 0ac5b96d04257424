"""A text diff drawn by the project itself: ``difflib`` for the rows, Rich for the cells.

(OpenProgram's licence is AGPL and so is the one ready-made Textual diff widget; the
project is MIT, so the diff is computed and drawn here.)

``unified_rows`` / ``side_rows`` (``tui/model/diff.py``) are pure functions over the two
texts, tested without a terminal; ``DiffView`` renders them, unified (default) or side by side, and ``s`` switches.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from memory_tui.core.format.text import sanitize

from ..model.diff import SideRow, UnifiedRow, side_rows, unified_rows

_UNIFIED_STYLE = {" ": "", "-": "red", "+": "green", "@": "cyan", "=": "bold"}


def render_unified(rows: list[UnifiedRow]) -> Text:
    out = Text(no_wrap=False)
    for row in rows:
        if row.kind in ("@", "="):
            out.append(sanitize(row.text) + "\n", style=_UNIFIED_STYLE[row.kind])
            continue
        num = row.old_line if row.kind == "-" else row.new_line
        out.append(f"{num or '':>5} ", style="dim")
        out.append(f"{row.kind} {sanitize(row.text)}\n", style=_UNIFIED_STYLE[row.kind])
    out.rstrip()
    return out


def render_side(rows: list[SideRow], *, old_label: str, new_label: str) -> Table:
    table = Table(expand=True, show_lines=False, box=None, pad_edge=False)
    table.add_column("", justify="right", style="dim", width=5, no_wrap=True)
    table.add_column(old_label, ratio=1)
    table.add_column("", justify="right", style="dim", width=5, no_wrap=True)
    table.add_column(new_label, ratio=1)
    for r in rows:
        if r.kind == "gap":
            table.add_row("", Text("⋯", style="dim"), "", Text("⋯", style="dim"))
            continue
        old_style = "red" if r.kind in ("replace", "delete") else ""
        new_style = "green" if r.kind in ("replace", "insert") else ""
        table.add_row(str(r.old_line or ""), Text(sanitize(r.old_text), style=old_style),
                      str(r.new_line or ""), Text(sanitize(r.new_text), style=new_style))
    return table


class DiffView(VerticalScroll, can_focus=True):
    """``DiffView(old, new, old_label="on disk", new_label="buffer", side=False)``."""

    BINDINGS = [Binding("s", "toggle_side", "Side by side", id="diff.side")]

    DEFAULT_CSS = """
    DiffView { height: 1fr; border: round $primary-darken-2; }
    DiffView > Static { width: 100%; }
    """

    side: reactive[bool] = reactive(False)

    def __init__(self, old: str = "", new: str = "", *, old_label: str = "on disk", new_label: str = "buffer",
                 side: bool = False, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.old, self.new = old, new
        self.old_label, self.new_label = old_label, new_label
        self._body = Static(id="diff-body")
        self.set_reactive(DiffView.side, side)

    def compose(self):
        yield self._body

    def on_mount(self) -> None:
        self._draw()

    def set_texts(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self._draw()

    def watch_side(self, _old: bool, _new: bool) -> None:
        self._draw()

    def action_toggle_side(self) -> None:
        self.side = not self.side

    @property
    def identical(self) -> bool:
        return self.old == self.new

    def _draw(self) -> None:
        self.border_title = f"{self.old_label} → {self.new_label}" + (" (side by side)" if self.side else "")
        if self.identical:
            self._body.update(Text("no differences", style="dim"))
        elif self.side:
            self._body.update(render_side(side_rows(self.old, self.new), old_label=self.old_label, new_label=self.new_label))
        else:
            self._body.update(render_unified(unified_rows(self.old, self.new, old_label=self.old_label, new_label=self.new_label)))
