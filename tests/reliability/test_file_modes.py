"""New files get OpenProgram's modes (memory spec §2.4, issue 14): files 0600, directories 0700
(``session-end.lock`` 0644), for every kind of file memory-tui creates in a workspace. Run under
umask 0, so a file created without an explicit mode would show as 0666 / 0777 here."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memory_tui.cli import main
from memory_tui.core.tx import api as tx
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.pipeline.write import Context, write

from rel_support import ids, make_state, topic

SID = "local_9f1e2d3c4b"


@pytest.fixture
def umask0():
    old = os.umask(0)
    yield
    os.umask(old)


def _modes(mem: Path, only: set[Path] | None = None) -> dict[str, str]:
    """Every entry under ``mem`` (not ``.git``, which git itself writes) whose mode is wrong."""
    bad = {}
    for dirpath, dirnames, filenames in os.walk(mem):
        d = Path(dirpath)
        if d == mem:
            dirnames[:] = [n for n in dirnames if n != ".git"]
        for name in dirnames + filenames:
            p = d / name
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode) or (only is not None and (st.st_dev, st.st_ino) in only):
                continue
            want = 0o700 if stat.S_ISDIR(st.st_mode) else (0o644 if name == "session-end.lock" else 0o600)
            if stat.S_IMODE(st.st_mode) != want:
                bad[p.relative_to(mem).as_posix()] = oct(stat.S_IMODE(st.st_mode))
    return bad


def _kinds(mem: Path) -> set[str]:
    out = set()
    for p in mem.rglob("*"):
        rel = p.relative_to(mem).as_posix()
        if rel.startswith(".git/") or rel == ".git":
            continue
        out.add(rel.split("/")[0] if "/" in rel else rel)
    return out


def test_every_file_kind_of_a_fresh_workspace_is_0600_and_every_folder_0700(tmp_path, umask0, capsys):
    state = make_state(tmp_path, git="auto")  # archive append, two staged edits, views, git, runtime
    r = tx.staged_edit(state, "topics/new/deeper/x.md", topic("X", [("The user likes maps.", ids()[3])]), git_env=fixed_env())
    assert r.ok, r
    for argv in (["views", "--rebuild"], ["status"], ["topics"]):
        main(["--state", str(state), "--json", *argv])
    capsys.readouterr()
    mem = state / "memory"
    # the kinds this test covers really exist, so a missing kind cannot pass unseen
    assert {"topics", "sources", "timeline", "core.md", "recent_events.jsonl", "relations.json", ".scriptorium"} <= _kinds(mem)
    assert (mem / "topics/new/deeper/x.md").is_file()
    assert _modes(mem) == {}


def test_files_a_pipeline_write_creates_or_rewrites_get_the_modes(fixture_state, umask0):
    mem = fixture_state / "memory"
    untouched = {(p.lstat().st_dev, p.lstat().st_ino) for p in mem.rglob("*")}
    report = write(Context(fixture_state, git_env=fixed_env(), clock=lambda: 1796100000.0), SID, force=True)
    assert report.outcome.status == "success", report.to_json()
    created = [p for p in mem.rglob("*") if ".git" not in p.relative_to(mem).parts
               and (p.lstat().st_dev, p.lstat().st_ino) not in untouched]
    assert any(p.match("sources/openprogram/_v2/*.md") for p in created)  # an archive was (re)written
    assert any(p.suffix == ".md" and "topics" in p.relative_to(mem).parts for p in created)
    assert _modes(mem, only=untouched) == {}
