"""Who holds the workspace write lock right now (memory spec §5.1), without taking it.

The header of the app and ``status`` want to say "OpenProgram is writing" or "memory-tui
(pid 812) is writing" while anyone holds ``memory/.scriptorium/write.lock``. ``flock`` has
no "who" query, so the probe is two steps:

1. a non-blocking *shared* try-lock on a read-only descriptor: it fails exactly when some
   descriptor holds the exclusive lock that writers take, and succeeding (then releasing at
   once) disturbs nobody — a writer retrying every 0.05 s simply gets it on its next try;
2. when it is held, ``/proc/locks`` names the pid holding an ``FLOCK WRITE`` lock on that
   inode, and the pid's command line says which program it is.

The probe never creates the lock file (no file → nobody can hold it) and never writes.
Where ``/proc`` is not available the holder is reported as unknown, the "held" fact stays
exact.
"""

from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from .lock import lock_path

MEMORY_TUI = "memory-tui"
OPENPROGRAM = "OpenProgram"
UNKNOWN = "unknown"

PROC_LOCKS = Path("/proc/locks")


@dataclass(frozen=True)
class LockHolder:
    pid: int | None
    program: str  # MEMORY_TUI | OPENPROGRAM | UNKNOWN
    command: str = ""  # the holder's command line, space-joined ("" when unreadable)
    this_process: bool = False

    def describe(self) -> str:
        who = self.program if self.program != UNKNOWN else "another program"
        if self.this_process:
            return f"{who} (this app)"
        return f"{who} (pid {self.pid})" if self.pid is not None else who


@dataclass(frozen=True)
class LockProbe:
    path: Path
    held: bool
    holder: LockHolder | None = None

    def describe(self) -> str:
        if not self.held:
            return "write lock free"
        return "write lock held by " + (self.holder.describe() if self.holder else "another program")

    def to_json(self) -> dict[str, object]:
        h = self.holder
        return {
            "held": self.held,
            "pid": h.pid if h else None,
            "program": h.program if h else None,
            "this_process": h.this_process if h else False,
        }


def classify_command(argv: list[str]) -> str:
    """Which program a command line belongs to (by its executable and script names)."""
    words = " ".join(os.path.basename(a) for a in argv[:3]).lower()
    whole = " ".join(argv).lower()
    if "memory-tui" in words or "memory_tui" in whole:
        return MEMORY_TUI
    if "openprogram" in whole:
        return OPENPROGRAM
    return UNKNOWN


def _read_cmdline(pid: int, proc: Path) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def flock_writers(path: Path, locks_file: Path = PROC_LOCKS) -> list[int]:
    """Pids holding an exclusive ``flock`` on ``path``'s inode, per ``/proc/locks``."""
    try:
        st = os.stat(path)
        text = locks_file.read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    want = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    pids: list[int] = []
    for line in text.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:56789 0 EOF"; blocked waiters carry "->"
        if len(parts) < 6 or parts[1] == "->" or parts[1] != "FLOCK" or parts[3] != "WRITE":
            continue
        dev = parts[5].split(":")
        if len(dev) != 3:
            continue
        try:
            key = (int(dev[0], 16), int(dev[1], 16), int(dev[2]))
            pid = int(parts[4])
        except ValueError:
            continue
        if key == want and pid not in pids:
            pids.append(pid)
    return pids


def flock_held(path: Path) -> bool:
    """Does some descriptor hold an exclusive ``flock`` on ``path``? Step 1 above: a
    non-blocking shared try-lock, released at once. A missing file is not held (never created)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return False
        raise
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def probe_write_lock(memory_root: Path | str, *, locks_file: Path = PROC_LOCKS, proc: Path = Path("/proc")) -> LockProbe:
    """Is the workspace write lock held, and by whom? Non-blocking, read-only."""
    path = lock_path(Path(memory_root))
    if not flock_held(path):
        return LockProbe(path, False)
    pids = flock_writers(path, locks_file)
    if not pids:
        return LockProbe(path, True, LockHolder(None, UNKNOWN))
    pid = pids[0]
    if pid == os.getpid():
        return LockProbe(path, True, LockHolder(pid, MEMORY_TUI, "", this_process=True))
    argv = _read_cmdline(pid, proc)
    return LockProbe(path, True, LockHolder(pid, classify_command(argv) if argv else UNKNOWN, " ".join(argv)))
