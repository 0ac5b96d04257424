"""Evidence — every record with its corroboration figures, sortable, filterable to
the header's lists (single-episode, citing pending sources, with an alternative).

A pushed screen over the current view (``i``, or a click on a header count); Enter opens the
record in Topics (Core for ``topics/core.md`` records), ``f`` cycles the list, ``b`` shows the
alternatives of the highlighted record, ``h`` its history.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static

from ..widgets import HeaderBar
from ..widgets.footer import FittedFooter, RankedFooter
from ..widgets.evidence_list import EvidenceList

LISTS: tuple[str | None, ...] = (None, "single", "pending", "alternatives")
LIST_TITLES = {
    None: "all records",
    "single": "single-episode records (one session, one day)",
    "pending": "records citing pending sources",
    "alternatives": "records with an alternative on a sibling branch",
}


class EvidenceScreen(RankedFooter, Screen[None]):
    # a footer that keeps ? Help and esc, the list's own keys first (FittedFooter)
    FOOTER_RANKS: ClassVar[dict[str, int]] = {"cycle_sort": 75, "cycle_list": 74, "reverse_sort": 73, "history": 70, "alternatives": 69}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="esc", id="evidence.close"),
        Binding("f", "cycle_list", "List", id="evidence.list"),
        Binding("h", "history", "History", id="evidence.history"),
        Binding("b", "alternatives", "Alternatives", id="evidence.alternatives"),
    ]
    DEFAULT_CSS = """
    EvidenceScreen #evidence-title { height: auto; padding: 0 1; }
    EvidenceScreen EvidenceList { height: 1fr; }
    """

    def __init__(self, which: str | None = None) -> None:
        super().__init__()
        if which not in LISTS:
            raise ValueError(f"unknown evidence list {which!r}")
        self.which = which

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield Static(id="evidence-title")
        yield EvidenceList(self.rows(), id="evidence-list")
        yield FittedFooter()

    @property
    def insights(self):
        return getattr(self.app, "insights", None)

    def rows(self) -> tuple:
        return self.insights.rows_in(self.which) if self.insights is not None else ()

    def on_mount(self) -> None:
        self.draw_chrome()
        self.query_one(EvidenceList).focus()

    def render_header(self) -> None:
        """The app's header (the app calls this again when what it shows changes)."""
        width = self.size.width or self.app.size.width or 120
        self.query_one(HeaderBar).update(self.app.header_line(width, insights=self.insights))

    def draw_chrome(self) -> None:
        self.render_header()
        title = Text()
        title.append("Evidence", "bold")
        if self.insights is None:
            title.append("  computing the figures…", "dim")
        else:
            lst = self.query_one(EvidenceList)
            title.append(f"  {LIST_TITLES[self.which]}: {len(self.rows())}")
            title.append(f"   sort: {lst.sort_key}{' (reversed)' if lst.sort_reverse else ''}", "dim")
        title.append("   f list · s sort · r reverse · enter open · h history · b alternatives", "dim")
        self.query_one("#evidence-title", Static).update(title)

    def show_list(self, which: str | None) -> None:
        if which not in LISTS:
            raise ValueError(f"unknown evidence list {which!r}")
        self.which = which
        self.refresh_rows()

    def refresh_rows(self) -> None:
        self.query_one(EvidenceList).set_rows(self.rows())
        self.draw_chrome()

    def insights_changed(self, *, now: bool) -> None:
        self.refresh_rows()

    def action_cycle_list(self) -> None:
        self.show_list(LISTS[(LISTS.index(self.which) + 1) % len(LISTS)])

    def action_close(self) -> None:
        self.dismiss()

    def on_evidence_list_sort_changed(self, _event: EvidenceList.SortChanged) -> None:
        self.draw_chrome()

    def highlighted(self):
        lst = self.query_one(EvidenceList)
        shown = lst.shown
        return shown[lst.cursor_row] if 0 <= lst.cursor_row < len(shown) else None

    async def on_evidence_list_record_chosen(self, event: EvidenceList.RecordChosen) -> None:
        model = self.app.model
        record = model.records.get(event.row.memory_id) if model is not None else None
        if record is None:
            self.notify(f"^{event.row.memory_id} is no longer in the workspace.", severity="warning")
            return
        self.dismiss()
        await self.app.open_record(record)

    def action_history(self) -> None:
        from .history import open_history

        row = self.highlighted()
        if row is not None:
            open_history(self.app, row.memory_id)

    def action_alternatives(self) -> None:
        from .alternatives import open_alternatives

        row = self.highlighted()
        if row is not None:
            open_alternatives(self.app, row.memory_id)
