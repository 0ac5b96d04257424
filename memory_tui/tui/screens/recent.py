"""Recent: the records OpenProgram's recent view lists, newest first, and the chosen one."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import OptionList
from textual.widgets.option_list import Option, OptionDoesNotExist

from .. import commands as registry
from ..model.data import RecordVM
from ..widgets import RecordList, SourcePane
from ..widgets.records import highlighted_key, restore_highlight
from .base import flat, plural, topic_name
from .citations import CitationScreen
from .record_ops import RecordActions


class RecordRow(Option):
    """A list row standing for one record (Recent, Core)."""

    def __init__(self, prompt, record: RecordVM, prefix: str) -> None:
        super().__init__(prompt, id=f"{prefix}:{record.memory_id}")
        self.record = record


class RecordRows:
    """A screen whose list ``ROW_LIST`` (default ``#<ROW_PREFIX>-list``) holds one row per
    record (``ROW_TYPES``, each with the id ``<ROW_PREFIX>:<memory id>``): after a move or
    delete from it the cursor stays on the record or lands on its neighbour
    (``RecordActions._follow``). Recent and Core list :class:`RecordRow` rows; Topics its
    topic's ``RecordOption`` rows (``rec:<id>``, the chips between them are not records)."""

    ROW_PREFIX = ""
    ROW_LIST: ClassVar[str | None] = None
    ROW_TYPES: ClassVar[tuple[type[Option], ...]] = (RecordRow,)

    def _row_list(self) -> OptionList:
        return self.query_one(self.ROW_LIST or f"#{self.ROW_PREFIX}-list", OptionList)  # type: ignore[attr-defined]

    def row_record_ids(self) -> list[str]:
        lst = self._row_list()
        rows = (lst.get_option_at_index(i) for i in range(lst.option_count))
        return [row.record.memory_id for row in rows if isinstance(row, self.ROW_TYPES)]  # type: ignore[attr-defined]

    def land_on_record(self, memory_ids) -> bool:
        """Highlight the first of ``memory_ids`` that has a row here; False if none has."""
        lst = self._row_list()
        for mid in memory_ids:
            try:
                index = lst.get_option_index(f"{self.ROW_PREFIX}:{mid}")
            except OptionDoesNotExist:
                continue
            lst.highlighted = index
            lst.scroll_to_highlight()
            return True
        return False


def recent_row(rec: RecordVM, badge: Text | None) -> Group:
    """Date, topic and evidence badge over the record's text, each line cut where the list
    ends. The topic's name gives way first (its folder, dim, before it), never the date or
    the badge: appended to one cut line, the badge went behind any long topic name."""
    folder, _, name = topic_name(rec.topic_path).rpartition("/")
    head = Table.grid(expand=True, padding=(0, 0, 0, 2), pad_edge=False)
    head.add_column(no_wrap=True)
    head.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    cells: list[Text] = [Text(rec.when or "undated", "dim"),
                         Text.assemble((name, "bold"), (f"  {folder}/" if folder else "", "dim"))]
    if badge is not None:
        head.add_column(no_wrap=True, justify="right")
        cells.append(badge)
    head.add_row(*cells)
    return Group(head, Text(flat(rec.content), no_wrap=True, overflow="ellipsis"))


class RecentScreen(RecordRows, RecordActions, CitationScreen):
    VIEW = "recent"
    ROW_PREFIX = "recent"
    BINDINGS: ClassVar[list[BindingType]] = registry.screen_bindings("recent")

    def compose_list(self) -> ComposeResult:
        yield OptionList(id="recent-list", classes="view-list")

    def compose_detail(self) -> ComposeResult:
        with Vertical(id="recent-detail", classes="view-detail"):
            yield RecordList(id="recent-record")
            yield SourcePane(id="recent-source")

    def detail_focus(self) -> Widget:
        return self.query_one("#recent-record")

    def recent(self) -> tuple[RecordVM, ...]:
        m = self.model
        recs = m.recent if m else ()
        if self.filter_text:
            needle = self.filter_text.lower()
            recs = tuple(r for r in recs if needle in r.content.lower() or needle in r.topic_path.lower())
        return recs

    def render_view(self) -> None:
        lst = self.query_one("#recent-list", OptionList)
        keep = highlighted_key(lst)
        options = []
        for rec in self.recent():
            options.append(RecordRow(recent_row(rec, self.evidence_badge(rec)), rec, "recent"))
        lst.set_options(options)
        lst.highlighted = None
        restore_highlight(lst, keep)
        self.show_record()

    def selected_record(self) -> RecordVM | None:
        opt = self.query_one("#recent-list", OptionList).highlighted_option
        return opt.record if isinstance(opt, RecordRow) else None

    def show_record(self) -> None:
        view = self.query_one("#recent-record", RecordList)
        pane = self.query_one("#recent-source", SourcePane)
        rec = self.selected_record()
        if rec is None:
            view.clear_options()
            pane.update("")
        else:
            view.show_records([rec], self.glyphs, self.model, headings=False, topic_line=True, badge=self.evidence_badge)
            self.show_source(view, pane)
        self.render_titles()

    def detail_title(self) -> Text:
        return Text.assemble(("Recent", "bold"), (f"\nnewest first {self.glyphs.dot} o opens the record in its topic", "dim"))

    def list_title(self) -> Text:
        m = self.model
        if not m:
            return Text("")
        return Text(f"{plural(len(m.recent), 'record')} {self.glyphs.dot} recent_limit {m.config.recent_limit}", "dim")

    @on(OptionList.OptionHighlighted, "#recent-list")
    def _row_highlighted(self) -> None:
        self.show_record()

    @on(OptionList.OptionSelected, "#recent-list")
    def _row_selected(self) -> None:
        self.open_detail(self.query_one("#recent-record"))

    @on(OptionList.OptionHighlighted, "#recent-record")
    def _record_highlighted(self) -> None:
        self.show_source(self.query_one("#recent-record", RecordList), self.query_one("#recent-source", SourcePane))

    async def action_open_record(self) -> None:
        rec = self.selected_record()
        if rec is not None:
            await self.shell.open_record(rec)
