"""Requests and environments an attacker or an unlucky user produces (issue 14): each a clear
located error, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys

from memory_tui.cli import main

from rel_support import make_state


def _tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_request_nested_100000_deep_is_a_located_error(tmp_path, capsys):
    state = make_state(tmp_path)
    req = tmp_path / "deep.json"
    req.write_text("[" * 100_000 + "]" * 100_000)
    before = _tree(state / "memory")
    code = main(["--state", str(state), "apply", str(req), "--json"])
    out, err = capsys.readouterr()
    assert code != 0
    assert "RecursionError" not in out + err and "internal error" not in out + err
    assert f"{req}:1:1" in out + err and "nested too deeply" in out + err
    assert _tree(state / "memory") == before


def test_reorganize_dry_run_does_not_take_the_lock(tmp_path, capsys):
    state = make_state(tmp_path)
    lock = state / "memory" / ".scriptorium" / "write.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,os,sys;fd=os.open(sys.argv[1],os.O_RDWR|os.O_CREAT);"
         "fcntl.flock(fd,fcntl.LOCK_EX);print('held',flush=True);sys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code = main(["--state", str(state), "reorganize", "--dry-run", "--json"])
    finally:
        holder.stdin.close()
        holder.wait()
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out.get("status") != "busy", out


def test_read_verbs_warn_about_a_half_finished_install(tmp_path, capsys):
    state = make_state(tmp_path)
    journal = state / "memory" / ".scriptorium" / "install-journal.json"
    journal.write_text(json.dumps({"version": 1, "scratch": ".scriptorium-txn", "targets": []}))
    assert main(["--state", str(state), "status"]) == 0
    out = capsys.readouterr().out
    assert "install-journal.json" in out and "half-finished" in out
    assert journal.exists()  # a read verb reports, never repairs


def test_the_app_without_a_terminal_fails_fast(tmp_path):
    state = make_state(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "memory_tui", "--state", str(state)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "terminal" in proc.stderr and "Traceback" not in proc.stderr
