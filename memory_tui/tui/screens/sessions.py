"""Sessions: every session found under ``sessions/`` and, for the chosen one, what memory
did with it.

The detail pane has three places, top to bottom, each composed by its own method so the
branch-DAG work can fill them without touching the rest of the screen:

- ``compose_graph``: the session graph widget (branches and turns as a DAG);
- ``compose_node_detail``: the highlighted node (role, text, its source frame);
- ``compose_verdict``: written / pending / never, with the reasons and their evidence.

Today only the summary text is drawn (``#sessions-text``): the title, node and pending
counts, and the cited node when arriving from a citation (``g``).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option, OptionDoesNotExist

from .. import commands as registry
from ..data import SessionVM
from ..widgets import frame_text
from ..widgets.records import highlighted_key, restore_highlight
from .base import ViewScreen, flat


class SessionOption(Option):
    """One session row; ``session`` is what it shows."""

    def __init__(self, prompt: Text, session: SessionVM) -> None:
        super().__init__(prompt, id=f"session:{session.session_id}")
        self.session = session


class SessionsScreen(ViewScreen):
    VIEW = "sessions"
    NEEDS_SESSIONS = True
    BINDINGS: ClassVar[list[BindingType]] = registry.screen_bindings("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.focus_node: tuple[str, str | None] | None = None  # (session, node) a citation named

    def compose_list(self) -> ComposeResult:
        yield OptionList(id="sessions-list", classes="view-list")

    def compose_detail(self) -> ComposeResult:
        with VerticalScroll(id="sessions-detail", classes="view-detail"):
            yield Static(id="sessions-text")
            yield from self.compose_graph()
            yield from self.compose_node_detail()
            yield from self.compose_verdict()

    def compose_graph(self) -> ComposeResult:
        """The session graph widget goes here."""
        yield from ()

    def compose_node_detail(self) -> ComposeResult:
        """The highlighted node's detail goes here."""
        yield from ()

    def compose_verdict(self) -> ComposeResult:
        """The verdict panel (why a turn was or was not written) goes here."""
        yield from ()

    def detail_focus(self) -> Widget:
        return self.query_one("#sessions-detail")

    def render_view(self) -> None:
        m = self.model
        lst = self.query_one("#sessions-list", OptionList)
        keep = highlighted_key(lst)
        options = []
        for s in m.sessions if m else ():
            pending = "?" if s.pending is None else str(s.pending)
            nodes = s.nodes if s.nodes is not None else "?"
            text = Text.assemble(
                (s.session_id, "bold"), (f"  {pending} pending {self.glyphs.dot} {nodes} nodes\n", "dim"), flat(s.title),
            )
            options.append(SessionOption(text, s))
        lst.set_options(options)
        lst.highlighted = None
        restore_highlight(lst, keep)
        self.show_session()

    def selected_session(self) -> SessionVM | None:
        opt = self.query_one("#sessions-list", OptionList).highlighted_option
        return opt.session if isinstance(opt, SessionOption) else None

    def show_session(self) -> None:
        m = self.model
        text = Text()
        s = self.selected_session()
        if s is None:
            text.append("No sessions found under sessions/.", "dim")
        else:
            text.append(s.title or "(untitled)", "bold")
            pending = "unknown" if s.pending is None else s.pending
            text.append(f"\n{s.session_id} {self.glyphs.dot} {s.nodes} node files {self.glyphs.dot} pending turns: {pending}\n\n")
            if self.focus_node and self.focus_node[0] == s.session_id and self.focus_node[1]:
                node = self.focus_node[1]
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
        self.render_titles()

    def detail_title(self) -> Text:
        n = len(self.model.sessions) if self.model else 0
        return Text.assemble(("Sessions", "bold"), (f"\n{n} session" + ("s" if n != 1 else "") + f" {self.glyphs.dot} placeholder", "dim"))

    def list_title(self) -> Text:
        n = len(self.model.sessions) if self.model else 0
        return Text(f"{n} sessions", "dim")

    def focus_session(self, session_id: str, node_id: str | None) -> bool:
        """Highlight ``session_id`` and show ``node_id`` in it; False if the session is not there."""
        self.refresh_view()
        self.focus_node = (session_id, node_id)
        lst = self.query_one("#sessions-list", OptionList)
        try:
            lst.highlighted = lst.get_option_index(f"session:{session_id}")
        except OptionDoesNotExist:
            self.show_session()
            return False
        self.show_session()
        self.open_detail()
        return True

    def action_filter(self) -> None:
        self.notify("Filter works in Topics, Timeline, Recent and Core.", severity="information")

    @on(OptionList.OptionHighlighted, "#sessions-list")
    def _session_highlighted(self) -> None:
        self.show_session()

    @on(OptionList.OptionSelected, "#sessions-list")
    def _session_selected(self) -> None:
        self.open_detail()
