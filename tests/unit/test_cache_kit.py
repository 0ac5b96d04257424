"""The cache kit: one forget() reaches every per-process cache, the envelope refuses what
it did not write, and the stamp's racy rule is the one every cache applies."""

from __future__ import annotations

import os
import time

RACY_NS = 100_000_000  # the kit's (core.cache.stamp.RACY_NS), asserted below


def test_clear_caches_forgets_every_process_table(fixture_state):
    """After a transaction filled them, ``clear_caches`` (the one forget) empties the stage's
    source-index memo, install's hashes by stamp, the revision walk's listings and the
    parse store: nothing a later run could take from the last one."""
    from memory_tui.core.store import install, parsecache, walk
    from memory_tui.core.store.txcache import clear_caches
    from memory_tui.core.tx import api as tx
    from memory_tui.core.tx import stage

    ada = fixture_state / "memory/topics/people/ada.md"
    time.sleep(RACY_NS / 1e9)
    result = tx.staged_edit(fixture_state, "topics/people/ada.md", ada.read_text().replace("short", "brief"),
                            git_commit="off")
    assert result.ok, result
    install._stat_hash(ada)  # a stamp-keyed hash, as an install's tree digest makes
    tables = {"stage._INDEX_CACHE": stage._INDEX_CACHE, "walk._LISTINGS": walk._LISTINGS,
              "parsecache._STORES": parsecache._STORES}
    assert all(tables.values()), {k: len(v) for k, v in tables.items()}
    time.sleep(RACY_NS / 1e9)
    install._stat_hash(ada)
    assert install._HASHES
    clear_caches()
    assert not any(tables.values()), {k: len(v) for k, v in tables.items()}
    assert not install._HASHES and not stage._INDEX_SEEN


def test_envelope_round_trip_and_refusals(tmp_path):
    from memory_tui.core.cache import envelope

    value = ("tag", {"a": 1, "b": [1, 2, 3]}, b"bytes")
    data = envelope.pack("kind", value, 3)
    assert envelope.unpack("kind", data, 3) == value
    assert envelope.unpack("other", data, 3) is None
    assert envelope.unpack("kind", data, 4) is None
    assert envelope.unpack("kind", data[:-1], 3) is None
    flipped = bytearray(data)
    flipped[-2] ^= 0x10
    assert envelope.unpack("kind", bytes(flipped), 3) is None
    assert envelope.pack("kind", value, stable=True) == envelope.pack("kind", value, stable=True)
    target = tmp_path / "folder" / "file.bin"
    assert not envelope.write(target, "kind", value)  # no folder made for a cache unless asked
    assert envelope.write(target, "kind", value, make_folder=True)
    assert envelope.read(target, "kind") == value
    assert [p.name for p in target.parent.iterdir()] == ["file.bin"]  # no temporary file left


def test_a_stamp_holds_the_ctime_and_is_racy_inside_the_tick(tmp_path):
    from memory_tui.core.cache import stamp as kit
    from memory_tui.core.cache.stamp import is_racy, stamp_of, stamp_racy

    assert kit.RACY_NS == RACY_NS
    path = tmp_path / "f"
    path.write_text("one")
    st = os.stat(path)
    stamp = stamp_of(st)
    assert stamp == (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
    assert stamp_racy(stamp) and is_racy(st.st_mtime_ns, st.st_ctime_ns)
    assert not stamp_racy(stamp, st.st_ctime_ns + RACY_NS)
    with open(path, "r+") as fh:  # same size, mtime put back: only the ctime can tell
        fh.write("two")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    time.sleep(0.01)
    after = stamp_of(os.stat(path))
    assert after[:3] == stamp[:3] and after != stamp


def test_pack_many_round_trip_and_refusals():
    from memory_tui.core.cache import envelope

    values = [("a", (1, 2)), ("b", frozenset({"x"})), ("c", None)]
    data = b"".join(envelope.pack_many("many", [envelope.packed_value(v) for v in values], 2))
    assert envelope.unpack_many("many", data, 2) == values
    assert envelope.unpack_many("many", b"".join(envelope.pack_many("many", [], 2)), 2) == []
    assert envelope.unpack_many("other", data, 2) is None
    assert envelope.unpack_many("many", data, 1) is None
    assert envelope.unpack_many("many", data[:-1], 2) is None
    for at in range(len(data) - 40, len(data)):  # a flipped bit anywhere in the payload
        assert envelope.unpack_many("many", data[:at] + bytes([data[at] ^ 4]) + data[at + 1:], 2) is None
    # one value, not a pack of many, under the same kind and version: not a pack this code wrote
    assert envelope.unpack_many("many", envelope.pack("many", values, 2), 2) is None


def test_an_indexed_envelope_reads_the_parts_asked_for_and_refuses_any_damage_it_reads(tmp_path):
    from memory_tui.core.cache import envelope

    parts = {name: envelope.packed_value((name, n) * 50) for n, name in enumerate(("s1", "s2", "s3"))}
    path = tmp_path / "x.index"
    assert envelope.write_indexed(path, "idx", ("head", 7), parts, 3)
    head, got = envelope.read_indexed(path, "idx", 3)
    assert head == ("head", 7) and got == parts
    assert envelope.read_indexed(path, "idx", 3, ["s2", "absent"]) == (("head", 7), {"s2": parts["s2"]})
    assert envelope.read_indexed(path, "idx", 3, accept=lambda h: h == ("head", 7))[0] == ("head", 7)
    assert envelope.read_indexed(path, "idx", 3, accept=lambda h: False) is None
    assert envelope.read_indexed(path, "other", 3) is None
    assert envelope.read_indexed(path, "idx", 2) is None
    data = path.read_bytes()
    s3_at = data.index(parts["s3"])
    # a flipped bit in s3 is a miss for whoever reads s3, and no concern of a reader of s1
    path.write_bytes(data[:s3_at] + bytes([data[s3_at] ^ 4]) + data[s3_at + 1:])
    assert envelope.read_indexed(path, "idx", 3, ["s3"]) is None
    assert envelope.read_indexed(path, "idx", 3) is None
    assert envelope.read_indexed(path, "idx", 3, ["s1"]) == (("head", 7), {"s1": parts["s1"]})
    path.write_bytes(data[:-1])  # cut short: the last part is damaged
    assert envelope.read_indexed(path, "idx", 3, ["s3"]) is None
    path.write_bytes(data[:20])  # cut inside the head
    assert envelope.read_indexed(path, "idx", 3, ["s1"]) is None
    for at in range(len(envelope.MAGIC) + 3, data.index(parts["s1"])):  # a flipped bit in the head
        path.write_bytes(data[:at] + bytes([data[at] ^ 4]) + data[at + 1:])
        assert envelope.read_indexed(path, "idx", 3, ["s1"]) is None
    path.unlink()
    assert envelope.read_indexed(path, "idx", 3) is None
    # never through a symbolic link, as a file or as its folder
    real = tmp_path / "real.index"
    real.write_bytes(data)
    path.symlink_to(real)
    assert envelope.read_indexed(path, "idx", 3) is None
    linked = tmp_path / "linked"
    linked.symlink_to(tmp_path)
    assert envelope.read_indexed(linked / "real.index", "idx", 3) is None
    assert not envelope.write_indexed(linked / "new.index", "idx", ("head",), parts, 3)


def test_records_skip_a_damaged_or_cut_record_and_read_on():
    from memory_tui.core.cache import envelope

    one, two, three = (envelope.pack("log", v, 1, stable=True) for v in ("one", ("two", 2), "three"))
    assert list(envelope.records("log", one + two + three, 1)) == ["one", ("two", 2), "three"]
    cut = one[:-2]  # a crash in the middle of an append, then the next append
    assert list(envelope.records("log", cut + two + three, 1)) == [("two", 2), "three"]
    flipped = two[:-1] + bytes([two[-1] ^ 1])
    assert list(envelope.records("log", one + flipped + three, 1)) == ["one", "three"]
    assert list(envelope.records("log", b"\0junk" + one + b"junk" + three, 1)) == ["one", "three"]
    assert list(envelope.records("other", one + two, 1)) == []
    assert list(envelope.records("log", one + two, 2)) == []
