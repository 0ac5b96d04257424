"""The same write job through the app's job runner and through the CLI does the same work,
and the benchmark's app row measures the app rather than its own polling.

Counts, never times: the pipeline functions a forced write spends its time in are counted
in the job's own thread, for ``memory-tui write --force`` and for the app's
"Write all sessions (forced)" on two copies of the same state."""

from __future__ import annotations

import asyncio
import importlib.util
import shutil
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from tui_helpers import make_app

import memory_tui.pipeline.context as pctx
import memory_tui.pipeline.recovery as recovery
import memory_tui.pipeline.reorganize as reorganize
import memory_tui.pipeline.write as pwrite
import memory_tui.pipeline.txport as txport
import memory_tui.sessions.store as store

pytestmark = pytest.mark.anyio

# the forced write's hot path: reading sessions, the writer, the install, marks and organize
_HOT = {f.__code__: f"{f.__module__}.{f.__qualname__}" for f in (
    pwrite.write_batch, pwrite.write_session, pctx.load_snapshot, store.load_sessions, store.load_session_dir,
    store.parse_node, pctx.run_writer,
    recovery.finish_batch, reorganize.organize_locked, reorganize.plan, txport.TransactionPort.commit_edits,
)}


def _counting(counts: Counter):
    def profile(frame, event, _arg):
        if event == "call":
            name = _HOT.get(frame.f_code)
            if name is not None:
                counts[name] += 1
    return profile


def _cli_counts(state: Path) -> Counter:
    from memory_tui.cli import main

    counts: Counter = Counter()
    sys.setprofile(_counting(counts))
    try:
        rc = main(["write", "--force", "--state", str(state)])
    finally:
        sys.setprofile(None)
    assert rc == 0
    return counts


async def _app_counts(state: Path) -> Counter:
    from memory_tui.tui.jobs import JobRequest, spec_for
    from memory_tui.tui.messages import JobFinished

    counts: Counter = Counter()
    finished: list = []
    app = make_app(state, background=True)
    async with app.run_test(size=(120, 40), message_hook=lambda m: finished.append(m) if isinstance(m, JobFinished) else None) as pilot:
        while app.loading is not None or app.model is None:
            await pilot.pause(0.05)
        spec = spec_for(JobRequest("write-all-forced"), app.settings.writer)
        inner = spec.run

        def run(ctx):  # in the job's thread: count there, and only there
            assert threading.current_thread() is not threading.main_thread()
            sys.setprofile(_counting(counts))
            try:
                return inner(ctx)
            finally:
                sys.setprofile(None)

        spec.run = run
        app.launch_job(spec)
        for _ in range(2000):
            if finished:
                break
            await pilot.pause(0.05)
        assert finished and finished[0].ok, finished
    return counts


async def test_a_forced_write_does_the_same_work_in_the_app_as_in_the_cli(fixture_state: Path, tmp_path: Path) -> None:
    other = tmp_path / "copy"
    shutil.copytree(fixture_state, other, symlinks=True)
    cli = _cli_counts(fixture_state)
    app = await _app_counts(other)
    assert cli[f"{pwrite.write_batch.__module__}.write_batch"] >= 1
    assert dict(app) == dict(cli), (dict(app), dict(cli))


def _bench_jobs():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_jobs.py"
    spec = importlib.util.spec_from_file_location("bench_jobs", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_benchmark_app_row_does_not_poll_the_screen_while_the_job_runs(fixture_state: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # Pilot's wait for the screen has every widget of the screen run a callback; polling it
    # through a job of minutes charged the app row tens of thousands of them
    from textual.pilot import Pilot

    during: list[int] = []
    original = Pilot._wait_for_screen

    async def counting(self, *args, **kwargs):
        if self.app.jobs:
            during.append(1)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(Pilot, "_wait_for_screen", counting)
    result = asyncio.run(_bench_jobs()._app_job(fixture_state, 1))
    assert result[2] >= 1  # the row saw the batch's writer and stopped there
    assert len(during) <= 2, f"{len(during)} waits for the screen while the job ran"  # the press of x
