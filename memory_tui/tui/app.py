"""The Textual app. ``create_app`` is the one factory used by the CLI, the tests and the
screenshot script.

State lives in the app (``self.model``, a frozen ``WorkspaceModel``). Workers load and
watch; they never touch widgets, they hand results back as messages (harlequin's rule).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.screen import ModalScreen
from textual.widgets import ContentSwitcher, Footer, Input, OptionList, Static, Tree
from textual.widgets.option_list import Option

from memory_tui.core.errors import Problem
from memory_tui.core.tokens import O200kCounter, TokenCounter

from . import commands as registry
from .commands import VIEW_TITLES, VIEWS, MemoryCommands
from .data import FrameVM, RecordVM, TopicVM, WorkspaceModel, changed_views, header_changed, load_model
from .messages import JobFinished, JobProgress, WorkspaceChanged
from .render import render_markdown
from .settings import Settings, load_settings
from .widgets import (
    HeaderBar,
    MemoryTree,
    RecordList,
    SourcePane,
    ViewTabs,
    frame_text,
    glyphs_for,
    header_text,
)

Clock = Callable[[], datetime]


def _safe(handler):
    """Events can still arrive while the screen is torn down; a missing widget then is no error."""
    import functools

    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except NoMatches:
            return None

    return wrapper
NARROW = 100  # below this many columns, list and detail are shown one at a time
# Each record list and the pane that shows the source of its highlighted citation.
_SOURCE_PANES = {"topic-records": "#source-pane", "recent-record": "#recent-source", "core-records": "#core-source"}

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class HelpScreen(ModalScreen[None]):
    """Keys per view, from the same registry as the bindings and the palette."""

    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss_help", "Close", id="help.close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 72; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1; }
    HelpScreen.-ascii > VerticalScroll { border: ascii $accent; }
    """

    def __init__(self, keymap: dict[str, str], view: str, ascii_mode: bool) -> None:
        super().__init__()
        self.keymap = keymap
        self.view = view
        self.ascii_mode = ascii_mode

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("Keys\n", "bold underline")
        text.append("Rebind any id in ~/.config/memory-tui/config.toml under [keymap].\n\n", "dim")
        text.append("Everywhere\n", "bold")
        for cmd in registry.COMMANDS:
            if not cmd.views:
                self._row(text, cmd)
        text.append("  ^p         command palette (every action)\n")
        text.append("  tab        next pane\n")
        for view in VIEWS:
            cmds = [c for c in registry.COMMANDS if view in c.views]
            extra = _VIEW_HELP.get(view, ())
            if not cmds and not extra:
                continue
            marker = "  (current)" if view == self.view else ""
            text.append(f"\n{VIEW_TITLES[view]}{marker}\n", "bold")
            for cmd in cmds:
                self._row(text, cmd)
            for keys, what in extra:
                text.append(f"  {keys:<10} {what}\n")
        if self.ascii_mode:
            self.add_class("-ascii")
        with VerticalScroll():
            yield Static(text)

    def _row(self, text: Text, cmd: registry.Command) -> None:
        keys = registry.key_label(registry.effective_keys(cmd, self.keymap))
        text.append(f"  {keys:<10} ", "bold")
        text.append(f"{cmd.help}")
        text.append(f"  [{cmd.id}]\n", "dim")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)


_VIEW_HELP = {
    "topics": (("enter", "open the topic / focus its records"), ("up/down", "records and citation chips")),
    "timeline": (("enter", "expand a year or month; on a row, open it in Topics"),),
    "recent": (("enter", "show the record"),),
    "sessions": (("enter", "show the session"),),
}


class MemoryApp(App[None]):
    TITLE = "memory-tui"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {MemoryCommands}
    BINDINGS: ClassVar = registry.bindings()

    def __init__(
        self,
        state_dir: Path,
        *,
        clock: Clock | None = None,
        tokens: TokenCounter | None = None,
        watch: bool = True,
        ascii: bool = False,
        home: Path | None = None,
        settings: Settings | None = None,
    ) -> None:
        super().__init__()
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.counter = tokens or O200kCounter()
        self.watch_enabled = watch
        self.ascii_mode = ascii
        self.home = home
        self.settings = settings if settings is not None else load_settings()
        self.keymap: dict[str, str] = dict(self.settings.keymap)
        self.model: WorkspaceModel | None = None
        self.view = "topics"
        self.narrow = False
        self.pane = "list"  # narrow layout: "list" or "detail"
        self.filter_text = ""
        self.core_sources = False
        self.session_focus: tuple[str, str | None] | None = None
        self.reloads = 0  # how many times a new model was applied (tests read it)
        self.last_rendered: set[str] = set()
        self._reload_timer = None
        self._pending_paths: set[str] = set()
        self._load_seq = 0
        self._applied_seq = 0
        self.jobs: dict[str, tuple[int, int | None, str]] = {}
        if self.settings.theme:
            self.theme = self.settings.theme

    # ------------------------------------------------------------------ composition
    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield Static(id="banner")
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield ViewTabs(id="views")
                yield Input(placeholder="filter topics and records…", id="filter")
                yield Static(id="list-title")
                with ContentSwitcher(id="lists", initial="topics-list"):
                    yield MemoryTree("Topics", id="topics-list")
                    yield MemoryTree("Timeline", id="timeline-list")
                    yield OptionList(id="recent-list")
                    yield OptionList(id="core-list")
                    yield OptionList(id="sessions-list")
            with Vertical(id="content"):
                yield Static(id="detail-title")
                with ContentSwitcher(id="details", initial="topics-detail"):
                    with Vertical(id="topics-detail"):
                        yield RecordList(id="topic-records")
                        yield SourcePane(id="source-pane")
                    with Vertical(id="timeline-detail"):
                        yield OptionList(id="timeline-rows")
                    with Vertical(id="recent-detail"):
                        yield RecordList(id="recent-record")
                        yield SourcePane(id="recent-source")
                    with Vertical(id="core-detail"):
                        with VerticalScroll(id="core-scroll"):
                            yield Static(id="core-text")
                        yield RecordList(id="core-records")
                        yield SourcePane(id="core-source")
                    with VerticalScroll(id="sessions-detail"):
                        yield Static(id="sessions-text")
                    with VerticalScroll(id="notice-detail"):
                        yield Static(id="notice-text")
        yield Footer()

    def on_mount(self) -> None:
        if os.environ.get("TEXTUAL_ANIMATIONS") == "none":
            self.query_one("#filter", Input).cursor_blink = False  # deterministic snapshots
        for tree in self.query(MemoryTree):
            tree.show_root = False
            tree.guide_depth = 2
            tree.set_ascii(self.ascii_mode)
        self.set_class(self.ascii_mode, "-ascii")
        if self.keymap:
            self.set_keymap(self.keymap)
        self._apply_layout(self.size.width)
        self.apply_model(load_model(self.state_dir, counter=self.counter, home=self.home))
        self.query_one("#topics-list").focus()
        if self.watch_enabled:
            self.start_watcher()

    # ------------------------------------------------------------------ helpers
    @property
    def glyphs(self):
        return glyphs_for(self.ascii_mode)

    def now(self) -> datetime:
        return self.clock() if self.clock else datetime.now(timezone.utc)

    def get_system_commands(self, screen):
        for cmd in super().get_system_commands(screen):
            if cmd.title in ("Quit", "Keys"):
                continue  # ours are in the registry
            yield cmd

    # ------------------------------------------------------------------ layout
    def on_resize(self, event: Resize) -> None:
        self._apply_layout(event.size.width)

    def _apply_layout(self, width: int) -> None:
        narrow = width < NARROW
        self.narrow = narrow
        self.screen.set_class(narrow, "-narrow")
        self.screen.set_class(narrow and self.pane == "detail", "-detail")
        self.screen.set_class(not (narrow and self.pane == "detail"), "-list")
        self.query_one(ViewTabs).show(self.view, compact=narrow)
        self._render_header()

    def _set_pane(self, pane: str) -> None:
        self.pane = pane
        self._apply_layout(self.size.width)
        self.refresh_bindings()

    def _open_detail(self, target: str | None = None) -> None:
        """Focus ``target`` (a selector) if given, then on a narrow screen show the detail pane."""
        if target is not None:
            self.query_one(target).focus()
        if self.narrow:
            self._set_pane("detail")

    def _focus_list(self) -> None:
        self.query_one(f"#{self.view}-list").focus()

    # ------------------------------------------------------------------ model
    def apply_model(self, model: WorkspaceModel, changed: set[str] | None = None) -> None:
        first = self.model is None
        self.model = model
        self.reloads += 0 if first else 1
        self._render_header()
        self._render_banner()
        views = set(VIEWS) if changed is None else changed
        self.last_rendered = set(views)  # which views this model redrew (tests read it)
        if "topics" in views:
            self.render_topics()
        if "timeline" in views:
            self.render_timeline()
        if "recent" in views:
            self.render_recent()
        if "core" in views:
            self.render_core()
        if "sessions" in views:
            self.render_sessions()
        self._show_view(self.view)

    def _render_header(self) -> None:
        try:
            header = self.query_one(HeaderBar)
        except Exception:
            return
        header.update(header_text(self.model, self.size.width or 120, self.now(), self.glyphs))

    def _render_banner(self) -> None:
        banner = self.query_one("#banner", Static)
        m = self.model
        lines: list[Text] = []
        if m and m.memory_exists:
            if not m.enabled:
                lines.append(Text.assemble(("Memory is disabled", "bold"), ' (memory.backend = "none" in config.json): OpenProgram neither recalls nor writes memory. Showing the files read-only.'))
            elif not m.writer_enabled:
                lines.append(Text.assemble(("Writing is off", "bold"), " (memory.writer.enabled = false): new turns are not written to memory."))
            if self.settings.problem:
                lines.append(Text(f"Settings: {self.settings.problem}"))
        banner.update(Text("\n").join(lines) if lines else "")
        banner.display = bool(lines)

    def _blocking_notice(self) -> Text | None:
        m = self.model
        if m is None:
            return None
        g = self.glyphs
        if not m.state_exists:
            return Text.assemble(
                (f"{g.bad} No OpenProgram state directory\n\n", "bold"),
                f"Nothing at {m.display_dir}.\n\n",
                "memory-tui reads the directory OpenProgram writes (~/.openprogram, or ~/.openprogram-<profile> "
                "with OPENPROGRAM_PROFILE). Point it elsewhere with ",
                ("memory-tui --state DIR", "bold"),
                ", or try the demo: ",
                ("memory-tui demo", "bold"),
                ".\n\nThe app watches for the directory: it appears here as soon as it exists (ctrl+r reloads).",
            )
        if not m.memory_exists:
            return Text.assemble(
                (f"{g.bad} No memory workspace yet\n\n", "bold"),
                f"{m.display_dir} exists but has no memory/ folder. OpenProgram creates it on the first write "
                "(after a conversation reaches the trigger, or at the end of an idle session).\n\n",
                f"Sessions found: {len(m.sessions)} (view 5).",
            )
        return None

    # ------------------------------------------------------------------ view switching
    def action_switch_view(self, view: str) -> None:
        if view not in VIEWS:
            return
        self.view = view
        self._set_pane("list")
        self._show_view(view)
        self.refresh_bindings()

    def _show_view(self, view: str) -> None:
        self.query_one(ViewTabs).show(view, compact=self.narrow)
        notice = self._blocking_notice()
        lists = self.query_one("#lists", ContentSwitcher)
        details = self.query_one("#details", ContentSwitcher)
        lists.current = f"{view}-list"
        if notice is not None and view != "sessions":
            self.query_one("#notice-text", Static).update(notice)
            details.current = "notice-detail"
            self.query_one("#detail-title", Static).update(Text(VIEW_TITLES[view], "bold"))
            self.query_one("#list-title", Static).update("")
            if self.narrow:
                self._set_pane_silent("detail")
            return
        details.current = f"{view}-detail"
        self._render_titles()
        focus_target = self.query_one(f"#{view}-list")
        if self.narrow and self.pane == "detail":
            focus_target = self._detail_focus()
        if self.screen.focused is None or self.screen.focused.id not in (focus_target.id, "filter"):
            if not isinstance(self.screen, ModalScreen):
                focus_target.focus()

    def _set_pane_silent(self, pane: str) -> None:
        self.pane = pane
        self.screen.set_class(self.narrow and pane == "detail", "-detail")
        self.screen.set_class(not (self.narrow and pane == "detail"), "-list")

    def _detail_focus(self):
        selector = {
            "topics": "#topic-records",
            "timeline": "#timeline-rows",
            "recent": "#recent-record",
            "core": "#core-records" if self.core_sources else "#core-scroll",
            "sessions": "#sessions-detail",
        }[self.view]
        return self.query_one(selector)

    def _render_titles(self) -> None:
        title = self.query_one("#detail-title", Static)
        list_title = self.query_one("#list-title", Static)
        title.update(self._detail_title())
        list_title.update(self._list_title())

    # ------------------------------------------------------------------ Topics
    def _record_matches(self, r: RecordVM) -> bool:
        needle = self.filter_text.lower()
        return (
            not needle
            or needle in r.content.lower()
            or any(needle in i.lower() for i in r.ids)
            or needle in " ".join(r.headings).lower()
            or any(needle in l.label.lower() for l in r.source_links)
        )

    def _filtered_records(self, topic: TopicVM) -> tuple[RecordVM, ...]:
        if not self.filter_text:
            return topic.records
        return tuple(r for r in topic.records if self._record_matches(r))

    def _topic_matches(self, topic: TopicVM) -> bool:
        if not self.filter_text:
            return True
        return bool(self._filtered_records(topic)) or self.filter_text.lower() in topic.path.lower() or self.filter_text.lower() in topic.title.lower()

    def render_topics(self) -> None:
        tree = self.query_one("#topics-list", MemoryTree)
        m = self.model
        cursor = tree.cursor_node.data if tree.cursor_node is not None else None
        expanded = {n.data for n in _walk(tree.root) if n.is_expanded and n.data} if tree.root.children else None
        tree.clear()
        if not m or not m.memory_exists:
            return
        g = self.glyphs
        folders: dict[str, object] = {"": tree.root}
        target = None
        first_leaf = None
        for topic in m.topics:
            if not self._topic_matches(topic):
                continue
            parts = topic.path.split("/")[1:]
            parent = tree.root
            key = ""
            for part in parts[:-1]:
                key = f"{key}/{part}" if key else part
                if key not in folders:
                    count = sum(len(self._filtered_records(t)) for t in m.topics if t.path.startswith(f"topics/{key}/") and self._topic_matches(t))
                    node = parent.add(Text.assemble((f"{part}/", "bold"), (f" {count}", "dim")), data=f"dir:{key}", expand=True)
                    folders[key] = node
                parent = folders[key]  # type: ignore[assignment]
            recs = self._filtered_records(topic)
            if topic.problems:
                label = Text.assemble((f"{g.bad} ", "bold red"), (parts[-1].removesuffix(".md"), "red"), (" error", "dim"))
            elif self.filter_text:
                label = Text.assemble(parts[-1].removesuffix(".md"), (f" {len(recs)}/{len(topic.records)}", "dim"))
            else:
                label = Text.assemble(parts[-1].removesuffix(".md"), (f" {len(topic.records)}", "dim"))
            leaf = parent.add_leaf(label, data=f"topic:{topic.path}")
            first_leaf = first_leaf or leaf
            if cursor == leaf.data:
                target = leaf
        if expanded is not None:
            for node in _walk(tree.root):
                if node.data and str(node.data).startswith("dir:") and node.data not in expanded:
                    node.collapse()
        _move(tree, target or first_leaf)
        self.show_topic()

    def current_topic(self) -> TopicVM | None:
        tree = self.query_one("#topics-list", MemoryTree)
        node = tree.cursor_node
        if node is None or not self.model or not isinstance(node.data, str) or not node.data.startswith("topic:"):
            return None
        return self.model.topic(node.data[6:])

    def show_topic(self) -> None:
        topic = self.current_topic()
        records = self.query_one("#topic-records", RecordList)
        pane = self.query_one("#source-pane", SourcePane)
        pane.display = topic is not None and (not topic.problems or _only_source_problems(topic))
        if topic is None:
            records.clear_options()
            if self.model and self.model.empty:
                records.add_option(Option(Text.assemble(
                    ("No memories yet\n\n", "bold"),
                    "This workspace has no topic records. OpenProgram writes them after conversations "
                    "reach the trigger, or when a session goes idle. The Sessions view (5) shows what is pending.",
                ), disabled=True))
            pane.update("")
            self._render_titles()
            return
        if topic.problems and not _only_source_problems(topic):
            records.clear_options()
            records.add_option(Option(_problem_view(topic), disabled=True))
            pane.update("")
        elif topic.problems:
            # The text parses but some citations do not resolve (e.g. a truncated archive):
            # show the problems first, then the records with their chips marked unavailable.
            records.show_records(self._filtered_records(topic), self.glyphs, self.model)
            summary = Text(f"{self.glyphs.bad} {len(topic.problems)} citation problem(s); OpenProgram refuses writes to this topic until fixed:\n", "bold red")
            for p in topic.problems[:4]:
                summary.append(f"{p.path}:{p.line}:{p.column} ", "bold")
                summary.append(_one_line(p.message, 70) + "\n")
            if len(topic.problems) > 4:
                summary.append(f"… and {len(topic.problems) - 4} more\n", "dim")
            records.add_option(Option(summary, disabled=True))
            opts = [records.get_option_at_index(i) for i in range(records.option_count)]
            keep = records.highlighted_option.id if records.highlighted_option else None
            records.set_options([opts[-1], None] + opts[:-1])
            records.restore(keep)
            self._show_source_for(records, pane)
        else:
            records.show_records(self._filtered_records(topic), self.glyphs, self.model)
            self._show_source_for(records, pane)
        self._render_titles()

    def _show_source_for(self, records: RecordList, pane: SourcePane) -> None:
        opt = records.highlighted_option
        m = self.model
        if opt is None or not m or not opt.id:
            pane.update(frame_text(None, self.glyphs))
            return
        if opt.id.startswith("cite:"):
            _, mid, n = opt.id.split(":")
            rec = m.records.get(mid)
            if rec is None:
                return
            link = rec.source_links[int(n)]
            frame = m.frame(link.source_id) if link.source_id else _unresolved(m, rec, link.target)
            pane.update(frame_text(frame, self.glyphs, link.label))
            if link.source_id and isinstance(frame, FrameVM):
                self.session_focus = (frame.session_id or "", frame.node_id)
        else:
            mid = opt.id.split(":", 1)[1]
            rec = m.records.get(mid)
            if rec is None:
                return
            text = Text()
            if rec.backlinks:
                text.append(f"{self.glyphs.back} Linked from: ", "bold")
                text.append(", ".join(f"{b} ({_topic_name(m, b)})" for b in rec.backlinks))
            else:
                text.append("No other record links here.", "dim")
            if rec.relation_targets:
                text.append(f"\n{self.glyphs.arrow} Links to: ", "bold")
                text.append(", ".join(f"{t} ({_topic_name(m, t)})" for t in rec.relation_targets))
            text.append(f"\n{rec.topic_path}:{rec.line}", "dim")
            text.append("  · select a chip to see its source", "dim")
            pane.update(text)

    # ------------------------------------------------------------------ Timeline
    def _timeline_rows(self):
        m = self.model
        rows = m.timeline if m else ()
        if self.filter_text:
            needle = self.filter_text.lower()
            rows = tuple(r for r in rows if needle in r.text.lower() or needle in r.when or needle in r.topic_path.lower())
        return rows

    def render_timeline(self) -> None:
        tree = self.query_one("#timeline-list", MemoryTree)
        cursor = tree.cursor_node.data if tree.cursor_node is not None else None
        expanded = {n.data for n in _walk(tree.root) if n.is_expanded and n.data} if tree.root.children else None
        tree.clear()
        rows = self._timeline_rows()
        counts: dict[str, int] = {}
        for row in rows:
            parts = row.when.split("-")
            for i in range(1, len(parts) + 1):
                key = "-".join(parts[:i])
                counts[key] = counts.get(key, 0) + 1
        nodes: dict[str, object] = {}
        for key in sorted(counts, key=lambda k: (k.split("-"))):
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
            want_open = expanded is None or key in expanded
            node = parent.add(label, data=key, expand=want_open) if has_children else parent.add_leaf(label, data=key)  # type: ignore[union-attr]
            nodes[key] = node
        target = next((n for n in _walk(tree.root) if n.data == cursor), None)
        if target is None and tree.root.children:
            target = tree.root.children[0]
        _move(tree, target)
        self.show_timeline()

    def show_timeline(self) -> None:
        tree = self.query_one("#timeline-list", MemoryTree)
        rows_list = self.query_one("#timeline-rows", OptionList)
        keep = rows_list.highlighted_option.id if rows_list.highlighted_option is not None else None
        node = tree.cursor_node
        key = node.data if node is not None else None
        rows = [r for r in self._timeline_rows() if key and (r.when == key or r.when.startswith(key + "-"))]
        options: list[Option | None] = []
        last = None
        for i, row in enumerate(rows):
            if row.when != last:
                label = row.when if row.when.count("-") == 2 else f"{row.when} (no day)" if row.when.count("-") == 1 else f"{row.when} (no month)"
                options.append(Option(Text(label, "bold underline"), disabled=True))
                last = row.when
            topic = row.topic_path.removeprefix("topics/").removesuffix(".md")
            text = Text.assemble((f"{topic}", "bold"), (f"  ^{row.memory_id}\n", "dim"), render_markdown(row.text, glyphs=self.glyphs))
            options.append(Option(text, id=f"row:{i}:{row.memory_id}"))
        if not rows:
            options.append(Option(Text("No dated records." if not key else "Nothing on this date.", "dim"), disabled=True))
        rows_list.set_options(options)
        if keep:
            try:
                rows_list.highlighted = rows_list.get_option_index(keep)
            except Exception:
                pass
        if rows_list.highlighted is None:
            for i in range(rows_list.option_count):
                if not rows_list.get_option_at_index(i).disabled:
                    rows_list.highlighted = i
                    break
        self._render_titles()

    # ------------------------------------------------------------------ Recent
    def _recent(self) -> tuple[RecordVM, ...]:
        m = self.model
        recs = m.recent if m else ()
        if self.filter_text:
            needle = self.filter_text.lower()
            recs = tuple(r for r in recs if needle in r.content.lower() or needle in r.topic_path.lower())
        return recs

    def render_recent(self) -> None:
        lst = self.query_one("#recent-list", OptionList)
        keep = lst.highlighted_option.id if lst.highlighted_option is not None else None
        options = []
        for rec in self._recent():
            text = Text.assemble((rec.when or "undated", "dim"), " ", (rec.topic_path.removeprefix("topics/").removesuffix(".md"), "bold"), "\n", _one_line(rec.content, 30))
            options.append(Option(text, id=f"recent:{rec.memory_id}"))
        lst.set_options(options)
        _restore(lst, keep)
        self.show_recent()

    def show_recent(self) -> None:
        lst = self.query_one("#recent-list", OptionList)
        view = self.query_one("#recent-record", RecordList)
        opt = lst.highlighted_option
        rec = self.model.records.get(opt.id.split(":", 1)[1]) if (opt and opt.id and self.model) else None
        if rec is None:
            view.clear_options()
            self.query_one("#recent-source", SourcePane).update("")
        else:
            view.show_records([rec], self.glyphs, self.model, headings=False, topic_line=True)
            self._show_source_for(view, self.query_one("#recent-source", SourcePane))
        self._render_titles()

    # ------------------------------------------------------------------ Core
    def _core_records(self) -> tuple[RecordVM, ...]:
        core = self.model.core if self.model else None
        if core is None:
            return ()
        if not self.filter_text:
            return core.records
        return tuple(r for r in core.records if self._record_matches(r))

    def render_core(self) -> None:
        m = self.model
        lst = self.query_one("#core-list", OptionList)
        keep = lst.highlighted_option.id if lst.highlighted_option is not None else None
        g = self.glyphs
        options: list[Option | None] = []
        core = m.core if m else None
        if core:
            marks = {"kept": (g.ok, "green"), "omitted": (g.bad, "red"), "pending": (g.pending, "yellow")}
            for rec in self._core_records():
                mark = marks.get(core.status_of(rec.memory_id) or "", (" ", ""))
                text = Text.assemble((mark[0] + " ", mark[1]), (f"{rec.memory_id}", "bold"), (f" {rec.tokens} tok\n", "dim"), _one_line(rec.content, 28))
                options.append(Option(text, id=f"core:{rec.memory_id}"))
            if not options and self.filter_text:
                options.append(Option(Text(f"No block matches “{self.filter_text}”.", "dim"), disabled=True))
        lst.set_options(options)
        _restore(lst, keep)
        self.show_core()

    def show_core(self) -> None:
        m = self.model
        core = m.core if m else None
        text_widget = self.query_one("#core-text", Static)
        records = self.query_one("#core-records", RecordList)
        pane = self.query_one("#core-source", SourcePane)
        scroll = self.query_one("#core-scroll")
        g = self.glyphs
        scroll.display = not self.core_sources
        records.display = self.core_sources
        pane.display = self.core_sources
        if core is None:
            text_widget.update("")
            records.clear_options()
            return
        if self.core_sources:
            records.show_records(self._core_records(), g, m, headings=False, core_status=lambda r: core.status_of(r.memory_id))
            lst = self.query_one("#core-list", OptionList)
            if lst.highlighted_option is not None and lst.highlighted_option.id:
                records.select_id("rec:" + lst.highlighted_option.id.split(":", 1)[1])
            self._show_source_for(records, pane)
        else:
            text_widget.update(self._core_text(core))
        self._render_titles()

    def _core_text(self, core) -> Text:
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
            from memory_tui.core.views import split_core_chunks

            chunks = [c for c, _bid in split_core_chunks(body)]
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
            ids = [i for i in ids if not needle or (i in by_id and self._record_matches(by_id[i])) or needle in i]
            if not ids:
                return
            out.append(f"\n\n{glyph} {title} ({len(ids)}):\n", style)
            out.append(note, "dim")
            for mid in ids:
                rec = by_id.get(mid)
                out.append(f"  {mid}", "bold")
                out.append(f"  {_one_line(rec.content, 60) if rec else ''}\n")

        listing(core.omitted_ids, f"Omitted by the {core.budget:,} token budget", "", g.bad, "bold red")
        listing(
            core.pending_ids,
            "Skipped: they cite a pending source",
            "OpenProgram keeps a block out of core.md while a source it cites is pending (not confirmed).\n",
            g.pending,
            "bold yellow",
        )
        return out

    def action_toggle_core_sources(self) -> None:
        self.core_sources = not self.core_sources
        self.show_core()
        if self.view == "core":
            (self.query_one("#core-records") if self.core_sources else self.query_one("#core-list")).focus()

    # ------------------------------------------------------------------ Sessions (placeholder)
    def render_sessions(self) -> None:
        m = self.model
        lst = self.query_one("#sessions-list", OptionList)
        keep = lst.highlighted_option.id if lst.highlighted_option is not None else None
        options = []
        for s in m.sessions if m else ():
            pending = "?" if s.pending is None else str(s.pending)
            text = Text.assemble((s.session_id, "bold"), (f"  {s.nodes if s.nodes is not None else '?'} nodes · {pending} pending\n", "dim"), _one_line(s.title, 30))
            options.append(Option(text, id=f"session:{s.session_id}"))
        lst.set_options(options)
        _restore(lst, keep)
        self.show_session()

    def show_session(self) -> None:
        m = self.model
        lst = self.query_one("#sessions-list", OptionList)
        text = Text()
        opt = lst.highlighted_option
        sid = opt.id.split(":", 1)[1] if opt and opt.id else None
        s = next((x for x in (m.sessions if m else ()) if x.session_id == sid), None)
        if s is None:
            text.append("No sessions found under sessions/.", "dim")
        else:
            text.append(s.title or "(untitled)", "bold")
            text.append(f"\n{s.session_id} · {s.nodes} node files · pending turns: {'unknown' if s.pending is None else s.pending}\n\n")
            if self.session_focus and self.session_focus[0] == s.session_id and self.session_focus[1]:
                node = self.session_focus[1]
                text.append(f"Cited node: {node}\n", "bold")
                frame = m.frame(f"openprogram/{s.session_id}/{node}") if m else None
                text.append_text(frame_text(frame, self.glyphs))
                text.append("\n\n")
            text.append(
                "The Sessions view (conversation DAG, written and pending turns, and why a turn was not "
                "written) comes in a later issue. This placeholder lists the sessions found.",
                "dim italic",
            )
        self.query_one("#sessions-text", Static).update(text)
        self._render_titles()

    def action_goto_session(self) -> None:
        focused = self.screen.focused
        if isinstance(focused, RecordList) and focused.highlighted_option and (focused.highlighted_option.id or "").startswith("cite:"):
            self._show_source_for(focused, self.query_one(_SOURCE_PANES.get(focused.id or "", "#core-source"), SourcePane))
        if not self.session_focus:
            self.notify("Select a citation chip first.", severity="warning")
            return
        sid, _node = self.session_focus
        self.action_switch_view("sessions")
        lst = self.query_one("#sessions-list", OptionList)
        try:
            lst.highlighted = lst.get_option_index(f"session:{sid}")
        except Exception:
            self.notify(f"Session {sid} is not in sessions/.", severity="warning")
        self.show_session()
        self._open_detail()

    def action_open_record(self) -> None:
        mid = self._selected_record_id()
        if not mid or not self.model:
            return
        self.reveal_record(mid)

    def _selected_record_id(self) -> str | None:
        if self.view == "timeline":
            opt = self.query_one("#timeline-rows", OptionList).highlighted_option
            return opt.id.split(":")[-1] if opt and opt.id else None
        if self.view == "recent":
            opt = self.query_one("#recent-list", OptionList).highlighted_option
            return opt.id.split(":", 1)[1] if opt and opt.id else None
        if self.view == "core":
            opt = self.query_one("#core-list", OptionList).highlighted_option
            return opt.id.split(":", 1)[1] if opt and opt.id else None
        return None

    def reveal_record(self, memory_id: str) -> None:
        m = self.model
        rec = m.records.get(memory_id) if m else None
        if rec is None:
            return
        if rec.topic_path == "topics/core.md":
            self.action_switch_view("core")
            if not self.core_sources:
                self.action_toggle_core_sources()
            self.query_one("#core-records", RecordList).select_id(f"rec:{rec.memory_id}")
            return
        if self.filter_text:
            self._clear_filter()
        self.action_switch_view("topics")
        tree = self.query_one("#topics-list", MemoryTree)
        node = next((n for n in _walk(tree.root) if n.data == f"topic:{rec.topic_path}"), None)
        if node is not None:
            _move(tree, node)
            self.show_topic()
        records = self.query_one("#topic-records", RecordList)
        records.select_id(f"rec:{rec.memory_id}")
        self._open_detail("#topic-records")

    # ------------------------------------------------------------------ titles
    def _detail_title(self) -> Text:
        m = self.model
        g = self.glyphs
        if self.view == "topics":
            topic = self.current_topic()
            if topic is None:
                return Text("Topics", "bold")
            n = len(topic.records)
            shown = len(self._filtered_records(topic))
            whens = sorted({r.when for r in topic.records if r.when})
            out = Text.assemble((topic.title, "bold"), "  ", (topic.path, "dim"))
            count = f"{shown}/{n} records" if self.filter_text else f"{n} record" + ("s" if n != 1 else "")
            out.append(f"\n{count}")
            if whens:
                out.append(f" · {whens[0]}" + (f" {g.arrow} {whens[-1]}" if whens[-1] != whens[0] else ""))
            out.append(f" · {sum(r.tokens for r in topic.records)} tok", "dim")
            if topic.problems:
                out.append(f" · {g.bad} does not parse", "bold red")
            return out
        if self.view == "timeline":
            node = self.query_one("#timeline-list", MemoryTree).cursor_node
            key = node.data if node is not None else None
            n = len([r for r in self._timeline_rows() if key and (r.when == key or r.when.startswith(key + "-"))])
            return Text.assemble(("Timeline", "bold"), f"  {key or ''}", (f"\n{n} row" + ("s" if n != 1 else "") + " · o opens a row in Topics", "dim"))
        if self.view == "recent":
            return Text.assemble(("Recent", "bold"), ("\nnewest first · o opens the record in its topic", "dim"))
        if self.view == "core":
            core = m.core if m else None
            if core is None:
                return Text("Core", "bold")
            # Two short lines: they must not wrap at 120 columns (content is ~80 wide).
            out = Text.assemble(("Core", "bold"), "  ", ("core.md ← topics/core.md" if core.master else "core.md (hand-written)", "dim"))
            out.append(" · injection " + ("on" if core.inject else "off"), "" if core.inject else "bold yellow")
            if self.filter_text:
                out.append(f" · filter: {self.filter_text}", "dim")
            over = core.omitted_ids
            out.append(f"\n{core.tokens:,} / {core.budget:,} tokens", "bold red" if over else "bold green")
            out.append(f" · {len(core.kept_ids)} injected · {len(over)} omitted")
            if core.pending_ids:
                out.append(f" · {len(core.pending_ids)} pending", "yellow")
            return out
        if self.view == "sessions":
            n = len(m.sessions) if m else 0
            return Text.assemble(("Sessions", "bold"), (f"\n{n} session" + ("s" if n != 1 else "") + " · placeholder", "dim"))
        return Text(VIEW_TITLES[self.view], "bold")

    def _list_title(self) -> Text:
        m = self.model
        if not m:
            return Text("")
        if self.view == "topics":
            n = sum(len(t.records) for t in m.topics)
            return Text(f"{len(m.topics)} topics · {n} records" + (f" · filter: {self.filter_text}" if self.filter_text else ""), "dim")
        if self.view == "timeline":
            return Text(f"{len(self._timeline_rows())} dated rows", "dim")
        if self.view == "recent":
            return Text(f"{len(m.recent)} / {m.config.recent_limit} records", "dim")
        if self.view == "core":
            core = m.core
            n = len(core.records) if core else 0
            if self.filter_text:
                return Text(f"{len(self._core_records())}/{n} blocks · filter: {self.filter_text}", "dim")
            return Text(f"{n} blocks in topics/core.md", "dim")
        if self.view == "sessions":
            return Text(f"{len(m.sessions)} sessions", "dim")
        return Text("")

    # ------------------------------------------------------------------ events
    @on(Tree.NodeHighlighted, "#topics-list")
    @_safe
    def _topic_highlighted(self) -> None:
        self.show_topic()

    @on(Tree.NodeSelected, "#topics-list")
    @_safe
    def _topic_selected(self, event: Tree.NodeSelected) -> None:
        if isinstance(event.node.data, str) and event.node.data.startswith("topic:"):
            self._open_detail("#topic-records")

    @on(Tree.NodeHighlighted, "#timeline-list")
    @_safe
    def _timeline_highlighted(self) -> None:
        self.show_timeline()

    @on(Tree.NodeSelected, "#timeline-list")
    @_safe
    def _timeline_selected(self, event: Tree.NodeSelected) -> None:
        if not event.node.children:
            self._open_detail("#timeline-rows")

    @on(OptionList.OptionSelected, "#timeline-rows")
    @_safe
    def _timeline_row_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.reveal_record(event.option.id.split(":")[-1])

    @on(OptionList.OptionHighlighted, "#recent-list")
    @_safe
    def _recent_highlighted(self) -> None:
        self.show_recent()

    @on(OptionList.OptionSelected, "#recent-list")
    @_safe
    def _recent_selected(self) -> None:
        self._open_detail("#recent-record")

    @on(OptionList.OptionHighlighted, "#core-list")
    @_safe
    def _core_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if self.core_sources and event.option.id:
            self.query_one("#core-records", RecordList).select_id("rec:" + event.option.id.split(":", 1)[1])

    @on(OptionList.OptionSelected, "#core-list")
    @_safe
    def _core_selected(self, event: OptionList.OptionSelected) -> None:
        if not self.core_sources:
            self.action_toggle_core_sources()
        if event.option.id:
            self.query_one("#core-records", RecordList).select_id("rec:" + event.option.id.split(":", 1)[1])
        self._open_detail("#core-records")

    @on(OptionList.OptionHighlighted, "#sessions-list")
    @_safe
    def _session_highlighted(self) -> None:
        self.show_session()

    @on(OptionList.OptionSelected, "#sessions-list")
    @_safe
    def _session_selected(self) -> None:
        self._open_detail()

    @on(OptionList.OptionHighlighted, "RecordList")
    @_safe
    def _record_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        pane_id = _SOURCE_PANES.get(event.option_list.id or "")
        if pane_id:
            self._show_source_for(event.option_list, self.query_one(pane_id, SourcePane))  # type: ignore[arg-type]

    @on(OptionList.OptionSelected, "RecordList")
    @_safe
    def _record_selected(self, event: OptionList.OptionSelected) -> None:
        oid = event.option.id or ""
        if oid.startswith("cite:"):
            self.action_goto_session()

    # ------------------------------------------------------------------ filter / back
    def action_filter(self) -> None:
        if self.view == "sessions":
            self.notify("Filter works in Topics, Timeline, Recent and Core.", severity="information")
            return
        inp = self.query_one("#filter", Input)
        self.screen.add_class("-filtering")
        self._set_pane("list")
        inp.focus()
        self.refresh_bindings()

    @on(Input.Changed, "#filter")
    @_safe
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self._render_filtered()
        self._render_titles()

    @on(Input.Submitted, "#filter")
    @_safe
    def _filter_submitted(self) -> None:
        self._focus_list()

    def _clear_filter(self) -> None:
        inp = self.query_one("#filter", Input)
        self.screen.remove_class("-filtering")
        if inp.value:
            inp.value = ""
        if self.filter_text:
            self.filter_text = ""
            self._render_filtered()
        self.refresh_bindings()

    def _render_filtered(self) -> None:
        self.render_topics()
        self.render_timeline()
        self.render_recent()
        self.render_core()

    def action_back(self) -> None:
        if self.narrow and self.pane == "detail":
            self._set_pane("list")
            self._focus_list()
            return
        if self.screen.has_class("-filtering") or self.filter_text:
            self._clear_filter()
            self._focus_list()
            return

    # ------------------------------------------------------------------ misc actions
    def action_toggle_ascii(self) -> None:
        self.ascii_mode = not self.ascii_mode
        self.set_class(self.ascii_mode, "-ascii")
        for tree in self.query(MemoryTree):
            tree.set_ascii(self.ascii_mode)
        if self.model:
            self.apply_model(self.model)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        self.push_screen(HelpScreen(self.keymap, self.view, self.ascii_mode))

    def action_reload(self) -> None:
        self.load_in_background(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        cmd = registry.by_action_name().get(action)
        if cmd is not None and cmd.views and self.view not in cmd.views:
            return False
        if action == "goto_session" and self.view == "core" and not self.core_sources:
            return False
        if action == "back":
            return (self.narrow and self.pane == "detail") or self.screen.has_class("-filtering") or bool(self.filter_text)
        return True

    # ------------------------------------------------------------------ loading & watching
    def load_in_background(self, touched: set[str] | None) -> None:
        """Reload from the engine. ``touched`` (paths a watcher saw) lets untouched parts be
        reused; ``None`` is an explicit reload, which checks everything and redraws every view."""
        self._load_seq += 1
        self._load_worker(self._load_seq, touched)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def _load_worker(self, seq: int, touched: set[str] | None) -> None:
        model = load_model(self.state_dir, counter=self.counter, home=self.home, previous=self.model, touched=touched)
        self.call_from_thread(self._loaded, seq, model, touched is None)

    def _loaded(self, seq: int, model: WorkspaceModel, explicit: bool) -> None:
        if seq < self._applied_seq:
            return  # an older load finished after a newer one: keep the newer
        self._applied_seq = seq
        old = self.model
        if explicit:
            self.apply_model(model)
            return
        changed = changed_views(old, model)
        if not changed and not header_changed(old, model):
            # Nothing visible changed (e.g. our own write already shown): keep the snapshot for
            # the next incremental refresh, redraw nothing (no flicker).
            self.model = model
            return
        self.apply_model(model, changed)

    def start_watcher(self) -> None:
        self._watch_worker()

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def _watch_worker(self) -> None:
        from .watcher import watch_changes

        import asyncio

        while not self.state_dir.is_dir():  # wait for OpenProgram to create it
            await asyncio.sleep(1.0)
            if self.state_dir.is_dir():
                self.load_in_background(None)
        import threading

        self._watch_stop = threading.Event()
        async for paths in watch_changes(self.state_dir, self._watch_stop):
            self.post_message(WorkspaceChanged(paths))

    def on_unmount(self) -> None:
        stop = getattr(self, "_watch_stop", None)
        if stop is not None:
            stop.set()

    def on_workspace_changed(self, message: WorkspaceChanged) -> None:
        self._pending_paths.update(message.paths)
        if self._reload_timer is not None:
            self._reload_timer.stop()
        self._reload_timer = self.set_timer(0.1, self._reload_pending)

    def _reload_pending(self) -> None:
        paths, self._pending_paths = set(self._pending_paths), set()
        self._reload_timer = None
        if paths or not (self.model and self.model.state_exists):
            self.load_in_background(paths if self.model and self.model.state_exists else None)

    def on_job_progress(self, message: JobProgress) -> None:
        self.jobs[message.job] = (message.done, message.total, message.note)
        total = f"/{message.total}" if message.total else ""
        self.notify(f"{message.job}: {message.done}{total} {message.note}", timeout=2)

    def on_job_finished(self, message: JobFinished) -> None:
        self.jobs.pop(message.job, None)
        if message.ok:
            self.notify(f"{message.job} finished")
        else:
            self.notify(f"{message.job} failed: {message.error}", severity="error")
        self.load_in_background(None)


def _move(tree: Tree, node) -> None:
    """Move a tree's cursor right after (re)building it: lines must exist first."""
    if node is None:
        return
    _ = tree._tree_lines  # builds the line table so the node knows its line
    tree.move_cursor(node)


def _walk(node):
    for child in node.children:
        yield child
        yield from _walk(child)


def _restore(lst: OptionList, keep: str | None) -> None:
    if keep:
        try:
            lst.highlighted = lst.get_option_index(keep)
            return
        except Exception:
            pass
    if lst.option_count and lst.highlighted is None:
        lst.highlighted = 0


def _one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _topic_name(m: WorkspaceModel, mid: str) -> str:
    rec = m.records.get(mid)
    return rec.topic_path.removeprefix("topics/").removesuffix(".md") if rec else "missing"


def _unresolved(m: WorkspaceModel, rec: RecordVM, target: str) -> Problem:
    """Why a citation has no frame, from the engine's problems: a damaged archive first (with
    its line), else the topic's own problem for this link target."""
    import posixpath

    path = posixpath.normpath(posixpath.join(posixpath.dirname(rec.topic_path), target.split("#", 1)[0]))
    for p in m.problems:
        if p.path == path and p.code in ("TRUNCATED_ARCHIVE", "CORRUPT_FILE"):
            return Problem(p.code, f"the archive is damaged: {p.message}; this frame is past the valid prefix", p.path, p.line, p.column)
    topic = m.topic(rec.topic_path)
    for p in topic.problems if topic else ():
        if p.details.get("target") == target:
            return p
    return Problem("INVALID_TOPIC_FORMAT", f"invalid source target: {target}", rec.topic_path)


def _only_source_problems(topic: TopicVM) -> bool:
    return bool(topic.records) and all(
        p.message.startswith(("invalid source target", "source reference", "missing source")) or p.code == "MISSING_SOURCE"
        for p in topic.problems
    )


def _problem_view(topic: TopicVM) -> Text:
    out = Text()
    first = topic.problems[0]
    out.append(f"This topic does not parse: {len(topic.problems)} problem" + ("s" if len(topic.problems) != 1 else "") + "\n\n", "bold red")
    for p in topic.problems:
        out.append(f"{p.path}:{p.line}:{p.column}", "bold")
        out.append(f"  {p.code}: {p.message}\n")
    out.append("\nOpenProgram refuses every write until this is fixed. The file as it is on disk:\n\n", "dim")
    bad_lines = {p.line for p in topic.problems}
    lines = topic.raw.split("\n")
    width = len(str(len(lines)))
    for no, line in enumerate(lines, start=1):
        style = "bold red" if no in bad_lines else ""
        out.append(f"{no:>{width}} ", "dim")
        out.append((">" if no in bad_lines else " ") + " ", "bold red")
        out.append(line + "\n", style)
        if no == first.line and first.column:
            out.append(" " * (width + 3 + first.column - 1) + "^\n", "bold red")
    return out


def create_app(
    state_dir: Path | str,
    *,
    clock: Clock | None = None,
    tokens: TokenCounter | None = None,
    watch: bool = True,
    ascii: bool = False,
    home: Path | None = None,
    settings: Settings | None = None,
) -> MemoryApp:
    """The one factory (CLI, tests, screenshots).

    ``home`` is the folder shown as ``~`` (tests inject one so no absolute path is on screen);
    ``settings`` defaults to the user's config file (tests pass ``Settings()``).
    """
    return MemoryApp(
        Path(state_dir), clock=clock, tokens=tokens, watch=watch, ascii=ascii, home=home, settings=settings
    )
