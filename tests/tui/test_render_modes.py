"""Every view and the dialogs reachable from it render at 80x24 under ``NO_COLOR``, in ASCII
mode and with both: no exception, and the screen shows what it is for.

``NO_COLOR`` makes Textual run every drawn line through its monochrome filter, which reads
the colour of each segment's style; ASCII mode adds the app's own filter. A widget that hands
either a line it did not expect crashes the whole app, so each screen is opened for real.
"""

from __future__ import annotations

import re
import shutil

import pytest
from tui_helpers import make_job_app, settle, screen_text, workers_done

from memory_tui.demo import build_demo

pytestmark = pytest.mark.anyio

# (NO_COLOR, --ascii)
MODES = {"no-color": (True, False), "ascii": (False, True), "no-color+ascii": (True, True)}
# what ASCII mode promises never to draw: box drawing, block elements, middle dot, ellipsis
FORBIDDEN = re.compile("[\u2500-\u259f\u00b7\u2026]")


def _graph_drawn(app) -> None:
    from memory_tui.tui.widgets.session_graph import SessionGraph

    graph = app.screen.query_one(SessionGraph)
    assert graph.layout_data is not None and graph.painted and graph.rendered_rows > 0


def _evidence_listed(app) -> None:
    assert app.insights is not None


# name: (keys from the Topics view, the screen that must be on top, text it must show, check)
SCREENS = {
    "topics": ((), "TopicsScreen", "kyoto-trip-in-spring", None),
    "topic-detail": (("enter",), "TopicsScreen", "planning a trip to Kyoto", None),
    "timeline": (("2",), "TimelineScreen", "dated rows", None),
    "recent": (("3",), "RecentScreen", "recent_limit", None),
    "core": (("4",), "CoreScreen", "blocks in topics/core.md", None),
    "sessions": (("5",), "SessionsScreen", "Rewrite the CLI in Rust?", None),
    "session-graph": (("5", "enter"), "SessionsScreen", "ROOT", _graph_drawn),
    "help": (("question_mark",), "HelpScreen", "Show the Topics view", None),
    "palette": (("ctrl+p",), "CommandPalette", "View: Topics", None),
    "problems": (("p",), "ProblemsScreen", "No problems", None),
    "history": (("enter", "h"), "HistoryScreen", "History of record", None),
    "editor": (("e",), "EditorScreen", "Edit topics/conversations/kyoto-trip-in-spring.md", None),
    "job-confirm": (("B",), "ConfirmJobDialog", "Run backfill", None),
    "job-result": (("B", "y"), "JobResultDialog", "outcome", None),
    "job-history": (("J",), "JobHistoryDialog", "job(s) this run", None),
    "evidence": (("i",), "EvidenceScreen", "kyoto-trip-in-spring", _evidence_listed),
}


@pytest.fixture(scope="module")
def demo_state(tmp_path_factory):
    return build_demo(tmp_path_factory.mktemp("render-modes") / "demo")


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", list(SCREENS))
async def test_every_screen_renders_under_no_color_and_ascii(demo_state, tmp_path, monkeypatch, mode, name):
    no_color, ascii = MODES[mode]
    keys, screen_name, expected, check = SCREENS[name]
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    state = demo_state
    if name == "job-result":  # a job that runs writes: on a copy, the others share the demo
        state = shutil.copytree(demo_state.parent, tmp_path / "demo") / demo_state.name
    app = make_job_app(state, ascii=ascii, insights=name == "evidence")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        for key in keys:
            await pilot.press(key)
            await settle(pilot, app)
            await workers_done(pilot, app, "job-preview")
            await workers_done(pilot, app, "job")
            await workers_done(pilot, app, "insights")
        await pilot.pause()
        # the filters under test are really on
        assert app.no_color is no_color and app.ascii_mode is ascii
        assert type(app.screen).__name__ == screen_name, (type(app.screen).__name__, screen_text(app))
        if check is not None:
            check(app)
        text = screen_text(app)
        if ascii:
            assert not FORBIDDEN.findall(text), (FORBIDDEN.findall(text), text)
        assert expected in text, text
        assert len(text.splitlines()) >= 20, text  # the whole screen was drawn, footer included
        assert "palette" in text.splitlines()[-1], text
    assert app.return_code in (None, 0)


def test_an_exception_no_handler_caught_makes_the_app_exit_non_zero(tmp_path, monkeypatch):
    # Textual prints the traceback of a crash and returns from run() as if the owner had
    # quit; only its return code says otherwise, and the shell must see it.
    from textual.app import App

    import memory_tui.cli.app as cli_app
    import memory_tui.tui.app as tui_app
    from memory_tui.cli import main
    from tui_helpers import write_minimal_state

    class Headless(App[None]):
        def run(self, **kw):  # no terminal under pytest
            return super().run(headless=True, **kw)

    class Crashing(Headless):
        def on_mount(self) -> None:
            raise RuntimeError("a widget failed to draw")

    class Quitting(Headless):
        def on_mount(self) -> None:
            self.exit()

    state = write_minimal_state(tmp_path)
    monkeypatch.setattr(cli_app, "_need_terminal", lambda: None)
    monkeypatch.setattr(tui_app, "create_app", lambda *_a, **_kw: Crashing())
    assert main(["--state", str(state), "--no-watch"]) == 1
    monkeypatch.setattr(tui_app, "create_app", lambda *_a, **_kw: Quitting())
    assert main(["--state", str(state), "--no-watch"]) == 0
