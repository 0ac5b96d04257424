"""One operation in a child process, for the crash driver: imports first, says ``go``, then
runs the operation through the real entry points. The driver kills it at a random instant
after ``go`` (SIGKILL: no cleanup of any kind)."""

from __future__ import annotations

import sys


def main() -> int:
    op, state = sys.argv[1], sys.argv[2]
    extra = sys.argv[3:]
    from memory_tui.cli import main as cli
    from memory_tui.core.sources import SourceRecord, append_records
    from memory_tui.core.transaction import memory_root

    print("go", flush=True)
    if op == "append":
        n = int(extra[0])
        recs = [SourceRecord("openprogram", "sess-crash", f"c{n:04d}-{i}", 100 + n * 10 + i, "user", f"crash {n} {i} " * 50,
                             timestamp="2026-11-30T06:00:00+00:00") for i in range(8)]
        from memory_tui.core.lock import write_lock

        root = memory_root(state)
        with write_lock(root):
            append_records(root, recs)
        return 0
    argv = {
        "edit": ["edit", *extra],
        "views": ["views", "--rebuild"],
        "write": ["write", "--force"],
        "reorganize": ["reorganize"],
        "backfill": ["backfill"],
        "migrate": ["migrate"],
    }[op]
    return cli(["--state", state, "--json", *argv])


if __name__ == "__main__":
    sys.exit(main())
