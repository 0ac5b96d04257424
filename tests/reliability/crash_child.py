"""One operation in a child process, for the crash driver: imports first, says ``go`` (and the
instant) on stdout, then
runs the operation through the real entry points, then says ``DONE`` and the instant on stderr.
The driver kills it at a random instant after ``go`` (SIGKILL: no cleanup of any kind); a kill
that arrives after ``DONE`` found the operation finished (only the interpreter's exit was left),
so the driver does not count it as a kill mid-run, and the instant (``time.monotonic()``, one
clock for every process of the machine) tells it how long the operation itself ran."""

from __future__ import annotations

import json
import os
import sys

DONE = b"crash-child: operation returned at "


def _done(rc: int) -> int:
    """Say, unbuffered and before the interpreter's exit, that (and when) the operation returned."""
    import time

    os.write(2, DONE + f"{time.monotonic():.6f}\n".encode())
    return rc


def _trace_lock_releases(state: str, out: str) -> None:
    """For the driver's uninterrupted runs: the state at every release of the workspace write
    lock, in order. Every durable step ends with a release, so these are the states a kill
    may legitimately leave once recovered; anything else is a half-done step."""
    import fcntl
    from pathlib import Path

    from crash_driver import snapshot

    real = fcntl.flock

    def flock(fd, op):
        if op == fcntl.LOCK_UN:
            try:
                held = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                held = ""
            if held.endswith("/write.lock"):
                with open(out, "a", encoding="utf-8") as f:
                    f.write(json.dumps(snapshot(Path(state)).__dict__) + "\n")
        return real(fd, op)

    fcntl.flock = flock


def main() -> int:
    op, state = sys.argv[1], sys.argv[2]
    extra = sys.argv[3:]
    if os.environ.get("MEMORY_TUI_CRASH_TRACE"):
        _trace_lock_releases(state, os.environ["MEMORY_TUI_CRASH_TRACE"])
    from memory_tui.cli import main as cli
    from memory_tui.core.format.sources import SourceRecord
    from memory_tui.core.store.archives import append_records
    from memory_tui.core.tx.stage import memory_root

    import time

    # the instant, on the one clock of the machine: the driver times its kill from when the
    # operation started, not from when it got round to reading this line
    print(f"go {time.monotonic():.6f}", flush=True)
    if op == "append":
        n = int(extra[0])
        recs = [SourceRecord("openprogram", "sess-crash", f"c{n:04d}-{i}", 100 + n * 10 + i, "user", f"crash {n} {i} " * 50,
                             timestamp="2026-11-30T06:00:00+00:00") for i in range(8)]
        from memory_tui.core.store.lock import write_lock

        root = memory_root(state)
        with write_lock(root):
            append_records(root, recs)
        return _done(0)
    argv = {
        "edit": ["edit", *extra],
        "views": ["views", "--rebuild"],
        "write": ["write", "--force"],
        "reorganize": ["reorganize"],
        "backfill": ["backfill"],
        "migrate": ["migrate"],
    }[op]
    return _done(cli(["--state", state, "--json", *argv]))


if __name__ == "__main__":
    sys.exit(main())
