"""In-app snapshots of the owner's actions (issue 10): the editor with every error
of an edit on its line, a running job frozen mid-way, the job result, the conflict dialog, the
confirm modal with its dry-run preview, the job-history panel.

Each runs the real app on a private copy of OpenProgram's fixture (skipped without
``../shared``), with a fixed clock and git identity so every figure on screen is the same on
every run. Regenerate one with ``--snapshot-update -k NAME`` and read the SVG's text.
"""

from __future__ import annotations

import shutil
import time

import pytest
from action_harness import until as _until
from tui_helpers import make_app, settle

from memory_tui.core.tx import api as tx
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.tui.dialogs.confirm_job import ConfirmJobDialog
from memory_tui.tui.dialogs.conflict import ConflictDialog
from memory_tui.tui.dialogs.job_history import JobHistoryDialog
from memory_tui.tui.dialogs.job_result import JobResultDialog
from memory_tui.tui.messages import WorkspaceChanged
from memory_tui.tui.screens.editor import EditorScreen

ADA = "topics/people/ada.md"
NOW = 1796100000.0


@pytest.fixture
def state(_fixture_master, tmp_path):
    """A private copy named like the real thing, so the header shows ``~/.openprogram``."""
    dest = tmp_path / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    return dest


def _app(state):
    app = make_app(state)
    app.job_context_options = {"git_env": fixed_env(), "clock": lambda: NOW}
    return app


async def _open_ada(pilot) -> EditorScreen:
    app = pilot.app
    await settle(pilot, app)
    app.view_screens["topics"].reveal_topic(ADA)
    await pilot.pause()
    await pilot.press("e")  # topic.edit
    await _until(pilot, lambda: isinstance(app.screen, EditorScreen) and bool(app.screen.query("#topic-editor")))
    app.screen.editor.cursor_blink = False  # a blinking cursor is on or off at the moment of the shot
    return app.screen


def _three_errors(committed: str) -> str:
    first = committed.split("\n")[2]
    return (committed.replace(first, first[: -len(" ^fc30e0e0")]).rstrip("\n")
            + "\n\nAda walks every day.\n\nAda likes green tea.[^e-nowhere] ^ab12cd34\n")


async def _editor_with_errors(pilot) -> None:
    screen = await _open_ada(pilot)
    editor = screen.editor
    editor.text = _three_errors(editor.text)
    await _until(pilot, lambda: len(editor.diagnostics) == 3)
    editor.move_cursor((2, 0))  # on the dropped id's line: its message is in the border
    await pilot.pause()
    await pilot.pause()


def test_snapshot_editor_with_inline_errors(snap_compare, state):
    assert snap_compare(_app(state), terminal_size=(120, 30), run_before=_editor_with_errors)


def test_snapshot_editor_with_inline_errors_80x24(snap_compare, state):
    assert snap_compare(_app(state), terminal_size=(80, 24), run_before=_editor_with_errors)


async def _confirm(pilot, kind: str = "write-all-forced") -> None:
    app = pilot.app
    await settle(pilot, app)
    await app.run_action(f"run_job('{kind}')")
    await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
    await pilot.pause()


def test_snapshot_confirm_with_the_dry_run_preview(snap_compare, state):
    assert snap_compare(_app(state), terminal_size=(120, 36), run_before=_confirm)


def test_snapshot_running_job_with_frozen_progress(snap_compare, state, monkeypatch):
    """The write stops at its second batch (the first one written) until the app closes, so
    the header's bar shows 1 of the 2 batches the preview planned."""
    import memory_tui.tui.shell.job_flow as job_flow
    from memory_tui.tui import jobs as jobs_mod

    app = _app(state)

    def held(request, settings, opts=None):
        spec = jobs_mod.spec_for(request, settings, opts)
        inner = spec.run

        def run(ctx):
            report = ctx.progress

            def progress(event):
                report(event)
                if event.phase == "batch" and event.done == 1:
                    # frozen until the snapshot is taken and the app exits (or is cancelled);
                    # bounded, so a run that never reaches the shot cannot hang the suite
                    for _ in range(3000):
                        if not app.is_running or ctx.cancelled():
                            break
                        time.sleep(0.02)

            ctx.progress = progress
            return inner(ctx)

        spec.run = run
        return spec

    monkeypatch.setattr(job_flow, "spec_for", held)

    async def run_before(pilot) -> None:
        await _confirm(pilot)
        await pilot.press("y")
        await _until(pilot, lambda: (ev := app.jobs.get("write-all-forced")) is not None
                     and ev.phase == "batch" and ev.done == 1)
        # the reload of the written batch is in: the header's pending count follows it
        await _until(pilot, lambda: not app._load_running and not app._queued_loads)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 24), run_before=run_before)


async def _run_write(pilot) -> None:
    app = pilot.app
    await _confirm(pilot)
    await pilot.press("y")
    await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))
    await pilot.pause()


def test_snapshot_job_result(snap_compare, state):
    assert snap_compare(_app(state), terminal_size=(120, 36), run_before=_run_write)


def test_snapshot_job_history_panel(snap_compare, state):
    async def run_before(pilot) -> None:
        app = pilot.app
        await _run_write(pilot)
        await pilot.press("escape")
        await settle(pilot, app)
        await pilot.press("J")  # job.history
        # the persisted part is read in a worker: its status line says when it is in
        await _until(pilot, lambda: isinstance(app.screen, JobHistoryDialog)
                     and "persisted run" in str(app.screen.query_one("#history-status").render()))
        await pilot.pause()

    assert snap_compare(_app(state), terminal_size=(120, 30), run_before=run_before)


def test_snapshot_conflict_dialog_with_its_diff(snap_compare, state):
    async def run_before(pilot) -> None:
        app = pilot.app
        screen = await _open_ada(pilot)
        committed = screen.editor.text
        screen.editor.text = committed.replace("wants short answers", "wants brief answers")
        theirs = committed.replace("wants short answers", "wants quick answers")
        assert tx.staged_edit(state, ADA, theirs, git_commit="off").ok  # another program saves
        app.post_message(WorkspaceChanged(frozenset({f"memory/{ADA}"})))  # what the watcher posts
        await _until(pilot, lambda: isinstance(app.screen, ConflictDialog) and bool(app.screen.query("#mine")))
        await pilot.press("d")  # conflict.diff
        await pilot.pause()
        await pilot.pause()

    assert snap_compare(_app(state), terminal_size=(120, 36), run_before=run_before)
