"""The sessions' shape table (``sessions.shapes``): a session's shape from its unchanged node
files' stamps, never an answer other than the shape of a full read."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from aging import age, session_reads
from memory_tui.core import switches
from memory_tui.sessions import shapes, store
from memory_tui.sessions.shapes import shape
from memory_tui.sessions.store import discover, load_session_dir, load_sessions
from test_sessions_helpers import ROOT, make_session, node, turn


def _state(tmp_path: Path) -> Path:
    """Two sessions with what a shape must carry exactly: a fork, owner metadata shared by
    several turns, nested metadata, a corrupt node file, a node with problems, a commit."""
    state = tmp_path / "state"
    nested = {"speaker_kind": "owner", "memory_written_scriptorium": "w-1", "tags": ["a", {"b": 1.5}, -0.0]}
    nodes = [ROOT, *turn("u1", 1, "ROOT"), *turn("u2", 3, "u1_reply"),
             node("u3", 5, pred="u1_reply", caller="u1_reply", extra_meta=nested),
             node("u4", 6, pred="u3", caller="u3", extra_meta=nested)]
    sdir = make_session(state, "s1", nodes, {"head_id": "u2_reply", "title": "first"})
    (sdir / "history" / "0009-u-bad.json").write_text('{"id": "bad",\n  "seq": 9,,}', encoding="utf-8")
    (sdir / "history" / "0010-u-c.json").write_text('{"id": "c", "seq": "10", "role": "user", "metadata": 5}',
                                                    encoding="utf-8")
    commits = sdir / "context" / "commits"
    commits.mkdir(parents=True)
    (commits / "c1.json").write_text(json.dumps({"id": "c1", "head_node_id": "u2_reply", "commit_parents": []}))
    make_session(state, "s2", [ROOT, *turn("v1", 1, "ROOT")], {"head_id": "v1_reply"})
    age(state / "sessions")
    return state


def _shapes(state: Path, keyed: bool = False) -> dict[str, store.Session]:
    """Every session's shape; ``keyed``: with the content key taken first, as the app passes
    the session list's."""
    found, registry, registry_ok, _problems = discover(state)
    keys = {sid: store.session_content_key(sid, sdir, state, registry, registry_ok) if keyed else None
            for sid, sdir in found}
    return {sid: shapes.load_shape(state, sid, sdir, registry, registry_ok, content_key=keys[sid])
            for sid, sdir in found}


def _full_shapes(state: Path) -> dict[str, store.Session]:
    return {sid: shape(s) for sid, s in load_sessions(state).sessions.items()}



def test_a_shape_from_the_table_is_the_shape_of_a_full_read_and_reads_no_unchanged_file(tmp_path, monkeypatch):
    state = _state(tmp_path)
    first = _shapes(state)
    assert first == _full_shapes(state)
    s1 = first["s1"]
    assert s1.problems and s1.unreadable and s1.nodes["u3"].metadata["tags"] == ("a", {"b": 1.5}, -0.0)
    assert all(n.input is None and n.output is None for n in s1.nodes.values())
    # one file per session
    assert sorted(p.suffix for p in shapes.state_dir_of(state).iterdir()) == [".shape", ".shape"]
    read = session_reads(monkeypatch)
    again = _shapes(state)
    assert again == first
    # no file of a session is parsed again, the corrupt one included (its problems are kept
    # with its stamp); only discovery's registry files are read
    assert [r for r in read if r.startswith(("sessions/s1/", "sessions/s2/"))] == []
    assert read
    # turns with equal flat metadata share one object, as a full read makes them
    full = load_sessions(state).sessions["s1"].nodes
    assert full["u1"].metadata is full["u2"].metadata
    assert again["s1"].nodes["u1"].metadata is again["s1"].nodes["u2"].metadata


def test_a_node_rewritten_in_place_with_its_old_mtime_is_read_again(tmp_path, monkeypatch):
    """Same size and inode, the mtime put back: only the ctime moved, and it is in the stamp."""
    state = _state(tmp_path)
    _shapes(state)
    path = next((state / "sessions" / "s1" / "history").glob("*-u3.json"))
    st = path.stat()
    raw = path.read_bytes()
    assert raw.count(b'"owner"') == 1
    path.write_bytes(raw.replace(b'"owner"', b'"owneR"'))  # same size, same inode
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (st.st_size, st.st_ino, st.st_mtime_ns)
    time.sleep(0.15)
    read = session_reads(monkeypatch)
    got = _shapes(state)
    assert got == _full_shapes(state)
    assert got["s1"].nodes["u3"].metadata["speaker_kind"] == "owneR"
    assert "sessions/s1/history/" + path.name in read


def test_a_damaged_or_foreign_table_is_a_miss_never_an_answer(tmp_path):
    state = _state(tmp_path)
    _shapes(state)
    files = sorted(shapes.state_dir_of(state).iterdir())
    raw = bytearray(files[0].read_bytes())
    raw[len(raw) // 2] ^= 0x40
    files[0].write_bytes(bytes(raw))
    files[1].write_bytes(files[1].read_bytes()[:-7])
    assert _shapes(state) == _full_shapes(state)
    # another state's table copied under this state's name: its head names the other state
    other = tmp_path / "other"
    import shutil

    shutil.copytree(state, other, symlinks=True)
    age(other / "sessions")
    _shapes(other)
    for name in os.listdir(shapes.state_dir_of(other)):
        shutil.copy(shapes.state_dir_of(other) / name, shapes.state_dir_of(state) / name)
    (state / "sessions" / "s2" / "history" / "0001-u-v1.json").unlink()
    time.sleep(0.15)
    assert _shapes(state) == _full_shapes(state)


def test_a_symlinked_table_folder_is_never_written_through(tmp_path):
    state = _state(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = shapes.state_dir_of(state)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(elsewhere, target_is_directory=True)
    assert _shapes(state) == _full_shapes(state)
    assert list(elsewhere.iterdir()) == []
    (elsewhere / f"{'0' * 32}.shape").write_bytes(b"someone else's")
    assert shapes.prune(state, []) == 0  # nor deleted through
    assert [p.name for p in elsewhere.iterdir()] == [f"{'0' * 32}.shape"]


@pytest.mark.parametrize("mode", ["full", "check"])
def test_the_full_and_check_modes(tmp_path, monkeypatch, mode):
    state = _state(tmp_path)
    _shapes(state)
    monkeypatch.setenv(switches.DERIVE_ENV, mode)
    switches.reload()
    read = session_reads(monkeypatch)
    assert _shapes(state) == _full_shapes(state)
    # every node file read by the shapes, and once more by the full load they are compared with
    assert len([r for r in read if "/history/" in r]) == 2 * len(list((state / "sessions").glob("*/history/*.json")))


def test_check_mode_catches_a_table_that_lies(tmp_path, monkeypatch):
    """A table whose stamps match but whose parse differs (what a bug in the table would give)
    is caught by ``check``, not returned."""
    state = _state(tmp_path)
    _shapes(state)
    real = shapes._read

    def lying(st, sid):
        files, key = real(st, sid)
        return {rel: store._CachedFile(c.fingerprint, store.Node(*(
            ("forged" if f == "role" else getattr(c.result, f)) for f in store.Node.__slots__)), c.problems)
            if type(c.result) is store.Node else c for rel, c in files.items()}, key

    monkeypatch.setattr(shapes, "_read", lying)
    assert _shapes(state) != _full_shapes(state)  # incremental: the lie goes through
    monkeypatch.setenv(switches.DERIVE_ENV, "check")
    switches.reload()
    with pytest.raises(switches.IncrementalMismatch):
        _shapes(state)


def test_prune_deletes_the_tables_of_sessions_gone(tmp_path):
    state = _state(tmp_path)
    _shapes(state)
    assert shapes.prune(state, ["s1"]) == 1
    assert len(list(shapes.state_dir_of(state).iterdir())) == 1
    assert shapes.prune(state, ["s1"]) == 0


def _count_stats(monkeypatch) -> list[str]:
    stated: list[str] = []
    real = store._fingerprint

    def counting(path):
        stated.append(str(path))
        return real(path)

    monkeypatch.setattr(store, "_fingerprint", counting)
    return stated


@pytest.mark.parametrize("keyed", [True, False])
def test_a_table_stored_under_the_key_of_now_is_taken_without_a_stat(tmp_path, monkeypatch, keyed):
    state = _state(tmp_path)
    _shapes(state, keyed=True)
    stated, read = _count_stats(monkeypatch), session_reads(monkeypatch)
    got = _shapes(state, keyed=keyed)
    assert [r for r in read if "/history/" in r] == []  # the corrupt one included: its problem is kept
    # without the key every node file is stat-ed again
    node_files = len(list((state / "sessions").glob("*/history/*.json")))
    assert len([p for p in stated if "/history/" in p]) == (0 if keyed else node_files)
    assert got == _full_shapes(state)


def test_a_session_changed_since_its_table_is_read_again_under_its_new_key(tmp_path, monkeypatch):
    state = _state(tmp_path)
    _shapes(state, keyed=True)
    target = next((state / "sessions").glob("*/history/*u2.json"))
    data = json.loads(target.read_text())
    data["role"] = "assistant"
    target.write_text(json.dumps(data))
    age(state / "sessions")
    read = session_reads(monkeypatch)
    got = _shapes(state, keyed=True)
    assert got == _full_shapes(state)
    assert any(r.endswith(target.name) for r in read)
    assert _shapes(state, keyed=True) == got  # and stored again under the new key


def test_a_key_that_does_not_match_is_no_proof(tmp_path, monkeypatch):
    """A table stored under one key is not taken under another, though its stamps still match."""
    state = _state(tmp_path)
    found, registry, registry_ok, _problems = discover(state)
    sid, sdir = found[0]
    shapes.load_shape(state, sid, sdir, registry, registry_ok, content_key="k-then")
    stated = _count_stats(monkeypatch)
    got = shapes.load_shape(state, sid, sdir, registry, registry_ok, content_key="k-now")
    assert got == shape(load_session_dir(sid, sdir, state, registry, registry_ok))
    assert any("/history/" in p for p in stated)


def test_a_shape_read_back_shares_its_strings_and_metadata_types(tmp_path):
    """Read back from the table, ids, roles and short metadata strings are the interned
    strings a full read gives (one copy across every node, the app's peak memory), and a
    value keeps its exact type (1, 1.0, True and -0.0 all compare equal)."""
    import sys

    state = _state(tmp_path)
    _shapes(state)
    got = _shapes(state)["s1"]
    nested = [n for n in got.nodes.values() if "tags" in n.metadata]
    assert nested and all(type(n.metadata).__name__ == "FrozenMap" for n in got.nodes.values())
    for n in got.nodes.values():
        assert sys.intern(n.id) is n.id and sys.intern(n.role) is n.role
        for v in n.metadata.values():
            assert type(v) is not str or len(v) > 64 or sys.intern(v) is v
    tags = nested[0].metadata["tags"]
    assert [type(t) for t in (tags[1]["b"], tags[2])] == [float, float] and str(tags[2]) == "-0.0"


@pytest.mark.parametrize("workers", [1, 2])
def test_the_summary_index_build_leaves_each_sessions_shape(tmp_path, monkeypatch, workers):
    """A cold start reads every session for its summary; the insights' shapes then come from
    what that read left (under the same keys), not from a second read of every node file."""
    from memory_tui.sessions.cache import load_summaries

    from memory_tui.sessions import cache

    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "PARALLEL_MIN_SESSIONS", 1)  # two sessions: worker processes for workers=2
    pooled: list[int] = []
    real = cache._read_parallel
    monkeypatch.setattr(cache, "_read_parallel", lambda *a, **k: pooled.append(1) or real(*a, **k))
    state = _state(tmp_path)
    load_summaries(state, "w-1", 2000, directory=tmp_path / "index", workers=workers)
    assert pooled == ([1] if workers > 1 else [])
    assert len(list(shapes.state_dir_of(state).glob("*.shape"))) == 2
    stated, read = _count_stats(monkeypatch), session_reads(monkeypatch)
    got = _shapes(state, keyed=True)
    assert [r for r in read if "/history/" in r] == [] and [p for p in stated if "/history/" in p] == []
    assert got == _full_shapes(state)


def test_the_summary_index_build_keeps_no_shape_in_full_mode(tmp_path, monkeypatch):
    from memory_tui.sessions.cache import load_summaries
    from switching import set_derive

    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    set_derive(monkeypatch, "full")
    state = _state(tmp_path)
    load_summaries(state, "w-1", 2000, directory=tmp_path / "index", workers=1)
    assert not list(shapes.state_dir_of(state).glob("*.shape"))
