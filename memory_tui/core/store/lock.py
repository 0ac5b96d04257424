"""The workspace write lock, shared with a running OpenProgram (memory spec §5.1).

``<M>/<runtime-dir>/write.lock`` is an empty file (created ``O_RDWR|O_CREAT`` with mode
0600) locked with a non-blocking exclusive ``flock`` retried every 0.05 s until a timeout.
OpenProgram takes the same lock with the same call, so the two programs exclude each other.

The lock is re-entrant per thread: a thread that already holds the lock of a workspace
may take it again (nested entry points share one hold). Another thread of this process
gets its own open file description, so ``flock`` makes it wait like any other process.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..format.errors import MemoryError
from .confine import check_write_confinement
from ..format.paths import Layout

TIMEOUT_DEFAULT = 10.0  # stage refresh, workspace_id(), views --rebuild
TIMEOUT_ONLINE = 1.0  # online writer, unpaired archive, promotion
TIMEOUT_EDIT = 5.0  # staged_edit, web routes, backfill, reorganize, promotion distil
POLL_SECONDS = 0.05

LOCK_NAME = "write.lock"

_held = threading.local()  # per thread: {lock path: [fd, depth]}


def _holds() -> dict[str, list[int]]:
    table = getattr(_held, "table", None)
    if table is None:
        table = _held.table = {}
    return table


def lock_path(memory_root: Path) -> Path:
    return Layout(Path(memory_root)).runtime_dir / LOCK_NAME


def busy_error() -> MemoryError:
    return MemoryError(
        "CONCURRENT_UPDATE",
        "another write transaction holds the workspace lock",
        details={"lock": LOCK_NAME},
    )


def held_by_this_thread(memory_root: Path) -> bool:
    return str(lock_path(memory_root)) in _holds()


def hold_depth(memory_root: Path) -> int:
    """How many nested holds this thread has on the workspace lock (0 = none)."""
    entry = _holds().get(str(lock_path(memory_root)))
    return entry[1] if entry is not None else 0


def _open_lock_file(path: Path) -> int:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    return fd


@contextmanager
def write_lock(
    memory_root: Path,
    timeout: float = TIMEOUT_DEFAULT,
    *,
    poll: float = POLL_SECONDS,
    clock=time.monotonic,
    sleep=time.sleep,
) -> Iterator[Path]:
    """Hold the workspace write lock for the ``with`` body; yields the lock file path.

    Raises ``MemoryError("CONCURRENT_UPDATE")`` after ``timeout`` seconds of waiting.
    """
    path = lock_path(memory_root)
    key = str(path)
    table = _holds()
    entry = table.get(key)
    if entry is not None:  # re-entrant
        entry[1] += 1
        try:
            yield path
        finally:
            entry[1] -= 1
        return
    # Every write takes this lock first: refuse here when a folder memory-tui writes into is a
    # symlink, so no write (lock file included) ever lands outside the workspace.
    check_write_confinement(Path(memory_root))
    fd = _open_lock_file(path)
    deadline = clock() + max(0.0, timeout)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                if clock() >= deadline:
                    raise busy_error() from None
                sleep(poll)
    except BaseException:
        os.close(fd)
        raise
    table[key] = [fd, 1]
    try:
        yield path
    finally:
        del table[key]
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
