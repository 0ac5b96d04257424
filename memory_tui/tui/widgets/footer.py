"""The footer, fitted: a binding that does not fit whole is left out, never cut mid-label.

Textual's Footer lays bindings out in a row and lets the docked palette key cover the last
ones, so at 40 columns a label reads "Go to|^p palette". ``FittedFooter`` decides which
bindings show before they are drawn: every binding's width follows from its key and label
(the footer's own padding rules, ``item_width``), so the choice is a pure function of the
terminal width and the screen's bindings — the same on every run, also under a modal
(a version that fitted on a later refresh let a snapshot taken under a dialog catch the
row half fitted).

Which bindings go first when the row is full: without ranks, the last ones (the row is cut
at the first binding that does not fit). A screen may rank its actions
(``footer_ranks()`` → ``{action: rank}``, higher stays longer, unlisted actions rank
``DEFAULT_RANK``): the lowest-ranked go first, later before earlier, and the rest keep
their order; a key that made room for nothing comes back if it fits after all (unless
ranked below the default). A screen may also name sets of keys that show whole or not at
all (``footer_sets()`` → tuples of actions): a set goes when its lowest-ranked key would,
and comes back only whole. The record views use this to keep ``m``/``u``/``d`` together
with ``? Help`` at 80 columns while app-wide keys (reload, problems, quit) give way, and
never to show ``m`` without ``u`` and ``d``. Every binding stays in ``?`` (help) and the
palette.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, Mapping

from rich.cells import cell_len
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Footer

DEFAULT_RANK = 50

# The ranks every screen starts from. ``? Help`` leads to every other key, so it stays
# longest; leaving a screen (esc) next; then filtering. Of the app-wide keys, quit and
# problems outrank a view's rarer keys (a new user looks for ``q``; ``p`` is where every
# problem is listed), reload goes first (the watcher re-reads on its own; it stays in ``?``
# and the palette).
APP_RANKS: dict[str, int] = {
    "help": 100, "back": 95, "close": 95, "filter": 80,
    "quit": 68, "problems": 66, "reload": 20,
}
# Where a narrow screen shows only the detail pane, the filter acts on a list out of sight:
# it ranks below the keys of what is under the cursor (the record keys rank 73-75), above the
# app-wide ones.
FILTER_RANK_OUT_OF_SIGHT = 72


class RankedFooter:
    """Mixin for a screen with a ``FittedFooter``: ``APP_RANKS`` plus the screen's own
    ``FOOTER_RANKS`` ({action: rank}), so every screen keeps ``? Help`` and drops reload first;
    ``FOOTER_SETS``: the keys that show whole or not at all."""

    FOOTER_RANKS: ClassVar[dict[str, int]] = {}
    FOOTER_SETS: ClassVar[tuple[tuple[str, ...], ...]] = ()

    def footer_ranks(self) -> dict[str, int]:
        return {**APP_RANKS, **self.FOOTER_RANKS}

    def footer_sets(self) -> tuple[tuple[str, ...], ...]:
        return self.FOOTER_SETS

# Footer.DEFAULT_CSS: a key is drawn " k " (padding 0 1) then "label " (padding 0 1 0 0); in
# compact mode "k" then " label" with a right margin of 1. (tests/tui/test_polish.py checks
# these widths against the drawn regions.)


def item_width(key_display: str, description: str, *, compact: bool = False) -> int:
    """Cells one footer key takes (margins included)."""
    if not description:
        return cell_len(key_display) + (1 if compact else 0)
    if compact:
        return cell_len(key_display) + 1 + cell_len(description) + 1
    return 1 + cell_len(key_display) + 1 + cell_len(description) + 1


def palette_width(key_display: str, description: str, *, compact: bool = False) -> int:
    """The docked palette key: its border takes the cell of its left padding."""
    return item_width(key_display, description, compact=compact)


def choose_shown(widths: list[int], ranks: list[int] | None, room: int,
                 sets: list[object | None] | None = None) -> list[bool]:
    """Which of the items (in row order, ``widths`` cells each) show in ``room`` cells.

    ``sets``: per item, the set it belongs to (``None``: none); a set shows whole or not at all.
    """
    if ranks is None:
        shown, used = [], 0
        for w in widths:
            used += w
            shown.append(used <= room and (not shown or shown[-1]))
        return shown
    n = len(widths)
    members: dict[object, list[int]] = {}
    for i, key in enumerate(sets or [None] * n):
        if key is not None:
            members.setdefault(key, []).append(i)

    def unit(i: int) -> list[int]:
        key = sets[i] if sets else None
        return members[key] if key is not None else [i]

    keep = [True] * n
    total = sum(widths)
    for i in sorted(range(n), key=lambda i: (ranks[i], -i)):
        if total <= room:
            break
        for j in unit(i):
            if keep[j]:
                keep[j] = False
                total -= widths[j]
    # A short key dropped for room that a later drop freed comes back, best-ranked first; a
    # key ranked below the default never does (it shows only when all above it fit); a set
    # comes back only whole.
    for i in sorted((i for i in range(n) if not keep[i]), key=lambda i: (-ranks[i], i)):
        if keep[i] or ranks[i] < DEFAULT_RANK:
            continue
        group = unit(i)
        need = sum(widths[j] for j in group)
        if total + need <= room:
            for j in group:
                keep[j] = True
            total += need
    return keep


class FittedFooter(Footer):
    """A ``Footer`` that shows only the bindings that fit whole (see the module doc)."""

    def _ranks(self) -> Mapping[str, int] | None:
        ranks = getattr(self.screen, "footer_ranks", None)
        return ranks() if callable(ranks) else None

    def _sets(self) -> dict[str, int]:
        """action -> the number of its set (``footer_sets``)."""
        sets = getattr(self.screen, "footer_sets", None)
        return {a: n for n, group in enumerate(sets() if callable(sets) else ()) for a in group}

    def fit(self, width: int) -> None:
        self._fit_keys(self.children, width)

    def _fit_keys(self, children: Iterable[Widget], width: int) -> None:
        # Textual exports no FooterKey name; a key is what carries a key_display
        keys: list[Any] = [c for c in children if hasattr(c, "key_display") and hasattr(c, "action")]
        palette = [k for k in keys if k.has_class("-command-palette")]
        items = [k for k in keys if k not in palette]
        compact = self.compact
        room = width - sum(palette_width(k.key_display, k.description, compact=compact) for k in palette)
        widths = [item_width(k.key_display, k.description, compact=compact) for k in items]
        ranks = self._ranks()
        order = None if ranks is None else [ranks.get(k.action, DEFAULT_RANK) for k in items]
        in_set = self._sets()
        sets = [in_set.get(k.action) for k in items]
        for key, show in zip(items, choose_shown(widths, order, room, sets)):
            key.display = show

    _composed_from: tuple[Any, ...] | None = None

    def _inputs(self) -> tuple[Any, ...] | None:
        """Everything ``compose`` reads: the shown bindings with their key names, enabled
        state and tooltips, the palette key, the style flags, the width and the screen's
        ranks and sets. ``None`` before the bindings are ready (compose yields nothing)."""
        if not self._bindings_ready:
            return None
        display = self.app.get_key_display
        shown = tuple(
            (b.key, display(b), b.description, b.action, enabled, tooltip, b.tooltip,
             None if b.group is None else (id(b.group), b.group.description, b.group.compact))
            for (_node, b, enabled, tooltip) in self.screen.active_bindings.values() if b.show
        )
        palette = self.screen.active_bindings.get(self.app.COMMAND_PALETTE_BINDING)
        palette_key = None if palette is None else (palette[1].key, display(palette[1]), palette[1].description,
                                                     palette[1].action, palette[2], palette[1].tooltip)
        ranks = self._ranks()
        return (shown, palette_key, self.show_command_palette, self.app.ENABLE_COMMAND_PALETTE, self.compact,
                self.size.width or self.app.size.width,
                None if ranks is None else tuple(sorted(ranks.items())), tuple(sorted(self._sets().items())))

    def compose(self):
        # Decided before the keys are mounted: nothing is drawn that a later pass hides.
        self._composed_from = self._inputs()
        keys = list(super().compose())
        width = self.size.width or self.app.size.width
        self._fit_keys(keys, width)
        yield from keys

    def bindings_changed(self, screen) -> None:
        # Textual recomposes the footer on every bindings update: six times while the app
        # starts, each building every key again for the same row. A recompose whose inputs
        # are those of the keys on screen would build the very same keys; it is skipped.
        self._bindings_ready = True
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        if not self.is_attached:  # its screen went away before the refresh came
            return
        if self._composed_from is not None and self._inputs() == self._composed_from:
            return
        await self.recompose()

    def on_resize(self, event: Resize) -> None:
        self.fit(event.size.width)
