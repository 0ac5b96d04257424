"""``jobs`` and ``preview``: the CLI faces of the app's job-history panel, header lock
indicator and job confirm dialog.

* ``jobs``: the persisted job history (``pipeline.history.read_job_history``) and who holds
  the write lock (``core.lockprobe.probe_write_lock``). Read-only: it never creates the lock
  file or any other.
* ``preview JOB``: what the confirm dialog shows (``pipeline.preview.preview_job``) — turns
  or sources, tokens, batches, writer and the files likely to change — from the job's own
  dry run. Changes nothing.
"""

from __future__ import annotations

import argparse

from memory_tui.cli.common import EXIT_OK, EXIT_USAGE, CliError, add_verb, add_writer_options, emit_json, job_context, state_dir
from memory_tui.core.format.text import sanitize


def _cmd_jobs(args: argparse.Namespace) -> int:
    from memory_tui.core.store.lockprobe import probe_write_lock
    from memory_tui.pipeline.history import read_job_history

    root = state_dir(args) / "memory"
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


def _cmd_preview(args: argparse.Namespace) -> int:
    from memory_tui.pipeline.preview import preview_job

    # the job verbs' own Context (settings file, --writer/--topic), so the preview is their dry run
    ctx = job_context(args)
    if (args.session or args.branch or args.force) and args.job != "write":
        raise CliError("SESSION, --branch and --force apply to the write job only", EXIT_USAGE)
    p = preview_job(ctx, args.job, session_id=args.session, branch=args.branch, force=args.force)
    if getattr(args, "json", False):
        emit_json(p.to_json())
        return EXIT_OK
    print(f"{sanitize(p.title)} — {p.count} {p.unit}" + (f", {p.tokens} tokens" if p.tokens else "")
          + f", writer {sanitize(p.writer or '-')}")
    for b in p.batches:
        where = " ".join(sanitize(x) for x in (b.session_id, b.tip) if x)
        print(f"  {where + ': ' if where else ''}{len(b.ids)} item(s)" + (f", {b.tokens} tokens" if b.tokens else "")
              + (f" [{b.result}]" if b.result != "planned" else "") + (f" {sanitize(b.note)}" if b.note else ""))
    if p.files:
        print("files likely to change:")
        for f in p.files:
            print(f"  {sanitize(f)}")
    for note in p.notes:
        print(f"note: {sanitize(note)}")
    if p.nothing_to_do:
        print("nothing to do")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = add_verb(sub, "jobs", "the writers' job history and who holds the write lock now", _cmd_jobs)
    p.add_argument("--limit", type=int, default=50, metavar="N", help="newest N runs of agent-history.jsonl (default 50)")

    from memory_tui.pipeline.preview import JOBS

    p = add_verb(sub, "preview", "what a job would do (its dry run): items, tokens, batches, files likely to change",
                 _cmd_preview)
    p.add_argument("job", choices=JOBS)
    p.add_argument("session", nargs="?", default=None, help="write: one session (default: every session)")
    p.add_argument("--branch", metavar="TIP", default=None, help="write: this branch tip instead of the head")
    p.add_argument("--force", action="store_true", help="write: the session-boundary pass")
    add_writer_options(p)
