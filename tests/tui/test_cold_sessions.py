"""The app's first start on a workspace whose sessions' index is empty (a new machine, an
upgrade, deleted caches) reads the sessions in worker processes, as ``status`` does."""

from __future__ import annotations

import shutil

import pytest
from tui_helpers import make_app

from memory_tui.sessions import cache as scache
from memory_tui.sessions.store import load_sessions

pytestmark = pytest.mark.anyio


async def test_a_cold_start_of_the_app_reads_every_session_in_workers(bench_state_small, tmp_path, monkeypatch):
    """Textual's stderr capture (fileno -1) kept the spawned pool's resource tracker from
    starting: the app showed no session at all and an engine error, and every later reload
    tried again (1.5 CPU s for a one-topic reload at scale 1)."""
    from multiprocessing import resource_tracker

    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.setattr(scache, "PARALLEL_MIN_SESSIONS", 1)  # the small state's few sessions go to the pool too
    resource_tracker._resource_tracker._stop()  # a fresh process: no tracker yet
    expected = sorted(load_sessions(state).sessions)
    assert expected
    app = make_app(state, background=True)
    async with app.run_test(size=(120, 40)) as pilot:
        while app.model is None or not app.model.sessions_loaded or app.loading:
            await pilot.pause(0.05)
        assert not [e for e in app.model.engine_errors if e.startswith("sessions")]
        assert sorted(s.session_id for s in app.model.sessions) == expected
        assert app.model.session_snapshot is not None  # what a later reload carries over
