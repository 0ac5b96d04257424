"""The footer, fitted: a binding that does not fit whole is left out, never cut mid-label."""

from __future__ import annotations

from textual.widgets import Footer


class FittedFooter(Footer):
    """Textual's Footer lays bindings out in a row and lets the docked palette key cover
    the last ones, so at 40 columns a label reads "Go to|^p palette". After each layout
    the bindings that reach past the free width are hidden; a resize shows them all again
    and fits anew. Every binding stays in ? (help) and the palette."""

    def _fit(self) -> None:
        palette = [c for c in self.children if c.has_class("-command-palette")]
        limit = palette[0].region.x if palette else self.region.right
        hiding = False
        for child in self.children:
            if child in palette:
                continue
            hiding = hiding or child.region.right > limit
            child.display = not hiding

    def _refit(self) -> None:
        for child in self.children:
            child.display = True
        self.call_after_refresh(self._fit)

    def on_resize(self) -> None:
        self.call_after_refresh(self._refit)

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self._fit)
