"""The byte-compatible marker (session spec §4.6)."""

from __future__ import annotations

import json
import stat


from memory_tui.sessions.marks import MARK_KEY, mark_nodes, serialize_node
from test_sessions_helpers import ROOT, make_session, node, turn

WS = "w-0000aaaa"


def test_mark_sets_key_last_keeps_order_and_mode(tmp_path):
    sdir = make_session(tmp_path, "s", [ROOT, *turn("u1", 1, "ROOT")], {"head_id": "u1_reply"})
    meta_before = (sdir / "meta.json").read_bytes()
    meta_mtime = (sdir / "meta.json").stat().st_mtime_ns
    res = mark_nodes(sdir, ["u1", "u1_reply", "ghost"], WS)
    assert res.marked == ("u1", "u1_reply") and res.missing == ("ghost",) and res.ok
    path = sdir / "history" / "0001-u-u1.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert list(data) == ["id", "created_at", "seq", "role", "name", "input", "output", "caller", "predecessor", "reads", "metadata"]
    assert list(data["metadata"])[-1] == MARK_KEY and data["metadata"][MARK_KEY] == WS
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert (sdir / "meta.json").read_bytes() == meta_before
    assert (sdir / "meta.json").stat().st_mtime_ns == meta_mtime
    assert not [p for p in (sdir / "history").iterdir() if p.name.endswith(".tmp")]
    # idempotent: a second pass rewrites nothing
    mtime = path.stat().st_mtime_ns
    again = mark_nodes(sdir, ["u1"], WS)
    assert again.already == ("u1",) and again.marked == () and path.stat().st_mtime_ns == mtime


def test_existing_key_keeps_position(tmp_path):
    n = node("u1", 1, pred="ROOT", caller="ROOT", extra_meta={MARK_KEY: "w-ffffffff", "source": "web"})
    sdir = make_session(tmp_path, "s", [ROOT, n], {})
    mark_nodes(sdir, ["u1"], WS)
    meta = json.loads((sdir / "history" / "0001-u-u1.json").read_text())["metadata"]
    assert list(meta) == [MARK_KEY, "source"] and meta[MARK_KEY] == WS


def test_suffix_collision_is_not_marked(tmp_path):
    # "a-b" ends with "-b.json" too; only the node whose id really is "b" is marked.
    sdir = make_session(tmp_path, "s", [ROOT, node("a-b", 1, pred="ROOT"), node("b", 2, pred="a-b")], {})
    assert mark_nodes(sdir, ["b"], WS).marked == ("b",)
    assert MARK_KEY not in json.loads((sdir / "history" / "0001-u-a-b.json").read_text())["metadata"]


def test_corrupt_node_file_is_a_problem_not_a_crash(tmp_path):
    sdir = make_session(tmp_path, "s", [ROOT], {})
    (sdir / "history" / "0001-u-x.json").write_text('{"id": "x",', encoding="utf-8")
    res = mark_nodes(sdir, ["x"], WS)
    assert not res.ok and res.problems[0].path == "sessions/s/history/0001-u-x.json" and res.problems[0].line == 1


def test_serialize_normalizes_key_order_and_nulls():
    data = {"metadata": None, "id": "x", "seq": 1, "role": "user", "name": None, "created_at": 1.5, "output": "é"}
    assert serialize_node(data) == (
        '{"id": "x", "created_at": 1.5, "seq": 1, "role": "user", "name": "", "input": null, '
        '"output": "é", "caller": "", "predecessor": null, "reads": [], "metadata": {}}'
    )


def _marked_fixture_nodes(state):
    for path in sorted((state / "sessions").glob("*/history/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("metadata", {}).get(MARK_KEY):
            yield path, data


def test_reproduces_openprogram_bytes(fixture_state):
    """Strip OpenProgram's mark, re-mark with the same value: the bytes are identical."""
    count = 0
    for path, data in _marked_fixture_nodes(fixture_state):
        original = path.read_bytes()
        value = data["metadata"].pop(MARK_KEY)
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        assert path.read_bytes() != original
        res = mark_nodes(path.parent.parent, [data["id"]], value)
        assert res.marked == (data["id"],), path
        assert path.read_bytes() == original, path
        count += 1
    assert count >= 20


def test_replacing_a_foreign_mark_only_changes_the_value(fixture_state):
    sdir = fixture_state / "sessions" / "local_9f1e2d3c4b"
    path = sdir / "history" / "0001-u-f00000000001.json"
    original = path.read_text(encoding="utf-8")
    assert '"w-fe36b7bf"' in original
    mark_nodes(sdir, ["f00000000001"], "w-01760fa0")
    assert path.read_text(encoding="utf-8") == original.replace('"w-fe36b7bf"', '"w-01760fa0"')


def test_a_node_file_nested_too_deeply_is_a_problem_not_a_crash(tmp_path):
    sdir = tmp_path / "s"
    (sdir / "history").mkdir(parents=True)
    (sdir / "history" / "0001-u-n1.json").write_text("[" * 200_000 + "]" * 200_000)
    result = mark_nodes(sdir, ["n1"], "w-00000000")
    assert result.marked == [] or result.marked == ()
    assert result.missing and result.problems[0].message == "invalid JSON: nested too deeply"
    assert result.problems[0].line == 1
