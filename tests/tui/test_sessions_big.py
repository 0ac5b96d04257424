"""The Sessions view on a big session (``benchmarks/bench_graph.py``'s shape: a trunk with
tool rows, retries, spawns and merges; above the sizes the layout and overview tables keep
and above the inline limit of the explanation): the keyboard reaches every row of its graph,
the last one included, and what it lands on is the row the engine's own layout puts there,
whether the open computed the layout or read it (and the overview) back from the tables."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from pathlib import Path

import pytest
from aging import age, session_reads
from tui_helpers import COUNTER, make_app, settle, workers_done

from memory_tui.core.format.tokens import O200kCounter
from memory_tui.sessions import graph as G
from memory_tui.sessions import layout_table, overview_table
from memory_tui.sessions.overview import session_overview
from memory_tui.sessions.reasons import load_context
from memory_tui.sessions.store import load_sessions
from memory_tui.tui.model import sessions as sessions_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_graph import WS, build  # noqa: E402

NODES = 2300


@pytest.fixture(scope="module")
def big_state(tmp_path_factory):
    state = tmp_path_factory.mktemp("big-session") / ".openprogram"
    scriptorium = state / "memory" / ".scriptorium"
    scriptorium.mkdir(parents=True)
    (state / "memory" / "topics").mkdir()
    (state / "memory" / "sources").mkdir()
    (scriptorium / "workspace-id").write_text(WS + "\n")
    build(state, NODES)
    return state


def _engine_layout(state: Path) -> G.Layout:
    """The layout computed straight from the engine's overview (with what the view draws beyond
    the session's files: the kept states from the topics): no table, no app."""
    from memory_tui.sessions.kept import citations_for_state
    from memory_tui.sessions.links import SpawnLinks, session_decorations

    snap = load_sessions(state)
    session = snap.sessions["big"]
    ws = load_context(state, now=0.0).workspace_id
    ov = session_overview(session, ws, O200kCounter())
    deco = session_decorations(session, citations_for_state(state)[0], ws, SpawnLinks.of(snap))
    return G.layout(G.nodes_from_overview(ov, deco), G.LayoutOptions())


def _records(state: Path):
    from memory_tui.tui.model.load import load_model

    return load_model(state, counter=COUNTER).records.values()


async def layouts_done(pilot, app) -> None:
    """Wait for the Sessions screen's overview and layout workers (what the tables lack) and their paint."""
    await workers_done(pilot, app, "sessions-overview")
    await workers_done(pilot, app, "sessions-layout")
    await pilot.pause()


def _last_selectable(lay: G.Layout) -> int:
    return max(i for i, r in enumerate(lay.rows) if r.kind != "gap")


@pytest.mark.anyio
@pytest.mark.parametrize("opening", ["computed", "from the tables"])
async def test_the_keys_walk_a_big_session_to_its_last_node(big_state, opening, tmp_path, monkeypatch):
    want = _engine_layout(big_state)
    assert len(want.rows) > 1500
    monkeypatch.setattr(sessions_model, "INLINE_WALKS", 0)  # the big-session path (reasons in a worker)
    monkeypatch.setattr(G, "_CACHE", OrderedDict())  # no layout of an earlier test in this process
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    if opening == "from the tables":
        # an earlier open (with the workspace's records, as the app has them) fills them
        sessions_model.SessionsModel.load(big_state, now=0.0, counter=COUNTER, records=_records(big_state)).layout("big")
        assert list((tmp_path / "overviews").iterdir()) and list((tmp_path / "layouts").iterdir())

        def computed(*_args, **_kw):
            raise AssertionError("computed although the table holds it")

        monkeypatch.setattr(overview_table, "session_overview", computed)
        monkeypatch.setattr(layout_table, "write", computed)  # a layout computed is written; a hit is not
        monkeypatch.setattr(G, "_CACHE", OrderedDict())  # the app reads the table, not this process's memo
    app = make_app(big_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await layouts_done(pilot, app)
        screen = app.screen
        graph = screen.query_one("#sessions-graph")
        assert graph.layout_data == want
        await pilot.press("enter")  # from the list into the graph
        await pilot.pause()
        assert app.focused is graph
        await pilot.press("end")
        await pilot.pause()
        last = _last_selectable(want)
        assert graph.cursor_row == last and graph.selected_row.id == want.rows[last].id
        top = int(graph.scroll_y)
        assert top <= last < top + graph.scrollable_content_region.height  # scrolled to it, drawn
        assert graph.render_line(last - top).text.startswith("▶")
        if want.rows[last].node is not None:
            assert screen.query_one("#sessions-node").vm.node_id == want.rows[last].id
        await pilot.press("pageup", "up", "pagedown", "down")
        await pilot.pause()
        assert graph.cursor_row == last
        await pilot.press("home")
        await pilot.pause()
        assert graph.cursor_row == 0 and graph.scroll_y == 0
        for _ in range(3):
            before = graph.cursor_row
            await pilot.press("pagedown")
            assert graph.cursor_row > before
        workers = [w for w in app.workers if w.group in ("sessions-explain", "sessions-dry-run")]
        if workers:
            await app.workers.wait_for_complete(workers)


@pytest.mark.anyio
async def test_a_layout_the_tables_lack_is_computed_in_a_worker(big_state, tmp_path, monkeypatch):
    """The first open of a big session: the screen paints (list, header) with the graph saying
    "laying out N nodes…" and no cursor while a worker lays it out; then the graph is the
    engine's layout with the cursor on its first row."""
    want = _engine_layout(big_state)
    monkeypatch.setattr(sessions_model, "INLINE_WALKS", 0)
    monkeypatch.setattr(G, "_CACHE", OrderedDict())
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    gate = threading.Event()
    real = sessions_model.SessionsModel.layout

    def held(self, sid, options=None):  # the worker waits until the test has seen the pending graph
        if threading.current_thread() is not threading.main_thread():
            gate.wait(20)
        return real(self, sid, options)

    monkeypatch.setattr(sessions_model.SessionsModel, "layout", held)
    app = make_app(big_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await workers_done(pilot, app, "sessions-overview")  # not the layout: the gate holds it
        screen = app.screen
        graph = screen.query_one("#sessions-graph")
        assert graph.layout_data is None and graph.session_id == "big"
        assert graph.render_line(0).text.strip() == f"laying out {len(want.nodes)} nodes…"
        assert screen.query_one("#sessions-list").option_count == 1
        assert "big" in str(screen.query_one("#sessions-text").render())
        await pilot.press("enter", "end", "down")  # nothing to move yet, and nothing breaks
        assert graph.layout_data is None and graph.cursor_row == 0
        gate.set()
        await layouts_done(pilot, app)
        assert graph.layout_data == want and graph.rendered_rows > 0
        assert graph.cursor_row == 0 and graph.selected_row.id == want.rows[0].id
        assert screen.query_one("#sessions-node").vm.node_id == want.rows[0].id
        assert list((tmp_path / "layouts").iterdir())  # kept for the next open
        workers = [w for w in app.workers if w.group in ("sessions-explain", "sessions-dry-run")]
        if workers:
            await app.workers.wait_for_complete(workers)


@pytest.mark.anyio
async def test_an_overview_the_table_lacks_is_computed_in_a_worker(big_state, tmp_path, monkeypatch):
    """The big session's overview (its overview table empty) was computed on the UI thread
    when the view opened: the screen froze. Now the view says "Analysing…" while a worker
    computes it, the app answers keys meanwhile, and then shows the same overview."""
    session = load_sessions(big_state).sessions["big"]
    want = session_overview(session, load_context(big_state, now=0.0).workspace_id, O200kCounter())
    monkeypatch.setattr(G, "_CACHE", OrderedDict())
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    gate = threading.Event()
    real = overview_table.session_overview
    threads = []

    def held(*args, **kw):  # the worker waits until the test has seen the notice
        threads.append(threading.current_thread())
        if threading.current_thread() is not threading.main_thread():
            gate.wait(20)
        return real(*args, **kw)

    monkeypatch.setattr(overview_table, "session_overview", held)
    app = make_app(big_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        screen = app.screen
        assert screen.query_one("#notice-detail").display
        assert "Analysing 1 session…" in str(screen.query_one("#notice-text").render())
        assert screen.query_one("#sessions-list").option_count == 0
        await pilot.press("s")  # the UI thread answers while the worker waits
        await pilot.pause()
        assert screen.sort_key == "drift"  # pending -> drift
        gate.set()
        await layouts_done(pilot, app)
        assert threads and all(t is not threading.main_thread() for t in threads)
        assert not screen.query_one("#notice-detail").display
        assert screen.query_one("#sessions-list").option_count == 1
        sm = screen.sessions
        got = sm.overviews["big"]
        for field in ("kinds", "foreign_ids", "best_tip", "tip_of", "archived", "pending_turns", "pending_tokens",
                      "stranded", "foreign", "runtime_only_tips", "walk_total"):
            assert getattr(got, field) == getattr(want, field), field
        assert screen.query_one("#sessions-graph").layout_data == _engine_layout(big_state)
        workers = [w for w in app.workers if w.group in ("sessions-explain", "sessions-dry-run")]
        if workers:
            await app.workers.wait_for_complete(workers)


def test_the_dry_run_reads_no_node_file_of_the_session_the_view_holds(big_state, monkeypatch):
    """The verdict panel's dry run plans the branch from the session as the view read it: a
    node file whose stamp has not moved is not read (nor parsed) again, and the plan equals the
    one made from a fresh read. A file that did move is read."""
    age(big_state / "sessions")  # stamps that can vouch for the files
    held = load_sessions(big_state)
    session = held.sessions["big"]
    node_files = {n.file for n in session.nodes.values()}
    assert len(node_files) >= NODES
    tip = session.head_id
    fresh = sessions_model.dry_run(big_state, "big", tip, clock=lambda: 2e9, counter=COUNTER)
    reads = session_reads(monkeypatch)
    reused = sessions_model.dry_run(big_state, "big", tip, clock=lambda: 2e9, counter=COUNTER, sessions_read=held)
    assert node_files.isdisjoint(reads)
    assert fresh.batches and (reused.batches, reused.outcome, reused.warnings, reused.files) == (
        fresh.batches, fresh.outcome, fresh.warnings, fresh.files)
    # one node file rewritten in place (a mark, say): that file, and only it, is read again
    node = next(iter(session.nodes.values()))
    path = big_state / node.file
    path.write_bytes(path.read_bytes())
    reads.clear()
    sessions_model.dry_run(big_state, "big", tip, clock=lambda: 2e9, counter=COUNTER, sessions_read=held)
    assert node_files.intersection(reads) == {node.file}
