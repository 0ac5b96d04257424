"""The session DAG widget: draws ``sessions.graph`` rows through Textual's line API.

Only the visible window is built: ``render_line(y)`` turns one layout row into a ``Strip``,
kept in a small LRU cache keyed by everything that changes a line (row, width, cursor,
lineage, glyph set and the layout generation), as toolong's ``LogLines`` does. The layout
itself is computed by the engine (once per session fingerprint and options).

Public API::

    graph = SessionGraph(id="session-graph")
    graph.show(session_id, layout_for)   # layout_for(LayoutOptions) -> Layout, e.g. partial(model.layout, sid)
    graph.show_pending(session_id, text) # the layout is being computed elsewhere: ``text`` until show()
    graph.select_node(node_id)           # cursor + scroll to it (expands its folded run); the ``g`` jump
    graph.ascii_mode = True              # or press ``a``
    graph.reverse = True                 # or press ``o`` (newest first)
    graph.toggle_group(group_id)         # expand/collapse a folded run (``enter`` on it)
    graph.cursor_row / graph.selected_row / graph.selected_node / graph.lineage_ids

    SessionGraph.NodeSelected(graph, session_id, node: LayoutNode, row: Row)  # cursor landed on a node
    SessionGraph.GroupToggled(graph, session_id, group_id, expanded: bool)
    legend_text(ascii) -> rich Text              # the legend with the same glyphs and styles
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from memory_tui.sessions import graph as G

LayoutFn = Callable[[G.LayoutOptions], G.Layout]

STATE_STYLES = {
    G.WRITTEN_S: Style(color="green"),
    G.PENDING_S: Style(color="yellow"),
    G.HELD_S: Style(color="red"),
    G.INELIGIBLE_S: Style(color="bright_black"),
    G.REWOUND_S: Style(color="magenta"),
    G.FOREIGN_S: Style(color="cyan"),
    G.STRANDED_S: Style(color="red", bold=True),
    G.SUMMARY_S: Style(color="blue"),
    G.ROOT_S: Style(color="white"),
    G.COLLAPSED_S: Style(color="white", bold=True),
}
LANE_STYLE = Style(color="bright_black")
LINEAGE_LANE_STYLE = Style(color="white", bold=True)
MARKER_STYLE = Style(color="bright_white", bold=True)
LABEL_STYLE = Style()
DIM_LABEL = Style(color="bright_black")
CURSOR_STYLE = Style(reverse=True)
# Padding gets a real (empty) style, never ``None``: Textual's monochrome filter (NO_COLOR)
# reads ``style.color`` of every segment a line hands it and crashes on a bare one.
PAD_STYLE = Style()
# The gutter says "cursor" / "lineage" in glyphs too: colour is never the only cue.
GUTTER = {False: {"cursor": "▶", "lineage": "┃", "none": " "}, True: {"cursor": ">", "lineage": "|", "none": " "}}
CACHE_SIZE = 1024


def legend_text(ascii: bool = False) -> Text:
    """The legend, glyphs styled as the graph draws them (put it in a ``Static``)."""
    g = G.glyphs(ascii)
    out = Text()
    for key, words in G.LEGEND:
        out.append(g.states[key], STATE_STYLES.get(key, LABEL_STYLE))
        out.append(f" {words}\n")
    for key, words in G.MARKER_LEGEND:
        out.append(g.markers[key], MARKER_STYLE)
        out.append(f" {words}\n")
    gut = GUTTER[ascii]
    out.append(f"{gut['cursor']} cursor   {gut['lineage']} lineage of the selected node", LABEL_STYLE)
    return out


class SessionGraph(ScrollView, can_focus=True):
    """A session's branch DAG, one layout row per line."""

    DEFAULT_CSS = """
    /* Rows are cut where the widget ends (labels too), so there is nothing to scroll to
       sideways: a horizontal scrollbar would only take a row from the graph. */
    SessionGraph { height: 1fr; overflow-x: hidden; }
    """

    BINDINGS = [
        Binding("up,k", "cursor_up", "Up", show=False, id="graph.up"),
        Binding("down,j", "cursor_down", "Down", show=False, id="graph.down"),
        Binding("pageup", "page_up", "Page up", show=False, id="graph.page_up"),
        Binding("pagedown", "page_down", "Page down", show=False, id="graph.page_down"),
        Binding("home", "cursor_first", "First", show=False, id="graph.first"),
        Binding("end", "cursor_last", "Last", show=False, id="graph.last"),
        Binding("enter,space", "toggle_group", "Expand/collapse", id="graph.toggle"),
        Binding("a", "toggle_ascii", "ASCII", id="graph.ascii"),
        Binding("o", "toggle_order", "Newest first", id="graph.order"),
    ]

    ascii_mode: reactive[bool] = reactive(False)
    reverse: reactive[bool] = reactive(False)

    class NodeSelected(Message):
        """The cursor landed on a node row. Carries the node object, not an id to decode."""

        def __init__(self, graph: "SessionGraph", session_id: str, node: G.LayoutNode, row: G.Row) -> None:
            super().__init__()
            self.graph = graph
            self.session_id = session_id
            self.node = node
            self.row = row

        @property
        def control(self) -> "SessionGraph":
            return self.graph

    class GroupToggled(Message):
        def __init__(self, graph: "SessionGraph", session_id: str, group_id: str, expanded: bool) -> None:
            super().__init__()
            self.graph = graph
            self.session_id = session_id
            self.group_id = group_id
            self.expanded = expanded

        @property
        def control(self) -> "SessionGraph":
            return self.graph

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.session_id: str | None = None
        self._layout_for: LayoutFn | None = None
        self._expanded: frozenset[str] = frozenset()
        self.layout_data: G.Layout | None = None
        self.cursor_row = 0
        self.lineage_ids: frozenset[str] = frozenset()
        self._generation = 0
        self._strips: OrderedDict[tuple, Strip] = OrderedDict()
        self.rendered_rows = 0  # rows built (cache misses): what a benchmark counts
        self.painted_generation = -1  # the layout generation whose rows were last drawn
        self._center_pending = False
        self.pending: str | None = None  # what the graph says while its layout is computed

    # ------------------------------------------------------------------ data

    def show(self, session_id: str, layout_for: LayoutFn, *, select: str | None = None) -> None:
        """Show a session. ``layout_for`` returns the engine's layout for the given options."""
        same = session_id == self.session_id
        keep = self.selected_node.id if same and self.selected_node is not None else None
        self.session_id = session_id
        self._layout_for = layout_for
        self.pending = None
        if not same:
            self._expanded = frozenset()
            self.cursor_row = 0
        self._relayout(select or keep)

    def show_pending(self, session_id: str, text: str) -> None:
        """Show a session whose layout is still being computed: ``text`` on the first line, no
        rows, no cursor (the keys do nothing) until :meth:`show` brings the layout."""
        self.session_id = session_id
        self._layout_for = None
        self._expanded = frozenset()
        self.layout_data = None
        self.cursor_row = 0
        self.lineage_ids = frozenset()
        self.pending = text
        self._generation += 1
        self._strips.clear()
        self.virtual_size = Size(self.size.width or 80, 1)
        self.scroll_to(y=0, animate=False, force=True)
        self.refresh()

    def _options(self) -> G.LayoutOptions:
        return G.LayoutOptions(reverse=self.reverse, expanded=self._expanded)

    def _relayout(self, select: str | None = None) -> None:
        if self._layout_for is None:
            return
        self.layout_data = self._layout_for(self._options())
        self._generation += 1
        self._strips.clear()
        rows = self.layout_data.rows
        self.virtual_size = Size(self.size.width or 80, len(rows))
        if select is not None and select in self.layout_data.row_of:
            self.cursor_row = self.layout_data.row_of[select]
        self.cursor_row = self._nearest_selectable(min(self.cursor_row, max(0, len(rows) - 1)), 1)
        self._update_lineage()
        self._scroll_to_cursor(center=select is not None)
        self.refresh()
        self._post_selected()

    @property
    def painted(self) -> bool:
        """The current layout's rows have been drawn at least once."""
        return self.layout_data is not None and self.painted_generation == self._generation

    @property
    def selected_row(self) -> G.Row | None:
        lay = self.layout_data
        if lay is None or not lay.rows:
            return None
        return lay.rows[self.cursor_row]

    @property
    def selected_node(self) -> G.LayoutNode | None:
        row = self.selected_row
        return row.node if row is not None else None

    def select_node(self, node_id: str) -> bool:
        """Put the cursor on ``node_id`` (expanding the run that folds it) and scroll to it."""
        lay = self.layout_data
        if lay is None or node_id not in lay.row_of:
            return False
        row = lay.rows[lay.row_of[node_id]]
        if row.kind == "collapsed":
            self._expanded = self._expanded | {row.id}
        self._relayout(node_id)
        return True

    def toggle_group(self, group_id: str) -> None:
        lay = self.layout_data
        if lay is None or group_id not in lay.collapsible or self.session_id is None:
            return
        expanded = group_id not in self._expanded
        self._expanded = (self._expanded | {group_id}) if expanded else (self._expanded - {group_id})
        anchor = lay.collapsible[group_id][0]
        self._relayout(anchor)
        self.post_message(self.GroupToggled(self, self.session_id, group_id, expanded))

    def group_of(self, node_id: str) -> str | None:
        lay = self.layout_data
        if lay is None:
            return None
        return next((gid for gid, members in lay.collapsible.items() if node_id in members), None)

    # ------------------------------------------------------------------ cursor

    def _selectable(self, index: int) -> bool:
        lay = self.layout_data
        return lay is not None and 0 <= index < len(lay.rows) and lay.rows[index].kind != "gap"

    def _nearest_selectable(self, index: int, step: int) -> int:
        lay = self.layout_data
        if lay is None or not lay.rows:
            return 0
        i = index
        while 0 <= i < len(lay.rows) and not self._selectable(i):
            i += step
        if not 0 <= i < len(lay.rows):
            i = index
            while 0 <= i < len(lay.rows) and not self._selectable(i):
                i -= step
        return max(0, min(i, len(lay.rows) - 1))

    def _move(self, target: int, step: int) -> None:
        lay = self.layout_data
        if lay is None or not lay.rows:
            return
        target = max(0, min(target, len(lay.rows) - 1))
        target = self._nearest_selectable(target, step)
        if target == self.cursor_row:
            return
        self.cursor_row = target
        self._update_lineage()
        self._scroll_to_cursor()
        # The lineage can change any visible line, so the window is redrawn; only visible
        # rows are built, and lines whose key did not change come from the cache.
        self.refresh()
        self._post_selected()

    def _update_lineage(self) -> None:
        node = self.selected_node
        lay = self.layout_data
        if node is None or lay is None:
            row = self.selected_row
            self.lineage_ids = frozenset(row.members) if row is not None else frozenset()
            return
        self.lineage_ids = G.lineage(lay, node.id).ids

    def _post_selected(self) -> None:
        row = self.selected_row
        if row is None or row.node is None or self.session_id is None:
            return
        self.post_message(self.NodeSelected(self, self.session_id, row.node, row))

    def _scroll_to_cursor(self, center: bool = False) -> None:
        height = self.scrollable_content_region.height or self.size.height
        if height <= 0:
            # Hidden or not laid out yet (a `g` jump onto the narrow list pane): scroll once
            # the widget has a size.
            self._center_pending = self._center_pending or center
            return
        self._center_pending = False
        top = int(self.scroll_y)
        # force: right after a relayout the scrollbars are not updated yet, and a layout
        # that grew past the window would refuse to scroll until the next layout.
        if center:
            self.scroll_to(y=max(0, self.cursor_row - height // 2), animate=False, force=True)
        elif self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, force=True)
        elif self.cursor_row >= top + height:
            self.scroll_to(y=self.cursor_row - height + 1, animate=False, force=True)

    def action_cursor_up(self) -> None:
        self._move(self.cursor_row - 1, -1)

    def action_cursor_down(self) -> None:
        self._move(self.cursor_row + 1, 1)

    def action_page_up(self) -> None:
        self._move(self.cursor_row - max(1, self.size.height - 1), -1)

    def action_page_down(self) -> None:
        self._move(self.cursor_row + max(1, self.size.height - 1), 1)

    def action_cursor_first(self) -> None:
        self._move(0, 1)

    def action_cursor_last(self) -> None:
        if self.layout_data is not None:
            self._move(len(self.layout_data.rows) - 1, -1)

    def action_toggle_group(self) -> None:
        row = self.selected_row
        if row is None:
            return
        if row.kind == "collapsed":
            self.toggle_group(row.id)
        elif row.node is not None:
            gid = self.group_of(row.node.id)
            if gid is not None and gid in self._expanded:
                self.toggle_group(gid)

    def action_toggle_ascii(self) -> None:
        self.ascii_mode = not self.ascii_mode

    def action_toggle_order(self) -> None:
        self.reverse = not self.reverse

    def watch_ascii_mode(self, _old: bool, _new: bool) -> None:
        self._strips.clear()
        self.refresh()

    def watch_reverse(self, _old: bool, _new: bool) -> None:
        node = self.selected_node
        self._relayout(node.id if node is not None else None)

    def on_resize(self) -> None:
        if self.layout_data is not None:
            self.virtual_size = Size(self.size.width, len(self.layout_data.rows))
            # A smaller or newly shown window keeps the cursor in view.
            self._scroll_to_cursor(center=self._center_pending)
        self._strips.clear()

    def on_click(self, event) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        index = int(self.scroll_y) + offset.y
        if self._selectable(index):
            self._move(index, 1)

    # ------------------------------------------------------------------ drawing

    def max_lanes(self, width: int) -> int:
        return max(2, min(16, (width - 2) // 6))

    def render_line(self, y: int) -> Strip:
        lay = self.layout_data
        index = int(self.scroll_y) + y
        width = self.size.width
        if lay is None and self.pending and index == 0 and width > 0:
            return Strip([Segment(" " + self.pending, DIM_LABEL)]).crop(0, width).extend_cell_length(width, PAD_STYLE)
        if lay is None or not 0 <= index < len(lay.rows) or width <= 0:
            return Strip.blank(width, self.rich_style)
        row = lay.rows[index]
        cursor = index == self.cursor_row
        lineage = bool(self.lineage_ids.intersection(row.members))
        key = (self._generation, index, width, cursor, lineage, self.ascii_mode)
        strip = self._strips.get(key)
        if strip is not None:
            self._strips.move_to_end(key)
            return strip
        strip = self._build(row, width, cursor, lineage)
        self.rendered_rows += 1
        self.painted_generation = self._generation
        self._strips[key] = strip
        if len(self._strips) > CACHE_SIZE:
            self._strips.popitem(last=False)
        return strip

    def _build(self, row: G.Row, width: int, cursor: bool, lineage: bool) -> Strip:
        g = G.glyphs(self.ascii_mode)
        drawn = G.draw_row(row, g, self.max_lanes(width))
        gutter = GUTTER[self.ascii_mode]["cursor" if cursor else "lineage" if lineage else "none"]
        segments = [Segment(gutter + " ", MARKER_STYLE if cursor or lineage else LANE_STYLE)]
        lane_style = LINEAGE_LANE_STYLE if lineage else LANE_STYLE
        node_cell = 2 * row.lane if row.lane >= 0 else -1
        graph = drawn.graph.rstrip()
        limit = self.max_lanes(width)
        fold_cell = 2 * (limit - 1) if row.width > limit else -1
        if fold_cell >= 0 and row.lane >= limit - 1:
            node_cell = fold_cell + 1  # a folded node sits right after the fold marker
        for i, ch in enumerate(graph):
            if i == node_cell and row.kind != "gap":
                state = G.COLLAPSED_S if row.kind == "collapsed" else row.node.state
                style = STATE_STYLES.get(state, LABEL_STYLE) + Style(bold=lineage)
            elif i == fold_cell:
                style = MARKER_STYLE
            else:
                style = lane_style
            segments.append(Segment(ch, style))
        if drawn.markers:
            segments.append(Segment(" " + drawn.markers, MARKER_STYLE))
        if drawn.label:
            label_style = LABEL_STYLE if row.kind == "node" else DIM_LABEL
            segments.append(Segment(" " + drawn.label, label_style + Style(bold=lineage and row.kind == "node")))
        strip = Strip(segments).crop(0, width)
        if cursor:
            strip = strip.apply_style(CURSOR_STYLE)
        return strip.extend_cell_length(width, CURSOR_STYLE if cursor else PAD_STYLE)


__all__ = ["SessionGraph", "STATE_STYLES", "legend_text"]
