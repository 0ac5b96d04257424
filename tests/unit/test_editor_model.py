"""The editor's engine adapter (validate-only → diagnostics) and the job summaries. No Textual."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_tui.core.tx import api as tx
from memory_tui.core.tx.result import TxResult
from memory_tui.core.format.errors import Problem
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.pipeline.jobresult import summarize_backfill, summarize_migrate, summarize_reorganize, summarize_tx, summarize_write
from memory_tui.pipeline.reports import BackfillReport, BatchReport, JobOutcome, ReorganizeReport, WriteReport
from memory_tui.tui.model.editor import Diagnostic, diagnostics_from_problems, save_topic_text, validate_topic_text


@pytest.fixture
def ws(tmp_path) -> Path:
    state = tmp_path / "state"
    mem = state / "memory"
    (mem / "topics").mkdir(parents=True)
    rec = SourceRecord("openprogram", "sess-ed", "m1", 1, "user", "tea", timestamp="2026-11-30T05:00:00+00:00")
    append_records(mem, [rec])
    text = f"# Ada\n\nAda drinks tea.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [tea]({rec.source_id})\n"
    assert tx.staged_edit(state, "topics/people/ada.md", text, git_commit="off").ok
    return state


def test_validate_reports_the_error_on_its_line_and_installs_nothing(ws):
    path = "topics/people/ada.md"
    committed = (ws / "memory" / path).read_text()
    rev = workspace_revision(ws / "memory")
    bad = committed + "\nAda walks daily without a citation.\n"
    v = validate_topic_text(ws, path, bad, seq=7)
    assert v.seq == 7 and not v.ok and v.diagnostics
    d = v.diagnostics[0]
    assert d.code == "INVALID_TOPIC_FORMAT" and d.line == bad.splitlines().index("Ada walks daily without a citation.") + 1
    assert (ws / "memory" / path).read_text() == committed and workspace_revision(ws / "memory") == rev
    good = validate_topic_text(ws, path, committed.replace("drinks tea", "drinks green tea"), seq=8)
    assert good.ok and good.diagnostics == ()


def test_save_goes_through_staged_edit(ws):
    path = "topics/people/ada.md"
    committed = (ws / "memory" / path).read_text()
    rejected = save_topic_text(ws, path, committed + "\nUncited.\n", git_commit="off")
    assert not rejected.ok and rejected.diagnostics and (ws / "memory" / path).read_text() == committed
    saved = save_topic_text(ws, path, committed.replace("drinks tea", "drinks green tea"), git_commit="off")
    assert saved.ok and saved.result.revision == workspace_revision(ws / "memory")
    assert "green tea" in (ws / "memory" / path).read_text()


def test_problems_elsewhere_or_without_a_line_land_on_line_one_and_keep_their_file():
    probs = [
        Problem("INVALID_TOPIC_FORMAT", "b", "topics/a.md", 4, 2),
        Problem("INVALID_TOPIC_FORMAT", "dangling block link: x", "topics/other.md", 9, 1),
        Problem("INVALID_ARGUMENT", "no line", None, None, None),
        Problem("INVALID_TOPIC_FORMAT", "b", "topics/a.md", 4, 2),  # duplicate
        Problem("INVALID_TOPIC_FORMAT", "past the end", "topics/a.md", 99, None),
    ]
    out = diagnostics_from_problems(probs, "topics/a.md", line_count=10)
    assert out == (
        Diagnostic(1, None, "INVALID_TOPIC_FORMAT", "dangling block link: x", "topics/other.md",
                   "§3.7 link: a block link points at a block that exists"),
        Diagnostic(1, None, "INVALID_ARGUMENT", "no line"),
        Diagnostic(4, 2, "INVALID_TOPIC_FORMAT", "b"),
        Diagnostic(10, None, "INVALID_TOPIC_FORMAT", "past the end"),
    )
    assert out[0].label() == ("topics/other.md: INVALID_TOPIC_FORMAT: dangling block link: x "
                              "[§3.7 link: a block link points at a block that exists]")
    assert out[2].rule is None  # a message the format's rules do not know names no rule
    assert out[2].where == "4:2" and out[1].where == "1"


def _batch(result, marked=(), topics=()):
    return BatchReport("s", "t", ["a"], 5, result, list(topics), list(marked))


def test_summaries():
    ok = WriteReport("forced", "extractive", batches=[_batch("written", ["a", "b"], ["topics/x.md"])],
                     outcome=JobOutcome("success"), revision_before="r0", revision="r1")
    ok = summarize_write(ok)
    assert ok.ok and ok.marks_added == 2 and ok.changed_files == ("topics/x.md",) and ok.outcome.code == "success"
    busy = WriteReport("forced", "extractive", batches=[_batch("failed")], revision_before="r0", revision="r0")
    busy.fail("CONCURRENT_UPDATE", True, "lock")
    busy = summarize_write(busy)
    assert not busy.ok and busy.retryable and busy.outcome.code == "CONCURRENT_UPDATE" and not busy.changed
    assert busy.message == "lock"
    nothing = summarize_write(WriteReport("per-turn", "extractive", revision_before="r0", revision="r0"))
    assert nothing.ok and nothing.outcome.code == "none"
    busy_lock = ReorganizeReport(JobOutcome("busy", True, retryable=True))
    assert summarize_reorganize(busy_lock).outcome.code == "CONCURRENT_UPDATE"
    assert summarize_reorganize(ReorganizeReport(JobOutcome("ok"), 1, ("topics/a.md",))).outcome.code == "success"
    failed = summarize_backfill(BackfillReport(JobOutcome("incomplete", True, "MODEL_TIMEOUT", "slow", True), 3, 0, 3, "r"))
    assert failed.retryable and "0 of 3" in failed.message
    assert summarize_migrate({"marked": 4, "sessions": {}}).marks_added == 4
    from memory_tui.core.format.errors import MemoryError

    err = summarize_migrate(None, error=MemoryError("CONCURRENT_UPDATE", "busy"))
    assert err.retryable and not err.ok
    rejected = summarize_tx("edit", "edit", TxResult(ok=False, code="INVALID_TOPIC_FORMAT", message="uncited"))
    assert not rejected.ok and not rejected.retryable and rejected.message == "uncited"
