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
