"""The topic editor checks the buffer without waiting for a key (on open, on ctrl+r, after a
change on disk), and on a short screen keeps rows of text with the diagnostics folded."""

from __future__ import annotations

import pytest
from action_harness import until
from tui_helpers import make_app, screen_text, settle, write_minimal_state

from memory_tui.demo import build_demo
from memory_tui.tui.messages import WorkspaceChanged
from memory_tui.tui.screens.editor import EditorScreen

pytestmark = pytest.mark.anyio

# line 3 cites a footnote the file never defines: invalid as it is on disk
BAD = "# Bad\n\nAda likes green tea.[^e-nowhere] ^ab12cd34\n"
KYOTO = "topics/conversations/kyoto-trip-in-spring.md"
KYOTO_ARCHIVE = "memory/sources/openprogram/_v2/local_d3a0000001.md"  # the sources it cites


async def _open(pilot, app, path: str) -> EditorScreen:
    await settle(pilot, app)
    app.view_screens["topics"].reveal_topic(path)
    await pilot.pause()
    await pilot.press("e")  # topic.edit
    await until(pilot, lambda: isinstance(app.screen, EditorScreen) and bool(app.screen.query("#topic-editor")))
    return app.screen


async def _validated(pilot, screen: EditorScreen) -> None:
    """Let every validation asked for so far answer (its worker, then the answer's message)."""
    await pilot.pause()
    runs = [w for w in screen.workers if w.group == "validate"]
    if runs:
        await screen.workers.wait_for_complete(runs)
    await pilot.pause()
    await pilot.pause()


async def test_a_topic_invalid_on_disk_shows_its_error_before_any_key(tmp_path):
    state = write_minimal_state(tmp_path, {"topics/bad.md": BAD})
    app = make_app(state)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open(pilot, app, "topics/bad.md")
        editor = screen.editor
        await until(pilot, lambda: bool(editor.diagnostics))
        assert editor.seq == 0 and not editor.is_dirty  # nothing was typed
        by_line = {d.line: d for d in editor.diagnostics}
        assert by_line[3].message == "undefined footnote: e-nowhere", editor.diagnostics
        assert screen.diagnostics_list.diagnostics == editor.diagnostics
        await pilot.pause()
        text = screen_text(app)
        assert "undefined footnote: e-nowhere" in text and "no problems" not in text, text


async def test_ctrl_r_re_reads_the_file_and_shows_its_errors(tmp_path):
    state = build_demo(tmp_path / "demo")
    app = make_app(state)  # no watcher: ctrl+r is how the owner says "the disk changed"
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open(pilot, app, KYOTO)
        editor = screen.editor
        await _validated(pilot, screen)
        assert editor.diagnostics == ()
        on_disk = state / "memory" / KYOTO
        changed = on_disk.read_text() + "\nUncited prose written by hand.\n"
        on_disk.write_text(changed)
        await pilot.press("ctrl+r")  # app.reload
        await until(pilot, lambda: bool(editor.diagnostics))
        assert editor.text == changed and not editor.is_dirty
        line = changed.split("\n").index("Uncited prose written by hand.") + 1
        assert [d.line for d in editor.diagnostics] == [line], editor.diagnostics
        assert editor.diagnostics[0].message.startswith("memory block ID required")


async def test_a_change_to_a_source_the_topic_cites_is_checked_at_once(tmp_path):
    state = build_demo(tmp_path / "demo")
    app = make_app(state)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _open(pilot, app, KYOTO)
        editor = screen.editor
        await _validated(pilot, screen)
        assert editor.diagnostics == ()
        text = editor.text
        # the topic file stays as it is; the archive its records cite goes away
        archive = state / KYOTO_ARCHIVE
        archive.rename(archive.with_name("elsewhere.md.bak"))
        app.post_message(WorkspaceChanged(frozenset({KYOTO_ARCHIVE})))  # what the watcher posts
        await until(pilot, lambda: bool(editor.diagnostics))
        assert editor.text == text
        assert all(d.message.startswith("invalid source target: ") for d in editor.diagnostics), editor.diagnostics


async def test_at_40x12_the_text_keeps_three_rows_and_the_diagnostics_fold_to_one_line(tmp_path):
    state = write_minimal_state(tmp_path, {"topics/bad.md": BAD})
    app = make_app(state)
    async with app.run_test(size=(40, 12)) as pilot:
        screen = await _open(pilot, app, "topics/bad.md")
        editor = screen.editor
        editor.text = "x" + editor.text  # a second error, on line 1
        await until(pilot, lambda: len(editor.diagnostics) == 2)
        await pilot.pause()
        assert editor.scrollable_content_region.height >= 3
        listed = screen.diagnostics_list
        assert listed.outer_size.height == 1
        rows = screen_text(app).splitlines()
        assert any("x# Bad" in r for r in rows) and any("Ada likes green" in r for r in rows), rows
        # one row: which of how many, where, and the message from its start
        shown = [r for r in rows if "1/2 1:1 memory block ID required" in r]
        assert len(shown) == 1, rows
        assert not any("INVALID_TOPIC_FORMAT" in r and "│" in r for r in rows), rows  # no boxed list
        # the row follows the cursor onto the other error
        editor.move_cursor((2, 0))
        await pilot.pause()
        assert any("2/2 3:21 undefined footnote" in r for r in screen_text(app).splitlines())


async def test_at_80x24_the_diagnostics_list_keeps_its_full_entries(tmp_path):
    # the fold is for short screens only: the check above can fail
    state = write_minimal_state(tmp_path, {"topics/bad.md": BAD})
    app = make_app(state)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(pilot, app, "topics/bad.md")
        editor = screen.editor
        editor.text = "x" + editor.text
        await until(pilot, lambda: len(editor.diagnostics) == 2)
        await pilot.pause()
        assert screen.diagnostics_list.outer_size.height > 2
        text = screen_text(app)
        assert "INVALID_TOPIC_FORMAT" in text and "rule: §3.3 uncited prose" in text, text
