"""Snapshots of the Sessions view (issue 9) on OpenProgram's fixture, plus checks on the
drawn text that the snapshots alone would not catch (ASCII mode draws no non-ASCII glyph,
the session rows use the list's width). Regenerate only these with
``pytest tests/tui/test_sessions_view.py --snapshot-update`` and read the SVGs' text first."""

from __future__ import annotations

import html
import re
import shutil

import pytest
from tui_helpers import dry_runs_done, workers_done, footer_keys, make_app, screen_text, settle

SID = "local_a1b2c3d4e5"  # forks, a retry, a rewind, tool rows, a stranded turn, a compaction summary


@pytest.fixture(scope="module")
def fixture_copy(_fixture_master, tmp_path_factory):
    """A private copy, so every snapshot shows the same ``~/.openprogram``."""
    dest = tmp_path_factory.mktemp("sessions-snap") / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    return dest


def _open(session: str | None = SID, node: str | None = None, *, side: str | None = None, keys=()):
    """Open Sessions, highlight ``session``, focus its graph on ``node`` and scroll the side
    panel to ``side`` (a widget id), then press ``keys``."""

    async def run_before(pilot):
        app = pilot.app
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        if session is not None:
            screen = app.screen
            assert screen.focus_session(session, node)  # what the `g` jump does
            await pilot.pause()
            graph = screen.query_one("#sessions-graph")
            if node is not None:
                assert graph.selected_node is not None and graph.selected_node.id == node
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        await dry_runs_done(pilot, app)
        for group in ("sessions-explain", "sessions-overview", "sessions-layout", "insights"):
            await workers_done(pilot, app, group)
        if side is not None:
            # only once the dry run and the insights have filled the panel: lines arriving
            # above the target after the scroll would move it
            panel = app.screen.query_one("#sessions-side")
            panel.scroll_to_widget(app.screen.query_one(f"#{side}"), top=True, animate=False)
            await pilot.pause()

    return run_before


def test_session_list(snap_compare, fixture_copy):
    # Sorted by recency (`s` twice: pending, drift, recency): the rows pack their facts into the list's width.
    async def run_before(pilot):
        await settle(pilot, pilot.app)
        await pilot.press("5", "s", "s")
        await pilot.pause()

    assert snap_compare(make_app(fixture_copy), terminal_size=(120, 40), run_before=run_before)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["wide", "narrow"])
def test_forked_session(snap_compare, fixture_copy, size):
    app = make_app(fixture_copy)
    assert snap_compare(app, terminal_size=size, run_before=_open(SID, "a00000000004_reply"))


def test_forked_session_ascii(snap_compare, fixture_copy):
    app = make_app(fixture_copy, ascii=True)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_open(SID, "a00000000004_reply"))


def test_ascii_small(snap_compare, fixture_copy):
    app = make_app(fixture_copy, ascii=True)
    assert snap_compare(app, terminal_size=(40, 12), run_before=_open(SID, "a00000000002_reply"))


def test_node_detail(snap_compare, fixture_copy):
    # A retry's turn: its metadata (forked_from), its mark and the records citing it.
    app = make_app(fixture_copy)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_open(SID, "r3a9c0de", side="sessions-node"))


def test_verdict_with_reasons(snap_compare, fixture_copy):
    # A non-head branch below the threshold: the reason, its evidence and the dry run.
    app = make_app(fixture_copy)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_open(SID, "a00000000003_reply", side="sessions-verdict"))


def test_legend(snap_compare, fixture_copy):
    app = make_app(fixture_copy)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_open(SID, "a00000000001", side="sessions-legend"))


# ---------------------------------------------------------------------------- drawn-text checks


def _screen_lines(app) -> list[str]:
    svg = app.export_screenshot()
    rows: dict[float, list[str]] = {}
    for y, t in re.findall(r'<text[^>]*y="([0-9.]+)"[^>]*>([^<]*)</text>', svg):
        rows.setdefault(float(y), []).append(html.unescape(t).replace("\xa0", " "))
    return ["".join(rows[y]) for y in sorted(rows)]


# The fixture's own text is plain ASCII, so in ASCII mode any other character is a glyph.
@pytest.mark.anyio
@pytest.mark.parametrize("size", [(40, 12), (80, 24), (120, 40)], ids=["40x12", "80x24", "120x40"])
@pytest.mark.parametrize("pane", ["list", "graph", "legend"])
async def test_ascii_mode_draws_only_ascii_in_sessions(fixture_copy, size, pane):
    app = make_app(fixture_copy, ascii=True)
    async with app.run_test(size=size) as pilot:
        if pane == "list":
            await settle(pilot, app)
            await pilot.press("5")
            await pilot.pause()
        else:
            await _open(SID, "a00000000002_reply", side="sessions-legend" if pane == "legend" else None)(pilot)
        text = "\n".join(_screen_lines(app))
        assert text.strip(), "nothing drawn"
        bad = sorted({c for c in text if not c.isascii()})
        assert not bad, (bad, text)


@pytest.mark.anyio
async def test_the_same_screen_in_unicode_mode_draws_glyphs(fixture_copy):
    # the check above can fail: without ASCII mode the footer's enter key and the lanes are symbols
    # (at 80x24, where the footer has room for the graph's enter key beside ? Help)
    app = make_app(fixture_copy)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(SID, "a00000000002_reply")(pilot)
        text = "\n".join(_screen_lines(app))
        assert "\u23ce" in text and any(not c.isascii() for c in text)


@pytest.mark.anyio
@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["wide", "narrow"])
async def test_session_rows_fit_the_list(fixture_copy, size):
    """Every fact of a session row is whole on screen: only a title may be cut."""
    app = make_app(fixture_copy)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        lst = app.screen.query_one("#sessions-list")
        width = lst.scrollable_content_region.width
        assert width >= (37 if size[0] >= 100 else 70)
        titles = {opt.session.title for opt in lst.options}
        for opt in lst.options:
            lines = opt.prompt.plain.split("\n")
            assert lines[0] in titles
            for line in lines[1:]:
                assert len(line) <= width, (line, width)
        # the narrow list uses its width: facts share lines
        if size[0] < 100:
            assert any(" updated " in line for opt in lst.options for line in opt.prompt.plain.split("\n")[1:])


@pytest.mark.anyio
async def test_dry_run_follows_the_selection_and_drops_stale_answers(fixture_copy):
    """The dry run runs in a worker: moving to another branch before it answers must leave
    the panel on the new branch with that branch's plan, never the older one's."""
    from memory_tui.tui.widgets.branch_verdict import verdict_text

    app = make_app(fixture_copy)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        screen = app.screen
        sm = screen.sessions
        by_tip = {}
        for nid in sm.session(SID).session.order:
            by_tip.setdefault(sm.tip_for(SID, nid), nid)
        (a, first), (b, second) = [(n, t) for t, n in by_tip.items() if t is not None][:2]
        assert screen.focus_session(SID, a)
        await pilot.pause()
        assert screen.verdict.tip == first
        assert screen.query_one("#sessions-graph").select_node(b)  # most likely before the first dry run answered
        await pilot.pause()
        assert screen.verdict.tip == second
        await dry_runs_done(pilot, app)
        await dry_runs_done(pilot, app)
        vm = screen.verdict
        assert vm.tip == second and vm.plan is not None and vm.plan.tip == second and not vm.planning
        waiting = screen.sessions.branch_verdict(SID, second, planning=True)
        assert "computing the dry run" in verdict_text(waiting).plain
        assert "computing the dry run" not in verdict_text(vm).plain


@pytest.mark.anyio
async def test_a_big_session_paints_before_its_reasons(fixture_copy, monkeypatch):
    """Above the inline limit the list and graph paint from the one-pass overview and the
    node detail and verdict panel say "analysing…" until the explanation worker is done; then
    they show what the inline path shows, and `w` waits for it."""
    from dataclasses import replace

    from memory_tui.tui.model import sessions as sessions_model

    inline = make_app(fixture_copy)
    async with inline.run_test(size=(120, 40)) as pilot:
        await settle(pilot, inline)
        await pilot.press("5")
        await pilot.pause()
        want_rows = inline.screen.sessions.rows()
        want_verdict = inline.screen.verdict
        inline_detail = inline.screen.query_one("#sessions-node").vm

    monkeypatch.setattr(sessions_model, "INLINE_WALKS", 0)
    app = make_app(fixture_copy)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        gate = __import__("threading").Event()
        real = sessions_model.SessionsModel.explain_now

        def held(self):  # the worker waits until the test has looked at the "analysing" state
            gate.wait(10)
            return real(self)

        monkeypatch.setattr(sessions_model.SessionsModel, "explain_now", held)
        await pilot.press("5")
        await pilot.pause()
        screen = app.screen
        sm = screen.sessions
        assert not sm.explained
        # the list's figures come from the overview; the drift (a citation set against the
        # branches' pending sets) follows with the analysis
        assert [replace(r, drift=None) for r in want_rows] == list(sm.rows())
        graph = screen.query_one("#sessions-graph")
        assert graph.layout_data is not None and graph.rendered_rows > 0
        assert "analysing" in screen.query_one("#sessions-verdict").plain
        detail = screen.query_one("#sessions-node").vm  # the node's own facts are there at once
        assert detail is not None and detail.analysing and detail.verdict is None and detail.reasons == ()
        assert detail.node_id == graph.selected_node.id
        assert replace(detail, verdict=inline_detail.verdict, tip=inline_detail.tip, reasons=inline_detail.reasons,
                       analysing=False) == inline_detail
        assert "analysing" in str(screen.query_one("#node-detail-body").render())
        assert screen.verdict is None
        await pilot.press("w")  # nothing to write yet: a notice, no job
        assert not [w for w in app.workers if w.group == "job"]
        gate.set()
        for _ in range(200):
            if screen.verdict is not None:
                break
            await pilot.pause(0.02)
        assert sm.explained
        assert sm.rows() == want_rows
        assert screen.verdict is not None
        assert (screen.verdict.tip, screen.verdict.reasons, screen.verdict.pending_ids) == \
               (want_verdict.tip, want_verdict.reasons, want_verdict.pending_ids)
        assert "analysing" not in screen.query_one("#sessions-verdict").plain
        assert screen.query_one("#sessions-node").vm == inline_detail
        await dry_runs_done(pilot, app)


# ---------------------------------------------------------------------------- live resizes
SIZES = [(40, 12), (80, 24), (120, 40)]


def _cursor_drawn(app) -> bool:
    """The graph's cursor row is on screen: its gutter glyph is drawn, above the footer."""
    return any("\u25b6 " in line for line in screen_text(app).splitlines()[:-1])


@pytest.mark.anyio
@pytest.mark.parametrize("size", SIZES, ids=["40x12", "80x24", "120x40"])
async def test_the_cursor_row_stays_on_screen(fixture_copy, size):
    """At 40x12 the graph kept its 6-row minimum where 4 fit: after `end` the cursor row was
    drawn under the footer. Every size, and every live resize from it, shows the cursor."""
    app = make_app(fixture_copy)
    async with app.run_test(size=size) as pilot:
        await _open(SID, "a00000000002_reply", keys=("end",))(pilot)
        graph = app.screen.query_one("#sessions-graph")
        assert graph.cursor_row == len(graph.layout_data.rows) - 1
        assert _cursor_drawn(app), size
        for other in [s for s in SIZES if s != size] + [size]:
            await pilot.resize_terminal(*other)
            await pilot.pause()
            await pilot.pause()
            assert _cursor_drawn(app), (size, other)
            cursor_y = graph.region.y + graph.cursor_row - int(graph.scroll_y)
            assert graph.region.y <= cursor_y < app.screen.query_one("FittedFooter").region.y, (size, other)


@pytest.mark.anyio
async def test_a_live_resize_shows_the_pane_that_has_the_focus(fixture_copy):
    """With the graph focused at 120x40, a resize to 80x24 showed the list while the focus
    stayed in the hidden graph: enter toggled a group no one could see, esc did nothing."""
    app = make_app(fixture_copy)
    async with app.run_test(size=(120, 40)) as pilot:
        await _open(None)(pilot)
        screen = app.screen
        lst, graph = screen.query_one("#sessions-list"), screen.query_one("#sessions-graph")
        await pilot.press("enter")
        await pilot.pause()
        assert app.focused is graph

        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert screen.pane == "detail" and graph.region.height > 0 and app.focused is graph
        assert "esc Back" in footer_keys(app)[0]
        await pilot.press("escape")  # what the footer says: back to the list
        await pilot.pause()
        assert screen.pane == "list" and app.focused is lst and lst.region.height > 0
        await pilot.press("enter")  # and enter opens the detail again
        await pilot.pause()
        assert screen.pane == "detail" and app.focused is graph

        # wide again, the focus moved to the list there: narrow shows the list, not the old pane
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        screen.focus_list()
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert screen.pane == "list" and app.focused is lst and lst.region.height > 0
        assert "esc Back" not in footer_keys(app)[0]
        await pilot.press("enter")
        await pilot.pause()
        assert screen.pane == "detail" and app.focused is graph and graph.region.height > 0

        # nothing focused (the wide screen lost it): the pane the narrow screen shows takes it
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        screen.set_focus(None)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert screen.pane == "detail" and app.focused is graph


# ---------------------------------------------------------------------------- beyond the mark
# One state shows all five: the owner deleted the record that alone kept a written turn of the
# sub-agent session (written, nothing kept; drift), the stranded turn is cited without its mark
# (kept without a mark), the sub-agent's branch root names the other session (the link), every
# pending branch says when it will be written, and the compaction summary names what it covers.


@pytest.fixture(scope="module")
def beyond_copy(_fixture_master, tmp_path_factory):
    import json

    from memory_tui.cli import main

    dest = tmp_path_factory.mktemp("beyond-snap") / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--state", str(dest), "why", "local_0c0c0c0c0c", "--json"]) == 0
    turns = json.loads(out.getvalue())["sessions"]["local_0c0c0c0c0c"]["kept"]["turns"]
    sole = next(t for t in turns if t["state"] == "kept" and len(t["records"]) == 1)
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["--state", str(dest), "record", "delete", sole["records"][0]["memory_id"]]) == 0
    return dest


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (40, 12)], ids=["120x40", "80x24", "40x12"])
def test_beyond_the_mark(snap_compare, beyond_copy, size):
    # drift sort (`s`), the sub-agent session, its branch root: dropped glyph, the link node
    # above it, the next write in the verdict panel
    app = make_app(beyond_copy)
    assert snap_compare(app, terminal_size=size, run_before=_open("local_0c0c0c0c0c", "c00000000001"))


def test_beyond_the_mark_legend(snap_compare, beyond_copy):
    app = make_app(beyond_copy)
    assert snap_compare(app, terminal_size=(120, 40),
                        run_before=_open("local_0c0c0c0c0c", "c00000000001", side="sessions-legend"))


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (40, 12)], ids=["120x40", "80x24", "40x12"])
def test_beyond_the_mark_summary_and_kept(snap_compare, beyond_copy, size):
    # the compaction summary's detail names the turns it covers; the stranded turn is kept
    # without a mark (its marker after the lanes)
    app = make_app(beyond_copy)
    assert snap_compare(app, terminal_size=size, run_before=_open(SID, "summary_601f10339a", side="sessions-node"))
