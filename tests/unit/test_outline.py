"""The app's first-frame topic outline (issue 12) agrees with the strict parse on
every file the parse accepts."""

from __future__ import annotations

from pathlib import Path

from memory_tui.core.store.outline import topic_outline
from memory_tui.core.store.workspace import open_state


def _records(topic) -> int:
    return sum(1 for u in topic.units if not u.is_alias)


def test_outline_matches_the_parse_on_the_fixture(fixture_state_ro):
    view = open_state(fixture_state_ro)
    outline = {t.path: t for t in topic_outline(fixture_state_ro / "memory")}
    parsed = {t.path: t for t in view.tree.topics}
    assert set(parsed) <= set(outline)
    clean = [p for p, t in parsed.items() if not any(q.details.get("severity") != "warning" for q in t.problems)]
    assert clean
    for path in clean:
        t = parsed[path]
        title = next((h.title for h in t.headings if h.level == 1), None) or Path(path).stem
        assert (outline[path].records, outline[path].title, outline[path].readable) == (_records(t), title, True), path


def test_outline_counts_aliases_legacy_ids_and_skips_bad_suffixes(tmp_path):
    topics = tmp_path / "memory" / "topics" / "a"
    topics.mkdir(parents=True)
    (topics / "x.md").write_text(
        "# Ex\n\n"
        "One fact.[^e1] ^blk-aaaa1111 ^blk-bbbb2222\n\n"  # one record with an alias
        "Legacy.[^mem_1][^mem_2]\n\n"  # two legacy units
        "Broken.[^e1] ^bad_id!\n\n"  # an invalid suffix: no record
        "[^e1]: 2026-01 [s](../../sources/x.md)\n",
        encoding="utf-8",
    )
    (topics / "y.md").write_bytes(b"\xff\xfe not utf-8")
    (topics / "z.txt").write_text("not a topic", encoding="utf-8")
    out = {t.path: t for t in topic_outline(tmp_path / "memory")}
    assert set(out) == {"a/x.md", "a/y.md"}
    assert (out["a/x.md"].title, out["a/x.md"].records) == ("Ex", 3)
    assert (out["a/y.md"].readable, out["a/y.md"].records, out["a/y.md"].title) == (False, 0, "y")
    assert topic_outline(tmp_path / "nowhere") == ()


def _aged(*paths: Path, seconds: float = 10) -> None:
    """Move files' mtimes back past the clock tick, as any file not written just now is; their
    ctimes (moved by the utime itself, and no call sets them back) then age by waiting it out."""
    import os
    import time

    from memory_tui.core.cache.stamp import RACY_NS

    t = time.time() - seconds
    for path in paths:
        os.utime(path, (t, t))
    time.sleep(RACY_NS / 1e9)


def test_outline_cache_answers_unchanged_files_only(tmp_path, monkeypatch):
    """A second start reads no topic file whose stat key is unchanged, and re-reads one that
    was rewritten (same size, other bytes); the answers are always the uncached outline's;
    a file written within the clock tick is never remembered; a foreign table is empty."""
    from memory_tui.core.cache import envelope
    from memory_tui.core.store import outline as O

    memory = tmp_path / "memory"
    topics = memory / "topics"
    topics.mkdir(parents=True)
    a, b = topics / "a.md", topics / "b.md"
    a.write_text("# A\n\nOne.[^e1] ^blk-aaaa1111\n\nTwo.[^e1] ^blk-aaaa2222\n\n[^e1]: 2026-01 [s](../sources/x.md)\n")
    b.write_text("# B\n\nOne.[^e1] ^blk-bbbb1111\n\n[^e1]: 2026-01 [s](../sources/x.md)\n")
    _aged(a, b)
    folder = tmp_path / "cache"
    reads: list[str] = []
    real = O.read_topic_file
    monkeypatch.setattr(O, "read_topic_file", lambda d, rel: (reads.append(rel), real(d, rel))[1])

    def outline():
        cache = O.OutlineCache(memory, folder)
        got = O.topic_outline(memory, cache=cache)
        cache.save()
        return got

    assert outline() == O.topic_outline(memory) and sorted(set(reads)) == ["a.md", "b.md"]
    reads.clear()
    first = outline()
    assert reads == [] and [(t.path, t.title, t.records) for t in first] == [("a.md", "A", 2), ("b.md", "B", 1)]
    # rewritten in place, same size, a title and a record count of another file
    b.write_text(b.read_text().replace("# B", "# C").replace("One.[^e1] ^blk-bbbb1111", "On2.[^e1] ^blk-bbbb1112"))
    _aged(b, seconds=5)
    got = outline()
    assert reads == ["b.md"] and got == O.topic_outline(memory) and got[1].title == "C"
    # just written (racy): answered, but not remembered
    a.write_text("# A2\n")
    reads.clear()
    assert outline()[0].title == "A2" and reads == ["a.md"]
    reads.clear()
    assert outline()[0].title == "A2" and reads == ["a.md"]
    # a table of other code or another root is not read
    table = next(folder.glob("*" + O.SUFFIX))
    good = table.read_bytes()
    data = envelope.unpack(O.KIND, good, O.OUTLINE_FORMAT)
    assert O.OutlineCache(memory, folder).entries != {}
    for bad in (envelope.pack(O.KIND, {**data, "code": "other"}, O.OUTLINE_FORMAT),
                envelope.pack(O.KIND, {**data, "root": "/elsewhere"}, O.OUTLINE_FORMAT),
                envelope.pack(O.KIND, data, O.OUTLINE_FORMAT - 1),  # an older format
                envelope.pack("noop", data, O.OUTLINE_FORMAT),  # another kind
                good[:-4],  # cut short
                good[:-2] + bytes([good[-2] ^ 1]) + good[-1:],  # a flipped bit
                b"garbage"):
        table.write_bytes(bad)
        assert O.OutlineCache(memory, folder).entries == {}
