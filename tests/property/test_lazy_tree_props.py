"""A tree loaded from the persistent parse cache builds a topic's units only when they are
first read (``Topic.deferred``, ``TopicTree._lazy``). Asked the same questions in random
order — ids, units, topics, problems, the id map's keys and order, pickling — it answers as
the fresh strict parse does, builds nothing the questions did not need, and a tree
reassembled from it after an edit equals the full assembly without building the topics the
edit did not touch. Also: the scandir walk of ``topics/`` lists what ``rglob("*.md")`` does."""

from __future__ import annotations

import os
import time
import pickle
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.cache.stamp import RACY_NS
from memory_tui.core.store import parsecache
from memory_tui.core.format.topics import tree as topics_mod  # the room that holds the tree rules
from memory_tui.core.store import workspace
from memory_tui.core.format.sources import SourceIndex
from memory_tui.core.format.topics import assemble_tree, parse_topic, parse_tree, reassemble_tree

_STATE: dict[str, Path] = {}


def _bench_memory(tmp_path_factory, bench_state_small) -> Path:
    if "mem" not in _STATE:
        mem = tmp_path_factory.mktemp("lazy-tree") / "memory"
        shutil.copytree(bench_state_small / "memory", mem, symlinks=True)
        for p in mem.rglob("*.md"):  # older than the clock tick: the cache keeps them
            stat = p.stat()
            os.utime(p, ns=(stat.st_atime_ns, stat.st_mtime_ns - 5_000_000_000))
        time.sleep(RACY_NS / 1e9)  # the ctime the utime moved cannot be set back
        parsecache.drop(mem)
        parsecache.load_tree(mem, persist=True)
        _STATE["mem"] = mem
    return _STATE["mem"]


@pytest.fixture(scope="module")
def bench_mem(tmp_path_factory, bench_state_small):
    return _bench_memory(tmp_path_factory, bench_state_small)


def _fresh(mem: Path):
    index = SourceIndex.load(mem)
    return index, parse_tree(mem / "topics", resolve=index.resolve_target, strict=True)


def _cached(mem: Path):
    parsecache.forget_in_process()  # a fresh process: the tree comes from the files
    return parsecache.load_tree(mem)


def _built(topic) -> bool:
    return "units" in topic.__dict__


QUESTIONS = st.lists(st.tuples(st.sampled_from(["by_id", "has_id", "topic", "block_ids", "missing", "evidence"]),
                               st.integers(0, 10 ** 6)), max_size=25)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(QUESTIONS, st.booleans())
def test_lazy_cached_tree_answers_as_the_fresh_parse(bench_mem, questions, units_first):
    _index, fresh = _fresh(bench_mem)
    index, tree = _cached(bench_mem)
    assert "units" not in tree.__dict__ and not any(map(_built, tree.topics)), "the load built units"
    assert tree.problems == fresh.problems and tree.dupfree == fresh.dupfree
    assert [t.path for t in tree.topics] == [t.path for t in fresh.topics]
    assert tree.id_view == fresh.id_view and list(tree._index) == list(fresh._index)
    assert len(tree._index) == len(fresh._index)
    assert tree.unit_count == len(fresh.units)
    assert not any(map(_built, tree.topics)), "answering from ids built units"
    if units_first:
        assert tree.units == fresh.units
    ids = list(fresh.id_view)
    asked = set()
    for kind, n in questions:
        mid = ids[n % len(ids)]
        path = fresh.by_id(mid).topic_path
        asked.add(path)
        if kind == "by_id":
            unit = tree.by_id(mid)
            assert unit == fresh.by_id(mid)
            assert unit is tree.topic(path).units[tree.topic(path).memory_ids.index(mid)]
            assert tree._index[mid] is unit
        elif kind == "has_id":
            assert tree.has_id(mid) and mid in tree.id_view
        elif kind == "topic":
            assert tree.topic(path) == fresh.topic(path) and tree.topic("topics/" + path) is tree.topic(path)
        elif kind == "block_ids":
            assert tree.block_ids(path) == fresh.block_ids(path)
        elif kind == "evidence":
            assert tree.topic(path).evidence == fresh.topic(path).evidence
        else:
            ghost = f"{mid}-gone"
            assert tree.by_id(ghost) is None and not tree.has_id(ghost) and ghost not in tree.id_view
            with pytest.raises(KeyError):
                tree._index[ghost]
    if not units_first:
        # only the topics asked about were built
        assert {t.path for t in tree.topics if _built(t)} <= asked
    assert tree.units == fresh.units and tree == fresh
    assert all(tree.by_id(u.memory_id) is u for u in tree.units)
    again = pickle.loads(pickle.dumps(tree))
    assert again == fresh and again.units == fresh.units and again.by_id(ids[0]) == fresh.by_id(ids[0])
    assert all(type(t) is topics_mod.Topic and set(vars(t)) >= {"units", "evidence"} for t in again.topics)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10 ** 6), st.sampled_from(["reword", "drop_record", "new_record"]))
def test_reassembled_from_a_lazy_tree_equals_the_full_assembly(bench_mem, n, how):
    index, tree = _cached(bench_mem)
    at = n % len(tree.topics)
    old = tree.topics[at]
    text = old.text
    if how == "reword":
        text = text.replace(" the ", " a ", 1) if " the " in text else text + "\n"
    elif how == "drop_record":
        paras = text.split("\n\n")
        text = "\n\n".join(paras[:-2] + paras[-1:]) if len(paras) > 3 else text
    else:
        text = text.rstrip("\n") + "\n\nA brand new unsourced note.\n"
    new_topic = parse_topic(old.path, text, resolve=index.resolve_target, strict=True)
    topics = tree.topics[:at] + (new_topic,) + tree.topics[at + 1:]
    incr = reassemble_tree(tree, topics)
    assert "units" not in incr.__dict__
    assert [t.path for t in tree.topics if _built(t)] == [], "reassembling built untouched topics"
    full = assemble_tree(topics)
    assert incr.problems == full.problems and incr.dupfree == full.dupfree
    assert incr.unit_count == len(full.units) and full.unit_count == len(full.units)
    assert incr.id_view == full.id_view and list(incr._index) == list(full._index)
    for mid in random.Random(n).sample(list(full.id_view), 30):
        assert incr.by_id(mid) is full.by_id(mid)
    assert all(a is b for a, b in zip(incr.units, full.units)) and len(incr.units) == len(full.units)
    assert incr == full


def test_tree_units_after_by_id_is_the_same_objects(bench_mem):
    _index, tree = _cached(bench_mem)
    mid = next(iter(tree.id_view))
    unit = tree.by_id(mid)
    assert tree.units[0] is unit or unit in tree.units
    assert next(u for u in tree.units if u.memory_id == mid) is unit
    # reassembly after the units were built splices them: the same objects again
    topics = tree.topics
    again = reassemble_tree(tree, (parse_topic(topics[0].path, topics[0].text + "\n"),) + topics[1:])
    assert again.__dict__["_lazy_units"].func is topics_mod._splice_units
    assert again.units[len(topics[0].units):] == tree.units[len(topics[0].units):]
    assert all(a is b for a, b in zip(again.units[len(again.topics[0].units):], tree.units[len(topics[0].units):]))


def test_a_damaged_blob_is_parsed_from_the_text_and_ids_are_checked(bench_mem):
    index, fresh = _fresh(bench_mem)
    topic = next(t for t in fresh.topics if len(t.units) > 3)
    head = parsecache.topic_head(parsecache.topic_rows(topic))
    reparse = lambda path, text: parse_topic(path, text, resolve=index.resolve_target, strict=True)  # noqa: E731
    good = parsecache.topic_deferred(head, reparse)
    assert not _built(good) and good == topic and good.units == topic.units and good.evidence == topic.evidence
    damaged = parsecache.topic_deferred(head[:5] + (head[5][: len(head[5]) // 2],), reparse)
    assert damaged.units == topic.units and damaged.evidence == topic.evidence and damaged == topic
    wrong = parsecache.topic_deferred(head[:4] + (head[4][::-1],) + head[5:], reparse)
    with pytest.raises(RuntimeError):
        wrong.units  # noqa: B018
    with pytest.raises(ValueError):
        parsecache.topic_deferred(head[:4] + ((1, 2),) + head[5:], reparse)


def _rglob_stats(topics_dir: Path) -> dict:
    out = {}
    for file in sorted(topics_dir.rglob("*.md")):
        try:
            st = file.stat()
        except OSError:
            continue
        import stat as stat_mod
        if stat_mod.S_ISREG(st.st_mode):
            out[file.relative_to(topics_dir).as_posix()] = parsecache.stat_key(st)
    return out


def test_topic_walk_lists_what_rglob_does(tmp_path):
    top = tmp_path / "topics"
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "o.md").write_text("o\n")
    (outside / "deep" / "p.md").write_text("p\n")
    for rel in ("a.md", ".hidden.md", ".md", "x.MD", "notes.txt", "sub/b.md", "sub/.dot/c.md", "sub/deeper/d.md",
                "dir.md/e.md", "s p a c e/é.md", "a/b.md", "a-b.md", "a.b/c.md"):
        (top / rel).parent.mkdir(parents=True, exist_ok=True)
        (top / rel).write_text("t\n")
    (top / "linked-dir").symlink_to(outside, target_is_directory=True)  # not entered
    (top / "linked-dir.md").symlink_to(outside / "deep", target_is_directory=True)  # a dir: not a topic
    (top / "linked.md").symlink_to(outside / "o.md")  # followed: a regular file
    (top / "broken.md").symlink_to(tmp_path / "nowhere.md")
    (top / "sub" / "fifo.md").unlink(missing_ok=True)
    os.mkfifo(top / "sub" / "fifo.md")
    want = _rglob_stats(top)
    assert parsecache.topic_stats(top) == want
    # the snapshot's file list: the same files, in sorted(Path) order ("a/b.md" first: by parts)
    files = workspace._topic_files(top)
    assert list(files) == list(want) and list(want).index("a/b.md") < list(want).index("a-b.md")
    assert all(parsecache.stat_key(found) == want[rel] and stamp == workspace.FileStamp.of(found)
               for rel, (stamp, found) in files.items())
    assert "linked.md" in want and "dir.md/e.md" in want and not any(k.startswith("linked-dir") for k in want)
