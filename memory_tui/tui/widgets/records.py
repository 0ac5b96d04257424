"""Record lists: each record, then its citation chips, as selectable rows.

Every row is an ``Option`` subclass holding the object it shows (``RecordOption.record``,
``CitationOption.record`` + ``link``), so handlers read the selection straight off the row.
The option ids are only stable keys to keep the highlight across redraws.
"""

from __future__ import annotations

from typing import Callable, Iterable

from rich.console import Group, RenderableType
from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option, OptionDoesNotExist

from ..model.data import FrameVM, RecordVM, SourceLinkVM, WorkspaceModel
from ..render import Glyphs, record_markdown, render_markdown
from .paged import PagedOptionList


class RecordOption(Option):
    """A row showing one record."""

    def __init__(self, prompt: RenderableType, record: RecordVM, key: str | None = None) -> None:
        super().__init__(prompt, id=key or f"rec:{record.memory_id}")
        self.record = record


class CitationOption(Option):
    """A citation chip: the ``index``-th source link of ``record``."""

    def __init__(self, prompt: RenderableType, record: RecordVM, index: int) -> None:
        super().__init__(prompt, id=f"cite:{record.memory_id}:{index}")
        self.record = record
        self.index = index

    @property
    def link(self) -> SourceLinkVM:
        return self.record.source_links[self.index]


def record_meta(rec: RecordVM, glyphs: Glyphs, *, core_status: str | None = None, topic: bool = False,
                badge: Text | None = None) -> Text:
    meta = Text()
    meta.append(rec.when or "undated", "bold")
    if badge is not None:  # evidence strength
        meta.append(" ")
        meta.append_text(badge)
    meta.append(f" {glyphs.dot} {rec.tokens} tok {glyphs.dot} ", "dim")
    meta.append(f"^{rec.memory_id}", "dim")
    if rec.aliases:
        meta.append(" (alias " + ", ".join(rec.aliases) + ")", "dim")
    if rec.backlinks:
        n = len(rec.backlinks)
        meta.append(f" {glyphs.dot} {glyphs.back} {n} backlink" + ("s" if n != 1 else ""), "italic")
    if rec.relation_targets:
        meta.append(f" {glyphs.dot} {glyphs.arrow} " + ", ".join(rec.relation_targets), "italic")
    if core_status == "omitted":
        meta.append(f"  {glyphs.bad} omitted by the budget", "bold red")
    elif core_status == "pending":
        meta.append(f"  {glyphs.pending} skipped: pending source", "bold yellow")
    elif core_status == "kept":
        meta.append(f"  {glyphs.ok} injected", "green")
    if topic:
        meta.append(f"\n{rec.topic_path}", "dim italic")
    return meta


def render_record(rec: RecordVM, glyphs: Glyphs, **kw) -> Group:
    md = record_markdown(
        rec.body, [(e.id, e.when, [(l.label, l.target) for l in e.links]) for e in rec.evidence]
    )
    return Group(record_meta(rec, glyphs, **kw), render_markdown(md, glyphs=glyphs))


def chip_text(rec: RecordVM, index: int, glyphs: Glyphs, model: WorkspaceModel | None) -> Text:
    link = rec.source_links[index]
    text = Text("   ")
    text.append(f"{glyphs.chip} {link.label}", "bold")
    if link.source_id:
        frame = model.frame(link.source_id) if model else None
        if isinstance(frame, FrameVM):
            who = frame.speaker.split(" (", 1)[0]
            text.append(f"  {who}", "italic")
            if frame.pending:
                text.append(" (pending)", "yellow")
        else:
            text.append(f"  {glyphs.bad} unavailable", "red")
    else:
        text.append(f"  {glyphs.bad} unresolved link", "red")
    return text


def restore_highlight(lst: OptionList, key: str | None) -> None:
    """Highlight the row with id ``key`` if it is still there, else the first enabled row."""
    if key:
        try:
            lst.highlighted = lst.get_option_index(key)
            return
        except OptionDoesNotExist:
            pass
    if lst.highlighted is not None and lst.highlighted < lst.option_count:
        return
    for i in range(lst.option_count):
        if not lst.get_option_at_index(i).disabled:
            lst.highlighted = i
            return


def highlighted_key(lst: OptionList) -> str | None:
    opt = lst.highlighted_option
    return opt.id if opt is not None else None


class RecordList(PagedOptionList[RecordVM]):
    """Records with their citation chips as selectable rows (a topic of thousands of records
    is drawn a page at a time: :class:`~.paged.PagedOptionList`)."""

    def show_records(
        self,
        records: Iterable[RecordVM],
        glyphs: Glyphs,
        model: WorkspaceModel | None,
        *,
        headings: bool = True,
        core_status: Callable[[RecordVM], str | None] | None = None,
        topic_line: bool = False,
        chips: bool = True,
        lead: Iterable[RenderableType] = (),
        badge: Callable[[RecordVM], Text | None] | None = None,
    ) -> None:
        """Show ``records``; ``lead`` are disabled rows put first (e.g. a problem summary)."""
        keep = highlighted_key(self)
        first: list[Option | None] = []
        for item in lead:
            first.append(Option(item, disabled=True))
            first.append(None)

        records = records if isinstance(records, (list, tuple)) else list(records)
        last = len(records) - 1

        def options_of(i: int, rec: RecordVM, prev: RecordVM | None) -> list[Option | None]:
            out: list[Option | None] = []
            # a heading row where the heading chain changes (the first record's, if nested)
            chain = prev.headings if prev is not None else ()
            if headings and rec.headings[1:] != chain[1:] and len(rec.headings) > 1:
                out.append(Option(Text(" › ".join(rec.headings[1:]), "bold underline"), disabled=True))
            prompt = render_record(rec, glyphs, core_status=core_status(rec) if core_status else None, topic=topic_line,
                                   badge=badge(rec) if badge else None)
            out.append(RecordOption(prompt, rec))
            if chips:
                for n, _link in enumerate(rec.source_links):
                    out.append(CitationOption(chip_text(rec, n, glyphs, model), rec, n))
            if i < last:
                # the divider ends a record rather than opening the next: a page that began
                # with one would make the OptionList measure every row drawn before it again
                out.append(None)
            return out

        self.show_items(records, options_of, lead=first)
        self.highlighted = None
        if keep and keep.startswith(("rec:", "cite:")):
            wanted = keep.split(":")[1]
            self.draw_until(lambda r: r.memory_id == wanted)
        restore_highlight(self, keep)

    def show_message(self, message: RenderableType) -> None:
        self.set_options([Option(message, disabled=True)])

    def select_record(self, record: RecordVM) -> bool:
        self.draw_until(lambda r: r.memory_id == record.memory_id)
        for i in range(self.option_count):
            opt = self.get_option_at_index(i)
            if isinstance(opt, RecordOption) and opt.record.memory_id == record.memory_id:
                self.highlighted = i
                self.scroll_to_highlight(top=True)
                return True
        return False

    @property
    def selected_record(self) -> RecordVM | None:
        opt = self.highlighted_option
        return opt.record if isinstance(opt, (RecordOption, CitationOption)) else None
