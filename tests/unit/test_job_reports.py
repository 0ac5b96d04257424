"""The jobs' typed reports and progress phases: one outcome shape for every job, and the
``--json`` objects keep the memory spec's keys in the spec's order."""

from __future__ import annotations

import dataclasses
import json

import pytest

from memory_tui.pipeline.context import JobCancelled, JobEvent, JobPhase
from memory_tui.pipeline.reports import (
    BackfillBatch,
    BackfillReport,
    BatchReport,
    JobOutcome,
    JobReport,
    ReorganizeReport,
    WriteReport,
)


def test_a_phase_reads_as_its_word():
    assert JobPhase.BATCH == "batch" and f"{JobPhase.ORGANIZE}" == "organize" and str(JobPhase.WARNING) == "warning"
    assert json.dumps({"phase": JobPhase.BACKFILL}) == '{"phase": "backfill"}'
    event = JobEvent("batch", 1, 2, "m")
    assert event.phase is JobPhase.BATCH and event == JobEvent(JobPhase.BATCH, 1, 2, "m")
    assert JobCancelled("organize", 3).phase is JobPhase.ORGANIZE
    with pytest.raises(ValueError):
        JobEvent("batches")  # a misspelt phase fails where it is made


def test_every_report_says_how_it_failed_the_same_way():
    write = WriteReport("forced", "extractive")
    assert write.outcome.failure is None
    write.fail("MODEL_TIMEOUT", True, "slow")
    write.fail("COMMIT_REJECTED", False, "rejected")  # a non-retryable failure outranks a retryable one
    write.fail("MODEL_RATE_LIMIT", True, "later")  # after that the first failure wins
    assert write.outcome == JobOutcome("non-retryable", True, "COMMIT_REJECTED", "rejected", False)
    reports: list[JobReport] = [
        write,
        ReorganizeReport(JobOutcome("busy", True, retryable=True)),
        ReorganizeReport(JobOutcome("failed", True, "PATCH_CONFLICT", "stale", path="topics/a.md")),
        ReorganizeReport(JobOutcome("empty")),
        BackfillReport(JobOutcome("incomplete", True, "MODEL_TIMEOUT", "slow", True), 3, 0, 3, "r"),
        BackfillReport(JobOutcome("ok"), 3, 3, 0, "r"),
    ]
    assert [r.outcome.failure for r in reports] == [
        "COMMIT_REJECTED: rejected", "busy", "PATCH_CONFLICT: stale", None, "MODEL_TIMEOUT: slow", None,
    ]


def test_success_keeps_a_message_and_a_write_reads_its_marks():
    report = WriteReport("per-turn", "extractive", batches=[BatchReport("s", "t", ["a", "b"], 5, "written", ["topics/x.md"], ["a", "b"])])
    report.say("note")
    report.succeed()
    assert report.outcome == JobOutcome("success", message="note") and report.marked_turns == 2
    data = report.to_json()
    assert (data["outcome"], data["reason_code"], data["retryable"], data["message"]) == ("success", None, False, "note")
    assert data["written_batches"] == 1 and data["marked_turns"] == 2


def test_reorganize_json_keeps_the_spec_keys_in_order():
    failed = ReorganizeReport(JobOutcome("failed", True, "PATCH_CONFLICT", "stale", path="topics/a.md"), 4,
                              ("topics/b.md",), reason="manual", revision_before="r0", revision="r1")
    assert json.dumps(failed.to_json()) == json.dumps({
        "status": "failed", "topics": 4, "changed_files": ["topics/b.md"],
        "error": {"code": "PATCH_CONFLICT", "message": "stale", "path": "topics/a.md"}, "reason": "manual"})
    plan = ReorganizeReport(JobOutcome("ok"), 2, planned_ops=({"op": "delete_record", "memory_id": "x"},), reason="manual")
    assert list(plan.to_json()) == ["status", "topics", "changed_files", "planned_ops", "reason"]
    assert ReorganizeReport(JobOutcome("busy", True, retryable=True)).to_json() == {"status": "busy", "topics": 0, "changed_files": []}


def test_backfill_json_keeps_the_spec_keys_in_order():
    plan = BackfillReport(JobOutcome("ok"), 2, 0, 2, "r", dry_run=True, writer="extractive",
                          batches=(BackfillBatch(("a", "b"), 7),))
    assert list(plan.to_json()) == ["status", "dry_run", "candidates", "processed", "remaining", "revision", "writer", "batches",
                                   "declined"]
    assert plan.to_json()["batches"] == [{"ids": ["a", "b"], "tokens": 7}]
    run = BackfillReport(JobOutcome("incomplete", True, "MODEL_TIMEOUT", "slow", True), 2, 1, 1, "r",
                         batches=(BackfillBatch(("a",), 3),), changed_files=("topics/core.md",), legacy_core="promoted")
    assert json.dumps(run.to_json()) == json.dumps({
        "status": "incomplete", "candidates": 2, "processed": 1, "remaining": 1, "revision": "r", "declined": [],
        "legacy_core": "promoted", "error": {"code": "MODEL_TIMEOUT", "message": "slow", "retryable": True}})


def test_reorganize_and_backfill_reports_are_values():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ReorganizeReport(JobOutcome("ok")).topics = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        BackfillReport(JobOutcome("ok")).processed = 3  # type: ignore[misc]
