"""Job verbs: ``write``, ``reorganize``, ``backfill``, ``migrate``.

Exit codes: 0 success (or nothing to do), 3 retryable failure (e.g. ``CONCURRENT_UPDATE``,
``MODEL_RATE_LIMIT``), 1 non-retryable failure. ``backfill`` exits 0 only when nothing
remains, like OpenProgram. ``--json`` prints the report object; on a terminal a spinner
shows progress on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import sys
import threading
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.markup import escape as markup_escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from memory_tui.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_RETRYABLE, add_verb, add_writer_options, emit_json, job_context
from memory_tui.core.format.text import sanitize
from memory_tui.pipeline.context import JobCancelled, JobEvent, JobPhase
from memory_tui.pipeline.reports import JobOutcome, JobReport

EXIT_CANCELLED = 130  # the shell's code for "stopped by SIGINT"

# Set by the first Ctrl-C of a job verb; the job's Context polls it at its safe points.
_cancel = threading.Event()


def _cancellable(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Ctrl-C asks the job to stop at its next safe point instead of killing it mid-step.

    The first SIGINT only sets ``_cancel`` (and restores the previous handler, so a second
    Ctrl-C interrupts at once). The job raises ``JobCancelled`` at its next checkpoint —
    between batches, before a transaction — so what it already did is whole and nothing
    is half-written; the verb says where it stopped and exits 130.
    """

    @functools.wraps(func)
    def run(args: argparse.Namespace) -> int:
        _cancel.clear()
        previous = None
        main_thread = threading.current_thread() is threading.main_thread()
        if main_thread:
            def on_sigint(_signum: int, _frame: Any) -> None:
                _cancel.set()
                signal.signal(signal.SIGINT, previous)
                print("memory-tui: stopping at the next safe point (Ctrl-C again to interrupt now)",
                      file=sys.stderr, flush=True)

            previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            return func(args)
        except JobCancelled as exc:
            print(f"memory-tui: cancelled during {exc.phase} after {exc.done} step(s); stopped at a safe point, "
                  "nothing half-written", file=sys.stderr)
            if getattr(args, "json", False) and isinstance(exc.result, JobReport):
                emit_json({"cancelled": True, "report": exc.result.to_json()})
            return EXIT_CANCELLED
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous)
            _cancel.clear()

    return run


def progress_line(title: str, event: JobEvent) -> str:
    """One plain progress line (the display when stderr is not a terminal)."""
    count = f"{event.done}/{event.total}" if event.total is not None else f"{event.done}"
    return f"{title}: {event.phase} {count}" + (f" · {sanitize(event.message)}" if event.message else "")


@contextlib.contextmanager
def _progress(args: argparse.Namespace, title: str) -> Iterator[Callable[[JobEvent], None] | None]:
    """The job's ``JobEvent``s on stderr: a rich progress bar on a terminal, else one line
    per event; nothing with ``--json`` (stdout is the report, stderr stays for errors)."""
    if getattr(args, "json", False):
        yield None
        return
    if not sys.stderr.isatty():

        def line(event: JobEvent) -> None:
            print(progress_line(title, event), file=sys.stderr, flush=True)

        yield line
        return
    console = Console(stderr=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(title, total=None)

        def update(event: JobEvent) -> None:
            if event.phase == JobPhase.WARNING:
                console.print(f"[yellow]warning:[/] {markup_escape(sanitize(event.message))}", highlight=False)
                return
            label = f"{title}: {event.phase}" + (f" · {event.message}" if event.message else "")
            bar.update(task, description=markup_escape(sanitize(label)), completed=event.done, total=event.total)

        yield update


def _run_job(args: argparse.Namespace, title: str, job: Callable[..., Any], *args_: Any, **kwargs: Any) -> Any:
    """``job(ctx, *args_, **kwargs)`` in the verb's Context, its progress drawn on stderr."""
    with _progress(args, title) as progress:
        return job(job_context(args, progress=progress, cancelled=_cancel.is_set), *args_, **kwargs)


def _exit_for(outcome: JobOutcome) -> int:
    if not outcome.failed:
        return EXIT_OK
    return EXIT_RETRYABLE if outcome.retryable else EXIT_FAILURE


def _print_error(outcome: JobOutcome) -> None:
    """The failure's code and message on stderr, when the job named one."""
    if outcome.code is not None:
        print(f"memory-tui: {outcome.code}: {sanitize(str(outcome.message))}", file=sys.stderr)


@_cancellable
def cmd_write(args: argparse.Namespace) -> int:
    from memory_tui.pipeline.write import write

    report = _run_job(args, "writing memory", write, args.session, branch=args.branch, force=args.force,
                      dry_run=args.dry_run)
    if getattr(args, "json", False):
        emit_json(report.to_json())
        return _exit_for(report.outcome)
    verb = "would write" if report.dry_run else "wrote"
    for b in report.batches:
        line = f"{sanitize(b.session_id)} {sanitize(str(b.tip))}: {len(b.ids)} turns, {b.tokens} tokens — {b.result}"
        if b.changed_topics:
            line += " → " + ", ".join(sanitize(t) for t in b.changed_topics)
        if b.reason_code:
            line += f" [{b.reason_code}]"
        elif b.message and b.result in ("written", "recovered"):
            line += f" ({sanitize(b.message)})"
        print(line)
    written = [b for b in report.batches if b.result in ("written", "recovered", "planned")]
    print(
        f"{verb} {len(written)} batch(es), {sum(len(b.ids) for b in written)} turn(s) with the {report.writer} writer"
        + (f"; revision {report.revision}" if report.revision else "")
    )
    for w in report.warnings:
        print(f"warning: {sanitize(str(w))}", file=sys.stderr)
    if report.outcome.failed:
        _print_error(report.outcome)
    elif report.outcome.message:
        print(sanitize(report.outcome.message))
    return _exit_for(report.outcome)


@_cancellable
def cmd_reorganize(args: argparse.Namespace) -> int:
    from memory_tui.pipeline.reorganize import reorganize

    report = _run_job(args, "reorganizing", reorganize, dry_run=args.dry_run)
    if getattr(args, "json", False):
        emit_json(report.to_json())
    else:
        if args.dry_run:
            print(f"{len(report.planned_ops or ())} record op(s) planned over {report.topics} topic file(s)")
        else:
            print(f"{report.outcome.status}: {report.topics} topic file(s); changed: " + (", ".join(sanitize(f) for f in report.changed_files) or "none"))
        _print_error(report.outcome)
    return _exit_for(report.outcome)


@_cancellable
def cmd_backfill(args: argparse.Namespace) -> int:
    from memory_tui.pipeline.backfill import backfill

    report = _run_job(args, "backfilling", backfill, dry_run=args.dry_run, retry_declined=args.retry_declined)
    if getattr(args, "json", False):
        emit_json(report.to_json())
    else:
        if args.dry_run:
            for i, b in enumerate(report.batches, 1):
                print(f"batch {i}: {len(b.ids)} source(s), {b.tokens} tokens")
        for line in backfill_lines(report):
            print(line)
        _print_error(report.outcome)
    if report.outcome.failed or report.dry_run:
        return _exit_for(report.outcome)
    return EXIT_OK if report.remaining == 0 else EXIT_FAILURE  # OpenProgram's rule: 0 iff nothing remains


def backfill_lines(report: Any) -> list[str]:
    """The backfill result in words: OpenProgram's counts, then the declined sources apart
    (each with the writer's answer) and what a later run can still do."""
    head = f"{report.outcome.status}: {report.candidates} candidate(s), {report.processed} processed, {report.remaining} remaining"
    if report.dry_run:
        head = f"{report.candidates} candidate(s), {report.offered} would be offered"
    if report.declined:
        head += f" ({len(report.declined)} declined by the writer, {report.not_offered} not offered yet)"
    out = [head]
    for d in report.declined:
        out.append(f"  declined {sanitize(d.source_id)} (writer {sanitize(d.writer)}; its answer for that batch: "
                   f"{sanitize(d.answer)})")
    if report.declined and not report.not_offered and not report.dry_run:
        out.append("nothing left to offer: run `memory-tui backfill --retry-declined` to offer the declined sources again")
    return out


@_cancellable
def cmd_migrate(args: argparse.Namespace) -> int:
    from memory_tui.core.format.errors import MemoryError
    from memory_tui.pipeline.migrate import migrate_if_needed

    ctx = job_context(args, cancelled=_cancel.is_set)
    try:
        result = migrate_if_needed(ctx)
    except MemoryError as exc:
        if getattr(args, "json", False):
            emit_json(exc.to_json())
        else:
            print(f"memory-tui: {sanitize(str(exc))}", file=sys.stderr)
        return EXIT_RETRYABLE if exc.code == "CONCURRENT_UPDATE" else EXIT_FAILURE
    data = result or {"sessions": {}, "marked": 0, "cursors_removed": False, "message": "no legacy cursors"}
    if getattr(args, "json", False):
        emit_json(data)
    else:
        print(sanitize(data.get("message") or "") or f"marked {data['marked']} turn(s) in {len(data['sessions'])} session(s); legacy cursors removed")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    p = add_verb(sub, "write", "write pending turns into memory (per-turn rule, or --force for a full pass)", cmd_write)
    p.add_argument("session", nargs="?", default=None, help="session id (default: every session)")
    p.add_argument("--branch", metavar="TIP", default=None, help="write this branch tip instead of the head")
    p.add_argument("--force", action="store_true", help="session-boundary pass: head fully, other tips at threshold")
    p.add_argument("--dry-run", action="store_true", help="show turns, tokens and batches; change nothing")
    add_writer_options(p)

    p = add_verb(sub, "reorganize", "fold duplicate records and prune empty structure", cmd_reorganize)
    p.add_argument("--dry-run", action="store_true", help="list the record ops; change nothing")

    p = add_verb(sub, "backfill", "distil archived trusted sources that no topic cites", cmd_backfill)
    p.add_argument("--dry-run", action="store_true", help="list candidates and batches; change nothing")
    p.add_argument("--retry-declined", action="store_true",
                   help="offer again the sources a writer declined in an earlier run")
    add_writer_options(p)

    add_verb(sub, "migrate", "replace legacy runtime.json cursors by node marks (one time)", cmd_migrate)
