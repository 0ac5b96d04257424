"""Kill -9 at random instants of every operation (issue 14), reduced profile for CI.

The slow profile (``python tests/reliability/run_slow.py``) runs the same driver with 500
trials per operation and prints the figures; here each operation gets a few trials so the
suite stays within its budget while every invariant is still exercised end to end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import crash_driver as cd

# Four kills per operation: set-up and the calibration runs (two uninterrupted runs of every
# input) already start most of an operation's processes, and every kill after them checks
# every invariant again. Kill-window races need hundreds of kills either way: that is
# run_slow.py's job (MEMORY_TUI_CRASH_TRIALS=8 is the earlier CI profile).
CI_TRIALS = int(os.environ.get("MEMORY_TUI_CRASH_TRIALS", "4"))
SHARED = Path(os.environ.get("MEMORY_TUI_SHARED", cd.REPO.parent / "shared"))


@pytest.mark.parametrize("op", cd.OPS)
def test_kill_at_random_points_recovers_cleanly(op, tmp_path):
    if op in cd.FIXTURE_OPS and not (SHARED / "fixtures" / "openprogram-state.tgz").is_file():
        pytest.skip("OpenProgram's fixture state is not present")
    figures = cd.run(op, CI_TRIALS, seed=1, work=tmp_path, shared=SHARED)
    assert figures.trials == CI_TRIALS
    # every operation runs on a state where it has real work (crash_driver.give_work)
    assert figures.changes, op
    assert figures.failures == [], "\n".join(figures.failures[:20])
