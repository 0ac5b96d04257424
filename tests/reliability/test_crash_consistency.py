"""Kill -9 at random instants of every operation (issue 14), reduced profile for CI.

The slow profile (``python tests/reliability/run_slow.py``) runs the same driver until 300
kills per operation landed while the operation was running, and prints the figures; here each
operation gets a few trials so the suite stays within its budget while every invariant is
still exercised end to end."""

from __future__ import annotations

import os
import sys
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


def _child(body: str) -> list[str]:
    """A stand-in child: says ``go`` on stdout as the real one does, then runs ``body``."""
    import sys

    return [sys.executable, "-c", f"import os, sys, time\nprint('go', flush=True)\n{body}"]


def test_a_kill_after_the_operation_returned_is_not_counted_as_a_kill_mid_run():
    import crash_child

    done = f"os.write(2, {crash_child.DONE!r} + str(time.monotonic()).encode() + b'\\n')"
    # the operation returned at once; the interpreter's exit is what the kill meets
    ended, _ = cd._run_child(_child(f"{done}\ntime.sleep(30)"), 0.5)
    assert ended == "late"
    # the kill meets the operation itself
    ended, _ = cd._run_child(_child(f"time.sleep(30)\n{done}"), 0.5)
    assert ended == "mid-run"
    ended, _ = cd._run_child(_child(done), 30.0)
    assert ended == "finished"
    # the duration measured is the operation's, to the instant ``DONE`` names (one clock for the
    # machine), not to the process's exit: a child that says it returned 1000 s from now
    later = f"os.write(2, {crash_child.DONE!r} + str(time.monotonic() + 1000).encode() + b'\\n')"
    ended, secs = cd._run_child(_child(later), 30.0)
    assert ended == "finished" and secs > 900


def test_the_kill_is_timed_from_the_instant_the_child_started_not_from_when_go_was_read():
    # a child that says it started 1000 s ago is past any delay below that: killed at once
    ended, secs = cd._run_child([sys.executable, "-c", "import time\nprint('go', time.monotonic() - 1000, flush=True)\n"
                                 "time.sleep(30)"], 500.0)
    assert ended == "mid-run" and secs > 900


def test_the_kill_instant_follows_the_durations_seen_during_the_run():
    import random

    clock = cd.KillClock([4.0])
    assert clock.ceiling == 4.0
    for _ in range(cd.KillClock.WINDOW):  # the machine got faster: the bound follows it
        clock.observe(1.0)
    assert clock.ceiling == 1.0
    rng = random.Random(0)
    draws = [clock.draw(rng) for _ in range(200)]
    assert all(0.0 <= d <= 1.0 for d in draws) and max(draws) > 0.9
    clock.observe(9.0)  # one slow run among many does not move the median
    assert clock.ceiling == 1.0
    # timing runs: the first few, then one in EVERY
    timing = [n for n in range(40) if clock.timing_trial(n)]
    assert timing[: cd.KillClock.WARMUP] == list(range(cd.KillClock.WARMUP))
    assert len(timing) == cd.KillClock.WARMUP + 40 // cd.KillClock.EVERY


def test_a_target_of_kills_counts_only_kills_mid_run(tmp_path):
    figures = cd.run("append", 0, kills=4, seed=2, work=tmp_path)
    assert figures.killed == 4
    # timing runs are not killed (their bound is far past the operation's duration)
    assert figures.killed + figures.late <= figures.trials - figures.timing
    assert figures.timing >= cd.KillClock.WARMUP
    assert sum(figures.killed_outcomes.values()) == figures.killed
    assert sum(figures.outcomes.values()) == figures.trials
    assert figures.failures == [], "\n".join(figures.failures[:20])
