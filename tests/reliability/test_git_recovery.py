"""A kill during the git step (issue 14): a stale ``index.lock`` or an install that never got
committed is finished by the next locked open, and ``status`` says so until then."""

from __future__ import annotations

import json
import subprocess

import pytest

from memory_tui.cli import main
from memory_tui.core.store import gitlog
from memory_tui.core.tx import api as tx
from memory_tui.core.store.lock import write_lock

from rel_support import ids, leftovers, make_state, topic

ENV = gitlog.fixed_env()


def _git(mem, *args) -> str:
    return subprocess.run(["git", *args], cwd=mem, capture_output=True, text=True, check=True).stdout


def _dirty(mem) -> str:
    return _git(mem, "status", "--porcelain", "--", "topics", "sources", "timeline", "core.md")


@pytest.fixture
def gstate(tmp_path):
    state = make_state(tmp_path, git="auto")
    mem = state / "memory"
    assert (mem / ".git").is_dir() and _dirty(mem) == ""
    return state


def _status_problems(capsys, state) -> list[dict]:
    assert main(["--state", str(state), "status", "--json"]) == 0
    return json.loads(capsys.readouterr().out)["problems"]


def test_stale_index_lock_is_reported_then_removed_and_the_edit_committed(gstate, capsys):
    mem = gstate / "memory"
    (mem / ".git" / "index.lock").write_text("")  # what a git killed mid-commit leaves
    assert any("index.lock" in p["message"] for p in _status_problems(capsys, gstate))
    r = tx.staged_edit(gstate, "topics/extra.md", topic("Extra", [("x.", ids()[3])]), git_env=ENV)
    assert r.ok and r.git_committed, r
    assert leftovers(mem) == [] and _dirty(mem) == ""
    assert _git(mem, "log", "-1", "--format=%s").strip() == "memory: edit topics/extra.md"
    assert not any("index.lock" in p["message"] for p in _status_problems(capsys, gstate))


@pytest.mark.parametrize("lock", ["branch", "HEAD.lock", "packed-refs.lock"])
def test_stale_ref_lock_of_a_git_killed_mid_commit_is_removed_and_the_install_committed(gstate, capsys, lock):
    # Found by the slow crash run: a kill inside ``git commit`` can leave the branch's ref lock,
    # after which every commit fails "cannot lock ref" and the install never reached git.
    mem = gstate / "memory"
    if lock == "branch":
        lock = _git(mem, "symbolic-ref", "HEAD").strip() + ".lock"
    (mem / ".git" / lock).write_text("")
    gitlog.mark_pending(mem)
    (mem / "topics/extra.md").write_text(topic("Extra", [("The user likes rain.", ids()[3])]))  # installed, uncommitted
    assert any(lock in p["message"] for p in _status_problems(capsys, gstate))
    r = tx.staged_edit(gstate, "topics/other.md", topic("Other", [("y.", ids()[4])]), git_env=ENV)  # any locked open
    assert r.ok and r.git_committed, r
    assert not (mem / ".git" / lock).exists() and _dirty(mem) == ""
    assert leftovers(mem) == [] and gitlog.git_problems(mem) == []
    assert _git(mem, "log", "-2", "--format=%s").splitlines() == ["memory: edit topics/other.md", gitlog.MSG_RECOVER]
    assert "topics/extra.md" in _git(mem, "show", "--name-only", "--format=", "HEAD~1")


def test_install_killed_before_its_commit_is_committed_by_the_next_open(gstate, capsys, monkeypatch):
    mem = gstate / "memory"

    class Kill(BaseException):
        pass

    def die(*a, **k):
        raise Kill()

    monkeypatch.setattr(gitlog, "commit", die)
    with pytest.raises(Kill):
        tx.staged_edit(gstate, "topics/extra.md", topic("Extra", [("x.", ids()[3])]), git_env=ENV)
    monkeypatch.undo()
    assert (mem / "topics/extra.md").is_file() and _dirty(mem) != ""
    assert any("not yet committed" in p["message"] for p in _status_problems(capsys, gstate))
    assert main(["--state", str(gstate), "views", "--rebuild", "--json"]) == 0  # any locked open
    capsys.readouterr()
    assert _dirty(mem) == ""
    assert "topics/extra.md" in _git(mem, "show", "--name-only", "--format=", "HEAD^") + _git(mem, "show", "--name-only", "--format=", "HEAD")
    assert not _status_problems(capsys, gstate) or all("commit" not in p["message"] for p in _status_problems(capsys, gstate))


def test_pipeline_write_is_not_success_when_git_refuses(fixture_state, monkeypatch):
    from memory_tui.pipeline.write import Context, write

    real = gitlog.commit
    monkeypatch.setattr(gitlog, "commit", lambda root, msg, env=None: gitlog.GitOutcome(False, error="fatal: simulated refusal")
                        if msg == gitlog.MSG_INCREMENTAL else real(root, msg, env=env))
    report = write(Context(fixture_state, git_env=ENV, clock=lambda: 1796100000.0), "local_9f1e2d3c4b", force=True)
    assert report.outcome.status != "success" and report.outcome.code == "GIT_COMMIT_FAILED", report.to_json()
    monkeypatch.undo()
    mem = fixture_state / "memory"
    assert _dirty(mem) != "" and gitlog.git_problems(mem)  # uncommitted, and status will say it
    with write_lock(mem):
        from memory_tui.core.store.install import recover

        recover(mem)
    assert gitlog.git_problems(mem) == [] and _dirty(mem) == ""
