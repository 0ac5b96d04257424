"""Keys as a new owner meets them: the focus never lands where a key types instead of acting,
every dialog has a key that confirms it, and every binding of every screen, widget and
dialog is in the help and in the command palette."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from action_harness import until as until_held
from textual.widgets import Input, RadioButton
from tui_helpers import make_app

from memory_tui.core.gitlog import fixed_env
from memory_tui.core.workspace import workspace_revision
from memory_tui.tui.dialogs.move_picker import MovePicker
from memory_tui.tui.dialogs.record_change import ConfirmRecordDelete, RecordOutcomeDialog
from memory_tui.tui.widgets import RecordList

pytestmark = pytest.mark.anyio
until = partial(until_held, tries=2000)
CLI = "topics/projects/cli-language.md"


def _app(state: Path):
    app = make_app(state)
    app.job_context_options = {"git_env": fixed_env()}
    return app


async def test_tab_after_a_filter_never_lands_in_the_filter(fixture_state):
    app = _app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("slash", *"cli", "enter")
        screen = app.screen
        assert app.filter_text == "cli" and isinstance(app.focused, type(screen.list_widget()))
        seen = []
        for _ in range(4):
            await pilot.press("tab")
            seen.append(app.focused)
        assert not any(isinstance(w, Input) for w in seen), seen
        assert any(isinstance(w, RecordList) for w in seen)
        while not isinstance(app.focused, RecordList):
            await pilot.press("tab")
        assert app.focused.selected_record is not None
        await pilot.press("d")  # record.delete: asks, never types into the filter
        await until(pilot, lambda: isinstance(app.screen, ConfirmRecordDelete))
        assert screen.query_one("#filter", Input).value == "cli" and app.filter_text == "cli"
        await pilot.press("escape")
        await pilot.pause()
        # `/` still goes back into the filter to change it
        await pilot.press("slash", "end", "s")
        assert isinstance(app.focused, Input) and app.filter_text == "clis"


async def test_the_move_dialog_confirms_with_its_key(fixture_state):
    root = fixture_state / "memory"
    rev = workspace_revision(root)
    app = _app(fixture_state)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.open_record(app.model.records["9c2b1a83"])
        await pilot.pause()
        app.view_screens["topics"].query_one("#topic-records", RecordList).focus()
        await pilot.press("m")  # record.move
        await until(pilot, lambda: isinstance(app.screen, MovePicker) and app.screen.topic_choice is not None)
        picker = app.screen
        picker.query_one("#pos-start", RadioButton).value = True
        await pilot.pause()
        picker.query_one("#new-headings", Input).focus()  # even from the text input
        await pilot.press("ctrl+s")  # move.confirm
        await until(pilot, lambda: isinstance(app.screen, RecordOutcomeDialog) and bool(app.screen.query("#outcome")))
        outcome = app.view_screens["topics"].record_outcomes[-1]
        assert outcome.ok, outcome.lines()
    text = (root / CLI).read_text()
    assert text.index("^9c2b1a83") < text.index("^b1f8ed16") and workspace_revision(root) != rev


# ---------------------------------------------------------------------- Sessions side panel
SID = "local_a1b2c3d4e5"


async def _sessions(pilot, app, node: str | None = None):
    from tui_helpers import dry_runs_done, settle

    await settle(pilot, app)
    await pilot.press("5")
    await pilot.pause()
    screen = app.screen
    assert screen.focus_session(SID, node)
    await pilot.pause()
    await dry_runs_done(pilot, app)
    return screen


async def test_another_node_shows_its_verdict_from_the_first_line(fixture_state):
    app = make_app(fixture_state)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _sessions(pilot, app)
        side = screen.query_one("#sessions-side")
        graph = screen.query_one("#sessions-graph")
        assert side.max_scroll_y > 0  # verdict and node detail are taller than the panel
        side.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert side.scroll_y > 0
        before = graph.selected_node.id
        await pilot.press("down")
        await pilot.pause()
        assert graph.selected_node.id != before
        assert side.scroll_y == 0
        # a reload that keeps the node keeps where the owner scrolled to
        side.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        kept = side.scroll_y
        app.load_in_background(None)
        await _loads(pilot, app)
        assert graph.selected_node.id != before and side.scroll_y == kept


async def _loads(pilot, app) -> None:
    loads = [w for w in app.workers if w.group == "load"]
    if loads:
        await app.workers.wait_for_complete(loads)
    await pilot.pause()
    await pilot.pause()


async def test_the_dry_run_lands_after_a_reload_that_changed_nothing_visible(fixture_state, monkeypatch):
    """After a job the app reloads (a new Sessions model: the panel's dry run starts again),
    then the watcher reports the job's own files: that reload changes nothing visible and
    swaps the model without redrawing. The dry run started for the first must still land."""
    import threading

    import memory_tui.tui.screens.sessions as sessions_mod
    from tui_helpers import dry_runs_done

    from memory_tui.tui.widgets.branch_verdict import BranchVerdict

    gate = threading.Event()
    gate.set()
    real = sessions_mod.dry_run

    def held(*a, **kw):
        gate.wait()
        return real(*a, **kw)

    monkeypatch.setattr(sessions_mod, "dry_run", held)
    app = make_app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _sessions(pilot, app)
        panel = screen.query_one(BranchVerdict)
        assert "computing the dry run" not in panel.plain
        gate.clear()
        app.load_in_background(None)  # what a finished job asks for
        await _loads(pilot, app)
        assert "computing the dry run" in panel.plain
        first = screen.sessions
        node = next(iter(fixture_state.glob(f"sessions/{SID}/history/*.json")))
        app.load_in_background({str(node.relative_to(fixture_state))})  # the watcher, nothing changed
        await _loads(pilot, app)
        assert screen.sessions is not first  # a new model, swapped in without a redraw
        gate.set()
        await dry_runs_done(pilot, app)
        await dry_runs_done(pilot, app)
        assert "computing the dry run" not in panel.plain, panel.plain
        assert screen.verdict is not None and screen.verdict.plan is not None
