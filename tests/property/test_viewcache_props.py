"""Views from per-topic parts (``core.viewcache``) = ``views.build_views`` of the whole tree,
byte for byte, along random sequences of in-memory edits that reuse the parses of unchanged
files (as the transaction caches do), and ``check`` mode catches a difference."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from memory_tui.core.store import viewcache
from memory_tui.core.format.sources import SourceIndex
from memory_tui.core.format.topics import assemble_tree, parse_topic, topic_sort_key
from memory_tui.core.format.views import build_views
from memory_tui.core.switches import current as current_switches
from switching import set_derive


@pytest.fixture(scope="module")
def world(bench_state_small):
    mem = bench_state_small / "memory"  # only read
    index = SourceIndex.load(mem)
    texts = {p.relative_to(mem / "topics").as_posix(): p.read_text() for p in (mem / "topics").rglob("*.md")}
    return index, texts


EDITS_ADDING = st.lists(st.tuples(st.sampled_from(["reword", "redate", "drop", "link", "unlink", "dup", "swap", "add",
                                                  "none"]), st.integers(0, 10_000)), min_size=1, max_size=8)

SEGMENTS = st.sampled_from([1, 2, 64])  # rows per segment of a day file (a day here holds about three)

EDITS = st.lists(st.tuples(st.sampled_from(["reword", "redate", "drop", "link", "unlink", "dup", "swap", "none"]),
                           st.integers(0, 10_000)), min_size=1, max_size=8)


def _edit(texts: dict[str, str], op: str, n: int) -> None:
    rels = sorted(texts)
    rel = rels[n % len(rels)]
    text = texts[rel]
    paras = text.split("\n\n")
    if op == "reword":
        texts[rel] = text.replace("(fact ", f"(fact {n} ", 1)
    elif op == "redate":
        texts[rel] = re.sub(r"Time: `\d{4}-\d{2}-\d{2}`", f"Time: `2027-0{1 + n % 9}-1{n % 10}`", text, count=1)
    elif op == "drop" and len(paras) > 4:
        texts[rel] = "\n\n".join(paras[:2] + paras[4:])
    elif op == "link":
        other = rels[(n + 1) % len(rels)]
        ids = re.findall(r"\^([A-Za-z0-9-]+)\s*$", texts[other], flags=re.M)
        if ids:
            texts[rel] = re.sub(r"\.\[\^", f", see [that](/{other}#^{ids[n % len(ids)]}).[^", text, count=1)
    elif op == "unlink":
        texts[rel] = re.sub(r", see \[(?:that|next)\]\([^)]*\)", "", text, count=1)
    elif op == "dup":  # a block id in two files: the tree drops one, so the views take the full path
        other = rels[(n + 1) % len(rels)]
        if other != rel and len(paras) > 2:
            texts[other] = texts[other].rstrip("\n") + "\n\n" + "\n\n".join(paras[1:3]) + "\n"
    elif op == "swap" and len(paras) > 6:
        texts[rel] = "\n\n".join(paras[:2] + paras[4:6] + paras[2:4] + paras[6:])
    elif op == "add" and len(paras) > 4:  # a copy of the first record under a new id
        label = re.search(r"\[\^(e-[0-9a-f]+)\]", paras[2])
        if label is not None:
            new = f"e-{n + 1:010x}"
            record = re.sub(r"\^[0-9a-f]+$", f"^{n + 1:08x}", paras[2].replace(label.group(1), new))
            texts[rel] = text.rstrip("\n") + "\n\n" + record + "\n\n" + paras[3].replace(label.group(1), new) + "\n"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=EDITS_ADDING, limit=st.sampled_from([0, 3, 50]), orders=st.sampled_from(["partial", "grown", "ties", "stale"]))
@example(edits=[("none", 0), ("redate", 1), ("drop", 2), ("redate", 3), ("link", 4), ("unlink", 4), ("reword", 5)], limit=3,
         orders="grown")
@example(edits=[("redate", 1), ("redate", 5), ("link", 2), ("unlink", 2)], limit=3, orders="partial")
@example(edits=[("none", 0), ("drop", 3), ("reword", 3)], limit=50, orders="grown")  # newest ids the tree lost  # a day that empties; a link that goes
@example(edits=[("reword", 1), ("add", 1), ("reword", 2)], limit=3, orders="stale")  # an id the order lacks
def test_parts_equal_full_build(world, edits, limit, orders):
    index, base = world
    texts = dict(base)
    parsed: dict[tuple[str, str], object] = {}
    cache = viewcache.ViewCache()
    stored: dict[str, viewcache.TopicPart] = {}

    def tree_of():
        topics = []
        for rel in sorted(texts, key=topic_sort_key):
            key = (rel, texts[rel])
            if key not in parsed:  # unchanged files keep their parse object, as txcache does
                parsed[key] = parse_topic(rel, texts[rel], resolve=index.resolve_target, strict=True)
            topics.append(parsed[key])
        return assemble_tree(topics)

    grown: dict[str, int] = {}

    def creation_order(tree):
        nonlocal grown
        if orders == "partial":  # ids missing from the order: ranked among the new ones
            return {u.memory_id: i for i, u in enumerate(reversed(tree.units)) if i % 3}
        if orders == "ties":  # a hand-edited order with equal values: the position decides
            return {u.memory_id: i % 4 for i, u in enumerate(tree.units)}
        # as a transaction grows runtime.json: the same object while no id is new
        missing = [u.memory_id for u in tree.units if u.memory_id not in grown]
        if missing:
            nxt = max(grown.values(), default=-1) + 1
            grown = {**grown, **{mid: nxt + i for i, mid in enumerate(missing)}}
        return grown

    for step, (op, n) in enumerate(edits):
        _edit(texts, op, n)
        tree = tree_of()
        master = tree.topic("core.md")
        kwargs = dict(master_text=master.text if master is not None else None, trusted_ids=index.trusted_ids(),
                      # "stale": every other step keeps the order object of the step before, whatever
                      # ids came since (a transaction grows it first; ``recent`` is exact either way)
                      creation_order=grown if orders == "stale" and step % 2 else creation_order(tree),
                      recent_limit=limit, link_for=index.link_for)
        # every third step starts from a fresh in-process cache fed by the persisted parts; the
        # others combine incrementally from the last step's aggregates
        if step % 3 == 2:
            cache = viewcache.ViewCache()
        got = cache.build(tree, lookup=lambda t: stored.get((t.path, t.text)),
                          store=lambda t, p: stored.__setitem__((t.path, t.text), p), **kwargs, switches=current_switches())
        want = build_views(tree, **kwargs)
        assert got.files == want.files
        assert got.core == want.core


def test_check_mode_raises_on_a_difference(world, monkeypatch):
    index, base = world
    topics = [parse_topic(rel, base[rel], resolve=index.resolve_target, strict=True) for rel in sorted(base, key=topic_sort_key)]
    tree = assemble_tree(topics)
    kwargs = dict(trusted_ids=index.trusted_ids(), link_for=index.link_for)
    set_derive(monkeypatch, "check")
    cache = viewcache.ViewCache()
    assert cache.build(tree, **kwargs, switches=current_switches()).files == build_views(tree, **kwargs).files  # equal: no raise
    # a stale persisted part (say, from a buggy key) is what check mode exists to catch
    stale = viewcache.topic_part(topics[0], None)
    stale = viewcache.TopicPart(stale.rows, stale.outbound + (("zzz", '"zzz": []'),), stale.backlinks)
    with pytest.raises(viewcache.ViewsMismatch, match="relations.json"):
        viewcache.ViewCache().build(tree, lookup=lambda t: stale if t is topics[0] else None, **kwargs, switches=current_switches())
    with pytest.raises(ValueError, match="MEMORY_TUI_TEST_DERIVE"):
        set_derive(monkeypatch, "sideways")


# --- the persisted snapshot of the combined views (read by a fresh process) ----------------

SNAP_DAMAGES = st.sampled_from(["keep", "keep", "truncate_day", "flip_part", "drop_manifest", "garble_manifest", "drop_file"])


def _spoil(root: Path, how: str, n: int) -> None:
    """Damage the snapshot the way a crash, a disk or another version would."""
    folder = viewcache.snapshot_dir(root)
    if not folder.is_dir():
        return
    files = sorted(p for p in folder.iterdir() if p.name != "manifest")
    days = [p for p in files if p.name.startswith(("d-", "e-"))]  # a day's base or its patch
    parts = [p for p in files if p.name.startswith("p-")]
    if how == "truncate_day" and days:
        p = days[n % len(days)]
        p.write_bytes(p.read_bytes()[:-3])
    elif how == "flip_part" and parts:
        p = parts[n % len(parts)]
        data = bytearray(p.read_bytes())
        data[-5] ^= 0x20
        p.write_bytes(bytes(data))
    elif how == "drop_manifest" and (folder / "manifest").is_file():
        (folder / "manifest").unlink()
    elif how == "garble_manifest" and (folder / "manifest").is_file():
        data = (folder / "manifest").read_bytes()
        (folder / "manifest").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif how == "drop_file" and files:
        files[n % len(files)].unlink()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=EDITS, fresh=st.lists(st.booleans(), min_size=8, max_size=8),
       damages=st.lists(SNAP_DAMAGES, min_size=8, max_size=8), segment=SEGMENTS)
@example(edits=[("reword", 1), ("link", 2), ("unlink", 2), ("redate", 3), ("drop", 4), ("swap", 5)],
         fresh=[True] * 8, damages=["keep"] * 8, segment=64)
@example(edits=[("dup", 1), ("reword", 1), ("none", 0)], fresh=[True] * 8, damages=["keep"] * 8, segment=64)
@example(edits=[("reword", 0), ("reword", 4576), ("reword", 0), ("reword", 1)],  # a damaged part read a step later
         fresh=[False, False, False, True] + [False] * 4, damages=["keep"] * 3 + ["flip_part"] + ["keep"] * 4,
         segment=64)
@example(edits=[("reword", 1), ("reword", 1), ("redate", 1), ("reword", 1), ("reword", 4)],  # patches read back
         fresh=[True] * 8, damages=["keep"] * 8, segment=1)
def test_snapshot_equals_full_build(world, tmp_path_factory, edits, fresh, damages, segment, monkeypatch):
    """Each step as a fresh process (nothing in memory but the snapshot on disk), or in the
    same one, after random damage to the snapshot: always the full rebuild's bytes."""
    monkeypatch.setattr(viewcache, "SEGMENT", segment)
    index, base = world
    root = tmp_path_factory.mktemp("snap") / "memory"
    (root / ".scriptorium").mkdir(parents=True)
    texts = dict(base)


    def key_of(topic):
        return (hashlib.sha256(texts_of[topic.path].encode()).hexdigest(),)

    texts_of: dict[str, str] = {}
    cache = viewcache.ViewCache(str(root))
    duplicated = False
    # A damaged file is found only when a build reads it, and a snapshot built on a damaged one
    # keeps naming its untouched files on disk, so once anything was damaged a later step may
    # rightly combine: from then on only the bytes are checked.
    spoiled = False
    last_flushed = flushed = True
    for step, (op, n) in enumerate([("none", 0), *edits]):
        _edit(texts, op, n)
        texts_of = dict(texts)
        topics = [parse_topic(rel, texts[rel], resolve=index.resolve_target, strict=True)
                  for rel in sorted(texts, key=topic_sort_key)]
        tree = assemble_tree(topics)
        master = tree.topic("core.md")
        kwargs = dict(master_text=master.text if master is not None else None, trusted_ids=index.trusted_ids(),
                      link_for=index.link_for)
        if step and fresh[step % 8]:
            _spoil(root, damages[step % 8], n)
            spoiled = spoiled or damages[step % 8] != "keep"
            cache = viewcache.ViewCache(str(root))
            flushed = last_flushed
        combined = []
        cache.combine = lambda *a, _c=cache: combined.append(1) or viewcache.ViewCache.combine(_c, *a)
        got = cache.build(tree, key_of=key_of, **kwargs, switches=current_switches())
        want = build_views(tree, **kwargs)
        assert got.files == want.files
        last_flushed = bool(n % 3)
        if last_flushed:  # an install (else a transaction that failed or changed nothing: nothing written)
            cache.flush()
        duplicated = duplicated or sum(len(t.units) for t in topics) != len(tree.units)
        if step and not duplicated and not spoiled and (not fresh[step % 8] or flushed):
            assert not combined, "an intact snapshot of the last step was not used"


def test_snapshot_is_used_and_check_mode_catches_a_wrong_one(world, tmp_path, monkeypatch):
    """A fresh cache with a snapshot builds without combining every part; a snapshot whose
    text is wrong for its keys (what a bug in the patching would make) is caught by check."""
    index, base = world
    root = tmp_path / "memory"
    (root / ".scriptorium").mkdir(parents=True)
    texts = dict(base)


    def tree_of():
        return assemble_tree([parse_topic(rel, texts[rel], resolve=index.resolve_target, strict=True)
                              for rel in sorted(texts, key=topic_sort_key)])

    def key_of(topic):
        return (hashlib.sha256(texts[topic.path].encode()).hexdigest(),)

    kwargs = dict(trusted_ids=index.trusted_ids(), link_for=index.link_for)
    first = viewcache.ViewCache(str(root))
    first.build(tree_of(), key_of=key_of, **kwargs, switches=current_switches())
    assert not viewcache.snapshot_dir(root).exists()  # written only by flush (after an install)
    first.flush()
    _edit(texts, "reword", 3)
    cache = viewcache.ViewCache(str(root))
    combined = []
    monkeypatch.setattr(cache, "combine", lambda *a: combined.append(1) or viewcache.ViewCache.combine(cache, *a))
    tree = tree_of()
    assert cache.build(tree, key_of=key_of, **kwargs, switches=current_switches()).files == build_views(tree, **kwargs).files
    assert not combined  # answered from the snapshot and the one changed topic
    # a snapshot that lies (what a bug in the patching would make): a reword leaves
    # relations.json alone, so the lie comes out as it is; check mode raises on it
    snap = viewcache.Snapshot.load(root)
    snap.relations = snap.relations.replace('"outbound": {', '"outbound": {"zzz": [], ', 1)
    snap.relations_name = None
    assert snap.save(root)
    _edit(texts, "reword", 5)
    tree = tree_of()
    assert '"zzz": []' in viewcache.ViewCache(str(root)).build(tree, key_of=key_of, **kwargs, switches=current_switches()).relations
    set_derive(monkeypatch, "check")
    with pytest.raises(viewcache.ViewsMismatch, match="relations.json"):
        viewcache.ViewCache(str(root)).build(tree, key_of=key_of, **kwargs, switches=current_switches())


def _day_rows(snap, when):
    return [row for meta in snap.segs[when][1] for row in viewcache.codec.loads(meta)]


def test_a_reword_writes_the_segments_it_changed_not_the_day(world, tmp_path, monkeypatch):
    """A reword's save writes a patch holding the one segment its row is in (the day's base
    file stays), patches over the same base accumulate, and a fresh process reads the day
    back from base and patch; a patch that would outgrow its share of the day gives way to
    the day written whole."""
    monkeypatch.setattr(viewcache, "SEGMENT", 1)
    monkeypatch.setattr(viewcache, "PATCH_SHARE", 1.0)
    index, base = world
    root = tmp_path / "memory"
    (root / ".scriptorium").mkdir(parents=True)
    texts = dict(base)
    parsed: dict[str, tuple[str, object]] = {}
    kwargs = dict(trusted_ids=index.trusted_ids(), link_for=index.link_for)

    def key_of(topic):
        return (hashlib.sha256(texts[topic.path].encode()).hexdigest(),)

    def step(cache):
        tree = _tree_reusing(texts, parsed, index)
        assert cache.build(tree, key_of=key_of, **kwargs, switches=current_switches()).files == build_views(tree, **kwargs).files
        cache.flush()
        return {p.name for p in viewcache.snapshot_dir(root).iterdir()}

    def reword(path, mid, n):
        texts[path], count = re.subn(rf"\(fact [^)]*\)(.*\^{mid}$)", rf"(fact reworded {n})\1", texts[path], flags=re.M)
        assert count == 1

    cache = viewcache.ViewCache(str(root))
    before = step(cache)
    when = max(cache._snap.segs, key=lambda w: len(cache._snap.segs[w][1]))
    rows = _day_rows(cache._snap, when)
    assert len(rows) >= 3
    # the first row twice (the second patch replaces the first), then the last row: two segments
    for n, (path, _ref, mid, _len) in enumerate([rows[0], rows[0], rows[-1]]):
        reword(path, mid, n)
        after = step(cache)
        added = after - before
        assert {name[:2] for name in added} == {"e-", "p-", "k-"}, sorted(added)  # no day file
        assert {name for name in before - after if name.startswith("d-")} == set()
        assert sorted(cache._snap.patches[when]) == ([0] if n < 2 else [0, len(rows) - 1])
        before = after
    fresh = viewcache.ViewCache(str(root))
    combined = []
    monkeypatch.setattr(fresh, "combine", lambda *a: combined.append(1) or viewcache.ViewCache.combine(fresh, *a))
    loaded = viewcache.Snapshot.load(root)
    assert loaded.patches == cache._snap.patches and loaded.texts == cache._snap.texts
    assert loaded.segs == cache._snap.segs
    # one more row of the day, its patch now over half the day: the day is written whole
    monkeypatch.setattr(viewcache, "PATCH_SHARE", 0.5)
    path, _ref, mid, _len = rows[1]
    reword(path, mid, 9)
    after = step(fresh)
    assert not combined
    assert when not in fresh._snap.patches
    assert any(name.startswith("d-") for name in after - before)
    assert viewcache.Snapshot.load(root).texts == fresh._snap.texts


def _tree_reusing(texts: dict[str, str], parsed: dict, index: SourceIndex):
    """The tree of ``texts``, each file parsed again only when its text changed (``parsed``
    keeps rel -> (text, topic) across calls): the same topic objects come back, as in txcache."""
    topics = []
    for rel in sorted(texts, key=topic_sort_key):
        hit = parsed.get(rel)
        if hit is None or hit[0] != texts[rel]:
            hit = parsed[rel] = (texts[rel], parse_topic(rel, texts[rel], resolve=index.resolve_target, strict=True))
        topics.append(hit[1])
    return assemble_tree(topics)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(["reword", "reword", "redate", "drop", "link", "unlink", "swap", "none"]),
                                st.integers(0, 10_000)), min_size=1, max_size=10),
       flushes=st.lists(st.booleans(), min_size=11, max_size=11), segment=SEGMENTS)
@example(edits=[("reword", 3), ("reword", 3), ("reword", 3)], flushes=[True] * 11, segment=64)  # one day spliced thrice
@example(edits=[("reword", 3), ("swap", 3), ("reword", 3), ("redate", 3)], flushes=[False, True] * 5 + [True], segment=64)
@example(edits=[("reword", 3), ("reword", 3), ("reword", 5), ("reword", 3)], flushes=[True] * 11, segment=1)
def test_snapshot_with_reused_parses_equals_full_build(world, tmp_path_factory, edits, flushes, segment, monkeypatch):
    """In one process, with the parses of unchanged files reused (as the transaction caches
    hand them out): the snapshot keys kept for the very same parses and the day files spliced
    for a reword give the full rebuild's bytes, step after step (each step starts from the
    last one's snapshot, so a wrong splice or a stale key shows in a later step too)."""
    monkeypatch.setattr(viewcache, "SEGMENT", segment)
    index, base = world
    root = tmp_path_factory.mktemp("snapreuse") / "memory"
    (root / ".scriptorium").mkdir(parents=True)
    texts = dict(base)
    parsed: dict[str, tuple[str, object]] = {}
    texts_of: dict[str, str] = {}

    def key_of(topic):
        return (hashlib.sha256(texts_of[topic.path].encode()).hexdigest(),)

    cache = viewcache.ViewCache(str(root))
    spliced = []
    real_splice = viewcache._splice_day
    reworded = False
    for step, (op, n) in enumerate([("none", 0), ("none", 0), *edits]):
        before = dict(texts)
        _edit(texts, op, n)
        reworded = reworded or (op == "reword" and texts != before)
        texts_of = dict(texts)
        tree = _tree_reusing(texts, parsed, index)
        master = tree.topic("core.md")
        kwargs = dict(master_text=master.text if master is not None else None, trusted_ids=index.trusted_ids(),
                      link_for=index.link_for)
        viewcache._splice_day = lambda *a: (lambda r: spliced.append(r is not None) or r)(real_splice(*a))
        try:
            got = cache.build(tree, key_of=key_of, **kwargs, switches=current_switches())
        finally:
            viewcache._splice_day = real_splice
        assert got.files == build_views(tree, **kwargs).files, (step, op)
        if flushes[step % 11]:
            cache.flush()
    if reworded:
        assert any(spliced), "no reword was spliced into its day file"


def _named_on_disk(root: Path) -> tuple[set[str], viewcache.Snapshot | None]:
    folder = viewcache.snapshot_dir(root)
    files = {p.name for p in folder.iterdir() if not p.name.startswith(".")}
    return files, viewcache.Snapshot.load(root)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], phases=[Phase.explicit, Phase.generate])
@given(edits=st.lists(st.tuples(st.sampled_from(["reword", "reword", "redate", "drop", "link", "unlink", "swap",
                                                 "remove", "restore", "none", "fresh"]),
                                st.integers(0, 10_000)), min_size=1, max_size=12),
       flushes=st.lists(st.booleans(), min_size=13, max_size=13), chunk=st.sampled_from([1, 3, 128]),
       segment=SEGMENTS)
@example(edits=[("reword", 3), ("reword", 3), ("reword", 7)], flushes=[True] * 13, chunk=3, segment=64)
@example(edits=[("swap", 3), ("swap", 3), ("swap", 3)], flushes=[True] * 13, chunk=3, segment=64)  # the same bytes come back
@example(edits=[("reword", 3), ("reword", 7), ("reword", 3), ("reword", 3)], flushes=[True, False] * 6 + [True], chunk=3,
         segment=64)
@example(edits=[("reword", 3), ("remove", 5), ("reword", 3), ("restore", 0), ("fresh", 0), ("reword", 1)],
         flushes=[True] * 13, chunk=1, segment=64)
@example(edits=[("reword", 3), ("reword", 3), ("reword", 7), ("fresh", 0), ("reword", 3), ("redate", 3), ("reword", 3)],
         flushes=[True] * 13, chunk=3, segment=1)  # patches grown, read by a fresh process, given way to the day
def test_snapshot_save_names_exactly_its_files(world, tmp_path_factory, edits, flushes, chunk, segment, monkeypatch):
    """The snapshot saved after edits in one process (only the chunks of the keys holding a
    changed topic rewritten, only the files it dropped unlinked) is what a fresh process
    loads -- the same keys, parts, days and relations -- and its folder holds exactly the
    files its manifest names, after topics come and go, saves are skipped, and a fresh
    process takes over (which sweeps the whole folder once)."""
    monkeypatch.setattr(viewcache, "CHUNK", chunk)
    monkeypatch.setattr(viewcache, "SEGMENT", segment)
    index, base = world
    root = tmp_path_factory.mktemp("snapsave") / "memory"
    (root / ".scriptorium").mkdir(parents=True)
    texts = dict(base)
    removed: list[tuple[str, str]] = []
    parsed: dict[str, tuple[str, object]] = {}
    texts_of: dict[str, str] = {}

    def key_of(topic):
        return (hashlib.sha256(texts_of[topic.path].encode()).hexdigest(),)

    listed: list[bool] = []
    real_listdir = viewcache.os.listdir
    monkeypatch.setattr(viewcache.os, "listdir", lambda *a: listed.append(True) or real_listdir(*a))
    cache = viewcache.ViewCache(str(root))
    swept_here = False  # this process saved since the last time topics came or went
    for step, (op, n) in enumerate([("none", 0), *edits]):
        if op == "remove" and len(texts) > 2:
            rel = sorted(texts)[n % len(texts)]
            removed.append((rel, texts.pop(rel)))
            swept_here = False
        elif op == "restore" and removed:
            rel, text = removed.pop()
            texts[rel] = text
            swept_here = False
        elif op == "fresh":
            cache = viewcache.ViewCache(str(root))
            swept_here = False
        else:
            _edit(texts, op, n)
        texts_of = dict(texts)
        tree = _tree_reusing(texts, parsed, index)
        kwargs = dict(trusted_ids=index.trusted_ids(), link_for=index.link_for)
        assert cache.build(tree, key_of=key_of, **kwargs, switches=current_switches()).files == build_views(tree, **kwargs).files, (step, op)
        if not flushes[step % 13]:
            continue
        listed.clear()
        cache.flush()
        # the whole folder is listed only by the first save of a process or after topics came
        # or went; else the save unlinks what it replaced
        assert bool(listed) == (not swept_here), (step, op)
        swept_here = True
        mine = cache._snap
        files, loaded = _named_on_disk(root)
        assert loaded is not None, (step, op)
        assert list(loaded.keys.items()) == list(mine.keys.items()), (step, op)
        assert loaded.part_names == mine.part_names and loaded.names == mine.names, (step, op)
        assert loaded.patch_names == mine.patch_names and loaded.patches == mine.patches, (step, op)
        assert loaded.relations == mine.relations and loaded.texts == mine.texts, (step, op)
        assert loaded.segs == mine.segs, (step, op)
        named = {"manifest", loaded.relations_name, *loaded.names.values(), *loaded.patch_names.values(),
                 *loaded.part_names.values(), *loaded.chunk_names}
        assert files == named, (step, op, sorted(files - named), sorted(named - files))
        for path in loaded.keys:  # every part named is the part of that key
            assert loaded.part(str(root), path) is not None, (step, op, path)
