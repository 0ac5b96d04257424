"""Pure parts of the pipeline: batching rules, status files, counters, settings."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass

import pytest

from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.tokens import CharCounter
from memory_tui.pipeline import status as st
from memory_tui.pipeline.batching import budget_batches, first_batch, plan_batches, unforced_gate
from memory_tui.pipeline.settings import WriterSettings, load_settings


@dataclass(frozen=True)
class R:
    id: str
    content: str
    timestamp: float | None = None


C = CharCounter(1)  # one token per character


def recs(*sizes: int) -> list[R]:
    return [R(f"m{i}", "x" * n, 1000.0 + i) for i, n in enumerate(sizes)]


def test_first_batch_stops_at_the_record_that_reaches_the_threshold():
    b = first_batch(recs(3, 4, 5, 6), C, 7)
    assert [r.id for r in b.records] == ["m0", "m1"] and b.tokens == 7


def test_first_batch_takes_everything_below_threshold():
    b = first_batch(recs(1, 2), C, 100)
    assert len(b) == 2 and b.tokens == 3


def test_plan_batches_forced_and_unforced():
    forced = plan_batches(recs(5, 5, 5, 1), C, 10, forced=True)
    assert [[r.id for r in b.records] for b in forced] == [["m0", "m1"], ["m2", "m3"]]
    # a non-head branch stops when the remainder is below the threshold
    other = plan_batches(recs(5, 5, 5, 1), C, 10, forced=False)
    assert [[r.id for r in b.records] for b in other] == [["m0", "m1"]]


def test_unforced_gate_threshold_or_one_hour():
    b = first_batch(recs(3), C, 10)
    assert not unforced_gate(b, 10, now=1000.0 + 10)
    assert unforced_gate(b, 10, now=1000.0 + 3600)
    big = first_batch(recs(20), C, 10)
    assert unforced_gate(big, 10, now=1000.0)
    untimed = first_batch([R("a", "xx", None)], C, 10)
    assert not unforced_gate(untimed, 10, now=5000.0)  # missing time counts as now


def test_budget_batches_min_one_each_and_at_least_one_item():
    items = [R("a", ""), R("b", "x" * 30), R("c", "x" * 5)]
    out = budget_batches(items, C, 10)
    assert [[r.id for r in b.records] for b in out] == [["a"], ["b"], ["c"]]


def test_writer_status_success_then_failure(tmp_path):
    rt = tmp_path / ".scriptorium"
    st.record_success(rt, 1786406400.123456)
    st.record_failure(rt, 1786406700.5, "CONCURRENT_UPDATE", True)
    text = (rt / "writer-status.json").read_text()
    assert text.endswith("}\n")
    data = json.loads(text)
    assert list(data) == ["version", "last_outcome", "last_success_at", "last_failure"]
    assert data["last_outcome"] == "failure"
    assert data["last_success_at"] == "2026-08-11T00:00:00.123456+00:00"
    assert data["last_failure"] == {"at": "2026-08-11T00:05:00.500000+00:00", "reason_code": "CONCURRENT_UPDATE", "retryable": True}
    assert stat.S_IMODE(os.stat(rt / "writer-status.json").st_mode) == 0o600
    assert (rt / "writer-status.json.lock").exists()
    st.record_failure(rt, 1.0, "SOMETHING_NEW", False)
    assert st.read_writer_status(rt).last_failure["reason_code"] == "WRITER_FAILURE_UNKNOWN"


def test_agent_history_lines(tmp_path):
    st.append_history(tmp_path, [st.history_entry("write", "sys", "p", reply="ok"), st.history_entry("write-repair", "s", "p", error="X: y")])
    lines = (tmp_path / "agent-history.jsonl").read_text(encoding="utf-8").splitlines()
    assert list(json.loads(lines[0])) == ["stage", "system_prompt", "prompt", "turns", "reply", "rounds", "input_tokens", "output_tokens", "stop_reason"]
    assert list(json.loads(lines[1])) == ["stage", "system_prompt", "prompt", "error", "turns"]


def test_counters_keep_unknown_keys_and_trigger_organize():
    data = {"creation_order": {}, "write_commits_since_global": 0, "local_batches": 4, "local_tokens": 10,
            "last_global_at": "2026-08-11T00:00:00+00:00", "cursors": {"s": {"message_id": "m", "ordinal": 3}}}
    now = st.parse_iso("2026-08-11T01:00:00+00:00")
    out, decision = st.bump_counters(data, 100, now)
    assert decision.local and not decision.global_
    assert out["local_batches"] == 0 and out["local_tokens"] == 0 and out["write_commits_since_global"] == 1
    assert out["cursors"] == data["cursors"] and list(out)[-1] == "cursors"
    out2, d2 = st.bump_counters(out, 50_000, now + 86_400)
    assert d2.local and d2.global_ and out2["write_commits_since_global"] == 0
    assert out2["last_global_at"] == st.iso_utc(now + 86_400)


def test_settings_file_and_overrides(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[writer]\nname = "command"\ncommand = "my-agent --print"\ntimeout = 30\n', encoding="utf-8")
    s = load_settings(cfg)
    assert s.name == "command" and s.command == ("my-agent", "--print") and s.timeout == 30
    assert s.with_overrides(name="extractive", topic="topics/inbox.md").topic == "topics/inbox.md"
    assert load_settings(tmp_path / "missing.toml") == WriterSettings()
    cfg.write_text("[writer\nname=1\n", encoding="utf-8")
    with pytest.raises(MemoryError) as exc:
        load_settings(cfg)
    assert exc.value.code == "INVALID_ARGUMENT" and exc.value.line == 1
    cfg.write_text('[writer]\nname = "gpt"\n', encoding="utf-8")
    with pytest.raises(MemoryError):
        load_settings(cfg)
    with pytest.raises(MemoryError):
        WriterSettings().with_overrides(topic="../etc/passwd")


def test_settings_path_env(tmp_path):
    from memory_tui.pipeline.settings import config_path

    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "memory-tui" / "config.toml"
    assert config_path({"MEMORY_TUI_CONFIG": str(tmp_path / "x.toml")}) == tmp_path / "x.toml"


def test_pipeline_never_imports_textual():
    import subprocess
    import sys

    code = (
        "import sys; import memory_tui.pipeline.write, memory_tui.pipeline.reorganize, memory_tui.pipeline.backfill, "
        "memory_tui.pipeline.migrate, memory_tui.pipeline.writers.openai, memory_tui.pipeline.writers.command, memory_tui.demo; "
        "assert 'textual' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_absurdly_nested_state_files_read_as_defaults(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000
    (tmp_path / "writer-status.json").write_text(deep)
    (tmp_path / "runtime.json").write_text(deep)
    assert st.read_writer_status(tmp_path).last_outcome is None
    assert st.load_runtime(tmp_path / "runtime.json")["creation_order"] == {}
    assert st.record_failure(tmp_path, 0.0, "CONCURRENT_UPDATE", True).last_outcome == "failure"
