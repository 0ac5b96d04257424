"""A job that never gets the lock (issue 14) changes nothing -- not even the source archive --
and says CONCURRENT_UPDATE (exit 3, retryable), never a writer failure or a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

from memory_tui.cli import main

SID = "local_9f1e2d3c4b"


def _snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git" not in p.parts and p.name != "write.lock"}


def _hold(lock):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl,os,sys,time;fd=os.open(sys.argv[1],os.O_RDWR|os.O_CREAT);"
         "fcntl.flock(fd,fcntl.LOCK_EX);print('held',flush=True);sys.stdin.read()", str(lock)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_write_that_never_gets_the_lock_appends_nothing(fixture_state, capsys, monkeypatch):
    import memory_tui.core.store.lock as lock_mod

    monkeypatch.setattr(lock_mod, "TIMEOUT_DEFAULT", 0.2)
    mem = fixture_state / "memory"
    before = _snapshot(mem)
    holder = _hold(mem / ".scriptorium" / "write.lock")
    try:
        code = main(["--state", str(fixture_state), "write", SID, "--force", "--json"])
    finally:
        holder.stdin.close()
        holder.wait()
    out = json.loads(capsys.readouterr().out)
    assert code == 3, out
    assert out["reason_code"] == "CONCURRENT_UPDATE" and out["retryable"] is True
    after = _snapshot(mem)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert not any(k.startswith("sources/") or k.startswith("topics/") for k in changed), changed
