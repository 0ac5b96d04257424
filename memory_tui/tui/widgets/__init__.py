"""Widgets: the header line, the view selector, record lists and the source pane."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable, Iterable

from rich.console import Group
from rich.text import Text
from textual.widgets import OptionList, Static, Tree
from textual.widgets.option_list import Option

from memory_tui.core.errors import Problem

from ..commands import VIEW_SHORT, VIEW_TITLES, VIEWS
from ..data import FrameVM, RecordVM, WorkspaceModel
from ..render import ASCII, UNICODE, Glyphs, record_markdown, render_markdown

ASCII_TREE_LINES = {
    "default": ("  ", "| ", "`-", "|-"),
    "bold": ("  ", "| ", "`-", "|-"),
    "double": ("  ", "| ", "`-", "|-"),
}


def glyphs_for(ascii_mode: bool) -> Glyphs:
    return ASCII if ascii_mode else UNICODE


def relative_time(iso: str | None, now: datetime | None) -> str:
    if not iso:
        return ""
    try:
        at = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if now is None:
        return at.strftime("%Y-%m-%d %H:%M")
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    secs = int((now - at).total_seconds())
    if secs < 0:
        return at.strftime("%Y-%m-%d %H:%M")
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return "just now"


def header_text(model: WorkspaceModel | None, width: int, now: datetime | None, glyphs: Glyphs) -> Text:
    """One line: state dir, workspace id, short revision, writer health. Shrinks with width."""
    text = Text()
    text.append(" memory-tui ", "bold reverse")
    if model is None:
        return text
    narrow = width < 100
    parts: list[tuple[str, str]] = [(model.display_dir, "bold")]
    if model.workspace_id:
        parts.append((model.workspace_id, ""))
    if model.revision:
        parts.append((("" if narrow else "rev ") + model.revision[:8], "dim"))
    st = model.status
    if model.memory_exists:
        if not model.enabled:
            parts.append(("memory off", "bold red"))
        elif not model.writer_enabled:
            parts.append(("writer off", "bold yellow"))
        elif st.last_outcome == "failure":
            code = st.last_failure_code or "failure"
            parts.append(((f"{glyphs.bad} " if narrow else f"writer {glyphs.bad} ") + code, "bold red"))
        elif st.last_outcome == "success":
            when = relative_time(st.last_success_at, now)
            parts.append(((f"{glyphs.ok} " if narrow else f"writer {glyphs.ok} ") + when, "green"))
        else:
            parts.append(("writer: never ran" if not narrow else "no writes", "dim"))
        if st.pending_turns is not None:
            parts.append((f"{st.pending_turns} pending" if not narrow else f"pend {st.pending_turns}", ""))
        if model.problems:
            n = len(model.problems)
            parts.append((f"{n} problem" + ("s" if n != 1 else ""), "bold yellow"))
    sep = " │ " if glyphs is UNICODE else " | "
    for i, (label, style) in enumerate(parts):
        text.append(" " if i == 0 else sep, "dim")
        text.append(label, style)
    if text.cell_len > width:
        text.truncate(width, overflow="ellipsis")
    return text


def views_text(current: str, compact: bool) -> Text:
    text = Text()
    for i, view in enumerate(VIEWS, start=1):
        label = VIEW_SHORT[view] if compact else VIEW_TITLES[view]
        style = "bold reverse" if view == current else ""
        piece = Text.assemble((f" {i} ", "bold" if view != current else style), (f"{label} ", style))
        piece.apply_meta({"@click": f"app.switch_view('{view}')"})
        text.append_text(piece)
        if not compact and i < len(VIEWS):
            text.append("\n")
    return text


class ViewTabs(Static):
    """The view selector: a column in the sidebar, a row when narrow."""

    DEFAULT_CSS = "ViewTabs { height: auto; }"

    def show(self, current: str, compact: bool) -> None:
        self.update(views_text(current, compact))


class HeaderBar(Static):
    DEFAULT_CSS = "HeaderBar { height: 1; }"


class MemoryTree(Tree):
    """A Tree whose glyphs follow ASCII mode."""

    def set_ascii(self, on: bool) -> None:
        if on:
            self.LINES = ASCII_TREE_LINES  # type: ignore[misc]
            self.ICON_NODE = "> "  # type: ignore[misc]
            self.ICON_NODE_EXPANDED = "v "  # type: ignore[misc]
        else:
            for name in ("LINES", "ICON_NODE", "ICON_NODE_EXPANDED"):
                self.__dict__.pop(name, None)
        self._invalidate()


def _record_meta(rec: RecordVM, glyphs: Glyphs, *, core_status: str | None = None, topic: bool = False) -> Text:
    meta = Text()
    meta.append(rec.when or "undated", "bold")
    meta.append(f" · {rec.tokens} tok · ", "dim")
    meta.append(f"^{rec.memory_id}", "dim")
    if rec.aliases:
        meta.append(" (alias " + ", ".join(rec.aliases) + ")", "dim")
    if rec.backlinks:
        n = len(rec.backlinks)
        meta.append(f" · {glyphs.back} {n} backlink" + ("s" if n != 1 else ""), "italic")
    if rec.relation_targets:
        meta.append(f" · {glyphs.arrow} " + ", ".join(rec.relation_targets), "italic")
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
    return Group(_record_meta(rec, glyphs, **kw), render_markdown(md, glyphs=glyphs))


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


class RecordList(OptionList):
    """Records with their citation chips as selectable rows (ids ``rec:<id>``, ``cite:<id>:<n>``)."""

    DEFAULT_CSS = "RecordList { height: 1fr; }"

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
    ) -> None:
        keep = self.highlighted_option.id if self.highlighted_option is not None else None
        options: list[Option | None] = []
        chain: tuple[str, ...] = ()
        first = True
        for rec in records:
            if not first:
                options.append(None)
            first = False
            if headings and rec.headings[1:] != chain[1:] and len(rec.headings) > 1:
                chain = rec.headings
                options.append(Option(Text(" › ".join(rec.headings[1:]), "bold underline"), disabled=True))
            elif headings:
                chain = rec.headings
            prompt = render_record(rec, glyphs, core_status=core_status(rec) if core_status else None, topic=topic_line)
            options.append(Option(prompt, id=f"rec:{rec.memory_id}"))
            if chips:
                for n, _link in enumerate(rec.source_links):
                    options.append(Option(chip_text(rec, n, glyphs, model), id=f"cite:{rec.memory_id}:{n}"))
        self.set_options(options)
        self.restore(keep)

    def restore(self, option_id: str | None) -> None:
        if option_id:
            try:
                self.highlighted = self.get_option_index(option_id)
                return
            except Exception:
                pass
        if self.option_count:
            for i in range(self.option_count):
                if not self.get_option_at_index(i).disabled:
                    self.highlighted = i
                    break

    def select_id(self, option_id: str) -> bool:
        try:
            self.highlighted = self.get_option_index(option_id)
        except Exception:
            return False
        self.scroll_to_highlight(top=True)
        return True


def frame_text(frame: FrameVM | Problem | None, glyphs: Glyphs, label: str = "") -> Text:
    if frame is None:
        return Text("Select a citation chip to see the source turn it cites.", "dim")
    if isinstance(frame, Problem):
        out = Text(f"{glyphs.bad} Source unavailable: ", "bold red")
        out.append(frame.message)
        if frame.path:
            out.append(f"\n{frame.location}", "dim")
        return out
    out = Text()
    out.append(frame.speaker or "unknown speaker", "bold")
    out.append(f"  {frame.timestamp or 'no time'}", "dim")
    out.append("  ")
    if frame.pending:
        out.append("pending (unpaired, not trusted)", "bold yellow")
    elif frame.trusted:
        out.append(f"{glyphs.ok} trusted", "green")
    else:
        out.append("untrusted", "yellow")
    out.append("\n")
    out.append(frame.text)
    out.append(f"\n{frame.session_id or '?'} / {frame.node_id or '?'}  {frame.path}:{frame.line}", "dim")
    if label:
        out.append(f"  ({label})", "dim")
    return out


class SourcePane(Static):
    DEFAULT_CSS = "SourcePane { height: auto; max-height: 12; padding: 0 1; }"
