"""Contention (issue 14): two memory-tui processes and a plain flock holder that rewrites a topic
between holds. No lost update, every refusal CONCURRENT_UPDATE (exit 3), never a traceback.

CI size: 6 accepted transactions per process. The issue's size (200 per process, the holder
400 holds) is the slow profile: ``python tests/reliability/run_slow.py --contention 200``
(or ``MEMORY_TUI_CONTENTION_N=200``); ``MEMORY_TUI_CONTENTION_REPORT`` names a JSON file for
its figures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from memory_tui.core.tx import api as tx

from rel_support import ids, make_state, topic

HERE = Path(__file__).resolve().parent
N = int(os.environ.get("MEMORY_TUI_CONTENTION_N", "6"))


def test_two_processes_and_a_flock_holder_lose_no_update(tmp_path):
    state = make_state(tmp_path)
    # The holder writes growing versions of its topic that memory-tui accepted, made in a
    # scratch copy: what a cooperating program (OpenProgram) writes under the same lock.
    scratch = tmp_path / "scratch"
    shutil.copytree(state, scratch, symlinks=True)
    text = topic("Holder", [("Holder started.", ids()[0])])
    for v in range(N * 2):
        if v:
            text = (scratch / "memory/topics/holder.md").read_text(encoding="utf-8").rstrip("\n") + (
                f"\n\nHolder wrote {v}.[^h{v}]\n\n[^h{v}]: Time: `2026-11-02`; Sources: [s]({ids()[v % 6]})\n")
        r = tx.staged_edit(scratch, "topics/holder.md", text, git_commit="off")
        assert r.ok, r
        (tmp_path / f"holder-v{v:03d}.md").write_bytes((scratch / "memory/topics/holder.md").read_bytes())
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    script = str(HERE / "contention_worker.py")
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, script, "worker", w, str(N), str(state)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for w in ("A", "B")]
    procs.append(subprocess.Popen([sys.executable, script, "holder", str(N * 2), str(state)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    a, b, h = results
    if os.environ.get("MEMORY_TUI_CONTENTION_REPORT"):
        Path(os.environ["MEMORY_TUI_CONTENTION_REPORT"]).write_text(json.dumps({
            "per_process": N, "holder_holds": N * 2, "accepted": [len(a["accepted"]), len(b["accepted"])],
            "refusals": [a["refusals"], b["refusals"]], "failures": len(a["failures"]) + len(b["failures"]),
            "seconds": round(time.monotonic() - t0)}))
    assert a["failures"] == [] and b["failures"] == [], (a["failures"][:3], b["failures"][:3])
    assert len(a["accepted"]) == N and len(b["accepted"]) == N
    text = (state / "memory/topics/people/ada.md").read_text(encoding="utf-8")
    missing = [c for c in a["accepted"] + b["accepted"] if c not in text]
    assert missing == [], missing  # compare-and-set held: no accepted change was overwritten
    assert (state / "memory/topics/holder.md").read_text(encoding="utf-8") == h["last"]


def test_revision_read_meeting_a_renamed_away_temp_file_walks_again(tmp_path, monkeypatch):
    # Found by the 200-per-process run: a cooperating writer's ``holder.md.tmp`` was listed by
    # the unlocked revision walk and renamed away before it was read (FileNotFoundError).
    from memory_tui.core.store import workspace

    state = make_state(tmp_path)
    mem = state / "memory"
    expected = workspace.workspace_revision(mem)
    real = workspace.iter_revision_files
    calls = []

    def racy(root):
        calls.append(1)
        found = list(real(root))
        if len(calls) == 1:
            ghost = mem / "topics" / "holder.md.tmp"
            found.insert(0, (("topics", "holder.md.tmp"), ghost, found[0][2]))
        return iter(found)

    monkeypatch.setattr(workspace, "iter_revision_files", racy)
    assert workspace.workspace_revision(mem) == expected and len(calls) == 2

    monkeypatch.setattr(workspace, "iter_revision_files", lambda root: iter([(("topics", "gone.md"), mem / "topics/gone.md", None)]))
    from memory_tui.core.format.errors import MemoryError

    try:
        workspace.workspace_revision(mem)
    except MemoryError as exc:
        assert exc.code == "CONCURRENT_UPDATE"
    else:
        raise AssertionError("a workspace that never holds still must be refused, not hashed")
