"""The insights wired into the app (issue 11): header counts from a worker, evidence badges,
the Evidence, History (with revert) and Alternatives screens; Pilot tests and snapshots on a
crafted workspace (tests/unit/insights_world.py) and on the fixture copy."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))  # the crafted-world builders

from insights_world import forked_world  # noqa: E402
from tui_helpers import Messages, make_app, settle  # noqa: E402

from memory_tui.core.store import gitlog  # noqa: E402
from memory_tui.core.tx import api as tx  # noqa: E402
from memory_tui.tui.screens.alternatives import AlternativesScreen  # noqa: E402
from memory_tui.tui.screens.evidence import EvidenceScreen  # noqa: E402
from memory_tui.tui.messages import ModelApplied  # noqa: E402
from memory_tui.tui.screens.history import ConfirmRevert, HistoryScreen, RevertDone  # noqa: E402
from memory_tui.tui.widgets.evidence_list import EvidenceList  # noqa: E402
from memory_tui.tui.widgets.records import RecordList  # noqa: E402

pytestmark = pytest.mark.anyio
WEB = "topics/projects/web.md"


def env(day: int) -> dict[str, str]:
    return gitlog.fixed_env(f"2026-11-{day:02d}T00:00:00+00:00")


@pytest.fixture(scope="module")
def master(tmp_path_factory) -> Path:
    """The forked world under git, then three edits of ^flask001."""
    state = forked_world(tmp_path_factory.mktemp("insights-view") / "state", lost=False)
    root = state / "memory"
    assert gitlog.ensure_history(root, env=env(1)) is None
    olds = ["The app uses Flask.", "The app uses Flask 3.", "The app uses Flask 3 with Jinja."]
    for i, new in enumerate(("The app uses Flask 3.", "The app uses Flask 3 with Jinja.", "The app used Flask.")):
        text = (root / WEB).read_text()
        assert tx.staged_edit(state, WEB, text.replace(olds[i], new), git_env=env(i + 2)).ok
    return state


@pytest.fixture
def world(master, tmp_path) -> Path:
    dest = tmp_path / "state"
    shutil.copytree(master, dest, symlinks=True)
    return dest


async def ready(pilot, app) -> None:
    """Wait for the model and the insights worker, then for the redraw."""
    await settle(pilot, app)
    workers = [w for w in app.workers if w.group == "insights"]
    if workers:
        await app.workers.wait_for_complete(workers)
    await pilot.pause()
    await pilot.pause()


def header(app) -> str:
    return str(app.screen.query_one("#header").render())


async def pick_record(pilot, app, memory_id: str) -> None:
    screen = app.screen
    rec = app.model.records[memory_id]
    screen.reveal(rec)
    await pilot.pause()
    assert screen.records.selected_record.memory_id == memory_id


async def test_header_counts_come_from_the_worker_and_open_their_lists(world):
    app = make_app(world, insights=True)
    async with app.run_test(size=(160, 30)) as pilot:
        await ready(pilot, app)
        c = app.insights.counts
        assert (c.single_episode, c.alternatives, c.pending_sources) == (
            len(app.insights.lists["single"]), len(app.insights.lists["alternatives"]), len(app.insights.lists["pending"]))
        assert "flask001" in app.insights.lists["alternatives"] and "fast0001" in app.insights.lists["alternatives"]
        assert "pend0001" in app.insights.lists["pending"]
        assert f"{c.single_episode} single-episode" in header(app)
        assert f"{c.pending_sources} citing pending" in header(app)
        app.action_open_evidence("pending")
        await pilot.pause()
        assert isinstance(app.screen, EvidenceScreen)
        shown = [r.memory_id for r in app.screen.query_one(EvidenceList).shown]
        assert shown == sorted(app.insights.lists["pending"], key=shown.index) and set(shown) == app.insights.lists["pending"]
        await pilot.press("f")  # pending -> alternatives
        shown = {r.memory_id for r in app.screen.query_one(EvidenceList).shown}
        assert shown == app.insights.lists["alternatives"]


async def test_without_the_worker_nothing_is_shown_yet(world):
    app = make_app(world, insights=False)
    async with app.run_test(size=(160, 30)) as pilot:
        await settle(pilot, app)
        assert app.insights is None and "single-episode" not in header(app)


async def test_badges_on_topic_records(world):
    app = make_app(world, insights=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot, app)
        await pick_record(pilot, app, "rep00001")
        prompt = app.screen.records.highlighted_option.prompt
        first = prompt.renderables[0].plain
        row = app.insights.row("rep00001")
        assert row.single_episode and "\u25cb1s\u00b71d\u00b71b" in first
        app.action_toggle_ascii()
        await pilot.pause()
        await pick_record(pilot, app, "rep00001")
        assert "o1s 1d 1b" in app.screen.records.highlighted_option.prompt.renderables[0].plain


async def test_evidence_screen_enter_opens_the_record_in_topics(world):
    app = make_app(world, insights=True)
    async with app.run_test(size=(160, 30)) as pilot:
        await ready(pilot, app)
        await pilot.press("i")
        assert isinstance(app.screen, EvidenceScreen)
        lst = app.screen.query_one(EvidenceList)
        target = lst.shown[2].memory_id
        lst.move_cursor(row=2)
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        assert app.view == "topics" and not isinstance(app.screen, EvidenceScreen)
        assert app.screen.query_one("#topic-records", RecordList).selected_record.memory_id == target


async def loaded(pilot, app, group: str) -> None:
    """Wait for the screen's loading worker (History / Alternatives compute off the UI thread)."""
    screen = app.screen
    busy = [w for w in screen.workers if w.group == group]
    assert busy or getattr(screen, "history", None) is not None or getattr(screen, "pairs", None)
    if busy:
        await app.workers.wait_for_complete(busy)
    await pilot.pause()
    await pilot.pause()


async def test_history_of_a_record_and_a_revert(world):
    app = make_app(world, insights=True)
    seen = Messages()
    async with app.run_test(size=(160, 40), message_hook=seen) as pilot:
        await ready(pilot, app)
        await pick_record(pilot, app, "flask001")
        before = seen.count(ModelApplied)
        await pilot.press("h")
        assert isinstance(app.screen, HistoryScreen)
        await loaded(pilot, app, "history-load")
        versions = app.screen.history.versions
        assert len(versions) == 4 and versions[-1].text.startswith("The app uses Flask.")
        diff = str(app.screen.query_one("#history-diff").render())
        assert "- The app uses Flask 3 with Jinja." in diff and "+ The app used Flask." in diff
        await pilot.press("end", "v")  # the first version
        assert isinstance(app.screen, ConfirmRevert) and app.screen.allowed
        assert "Revert record flask001" in str(app.screen.query_one("#revert-plan").render())
        await pilot.press("y")
        history_screen = app.screen
        await app.workers.wait_for_complete([w for w in history_screen.workers if w.group == "revert"] or None)
        await pilot.pause()
        await settle(pilot, app)
        (done,) = seen.of(RevertDone)
        assert done.result.ok, done.result
        assert "The app uses Flask.[^" in (world / "memory" / WEB).read_text()
        assert seen.count(ModelApplied) > before
        assert len(history_screen.history.versions) == 5  # the revert is a new commit on top


async def test_a_refused_revert_shows_its_reason(world):
    app = make_app(world, insights=True)
    seen = Messages()
    async with app.run_test(size=(160, 40), message_hook=seen) as pilot:
        await ready(pilot, app)
        await pick_record(pilot, app, "flask001")
        await pilot.press("h")
        await loaded(pilot, app, "history-load")
        await pilot.press("end", "v")
        assert isinstance(app.screen, ConfirmRevert)
        # Someone else writes between the preview and the yes: the revert must refuse.
        text = (world / "memory" / WEB).read_text()
        assert tx.staged_edit(world, WEB, text.replace("Both frameworks", "Two frameworks"), git_env=env(9)).ok
        await pilot.press("y")
        history_screen = app.screen
        await app.workers.wait_for_complete([w for w in history_screen.workers if w.group == "revert"] or None)
        await pilot.pause()
        (done,) = seen.of(RevertDone)
        assert not done.result.ok and done.result.code == "CONCURRENT_UPDATE"
        assert "Revert refused: CONCURRENT_UPDATE" in str(history_screen.query_one("#history-outcome").render())
        assert "The app used Flask." in (world / "memory" / WEB).read_text()


async def test_the_header_over_the_history_shows_the_revision_its_revert_made(world):
    from tui_helpers import screen_text

    app = make_app(world)
    seen = Messages()
    async with app.run_test(size=(160, 40), message_hook=seen) as pilot:
        await ready(pilot, app)
        await pick_record(pilot, app, "flask001")
        old = app.model.revision
        await pilot.press("h")
        await loaded(pilot, app, "history-load")
        history_screen = app.screen
        assert old[:8] in screen_text(app).splitlines()[0]
        await pilot.press("end", "v")
        await pilot.press("y")
        await app.workers.wait_for_complete([w for w in history_screen.workers if w.group == "revert"] or None)
        await pilot.pause()
        await settle(pilot, app)  # the reload the revert asked for
        (done,) = seen.of(RevertDone)
        assert done.result.ok, done.result
        new = app.model.revision
        assert new != old and app.screen is history_screen
        header = screen_text(app).splitlines()[0]
        assert new[:8] in header and old[:8] not in header, (new, old, header)


async def test_topic_history_from_the_tree(world):
    app = make_app(world, insights=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot, app)
        app.screen.tree.focus()
        await pilot.press("h")
        assert isinstance(app.screen, HistoryScreen)
        await loaded(pilot, app, "history-load")
        assert app.screen.history.kind == "topic" and len(app.screen.history.versions) >= 4


async def test_alternatives_pair_and_the_fork_jump(world):
    app = make_app(world, insights=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot, app)
        await pick_record(pilot, app, "flask001")
        await pilot.press("b")
        assert isinstance(app.screen, AlternativesScreen)
        await loaded(pilot, app, "alternatives-load")
        pair = app.screen.pairs[0]
        assert {pair.a.memory_id, pair.b.memory_id} >= {"flask001"} and pair.fork_point == "u1_reply"
        fast = pair.a if pair.a.memory_id == "fast0001" else pair.b
        if fast.memory_id == "fast0001":
            assert fast.on_head  # the head is on u3's reply, FastAPI's branch
        assert "fork at u1_reply" in str(app.screen.query_one("#alt-fork").render())
        await pilot.press("g")
        await pilot.pause()
        await pilot.pause()
        assert app.view == "sessions"
        from memory_tui.tui.widgets.session_graph import SessionGraph

        graph = app.screen.query_one(SessionGraph)
        assert graph.selected_node is not None and graph.selected_node.id == "u1_reply"  # the fork node
        assert app.screen.query_one("#sessions-list").highlighted_option.id == "session:s1"  # of its session


async def test_a_record_without_an_alternative_says_so(world):
    app = make_app(world, insights=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot, app)
        await pick_record(pilot, app, "pend0001")
        await pilot.press("b")
        if isinstance(app.screen, AlternativesScreen):  # still looking, in a worker
            await loaded(pilot, app, "alternatives-load")
        assert not isinstance(app.screen, AlternativesScreen)
        assert any("^pend0001 has no alternative on a sibling branch." == n.message for n in app._notifications)


async def test_history_and_alternatives_load_off_the_ui_thread(world, monkeypatch):
    """Both screens open at once with a loading line while a worker computes; the UI answers."""
    import threading

    from memory_tui.tui.model import insights as insights_mod

    gate = threading.Event()
    real_history, real_alternatives = insights_mod.target_history, insights_mod.record_alternatives
    monkeypatch.setattr(insights_mod, "target_history", lambda *a: (gate.wait(), real_history(*a))[1])
    monkeypatch.setattr(insights_mod, "record_alternatives", lambda *a: (gate.wait(), real_alternatives(*a))[1])
    app = make_app(world, insights=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot, app)
        await pick_record(pilot, app, "flask001")
        for key, cls, group, loading in (("h", HistoryScreen, "history-load", "loading the history of flask001…"),
                                         ("b", AlternativesScreen, "alternatives-load",
                                          "looking for alternatives of ^flask001…")):
            gate.clear()
            await pilot.press(key)
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, cls)
            title = "#history-outcome" if cls is HistoryScreen else "#alternatives-title"
            assert str(screen.query_one(title).render()) == loading
            assert [w for w in screen.workers if w.group == group and not w.is_finished]
            gate.set()
            await loaded(pilot, app, group)
            assert (screen.history if cls is HistoryScreen else screen.pairs)  # filled in
            assert loading not in str(screen.query_one(title).render())
            await pilot.press("escape")
            await pilot.pause()


async def test_fixture_copy_every_record_has_figures(fixture_state):
    app = make_app(fixture_state, insights=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot, app)
        ids = {r.memory_id for t in app.model.topics for r in t.records}
        assert ids and ids <= set(app.insights.by_id)
        await pilot.press("i")
        assert len(app.screen.query_one(EvidenceList).shown) == len(app.insights.rows)


# ------------------------------------------------------------------ snapshots


def _run(*keys: str, record: str | None = None):
    async def run_before(pilot) -> None:
        app = pilot.app
        await ready(pilot, app)
        if record is not None:
            await pick_record(pilot, app, record)
        for key in keys:  # History / Alternatives load in a worker: let it land before the next key
            await pilot.press(key)
            busy = [w for w in app.screen.workers if w.group in ("history-load", "alternatives-load")]
            if busy:
                await app.workers.wait_for_complete(busy)
            await pilot.pause()
        await pilot.pause()

    return run_before


def test_snapshot_evidence_list_in_the_app(snap_compare, world):
    assert snap_compare(make_app(world, insights=True), terminal_size=(140, 20), run_before=_run("i"))


def test_snapshot_record_history_with_a_diff(snap_compare, world):
    assert snap_compare(make_app(world, insights=True), terminal_size=(140, 20), run_before=_run("h", "down", record="flask001"))


def test_snapshot_alternatives_pair(snap_compare, world):
    assert snap_compare(make_app(world, insights=True), terminal_size=(120, 18), run_before=_run("b", record="flask001"))


async def test_figures_follow_the_sessions_that_arrive_after_the_first_paint(world):
    """The app paints from a model without sessions, then fills them in at the same revision:
    the figures must be recomputed with them (the branch counts and pending lists need the DAG)."""
    from memory_tui.tui.model.insights import insights_key, load_insights

    app = make_app(world, insights=True, background=True)  # the app's staged load
    async with app.run_test(size=(160, 30)) as pilot:
        await ready(pilot, app)
        while app.loading or not app.model.sessions_loaded:
            await pilot.pause(0.01)
        await ready(pilot, app)  # the run the sessions stage started
        assert app.model.sessions_loaded
        assert app._insights_key == insights_key(app.model)
        fresh = load_insights(app.model)
        assert app.insights.counts == fresh.counts and app.insights.lists == fresh.lists


async def test_a_fork_jump_from_evidence_leaves_no_screen_over_the_views(world):
    # i, f f f (records with an alternative), b, g: the Evidence screen pushed over Topics must
    # not cover Topics again when 1 is pressed in Sessions.
    from memory_tui.tui.screens.base import ViewScreen

    app = make_app(world, insights=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await ready(pilot, app)
        await pilot.press("i", "f", "f", "f")
        assert isinstance(app.screen, EvidenceScreen) and app.screen.which == "alternatives"
        assert app.screen.query_one(EvidenceList).shown
        await pilot.press("b")
        assert isinstance(app.screen, AlternativesScreen)
        await loaded(pilot, app, "alternatives-load")
        await pilot.press("g")
        await pilot.pause()
        await pilot.pause()
        assert app.view == "sessions" and isinstance(app.screen, ViewScreen)
        await pilot.press("1")
        await pilot.pause()
        await pilot.pause()
        assert app.view == "topics"
        assert isinstance(app.screen, ViewScreen) and app.screen.VIEW == "topics", app.screen_stack
        assert len(app.screen_stack) == 1
