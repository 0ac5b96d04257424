"""One summary shape for every job's report, for a result dialog and the job history.

The jobs report in their own shapes (``WriteReport``, ``ReorganizeReport``, ``BackfillReport``,
the ``migrate`` dict, a ``TxResult`` for record changes and edits). ``JobSummary`` is what the
owner needs from any of them: changed files, marks added, the revision before and after,
the git commit, and the outcome code with its meaning and whether a retry can help
(``core.outcomes``). A job that never got the lock is ``CONCURRENT_UPDATE``, retryable —
never a writer failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from memory_tui.core.format.outcomes import Outcome, describe_outcome
from memory_tui.pipeline.reports import BackfillReport, ReorganizeReport, WriteReport


@dataclass(frozen=True)
class JobSummary:
    job: str
    title: str
    outcome: Outcome
    changed_files: tuple[str, ...] = ()
    marks_added: int = 0
    revision_before: str | None = None
    revision: str | None = None
    git_commit: str | None = None
    message: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.outcome.failed

    @property
    def retryable(self) -> bool:
        return self.outcome.retryable

    @property
    def changed(self) -> bool:
        return bool(self.changed_files) or (self.revision_before is not None and self.revision != self.revision_before)

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job, "title": self.title, "outcome": self.outcome.to_json(),
            "changed_files": list(self.changed_files), "marks_added": self.marks_added,
            "revision_before": self.revision_before, "revision": self.revision, "git_commit": self.git_commit,
            "message": self.message, "warnings": list(self.warnings),
        }


def _head(memory_root: Path | None, revision_before: str | None, revision: str | None) -> str | None:
    """The memory repository's HEAD, reported only when the job changed the revision."""
    if memory_root is None or revision is None or revision == revision_before:
        return None
    from memory_tui.core.store import gitlog

    return gitlog.head(memory_root)


def summarize_write(report: WriteReport, *, memory_root: Path | None = None, title: str = "write") -> JobSummary:
    written = report.written
    changed = tuple(dict.fromkeys(t for b in written for t in b.changed_topics))
    if report.outcome.failed:
        outcome = describe_outcome(report.outcome.code, report.outcome.retryable)
    else:
        outcome = describe_outcome("success" if written else "none")
    rb, rev = report.revision_before, report.revision
    return JobSummary("write", title, outcome, changed, report.marked_turns, rb, rev,
                      _head(memory_root, rb, rev), report.outcome.message, tuple(report.warnings))


def summarize_reorganize(report: ReorganizeReport, *, revision_before: str | None = None,
                         memory_root: Path | None = None) -> JobSummary:
    status = report.outcome.status
    if status == "busy":
        outcome = describe_outcome("CONCURRENT_UPDATE")
    elif report.outcome.code is not None:
        # the organizer gives no retry verdict of its own: the code's default
        outcome = describe_outcome(report.outcome.code)
    else:
        outcome = describe_outcome("success" if report.changed_files else (status if status in ("empty", "disabled") else "none"))
    rev = _revision(memory_root)
    return JobSummary("reorganize", "reorganize topics", outcome, report.changed_files, 0,
                      revision_before, rev, _head(memory_root, revision_before, rev),
                      report.outcome.message if report.outcome.code is not None else "")


def summarize_backfill(report: BackfillReport, *, revision_before: str | None = None,
                       memory_root: Path | None = None) -> JobSummary:
    if report.outcome.code is not None:
        outcome = describe_outcome(report.outcome.code, report.outcome.retryable)
    else:
        outcome = describe_outcome(report.outcome.status)
    rev = report.revision
    msg = f"{report.processed} of {report.candidates} source(s) processed, {report.remaining} remaining"
    declined = getattr(report, "declined", ())
    if declined:
        answers = sorted({d.answer for d in declined})
        msg += (f" ({len(declined)} declined by the writer and not offered again, {report.not_offered} not offered yet; "
                f"its answer: {'; '.join(answers)}; declined: {', '.join(d.source_id for d in declined)})")
    if report.legacy_core:
        msg += f"; legacy core.md {report.legacy_core}"
    # backfill commits what it installed (pipeline.backfill): HEAD when the revision moved.
    return JobSummary("backfill", "backfill uncited sources", outcome, report.changed_files, 0, revision_before, rev,
                      _head(memory_root, revision_before, rev), msg)


def summarize_migrate(result: Mapping[str, Any] | None, *, error: Any = None, revision_before: str | None = None) -> JobSummary:
    if error is not None:
        return JobSummary("migrate", "migrate legacy cursors", describe_outcome(error.code, error.retryable), (), 0,
                          revision_before, revision_before, None, str(getattr(error, "message", error)))
    if not result:
        return JobSummary("migrate", "migrate legacy cursors", describe_outcome("none"), (), 0, revision_before,
                          revision_before, None, "no legacy cursors")
    return JobSummary("migrate", "migrate legacy cursors", describe_outcome("success"),
                      ("memory/.scriptorium/runtime.json",), int(result.get("marked", 0)), revision_before, revision_before,
                      None, f"marked {result.get('marked', 0)} turn(s); legacy cursors removed")


def summarize_tx(job: str, title: str, result: Any, *, revision_before: str | None = None) -> JobSummary:
    """A ``TxResult`` (record change, edit, views rebuild)."""
    if result.ok:
        outcome = describe_outcome("success" if result.changed_files else "none")
    else:
        outcome = describe_outcome(result.code)
    warnings = tuple(result.warnings or ())
    if result.ok and not result.git_committed and result.git_error:
        warnings += (f"git: not committed: {result.git_error}",)
    return JobSummary(job, title, outcome, tuple(result.changed_files), 0, revision_before, result.revision,
                      result.git_commit, "" if result.ok else result.message, warnings)


def _revision(memory_root: Path | None) -> str | None:
    if memory_root is None or not Path(memory_root).is_dir():
        return None
    from memory_tui.core.store.workspace import workspace_revision

    return workspace_revision(Path(memory_root))
