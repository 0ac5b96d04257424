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


def _row(session_id: str = SID, turns: int = 12, tokens: int = 1010, tips: int = 3):
    from memory_tui.tui.model.sessions import SessionRowVM

    return SessionRowVM(session_id=session_id, title="t", updated_at=None, updated="", head=None, live_tips=tips,
                        tips=tips, pending_turns=turns, pending_tokens=tokens, threshold=8000, watcher_at=None,
                        watcher="never", foreign=0, stranded=0, in_registry=True, runtime_only_tips=())


def test_facts_fit_the_header_rows_whole_with_shorter_words_then_a_cut_id():
    from memory_tui.tui.screens.sessions import fact_lines

    # wide: one line, the long words
    assert fact_lines(_row(), 76, 3, "·") == [f"{SID} · 12 pending turns · 1010/8000 tokens · 3 tips"]
    # 40 columns, 2 rows: a fact is never split, no row ends on a separator
    assert fact_lines(_row(), 38, 2, "·") == [f"{SID} · 12 pending turns", "1010/8000 tokens · 3 tips"]
    # a 32-character id wrapped the facts into 3 rows, and the short header dropped the tips
    long_id = "local_" + "0123456789abcdef0123456789"
    lines = fact_lines(_row(long_id), 38, 2, "·")
    assert lines == [long_id, "12 pending · 1010/8000 tok · 3 tips"]
    # an id wider than the row is cut, the counts stay whole
    lines = fact_lines(_row("x" * 50), 30, 2, "·")
    assert len(lines) == 2 and lines[0].endswith("…") and len(lines[0]) == 30
    assert lines[1] == "12 pending · 1010/8000 tok …"  # the tips had no row: the cut says so
    lines = fact_lines(_row("x" * 50), 30, 1, "·")
    assert lines == ["x" * 29 + "…"]
    for width in range(4, 80):
        for rows in (1, 2, 3):
            out = fact_lines(_row(long_id, 123456, 99999, 12), width, rows, "·")
            assert 1 <= len(out) <= rows and all(len(line) <= width for line in out)


@pytest.mark.anyio
async def test_the_short_header_shows_every_fact_of_the_session(fixture_copy):
    from memory_tui.tui.screens.sessions import fact_lines

    # in ASCII the wrapped facts took a third row, which the short header cut: tokens and tips
    app = make_app(fixture_copy, ascii=True)
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        assert app.screen.focus_session(SID, "a00000000002_reply")  # a `g` jump to a turn
        await pilot.pause()
        row = app.screen.selected_session()
        text = screen_text(app)
        for fact in (row.session_id, f"{row.pending_turns} pending", f"{row.pending_tokens}/{row.threshold} tok",
                     f"{row.tips} tip"):
            assert fact in text, (fact, text)
        assert row.title not in text  # cut at 40 columns
        # a resize refits the header to its new width: the whole title, the facts on one row
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        await pilot.pause()
        header = str(app.screen.query_one("#sessions-text").render())
        assert header.split("\n") == [row.title, fact_lines(row, 118, 3, "-")[0]], header
