"""Record and topic history from the memory git repository; revert through the transaction."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memory_tui.cli import main
from memory_tui.core.store import gitlog
from memory_tui.core.tx import api as tx
from memory_tui.core.format.errors import MemoryError
from memory_tui.core.store.workspace import AgentRun, open_state
from memory_tui.insights.history import (
    HAND_EDIT,
    INIT,
    MEMORY_TUI,
    ORGANIZER,
    UPDATE,
    WRITER,
    Commit,
    actor_of,
    find_block,
    history,
    pair_runs,
    plan_revert,
    revert,
)
from insights_world import forked_world

WEB = "topics/projects/web.md"


def env(day: int) -> dict[str, str]:
    return gitlog.fixed_env(f"2026-11-{day:02d}T00:00:00+00:00")


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    """The forked world under git, then five hand edits of ^flask001 (v1..v5)."""
    state = forked_world(tmp_path / "state", lost=False)
    root = state / "memory"
    assert gitlog.ensure_history(root, env=env(1)) is None
    for i in range(5):
        text = (root / WEB).read_text()
        old = "The app uses Flask" + ("" if i == 0 else f" v{i}")
        result = tx.staged_edit(state, WEB, text.replace(old, f"The app uses Flask v{i + 1}"), git_env=env(i + 2))
        assert result.ok and result.git_committed, result
    return state


def test_record_history_has_every_version_newest_first(repo):
    h = history(open_state(repo), "^flask001")
    assert h.kind == "record" and h.target == "flask001"
    assert len(h.versions) == 6
    texts = [v.text.split("[^", 1)[0] for v in h.versions]
    assert texts == [f"The app uses Flask v{i}." for i in range(5, 0, -1)] + ["The app uses Flask."]
    assert [v.actor for v in h.versions] == [HAND_EDIT] * 5 + [INIT]
    assert all(v.topic_path == WEB for v in h.versions)
    assert "[^e-0000000005]: Time: `2026-11-01`" in h.versions[0].text  # definitions come along
    assert h.versions[0].date.startswith("2026-11-06")
    # fast0001 was never edited by hand, but the first edit's normaliser expanded its plain
    # source handles into canonical links: that is a change of its text, and only that one
    fast = history(open_state(repo), "fast0001").versions
    assert [v.actor for v in fast] == [HAND_EDIT, INIT]
    assert "](openprogram/s1/u3)" in fast[1].text and "](../../sources/openprogram/_v2/s1.md#source-" in fast[0].text


def test_topic_history(repo):
    h = history(open_state(repo), "projects/web.md")
    assert h.kind == "topic" and h.target == WEB and len(h.versions) == 6
    assert "Flask v5" in h.versions[0].text and "Flask v5" not in h.versions[1].text


def test_revert_record_is_a_new_commit_and_history_is_kept(repo):
    root = repo / "memory"
    h = history(open_state(repo), "flask001")
    head_before = git(root, "rev-parse", "HEAD").strip()
    target = h.versions[3]  # v2
    result = revert(open_state(repo), "flask001", target.commit[:12], git_env=env(20))
    assert result.ok, result
    assert git(root, "rev-parse", "HEAD^").strip() == head_before  # appended, never rewritten
    assert "The app uses Flask v2.[^e-0000000005] ^flask001" in (root / WEB).read_text()
    assert "fast0001" in (root / WEB).read_text()  # the rest of the file is untouched
    after = history(open_state(repo), "flask001")
    assert len(after.versions) == 7 and after.versions[0].actor == MEMORY_TUI
    assert after.versions[0].subject == f"memory: revert {WEB} ^flask001 to {target.commit[:10]} (memory-tui)"
    assert [v.commit for v in after.versions[1:]] == [v.commit for v in h.versions]
    assert open_state(repo).problems == ()


def test_revert_record_restores_its_old_citations(repo):
    """The hand-edit rule lets a revert cite again a trusted source the block used to cite."""
    root = repo / "memory"
    first = history(open_state(repo), "flask001").versions[-1].commit
    text = (root / WEB).read_text()
    block = find_block(text, "flask001")
    # re-cite flask001 to u3 instead of u2 (a new evidence definition)
    new_def = "[^e1]: Time: `2026-11-02`; Sources: [fastapi](openprogram/s1/u3)"
    lines = text.split("\n")
    lines[block.start:block.end] = ["The app uses Flask after all.[^e1] ^flask001"]
    lines = [l for l in lines if not l.startswith("[^e-0000000005]:")]
    i = lines.index("The app uses Flask after all.[^e1] ^flask001")
    lines[i + 1:i + 1] = ["", new_def]
    assert tx.staged_edit(repo, WEB, "\n".join(lines), git_env=env(10)).ok
    assert open_state(repo).tree.by_id("flask001").source_refs == ("openprogram/s1/u3",)
    result = revert(open_state(repo), "flask001", first, git_env=env(11))
    assert result.ok, result
    view = open_state(repo)
    assert view.tree.by_id("flask001").source_refs == ("openprogram/s1/u2",)
    assert view.tree.by_id("flask001").content == "The app uses Flask."
    assert "openprogram/s1/u3)" not in (root / WEB).read_text().split("^flask001")[1].split("^")[0]
    assert view.problems == ()


def test_revert_refused_when_it_would_drop_a_linked_block(repo, capsys):
    root = repo / "memory"
    before_new = git(root, "rev-parse", "HEAD").strip()
    # a new record, then another topic linking to it
    text = (root / WEB).read_text() + "\nThe app ships on Fridays.[^e1]\n\n[^e1]: Time: `2026-11-02`; Sources: [ship](openprogram/s1/u3)\n"
    added = tx.staged_edit(repo, WEB, text, git_env=env(12))
    assert added.ok, added
    new_id = next(iter(added.block_ids.values()))
    link = (f"# Notes\n\nShipping follows [the release day](projects/web.md#^{new_id}).[^e1]\n\n"
            "[^e1]: Time: `2026-11-02`; Sources: [ship](openprogram/s1/u3)\n")
    linked = tx.staged_edit(repo, "topics/notes.md", link, git_env=env(13))
    assert linked.ok, linked
    linker = next(iter(linked.block_ids.values()))
    head = git(root, "rev-parse", "HEAD").strip()
    rev = open_state(repo).revision
    result = revert(open_state(repo), "projects/web.md", before_new, git_env=env(14))
    assert not result.ok and result.code == "INVALID_TOPIC_FORMAT"
    assert f"^{new_id}" in result.message and f"^{linker}" in result.message and "topics/notes.md" in result.message
    assert [b.dropped_id for b in result.blockers] == [new_id]
    assert git(root, "rev-parse", "HEAD").strip() == head and open_state(repo).revision == rev  # nothing written
    assert main(["--state", str(repo), "revert", "projects/web.md", "--to", before_new, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["error"]["blockers"][0]["linked_by"] == linker
    # without the link the same revert goes through and drops the unlinked block
    assert tx.staged_edit(repo, "topics/notes.md", None, git_env=env(15)).ok
    ok = revert(open_state(repo), "projects/web.md", before_new, git_env=env(16))
    assert ok.ok and ok.dropped_ids == (new_id,)
    assert open_state(repo).tree.by_id(new_id) is None


def test_revert_is_compare_and_set(repo):
    view = open_state(repo)  # the owner looks ...
    first = history(view, "flask001").versions[-1].commit
    text = (repo / "memory" / WEB).read_text()
    assert tx.staged_edit(repo, WEB, text.replace("FastAPI.", "FastAPI 0.110."), git_env=env(17)).ok  # ... someone writes
    result = revert(view, "flask001", first, git_env=env(18))
    assert not result.ok and result.code == "CONCURRENT_UPDATE" and result.retryable
    assert "Flask v5" in (repo / "memory" / WEB).read_text()


def test_revert_refuses_what_it_cannot_do(repo):
    view = open_state(repo)
    assert revert(view, "flask001", "0" * 40).code == "INVALID_ARGUMENT"
    assert revert(view, "nosuch01", "HEAD").code == "MEMORY_NOT_FOUND"
    init = history(view, "flask001").versions[-1].commit
    assert revert(view, "flask001", "HEAD").message == "already at that version"
    with pytest.raises(MemoryError) as err:
        plan_revert(view, "nosuch01", init)
    assert err.value.code == "MEMORY_NOT_FOUND"


def test_moved_record_history_and_revert_rebases_its_links(repo):
    root = repo / "memory"
    before_move = git(root, "rev-parse", "HEAD").strip()
    ops = [{"op": "move_records", "memory_ids": ["flask001"],
            "destination": {"topic_path": "topics/archive/old/stack.md", "headings": ["Stack"], "position": "end"}}]
    moved = tx.update(repo, open_state(repo).revision, memory_changes=ops, git_env=env(19))
    assert moved.ok, moved
    h = history(open_state(repo), "flask001")
    assert h.versions[0].topic_path == "topics/archive/old/stack.md" and h.versions[1].topic_path == WEB
    assert h.versions[0].actor == UPDATE
    # edit it in its new home, then revert to the version before the move
    new = root / "topics/archive/old/stack.md"
    assert tx.staged_edit(repo, "topics/archive/old/stack.md", new.read_text().replace("Flask v5", "Flask v6"), git_env=env(20)).ok
    result = revert(open_state(repo), "flask001", before_move, git_env=env(21))
    assert result.ok, result
    view = open_state(repo)
    assert view.problems == ()
    unit = view.tree.by_id("flask001")
    assert unit.topic_path == "archive/old/stack.md" and unit.content == "The app uses Flask v5."
    assert unit.source_refs == ("openprogram/s1/u2",)


def test_history_cli(repo, capsys):
    assert main(["--state", str(repo), "history", "flask001", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "record" and len(data["versions"]) == 6 and data["versions"][0]["actor"] == HAND_EDIT
    assert main(["--state", str(repo), "history", "topics/projects/web.md"]) == 0
    out = capsys.readouterr().out.splitlines()
    commits = [line for line in out if not line.startswith("    ") and line]
    assert out[0] == "topic topics/projects/web.md  (6 version(s))" and "init" in commits[-1]


def test_history_without_git_says_so(tmp_path, capsys):
    state = forked_world(tmp_path / "state", lost=False)
    h = history(open_state(state), "flask001")
    assert h.versions == () and "no git history" in h.problems[0]
    assert main(["--state", str(state), "history", "flask001"]) == 1
    assert "no git history" in capsys.readouterr().err


def test_history_of_an_unknown_record_is_an_error(repo, capsys):
    assert main(["--state", str(repo), "history", "nosuch01"]) == 1
    assert "no commit ever contained ^nosuch01" in capsys.readouterr().err
    with pytest.raises(MemoryError) as err:
        history(open_state(repo), "^bad id")
    assert err.value.code == "INVALID_ARGUMENT"
    assert main(["--state", str(repo), "history", "^--all"]) == 1  # a valid id, never an option to git
    assert "no commit ever contained ^--all" in capsys.readouterr().err
    assert main(["--state", str(repo), "history", "^bad/id"]) == 1
    assert "not a block id" in capsys.readouterr().err


def test_revert_restores_a_corrected_definition(repo):
    root = repo / "memory"
    first = history(open_state(repo), "flask001").versions[-1].commit
    text = (root / WEB).read_text()
    assert "[^e-0000000005]: Time: `2026-11-01`" in text
    assert tx.staged_edit(repo, WEB, text.replace("[^e-0000000005]: Time: `2026-11-01`", "[^e-0000000005]: Time: `2026-10-30`"),
                          git_env=env(22)).ok
    assert open_state(repo).tree.by_id("flask001").when == "2026-10-30"
    assert revert(open_state(repo), "flask001", first, git_env=env(23)).ok
    unit = open_state(repo).tree.by_id("flask001")
    assert unit.when == "2026-11-01" and unit.content == "The app uses Flask."


def test_actors_and_agent_history_pairing():
    assert actor_of("memory: initialize history") == INIT
    assert actor_of("memory: incremental transaction") == WRITER
    assert actor_of("memory: reorganize topics") == ORGANIZER
    assert actor_of("memory: edit topics/core.md") == HAND_EDIT and actor_of("memory: delete topics/a.md") == HAND_EDIT
    assert actor_of("memory: revert topics/a.md to 0123456789 (memory-tui)") == MEMORY_TUI
    assert actor_of("memory: add Ada profile") == UPDATE and actor_of("Update memory") == UPDATE
    assert actor_of("fix typo by hand in git") == "other"
    commits = [Commit(f"c{i}", "a <b>", "d", 0, s, ()) for i, s in enumerate([
        "memory: incremental transaction", "memory: reorganize topics", "memory: incremental transaction",
        "memory: edit topics/a.md"])]  # newest first
    runs = [AgentRun(1, "write", {"reply": "first"}), AgentRun(2, "write", {"error": "boom"}),
            AgentRun(3, "organize", {"reply": "tidy"}), AgentRun(4, "write", {"reply": "second"})]
    details = pair_runs(commits, runs)
    assert details["c0"].startswith("agent-history.jsonl line 4: write") and "second" in details["c0"]
    assert details["c2"].startswith("agent-history.jsonl line 1: write")
    assert details["c1"].startswith("agent-history.jsonl line 3: organize")
    assert "c3" not in details


def test_fixture_history_attributes_writer_commits_to_runs(fixture_state_ro):
    view = open_state(fixture_state_ro)
    for unit in view.tree.units:
        h = history(view, unit.memory_id)
        assert h.versions, unit.memory_id
        assert h.versions[0].text is not None and f"^{unit.memory_id}" in h.versions[0].text
        assert h.versions[0].topic_path == unit.path
    core = history(view, "core.md")
    assert core.versions[0].actor == HAND_EDIT
    writer = [v for v in core.versions if v.actor == WRITER]
    assert writer and all(v.actor_detail and "write" in v.actor_detail for v in writer)


def test_record_revert_changes_only_its_paragraph_byte_for_byte(repo):
    """Blank lines elsewhere in the file (runs of them, as the writer leaves between
    records) are not the record's: a revert of one record leaves them as they are."""
    root = repo / "memory"
    first = history(open_state(repo), "flask001").versions[-1].commit
    text = (root / WEB).read_text()
    spaced = text.replace("# Web\n\n", "# Web\n\n\n", 1).replace("^asst0001\n\n", "^asst0001\n\n\n\n", 1)
    assert tx.staged_edit(repo, WEB, spaced, git_env=env(24)).ok
    before = (root / WEB).read_bytes()
    assert b"# Web\n\n\n" in before and b"^asst0001\n\n\n\n" in before  # the transaction kept them
    assert revert(open_state(repo), "flask001", first, git_env=env(25)).ok
    expected = before.replace(b"The app uses Flask v5.[^e-0000000005] ^flask001",
                              b"The app uses Flask.[^e-0000000005] ^flask001")
    assert (root / WEB).read_bytes() == expected
