"""The Sessions view on a short screen (the node detail has no room beside the graph) and
with a title too long for its header (it wrapped and left the graph no row)."""

from __future__ import annotations

import shutil

import pytest
from tui_helpers import footer_keys, make_app, screen_text, settle

SID = "local_a1b2c3d4e5"


@pytest.fixture(scope="module")
def fixture_copy(_fixture_master, tmp_path_factory):
    dest = tmp_path_factory.mktemp("sessions-small") / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    return dest


async def _graph(pilot, app, session: str = SID):
    await settle(pilot, app)
    await pilot.press("5")
    await pilot.pause()
    assert app.screen.focus_session(session, None)
    await pilot.pause()
    await pilot.pause()


@pytest.mark.anyio
async def test_a_short_screen_names_and_opens_the_node_detail(fixture_copy):
    """At 40x12 the side panels got 0 rows: nothing said a node detail existed."""
    app = make_app(fixture_copy)
    async with app.run_test(size=(40, 12)) as pilot:
        await _graph(pilot, app)
        screen = app.screen
        graph, node = screen.query_one("#sessions-graph"), screen.query_one("#sessions-node")
        assert graph.region.height > 0 and app.focused is graph
        assert "d: node detail" in screen_text(app)
        await pilot.press("d")
        await pilot.pause()
        assert node.region.height > 0 and graph.region.height == 0
        assert "d: back to the graph" in screen_text(app)
        assert "esc Back" in footer_keys(app)[0]
        await pilot.press("escape")  # back to the graph, still in the detail pane
        await pilot.pause()
        assert graph.region.height > 0 and app.focused is graph and screen.pane == "detail"
        await pilot.press("d", "d")
        await pilot.pause()
        assert graph.region.height > 0 and app.focused is graph


@pytest.mark.anyio
async def test_a_tall_screen_shows_both_and_no_hint(fixture_copy):
    app = make_app(fixture_copy)
    async with app.run_test(size=(80, 24)) as pilot:
        await _graph(pilot, app)
        screen = app.screen
        assert screen.query_one("#sessions-node").region.height > 0
        assert screen.query_one("#sessions-graph").region.height > 0
        assert "node detail" not in screen_text(app).lower()  # neither hint nor footer key
        await pilot.press("d")  # nothing to swap: the graph stays
        await pilot.pause()
        assert screen.query_one("#sessions-graph").region.height > 0


@pytest.mark.anyio
@pytest.mark.parametrize("size", [(40, 12), (80, 24), (120, 40)], ids=["40x12", "80x24", "120x40"])
async def test_a_long_title_leaves_the_graph_rows(fixture_copy, size):
    """A long title wrapped in the header above the graph and took every row it had."""
    app = make_app(fixture_copy)
    async with app.run_test(size=size) as pilot:
        await _graph(pilot, app)
        screen = app.screen
        sm = screen.sessions
        rows = {r.session_id: r for r in sm.rows()}
        long = "a very long session title " * 40
        rows[SID] = rows[SID].__class__(**{**rows[SID].__dict__, "title": long}) if hasattr(rows[SID], "__dict__") else rows[SID]
        screen.selected_session = lambda: rows[SID]  # the header reads the highlighted row
        screen.shown = None
        screen.show_session()
        await pilot.pause()
        await pilot.pause()
        header = screen.query_one("#sessions-text")
        assert header.region.height <= 3
        assert screen.query_one("#sessions-graph").region.height >= 3, size
        assert "…" in screen_text(app)


@pytest.mark.anyio
async def test_the_hint_names_the_owners_key(fixture_copy):
    """A ``[keymap]`` entry moving the command moves the hint with it."""
    app = make_app(fixture_copy)
    async with app.run_test(size=(40, 12)) as pilot:
        app.keymap = {"sessions.node": "n"}
        app.set_keymap(app.keymap)
        await _graph(pilot, app)
        assert "n: node detail" in screen_text(app)
        await pilot.press("n")
        await pilot.pause()
        assert "n: back to the graph" in screen_text(app)
