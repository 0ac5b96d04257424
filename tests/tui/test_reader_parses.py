"""The app keeps what it parsed for its next start, as the CLI's reading commands do: an owner
who only opens the app on a workspace OpenProgram writes parsed every topic and archive on
every start (a reader never writes into the state dir, and only transactions wrote the
workspace's own parse cache)."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from tui_helpers import make_app

from memory_tui.core.format import topics as topics_mod
from memory_tui.core.store import parsecache

pytestmark = pytest.mark.anyio


async def _load(state):
    app = make_app(state, background=True)
    async with app.run_test(size=(120, 40)) as pilot:
        while app.model is None or app.model.outline or not app.model.sessions_loaded or app.loading:
            await pilot.pause(0.05)
        await pilot.pause(0.2)  # the worker keeps the parses after handing the model over
        return app.model


async def test_a_second_start_parses_no_topic(bench_state_small, tmp_path, monkeypatch):
    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    t = time.time_ns() - 3_600 * 10**9
    for p in (state / "memory").rglob("*"):
        os.utime(p, ns=(t, t), follow_symlinks=False)
    time.sleep(0.15)  # out of the racy window: stamps that prove something
    shutil.rmtree(parsecache.Layout(state / "memory").runtime_dir / parsecache.DIR_NAME, ignore_errors=True)
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "user-cache"))
    parsed: list[str] = []
    real = topics_mod.parse_topic

    def counting(rel, *args, **kwargs):
        parsed.append(rel)
        return real(rel, *args, **kwargs)

    monkeypatch.setattr(topics_mod, "parse_topic", counting)
    parsecache.forget_in_process()
    first = await _load(state)
    assert parsed, "the first start parses the topics"
    assert not any((state / "memory").rglob(parsecache.DIR_NAME))  # nothing written into the state
    parsed.clear()
    parsecache.forget_in_process()  # a new process: nothing held in memory
    second = await _load(state)
    assert parsed == []
    assert [t.path for t in second.topics] == [t.path for t in first.topics]
