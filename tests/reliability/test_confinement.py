"""Regression tests for writes that escaped the workspace or touched files memory-tui does not
own (issue 14): symlinked folders, non-``.md`` files under ``topics/``, leftover stages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_tui.cli import main
from memory_tui.core.store import install as inst
from memory_tui.core.tx import api as tx
from memory_tui.core.tx import prepare as tx_prepare, stage as tx_stage
from memory_tui.core.format.errors import MemoryError
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.core.format.paths import Layout

from rel_support import ids, leftovers, make_state, topic


def _refusal(state: Path, rel: str, text: str | None) -> str | None:
    """The error code of an edit (raised or returned), None when it succeeded."""
    try:
        r = tx.staged_edit(state, rel, text, git_commit="off")
    except MemoryError as exc:
        return exc.code
    return None if r.ok else r.code


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_stage_lives_in_the_workspace_scratch_area_and_is_removed(tmp_path):
    state = make_state(tmp_path)
    mem = state / "memory"
    seen = []
    real = inst.make_stage_dir

    def spy(layout, *a, **k):
        d = real(layout, *a, **k)
        seen.append(d.path)
        return d

    inst_make = tx_stage.make_stage_dir
    try:
        tx_stage.make_stage_dir = spy
        r = tx.staged_edit(state, "topics/extra.md", topic("Extra", [("x.", ids()[3])]), git_commit="off")
    finally:
        tx_stage.make_stage_dir = inst_make
    assert r.ok, r
    assert seen and all(p.parent == mem / ".scriptorium-stage" for p in seen)
    assert leftovers(mem) == [] and not (mem / ".scriptorium-stage").exists()


_KILLER = r"""
import os, sys
from memory_tui.core.tx import api as tx, stage as tx_stage
real = tx_stage.make_stage_dir
def die(layout, *a, **k):
    d = real(layout, *a, **k)
    (d.path / "marker").write_text("x")
    os._exit(9)   # as kill -9: no cleanup of any kind
tx_stage.make_stage_dir = die
tx.staged_edit(sys.argv[1], "topics/extra.md", "# Extra\n", git_commit="off")
"""


def test_stale_stage_of_a_killed_process_is_removed_on_next_open_but_a_live_one_is_kept(tmp_path):
    state = make_state(tmp_path)
    mem = state / "memory"
    proc = subprocess.run([sys.executable, "-c", _KILLER, str(state)], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    area = mem / ".scriptorium-stage"
    assert any(p.is_dir() for p in area.iterdir())  # the kill left its stage behind
    live = inst.make_stage_dir(Layout(mem))  # another process's stage, still in use
    try:
        r = tx.staged_edit(state, "topics/extra.md", topic("Extra", [("x.", ids()[3])]), git_commit="off")
        assert r.ok, r
        assert sorted(os.listdir(area)) == sorted([live.path.name, live.path.name + ".lock"])
    finally:
        inst.remove_stage_dir(live)
    assert leftovers(mem) == []


@pytest.mark.parametrize("verb", ["edit", "views"])
def test_non_md_files_under_topics_survive_every_install(tmp_path, capsys, verb):
    state = make_state(tmp_path)
    topics = state / "memory" / "topics"
    (topics / "notes.txt").write_text("my own notes\n")
    (topics / "attachments").mkdir()
    (topics / "attachments" / "plan.pdf").write_bytes(b"%PDF-1.4 \x00\x01")
    before_ino = (topics / "notes.txt").stat().st_ino
    if verb == "edit":
        text = topic("Extra", [("x.", ids()[3])])
        src = tmp_path / "extra.md"
        src.write_text(text)
        code = main(["--state", str(state), "edit", "topics/extra.md", "--from", str(src), "--create", "--json"])
    else:
        code = main(["--state", str(state), "views", "--rebuild", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert (topics / "notes.txt").read_text() == "my own notes\n"
    assert (topics / "notes.txt").stat().st_ino == before_ino  # untouched, not rewritten
    assert (topics / "attachments" / "plan.pdf").read_bytes() == b"%PDF-1.4 \x00\x01"
    assert not any("notes.txt" in f or "plan.pdf" in f for f in out.get("changed_files", []))


def test_deleting_a_topic_keeps_a_foreign_file_beside_it(tmp_path):
    state = make_state(tmp_path)
    topics = state / "memory" / "topics"
    (topics / "people" / "photo.jpg").write_bytes(b"\xff\xd8jpeg")
    r = tx.staged_edit(state, "topics/people/ada.md", None, git_commit="off")
    assert r.ok, r
    assert not (topics / "people" / "ada.md").exists()
    assert (topics / "people" / "photo.jpg").read_bytes() == b"\xff\xd8jpeg"


def test_symlinked_runtime_dir_is_never_written_through(tmp_path):
    state = make_state(tmp_path)
    mem = state / "memory"
    outside = tmp_path / "outside"
    os.rename(mem / ".scriptorium", outside)
    os.symlink(outside, mem / ".scriptorium")
    before = _tree(outside)
    code = _refusal(state, "topics/extra.md", topic("Extra", [("x.", ids()[3])]))
    assert code == "PATH_OUTSIDE_WORKSPACE"
    assert _tree(outside) == before


@pytest.mark.parametrize("name", ["topics", "sources", "timeline"])
def test_symlinked_workspace_folder_is_refused_not_replaced(tmp_path, name):
    state = make_state(tmp_path)
    mem = state / "memory"
    outside = tmp_path / f"outside-{name}"
    os.rename(mem / name, outside)
    os.symlink(outside, mem / name)
    before = _tree(outside)
    code = _refusal(state, "topics/extra.md", topic("Extra", [("x.", ids()[3])]))
    assert code == "PATH_OUTSIDE_WORKSPACE"
    assert (mem / name).is_symlink()
    assert _tree(outside) == before


def test_editing_a_symlinked_topic_is_refused_and_the_link_kept(tmp_path):
    state = make_state(tmp_path)
    topics = state / "memory" / "topics"
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text((topics / "people" / "ada.md").read_text())
    (topics / "people" / "ada.md").unlink()
    os.symlink(elsewhere, topics / "people" / "ada.md")
    before = elsewhere.read_bytes()
    new = topic("Ada", [("Ada drinks coffee.", ids()[1])])
    code = _refusal(state, "topics/people/ada.md", new)
    assert code in ("PATH_OUTSIDE_WORKSPACE", "READ_ONLY_PATH")
    assert (topics / "people" / "ada.md").is_symlink()
    assert elsewhere.read_bytes() == before


@pytest.fixture
def fx_state(fixture_state):
    return fixture_state


def test_symlinked_session_history_is_never_marked(fixture_state, tmp_path):
    from memory_tui.pipeline.write import Context, write

    sess = fixture_state / "sessions" / "local_9f1e2d3c4b"
    outside = tmp_path / "outside-history"
    os.rename(sess / "history", outside)
    os.symlink(outside, sess / "history")
    before = _tree(outside)
    report = write(Context(fixture_state, git_env=fixed_env(), clock=lambda: 1796100000.0), "local_9f1e2d3c4b", force=True)
    assert _tree(outside) == before
    assert report.outcome.status != "success"
    assert report.outcome.code == "PATH_OUTSIDE_WORKSPACE", report.to_json()


@pytest.mark.parametrize("argv", [["/abs/path/x.md"], ["/etc/passwd", "--check"], ["C:\\\\x\\\\y.md", "--check"],
                                  ["../outside.md", "--check"], ["people/\x00.md", "--check"], ["topics\\\\..\\\\..\\\\x.md"]])
def test_request_paths_outside_topics_are_refused(tmp_path, capsys, argv):
    state = make_state(tmp_path)
    mem = state / "memory"
    src = tmp_path / "x.md"
    src.write_text(topic("X", [("x.", ids()[3])]))
    before = _tree(mem)
    code = main(["--state", str(state), "edit", *argv, "--from", str(src), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["ok"] is False, out
    assert out["code"] in ("PATH_OUTSIDE_WORKSPACE", "READ_ONLY_PATH", "INVALID_ARGUMENT"), out
    assert {k: v for k, v in _tree(mem).items() if "canonical" not in k} == {k: v for k, v in before.items() if "canonical" not in k}
    assert not (mem / "topics" / "abs").exists() and not (mem / "topics" / "etc").exists()


def test_a_file_vanishing_during_an_edit_is_retried_then_retryable(tmp_path, monkeypatch):
    state = make_state(tmp_path)
    real = tx_prepare.prepare
    calls = {"n": 0}

    def racy(stage, ctx):
        calls["n"] += 1
        if calls["n"] <= limit:
            raise FileNotFoundError(2, "No such file or directory", str(stage.path / "topics/gone.md"))
        return real(stage, ctx)

    monkeypatch.setattr(tx_prepare, "prepare", racy)
    limit = 1
    r = tx.staged_edit(state, "topics/extra.md", topic("Extra", [("x.", ids()[3])]), git_commit="off")
    assert r.ok, r
    calls["n"], limit = 0, 99
    code = _refusal(state, "topics/extra2.md", topic("Extra", [("y.", ids()[4])]))
    assert code == "CONCURRENT_UPDATE"
