"""The job runner: a real pipeline job in the app's worker, its progress, its cancel."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from tui_helpers import Messages, make_app

from memory_tui.cli import main
from memory_tui.pipeline.context import Context, JobCancelled, JobEvent
from memory_tui.pipeline.write import write
from memory_tui.tui.jobs import JobSpec
from memory_tui.tui.messages import JobFinished

pytestmark = pytest.mark.anyio


def _disk(state: Path) -> dict[str, bytes]:
    return {str(p.relative_to(state)): p.read_bytes() for p in sorted(state.rglob("*")) if p.is_file()}


async def test_a_slow_job_shows_progress_and_cancels_with_nothing_written(fixture_state):
    gate = threading.Event()  # holds the job at its first batch until the test has cancelled

    def slow_write(ctx: Context):
        report_progress = ctx.progress

        def progress(event: JobEvent) -> None:
            assert report_progress is not None
            report_progress(event)
            if event.phase == "batch":
                gate.wait()

        ctx.progress = progress
        return write(ctx, force=True)

    before = _disk(fixture_state)
    app = make_app(fixture_state)
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        app.launch_job(JobSpec("write", slow_write))
        for _ in range(400):  # bounded: never a timed assertion
            await pilot.pause(0.02)
            if app.jobs.get("write") and app.jobs["write"].phase == "batch":
                break
        event = app.jobs["write"]
        assert event.phase == "batch" and "turns" in event.message
        assert "write batch 0" in str(app.screen.query_one("#header").render())
        await pilot.press("x")  # job.cancel
        gate.set()
        await app.workers.wait_for_complete([w for w in app.workers if w.group == "job"])
        await pilot.pause()
        await pilot.pause()
        assert app.jobs == {}
        (finished,) = seen.of(JobFinished)
        assert finished.cancelled and not finished.ok
        assert finished.result is not None and finished.result.written == []
    assert _disk(fixture_state) == before


async def test_a_job_that_runs_through_reports_success_and_reloads(fixture_state):
    app = make_app(fixture_state)
    messages = Messages()
    async with app.run_test(size=(120, 40), message_hook=messages) as pilot:
        seen: list[JobEvent] = []

        def recorded_write(ctx: Context):
            report_progress = ctx.progress

            def progress(event: JobEvent) -> None:
                seen.append(event)
                assert report_progress is not None
                report_progress(event)

            ctx.progress = progress
            return write(ctx, force=True)

        revision = app.model.revision
        app.launch_job(JobSpec("write", recorded_write))
        await app.workers.wait_for_complete([w for w in app.workers if w.group == "job"])
        for _ in range(200):
            await pilot.pause(0.02)
            if messages.of(JobFinished) and app.model.revision != revision:
                break
        (finished,) = messages.of(JobFinished)
        assert finished.ok and not finished.cancelled, finished.error
        assert finished.result.written
        assert any(e.phase == "batch" for e in seen)
        assert app.model.revision != revision  # the app re-read the workspace


def test_write_cancelled_before_its_first_transaction_changes_nothing(fixture_state):
    before = _disk(fixture_state)
    ctx = Context(fixture_state, cancelled=lambda: True)
    with pytest.raises(JobCancelled) as info:
        write(ctx, force=True)
    assert info.value.phase == "batch" and info.value.done == 0
    assert _disk(fixture_state) == before


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
def test_cli_write_prints_progress_lines(fixture_state, capsys, monkeypatch, anyio_backend, tmp_path):
    monkeypatch.setenv("MEMORY_TUI_CONFIG", str(tmp_path / "none.toml"))
    code = main(["write", "--force", "--state", str(fixture_state)])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [l for l in err.splitlines() if l.startswith("writing memory: batch ")]
    assert lines, err
    assert "turns" in lines[0] and "tokens" in lines[0]
