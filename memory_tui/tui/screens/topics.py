"""Topics: the topic tree on the left, the records of the highlighted topic on the right."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.widget import Widget
from textual.events import Resize
from textual.widgets import OptionList, Static, Tree

from .. import commands as registry
from ..model.data import RecordVM, TopicVM
from ..widgets import RecordList, SourcePane
from ..widgets.records import RecordOption
from ..widgets.tree import walk
from .base import fit_path, one_line, plural
from .citations import CitationScreen
from .recent import RecordRows
from .record_ops import RecordActions
from .tree_list import TreeList


@dataclass(frozen=True)
class Folder:
    """A folder node of the topic tree (``key`` is its path under ``topics/``)."""

    key: str


@dataclass(frozen=True)
class TopicNode:
    """A topic leaf; ``path`` is the topic's workspace path."""

    path: str


def only_source_problems(topic: TopicVM) -> bool:
    return bool(topic.records) and all(
        p.message.startswith(("invalid source target", "source reference", "missing source")) or p.code == "MISSING_SOURCE"
        for p in topic.problems
    )


def problem_view(topic: TopicVM) -> Text:
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


class TopicsScreen(RecordRows, RecordActions, TreeList, CitationScreen):
    VIEW = "topics"
    TREE_TITLE = "Topics"
    BINDINGS: ClassVar[list[BindingType]] = registry.screen_bindings("topics")
    SHOWS_OUTLINE = True  # the first frame lists topics before they are parsed
    # polish: the topic's records are the rows a delete's cursor lands among (RecordRows)
    ROW_PREFIX = "rec"
    ROW_LIST = "#topic-records"
    ROW_TYPES = (RecordOption,)

    def compose_detail(self) -> ComposeResult:
        with Vertical(id="topics-detail", classes="view-detail"):
            yield RecordList(id="topic-records")
            yield SourcePane(id="source-pane")

    def detail_focus(self) -> Widget:
        return self.query_one("#topic-records")

    @property
    def records(self) -> RecordList:
        return self.query_one("#topic-records", RecordList)

    # ------------------------------------------------------------------ filtering
    def filtered_records(self, topic: TopicVM) -> tuple[RecordVM, ...]:
        if not self.filter_text:
            return topic.records
        return tuple(r for r in topic.records if self.record_matches(r))

    def shown_count(self, topic: TopicVM) -> int:
        # an outline topic has a count but no records yet
        return len(self.filtered_records(topic)) if self.filter_text else topic.record_count

    def topic_matches(self, topic: TopicVM) -> bool:
        if not self.filter_text:
            return True
        needle = self.filter_text.lower()
        return bool(self.filtered_records(topic)) or needle in topic.path.lower() or needle in topic.title.lower()

    # ------------------------------------------------------------------ drawing
    def render_view(self) -> None:
        tree = self.tree
        m = self.model
        # a reload that left every label as it was (a reword: same
        # topics, counts and problems) keeps the tree, its open folders and cursor, and only
        # redraws the detail; clearing and rebuilding 300 nodes was a third of the redraw.
        shape = self._tree_shape(m)
        if shape is not None and shape == self._shape and tree.root.children:
            self.show_topic()
            return
        self._shape = shape
        state = self.restart_tree()
        if not m or not m.memory_exists:
            self.show_topic()
            return
        g = self.glyphs
        folders: dict[str, object] = {}
        first_leaf = None
        for topic in m.topics:
            if not self.topic_matches(topic):
                continue
            parts = topic.path.split("/")[1:]
            parent = tree.root
            key = ""
            for part in parts[:-1]:
                key = f"{key}/{part}" if key else part
                if key not in folders:
                    count = sum(
                        self.shown_count(t) for t in m.topics if t.path.startswith(f"topics/{key}/") and self.topic_matches(t)
                    )
                    folders[key] = parent.add(Text.assemble((f"{part}/", "bold"), (f" {count}", "dim")), data=Folder(key), expand=state.is_open(Folder(key)))
                parent = folders[key]  # type: ignore[assignment]
            recs = self.filtered_records(topic)
            name = parts[-1].removesuffix(".md")
            if topic.problems:
                label = Text.assemble((f"{g.bad} ", "bold red"), (name, "red"), (" error", "dim"))
            elif self.filter_text:
                label = Text.assemble(name, (f" {len(recs)}/{topic.record_count}", "dim"))
            else:
                label = Text.assemble(name, (f" {topic.record_count}", "dim"))
            leaf = parent.add_leaf(label, data=TopicNode(topic.path))
            first_leaf = first_leaf or leaf
        self.land_cursor(state, first_leaf)
        self.show_topic()

    def current_topic(self) -> TopicVM | None:
        node = self.tree.cursor_node
        if node is None or not self.model or not isinstance(node.data, TopicNode):
            return None
        return self.model.topic(node.data.path)

    def show_topic(self) -> None:
        topic = self.current_topic()
        records = self.records
        pane = self.query_one("#source-pane", SourcePane)
        pane.display = topic is not None and (not topic.problems or only_source_problems(topic))
        m = self.model
        if topic is None or m is None or m.outline:
            self._records_key = None  # the pane is about to show something else
        if topic is not None and m is not None and m.outline:
            # the list is painted from the outline; records follow.
            records.show_message(Text.assemble(
                (f"{self.glyphs.pending} Reading {topic.record_count} records…\n\n", "bold"),
                "The topic list is ready; its records appear when the workspace is read.",
            ))
            pane.display = False
            pane.update("")
        elif topic is None:
            if m and m.empty:
                records.show_message(Text.assemble(
                    ("No memories yet\n\n", "bold"),
                    "This workspace has no topic records. OpenProgram writes them after conversations "
                    "reach the trigger, or when a session goes idle. The Sessions view (5) shows what is pending.",
                ))
            else:
                records.clear_options()
            pane.update("")
        elif self._records_unchanged(topic, m):
            pass  # reload-fast: a reload that left this topic alone keeps its rendered records
        elif topic.problems and not only_source_problems(topic):
            records.show_message(problem_view(topic))
            pane.update("")
        elif topic.problems:
            # The text parses but some citations do not resolve (e.g. a truncated archive):
            # show the problems first, then the records with their chips marked unavailable.
            summary = Text(
                f"{self.glyphs.bad} {len(topic.problems)} citation problem(s); OpenProgram refuses writes to this topic until fixed:\n",
                "bold red",
            )
            for p in topic.problems[:4]:
                summary.append(f"{p.path}:{p.line}:{p.column} ", "bold")
                summary.append(one_line(p.message, 70) + "\n")
            if len(topic.problems) > 4:
                summary.append(f"… and {len(topic.problems) - 4} more\n", "dim")
            records.show_records(self.filtered_records(topic), self.glyphs, m, lead=[summary], badge=self.evidence_badge)
            self.show_source(records, pane)
        else:
            records.show_records(self.filtered_records(topic), self.glyphs, m, badge=self.evidence_badge)
            self.show_source(records, pane)
        self.render_titles()

    _shape: tuple | None = None

    def _tree_shape(self, m: Any) -> tuple | None:
        """Everything a label of the tree is drawn from (``None``: nothing to keep)."""
        if not m or not m.memory_exists:
            return None
        filtered = bool(self.filter_text)
        return (
            self.glyphs, self.shell.ascii_mode, self.filter_text,
            tuple(
                (t.path, bool(t.problems), t.record_count, len(self.filtered_records(t)) if filtered else -1,
                 self.topic_matches(t))
                for t in m.topics
            ),
        )

    # re-rendering the shown topic's records (Markdown per record) was
    # most of the redraw after a reload that changed another file. Everything the detail pane
    # is drawn from is in the key: the topic's view model (the same object while its file's
    # parse is reused), the filter, the glyphs, the insight figures (badges) and the archives
    # the citation chips read (their frames).
    _records_key: tuple | None = None

    def _records_unchanged(self, topic: TopicVM, m: Any) -> bool:
        state = getattr(m, "state", None)
        sources = getattr(state, "sources", None)
        files = getattr(sources, "files", None)
        key = (
            topic, self.filter_text, self.glyphs, self.shell.ascii_mode, getattr(self.shell, "insights", None),
            None if files is None else tuple((rel, entry.key) for rel, entry in files.items()),
        )
        old, self._records_key = self._records_key, key
        return old is not None and len(old) == len(key) and all(a is b or a == b for a, b in zip(old, key))

    def detail_title(self) -> Text:
        g = self.glyphs
        topic = self.current_topic()
        if topic is None:
            return Text("Topics", "bold")
        n = topic.record_count
        shown = self.shown_count(topic)
        whens = sorted({r.when for r in topic.records if r.when})
        width = self.title_width()
        if cell_len(topic.title) + 2 + cell_len(topic.path) <= width:
            out = Text.assemble((topic.title, "bold"), "  ", (topic.path, "dim"))
        else:  # a line of its own, cut at its folders: a wrap broke it mid-word ("kyoto-trip-in-spr / ing.md")
            out = Text.assemble((topic.title, "bold"), "\n", (fit_path(topic.path, width, g.ellipsis), "dim"))
        line = f"{shown}/{n} records" if self.filter_text else f"{n} record" + ("s" if n != 1 else "")
        if whens:
            line += f" {g.dot} {whens[0]}" + (f" {g.arrow} {whens[-1]}" if whens[-1] != whens[0] else "")
        out.append(f"\n{line}")
        tokens = f" {g.dot} {sum(r.tokens for r in topic.records)} tok in records"
        # the token total is the line's extra: on a narrow screen it gives way rather than
        # wrap into a row the record list needs
        if topic.outline_records is None and cell_len(line + tokens) <= width:
            out.append(tokens, "dim")
        if topic.problems:
            out.append(f" {g.dot} {g.bad} does not parse", "bold red")
        return out

    def title_width(self) -> int:
        """The columns the detail title has for text (before the first layout: the screen's)."""
        width = self.query_one("#detail-title", Static).content_size.width
        if width <= 0:
            width = (self.size.width or self.app.size.width or 120) - 2
        return width

    def render_titles(self) -> None:
        super().render_titles()
        topic = self.current_topic()
        cut = topic is not None and topic.path not in str(self.query_one("#detail-title", Static).render())
        self.query_one("#detail-title", Static).tooltip = topic.path if cut else None

    def on_resize(self, event: Resize) -> None:
        # the path is fitted to the title's width: refit once the new width is laid out
        self.call_after_refresh(self.render_titles)

    def list_title(self) -> Text:
        m = self.model
        if not m:
            return Text("")
        g = self.glyphs
        n = sum(t.record_count for t in m.topics)
        text = f"{plural(len(m.topics), 'topic')} {g.dot} {plural(n, 'record')}"
        if self.filter_text:
            text += f" {g.dot} filter: {self.filter_text}"
        if m.core is not None and m.core.records:
            # The tree and the count above leave topics/core.md out (the CLI's `topics` lists
            # it): say plainly that its records exist and which view shows them.
            n_core = len(m.core.records)
            text += f"\n+ {n_core} core record{'' if n_core == 1 else 's'}, in view 4 Core"
        return Text(text, "dim")

    # ------------------------------------------------------------------ events
    @on(Tree.NodeHighlighted, "#topics-list")
    def _topic_highlighted(self) -> None:
        self.show_topic()

    @on(Tree.NodeSelected, "#topics-list")
    def _topic_selected(self, event: Tree.NodeSelected) -> None:
        if isinstance(event.node.data, TopicNode):
            self.open_detail(self.records)

    @on(OptionList.OptionHighlighted, "#topic-records")
    def _record_highlighted(self) -> None:
        self.show_source(self.records, self.query_one("#source-pane", SourcePane))

    # ------------------------------------------------------------------ reveal
    def reveal_topic(self, path: str) -> None:
        """Put the cursor on the topic at ``path`` (its problems show in the detail)."""
        if self.filter_text:
            self.clear_filter()
        self.refresh_view()
        node = next((n for n in walk(self.tree.root) if n.data == TopicNode(path)), None)
        if node is not None:
            self.tree.put_cursor(node)
            self.show_topic()
        self.open_detail(self.records)

    def reveal(self, record: RecordVM) -> None:
        """Put the cursor on ``record``'s topic and highlight it."""
        if self.filter_text:
            self.clear_filter()
        self.refresh_view()
        node = next((n for n in walk(self.tree.root) if n.data == TopicNode(record.topic_path)), None)
        if node is not None:
            self.tree.put_cursor(node)
            self.show_topic()
        self.records.select_record(record)
        self.open_detail(self.records)

    # actions-ui: ``e`` edits the topic under the cursor
    def action_edit_topic(self) -> None:
        from .editor import open_editor

        topic = self.current_topic()
        if topic is None:
            self.notify("Select a topic to edit.", severity="warning")
            return
        if self.model is not None and self.model.outline:  # not read yet
            self.notify("Still reading the workspace; try again in a moment.", severity="warning")
            return
        open_editor(self.app, topic.path)
