"""The persistent parse cache gives exactly what a fresh parse gives, and a damaged,
foreign or stale cache is only a miss (never an error, never a stale answer)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from memory_tui.core import parsecache
from memory_tui.core import transaction as tx
from memory_tui.core.sources import SourceIndex
from memory_tui.core.topics import parse_tree
from memory_tui.core.workspace import open_state


def _plain(mem: Path):
    index = SourceIndex.load(mem)
    return index, parse_tree(mem / "topics", resolve=index.resolve_target, strict=True)


def _same(mem: Path) -> None:
    parsecache.forget_in_process()
    index, tree = parsecache.load_tree(mem)
    p_index, p_tree = _plain(mem)
    assert tree.topics == p_tree.topics
    assert tree.problems == p_tree.problems
    assert sorted(index.files) == sorted(p_index.files)
    assert all(index.files[k].frames == p_index.files[k].frames for k in p_index.files)
    assert index.trusted_ids() == p_index.trusted_ids() and index.pending_ids() == p_index.pending_ids()


def _entries(mem: Path) -> list[Path]:
    return sorted((mem / ".scriptorium" / parsecache.DIR_NAME).rglob("*.pkl"))


def _age(root: Path) -> None:
    """Make every stamp older than the racy window (a cache never stores younger stamps)."""
    for p in root.rglob("*.md"):
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))


@pytest.fixture
def mem(fixture_state) -> Path:
    m = fixture_state / "memory"
    _age(m)
    parsecache.drop(m)
    return m


def test_cache_round_trip_equals_a_fresh_parse(mem):
    _same(mem)
    assert _entries(mem) == []  # reading wrote nothing
    parsecache.load_tree(mem, persist=True)
    assert any("/topics/" in p.as_posix() for p in _entries(mem))
    assert any("/archives/" in p.as_posix() for p in _entries(mem))
    _same(mem)
    # the entries really are used: a cached topic is the very object the cache holds
    store = parsecache.store_for(mem)
    _, tree = parsecache.load_tree(mem)
    assert tree.topics[0] is store.topic_for_stat(tree.topics[0].path, parsecache.stat_key(
        (mem / "topics" / tree.topics[0].path).stat()), store.source_index())


def test_changed_topic_is_parsed_again(mem):
    parsecache.load_tree(mem, persist=True)
    target = mem / "topics" / "people" / "ada.md"
    text = target.read_text()
    target.write_text(text.replace("Ada", "Adb", 1))  # same size, new bytes
    _same(mem)
    target.write_text("# Broken\n\nno citation here[^zz]\n")
    _same(mem)


def test_archive_change_reaches_the_topics_citing_it(mem):
    parsecache.load_tree(mem, persist=True)
    archives = sorted((mem / "sources").rglob("*.md"))
    assert archives
    for a in archives:
        a.unlink()  # every citation now dangles: the strict parse must say so
    parsecache.forget_in_process()
    _, tree = parsecache.load_tree(mem)
    assert tree.problems  # not the cached, problem-free parses
    _same(mem)


@pytest.mark.parametrize("damage", ["garbage", "truncate", "foreign", "wrong_name", "bad_digest"])
def test_damaged_cache_is_ignored_and_rebuilt(mem, damage):
    parsecache.load_tree(mem, persist=True)
    entries = _entries(mem)
    assert entries
    for p in entries:
        data = p.read_bytes()
        if damage == "garbage":
            p.write_bytes(b"\x00\xffnot a cache")
        elif damage == "truncate":
            p.write_bytes(data[: len(data) // 2])
        elif damage == "foreign":  # a pickle that would run code: refused by the unpickler
            payload = pickle.dumps(("x", (os.system, ("true",))))
            import hashlib

            p.write_bytes(parsecache.MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        elif damage == "wrong_name":
            p.rename(p.with_name("0" * 32 + ".pkl"))
        else:
            p.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    _same(mem)
    # a transaction rewrites what it parsed
    ada = mem / "topics" / "people" / "ada.md"
    r = tx.staged_edit(mem.parent, "topics/people/ada.md", ada.read_text().replace("short answers", "brief answers", 1), git_commit="off")
    assert r.ok, r
    assert any(parsecache.decode(p.read_bytes()) is not None for p in _entries(mem))


def test_other_code_tags_are_removed_and_never_read(mem):
    other = mem / ".scriptorium" / parsecache.DIR_NAME / "0123456789abcdef" / "topics"
    other.mkdir(parents=True)
    (other / "x.pkl").write_bytes(b"stale")
    parsecache.load_tree(mem, persist=True)
    assert not other.exists()


def test_cache_is_outside_the_revision_and_open_state_agrees(mem):
    before = tx.workspace_revision(mem)
    parsecache.load_tree(mem, persist=True)
    assert tx.workspace_revision(mem) == before
    parsecache.forget_in_process()
    cached = open_state(mem.parent)
    parsecache.drop(mem)
    fresh = open_state(mem.parent)
    assert cached.tree.topics == fresh.tree.topics and cached.problems == fresh.problems
    assert cached.revision == fresh.revision
