"""A refused record change says, in the app as in the CLI, what the owner did wrong and how to
fix it (``core.tx.refusals``), beside the core's code and message, which stay as they are."""

from __future__ import annotations

from functools import partial

import pytest
from textual.widgets import Static, TextArea

from action_harness import until as until_held
from tui_helpers import make_app

from memory_tui.core.store.gitlog import fixed_env
from memory_tui.tui.dialogs.record_change import ConfirmRecordDelete, RecordOutcomeDialog, RecordTextDialog
from memory_tui.tui.widgets import RecordList

pytestmark = pytest.mark.anyio
until = partial(until_held, tries=2000)


def _app(state):
    app = make_app(state)
    app.job_context_options = {"git_env": fixed_env()}
    return app


async def _select(pilot, app, memory_id: str) -> None:
    await app.open_record(app.model.records[memory_id])
    await pilot.pause()
    lst = app.view_screens["topics"].query_one("#topic-records", RecordList)
    assert lst.selected_record is not None and lst.selected_record.memory_id == memory_id
    lst.focus()
    await pilot.pause()


async def test_a_refused_delete_is_headed_by_what_was_wrong(fixture_state):
    app = _app(fixture_state)
    async with app.run_test(size=(160, 45)) as pilot:
        await _select(pilot, app, "fa3c8017")  # fc30e0e0 links to it
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmRecordDelete))
        await pilot.click("#delete")
        await until(pilot, lambda: isinstance(app.screen, RecordOutcomeDialog) and bool(app.screen.query("#outcome")))
        shown = str(app.screen.query_one("#outcome", Static).render()).splitlines()
        assert shown[0] == "delete fa3c8017 refused: ^fa3c8017 cannot be deleted: 1 record(s) link to it (#^fa3c8017)"
        assert "A topic file breaks the topic grammar" not in "\n".join(shown)
        assert any(l.startswith("fix: remove or retarget the #^fa3c8017 link") for l in shown)
        assert any(l.startswith("INVALID_TOPIC_FORMAT: dangling block link: fa3c8017") for l in shown)  # code kept


async def test_a_refused_text_update_names_the_citation_typed(fixture_state):
    app = _app(fixture_state)
    async with app.run_test(size=(160, 45)) as pilot:
        await _select(pilot, app, "fc30e0e0")
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, RecordTextDialog) and bool(app.screen.query(TextArea)))
        dialog = app.screen
        dialog.query_one(TextArea).text = "Ada likes tea.[^e-bogus]"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: not dialog.saving and "refused" in str(dialog.query_one("#text-errors", Static).render()))
        errors = str(dialog.query_one("#text-errors", Static).render())
        assert "it contains the citation [^e-bogus]" in errors and "fix: remove [^e-bogus]" in errors
        assert "INVALID_ARGUMENT" in errors
