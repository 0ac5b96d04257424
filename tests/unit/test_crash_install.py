"""Crash injection: kill -9 an installing child at many points; recovery must land on
exactly the old or the new revision, with a workspace that parses."""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from memory_tui.core import switches
from memory_tui.core.store import install as inst
from memory_tui.core.store.workspace import workspace_revision

from test_install_support import STATE_A, STATE_B, assert_valid, make_stage, make_workspace, revisions


@pytest.fixture
def no_fsync(monkeypatch):
    """``os.fsync`` does nothing, in this process and the children it forks. A SIGKILL or an
    ``os._exit`` ends the process, not the kernel: every byte it wrote is in the page cache,
    where the recovering reader sees it, so fsync (durability across a power loss) plays no
    part in what these tests check; on a busy disk it was most of their time."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def _count_points(tmp_path) -> int:
    root = make_workspace(tmp_path / "count", STATE_A)
    stage = make_stage(tmp_path / "count-stage", STATE_B)
    seen = []
    orig = inst._crash_point
    inst._crash_point = lambda label: seen.append(label)
    try:
        inst.install(root, stage, inst.plan_install(root, stage))
    finally:
        inst._crash_point = orig
    return len(seen)


def _child(body) -> int:
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        try:
            body()
        finally:
            os._exit(0)
    return pid


def _check(root, ra, rb) -> str:
    inst.recover(root)
    rev = workspace_revision(root)
    assert rev in (ra, rb), rev
    assert not (root / ".scriptorium-txn").exists()
    assert not (root / ".scriptorium" / inst.JOURNAL_NAME).exists()
    assert_valid(root)
    return "new" if rev == rb else "old"


@pytest.mark.slow
def test_crash_at_every_install_step(tmp_path, no_fsync):
    ra, rb = revisions(tmp_path)
    n = _count_points(tmp_path)
    assert n >= 10
    outcomes = []
    for step in range(1, n + 2):
        root = make_workspace(tmp_path / f"ws{step}", STATE_A)
        stage = make_stage(tmp_path / f"stage{step}", STATE_B)

        def body():
            os.environ[switches.CRASH_ENV] = str(step)
            switches.reload()  # this child's own switches: die at crash point ``step``
            inst._crash_counter = 0
            inst.install(root, stage, inst.plan_install(root, stage))

        pid = _child(body)
        _, status = os.waitpid(pid, 0)
        died = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 86
        assert died == (step <= n), (step, status)
        outcomes.append(_check(root, ra, rb))
    # crashes before the journal roll back, after it roll forward: both outcomes happen
    assert outcomes[0] == "old" and outcomes[-1] == "new"
    assert "old" in outcomes and "new" in outcomes


@pytest.mark.slow
def test_sigkill_at_random_times_during_install_and_recovery(tmp_path, no_fsync):
    """A child flips the workspace A <-> B in a loop (recover, plan, install); it is SIGKILLed
    at a random moment. Every kill must recover to exactly A or B.

    The child reports each finished install on a pipe and is killed only after a random
    number of them (odd or even) plus a random delay, so both outcomes are exercised however
    slow or busy the machine is; the per-step test above covers every crash point exactly.
    """
    # Sources are append-only (an install never deletes an archive), so A carries B's new one.
    state_a = {**STATE_A, "sources/openprogram/_v2/s2.md": STATE_B["sources/openprogram/_v2/s2.md"]}
    ra, rb = revisions(tmp_path, state_a, STATE_B)
    root = make_workspace(tmp_path / "ws", state_a)
    stage_a = make_stage(tmp_path / "stage-a", state_a)
    stage_b = make_stage(tmp_path / "stage-b", STATE_B)
    rng = random.Random(20261130)
    seen = {"old": 0, "new": 0, "mid-install": 0}
    kills = 220
    for _ in range(kills):
        read_end, write_end = os.pipe()

        def body():
            os.close(read_end)
            os.environ.pop(switches.CRASH_ENV, None)
            switches.reload()
            while True:
                inst.recover(root)
                target = stage_b if workspace_revision(root) == ra else stage_a
                inst.install(root, target, inst.plan_install(root, target))
                os.write(write_end, b".")

        pid = _child(body)
        os.close(write_end)
        with os.fdopen(read_end, "rb", buffering=0) as done:
            for _ in range(rng.randint(0, 3)):
                if not done.read(1):
                    break
            time.sleep(rng.uniform(0.0, 0.02))
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        if (root / ".scriptorium" / inst.JOURNAL_NAME).exists():
            seen["mid-install"] += 1
        seen[_check(root, ra, rb)] += 1
    assert seen["old"] > 0 and seen["new"] > 0, seen
    print(seen)
