"""Alternatives — records that cite turns from sibling branches of one session,
side by side with the fork point and which branch the head is on.

``b`` on a record (or a click on the header count, then ``b`` in Evidence) pushes
:class:`AlternativesScreen`; ``n``/``p`` step through the pairs, ``g`` shows the fork node in
the Sessions view (``MemoryApp.open_session``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual import work
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from ..model import insights
from ..widgets import HeaderBar
from ..widgets.footer import FittedFooter, RankedFooter
from ..widgets.alternatives_pair import AlternativesPair


def open_alternatives(app: Any, memory_id: str | None) -> None:
    """Push the alternatives of ``memory_id``; the pairs are found in a worker (it walks the
    session graphs), "looking…" meanwhile. With none the screen closes again and says so."""
    model = app.model
    if model is None or not model.memory_exists:
        app.notify("No memory workspace.", severity="warning")
        return
    app.push_screen(AlternativesScreen(None, memory_id))


class AlternativesLoaded(Message):
    def __init__(self, pairs: tuple[Any, ...]) -> None:
        super().__init__()
        self.pairs = pairs


class AlternativesScreen(RankedFooter, Screen[None]):
    # a footer that keeps ? Help and esc, stepping through the pairs first (FittedFooter)
    FOOTER_RANKS: ClassVar[dict[str, int]] = {"step(1)": 75, "step(-1)": 74, "goto_fork": 70}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="esc", id="alternatives.close"),
        Binding("n", "step(1)", "Next pair", id="alternatives.next"),
        Binding("p", "step(-1)", "Previous pair", id="alternatives.previous"),
        Binding("g", "goto_fork", "Fork in Sessions", id="alternatives.fork"),
    ]
    DEFAULT_CSS = "AlternativesScreen #alternatives-title { height: auto; padding: 0 1; }"

    def __init__(self, pairs: tuple[Any, ...] | None, memory_id: str | None = None) -> None:
        super().__init__()
        self.pairs = pairs  # None until the worker has found them
        self.memory_id = memory_id
        self.index = 0

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield Static(id="alternatives-title")
        if self.pairs:
            yield self._pair_widget()
        yield FittedFooter()

    def _pair_widget(self) -> AlternativesPair:
        return AlternativesPair(self.pairs[0], ascii=bool(getattr(self.app, "ascii_mode", False)), id="alternatives-pair")

    def render_header(self) -> None:
        """The app's header (the app calls this again when what it shows changes)."""
        app = self.app
        width = self.size.width or app.size.width or 120
        self.query_one(HeaderBar).update(app.header_line(width))

    def on_mount(self) -> None:
        app = self.app
        self.render_header()
        if self.pairs is None:
            who = f"^{self.memory_id}" if self.memory_id else "every record"
            self.query_one("#alternatives-title", Static).update(Text(f"looking for alternatives of {who}…", "dim"))
            self._load(app.model, self.memory_id)
            return
        self.draw_title()

    @work(thread=True, exclusive=True, group="alternatives-load", exit_on_error=False, description="alternatives-load")
    def _load(self, model: Any, memory_id: str | None) -> None:
        self.post_message(AlternativesLoaded(insights.record_alternatives(model, memory_id)))

    async def on_alternatives_loaded(self, message: AlternativesLoaded) -> None:
        if not message.pairs:
            who = f"^{self.memory_id}" if self.memory_id else "No record"
            self.app.notify(f"{who} has no alternative on a sibling branch.", severity="information")
            self.dismiss()
            return
        self.pairs = message.pairs
        await self.mount(self._pair_widget(), after=self.query_one("#alternatives-title"))
        self.draw_title()

    def draw_title(self) -> None:
        who = f" of ^{self.memory_id}" if self.memory_id else ""
        self.query_one("#alternatives-title", Static).update(Text.assemble(
            (f"Alternatives{who}", "bold"), f"  pair {self.index + 1} of {len(self.pairs)}",
            ("   n/p next/previous · g fork node in Sessions · esc back", "dim"),
        ))

    def action_step(self, delta: int) -> None:
        if not self.pairs:
            return  # still looking
        self.index = (self.index + delta) % len(self.pairs)
        self.query_one(AlternativesPair).set_pair(self.pairs[self.index])
        self.draw_title()

    def action_close(self) -> None:
        self.dismiss()

    async def action_goto_fork(self) -> None:
        if not self.pairs:
            return
        pair = self.pairs[self.index]
        self.dismiss()
        await self.app.open_session(pair.session_id, pair.fork_point)
