"""The persistent parse cache gives exactly what a fresh parse gives, and a damaged,
foreign or stale cache is only a miss (never an error, never a stale answer)."""

from __future__ import annotations

import os
import time
import pickle
from pathlib import Path

import pytest
from parsecache_helpers import age, mem  # noqa: F401  (mem is a fixture)

from memory_tui.core.cache import envelope
from memory_tui.core.cache.stamp import RACY_NS
from memory_tui.core.store import parsecache
from memory_tui.core.tx import api as tx
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.tx.stage import Stage
from memory_tui.core.format.sources import SourceIndex
from memory_tui.core.format.topics import parse_tree
from memory_tui.core.store.workspace import open_state
from memory_tui.core.switches import current as current_switches


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
    root = mem / ".scriptorium" / parsecache.DIR_NAME
    return sorted([*root.rglob("*" + parsecache.ENTRY_SUFFIX), *root.rglob("*" + parsecache.PACK_SUFFIX)])


def _decoded(p: Path):
    """What an entry or pack file holds (``None`` / ``{}`` when it is not intact)."""
    data = p.read_bytes()
    if p.name.endswith(parsecache.PACK_SUFFIX):
        return parsecache.decode_pack(p.name[:-len(parsecache.PACK_SUFFIX)], data) or None
    return parsecache.decode_entry(p.parent.name, data)


def _kind_of(data: bytes) -> str:
    head = len(envelope.MAGIC)
    return data[head:data.index(b"\0", head)].decode()


def test_cache_round_trip_equals_a_fresh_parse(mem):
    _same(mem)
    assert _entries(mem) == []  # reading wrote nothing
    parsecache.load_tree(mem, persist=True)
    # a first flush holds every parse: each kind in one file (<kind>.pack), not one per entry
    assert [p.name for p in _entries(mem) if p.name in ("topics.pack", "archives.pack")] == ["archives.pack", "topics.pack"]
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


def test_an_entry_written_after_the_pack_wins_over_it(mem, monkeypatch):
    parsecache.load_tree(mem, persist=True)  # everything new: one pack per kind
    assert len(list((mem / "topics").rglob("*.md"))) >= 3  # one changed file is then a minority
    target = mem / "topics" / "people" / "ada.md"
    target.write_text(target.read_text().replace("short answers", "brief answers", 1))
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))  # only it: the others keep their keys
    time.sleep(RACY_NS / 1e9)  # its ctime cannot be set back: wait out the clock tick
    parsecache.forget_in_process()
    _, fresh = parsecache.load_tree(mem, persist=True)  # one topic changed: one per-entry file
    per_entry = [p for p in _entries(mem) if p.parent.name == "topics" and p.suffix == parsecache.ENTRY_SUFFIX]
    assert len(per_entry) == 1
    parsecache.forget_in_process()

    def refuse(*args, **kwargs):
        raise AssertionError("parsed again: the newer entry was not used")

    monkeypatch.setattr(parsecache, "parse_topic", refuse)
    _, tree = parsecache.load_tree(mem)
    assert tree.topics == fresh.topics
    rel = target.relative_to(mem / "topics").as_posix()
    assert tree.topic(rel).text == target.read_text()
    monkeypatch.undo()
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


@pytest.mark.parametrize("damage", ["garbage", "truncate", "foreign", "wrong_kind", "old_version", "wrong_name", "bad_digest",
                                    "flip_middle", "cut_one"])
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
        elif damage == "foreign":  # a pickle that would run code: not an envelope, never unpickled
            payload = pickle.dumps(("x", (os.system, ("true",))))
            import hashlib

            p.write_bytes(b"memory-tui-parse-cache\n" + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        elif damage == "wrong_kind":  # an intact envelope of another kind (an entry of another table)
            kind = _kind_of(data)
            other = "parse-topics" if kind != "parse-topics" else "parse-archives"
            p.write_bytes(data.replace(kind.encode() + b"\0", other.encode() + b"\0", 1))
        elif damage == "old_version":  # an intact envelope of the kind, written by another format
            kind = _kind_of(data)
            value = envelope.unpack(kind, data, parsecache.FORMAT)
            if value is not None:
                p.write_bytes(envelope.pack(kind, value, parsecache.FORMAT - 1))
            else:  # a pack of many
                head = len(envelope.MAGIC) + len(kind) + 1
                p.write_bytes(data[:head] + (parsecache.FORMAT - 1).to_bytes(2, "big") + data[head + 2:])
        elif damage == "wrong_name":
            p.rename(p.with_name("0" * 32 + parsecache.ENTRY_SUFFIX))
        elif damage == "flip_middle":  # in a pack: inside some entry's rows (an archive's frame blob)
            mid = len(data) // 2
            p.write_bytes(data[:mid] + bytes([data[mid] ^ 0x10]) + data[mid + 1:])
        elif damage == "cut_one":  # a torn write that lost the last byte
            p.write_bytes(data[:-1])
        else:
            p.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    _same(mem)
    # a transaction rewrites what it parsed
    ada = mem / "topics" / "people" / "ada.md"
    r = tx.staged_edit(mem.parent, "topics/people/ada.md", ada.read_text().replace("short answers", "brief answers", 1), git_commit="off")
    assert r.ok, r
    assert any(_decoded(p) is not None for p in _entries(mem))


def test_other_code_tags_are_removed_and_never_read(mem):
    other = mem / ".scriptorium" / parsecache.DIR_NAME / "0123456789abcdef" / "topics"
    other.mkdir(parents=True)
    (other / ("x" + parsecache.ENTRY_SUFFIX)).write_bytes(b"stale")
    parsecache.load_tree(mem, persist=True)
    assert not other.exists()


def test_cache_is_outside_the_revision_and_open_state_agrees(mem):
    before = workspace_revision(mem)
    parsecache.load_tree(mem, persist=True)
    assert workspace_revision(mem) == before
    parsecache.forget_in_process()
    cached = open_state(mem.parent)
    parsecache.drop(mem)
    fresh = open_state(mem.parent)
    assert cached.tree.topics == fresh.tree.topics and cached.problems == fresh.problems
    assert cached.revision == fresh.revision


# -- per-file values derived in a transaction persist (refs, normalize's memos, block links) --


def _fresh_process() -> None:
    from memory_tui.core.store import txcache

    txcache.clear_caches()  # what a new process has: only the files on disk


def _install_once(mem: Path) -> None:
    ada = mem / "topics" / "people" / "ada.md"
    r = tx.staged_edit(mem.parent, "topics/people/ada.md", ada.read_text().replace("short answers", "brief answers", 1),
                       git_commit="off")
    assert r.ok, r
    age(mem)


def test_refs_answer_persists_under_bytes_and_archives(mem, monkeypatch):
    from memory_tui.core.format.sources import SourceIndex as Index
    from memory_tui.core.store.committed import sha

    _install_once(mem)
    _fresh_process()
    stage = Stage(mem, link_topics=True, switches=current_switches())
    try:
        topic = stage.baseline.topics[0]
        calls = []
        real = Index.validate_ref
        monkeypatch.setattr(Index, "validate_ref", lambda self, ref, **kw: calls.append(ref) or real(self, ref, **kw))
        assert stage.cache.refs_ok(topic, stage.index) is True
        assert calls == []  # answered by the last process's entry, not checked again
        # an entry under other bytes is never used: it is recomputed
        store = parsecache.store_for(mem)
        key = (sha(topic.text), stage.cache.trees.parsed[(topic.path, sha(topic.text))].sig)
        store.put_derived("refs", topic.path, ("0" * 64, key[1]), False)  # replaces the real entry
        store.flush()
        _fresh_process()
    finally:
        stage.discard()
    stage = Stage(mem, link_topics=True, switches=current_switches())
    try:
        topic = stage.baseline.topic(topic.path)
        assert stage.cache.refs_ok(topic, stage.index) is True
        assert calls  # the stale entry was a miss
    finally:
        stage.discard()


def test_memos_persist_and_a_wrong_type_is_a_miss(mem):
    from memory_tui.core.format import normalize
    from memory_tui.core.store import txcache
    from memory_tui.core.store.committed import sha

    _install_once(mem)
    _fresh_process()
    cache = txcache.cache_for(mem)
    text = (mem / "topics" / "projects" / "kyoto-trip.md").read_text()  # unchanged by the install
    calls = []

    def spy(t):
        calls.append(t)
        return normalize.line_end_ids(t)
    cache.memo.line_end_ids.compute = spy
    assert cache.memo.line_end_ids("projects/kyoto-trip.md", text) == normalize.line_end_ids(text)
    assert calls == []  # the install stored it; this process read it
    pack = [p for p in _entries(mem) if p.name == "lineids" + parsecache.PACK_SUFFIX]
    assert len(pack) == 1
    table = parsecache.decode_pack("lineids", pack[0].read_bytes())
    body = table["projects/kyoto-trip.md"]
    assert body[:-1] == (sha(text),)
    table["projects/kyoto-trip.md"] = (*body[:-1], ("a", "tuple"))  # the same key, a value of the wrong type
    pack[0].write_bytes(parsecache.encode_pack("lineids", table))
    _fresh_process()
    cache = txcache.cache_for(mem)
    cache.memo.line_end_ids.compute = spy
    assert cache.memo.line_end_ids("projects/kyoto-trip.md", text) == normalize.line_end_ids(text)
    assert calls == [text]


def test_link_rewrite_is_keyed_by_where_the_ids_live(mem):
    from memory_tui.core.format import blocklinks
    from memory_tui.core.store import txcache

    texts = {
        "a.md": "# A\n\nSee [b](b.md#^abcd1234) here.[^e-0000000001]\n",
        "b.md": "# B\n\nFact.[^e-0000000002] ^abcd1234\n",
        "sub/c.md": "# C\n\nOther.[^e-0000000003]\n",
    }
    moved = dict(texts, **{"b.md": "# B\n", "sub/c.md": "# C\n\nFact.[^e-0000000002] ^abcd1234\n"})
    cache = txcache.cache_for(mem)
    for case in (texts, moved, texts):
        want = blocklinks.rewrite_block_links(case)
        assert blocklinks.rewrite_block_links(case, file_ids=cache.file_ids, rewritten=cache.link_rewrite) == want
    assert "sub/c.md#^abcd1234" in blocklinks.rewrite_block_links(moved, rewritten=cache.link_rewrite)["a.md"]
    # across processes: an entry stored for one set of locations never answers for another
    parsecache.store_for(mem).flush()
    _fresh_process()
    cache = txcache.cache_for(mem)
    assert blocklinks.rewrite_block_links(moved, rewritten=cache.link_rewrite) == blocklinks.rewrite_block_links(moved)
    # a rewrite that changes nothing (from memory or from the parse cache) is the very text
    # given, so the passes after it see the file unchanged by identity
    same = "".join(list(texts["a.md"]))
    for _ in range(2):
        out = blocklinks.rewrite_block_links(dict(texts, **{"a.md": same}), rewritten=cache.link_rewrite)
        assert out["a.md"] is same


# ------------------------------------------------------------ flushes cost what changed


def _derived_store(mem: Path, n: int) -> parsecache.ParseStore:
    """A store (as another process would make one) holding ``n`` entries of two packed kinds."""
    store = parsecache.ParseStore(mem)
    for i in range(n):
        store.put_derived("lineids", f"t{i:03}.md", (f"sha{i}",), frozenset({f"id{i}"}))
        store.put_derived("ids", f"t{i:03}.md", (f"sha{i}",), (f"id{i}",))
    store.flush()
    return store


def _kind_files(mem: Path, kind: str) -> tuple[list[Path], os.stat_result]:
    tag = parsecache.code_tag()
    base = mem / ".scriptorium" / parsecache.DIR_NAME / tag
    return sorted((base / kind).glob("*" + parsecache.ENTRY_SUFFIX)), (base / (kind + parsecache.PACK_SUFFIX)).stat()


def test_a_small_flush_writes_only_what_changed_and_a_fresh_process_reads_it(mem):
    _derived_store(mem, 40)
    loose, pack = _kind_files(mem, "lineids")
    assert loose == []  # a flush of (nearly) everything: the pack
    store = parsecache.ParseStore(mem)
    assert store.derived("lineids", "t007.md", ("sha7",)) == frozenset({"id7"})
    store.put_derived("lineids", "t007.md", ("sha7b",), frozenset({"new"}))
    store.flush()
    loose, after = _kind_files(mem, "lineids")
    assert len(loose) == 1  # one entry changed: one file written, the pack untouched
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (pack.st_ino, pack.st_mtime_ns, pack.st_size)
    fresh = parsecache.ParseStore(mem)
    assert fresh.derived("lineids", "t007.md", ("sha7b",)) == frozenset({"new"})
    assert fresh.derived("lineids", "t007.md", ("sha7",)) is None  # the newer entry wins over the pack's
    assert fresh.derived("lineids", "t008.md", ("sha8",)) == frozenset({"id8"})
    assert fresh.derived("ids", "t007.md", ("sha7",)) == ("id7",)  # another kind: nothing written


def test_per_entry_files_are_folded_into_the_pack(mem):
    _derived_store(mem, 40)
    limit = max(parsecache.LOOSE_MIN, 40 // 8)
    seen = []
    for i in range(limit + 1):
        store = parsecache.ParseStore(mem)  # each change from a fresh process
        store.put_derived("lineids", f"t{i:03}.md", (f"v2-{i}",), frozenset({f"n{i}"}))
        store.flush()
        seen.append(len(_kind_files(mem, "lineids")[0]))
    assert seen[:limit] == list(range(1, limit + 1))  # one more file per change...
    assert seen[limit] == 0  # ...until they are folded into a new pack
    fresh = parsecache.ParseStore(mem)
    for i in range(40):
        want = (f"v2-{i}",) if i <= limit else (f"sha{i}",)
        value = frozenset({f"n{i}"}) if i <= limit else frozenset({f"id{i}"})
        assert fresh.derived("lineids", f"t{i:03}.md", want) == value


def test_interleaved_writers_and_a_torn_file_only_cost_a_miss(mem):
    _derived_store(mem, 40)
    a, b = parsecache.ParseStore(mem), parsecache.ParseStore(mem)  # two processes, both loaded
    assert a.derived("lineids", "t001.md", ("sha1",)) and b.derived("lineids", "t001.md", ("sha1",))
    a.put_derived("lineids", "t001.md", ("a-key",), frozenset({"from a"}))
    a.flush()  # a per-entry file
    for i in range(30):  # b changes most entries: it writes a new pack and drops the per-entry files
        b.put_derived("lineids", f"t{i:03}.md", (f"b-{i}",), frozenset({f"b{i}"}))
    b.flush()
    assert _kind_files(mem, "lineids")[0] == []
    fresh = parsecache.ParseStore(mem)
    assert fresh.derived("lineids", "t001.md", ("a-key",)) is None  # lost: a miss, recomputed
    assert fresh.derived("lineids", "t001.md", ("b-1",)) == frozenset({"b1"})
    a.put_derived("lineids", "t039.md", ("a-39",), frozenset({"a39"}))
    a.flush()  # a's later entry is written over b's pack
    loose, _ = _kind_files(mem, "lineids")
    assert len(loose) == 1
    fresh = parsecache.ParseStore(mem)
    assert fresh.derived("lineids", "t039.md", ("a-39",)) == frozenset({"a39"})
    assert fresh.derived("lineids", "t002.md", ("b-2",)) == frozenset({"b2"})
    # a torn per-entry file (and a temporary file a crash left) is never read as an entry:
    # the pack's entry for that file answers, under its own key only
    loose[0].write_bytes(loose[0].read_bytes()[:-3])
    (loose[0].parent / f".{loose[0].name}.999.1.tmp").write_bytes(b"half")
    fresh = parsecache.ParseStore(mem)
    assert fresh.derived("lineids", "t039.md", ("a-39",)) is None
    assert fresh.derived("lineids", "t039.md", ("sha39",)) == frozenset({"id39"})
