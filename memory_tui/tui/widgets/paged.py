"""An option list that draws a long selection a page at a time.

Textual's ``OptionList`` measures every option as it is added (the wrap of each prompt, on
the UI thread), and a view drew its whole selection at once: a Timeline year of 20 000 rows
kept the app from answering any key for 15-37 s at scale 1. Here the caller hands over its
items and how one item becomes options; the first page is drawn at once, the next whenever
the highlight or the scroll comes within a page of the end of what is drawn (or when a
search for one item needs it), so a draw costs a page, not the selection.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Iterable, Sequence, TypeVar

from textual.widgets import OptionList
from textual.widgets.option_list import Option

T = TypeVar("T")
# (index, item, previous item or None) -> the options of that item; a ``None`` is a divider
OptionsOf = Callable[[int, Any, Any], "list[Option | None]"]


class PagedOptionList(OptionList, Generic[T]):
    """An ``OptionList`` fed by :meth:`show_items`; :attr:`undrawn` items wait for the scroll."""

    # A page is what a tall terminal shows a few times over; the cost of drawing one is what a
    # key may wait for (at ~1 ms per wrapped row on a loaded 2-core machine, ~0.1 s).
    PAGE = 100
    DEFAULT_CSS = "PagedOptionList { height: 1fr; }"  # never measure every option for an auto height

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._items: Sequence[T] = ()
        self._options_of: OptionsOf = lambda _i, _item, _prev: []
        self._drawn = 0
        self._more_asked = False

    @property
    def items(self) -> Sequence[T]:
        return self._items

    @property
    def undrawn(self) -> int:
        """Items not drawn yet (they come as the list is scrolled)."""
        return len(self._items) - self._drawn

    def show_items(self, items: Sequence[T], options_of: OptionsOf, lead: Iterable[Option | None] = ()) -> None:
        """Replace the content: ``lead`` options first, then ``items`` a page at a time."""
        self._items = items
        self._options_of = options_of
        self._drawn = 0
        self.set_options([*lead, *self._next_page()])

    def draw_more(self) -> bool:
        """Draw the next page; False when everything is drawn."""
        if not self.undrawn:
            return False
        self.add_options(self._next_page())
        return True

    def draw_until(self, found: Callable[[T], bool]) -> bool:
        """Draw pages until an item ``found`` accepts is drawn (a jump to one record); False
        when no item is accepted (nothing more is drawn then)."""
        start = self._drawn
        if any(found(item) for item in self._items[:start]):
            return True
        for i in range(start, len(self._items)):
            if found(self._items[i]):
                while self._drawn <= i:
                    self.draw_more()
                return True
        return False

    def _next_page(self) -> list[Option | None]:
        items, options_of = self._items, self._options_of
        end = min(len(items), self._drawn + self.PAGE)
        out: list[Option | None] = []
        for i in range(self._drawn, end):
            out.extend(options_of(i, items[i], items[i - 1] if i else None))
        self._drawn = end
        return out

    def _wants_more(self) -> bool:
        if not self.undrawn:
            return False
        h = self.highlighted
        if h is not None and h >= self.option_count - self.PAGE // 2:
            return True
        # (before the list is laid out its scroll range is 0: that is not a scroll to its end)
        bottom = self.max_scroll_y
        return bottom > 0 and self.scroll_y >= bottom - self.scrollable_content_region.height

    def _ask_for_more(self) -> None:
        # after the event that asked (a highlight move, a scroll), once: both come together
        # when the highlight scrolls the list, and one page answers both
        if not self._more_asked and self._wants_more():
            self._more_asked = True
            self.call_later(self._more)

    def _more(self) -> None:
        self._more_asked = False
        if self._wants_more():
            self.draw_more()

    def watch_highlighted(self, highlighted: int | None) -> None:
        super().watch_highlighted(highlighted)
        self._ask_for_more()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._ask_for_more()


__all__ = ["PagedOptionList"]
