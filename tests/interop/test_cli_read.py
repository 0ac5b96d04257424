"""``memory-tui status`` and ``memory-tui why`` against the fixture and OpenProgram's answers."""

from __future__ import annotations

import json

import pytest

from memory_tui.cli import main

EXPECTED_TIP_KEYS = (
    "is_head", "listed", "archived", "branch_ids", "record_ids", "marked_record_ids", "pending_ids",
    "pending_tokens", "first_batch_ids", "first_batch_tokens", "stranded_ids", "foreign_marked_ids",
)


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_why_json_equals_expected(fixture_state_ro, expected, capsys):
    rc, out, err = run(capsys, "--state", str(fixture_state_ro), "why", "--json", "--now", "1796100000")
    assert rc == 0, err
    data = json.loads(out)
    assert data["status_pending_turns"] == expected["status_pending_turns"]
    assert data["workspace_id"] == expected["workspace_id"]
    assert set(data["sessions"]) == set(expected["sessions"])
    for sid, exp in expected["sessions"].items():
        got = data["sessions"][sid]
        for key in ("head_id", "in_registry", "updated_at", "list_branches", "forced_pass_branch_order"):
            assert got[key] == exp[key], (sid, key)
        assert set(got["tips"]) == set(exp["tips"])
        for tip, values in exp["tips"].items():
            assert {k: got["tips"][tip][k] for k in EXPECTED_TIP_KEYS} == values, (sid, tip)
            for turn in got["tips"][tip]["turns"]:
                assert turn["verdict"] in ("written", "pending", "never")
                assert turn["reasons"] and all(r["code"] and r["message"] and r["evidence"] for r in turn["reasons"])
            # every record is written, pending or never (stranded / archived)
            verdicts = {t["id"]: t["verdict"] for t in got["tips"][tip]["turns"]}
            assert all(verdicts[i] == "written" for i in values["marked_record_ids"])


def test_why_one_session_one_tip(fixture_state_ro, capsys):
    rc, out, _ = run(capsys, "--state", str(fixture_state_ro), "why", "local_a1b2c3d4e5", "--tip", "a00000000008_reply",
                     "--json", "--now", "1796100000")
    assert rc == 0
    data = json.loads(out)
    assert list(data["sessions"]) == ["local_a1b2c3d4e5"]
    tip = data["sessions"]["local_a1b2c3d4e5"]["tips"]
    assert list(tip) == ["a00000000008_reply"]
    assert [r["code"] for r in tip["a00000000008_reply"]["reasons"]][0] == "stranded_behind_mark"
    rc, out, _ = run(capsys, "--state", str(fixture_state_ro), "why", "local_a1b2c3d4e5", "--now", "1796100000")
    assert rc == 0 and "stranded_behind_mark" in out and "a00000000007_reply" in out


def test_status(fixture_state_ro, expected, capsys):
    rc, out, err = run(capsys, "--state", str(fixture_state_ro), "status", "--json", "--now", "1796100000")
    assert rc == 0, err
    data = json.loads(out)
    assert data["workspace_id"] == expected["workspace_id"]
    assert data["revision"] == expected["revision"]
    assert data["config"]["trigger_tokens"] == expected["trigger_tokens"]
    assert data["status_pending_turns"] == expected["status_pending_turns"]
    assert sum(s["pending_turns"] for s in data["sessions"]) == expected["status_pending_turns"]
    assert {s["id"]: s["head_id"] for s in data["sessions"]} == {k: v["head_id"] for k, v in expected["sessions"].items()}
    assert data["writer"]["lock_busy"] is False
    rc, out, _ = run(capsys, "--state", str(fixture_state_ro), "status", "--now", "1796100000")
    assert rc == 0 and expected["revision"] in out and "pending    15 turns" in out


@pytest.mark.parametrize("verb", ["status", "why"])
def test_bad_state_dirs_give_one_line_errors(tmp_path, capsys, verb):
    missing = tmp_path / "missing"
    afile = tmp_path / "file"
    afile.write_text("x")
    empty = tmp_path / "empty"
    empty.mkdir()
    for target in (missing, afile, empty):
        rc, out, err = run(capsys, "--state", str(target), verb)
        assert rc != 0 and out == ""
        assert err.startswith("memory-tui: ") and err.count("\n") == 1 and "Traceback" not in err


def test_unknown_session_and_tip(fixture_state_ro, capsys):
    rc, _, err = run(capsys, "--state", str(fixture_state_ro), "why", "nope")
    assert rc == 1 and "no such session" in err
    rc, _, err = run(capsys, "--state", str(fixture_state_ro), "why", "local_a1b2c3d4e5", "--tip", "nope")
    assert rc == 1 and "no such tip" in err


def test_malformed_files_do_not_crash(fixture_state, capsys):
    sdir = fixture_state / "sessions" / "local_a1b2c3d4e5"
    (sdir / "history" / "0006-u-a00000000003.json").write_text('{"id": "a00000000003", "seq": ', encoding="utf-8")
    (sdir / "meta.json").write_text("[]", encoding="utf-8")
    (fixture_state / "sessions" / "index.json").write_text("{", encoding="utf-8")
    (fixture_state / "memory" / ".scriptorium" / "session-end.json").write_text("{", encoding="utf-8")
    rc, out, err = run(capsys, "--state", str(fixture_state), "status", "--json")
    assert rc == 0, err
    data = json.loads(out)
    paths = {p["path"] for p in data["problems"]} | {p["path"] for s in data["sessions"] for p in s["problems"]}
    assert "sessions/local_a1b2c3d4e5/history/0006-u-a00000000003.json" in paths
    assert "sessions/index.json" in paths
    assert "watcher_state_unreadable" in [r["code"] for r in data["reasons"]]
    rc, out, err = run(capsys, "--state", str(fixture_state), "why")
    assert rc == 0, err


def _session_blocks(text):
    """The global lines and ``{sid: lines}`` of ``why``'s text output."""
    head, blocks, current = [], {}, None
    for line in text.splitlines():
        if line.startswith("session "):
            current = line.split()[1]
            blocks[current] = []
        (blocks[current] if current is not None else head).append(line)
    return head, blocks


def test_why_one_session_reads_only_it_and_says_the_same(fixture_state_ro, capsys, monkeypatch):
    """``why SESSION`` loads that session alone, yet prints exactly its part of ``why``."""
    from memory_tui.sessions import store

    rc, full, _ = run(capsys, "--state", str(fixture_state_ro), "why", "--now", "1796100000")
    assert rc == 0
    head, blocks = _session_blocks(full)
    assert len(blocks) > 1
    read_dirs = []
    real = store.load_session_dir
    monkeypatch.setattr(store, "load_session_dir", lambda sid, *a, **k: read_dirs.append(sid) or real(sid, *a, **k))
    for sid, lines in blocks.items():
        read_dirs.clear()
        rc, out, _ = run(capsys, "--state", str(fixture_state_ro), "why", sid, "--now", "1796100000")
        assert rc == 0
        assert out.splitlines() == head + lines, sid
        # the session itself, and the sub-agent sessions (meta.json source agent_spawn) that may
        # name one of its nodes as their spawner: never every session
        spawned = {p.parent.name for p in (fixture_state_ro / "sessions").glob("*/meta.json")
                   if json.loads(p.read_text()).get("source") == "agent_spawn"}
        assert read_dirs[0] == sid and set(read_dirs) <= {sid} | spawned
    rc, _, err = run(capsys, "--state", str(fixture_state_ro), "why", "local_ffffffffff", "--now", "1796100000")
    assert rc != 0 and "no such session" in err
