"""Engine-side helpers for owner actions: outcome table, lock probe, job history (no Textual)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from memory_tui.core.format.errors import RETRYABLE_TRANSACTION_CODES, TRANSACTION_CODES, WRITE_FAILURE_CODES
from memory_tui.core.store.lock import lock_path, write_lock
from memory_tui.core.store.lockprobe import MEMORY_TUI, OPENPROGRAM, UNKNOWN, classify_command, flock_writers, probe_write_lock
from memory_tui.core.format.outcomes import OUTCOMES, describe_outcome
from memory_tui.pipeline.history import read_job_history

# --------------------------------------------------------------------------- outcomes


def test_every_closed_code_has_a_meaning():
    for code in (*WRITE_FAILURE_CODES, *TRANSACTION_CODES):
        out = describe_outcome(code)
        assert out.known and out.meaning and not out.meaning.startswith("Unrecognised"), code
        assert out.failed


def test_retry_defaults_agree_with_the_transaction_layer():
    for code in RETRYABLE_TRANSACTION_CODES:
        assert describe_outcome(code).retryable
    assert not describe_outcome("INVALID_TOPIC_FORMAT").retryable
    assert describe_outcome("MODEL_RATE_LIMIT").retryable
    assert not describe_outcome("MODEL_AUTHENTICATION").retryable


def test_the_engines_own_verdict_wins_and_unknown_codes_say_so():
    assert describe_outcome("MODEL_FAILURE_UNKNOWN", True).retryable
    assert not describe_outcome("CONCURRENT_UPDATE", False).retryable
    odd = describe_outcome("SOMETHING_ELSE", True)
    assert not odd.known and not odd.retryable and "SOMETHING_ELSE" in odd.meaning
    ok = describe_outcome("success")
    assert not ok.failed and not ok.retryable
    assert describe_outcome(None).code == "none"
    assert "lock" in describe_outcome("CONCURRENT_UPDATE").meaning
    assert set(OUTCOMES) >= set(WRITE_FAILURE_CODES) | set(TRANSACTION_CODES)


# --------------------------------------------------------------------------- lock probe

HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.readline()
"""


def _hold(path, argv0: str):
    # ``exec -a`` gives the stand-in the program name a real holder would have.
    return subprocess.Popen(["bash", "-c", f'exec -a {argv0} "$0" -c "$1" "$2"', sys.executable, HOLDER, str(path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _release(proc):
    proc.stdin.write("\n")
    proc.stdin.close()
    proc.wait(5)


def test_probe_without_a_lock_file_creates_nothing(tmp_path):
    probe = probe_write_lock(tmp_path)
    assert not probe.held and probe.holder is None
    assert not lock_path(tmp_path).exists() and not lock_path(tmp_path).parent.exists()
    assert probe.describe() == "write lock free"


def test_probe_of_a_free_lock_leaves_it_free_and_unchanged(tmp_path):
    with write_lock(tmp_path, timeout=1):
        pass
    path = lock_path(tmp_path)
    before = os.stat(path)
    assert not probe_write_lock(tmp_path).held
    after = os.stat(path)
    assert (before.st_mtime_ns, before.st_size, before.st_ino) == (after.st_mtime_ns, after.st_size, after.st_ino)
    with write_lock(tmp_path, timeout=0.2):  # the probe released what it tried
        pass


@pytest.mark.parametrize("argv0, program", [("openprogram", OPENPROGRAM), ("memory-tui", MEMORY_TUI), ("someone", UNKNOWN)])
def test_probe_names_a_foreign_holder(tmp_path, argv0, program):
    path = lock_path(tmp_path)
    path.parent.mkdir(parents=True)
    proc = _hold(path, argv0)
    try:
        assert proc.stdout.readline().strip() == "locked"
        probe = probe_write_lock(tmp_path)
        assert probe.held
        if not os.path.exists("/proc/locks"):
            pytest.skip("no /proc/locks: the holder cannot be named here")
        assert probe.holder.pid == proc.pid
        assert probe.holder.program == program
        assert not probe.holder.this_process
        assert f"pid {proc.pid}" in probe.describe()
    finally:
        _release(proc)
    assert not probe_write_lock(tmp_path).held


def test_probe_sees_this_process_holding_the_lock(tmp_path):
    with write_lock(tmp_path, timeout=1):
        probe = probe_write_lock(tmp_path)
        assert probe.held
        if os.path.exists("/proc/locks"):
            assert probe.holder.this_process and probe.holder.program == MEMORY_TUI
            assert probe.describe() == "write lock held by memory-tui (this app)"
    assert not probe_write_lock(tmp_path).held


def test_proc_locks_parsing_ignores_other_inodes_readers_and_waiters(tmp_path):
    f = tmp_path / "write.lock"
    f.write_bytes(b"")
    st = os.stat(f)
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    locks = tmp_path / "locks"
    locks.write_text(
        f"1: FLOCK  ADVISORY  WRITE 111 {dev}:{st.st_ino + 1} 0 EOF\n"
        f"2: FLOCK  ADVISORY  READ  222 {dev}:{st.st_ino} 0 EOF\n"
        f"3: POSIX  ADVISORY  WRITE 333 {dev}:{st.st_ino} 0 EOF\n"
        f"4: FLOCK  ADVISORY  WRITE 444 {dev}:{st.st_ino} 0 EOF\n"
        f"4: -> FLOCK  ADVISORY  WRITE 555 {dev}:{st.st_ino} 0 EOF\n"
    )
    assert flock_writers(f, locks) == [444]


def test_classify_command():
    assert classify_command(["/usr/bin/python3", "/home/me/.venv/bin/memory-tui", "write"]) == MEMORY_TUI
    assert classify_command(["python", "-m", "memory_tui"]) == MEMORY_TUI
    assert classify_command(["python", "-m", "openprogram.cli", "serve"]) == OPENPROGRAM
    assert classify_command(["vim"]) == UNKNOWN


# --------------------------------------------------------------------------- job history


def _runtime(tmp_path):
    rt = tmp_path / ".scriptorium"
    rt.mkdir()
    return rt


def test_history_merges_status_and_runs_newest_first(tmp_path):
    rt = _runtime(tmp_path)
    (rt / "writer-status.json").write_text(json.dumps({
        "version": 1, "last_outcome": "failure", "last_success_at": "2026-08-11T00:00:00.123456+00:00",
        "last_failure": {"at": "2026-08-11T00:05:00.654321+00:00", "reason_code": "CONCURRENT_UPDATE", "retryable": True},
    }))
    lines = [
        {"stage": "write", "system_prompt": "s", "prompt": "p", "turns": [
            {"tool": "commit", "status": "ok", "count": 2, "topic_paths": ["topics/a.md"]}],
         "reply": "wrote topics\nmore", "rounds": 1, "input_tokens": 10, "output_tokens": 3, "stop_reason": "end_turn"},
        {"stage": "organize", "system_prompt": "s", "prompt": "p", "error": "CONCURRENT_UPDATE: busy", "turns": []},
        {"stage": "write-repair", "system_prompt": "s", "prompt": "p", "turns": [
            {"tool": "commit", "status": "error", "output": "MemoryError: uncited prose"}], "reply": "tried"},
    ]
    (rt / "agent-history.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    h = read_job_history(tmp_path)
    assert h.total_runs == 3 and not h.problems
    kinds = [(e.origin, e.stage, e.ok) for e in h.entries]
    assert kinds == [
        ("writer-status", "last failure", False), ("writer-status", "last success", True),
        ("agent-history", "write-repair", False), ("agent-history", "organize", False), ("agent-history", "write", True),
    ]
    fail = h.entries[0]
    assert fail.code == "CONCURRENT_UPDATE" and fail.retryable and fail.at.startswith("2026-08-11T00:05")
    write_run = h.entries[-1]
    assert write_run.summary == "wrote topics" and write_run.topic_paths == ("topics/a.md",) and write_run.new_ids == 2
    assert write_run.line == 1 and write_run.input_tokens == 10
    assert h.entries[3].summary == "CONCURRENT_UPDATE: busy"
    assert h.entries[2].summary == "MemoryError: uncited prose"


def test_history_limit_and_bad_lines_are_reported_with_their_line(tmp_path):
    rt = _runtime(tmp_path)
    good = json.dumps({"stage": "write", "turns": [], "reply": "r"})
    (rt / "agent-history.jsonl").write_bytes((good + "\n{not json\n" + "[1]\n" + good + "\n" + good + "\n").encode())
    h = read_job_history(tmp_path, limit=4)
    assert h.total_runs == 5
    assert [e.line for e in h.entries] == [5, 4]
    assert [(p.line, p.path) for p in h.problems] == [(2, ".scriptorium/agent-history.jsonl"), (3, ".scriptorium/agent-history.jsonl")]


def test_history_of_an_empty_workspace(tmp_path):
    h = read_job_history(tmp_path)
    assert h.entries == () and h.total_runs == 0 and h.problems == ()


def test_history_on_the_fixture(fixture_state_ro):
    h = read_job_history(fixture_state_ro / "memory")
    lines = (fixture_state_ro / "memory/.scriptorium/agent-history.jsonl").read_text().splitlines()
    assert h.total_runs == len(lines)
    assert h.entries[0].origin == "writer-status" and h.entries[0].ok
    stages = [json.loads(x)["stage"] for x in reversed(lines)]
    assert [e.stage for e in h.entries if e.origin == "agent-history"] == stages


def test_jobs_verb_prints_history_and_lock_without_creating_files(tmp_path, capsys):
    from memory_tui.cli import main

    state = tmp_path / "state"
    rt = state / "memory" / ".scriptorium"
    rt.mkdir(parents=True)
    (rt / "agent-history.jsonl").write_text(json.dumps({"stage": "backfill", "error": "MODEL_TIMEOUT: slow", "turns": []}) + "\n")
    before = sorted(p.name for p in rt.iterdir())
    assert main(["--state", str(state), "jobs"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "write lock free" and "✗" in out and "MODEL_TIMEOUT: slow" in out
    assert main(["--state", str(state), "jobs", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["lock"] == {"held": False, "pid": None, "program": None, "this_process": False}
    assert data["total_runs"] == 1 and data["entries"][0]["stage"] == "backfill" and not data["entries"][0]["ok"]
    assert sorted(p.name for p in rt.iterdir()) == before  # no lock file, nothing else
