"""The editor screen in the app: live diagnostics from the core, save, unsaved-quit."""

from __future__ import annotations

import json

import pytest
from tui_helpers import make_app

from memory_tui.cli import main
from memory_tui.core.gitlog import fixed_env
from memory_tui.core.workspace import workspace_revision
from memory_tui.tui.dialogs.unsaved import UnsavedDialog
from memory_tui.tui.screens.editor import EditorScreen
from memory_tui.tui.widgets.diagnostics_list import DiagnosticsList

pytestmark = pytest.mark.anyio
ADA = "topics/people/ada.md"


async def _until(pilot, cond, steps: int = 500) -> None:
    for _ in range(steps):  # bounded waits, never a timed assertion
        if cond():
            return
        await pilot.pause(0.02)
    raise AssertionError("condition never became true")


async def _open_ada(pilot, app) -> EditorScreen:
    app.view_screens["topics"].reveal_topic(ADA)
    await pilot.pause()
    await pilot.press("e")  # topic.edit
    await _until(pilot, lambda: isinstance(app.screen, EditorScreen) and bool(app.screen.query("#topic-editor")))
    return app.screen


def _diag_text(screen) -> str:
    lst = screen.query_one(DiagnosticsList)
    return "\n".join(str(lst.get_option_at_index(i).prompt) for i in range(lst.option_count))


async def test_three_errors_show_then_a_fix_saves(fixture_state, capsys, monkeypatch, tmp_path):
    app = make_app(fixture_state)
    app.job_context_options = {"git_env": fixed_env()}
    root = fixture_state / "memory"
    committed = (root / ADA).read_text()
    rev = workspace_revision(root)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await _open_ada(pilot, app)
        editor = screen.editor
        # Three errors at once. (A dropped block id is not among them: the core's validate
        # stops at that check, so it would be the only error reported.)
        bad = committed.rstrip("\n") + "\n\nAda walks every day.\n\nAda swims daily. ^ab99cd00\n\nAda likes green tea.[^e-nowhere] ^ab12cd34\n"
        editor.text = bad  # as if typed: the change posts a validation request
        await _until(pilot, lambda: len(editor.diagnostics) >= 3)
        await pilot.pause()
        shown = _diag_text(screen)
        bad_lines = bad.split("\n")
        want = {
            bad_lines.index("Ada walks every day.") + 1: "memory block ID required",
            bad_lines.index("Ada swims daily. ^ab99cd00") + 1: "memory block ID required",
            bad_lines.index("Ada likes green tea.[^e-nowhere] ^ab12cd34") + 1: "undefined footnote: e-nowhere",
        }
        by_line = {d.line: d for d in editor.diagnostics}
        assert set(by_line) == set(want), editor.diagnostics
        for line, message in want.items():
            d = by_line[line]
            assert d.code == "INVALID_TOPIC_FORMAT" and message in d.message
            assert f"{d.where}" in shown and d.message in shown and d.code in shown, shown
        assert (root / ADA).read_text() == committed  # validation installs nothing
        fixed = committed.replace("wants short answers", "wants brief answers")
        editor.text = fixed
        await pilot.press("ctrl+s")  # editor.save
        await _until(pilot, lambda: screen.last_save is not None)
        assert screen.last_save.ok, screen.last_save.diagnostics
        assert not editor.is_dirty
    new_rev = workspace_revision(root)
    assert new_rev != rev and screen.last_save.result.revision == new_rev
    assert (root / ADA).read_text() == fixed
    monkeypatch.setenv("MEMORY_TUI_CONFIG", str(tmp_path / "none.toml"))
    capsys.readouterr()
    assert main(["--state", str(fixture_state), "topics", "--json"]) == 0
    out = capsys.readouterr().out
    assert "brief answers" in out or new_rev in out
    data = json.loads(out)
    assert ADA in json.dumps(data)


async def test_a_refused_save_keeps_the_buffer_and_leaving_unsaved_asks(fixture_state):
    app = make_app(fixture_state)
    root = fixture_state / "memory"
    committed = (root / ADA).read_text()
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await _open_ada(pilot, app)
        bad = committed + "\nUncited prose.\n"
        screen.editor.text = bad
        await pilot.press("ctrl+s")
        await _until(pilot, lambda: screen.last_save is not None)
        assert not screen.last_save.ok and screen.editor.text == bad
        assert any(d.code == "INVALID_TOPIC_FORMAT" for d in screen.editor.diagnostics)
        await pilot.press("escape")  # editor.back with unsaved changes
        await _until(pilot, lambda: isinstance(app.screen, UnsavedDialog))
        await pilot.press("escape")  # cancel: stay in the editor
        await _until(pilot, lambda: app.screen is screen)
        assert screen.editor.text == bad
        await pilot.press("escape")
        await _until(pilot, lambda: isinstance(app.screen, UnsavedDialog))
        app.screen.dismiss(__import__("memory_tui.tui.dialogs.unsaved", fromlist=["UnsavedChoice"]).UnsavedChoice("discard"))
        await _until(pilot, lambda: not isinstance(app.screen, (EditorScreen, UnsavedDialog)))
    assert (root / ADA).read_text() == committed


@pytest.mark.parametrize("choice", ["take_theirs", "keep_mine", "see_diff"])
async def test_a_change_on_disk_under_unsaved_edits_offers_the_conflict_dialog(fixture_state, choice):
    from memory_tui.core import transaction as tx
    from memory_tui.tui.dialogs.conflict import ConflictDialog
    from memory_tui.tui.messages import WorkspaceChanged

    app = make_app(fixture_state)
    root = fixture_state / "memory"
    committed = (root / ADA).read_text()
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await _open_ada(pilot, app)
        mine = committed.replace("wants short answers", "wants brief answers")
        screen.editor.text = mine
        theirs = committed.replace("wants short answers", "wants quick answers")
        assert tx.staged_edit(fixture_state, ADA, theirs, git_commit="off").ok  # OpenProgram, say
        app.post_message(WorkspaceChanged(frozenset({f"memory/{ADA}"})))  # what the watcher posts
        await _until(pilot, lambda: isinstance(app.screen, ConflictDialog) and bool(app.screen.query("#mine")))
        dialog = app.screen
        if choice == "take_theirs":
            await pilot.press("t")
            await _until(pilot, lambda: app.screen is screen)
            assert screen.editor.text == theirs and not screen.editor.is_dirty
        elif choice == "keep_mine":
            await pilot.press("m")
            await _until(pilot, lambda: app.screen is screen)
            assert screen.editor.text == mine and screen.editor.base_text == theirs and screen.editor.is_dirty
            await pilot.press("ctrl+s")
            await _until(pilot, lambda: screen.last_save is not None)
            assert screen.last_save.ok and (root / ADA).read_text() == mine
        else:
            await pilot.press("d")  # conflict.diff shows both sides inside the dialog
            await pilot.pause()
            diff = dialog.query_one("#diff")
            assert diff.display and diff.old == theirs and diff.new == mine
            body = str(diff.query_one("#diff-body").render())
            assert "quick answers" in body and "brief answers" in body
            await pilot.press("escape")  # decide later: the buffer is kept
            await _until(pilot, lambda: app.screen is screen)
            assert screen.editor.text == mine and screen.conflicts == [None]
        if choice != "keep_mine":
            assert (root / ADA).read_text() == theirs
