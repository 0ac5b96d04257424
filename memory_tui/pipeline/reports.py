"""What the jobs return: ``WriteReport``, ``ReorganizeReport`` and ``BackfillReport``.

Each is a ``JobReport``: it carries a ``JobOutcome`` (its status in the job's own words, and
when it failed the reason code, message and whether trying again can help), so a caller asks
every job the same questions (``report.outcome.failed``, ``report.outcome.failure``) whatever
the job was. Each also carries what the run did so far — batches, turns or sources, changed
files, revisions — so a partial or cancelled run can still be shown.

``to_json()`` is the job's CLI ``--json`` object. Its keys and their order are the memory
spec's (§7.3-§7.6, as OpenProgram prints them): reorganize and backfill say ``status`` and
add ``error`` only when a step failed, write says ``outcome``. Fields that are not in the
spec's object (``changed_files`` of a backfill, the revisions of a reorganize) stay out of it.

This module imports nothing of the pipeline, so the app can name the types without loading
the jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended. ``status`` is the job's own word for it (write: none | success |
    retryable | non-retryable; reorganize: ok | empty | disabled | busy | failed; backfill:
    ok | incomplete); ``code`` names the failure when one is known, ``retryable`` says whether
    trying again can help (the CLI exits 3 rather than 1)."""

    status: str
    failed: bool = False
    code: str | None = None
    message: str = ""
    retryable: bool = False
    path: str | None = None  # the file a failure names, when it names one

    @property
    def failure(self) -> str | None:
        """Why the job failed, in one line (``None``: it did not)."""
        if not self.failed:
            return None
        return f"{self.code}: {self.message}" if self.code else self.status


class JobReport:
    """The shape every job's report shares: its ``outcome`` and its CLI ``--json`` object."""

    outcome: JobOutcome

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


# ------------------------------------------------------------------------------ write


@dataclass
class BatchReport:
    session_id: str
    tip: str
    ids: list[str]
    tokens: int
    result: str  # written | recovered | nothing | failed | planned | below-threshold
    changed_topics: list[str] = field(default_factory=list)
    marked: list[str] = field(default_factory=list)
    reason_code: str | None = None
    retryable: bool = False
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "tip": self.tip,
            "ids": self.ids,
            "tokens": self.tokens,
            "result": self.result,
            "changed_topics": self.changed_topics,
            "marked": self.marked,
            "reason_code": self.reason_code,
            "retryable": self.retryable,
            "message": self.message,
        }


@dataclass
class WriteReport(JobReport):
    """Filled in batch by batch while the write runs (a cancelled run hands over what it has)."""

    mode: str  # per-turn | forced
    writer: str
    dry_run: bool = False
    batches: list[BatchReport] = field(default_factory=list)
    outcome: JobOutcome = JobOutcome("none")
    revision_before: str | None = None
    revision: str | None = None
    warnings: list[str] = field(default_factory=list)
    organize: list[ReorganizeReport] = field(default_factory=list)
    migration: dict[str, Any] | None = None
    sessions: list[str] = field(default_factory=list)

    @property
    def written(self) -> list[BatchReport]:
        return [b for b in self.batches if b.result in ("written", "recovered")]

    @property
    def marked_turns(self) -> int:
        return sum(len(b.marked) for b in self.batches)

    def fail(self, code: str, retryable: bool, message: str) -> None:
        # the first failure wins; a non-retryable one outranks a retryable one
        if not self.outcome.failed or (self.outcome.retryable and not retryable):
            self.outcome = JobOutcome("retryable" if retryable else "non-retryable", True, code, message, retryable)

    def succeed(self) -> None:
        self.outcome = replace(self.outcome, status="success")

    def say(self, message: str) -> None:
        """A message for a run that did not fail (memory disabled, say)."""
        self.outcome = replace(self.outcome, message=message)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "writer": self.writer,
            "dry_run": self.dry_run,
            "outcome": self.outcome.status,
            "reason_code": self.outcome.code,
            "retryable": self.outcome.retryable,
            "message": self.outcome.message,
            "sessions": self.sessions,
            "batches": [b.to_json() for b in self.batches],
            "written_batches": len(self.written),
            "marked_turns": self.marked_turns,
            "revision_before": self.revision_before,
            "revision": self.revision,
            "organize": [o.to_json() for o in self.organize],
            "migration": self.migration,
            "warnings": self.warnings,
        }


# ------------------------------------------------------------------------------ reorganize


@dataclass(frozen=True)
class ReorganizeReport(JobReport):
    outcome: JobOutcome
    topics: int = 0
    changed_files: tuple[str, ...] = ()
    planned_ops: tuple[dict[str, Any], ...] | None = None  # the dry run's record ops
    reason: str | None = None  # manual, or the write's organize trigger; None: the pass never ran
    revision_before: str | None = None  # before its first transaction (None: it made none)
    revision: str | None = None  # after its last transaction
    # records worded alike that may say different things: reported, never folded
    candidates: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.outcome.status, "topics": self.topics, "changed_files": list(self.changed_files)}
        if self.candidates:
            out["candidates"] = list(self.candidates)
        if self.planned_ops is not None:
            out["planned_ops"] = list(self.planned_ops)
        if self.outcome.code is not None:
            out["error"] = {"code": self.outcome.code, "message": self.outcome.message, "path": self.outcome.path}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


# ------------------------------------------------------------------------------ backfill


@dataclass(frozen=True)
class BackfillBatch:
    ids: tuple[str, ...]  # source ids
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "tokens": self.tokens}


@dataclass(frozen=True)
class DeclinedSource:
    """An uncited source a writer was given and chose not to cite, with the writer's answer
    for the batch it was in."""

    source_id: str
    writer: str
    answer: str

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source_id, "writer": self.writer, "answer": self.answer}


@dataclass(frozen=True)
class BackfillReport(JobReport):
    """``candidates``: trusted archived sources no topic cited when the run began;
    ``processed``: how many of them a topic cites now; ``remaining``: trusted sources still
    uncited after the run (``ok`` only when 0, else ``incomplete``, as OpenProgram reports);
    ``declined``: those of ``remaining`` a writer was given and chose not to cite (this run or
    an earlier one; not offered again); ``offered``: sources handed to the writer this run."""

    outcome: JobOutcome
    candidates: int = 0
    processed: int = 0
    remaining: int = 0
    revision: str | None = None
    dry_run: bool = False
    writer: str | None = None  # the writer a dry run planned for
    batches: tuple[BackfillBatch, ...] = ()  # planned (dry run) or handed to the writer
    changed_files: tuple[str, ...] = ()  # topic files its writer runs changed (for the app)
    legacy_core: str | None = None  # promoted | archived
    declined: tuple[DeclinedSource, ...] = ()
    offered: int = 0

    @property
    def not_offered(self) -> int:
        """Remaining sources no writer has declined: work a later run can still do."""
        return max(0, self.remaining - len(self.declined))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.outcome.status}
        if self.dry_run:
            out["dry_run"] = True
        out.update(candidates=self.candidates, processed=self.processed, remaining=self.remaining, revision=self.revision)
        if self.dry_run:
            out["writer"] = self.writer
            out["batches"] = [b.to_json() for b in self.batches]
        # beyond the spec's keys: the remaining sources a writer declined, with its answer
        out["declined"] = [d.to_json() for d in self.declined]
        if self.legacy_core:
            out["legacy_core"] = self.legacy_core
        if self.outcome.code is not None:
            out["error"] = {"code": self.outcome.code, "message": self.outcome.message, "retryable": self.outcome.retryable}
        return out


__all__ = ["BackfillBatch", "BackfillReport", "DeclinedSource", "BatchReport", "JobOutcome", "JobReport", "ReorganizeReport", "WriteReport"]
