"""``jobs``: the persisted job history (writer-status + agent-history) and who holds the lock.

The CLI face of the app's job-history panel and header lock indicator
(``pipeline.history.read_job_history``, ``core.lockprobe.probe_write_lock``). Read-only:
it never creates the lock file or any other.
"""

from __future__ import annotations

import argparse

from memory_tui.cli import EXIT_OK, CliError, add_common, emit_json
from memory_tui.core.paths import discover_state_dir
from memory_tui.core.text import sanitize


def _cmd_jobs(args: argparse.Namespace) -> int:
    from memory_tui.core.lockprobe import probe_write_lock
    from memory_tui.pipeline.history import read_job_history

    state = discover_state_dir(getattr(args, "state", None))
    if not state.is_dir():
        raise CliError(f"state directory not found: {state}")
    root = state / "memory"
    history = read_job_history(root, limit=args.limit)
    lock = probe_write_lock(root)
    if getattr(args, "json", False):
        emit_json({"lock": lock.to_json(), **history.to_json()})
        return EXIT_OK
    print(lock.describe())
    for e in history.entries:
        where = e.at or (f"run {e.line}" if e.line else "")
        mark = "✓" if e.ok else "✗"
        line = f"{mark} {where:<32} {sanitize(e.stage):<14} {sanitize(e.summary)}"
        if e.code:
            line += f" [{e.code}{', retryable' if e.retryable else ''}]"
        if e.topic_paths:
            line += " → " + ", ".join(sanitize(p) for p in e.topic_paths)
        print(line)
    shown = sum(1 for e in history.entries if e.origin == "agent-history")
    if history.total_runs > shown:
        print(f"({history.total_runs - shown} older run(s) not shown; --limit N)")
    for p in history.problems:
        print(f"problem: {sanitize(str(p))}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="the writers' job history and who holds the write lock now")
    add_common(p)
    p.add_argument("--limit", type=int, default=50, metavar="N", help="newest N runs of agent-history.jsonl (default 50)")
    p.set_defaults(func=_cmd_jobs)
