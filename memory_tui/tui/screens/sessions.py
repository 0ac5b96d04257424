"""Sessions: every session found under ``sessions/`` and, for the chosen one, what memory
did with it.

The list shows per session what decides whether memory writes it (pending turns and tokens
against the threshold, when the idle watcher last handled it, warnings). The detail shows
the session's branch DAG (``SessionGraph``) with its legend, the selected node
(``NodeDetail``) and the verdict of the branch that explains it (``BranchVerdict``); ``w``
writes that branch after a confirmation showing the dry run.

Everything comes from the app's model (``WorkspaceModel.sessions_view`` →
``tui.model.sessions``); this screen never calls the engine.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical, VerticalScroll
from textual.events import ScreenSuspend
from textual.message import Message
from textual.widget import Widget
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option, OptionDoesNotExist

from .. import commands as registry
from ..jobs import JobRequest
from ..model.sessions import SessionRowVM, SessionsModel
from ..widgets.branch_verdict import BranchVerdict
from ..widgets.node_detail import NodeDetail
from ..widgets.paged import PagedOptionList
from ..widgets.records import highlighted_key, restore_highlight
from ..widgets.session_graph import SessionGraph, legend_text
from .base import ViewScreen, flat, one_line, plural
from .sessions_work import SessionsWork

SORTS = ("pending", "drift", "recency", "title")


class SessionOption(Option):
    """One session row; ``session`` is what it shows."""

    def __init__(self, prompt: Text, session: SessionRowVM) -> None:
        super().__init__(prompt, id=f"session:{session.session_id}")
        self.session = session


class ScreenGraph(SessionGraph):
    """The graph inside the app: its ``a`` is the app's ASCII toggle, so every pane switches together."""

    def action_toggle_ascii(self) -> None:
        self.app.action_toggle_ascii()  # type: ignore[attr-defined]


def sort_rows(rows: tuple[SessionRowVM, ...], key: str) -> list[SessionRowVM]:
    if key == "recency":
        return sorted(rows, key=lambda r: (-(r.updated_at or 0.0), r.session_id))
    if key == "title":
        return sorted(rows, key=lambda r: ((r.title or "\uffff").lower(), r.session_id))
    if key == "drift":  # where the marks and the records disagree most first
        return sorted(rows, key=lambda r: (-(r.drift or 0), -(r.dropped + r.unmarked_kept), -r.pending_turns, r.session_id))
    return sorted(rows, key=lambda r: (-r.pending_turns, -r.pending_tokens, r.session_id))


def _wrap_words(text: str, width: int) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` (a word longer than that
    stays whole and the list cuts it)."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def row_text(r: SessionRowVM, dot: str, warn: str, width: int = 37) -> Text:
    """One session row fitted to ``width`` columns: the title on its own line (cut where
    the list ends), then the facts packed a few to a line, a fact never split across two
    lines unless it is wider than the row on its own."""
    facts = [
        (r.session_id, "dim"),
        (f"{r.pending_turns} pending {dot} {r.pending_tokens}/{r.threshold} tok", ""),
        (f"updated {r.updated or '?'}", "dim"),
        (f"head {r.head or 'none'}", "dim"),
        (plural(r.live_tips, "live tip"), "dim"),
        (f"idle watcher {r.watcher}", "dim"),
    ]
    width = max(width, 12)
    sep = f" {dot} "
    text = Text.assemble((r.title and flat(r.title) or "(untitled)", "bold"))
    used = width  # the title fills its line: the first fact starts a new one
    for fact, style in facts:
        if used + len(sep) + len(fact) <= width:
            text.append(sep, "dim")
            text.append(fact, style)
            used += len(sep) + len(fact)
            continue
        for piece in _wrap_words(fact, width) if len(fact) > width else [fact]:
            text.append("\n")
            text.append(piece, style)
            used = len(piece)
    for w in r.warnings:
        text.append(f"\n{warn} {w}", "yellow")
    return text


class SessionList(PagedOptionList[SessionRowVM]):
    """The session rows, laid out for the list's own width (re-fitted when it changes), a page
    at a time (hundreds of sessions: :class:`~..widgets.paged.PagedOptionList`)."""

    DEFAULT_CSS = "SessionList { scrollbar-gutter: stable; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._rows: list[SessionRowVM] = []
        self._glyphs: tuple[str, str] = ("-", "!")
        self._fitted = 0

    def row_width(self) -> int:
        # Before the first layout the region is empty: the wide sidebar's width stands in.
        return self.scrollable_content_region.width or 37

    def show_rows(self, rows: list[SessionRowVM], dot: str, warn: str) -> None:
        self._rows, self._glyphs = rows, (dot, warn)
        self._fitted = width = self.row_width()
        self.show_items(rows, lambda _i, r, _prev: [SessionOption(row_text(r, dot, warn, width), r)])

    def draw_session(self, session_id: str) -> None:
        """Draw the list down to ``session_id``'s row (a jump to it, a kept highlight)."""
        self.draw_until(lambda r: r.session_id == session_id)

    def on_resize(self) -> None:
        if self._rows and self.row_width() != self._fitted:
            keep = highlighted_key(self)
            with self.prevent(OptionList.OptionHighlighted):
                self.show_rows(self._rows, *self._glyphs)
                self.highlighted = None
                if keep:
                    self.draw_session(keep.split(":", 1)[1])
                restore_highlight(self, keep)


# the session header's rows, as the CSS caps them (here and, on a short screen, in app.tcss)
HEADER_ROWS, SHORT_HEADER_ROWS = 4, 3


def fact_lines(s: SessionRowVM, width: int, rows: int, dot: str) -> list[str]:
    """The session's facts (id, pending turns, tokens, tips) packed into at most ``rows``
    lines of ``width`` cells, a fact never split: the long words, else the short ones, else
    the short ones with the id cut (it is also the list's row)."""
    tail_long = [f"{s.pending_turns} pending turns", f"{s.pending_tokens}/{s.threshold} tokens", plural(s.tips, "tip")]
    tail_short = [f"{s.pending_turns} pending", f"{s.pending_tokens}/{s.threshold} tok", plural(s.tips, "tip")]
    sep = f" {dot} "
    for parts in ([s.session_id, *tail_long], [s.session_id, *tail_short]):
        lines = _pack(parts, width, sep)
        if len(lines) <= rows and all(cell_len(line) <= width for line in lines):
            return lines
    lines = _pack([one_line(s.session_id, width), *tail_short], width, sep)
    if len(lines) > rows:
        lines = lines[:rows]
        lines[-1] = one_line(lines[-1] + " …", width)  # more facts than rows: say so
    return [one_line(line, width) for line in lines]


def _pack(parts: list[str], width: int, sep: str) -> list[str]:
    lines: list[str] = []
    line = ""
    for part in parts:
        joined = f"{line}{sep}{part}" if line else part
        if line and cell_len(joined) > width:
            lines.append(line)
            line = part
        else:
            line = joined
    if line:
        lines.append(line)
    return lines


class SessionHeader(Static):
    """The session's title and facts, fitted to the header's width by the screen: a new size
    (the first layout gives the real width, then every resize) asks for a refit."""

    class Resized(Message):
        pass

    def on_resize(self) -> None:
        self.post_message(self.Resized())


class SessionsScreen(SessionsWork, ViewScreen):
    VIEW = "sessions"
    NEEDS_SESSIONS = True
    BINDINGS: ClassVar[list[BindingType]] = registry.screen_bindings("sessions")
    # writing a branch is what this view is for; then the graph's own keys
    FOOTER_RANKS: ClassVar[dict[str, int]] = {
        "write_branch": 75, "write": 75, "toggle_group": 72, "toggle_more": 72, "cycle_sort": 70,
        "toggle_order": 64, "toggle_ascii": 60, "toggle_node_detail": 74,
    }

    def __init__(self) -> None:
        super().__init__()
        self.sort_key = SORTS[0]
        self.focus_node: tuple[str, str | None] | None = None  # (session, node) a citation named
        self.shown: tuple[str, int] | None = None  # (session, id of the SessionsModel) the graph draws
        self._init_work()
        self._header_fit: tuple[SessionRowVM, int, int] | None = None  # the header's session, width, rows

    # ------------------------------------------------------------------ composition
    def compose_list(self) -> ComposeResult:
        yield SessionList(id="sessions-list", classes="view-list")

    def compose_detail(self) -> ComposeResult:
        with Vertical(id="sessions-detail", classes="view-detail"):
            yield SessionHeader(id="sessions-text")
            with Vertical(id="sessions-panes"):
                yield ScreenGraph(id="sessions-graph")
                with VerticalScroll(id="sessions-side"):
                    yield BranchVerdict(id="sessions-verdict")
                    yield NodeDetail(id="sessions-node")
                    yield Static(id="sessions-legend")
            yield Static(id="sessions-hint")

    DEFAULT_CSS = """
    /* The title is cut to one line and the header capped (3 rows on a short screen, in
       app.tcss; HEADER_ROWS): a long title that wrapped left the graph no row at all. */
    #sessions-text { height: auto; max-height: 4; padding: 0 1; }
    #sessions-hint { display: none; height: 1; padding: 0 1; }
    #sessions-panes { height: 1fr; }
    /* The graph keeps 6 rows against the side panels, but never more than the room under
       the session's header: rows past it would be drawn under the footer, the cursor with
       them (max-height is applied after min-height; 100% is what the header leaves). */
    #sessions-graph { height: 2fr; min-height: 6; max-height: 100%; }
    #sessions-side { height: 3fr; border-top: solid $panel; max-width: 112; padding: 0 1; }
    App.-ascii #sessions-side { border-top: ascii $panel; }
    """

    def detail_focus(self) -> Widget:
        return self.query_one(ScreenGraph)

    @on(ScreenSuspend)
    def _left(self) -> None:
        """Another view took the screen (not a dialog over this one): forget every session's
        nodes and explanation, which only this view reads; coming back reads them again."""
        stack = self.app.screen_stack
        if self in stack and stack[-1] is not self:
            return  # covered, not left
        self.forget_sessions()

    def forget_sessions(self) -> None:
        m = self.model
        if m is not None:
            m.drop_sessions_view()
        self._verdict_sm = None
        self.verdict = None
        self._plans.clear()
        self._explaining = None
        self._building = None
        graph = self.query_one(ScreenGraph)
        if graph.session_id is not None:
            graph.show_pending(graph.session_id, "")  # the graph let go of the layout's model
        self.rendered = None  # drawn afresh when shown again

    # ------------------------------------------------------------------ data
    @property
    def sessions(self) -> SessionsModel | None:
        m = self.model
        if m is None:
            return None
        built = m.sessions_view_built()
        if built is not None or self._analysing(m):
            return built
        return m.sessions_view(self.shell.now().timestamp(), getattr(self.app, "counter", None))

    def blocking_notice(self) -> Text | None:
        notice = super().blocking_notice()
        m = self.model
        if notice is None and m is not None and m.sessions_loaded and self._analysing(m):
            snap = m.session_snapshot
            n = len(snap.sessions) if snap is not None else 0
            return Text.assemble(
                (f"{self.glyphs.pending} Analysing {plural(n, 'session')}…\n\n", "bold"),
                "A big session's branches are being classified; the other views are ready.",
            )
        return notice

    def matches(self, r: SessionRowVM) -> bool:
        needle = self.filter_text.lower()
        return not needle or needle in r.title.lower() or needle in r.session_id.lower() or any(
            needle in w.lower() for w in r.warnings
        )

    # ------------------------------------------------------------------ drawing
    def render_view(self) -> None:
        sm = self.sessions
        lst = self.query_one("#sessions-list", SessionList)
        keep = highlighted_key(lst)
        g = self.glyphs
        rows = sort_rows(sm.rows(), self.sort_key) if sm else []
        lst.show_rows([r for r in rows if self.matches(r)], g.dot, g.bad)
        lst.highlighted = None
        if keep:
            lst.draw_session(keep.split(":", 1)[1])
        restore_highlight(lst, keep)
        if lst.highlighted is None and lst.option_count:
            lst.highlighted = 0
        ascii = self.shell.ascii_mode
        for w in (self.query_one(ScreenGraph), self.query_one(NodeDetail), self.query_one(BranchVerdict)):
            w.ascii_mode = ascii
        self.query_one("#sessions-legend", Static).update(legend_text(ascii))
        self.show_session()

    def _show_header(self, s: SessionRowVM) -> None:
        """The session's title on one line, its facts in the rows the header has left: a
        fact never split over two rows, shorter words and then a cut id when they do not
        fit (the capped header dropped the last row: the tips on a short screen)."""
        width, rows = self._header_room()
        self._header_fit = (s, width, rows)
        text = Text()
        text.append(one_line(s.title or "(untitled)", width), "bold")
        text.append("\n" + "\n".join(fact_lines(s, width, rows, self.glyphs.dot)), "dim")
        self.query_one("#sessions-text", Static).update(text)

    def _header_room(self) -> tuple[int, int]:
        """The header's width and the rows it leaves under the title."""
        width = max(self.query_one("#sessions-text", Static).content_region.width or 80, 4)
        return width, (SHORT_HEADER_ROWS if self.has_class("-short") else HEADER_ROWS) - 1

    @on(SessionHeader.Resized)
    def _refit_header(self) -> None:
        fit = self._header_fit
        if fit is not None and self.selected_session() is fit[0] and self._header_room() != fit[1:]:
            self._show_header(fit[0])

    def on_resize(self) -> None:
        # a short screen leaves the header fewer rows, whatever its width (ViewScreen's own
        # handler, which sets -short, runs too: Textual calls each class's)
        self.call_after_refresh(self._refit_header)

    def selected_session(self) -> SessionRowVM | None:
        opt = self.query_one("#sessions-list", OptionList).highlighted_option
        return opt.session if isinstance(opt, SessionOption) else None

    def show_session(self) -> None:
        sm = self.sessions
        s = self.selected_session()
        graph = self.query_one(ScreenGraph)
        text = Text()
        if s is None or sm is None:
            text.append("No sessions found under sessions/." if not self.filter_text else "No session matches the filter.", "dim")
            self.query_one("#sessions-text", Static).update(text)
            self.shown = None
            # the container, not its children: the short layout's CSS decides which child shows
            self.query_one("#sessions-panes").display = False
            self.render_titles()
            return
        self.query_one("#sessions-panes").display = True
        self._show_header(s)
        select = None
        if self.focus_node and self.focus_node[0] == s.session_id:
            select = self.focus_node[1]
            self.focus_node = None
        key = (s.session_id, id(sm))
        if self.shown != key or select is not None:
            if sm.layout_ready(s.session_id) is not None:
                # The same session id again keeps the graph's selected node (a reload).
                graph.show(s.session_id, partial(sm.layout, s.session_id), select=select)
            else:
                node = graph.selected_node if graph.session_id == s.session_id else None
                keep = select or (node.id if node is not None else None)
                graph.show_pending(s.session_id, f"laying out {plural(len(sm.session_data(s.session_id).nodes), 'node')}…")
                self._compute_layout(sm, s.session_id, keep)
            self.shown = key
        self.render_hint()
        self.render_titles()

    def detail_title(self) -> Text:
        sm = self.sessions
        n = len(sm.session_ids) if sm else 0
        return Text.assemble(("Sessions", "bold"), (f"\n{plural(n, 'session')} {self.glyphs.dot} sorted by {self.sort_key}", "dim"))

    def list_title(self) -> Text:
        n = len(self.query_one("#sessions-list", SessionList).items)  # drawn or not yet
        return Text(f"{plural(n, 'session')} {self.glyphs.dot} by {self.sort_key} (s)", "dim")

    # ------------------------------------------------------------------ graph → panels
    @on(SessionGraph.NodeSelected, "#sessions-graph")
    def _node_selected(self, message: SessionGraph.NodeSelected) -> None:
        self._show_node(message.session_id, message.node.id)

    @on(NodeDetail.RecordJump)
    async def _record_jump(self, message: NodeDetail.RecordJump) -> None:
        m = self.model
        record = m.records.get(message.citation.memory_id) if m else None
        if record is None:
            self.notify(f"Record {message.citation.memory_id} is not in the topics.", severity="warning")
            return
        await self.shell.open_record(record)

    # ------------------------------------------------------------------ the `g` arrival
    def focus_session(self, session_id: str, node_id: str | None) -> bool:
        """Highlight ``session_id`` with its graph scrolled to ``node_id``; False if the session is not there."""
        if self.filter_text:
            self.clear_filter()
        self.refresh_view()
        m = self.model
        if m is not None and m.sessions_loaded and self._analysing(m):
            self._pending_focus = (session_id, node_id)  # shown once the analysis is in
            return True
        lst = self.query_one("#sessions-list", SessionList)
        lst.draw_session(session_id)
        try:
            index = lst.get_option_index(f"session:{session_id}")
        except OptionDoesNotExist:
            return False
        self.focus_node = (session_id, node_id)
        with lst.prevent(OptionList.OptionHighlighted):
            lst.highlighted = index
        self.show_session()
        self.open_detail(self.query_one(ScreenGraph))
        return True

    @on(OptionList.OptionHighlighted, "#sessions-list")
    def _session_highlighted(self) -> None:
        self.show_session()

    @on(OptionList.OptionSelected, "#sessions-list")
    def _session_selected(self) -> None:
        self.open_detail(self.query_one(ScreenGraph))

    # ------------------------------------------------------------------ keys
    def render_hint(self) -> None:
        # the owner's key for the command (a keymap can move it), as the help and palette show it
        cmd = next(c for c in registry.COMMANDS if c.id == "sessions.node")
        key = registry.key_label(registry.effective_keys(cmd, getattr(self.app, "keymap", {})))
        hint = f"{key}: back to the graph" if self.has_class("-node") else f"{key}: node detail"
        self.query_one("#sessions-hint", Static).update(Text(hint, "dim"))

    def action_toggle_node_detail(self) -> None:
        """On a short screen the node detail takes the graph's place (and gives it back); on
        a taller one both are shown already and the key only moves the focus to the graph."""
        node = not self.has_class("-node") and self.has_class("-short")
        self.set_class(node, "-node")
        self.render_hint()
        if self.selected_session() is None:
            return
        side = self.query_one("#sessions-side", VerticalScroll)
        self.open_detail(side if node else self.query_one(ScreenGraph))
        if node:
            # the verdict comes first in the side panel; the key said "node detail"
            self.call_after_refresh(side.scroll_to_widget, self.query_one(NodeDetail), top=True, animate=False)

    def action_back(self) -> None:
        if self.has_class("-node"):
            self.set_class(False, "-node")
            self.render_hint()
            self.query_one(ScreenGraph).focus()
            return
        super().action_back()

    def apply_layout(self, width: int, height: int | None = None) -> None:
        super().apply_layout(width, height)
        if self.is_mounted:
            self.refresh_bindings()  # `d` is offered on a short screen only

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back" and self.has_class("-node"):
            return True
        if action == "toggle_node_detail":
            # a taller screen shows the node detail beside the graph: nothing to swap
            return self.has_class("-short") and self.selected_session() is not None
        return super().check_action(action, parameters)

    def action_cross_link(self) -> None:
        """`g`: from a node standing for another session (or a spawn root / spawning node with a
        link) to that session's node, the graph there scrolled to it."""
        sm = self.sessions
        row = self.selected_session()
        graph = self.query_one("#sessions-graph", SessionGraph)
        node = graph.selected_node
        if sm is None or row is None or node is None:
            return
        target = sm.cross_target(row.session_id, node.id)
        if target is None:
            self.notify("No other session is linked to this node (only a cross-session spawn is).", severity="information")
            return
        if not self.focus_session(*target):
            self.notify(f"Session {target[0]} is not here.", severity="warning")

    def action_cycle_sort(self) -> None:
        self.sort_key = SORTS[(SORTS.index(self.sort_key) + 1) % len(SORTS)]
        self.refresh_view(force=True)

    def action_write_branch(self) -> None:
        vm = self.verdict
        sm = self.sessions
        if vm is None and sm is not None and not sm.explained:
            self.notify("The session's branches are still being analysed.", severity="information")
            return
        if vm is None:
            self.notify("Select a node of a branch first.", severity="information")
            return
        self.post_message(BranchVerdict.WriteRequested(self.query_one(BranchVerdict), vm))

    @on(BranchVerdict.WriteRequested)
    def _write_requested(self, message: BranchVerdict.WriteRequested) -> None:
        """`w`: write this branch as `write SESSION --branch TIP --force` does, through the app's
        one job flow (preview, confirm, run with progress, result, reload)."""
        message.stop()
        vm = message.verdict
        self.app.start_job(JobRequest("write", session_id=vm.session_id, branch=vm.tip, force=True))  # type: ignore[attr-defined]
