"""A job in the app moves as it works: progress per batch, the header's pending count after
each batch, and ``x`` answered at once and in force before the next transaction."""

from __future__ import annotations

import threading

import pytest
from action_harness import until as _until
from tui_helpers import Messages, make_app

from memory_tui.core.store.gitlog import fixed_env
from memory_tui.tui.dialogs.confirm_job import ConfirmJobDialog
from memory_tui.tui.messages import JobFinished
from memory_tui.tui.dialogs.job_result import JobResultDialog

pytestmark = pytest.mark.anyio
NOW = 1796100000.0


def _app(state):
    app = make_app(state)
    app.job_context_options = {"git_env": fixed_env(), "clock": lambda: NOW}
    return app


def _gate_at(monkeypatch, phase: str, done: int):
    """Hold the job when it reports ``phase`` with ``done``; returns (reached, release)."""
    import memory_tui.tui.shell.job_flow as job_flow
    from memory_tui.tui import jobs as jobs_mod

    reached, release = threading.Event(), threading.Event()

    def gated(request, settings, opts=None):
        spec = jobs_mod.spec_for(request, settings, opts)
        inner = spec.run

        def run(ctx):
            report = ctx.progress

            def progress(event):
                report(event)
                if event.phase == phase and event.done == done and not reached.is_set():
                    reached.set()
                    release.wait()

            ctx.progress = progress
            return inner(ctx)

        spec.run = run
        return spec

    monkeypatch.setattr(job_flow, "spec_for", gated)
    return reached, release


def _header(app) -> str:
    return str(app.screen.query_one("#header").render())


async def _confirm(pilot, app):
    await app.run_action("run_job('write-all-forced')")
    await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
    planned = sum(1 for b in app.screen.preview.batches if b.result == "planned")
    await pilot.press("y")
    return planned


async def test_progress_and_the_pending_count_follow_each_batch(fixture_state, monkeypatch):
    # held when the second batch starts: the first is written, marked and committed
    reached, release = _gate_at(monkeypatch, "batch", 1)
    app = _app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        pending_before = app.model.status.pending_turns
        assert f"{pending_before} pending" in _header(app)
        planned = await _confirm(pilot, app)
        assert planned == 2
        await _until(pilot, reached.is_set)
        try:
            # the header's progress says one batch of two is done while the second waits
            await _until(pilot, lambda: "1/2" in _header(app))
            # and the pending count follows the batch without waiting for the job's end
            await _until(pilot, lambda: app.model.status.pending_turns is not None
                         and app.model.status.pending_turns < pending_before)
            assert app.jobs  # still running
            await _until(pilot, lambda: f"{app.model.status.pending_turns} pending" in _header(app))
        finally:
            release.set()
        await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))


async def test_cancel_is_answered_at_once_and_stops_before_the_next_transaction(fixture_state, monkeypatch):
    # held inside the first batch's transaction (its writer is about to run)
    reached, release = _gate_at(monkeypatch, "writer", 0)
    app = _app(fixture_state)
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        await _confirm(pilot, app)
        await _until(pilot, reached.is_set)
        try:
            await pilot.press("x")  # job.cancel
            # the header says so at once, while the transaction in flight is still running
            await _until(pilot, lambda: "cancelling" in _header(app))
            assert app.jobs and not seen.of(JobFinished)
        finally:
            release.set()
        await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))
        (finished,) = seen.of(JobFinished)
        assert finished.cancelled
        (summary,) = app.job_results
        # the transaction in flight finished whole; the second batch was never begun
        assert summary.message.startswith("1 of 2 batch(es) written"), summary.message
        assert "cancelling" not in app.job_label()


async def test_with_the_watcher_a_batch_reloads_its_sessions_and_the_topics_wait_for_the_end(fixture_state, monkeypatch):
    # live reload on, as an owner runs it: after a batch the pending count follows, but the
    # topic views are not rebuilt beside the job (most of what the app spent beyond the CLI);
    # the reload at the job's end brings them
    import memory_tui.tui.shell.loading as app_mod  # where the app's reloads call the loader

    reached, release = _gate_at(monkeypatch, "batch", 1)
    app = make_app(fixture_state, watch=True)
    app.job_context_options = {"git_env": fixed_env(), "clock": lambda: NOW}
    reloads: list[set | None] = []
    real = app_mod.load_model

    def spy(*a, touched=None, **k):
        reloads.append(None if touched is None else set(touched))
        return real(*a, touched=touched, **k)

    monkeypatch.setattr(app_mod, "load_model", spy)
    async with app.run_test(size=(120, 40)) as pilot:
        pending_before = app.model.status.pending_turns
        state_before = app.model.state
        await _confirm(pilot, app)
        await _until(pilot, reached.is_set)
        try:
            await _until(pilot, lambda: app.model.status.pending_turns is not None
                         and app.model.status.pending_turns < pending_before)
            assert app.jobs  # still running
            during = [r for r in reloads if r is not None]
            assert during and all(not p.startswith("memory/") for r in during for p in r)
            assert app.model.state is state_before  # the topics were not read again
        finally:
            release.set()
        await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))
        await _until(pilot, lambda: app.model.state is not state_before)  # the end's reload: everything
