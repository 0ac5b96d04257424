"""Agent commit audit (memory spec §5.5, §7.9): every commit a writer makes through the port
leaves ``{"tool":"commit",...}`` in the ``turns`` of that run's ``agent-history.jsonl`` line.
Runs on a private copy of OpenProgram's fixture state dir (skips when it is absent)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memory_tui.core.store.gitlog import fixed_env
from memory_tui.pipeline.write import Context, write
from memory_tui.pipeline.writers.base import WriterOutcome, run_with_repair

NOW = 1796100000.0
SESSION = "local_9f1e2d3c4b"


def _ctx(state: Path, **kw) -> Context:
    return Context(state, git_env=fixed_env(), clock=lambda: NOW, **kw)


def _history(state: Path) -> list[dict]:
    path = state / "memory/.scriptorium/agent-history.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _audits(entry: dict) -> list[dict]:
    return [t for t in entry.get("turns", []) if isinstance(t, dict) and t.get("tool") == "commit"]


def test_written_batch_history_carries_an_ok_commit_entry(fixture_state):
    before = len(_history(fixture_state))
    report = write(_ctx(fixture_state), SESSION, force=True)
    assert report.outcome.status == "success", report.to_json()
    runs = _history(fixture_state)[before:]
    written = [b for b in report.batches if b.result == "written"]
    assert written and len(runs) >= len(written)
    oks = [a for run in runs for a in _audits(run) if a["status"] == "ok"]
    assert len(oks) == len(written)
    for audit, batch in zip(oks, written):
        assert set(audit) == {"tool", "status", "count", "topic_paths"}
        assert audit["topic_paths"] == sorted(batch.changed_topics) and audit["topic_paths"]
        assert isinstance(audit["count"], int) and audit["count"] >= 1
    for run in runs:
        assert run["stage"] == "write" and "reply" in run  # a success line keeps OpenProgram's shape


def test_refused_commits_are_audited_per_run(fixture_state, tmp_path):
    from memory_tui.pipeline.writers.command import CommandWriter

    script = tmp_path / "prose.py"
    script.write_text("import pathlib\npathlib.Path('topics/notes.md').write_text('# Notes\\n\\nUncited prose.\\n')\n")
    before = len(_history(fixture_state))
    report = write(_ctx(fixture_state, writer=CommandWriter((sys.executable, str(script)))), SESSION, force=True)
    assert report.outcome.code == "COMMIT_REJECTED"
    runs = _history(fixture_state)[before:]
    assert [r["stage"] for r in runs] == ["write", "write-repair"]
    for run in runs:
        (audit,) = _audits(run)
        assert set(audit) == {"tool", "status", "output"} and audit["status"] == "error"
        assert audit["output"].startswith("MemoryError: ") and "INVALID_TOPIC_FORMAT" in audit["output"]
        assert "error" in run


class NoAuditWriter:
    """A writer that never drains the port's audit (a third-party writer): the pipeline still
    records its commits."""

    name = "plain"
    history: list = []

    def write(self, task, tx):
        def attempt(rejection):
            stage = tx.open_stage(task.allowed_refs)
            (stage.path / "topics" / "notes.md").write_text("# Notes\n\nJust some prose without a citation.\n")
            info = tx.commit_edits(stage)
            return WriterOutcome(info.changed_topics, info.revision)

        return run_with_repair(attempt)


def test_undrained_audit_still_reaches_agent_history(fixture_state):
    before = len(_history(fixture_state))
    report = write(_ctx(fixture_state, writer=NoAuditWriter()), SESSION, force=True)
    assert report.outcome.code == "COMMIT_REJECTED"
    runs = _history(fixture_state)[before:]
    assert len(runs) == 1 and runs[0]["stage"] == "write"
    assert [a["status"] for a in _audits(runs[0])] == ["error", "error"]
    assert "COMMIT_REJECTED" in runs[0]["error"]  # the run failed: an error-shaped line
