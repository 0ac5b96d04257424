"""Discovery, parsing and problems of the session store reader."""

from __future__ import annotations

import json
import os

from memory_tui.sessions.store import load_sessions
from test_sessions_helpers import ROOT, make_session, node, turn


def test_discovery_rules(tmp_path):
    state = tmp_path
    make_session(state, "s_ok", [ROOT, *turn("u1", 1, "ROOT")], {"head_id": "u1_reply"})
    # no .git: not a session
    (state / "sessions" / "plain" / "history").mkdir(parents=True)
    # no history/: not a session
    (state / "sessions" / "nohist" / ".git").mkdir(parents=True)
    # a symlink to a real session is not accepted
    os.symlink(state / "sessions" / "s_ok", state / "sessions" / "link")
    # a project-bound session found through locations.json
    proj = tmp_path / "proj" / ".openprogram" / "sessions" / "s_proj"
    (proj / "history").mkdir(parents=True)
    (proj / ".git").mkdir()
    (state / "sessions" / "locations.json").write_text(json.dumps({"s_proj": str(proj), "bad/id": str(proj)}))
    snap = load_sessions(state)
    assert set(snap.sessions) == {"s_ok", "s_proj"}
    assert snap.sessions["s_proj"].rel == "proj/.openprogram/sessions/s_proj"
    assert snap.sessions["s_proj"].meta == {}


def test_legacy_root_used_only_when_sessions_missing(tmp_path):
    legacy = tmp_path / "sessions-git" / "old"
    (legacy / "history").mkdir(parents=True)
    (legacy / ".git").mkdir()
    assert set(load_sessions(tmp_path).sessions) == {"old"}
    (tmp_path / "sessions").mkdir()
    assert set(load_sessions(tmp_path).sessions) == set()


def test_missing_state_dir_is_empty_not_an_error(tmp_path):
    snap = load_sessions(tmp_path / "nope")
    assert snap.sessions == {} and snap.root is None


def test_corrupt_node_names_file_and_line_and_rest_loads(tmp_path):
    sdir = make_session(tmp_path, "s", [ROOT, *turn("u1", 1, "ROOT")], {"head_id": "u1_reply"})
    (sdir / "history" / "0005-u-bad.json").write_text('{"id": "bad",\n  "seq": 5,,}', encoding="utf-8")
    (sdir / "history" / "0006-u-x.json.0123456789abcdef0123456789abcdef.tmp").write_text("garbage")
    (sdir / "history" / "0007-u-y.json.tmp").write_text("garbage")
    snap = load_sessions(tmp_path)
    s = snap.sessions["s"]
    assert list(s.nodes) == ["ROOT", "u1", "u1_reply"]
    [p] = s.problems
    assert p.code == "CORRUPT_FILE"
    assert p.path == "sessions/s/history/0005-u-bad.json"
    assert (p.line, p.column) == (2, 12)


def test_structural_problems(tmp_path):
    sdir = make_session(tmp_path, "s", [ROOT], {"head_id": "ROOT"})
    (sdir / "history" / "0001-u-a.json").write_text("[1, 2]", encoding="utf-8")
    (sdir / "history" / "0002-u-b.json").write_text('{"seq": 2, "role": "user"}', encoding="utf-8")
    (sdir / "history" / "0003-u-c.json").write_text('{"id": "c", "seq": "3", "role": "user", "metadata": 5}', encoding="utf-8")
    (sdir / "history" / "0004-u-d.json").write_bytes(b'{"id": "\xff"}')
    s = load_sessions(tmp_path).sessions["s"]
    assert set(s.nodes) == {"ROOT", "c"}
    assert s.nodes["c"].seq == 3 and dict(s.nodes["c"].metadata) == {}
    paths = sorted(p.path.rsplit("/", 1)[1] for p in s.problems)
    assert paths == ["0001-u-a.json", "0002-u-b.json", "0003-u-c.json", "0003-u-c.json", "0004-u-d.json"]
    assert all(p.line and p.column for p in s.problems)


def test_seq_field_orders_not_file_names(tmp_path):
    nodes = [ROOT, node("a", 10000, pred="ROOT", caller="ROOT"), node("b", 9999, pred="ROOT", caller="ROOT")]
    s = load_sessions(make_session(tmp_path, "s", nodes, {}).parent.parent).sessions["s"]
    assert s.order == ("ROOT", "b", "a")


def test_meta_head_fallback_and_corrupt_meta(tmp_path):
    make_session(tmp_path, "s", [ROOT, *turn("u1", 1, "ROOT")], {"last_node_id": "u1_reply"})
    assert load_sessions(tmp_path).sessions["s"].head_id == "u1_reply"
    make_session(tmp_path, "t", [ROOT, *turn("u1", 1, "ROOT")], {"head_id": None, "last_node_id": "u1_reply"})
    assert load_sessions(tmp_path).sessions["t"].head_id is None
    (tmp_path / "sessions" / "t" / "meta.json").write_text('{"head_id": ', encoding="utf-8")
    t = load_sessions(tmp_path).sessions["t"]
    assert t.head_id is None and t.problems[0].path == "sessions/t/meta.json" and t.problems[0].line == 1


def test_registry_membership_and_corrupt_registry(tmp_path):
    make_session(tmp_path, "reg", [ROOT], {"updated_at": 5.0})
    make_session(tmp_path, "copied", [ROOT], {"updated_at": 7.5}, register=False)
    snap = load_sessions(tmp_path)
    assert snap.sessions["reg"].in_registry and not snap.sessions["copied"].in_registry
    assert snap.sessions["copied"].updated_at == 7.5
    [p] = snap.sessions["copied"].problems
    assert p.code == "NOT_IN_REGISTRY" and p.path == "sessions/index.json"
    (tmp_path / "sessions" / "index.json").write_text("{\n  \"reg\": {", encoding="utf-8")
    snap = load_sessions(tmp_path)
    assert snap.problems[0].path == "sessions/index.json" and snap.problems[0].line == 2
    # OpenProgram rebuilds a corrupt registry from every meta.json.
    assert snap.sessions["reg"].in_registry and snap.sessions["copied"].in_registry


# Node metadata is a FrozenMap (it keeps the app's memory down, issue 12) (shared key order + a tuple of values);
# it must answer exactly as the read-only dict it replaced.


def test_frozen_metadata_behaves_as_the_read_only_dict(tmp_path):
    from types import MappingProxyType

    from memory_tui.sessions.store import FrozenMap, thaw

    meta = {"source": "web", "speaker_id": "owner/local", "nested": {"k": [1, {"x": None}]}, "n": 1.5}
    make_session(tmp_path, "s1", [ROOT, node("a", 1, "user", "hi", pred="ROOT", extra_meta=dict(meta)),
                                  node("b", 2, "user", "ho", pred="a", extra_meta=dict(reversed(list(meta.items()))))],
                 {"head_id": "b"})
    s = load_sessions(tmp_path).sessions["s1"]
    a, b = s.nodes["a"].metadata, s.nodes["b"].metadata
    assert type(a) is FrozenMap and type(b) is FrozenMap
    assert a == b and b == a  # dict equality: key order does not matter
    assert a == meta | {"nested": a["nested"]} and a != {**meta, "n": 2}
    assert a != s.nodes["ROOT"].metadata and (a == 3) is False
    assert list(a) == list(meta) and list(b) == list(reversed(list(meta)))
    assert a.get("source") == "web" and a.get("missing", 7) == 7 and "n" in a and "zz" not in a and len(a) == 4
    assert thaw(a) == meta and type(thaw(a)["nested"]) is dict
    proxy = MappingProxyType({k: (MappingProxyType({"k": (1, MappingProxyType({"x": None}))}) if k == "nested" else v)
                              for k, v in meta.items()})
    assert repr(a) == repr(proxy) and str(a) == str(proxy)
    assert proxy == a and a == proxy
    try:
        a["missing"]
    except KeyError:
        pass
    else:
        raise AssertionError("a missing key must raise KeyError")
    try:
        hash(a)
    except TypeError:
        pass
    else:
        raise AssertionError("metadata is not hashable (as before)")
    c = load_sessions(tmp_path).sessions["s1"].nodes["a"].metadata
    assert c == a and c is not a and c._shape is a._shape  # one key order, shared


def test_identical_metadata_is_shared_but_never_across_value_types(tmp_path):
    from memory_tui.sessions.store import thaw

    metas = [{"a": 1}, {"a": True}, {"a": 1.0}, {"a": 1}, {"a": 0.0}, {"a": -0.0}, {"a": "1"}, {"a": [1]}, {"a": [True]}]
    nodes = [ROOT]
    for i, meta in enumerate(metas, 1):
        nodes.append(node(f"n{i}", i, "user", f"t{i}", pred=nodes[-1]["id"], extra_meta=dict(meta)))
    make_session(tmp_path, "s1", nodes, {"head_id": f"n{len(metas)}"})
    s = load_sessions(tmp_path).sessions["s1"]
    got = [s.nodes[f"n{i}"].metadata for i in range(1, len(metas) + 1)]
    assert [json.dumps(thaw(m)) for m in got] == [json.dumps(m) for m in metas]
    assert [type(m["a"]) for m in got[:3]] == [int, bool, float]
    assert got[0] is got[3]  # equal flat metadata: one object
    assert got[1] is not got[0] and got[2] is not got[0] and got[5] is not got[4]
