"""One summary shape for every job's report, for a result dialog and the job history.

The jobs report in their own shapes (``WriteReport``, the ``reorganize`` / ``backfill`` /
``migrate`` dicts, a ``TxResult`` for record changes and edits). ``JobSummary`` is what the
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


def summarize_write(report: Any, *, memory_root: Path | None = None, title: str = "write") -> JobSummary:
    """A ``WriteReport`` (or its ``to_json()``)."""
    data = report.to_json() if hasattr(report, "to_json") else dict(report)
    written = [b for b in data["batches"] if b["result"] in ("written", "recovered")]
    changed = tuple(dict.fromkeys(t for b in written for t in b["changed_topics"]))
    if data["outcome"] in ("retryable", "non-retryable"):
        outcome = describe_outcome(data["reason_code"], data["outcome"] == "retryable")
    else:
        outcome = describe_outcome("success" if written else "none")
    rb, rev = data.get("revision_before"), data.get("revision")
    return JobSummary("write", title, outcome, changed, sum(len(b["marked"]) for b in data["batches"]), rb, rev,
                      _head(memory_root, rb, rev), data.get("message") or "", tuple(data.get("warnings") or ()))


def _error_outcome(error: Mapping[str, Any]) -> Outcome:
    return describe_outcome(error.get("code"), error.get("retryable"))


def summarize_reorganize(result: Mapping[str, Any], *, revision_before: str | None = None,
                         memory_root: Path | None = None) -> JobSummary:
    status = result.get("status")
    if status == "busy":
        outcome = describe_outcome("CONCURRENT_UPDATE")
    elif result.get("error"):
        outcome = _error_outcome(result["error"])
    else:
        outcome = describe_outcome("success" if result.get("changed_files") else (status if status in ("empty", "disabled") else "none"))
    rev = _revision(memory_root)
    return JobSummary("reorganize", "reorganize topics", outcome, tuple(result.get("changed_files") or ()), 0,
                      revision_before, rev, _head(memory_root, revision_before, rev),
                      (result.get("error") or {}).get("message", ""))


def summarize_backfill(result: Mapping[str, Any], *, revision_before: str | None = None,
                       memory_root: Path | None = None) -> JobSummary:
    if result.get("error"):
        outcome = _error_outcome(result["error"])
    else:
        outcome = describe_outcome(result.get("status") or "ok")
    rev = result.get("revision")
    msg = f"{result.get('processed', 0)} of {result.get('candidates', 0)} source(s) processed, {result.get('remaining', 0)} remaining"
    if result.get("legacy_core"):
        msg += f"; legacy core.md {result['legacy_core']}"
    # backfill commits what it installed (pipeline.backfill): HEAD when the revision moved.
    # Its files ride beside the spec's report keys (``BackfillReport.changed_files``).
    changed = tuple(getattr(result, "changed_files", ()) or ())
    return JobSummary("backfill", "backfill uncited sources", outcome, changed, 0, revision_before, rev,
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
