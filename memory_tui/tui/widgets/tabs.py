"""The view selector: one line of numbered tabs."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..views import VIEW_SHORT, VIEW_TITLES, VIEWS


def views_text(current: str, width: int) -> Text:
    """The tabs in one line of ``width`` cells: full titles, else short ones, else numbers."""
    for labels in (VIEW_TITLES, VIEW_SHORT, None):
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, view in enumerate(VIEWS, start=1):
            style = "bold reverse" if view == current else ""
            piece = Text(f" {i} ", "bold" if view != current else style)
            if labels is not None:
                piece.append(f"{labels[view]} ", style)
            piece.apply_meta({"@click": f"app.switch_view('{view}')"})
            text.append_text(piece)
        if text.cell_len <= width:
            break
    return text


class ViewTabs(Static):
    """The view selector: always one line, across the screen under the header."""

    DEFAULT_CSS = "ViewTabs { height: 1; }"

    def show(self, current: str, width: int) -> None:
        self.update(views_text(current, width))
