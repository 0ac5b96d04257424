"""Timeline: years, months and days on the left, the dated rows of the selection on the right."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import OptionList, Tree
from textual.widgets.option_list import Option

from .. import commands as registry
from ..model.data import TimelineRowVM
from ..render import render_markdown
from ..widgets.paged import PagedOptionList
from ..widgets.records import highlighted_key, restore_highlight
from .base import ViewScreen, topic_name
from .tree_list import TreeList

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class TimelineRowOption(Option):
    """One dated row; ``row`` is what it shows."""

    def __init__(self, prompt: Text, row: TimelineRowVM, index: int) -> None:
        super().__init__(prompt, id=f"row:{index}:{row.memory_id}")
        self.row = row


class TimelineScreen(TreeList, ViewScreen):
    VIEW = "timeline"
    TREE_TITLE = "Timeline"
    BINDINGS: ClassVar[list[BindingType]] = registry.screen_bindings("timeline")
    FOOTER_RANKS: ClassVar[dict[str, int]] = {"open_record": 71}  # over APP_RANKS

    def compose_detail(self) -> ComposeResult:
        with Vertical(id="timeline-detail", classes="view-detail"):
            yield PagedOptionList(id="timeline-rows")

    def detail_focus(self) -> Widget:
        return self.query_one("#timeline-rows")

    def timeline_rows(self) -> tuple[TimelineRowVM, ...]:
        m = self.model
        rows = m.timeline if m else ()
        if self.filter_text:
            needle = self.filter_text.lower()
            rows = tuple(r for r in rows if needle in r.text.lower() or needle in r.when or needle in r.topic_path.lower())
        return rows

    def selected_key(self) -> str | None:
        node = self.tree.cursor_node
        return node.data if node is not None and isinstance(node.data, str) else None

    def rows_for(self, key: str | None) -> list[TimelineRowVM]:
        return [r for r in self.timeline_rows() if key and (r.when == key or r.when.startswith(key + "-"))]

    def render_view(self) -> None:
        tree = self.tree
        state = self.restart_tree()
        counts: dict[str, int] = {}
        for row in self.timeline_rows():
            parts = row.when.split("-")
            for i in range(1, len(parts) + 1):
                key = "-".join(parts[:i])
                counts[key] = counts.get(key, 0) + 1
        nodes: dict[str, object] = {}
        for key in sorted(counts, key=lambda k: k.split("-")):
            parts = key.split("-")
            parent = tree.root if len(parts) == 1 else nodes["-".join(parts[:-1])]
            if len(parts) == 1:
                label = Text.assemble((key, "bold"), (f" {counts[key]}", "dim"))
            elif len(parts) == 2:
                month = MONTHS[int(parts[1]) - 1] if parts[1].isdigit() and 1 <= int(parts[1]) <= 12 else parts[1]
                label = Text.assemble(f"{parts[1]} {month}", (f" {counts[key]}", "dim"))
            else:
                label = Text.assemble(parts[2], (f" {counts[key]}", "dim"))
            has_children = any(k.startswith(key + "-") for k in counts)
            nodes[key] = (
                parent.add(label, data=key, expand=state.is_open(key)) if has_children else parent.add_leaf(label, data=key)  # type: ignore[union-attr]
            )
        self.land_cursor(state, tree.root.children[0] if tree.root.children else None)
        self.show_rows()

    def show_rows(self) -> None:
        rows_list = self.query_one("#timeline-rows", PagedOptionList)
        keep = highlighted_key(rows_list)
        key = self.selected_key()
        rows = self.rows_for(key)
        glyphs = self.glyphs

        def options_of(i: int, row: TimelineRowVM, prev: TimelineRowVM | None) -> list[Option | None]:
            out: list[Option | None] = []
            if prev is None or row.when != prev.when:
                dashes = row.when.count("-")
                label = row.when if dashes == 2 else f"{row.when} (no day)" if dashes == 1 else f"{row.when} (no month)"
                out.append(Option(Text(label, "bold underline"), disabled=True))
            text = Text.assemble(
                (topic_name(row.topic_path), "bold"), (f"  ^{row.memory_id}\n", "dim"), render_markdown(row.text, glyphs=glyphs)
            )
            out.append(TimelineRowOption(text, row, i))
            return out

        empty = Option(Text("No dated records." if not key else "Nothing on this date.", "dim"), disabled=True)
        rows_list.show_items(rows, options_of, lead=() if rows else (empty,))
        rows_list.highlighted = None
        if keep and keep.startswith("row:"):
            # a redraw (a reload, a filter) keeps the row the owner was reading, however far down
            _index, _sep, wanted = keep[4:].partition(":")
            rows_list.draw_until(lambda r: r.memory_id == wanted)
        restore_highlight(rows_list, keep)
        self.render_titles()

    def selected_row(self) -> TimelineRowVM | None:
        opt = self.query_one("#timeline-rows", OptionList).highlighted_option
        return opt.row if isinstance(opt, TimelineRowOption) else None

    def detail_title(self) -> Text:
        key = self.selected_key()
        n = len(self.rows_for(key))
        g = self.glyphs
        return Text.assemble(
            ("Timeline", "bold"), f"  {key or ''}", (f"\n{n} row" + ("s" if n != 1 else "") + f" {g.dot} o opens a row in Topics", "dim")
        )

    def list_title(self) -> Text:
        return Text(f"{len(self.timeline_rows())} dated rows", "dim")

    @on(Tree.NodeHighlighted, "#timeline-list")
    def _node_highlighted(self) -> None:
        self.show_rows()

    @on(Tree.NodeSelected, "#timeline-list")
    def _node_selected(self, event: Tree.NodeSelected) -> None:
        if not event.node.children:
            self.open_detail(self.query_one("#timeline-rows"))

    @on(OptionList.OptionSelected, "#timeline-rows")
    async def _row_selected(self, event: OptionList.OptionSelected) -> None:
        if isinstance(event.option, TimelineRowOption):
            await self._open_row(event.option.row)

    async def action_open_record(self) -> None:
        row = self.selected_row()
        if row is not None:
            await self._open_row(row)

    async def _open_row(self, row: TimelineRowVM) -> None:
        m = self.model
        rec = m.records.get(row.memory_id) if m else None
        if rec is None:
            self.notify(f"^{row.memory_id} is no longer in any topic.", severity="warning")
            return
        await self.shell.open_record(rec)
