"""The write lock excludes a foreign process using a plain ``fcntl.flock`` (what OpenProgram does)."""

from __future__ import annotations

import stat
import subprocess
import sys
import threading

import pytest

from memory_tui.core.format.errors import MemoryError
from memory_tui.core.store.lock import TIMEOUT_EDIT, TIMEOUT_ONLINE, held_by_this_thread, lock_path, write_lock

# A stand-in for OpenProgram: open O_RDWR|O_CREAT 0600, flock(LOCK_EX[|LOCK_NB]), report, wait.
FOREIGN = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
mode = sys.argv[2]
if mode == "hold":
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("locked", flush=True)
    sys.stdin.readline()
else:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("acquired", flush=True)
    except BlockingIOError:
        print("blocked", flush=True)
"""


def _foreign(path, mode):
    return subprocess.Popen(
        [sys.executable, "-c", FOREIGN, str(path), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_foreign_flock_makes_us_time_out(tmp_path):
    path = lock_path(tmp_path)
    path.parent.mkdir(parents=True)
    proc = _foreign(path, "hold")
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(MemoryError) as err:
            with write_lock(tmp_path, timeout=0.2):
                pass
        assert err.value.code == "CONCURRENT_UPDATE"
        assert err.value.message == "another write transaction holds the workspace lock"
        assert err.value.details == {"lock": "write.lock"}
        assert err.value.retryable
    finally:
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(5)
    with write_lock(tmp_path, timeout=1.0):  # released: we get it
        pass


def test_our_lock_blocks_a_foreign_process(tmp_path):
    with write_lock(tmp_path, timeout=1.0) as path:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        out = _foreign(path, "try").communicate(timeout=10)[0]
        assert out.strip() == "blocked"
    out = _foreign(lock_path(tmp_path), "try").communicate(timeout=10)[0]
    assert out.strip() == "acquired"


def test_reentrant_in_thread_exclusive_across_threads(tmp_path):
    errors = []
    with write_lock(tmp_path, timeout=0.1):
        with write_lock(tmp_path, timeout=0.1):  # same thread: re-entrant
            assert held_by_this_thread(tmp_path)
        assert held_by_this_thread(tmp_path)  # still held after the inner exit

        def other():
            try:
                with write_lock(tmp_path, timeout=0.15):
                    pass
            except MemoryError as exc:
                errors.append(exc.code)

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert errors == ["CONCURRENT_UPDATE"]
    assert not held_by_this_thread(tmp_path)


def test_timeouts_match_openprogram():
    assert (TIMEOUT_ONLINE, TIMEOUT_EDIT) == (1.0, 5.0)
