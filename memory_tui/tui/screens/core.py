"""Core: the injected core.md against its token budget, or the topics/core.md records."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from .. import commands as registry
from ..model.data import CORE_TOPIC, CoreVM, RecordVM, core_chunks
from ..render import render_markdown
from ..widgets import RecordList, SourcePane
from ..widgets.records import highlighted_key, restore_highlight
from .base import flat, one_line
from .citations import CitationScreen
from .record_ops import RecordActions
from .recent import RecordRow, RecordRows


class CoreScreen(RecordRows, RecordActions, CitationScreen):
    VIEW = "core"
    ROW_PREFIX = "core"
    BINDINGS: ClassVar[list[BindingType]] = registry.screen_bindings("core")

    def __init__(self) -> None:
        super().__init__()
        self.show_sources = False  # the topics/core.md records instead of the injected text

    def compose_list(self) -> ComposeResult:
        yield OptionList(id="core-list", classes="view-list")

    def compose_detail(self) -> ComposeResult:
        with Vertical(id="core-detail", classes="view-detail"):
            with VerticalScroll(id="core-scroll"):
                yield Static(id="core-text")
            yield RecordList(id="core-records")
            yield SourcePane(id="core-source")

    def detail_focus(self) -> Widget:
        return self.query_one("#core-records" if self.show_sources else "#core-scroll")

    @property
    def core(self) -> CoreVM | None:
        return self.model.core if self.model else None

    def core_records(self) -> tuple[RecordVM, ...]:
        core = self.core
        if core is None:
            return ()
        if not self.filter_text:
            return core.records
        return tuple(r for r in core.records if self.record_matches(r))

    def render_view(self) -> None:
        lst = self.query_one("#core-list", OptionList)
        keep = highlighted_key(lst)
        g = self.glyphs
        options: list[Option | None] = []
        core = self.core
        if core:
            marks = {"kept": (g.ok, "green"), "omitted": (g.bad, "red"), "pending": (g.pending, "yellow")}
            for rec in self.core_records():
                mark = marks.get(core.status_of(rec.memory_id) or "", (" ", ""))
                text = Text.assemble(
                    (mark[0] + " ", mark[1]), (rec.memory_id, "bold"), (f"  {rec.tokens} tok\n", "dim"), flat(rec.content),
                    no_wrap=True, overflow="ellipsis",
                )
                options.append(RecordRow(text, rec, "core"))
            if not options and self.filter_text:
                options.append(Option(Text(f"No block matches “{self.filter_text}”.", "dim"), disabled=True))
        lst.set_options(options)
        lst.highlighted = None
        restore_highlight(lst, keep)
        self.show_core()

    def selected_record(self) -> RecordVM | None:
        opt = self.query_one("#core-list", OptionList).highlighted_option
        return opt.record if isinstance(opt, RecordRow) else None

    def show_core(self) -> None:
        core = self.core
        text_widget = self.query_one("#core-text", Static)
        records = self.query_one("#core-records", RecordList)
        pane = self.query_one("#core-source", SourcePane)
        self.query_one("#core-scroll").display = not self.show_sources
        records.display = self.show_sources
        pane.display = self.show_sources
        if core is None:
            text_widget.update("")
            records.clear_options()
            return
        if self.show_sources:
            records.show_records(self.core_records(), self.glyphs, self.model, headings=False, core_status=lambda r: core.status_of(r.memory_id),
                                 badge=self.evidence_badge)
            selected = self.selected_record()
            if selected is not None:
                records.select_record(selected)
            self.show_source(records, pane)
        else:
            text_widget.update(self.core_text(core))
        self.render_titles()

    def core_text(self, core: CoreVM) -> Text:
        """The rendered root core.md (what reaches the system prompt), then what is left out."""
        g = self.glyphs
        out = Text()
        if not core.inject:
            out.append("Injection is off", "bold")
            out.append(" (memory.core.inject = false in config.json): nothing from core.md reaches the system prompt.\n\n")
            out.append("The rendered core.md below is kept up to date but not used.\n\n", "dim")
        elif not core.injected:
            out.append("Nothing is injected", "bold")
            out.append(f": {core.reason}.\n\n" if core.reason else ".\n\n")
        if core.stale:
            out.append(f"{g.bad} core.md on disk differs from what topics/core.md renders", "bold yellow")
            out.append(" (a write or `memory-tui views --check` brings it back in line).\n\n", "dim")
        needle = self.filter_text.lower()
        body = core.text.strip()
        if needle and body:
            chunks = core_chunks(body)
            hits = [c for c in chunks if needle in c.lower()]
            out.append(f"Filter “{self.filter_text}”: {len(hits)} of {len(chunks)} blocks of core.md\n\n", "dim")
            shown = render_markdown("\n\n".join(hits), glyphs=g) if hits else Text("Nothing in core.md matches.", "dim")
            shown.highlight_words([self.filter_text], "reverse", case_sensitive=False)
            out.append_text(shown)
        elif body:
            out.append_text(render_markdown(core.text, glyphs=g))
        else:
            out.append("core.md is empty." if core.exists else "There is no core.md.", "dim")
        by_id = {r.memory_id: r for r in core.records}

        def listing(ids, title: str, note: str, glyph: str, style: str) -> None:
            ids = [i for i in ids if not needle or (i in by_id and self.record_matches(by_id[i])) or needle in i]
            if not ids:
                return
            out.append(f"\n\n{glyph} {title} ({len(ids)}):\n", style)
            out.append(note, "dim")
            for mid in ids:
                rec = by_id.get(mid)
                out.append(f"  {mid}", "bold")
                out.append(f"  {one_line(rec.content, 60) if rec else ''}\n")

        listing(core.omitted_ids, f"Omitted by the {core.budget:,} token budget", "", g.bad, "bold red")
        listing(
            core.pending_ids,
            "Skipped: they cite a pending source",
            "OpenProgram keeps a block out of core.md while a source it cites is pending (not confirmed).\n",
            g.pending,
            "bold yellow",
        )
        return out

    def detail_title(self) -> Text:
        core = self.core
        g = self.glyphs
        if core is None:
            return Text("Core", "bold")
        # Two short lines: they must not wrap at 120 columns (content is ~80 wide).
        out = Text.assemble(("Core", "bold"), "  ", ("core.md ← topics/core.md" if core.master else "core.md (hand-written)", "dim"))
        out.append(f" {g.dot} injection " + ("on" if core.inject else "off"), "" if core.inject else "bold yellow")
        if self.filter_text:
            out.append(f" {g.dot} filter: {self.filter_text}", "dim")
        over = core.omitted_ids
        out.append(f"\n{core.tokens:,} / {core.budget:,} tokens", "bold red" if over else "bold green")
        out.append(f" {g.dot} {len(core.kept_ids)} injected {g.dot} {len(over)} omitted")
        if core.pending_ids:
            out.append(f" {g.dot} {len(core.pending_ids)} pending", "yellow")
        return out

    def list_title(self) -> Text:
        core = self.core
        n = len(core.records) if core else 0
        if self.filter_text:
            return Text(f"{len(self.core_records())}/{n} blocks {self.glyphs.dot} filter: {self.filter_text}", "dim")
        return Text(f"{n} blocks in topics/core.md", "dim")

    # ------------------------------------------------------------------ events
    @on(OptionList.OptionHighlighted, "#core-list")
    def _block_highlighted(self) -> None:
        selected = self.selected_record()
        if self.show_sources and selected is not None:
            self.query_one("#core-records", RecordList).select_record(selected)

    @on(OptionList.OptionSelected, "#core-list")
    def _block_selected(self) -> None:
        if not self.show_sources:
            self.action_toggle_core_sources()
        selected = self.selected_record()
        records = self.query_one("#core-records", RecordList)
        if selected is not None:
            records.select_record(selected)
        self.open_detail(records)

    @on(OptionList.OptionHighlighted, "#core-records")
    def _record_highlighted(self) -> None:
        self.show_source(self.query_one("#core-records", RecordList), self.query_one("#core-source", SourcePane))

    def action_toggle_core_sources(self) -> None:
        self.show_sources = not self.show_sources
        self.show_core()
        self.query_one("#core-records" if self.show_sources else "#core-list").focus()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "goto_session" and not self.show_sources:
            return False
        return super().check_action(action, parameters)

    async def action_open_record(self) -> None:
        rec = self.selected_record()
        if rec is not None:
            await self.shell.open_record(rec)

    def reveal_topic(self, path: str) -> None:
        """topics/core.md: show its records."""
        self.refresh_view()
        if not self.show_sources:
            self.action_toggle_core_sources()

    def reveal(self, record: RecordVM) -> None:
        """Show the topics/core.md records with ``record`` highlighted."""
        self.refresh_view()
        if not self.show_sources:
            self.action_toggle_core_sources()
        self.query_one("#core-records", RecordList).select_record(record)

    # ``e`` edits topics/core.md (the source records shown here)
    def action_edit_topic(self) -> None:
        from .editor import open_editor

        open_editor(self.app, CORE_TOPIC)
