"""``record move|update|delete`` end to end through ``memory_tui.cli.main``, on a crafted
workspace (built by the real archive writer and transaction) and on the fixture copy."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest

from memory_tui.cli import main
from memory_tui.core.tx import recordops
from memory_tui.core.tx import api as tx
from memory_tui.core.tx.stage import source_index
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records
from memory_tui.core.format.topics import parse_tree
from memory_tui.core.store.workspace import workspace_revision


def _records() -> list[SourceRecord]:
    return [SourceRecord("openprogram", "sess-rec", f"m{i:03d}", i + 1, "user", f"message {i}",
                         timestamp="2026-11-30T05:00:00+00:00") for i in range(4)]


@pytest.fixture
def ws(tmp_path) -> Path:
    state = tmp_path / "state"
    mem = state / "memory"
    (mem / "topics").mkdir(parents=True)
    recs = _records()
    append_records(mem, recs)
    ids = [r.source_id for r in recs]
    ada = (f"# Ada\n\n## Drinks\n\nAda drinks tea.[^e1]\n\n[^e1]: Time: `2026-11-02`; Sources: [tea]({ids[1]})\n\n"
           f"Ada drinks coffee at night.[^e2]\n\n[^e2]: Time: `2026-11-03`; Sources: [coffee]({ids[2]})\n\n"
           f"## Walks\n\nAda walks daily.[^e3]\n\n[^e3]: Time: `2026-11-04`; Sources: [walk]({ids[3]})\n")
    r = tx.staged_edit(state, "topics/people/ada.md", ada, git_commit="off")
    assert r.ok, r
    return state


def _tree(state: Path):
    root = state / "memory"
    return parse_tree(root / "topics", resolve=source_index(root).resolve_target)


def _unit(state: Path, content_start: str):
    return next(u for u in _tree(state).units if u.content.startswith(content_start))


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, argv: list[str]) -> tuple[int, dict]:
    code, out, _ = _run(capsys, argv + ["--json"])
    return code, json.loads(out)


def test_move_within_the_heading_to_the_start(ws, capsys):
    coffee = _unit(ws, "Ada drinks coffee")
    tea = _unit(ws, "Ada drinks tea")
    code, out = _json(capsys, ["record", "move", coffee.memory_id, "--state", str(ws), "--to", "people/ada.md", "--start"])
    assert code == 0 and out["ok"], out
    assert out["op"]["destination"] == {"topic_path": "topics/people/ada.md", "headings": ["Ada", "Drinks"], "position": "start"}
    order = [u.memory_id for u in _tree(ws).units]
    assert order.index(coffee.memory_id) < order.index(tea.memory_id)
    assert out["location"]["headings"] == ["Ada", "Drinks"] and out["location"]["block_ids"] == [coffee.memory_id]
    assert out["revision"] == workspace_revision(ws / "memory")


def test_move_after_a_record_under_another_heading_and_to_another_topic(ws, capsys):
    tea, walk = _unit(ws, "Ada drinks tea"), _unit(ws, "Ada walks")
    code, out, _ = _run(capsys, ["--state", str(ws), "record", "move", tea.memory_id, "--to", "people/ada.md", "--after", walk.memory_id])
    assert code == 0 and f"moved {tea.memory_id}" in out and "under Ada › Walks" in out
    moved = _tree(ws).by_id(tea.memory_id)
    assert moved.headings == ("Ada", "Walks") and moved.line > _tree(ws).by_id(walk.memory_id).line
    code, out = _json(capsys, ["--state", str(ws), "record", "move", tea.memory_id, "--to", "topics/people/bob.md",
                               "--heading", "Bob", "--heading", "Likes"])
    assert code == 0, out
    now = _tree(ws).by_id(tea.memory_id)
    assert (now.path, now.headings) == ("topics/people/bob.md", ("Bob", "Likes"))
    assert now.source_refs == tea.source_refs  # its evidence moved with it
    assert "topics/people/bob.md" in out["changed_files"]


def test_move_usage_errors(ws, capsys):
    tea = _unit(ws, "Ada drinks tea")
    with pytest.raises(SystemExit):
        main(["--state", str(ws), "record", "move", tea.memory_id])  # --to is required
    capsys.readouterr()
    code, _, err = _run(capsys, ["--state", str(ws), "record", "move", tea.memory_id, "--to", "people/ada.md", "--start", "--end"])
    assert code == 2 and "at most one" in err
    code, out = _json(capsys, ["--state", str(ws), "record", "move", "nope0000", "--to", "people/ada.md"])
    assert code == 1 and out["error"]["code"] == "MEMORY_NOT_FOUND"


def test_update_keeps_sources_labels_and_time(ws, capsys):
    tea = _unit(ws, "Ada drinks tea")
    rev = workspace_revision(ws / "memory")
    code, out = _json(capsys, ["--state", str(ws), "record", "update", tea.memory_id, "--text", "Ada drinks green tea."])
    assert code == 0 and out["ok"], out
    after = _tree(ws).by_id(tea.memory_id)
    assert after.content == "Ada drinks green tea." and after.source_refs == tea.source_refs and after.when == tea.when
    assert after.evidence[0].links[0].label == "tea"
    new_eid = out["evidence_ids"]["new-evidence-record-1"]
    assert out["location"]["evidence_ids"] == [new_eid] and new_eid.startswith("e-")
    assert out["op"]["sources"] == [{"source": tea.source_refs[0], "label": "tea"}]
    assert out["revision"] != rev


def test_update_from_a_file_and_stdin(ws, capsys, tmp_path, monkeypatch):
    tea = _unit(ws, "Ada drinks tea")
    f = tmp_path / "t.txt"
    f.write_text("Ada drinks oolong.\n")
    code, out, _ = _run(capsys, ["--state", str(ws), "record", "update", tea.memory_id, "--from", str(f)])
    assert code == 0 and re.search(r"^  evidence id e-[0-9a-f]+ \(unchanged\)$", out, re.M)  # same sources: same id
    monkeypatch.setattr(sys, "stdin", io.StringIO("Ada drinks matcha."))
    code, out, _ = _run(capsys, ["--state", str(ws), "record", "update", tea.memory_id, "--from", "-"])
    assert code == 0 and _tree(ws).by_id(tea.memory_id).content == "Ada drinks matcha."
    code, _, err = _run(capsys, ["--state", str(ws), "record", "update", tea.memory_id])
    assert code == 2 and "exactly one" in err


def test_update_with_two_paragraphs_is_rejected_and_changes_nothing(ws, capsys):
    tea = _unit(ws, "Ada drinks tea")
    before = (ws / "memory/topics/people/ada.md").read_bytes()
    code, out = _json(capsys, ["--state", str(ws), "record", "update", tea.memory_id, "--text", "One.\n\nTwo."])
    assert code == 1 and not out["ok"] and out["error"]["code"] == "INVALID_ARGUMENT"
    assert (ws / "memory/topics/people/ada.md").read_bytes() == before


def test_compare_and_set_refuses_a_stale_revision(ws, capsys):
    tea = _unit(ws, "Ada drinks tea")
    stale = workspace_revision(ws / "memory")
    assert main(["--state", str(ws), "record", "update", tea.memory_id, "--text", "Changed once."]) == 0
    capsys.readouterr()
    before = (ws / "memory/topics/people/ada.md").read_bytes()
    code, out = _json(capsys, ["--state", str(ws), "record", "delete", tea.memory_id, "--base-revision", stale])
    assert code == 3 and out["error"]["code"] == "CONCURRENT_UPDATE"
    assert (ws / "memory/topics/people/ada.md").read_bytes() == before


def test_delete_and_check(ws, capsys):
    walk = _unit(ws, "Ada walks")
    code, out, _ = _run(capsys, ["--state", str(ws), "record", "delete", walk.memory_id, "--check"])
    assert code == 0 and out.startswith("valid: delete") and _tree(ws).by_id(walk.memory_id) is not None
    code, out = _json(capsys, ["--state", str(ws), "record", "delete", walk.memory_id])
    assert code == 0 and out["ok"] and "linked_by" not in out
    assert _tree(ws).by_id(walk.memory_id) is None
    assert "Walks" not in (ws / "memory/topics/people/ada.md").read_text()  # the empty section is pruned


def test_refused_delete_lists_the_records_linking_to_it_on_the_fixture(fixture_state, capsys):
    tree = _tree(fixture_state)
    linker = next(u for u in tree.units if u.relation_targets)
    target = linker.relation_targets[0]
    rev = workspace_revision(fixture_state / "memory")
    code, out, err = _run(capsys, ["--state", str(fixture_state), "record", "delete", target])
    assert code == 1 and out == ""
    assert "dangling block link" in err and f"linked from {linker.identity} at {linker.path}:{linker.line}" in err
    code, data = _json(capsys, ["--state", str(fixture_state), "record", "delete", target])
    assert data["linked_by"] == [{"memory_id": linker.identity, "path": linker.path, "line": linker.line, "content": linker.content}]
    assert workspace_revision(fixture_state / "memory") == rev


def test_cli_and_engine_give_the_same_bytes_on_the_fixture(fixture_state, tmp_path, capsys):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(fixture_state, other, symlinks=True)
    tree = _tree(fixture_state)
    unit = next(u for u in tree.units if u.path != "topics/core.md" and u.source_refs and not u.legacy)
    env = {"git_commit": "off"}
    a = recordops.update_record_text(other, unit.memory_id, "Ada prefers window seats.", **env)
    assert a.ok, a.result
    assert main(["--state", str(fixture_state), "record", "update", unit.memory_id, "--text", "Ada prefers window seats.",
                 "--git-commit", "off"]) == 0
    capsys.readouterr()
    for rel in ("topics/people/ada.md", "core.md", "recent_events.jsonl"):
        assert (fixture_state / "memory" / rel).read_bytes() == (other / "memory" / rel).read_bytes(), rel
    assert workspace_revision(fixture_state / "memory") == workspace_revision(other / "memory")
    b = recordops.move_record(other, unit.memory_id, topic="people/zed.md", headings=["Zed"], position="end", **env)
    assert b.ok, b.result
    assert b.location.path == "topics/people/zed.md" and b.location.headings == ("Zed",)


def test_destinations_list_every_heading_chain_and_its_records(ws):
    tree = _tree(ws)
    (ada,) = recordops.destinations(tree)
    assert ada.path == "topics/people/ada.md"
    chains = {s.headings: [c for _, c in s.records] for s in ada.sections}
    assert chains == {("Ada",): [], ("Ada", "Drinks"): ["Ada drinks tea.", "Ada drinks coffee at night."],
                      ("Ada", "Walks"): ["Ada walks daily."]}


def test_topic_delete_check_on_the_fixture(fixture_state_ro):
    tree = _tree(fixture_state_ro)
    core = recordops.topic_delete_check(tree, "topics/core.md")
    assert not core.allowed and "core master" in core.reason and core.records > 0
    linker = next(u for u in tree.units if u.relation_targets)
    target = tree.by_id(linker.relation_targets[0])
    check = recordops.topic_delete_check(tree, target.topic_path)
    assert check.allowed and check.path == target.path
    assert [(d.memory_id, d.path, d.line) for d in check.dangling] == [(linker.identity, linker.path, linker.line)]
    own = recordops.topic_delete_check(tree, linker.topic_path)
    assert all(d.path != linker.path for d in own.dangling)
    missing = recordops.topic_delete_check(tree, "nope.md")
    assert not missing.allowed and "does not exist" in missing.reason
