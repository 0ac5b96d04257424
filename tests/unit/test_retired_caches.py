"""Cache files an earlier version wrote under names nothing reads now (the no-op verdict and
the canonical proofs as JSON in the runtime folder, the topic outline tables as ``*.json`` in
the user cache dir) are removed by the next locked open, with the temp files their dead
writers left; a read-only open leaves everything as it is, and the current caches stay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memory_tui.core.format.paths import Layout
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.fsutil import user_cache_dir
from memory_tui.core.store.archives import append_records
from memory_tui.core.store.workspace import open_state
from memory_tui.core.tx import api as tx

RECORDS = [SourceRecord("openprogram", "sess-r", f"m{i:03d}", i + 1, "user", f"message {i}",
                        timestamp="2026-11-30T05:00:00+00:00") for i in range(2)]
ADA = f"# Ada\n\nAda drinks tea.[^e1]\n\n[^e1]: Time: `2026-11-02`; Sources: [tea]({RECORDS[0].source_id})\n"
OUTLINE_KEY = "0123456789abcdef01234567"  # an old outline table's name: 24 hex digits of its root's hash


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _plant(state: Path) -> tuple[list[Path], list[Path]]:
    """The retired files (to go) and the files that must stay, put in place."""
    runtime = Layout(state / "memory").runtime_dir
    outline = user_cache_dir("outline")
    outline.mkdir(parents=True, exist_ok=True)
    dead = _dead_pid()
    gone = [
        runtime / "memory-tui-noop.json",
        runtime / "memory-tui-canonical.json",
        runtime / f".memory-tui-noop.json.{dead}.tmp",  # the first writers' temp names
        runtime / f"memory-tui-canonical.json.{dead}.tmp",
        runtime / f".memory-tui-canonical.json.{dead}.140001.tmp",  # ``replace_cache_file``'s
        outline / f"{OUTLINE_KEY}.json",
        outline / f".{OUTLINE_KEY}.json.{dead}.140001.tmp",
    ]
    stay = [
        runtime / f".memory-tui-noop.json.{os.getpid()}.7.tmp",  # a live writer's
        outline / f"{OUTLINE_KEY}.outline",  # today's outline table
        runtime / "notes.json",  # not ours
    ]
    for path in gone + stay:
        path.write_text('{"old": true}\n')
    return gone, stay


def _state(at: Path) -> Path:
    (at / "memory" / "topics").mkdir(parents=True)
    append_records(at / "memory", RECORDS)
    assert tx.staged_edit(at, "topics/people/ada.md", ADA, git_commit="off").ok
    return at


def test_a_locked_open_removes_the_retired_caches(tmp_path):
    state = _state(tmp_path / "state")
    gone, stay = _plant(state)
    ada = state / "memory" / "topics" / "people" / "ada.md"
    assert tx.staged_edit(state, "topics/people/ada.md", ada.read_text().replace("tea", "coffee"), git_commit="off").ok
    assert [p.name for p in gone if p.exists()] == []
    assert [p.name for p in stay if not p.exists()] == []


def test_a_read_only_open_leaves_them(tmp_path):
    state = _state(tmp_path / "state")
    gone, stay = _plant(state)
    view = open_state(state)
    assert view.tree.topic("people/ada.md") is not None
    assert [p.name for p in gone + stay if not p.exists()] == []
