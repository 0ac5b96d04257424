"""Moving between views: switching modes, a jump that runs once its view is current (a
record, a session's node), the filter, and the screens pushed over the views (help, evidence).
"""

from __future__ import annotations

from typing import Callable

from ..model.data import CORE_TOPIC, RecordVM
from ..screens import ViewScreen
from ..views import VIEWS

Arrival = Callable[[ViewScreen], None]


class Navigation:
    """Mixed into the app: each view is a Textual mode; ``go_to`` is every jump's one path."""

    def _init_navigation(self) -> None:
        self.view_screens: dict[str, ViewScreen] = {}  # the view screens that exist so far
        self._arrivals: dict[str, Arrival] = {}

    @property
    def current_view_screen(self) -> ViewScreen | None:
        return self.view_screens.get(self.view)

    def register_view(self, screen: ViewScreen) -> None:
        self.view_screens[screen.VIEW] = screen

    def take_arrival(self, view: str) -> Arrival | None:
        return self._arrivals.pop(view, None)

    def action_switch_view(self, view: str) -> None:
        if view in VIEWS and view != self.view:
            self.switch_mode(view)

    def go_to(self, view: str, then: Arrival) -> None:
        """Show ``view`` and run ``then`` on its screen once it is the current one.

        A jump from a screen pushed over a view (Evidence, Alternatives, History …) leaves
        those screens: left on the view's stack they would cover it again the next time the
        view is chosen (``1`` bringing back an old Evidence list instead of Topics)."""
        while len(self.screen_stack) > 1 and not isinstance(self.screen, ViewScreen):
            self.pop_screen()
        screen = self.view_screens.get(view)
        if view == self.view and screen is not None:
            then(screen)
            return
        self._arrivals[view] = then
        self.switch_mode(view)

    async def open_record(self, record: RecordVM) -> None:
        view = "core" if record.topic_path == CORE_TOPIC else "topics"
        self.go_to(view, lambda screen: screen.reveal(record))  # type: ignore[attr-defined]

    async def open_session(self, session_id: str, node_id: str | None) -> None:
        def arrive(screen: ViewScreen) -> None:
            if not screen.focus_session(session_id, node_id):  # type: ignore[attr-defined]
                self.notify(f"Session {session_id} is not in sessions/.", severity="warning")

        self.go_to("sessions", arrive)

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        screen = self.current_view_screen
        if screen is not None:
            screen.refresh_view()

    def action_help(self) -> None:
        from ..screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        screen = self.screen
        present = {type(node) for node in (screen, *screen.walk_children())}
        self.push_screen(HelpScreen(self.keymap, self.view, self.ascii_mode, present))

    def action_open_evidence(self, which: str = "") -> None:
        from ..screens.evidence import EvidenceScreen

        if isinstance(self.screen, EvidenceScreen):
            self.screen.show_list(which or None)
            return
        self.push_screen(EvidenceScreen(which or None))
