"""The editor screen in the app: live diagnostics from the core, save, unsaved-quit."""

from __future__ import annotations

import json
import re

import pytest
from textual.geometry import Offset
from action_harness import until as _until
from tui_helpers import make_app

from memory_tui.cli import main
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.tui.dialogs.unsaved import UnsavedDialog
from memory_tui.tui.screens.editor import EditorScreen
from memory_tui.tui.widgets.diagnostics_list import DiagnosticsList

pytestmark = pytest.mark.anyio
ADA = "topics/people/ada.md"


async def _open_ada(pilot, app) -> EditorScreen:
    app.view_screens["topics"].reveal_topic(ADA)
    await pilot.pause()
    await pilot.press("e")  # topic.edit
    await _until(pilot, lambda: isinstance(app.screen, EditorScreen) and bool(app.screen.query("#topic-editor")))
    return app.screen


def _gutter_marks(editor) -> set[int]:
    """The 1-based lines whose rendered gutter carries the error mark."""
    from memory_tui.tui.widgets.topic_editor import MARK

    marks = set()
    for y in range(editor.content_size.height):
        strip = editor.render_line(y)
        gutter = "".join(seg.text for seg in strip)[: editor.gutter_width]
        if MARK in gutter:
            row, _ = editor.wrapped_document.offset_to_location(Offset(0, y + editor.scroll_offset.y))
            marks.add(row + 1)
    return marks


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
        # Three errors of three kinds, found by two validation stages: the dropped block id
        # (the block-id contract, OpenProgram's first error) must not hide the uncited prose
        # and the undefined footnote that the strict parse finds after it.
        first = committed.split("\n")[2]
        assert first.endswith(" ^fc30e0e0")
        bad = (committed.replace(first, first[: -len(" ^fc30e0e0")]).rstrip("\n")
               + "\n\nAda walks every day.\n\nAda likes green tea.[^e-nowhere] ^ab12cd34\n")
        editor.text = bad  # as if typed: the change posts a validation request
        await _until(pilot, lambda: len(editor.diagnostics) >= 3)
        await pilot.pause()
        shown = _diag_text(screen)
        bad_lines = bad.split("\n")
        want = {
            3: ("block ID must not be removed: fc30e0e0", "§5.4 contract"),
            bad_lines.index("Ada walks every day.") + 1: ("memory block ID required: people/ada.md", "§3.3 uncited prose"),
            bad_lines.index("Ada likes green tea.[^e-nowhere] ^ab12cd34") + 1: ("undefined footnote: e-nowhere", "§3.2 record"),
        }
        by_line = {d.line: d for d in editor.diagnostics}
        assert set(by_line) == set(want), editor.diagnostics
        for line, (message, rule) in want.items():
            d = by_line[line]
            assert d.code == "INVALID_TOPIC_FORMAT" and d.message == message and d.rule.startswith(rule)
            assert editor.diagnostics_on_line(line) == (d,)
            assert f"{d.where}" in shown and d.message in shown and d.code in shown and rule in shown, shown
        # the gutter: a mark on each of the three lines (after the line number), none elsewhere
        marked = _gutter_marks(editor)
        assert marked == set(want), marked
        assert (root / ADA).read_text() == committed  # validation installs nothing
        # fix them one at a time, as the owner would; each fix takes its error away
        definition = committed.split("\n")[4]
        assert definition.startswith("[^e-56cb8223de]: ")
        fixes = [
            (first[: -len(" ^fc30e0e0")], first),  # put the block id back
            ("\n\nAda walks every day.\n", "\n"),  # drop the uncited prose
            ("^ab12cd34\n", "^ab12cd34\n\n" + definition.replace("[^e-56cb8223de]", "[^e-nowhere]") + "\n"),
        ]
        text = bad
        for n, (old, fix) in enumerate(fixes, 1):
            assert text.count(old) == 1, old
            text = text.replace(old, fix)
            editor.text = text
            await _until(pilot, lambda: len(editor.diagnostics) == 3 - n)
        await pilot.pause()
        assert screen.diagnostics_list.option_count == 0 and not editor.diagnostics
        assert _gutter_marks(editor) == set()
        await pilot.press("ctrl+s")  # editor.save
        await _until(pilot, lambda: screen.last_save is not None)
        assert screen.last_save.ok, screen.last_save.diagnostics
        assert not editor.is_dirty
    new_rev = workspace_revision(root)
    assert new_rev != rev and screen.last_save.result.revision == new_rev
    saved = (root / ADA).read_text()
    assert first in saved and "Ada likes green tea.[^e-" in saved and "walks every day" not in saved
    # the runtime allocates the new block's id (one the owner typed for a new block is not kept);
    # a hand-written footnote id stays as typed
    new_id = re.search(r"^Ada likes green tea\.\[\^e-nowhere\] \^([0-9a-f]{8})$", saved, re.M)
    assert new_id and new_id.group(1) != "ab12cd34", saved
    monkeypatch.setenv("MEMORY_TUI_CONFIG", str(tmp_path / "none.toml"))
    capsys.readouterr()
    assert main(["--state", str(fixture_state), "--json", "topics"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["revision"] == new_rev
    ada = next(t for t in data["topics"] if t["path"] == ADA)
    assert ada["records"] == 2 and ada["problems"] == []


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
        # what was wrong and the fix, in the words the CLI's `edit` prints (core.tx.refusals)
        said = [n.message for n in app._notifications if n.message.startswith("not saved")]
        assert said and "uncited prose" in said[-1] and "Fix: make it a record" in said[-1], said
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
    from memory_tui.core.tx import api as tx
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
