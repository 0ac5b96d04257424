"""A compact evidence badge for a record row: ``●2s 3d 2b owner`` (``○`` = one episode).

Every fact is in the text, never in colour alone; ``ascii=True`` draws with ASCII only.
"""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from ..model.insights import EvidenceRowVM

_GLYPHS = {
    False: {"multi": "\u25cf", "single": "\u25cb", "pending": "\u26a0", "sep": "\u00b7"},
    True: {"multi": "*", "single": "o", "pending": "!", "sep": " "},
}


def badge_text(row: EvidenceRowVM, *, ascii: bool = False, compact: bool = False) -> Text:
    """``compact`` drops the owner/agent word (for narrow record lists)."""
    g = _GLYPHS[bool(ascii)]
    text = Text()
    if row.single_episode:
        text.append(g["single"], "yellow")
    else:
        text.append(g["multi"], "green")
    text.append(f"{row.sessions}s{g['sep']}{row.days}d{g['sep']}{row.branches}b")
    if not compact:
        if row.owner_backed:
            text.append(" owner", "green")
        elif row.assistant_only:
            text.append(" agent-only", "yellow")
    if row.pending_sources:
        text.append(f" {g['pending']}{row.pending_sources} pending", "bold red")
    elif row.untrusted_sources:
        text.append(f" {g['pending']}{row.untrusted_sources} missing", "bold red")
    return text


class EvidenceBadge(Static):
    """The badge as a widget; ``row = None`` shows nothing."""

    DEFAULT_CSS = "EvidenceBadge { width: auto; height: 1; }"

    row: reactive[EvidenceRowVM | None] = reactive(None)
    ascii: reactive[bool] = reactive(False)

    def __init__(self, row: EvidenceRowVM | None = None, *, ascii: bool = False, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.set_reactive(EvidenceBadge.row, row)
        self.set_reactive(EvidenceBadge.ascii, ascii)

    def on_mount(self) -> None:
        self._redraw()

    def watch_row(self) -> None:
        self._redraw()

    def watch_ascii(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        self.update(badge_text(self.row, ascii=self.ascii) if self.row is not None else Text())
