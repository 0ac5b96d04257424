"""The base of every view screen: header, banner, one-line tabs, filter, list | detail.

A view screen composes its list (``compose_list``) and its detail (``compose_detail``) and
draws them from the app's model in ``render_view``. The app owns all state (model, settings,
filter text, jobs); a screen only reads it and asks the app to move between views.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, ClassVar, Protocol

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize, ScreenResume, ScreenSuspend
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input, Static

from memory_tui.tui.widgets.footer import FILTER_RANK_OUT_OF_SIGHT, FittedFooter, RankedFooter

from .. import commands as registry
from ..model.data import RecordVM, WorkspaceModel
from ..render import Glyphs
from ..views import VIEW_TITLES
from ..widgets import HeaderBar, ViewTabs

if TYPE_CHECKING:  # pragma: no cover
    from datetime import datetime

NARROW = 100  # below this many columns, list and detail are shown one at a time
SHORT = 20  # below this many rows, a record list keeps the rows its source pane took (app.tcss)


class Shell(Protocol):
    """What a screen needs from the app (``MemoryApp`` provides it)."""

    model: WorkspaceModel | None
    filter_text: str
    ascii_mode: bool

    @property
    def glyphs(self) -> Glyphs: ...
    def now(self) -> "datetime": ...
    def problem_count(self) -> int: ...
    def job_label(self) -> str: ...
    def banner_lines(self) -> list[Text]: ...
    def set_filter(self, text: str) -> None: ...
    def register_view(self, screen: "ViewScreen") -> None: ...
    def take_arrival(self, view: str) -> "Callable[[ViewScreen], None] | None": ...
    async def open_record(self, record: RecordVM) -> None: ...
    async def open_session(self, session_id: str, node_id: str | None) -> None: ...


def one_line(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def flat(text: str) -> str:
    """``text`` on one line (a row cuts it where the widget ends)."""
    return " ".join(text.split())


def topic_name(path: str) -> str:
    return path.removeprefix("topics/").removesuffix(".md")


def fit_path(path: str, width: int, ellipsis: str = "…") -> str:
    """``path`` in at most ``width`` cells, never cut mid-word by a wrap: whole folders give
    way in the middle first (``topics/…/kyoto.md``), then the root, then the middle of the
    file name itself (its end, the ``.md``, stays)."""
    if cell_len(path) <= width:
        return path
    parts = path.split("/")
    for start in range(2, len(parts)):
        candidate = "/".join([parts[0], ellipsis, *parts[start:]])
        if cell_len(candidate) <= width:
            return candidate
    candidate = f"{ellipsis}/{parts[-1]}" if len(parts) > 1 else parts[-1]
    if cell_len(candidate) <= width:
        return candidate
    name = parts[-1]
    keep = max(width - len(ellipsis), 2)
    tail = keep // 2
    return name[: keep - tail] + ellipsis + name[len(name) - tail:]


class FilterInput(Input):
    """The filter box. It is in the focus chain only while it is being typed in (after
    ``/`` or a click on it): once the filter is applied it stays on screen to say what is
    filtered, and a Tab from the list would otherwise land in it, where ``d`` or ``m`` type
    letters instead of acting on the record."""

    can_focus = False

    def edit(self) -> None:
        self.can_focus = True
        self.focus()

    def on_blur(self) -> None:
        self.can_focus = False

    def on_click(self) -> None:
        if not self.has_focus:
            self.screen.action_filter()  # type: ignore[attr-defined]


class ViewScreen(RankedFooter, Screen[None]):
    VIEW: ClassVar[str] = ""
    NEEDS_SESSIONS: ClassVar[bool] = False  # shows "loading" until sessions are in
    SHOWS_OUTLINE: ClassVar[bool] = False  # can draw the first frame's topic outline
    BINDINGS: ClassVar[list[BindingType]] = registry.screen_bindings(None)

    def __init__(self) -> None:
        super().__init__()
        self.narrow = False
        self.pane = "list"  # narrow layout: "list" or "detail"
        self.rendered: WorkspaceModel | None = None  # the model last drawn
        self.rendered_filter = ""
        self.rendered_ascii = False
        self.ready = False
        # suspended under a dialog or a screen of its own (editor, history …) rather
        # than left for another view: coming back keeps the pane and the focus the owner had
        self.covered = False
        self.notice_pane = False  # the narrow detail pane was taken by a blocking notice

    # ------------------------------------------------------------------ composition
    @property
    def shell(self) -> Shell:
        return self.app  # type: ignore[return-value]

    @property
    def model(self) -> WorkspaceModel | None:
        return self.shell.model

    @property
    def glyphs(self) -> Glyphs:
        return self.shell.glyphs

    @property
    def filter_text(self) -> str:
        return self.shell.filter_text

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield Static(id="banner")
        yield ViewTabs(id="views")
        with Horizontal(id="body"):
            with Vertical(id="sidebar"):
                yield FilterInput(placeholder="filter topics and records…", id="filter")
                yield Static(id="list-title")
                yield from self.compose_list()
            with Vertical(id="content"):
                yield Static(id="detail-title")
                yield from self.compose_detail()
                with VerticalScroll(id="notice-detail", classes="view-detail"):
                    yield Static(id="notice-text")
        yield FittedFooter()

    def compose_list(self) -> ComposeResult:
        raise NotImplementedError

    def compose_detail(self) -> ComposeResult:
        raise NotImplementedError

    def list_widget(self) -> Widget:
        return self.query_one(f"#{self.VIEW}-list")

    def detail_focus(self) -> Widget:
        """What takes focus when the narrow layout shows the detail."""
        raise NotImplementedError

    def on_mount(self) -> None:
        if os.environ.get("TEXTUAL_ANIMATIONS") == "none":
            self.query_one("#filter", Input).cursor_blink = False  # deterministic snapshots
        self.shell.register_view(self)
        self.apply_layout(self.app.size.width)
        self.refresh_view(force=True)
        self.focus_list()
        self.ready = True

    def model_changed(self, model: WorkspaceModel, *, redraw: bool, now: bool) -> None:
        """The app has a new model. ``redraw``: this view's content changed; ``now``: this
        is the current screen (others redraw when they are shown again)."""
        if not redraw and self.rendered is not None:
            self.rendered = model  # same content: nothing to redraw
        elif redraw:
            self.rendered = None
        if now and self.drawable:
            self.refresh_view()

    def insights_changed(self, *, now: bool) -> None:
        """new evidence figures; the badges and header redraw."""
        self.rendered = None
        if now and self.drawable:
            self.refresh_view()

    @property
    def drawable(self) -> bool:
        """Composed and still in the app: figures from a worker can land while the app is
        quitting (its screens are being taken apart) and must not draw then; a screen not
        mounted yet draws when it mounts."""
        return self.ready and self.is_attached

    def evidence_badge(self, record: RecordVM) -> Text | None:
        """the compact evidence badge of ``record`` once figures exist."""
        insights = getattr(self.shell, "insights", None)
        row = insights.row(record.memory_id) if insights is not None else None
        if row is None:
            return None
        from ..widgets.evidence_badge import badge_text

        return badge_text(row, ascii=self.shell.ascii_mode, compact=True)

    # ------------------------------------------------------------------ drawing
    def refresh_view(self, force: bool = False) -> None:
        """Draw from the app's model if it (or the filter, or the glyphs) changed since the
        last draw, or always with ``force``."""
        current = (self.model, self.filter_text, self.shell.ascii_mode)
        if not force and current == (self.rendered, self.rendered_filter, self.rendered_ascii):
            self.render_chrome()
            return
        self.rendered, self.rendered_filter, self.rendered_ascii = current
        self.sync_filter_input()
        self.render_chrome()
        notice = self.blocking_notice()
        self.query_one("#notice-detail").display = notice is not None
        for detail in self.query(".view-detail").exclude("#notice-detail"):
            detail.display = notice is None
        if notice is not None:
            self.render_view()
            self.query_one("#notice-text", Static).update(notice)
            self.query_one("#detail-title", Static).update(Text(self.title_text(), "bold"))
            self.query_one("#list-title", Static).update("")
            if self.narrow:
                self.set_pane("detail")
                self.notice_pane = True
            return
        if self.notice_pane:
            # the notice (e.g. "Loading the workspace…") had the narrow screen; once
            # the view can draw, it starts at its list, as it does when nothing was loading
            self.notice_pane = False
            if self.narrow and self.pane == "detail":
                self.set_pane("list")
                self.focus_list()
        self.render_view()
        self.render_titles()

    def title_text(self) -> str:
        return VIEW_TITLES[self.VIEW]

    def render_view(self) -> None:
        raise NotImplementedError

    def render_chrome(self) -> None:
        self.render_header()
        self.render_banner()
        self.query_one(ViewTabs).show(self.VIEW, self.size.width or self.app.size.width or 120)

    def render_header(self) -> None:
        width = self.size.width or self.app.size.width or 120
        self.query_one(HeaderBar).update(self.shell.header_line(width))

    def render_banner(self) -> None:
        banner = self.query_one("#banner", Static)
        lines = self.shell.banner_lines()
        banner.update(Text("\n").join(lines) if lines else "")
        banner.display = bool(lines)

    def render_titles(self) -> None:
        self.query_one("#detail-title", Static).update(self.detail_title())
        self.query_one("#list-title", Static).update(self.list_title())

    def detail_title(self) -> Text:
        return Text(self.title_text(), "bold")

    def list_title(self) -> Text:
        return Text("")

    def blocking_notice(self) -> Text | None:
        """A full-pane message when there is nothing to show (no state dir, no memory)."""
        m = self.model
        g = self.glyphs
        # the app paints before its model is loaded.
        if m is None:
            return Text.assemble((f"{g.pending} Loading the workspace…\n\n", "bold"), "Topics appear as soon as they are read.")
        if m.outline and not self.SHOWS_OUTLINE:
            return Text.assemble((f"{g.pending} Loading the workspace…\n\n", "bold"), "The topic list is ready (1); this view follows.")
        if self.NEEDS_SESSIONS and not m.sessions_loaded and m.state_exists and m.sessions:
            # the list came from the persistent cache; the branches are being read
            pending = m.status.pending_turns
            return Text.assemble(
                (f"{g.pending} Loading session detail…\n\n", "bold"),
                f"{plural(len(m.sessions), 'session')}"
                + (f", {plural(pending, 'record')} pending" if pending is not None else "")
                + ". Their branches and turns are being read; the other views are ready.",
            )
        if self.NEEDS_SESSIONS and not m.sessions_loaded and m.state_exists:
            return Text.assemble((f"{g.pending} Loading sessions…\n\n", "bold"), "The other views are ready; sessions follow.")
        state_dir = getattr(self.shell, "state_dir", None)
        if not m.state_exists and state_dir is not None and os.path.lexists(state_dir) and not os.path.isdir(state_dir):
            # the same words as the CLI's verbs: something is there, and it is not a folder
            return Text.assemble(
                (f"{g.bad} Not a state directory (not a folder)\n\n", "bold"),
                f"{m.display_dir} is a file, not a folder: not a state directory (not a folder).\n\n",
                "Point memory-tui at the folder OpenProgram writes (the one holding sessions/ and memory/) with ",
                ("memory-tui --state DIR", "bold"),
                ".",
            )
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

    def footer_ranks(self) -> dict[str, int]:
        ranks = super().footer_ranks()
        if self.narrow and self.pane == "detail":
            ranks["filter"] = FILTER_RANK_OUT_OF_SIGHT
        return ranks

    # ------------------------------------------------------------------ layout
    def on_resize(self, event: Resize) -> None:
        self.apply_layout(event.size.width, event.size.height)
        if self.narrow and not self.notice_pane:
            self.follow_focus()

    def follow_focus(self) -> None:
        """On a narrow screen, show the pane that has the focus (or focus the pane shown).

        The wide layout shows both panes and never changes ``pane``: a live resize to narrow
        would show the list while the focus stays in the hidden detail, so enter and escape
        would act on what cannot be seen. The focus says where the user was."""
        focused = self.focused
        if focused is None:
            (self.detail_focus() if self.pane == "detail" else self.list_widget()).focus()
            return
        pane = "detail" if self.query_one("#content") in focused.ancestors_with_self else "list"
        if pane != self.pane:
            self.set_pane(pane)

    @on(ScreenSuspend)
    def _suspended(self) -> None:
        # posted before the switch is handled: by now the app shows what replaced this screen;
        # a view switch leaves this screen out of the current stack, a push keeps it below
        stack = self.app.screen_stack
        self.covered = self in stack and stack[-1] is not self

    @on(ScreenResume)
    def _resumed(self) -> None:
        if not self.ready:
            return
        covered, self.covered = self.covered, False
        if covered:
            # back from a dialog or a pushed screen: the same pane, the same focus (Textual
            # restores the focused widget); only what changed meanwhile is redrawn
            self.apply_layout(self.app.size.width)
            self.refresh_view()
            arrival = self.shell.take_arrival(self.VIEW)
            if arrival is not None:
                arrival(self)
            return
        self.pane = "list"
        self.apply_layout(self.app.size.width)
        self.refresh_view()
        if self.blocking_notice() is None:
            self.focus_list()
        elif self.narrow:
            self.set_pane("detail")
            self.notice_pane = True
        arrival = self.shell.take_arrival(self.VIEW)
        if arrival is not None:
            arrival(self)

    def apply_layout(self, width: int, height: int | None = None) -> None:
        self.narrow = width < NARROW
        self.set_class(self.narrow, "-narrow")
        self.set_class((self.app.size.height if height is None else height) < SHORT, "-short")
        detail = self.narrow and self.pane == "detail"
        self.set_class(detail, "-detail")
        self.set_class(not detail, "-list")
        if self.is_mounted:
            self.render_chrome()

    def set_pane(self, pane: str) -> None:
        self.pane = pane
        self.apply_layout(self.app.size.width)
        self.refresh_bindings()

    def open_detail(self, target: Widget | None = None) -> None:
        """Focus ``target`` if given, then on a narrow screen show the detail pane."""
        if target is not None:
            target.focus()
        if self.narrow:
            self.set_pane("detail")
            if target is None:
                self.detail_focus().focus()

    def focus_list(self) -> None:
        self.list_widget().focus()

    # ------------------------------------------------------------------ filter / back
    def sync_filter_input(self) -> None:
        inp = self.query_one("#filter", Input)
        if inp.value != self.filter_text:
            with inp.prevent(Input.Changed):
                inp.value = self.filter_text
        if self.filter_text:
            self.add_class("-filtering")

    def action_filter(self) -> None:
        self.add_class("-filtering")
        self.set_pane("list")
        self.query_one("#filter", FilterInput).edit()
        self.refresh_bindings()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.shell.set_filter(event.value.strip())

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.focus_list()

    def clear_filter(self) -> None:
        self.remove_class("-filtering")
        inp = self.query_one("#filter", Input)
        if inp.value:
            with inp.prevent(Input.Changed):
                inp.value = ""
        if self.filter_text:
            self.shell.set_filter("")
        self.refresh_bindings()

    def action_back(self) -> None:
        if self.narrow and self.pane == "detail":
            self.set_pane("list")
            self.focus_list()
            return
        if self.has_class("-filtering") or self.filter_text:
            self.clear_filter()
            self.focus_list()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":
            return (self.narrow and self.pane == "detail") or self.has_class("-filtering") or bool(self.filter_text)
        return True

    # ------------------------------------------------------------------ filtering helpers
    def record_matches(self, r: RecordVM) -> bool:
        needle = self.filter_text.lower()
        return (
            not needle
            or needle in r.content.lower()
            or any(needle in i.lower() for i in r.ids)
            or needle in " ".join(r.headings).lower()
            or any(needle in l.label.lower() for l in r.source_links)
        )

