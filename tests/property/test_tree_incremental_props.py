"""Incremental = full for the tree-wide derivations a transaction carries over from the
previous one (``MEMORY_TUI_TEST_DERIVE``): a tree reassembled from its predecessor, the cross-topic link
check from per-topic findings and block-id locations moved per file are, over random edit
sequences of small topic trees (duplicate ids within and across files, block links to ids that
exist, vanish or move, topic links without ``#^id``, files added and removed), exactly what
the from-scratch derivation gives."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memory_tui.core.format import blocklinks

from memory_tui.core.store import linkcache, txcache
from memory_tui.core.store.committed import sha
from memory_tui.core.store.treecache import same_tree
from memory_tui.core.format.blocklinks import block_id_locations, rewrite_block_links
from memory_tui.core.format.linkcheck import (check_cross_topic_links, check_cross_topic_links_incremental,
                                              topic_link_summary)
from memory_tui.core.format.topics import tree as topics_mod  # the room that holds the tree rules
from memory_tui.core.format.topics import assemble_tree, parse_topic, reassemble_tree, topic_sort_key
from memory_tui.core import switches
from memory_tui.core.switches import current as current_switches
from switching import set_derive

PATHS = ("a.md", "b.md", "sub/c.md", "sub/d.md", "z.md")
IDS = tuple(f"{n:08x}" for n in range(0x1a2b3c00, 0x1a2b3c00 + 12))


def _record(n: int, own: str, link: tuple[str, str] | None, bad_link: bool) -> str:
    tail = ""
    if link is not None:
        tail = f", see [that]({link[0]}#^{link[1]})"
    if bad_link:
        tail += ", also [plain](a.md)"
    return (f"Fact {n}{tail}.[^e-{n:010x}] ^{own}\n\n"
            f"[^e-{n:010x}]: Time: `2026-01-0{1 + n % 9}`; Sources: [x](D1:{n})\n")


RECORD = st.tuples(st.sampled_from(IDS), st.one_of(st.none(), st.tuples(st.sampled_from(PATHS), st.sampled_from(IDS))),
                   st.booleans())
TOPIC = st.lists(RECORD, min_size=0, max_size=4)
TREE = st.dictionaries(st.sampled_from(PATHS), TOPIC, min_size=1, max_size=len(PATHS))


def _texts(spec: dict[str, list]) -> dict[str, str]:
    out = {}
    for i, (path, records) in enumerate(sorted(spec.items())):
        body = "\n".join(_record(i * 10 + j, own, link, bad) for j, (own, link, bad) in enumerate(records))
        out[path] = f"# Topic {path}\n\n{body}"
    return out


def _parse(texts: dict[str, str], known: dict[tuple[str, str], object]):
    """Parses in tree order, the same object for the same text (as the transaction cache does)."""
    topics = []
    for rel in sorted(texts, key=topic_sort_key):
        key = (rel, texts[rel])
        if key not in known:
            known[key] = parse_topic(rel, texts[rel], strict=True)
        topics.append(known[key])
    return topics


@settings(max_examples=150, deadline=None)
@given(first=TREE, steps=st.lists(TREE, min_size=1, max_size=6), overlay_max=st.sampled_from([0, 3, 4096]))
def test_reassembled_tree_link_check_and_locations_equal_full(first, steps, overlay_max, tmp_path_factory):
    # the id map laid over its predecessor's (topics.IdOverlay), or a plain dict again past the limit
    saved, topics_mod.OVERLAY_MAX = topics_mod.OVERLAY_MAX, overlay_max
    try:
        _reassemble_steps(first, steps, tmp_path_factory)
    finally:
        topics_mod.OVERLAY_MAX = saved


def _reassemble_steps(first, steps, tmp_path_factory) -> None:
    known: dict = {}
    prev_texts = _texts(first)
    prev = assemble_tree(_parse(prev_texts, known))
    cache = txcache.WorkspaceCache(tmp_path_factory.mktemp("ws"))
    assert cache.block_locations(prev_texts, switches=current_switches()) == block_id_locations(prev_texts)
    blocklinks._REWRITTEN[0] = None
    for spec in steps:
        # keep some files exactly as they were: the incremental paths only pay off (and only
        # differ from the full ones) when most topics are the very same parses
        texts = dict(prev_texts)
        texts.update(_texts(spec))
        for gone in [p for p in texts if p not in spec and hash(p) % 3 == 0]:
            del texts[gone]
        topics = _parse(texts, known)
        full = assemble_tree(topics)
        incr = reassemble_tree(prev, topics)
        assert same_tree(incr, full)
        assert incr.dupfree == (len(full.units) == sum(len(t.units) for t in topics))
        assert check_cross_topic_links_incremental(incr, committed=prev) == check_cross_topic_links(full, committed=prev)
        assert check_cross_topic_links_incremental(incr) == check_cross_topic_links(full)
        # with summaries, a topic found clear in the last tree checked is not asked again (that
        # tree may be another example's: the memo holds across them, as across workspaces)
        assert check_cross_topic_links_incremental(incr, committed=prev, summary=topic_link_summary) == \
            check_cross_topic_links(full, committed=prev)
        where = cache.block_locations(texts, switches=current_switches())
        assert where == block_id_locations(texts)
        # the rewrite kept from the last call: files that are the same objects and link to no id
        # that moved keep theirs (and with a memo of each file's rewrite, as the transaction's)
        want = rewrite_block_links(texts)
        assert rewrite_block_links(texts, locations=where, file_ids=cache.file_ids, mode="check") == want
        assert rewrite_block_links(texts, locations=where, rewritten=cache.link_rewrite) == want
        prev, prev_texts = incr, texts


def test_check_mode_catches_a_wrong_incremental_answer(monkeypatch):
    check = switches.Switches("check")
    with pytest.raises(switches.IncrementalMismatch):
        check.choose("a fact", lambda: {"x": 1}, lambda: {"x": 2})
    assert check.choose("a fact", lambda: 3, lambda: 3) == 3
    assert switches.Switches("full").choose("a fact", lambda: 1 / 0, lambda: 4) == 4
    assert switches.Switches("incremental").choose("a fact", lambda: 5, lambda: 1 / 0) == 5
    set_derive(monkeypatch, "check")
    assert switches.current() == check  # what the environment says, read again by the test's set_derive


def test_a_duplicate_id_across_files_takes_the_full_assembly():
    one = parse_topic("a.md", "# A\n\n" + _record(1, IDS[0], None, False), strict=True)
    two = parse_topic("b.md", "# B\n\n" + _record(2, IDS[1], None, False), strict=True)
    dup = parse_topic("b.md", "# B\n\n" + _record(3, IDS[0], None, False), strict=True)
    prev = assemble_tree([one, two])
    assert prev.dupfree
    tree = reassemble_tree(prev, [one, dup])
    assert not tree.dupfree
    assert [p.message for p in tree.problems] == [p.message for p in assemble_tree([one, dup]).problems]
    assert any("duplicate memory_id" in p.message for p in tree.problems)


def test_a_clear_topic_is_asked_again_once_an_id_it_links_to_leaves_the_tree():
    linked = parse_topic("a.md", "# A\n\n" + _record(1, IDS[0], None, False), strict=True)
    other = parse_topic("a.md", "# A\n\n" + _record(1, IDS[2], None, False), strict=True)
    linking = parse_topic("b.md", "# B\n\n" + _record(2, IDS[1], ("a.md", IDS[0]), False), strict=True)
    before = assemble_tree([linked, linking])
    after = reassemble_tree(before, [other, linking])  # b.md: the very same parse
    assert before.dupfree and after.dupfree
    assert check_cross_topic_links_incremental(before, committed=before, summary=topic_link_summary) == []
    # and again: now only the topics not found clear are looked at (none), so b.md is asked
    # below only because the id it links to left
    assert check_cross_topic_links_incremental(before, committed=before, summary=topic_link_summary) == []
    got = check_cross_topic_links_incremental(after, committed=before, summary=topic_link_summary)
    assert got == check_cross_topic_links(assemble_tree([other, linking]), committed=before) != []
    # and back: the id is there again, so is nothing to report
    assert check_cross_topic_links_incremental(reassemble_tree(after, [linked, linking]), committed=after,
                                               summary=topic_link_summary) == []


# few ids: one moves away and back (its location leaves the delta again) while a file links to it
MOVES = st.lists(st.tuples(st.sampled_from(range(4)), st.sampled_from(PATHS),
                           st.one_of(st.none(), st.tuples(st.sampled_from(PATHS), st.sampled_from(range(4))))),
                 min_size=1, max_size=12)


@settings(max_examples=400, deadline=None)
@given(moves=MOVES, limit=st.sampled_from([0, 3, 4096]))
@example(moves=[(1, "sub/c.md", ("a.md", 0)), (0, "b.md", None), (0, "a.md", None)], limit=4096)  # there and back
def test_block_link_rewrite_kept_from_the_last_call_equals_full(moves, limit, tmp_path_factory):
    """Ids move between files (never in two at once) while the files linking to them stay the
    very same text objects: the rewrite kept from the last call (only changed files and those
    linking to a moved id asked again) is the rewrite of every file."""
    saved, linkcache.LOCATIONS_DELTA_MAX = linkcache.LOCATIONS_DELTA_MAX, limit
    try:
        cache = txcache.WorkspaceCache(tmp_path_factory.mktemp("ws"))
        home = {i: PATHS[i % len(PATHS)] for i in range(4)}  # id -> the file holding it
        links: dict[str, tuple[str, int] | None] = {p: None for p in PATHS}  # a file's one block link
        made: dict[tuple, str] = {}
        blocklinks._REWRITTEN[0] = None
        for i, path, link in moves:
            home[i] = path  # the id moves (both files change)
            links[path] = link  # and the file it moves to links somewhere
            texts = {}
            for p in PATHS:
                spec = (p, tuple(sorted(i for i in home if home[i] == p)), links[p])
                if spec not in made:
                    own = [IDS[i] for i in spec[1]]
                    tail = "" if spec[2] is None else f", see [that]({spec[2][0]}#^{IDS[spec[2][1]]})"
                    made[spec] = f"# {p}\n\n" + "\n".join(
                        f"Fact {n}{tail if n == 0 else ''}.[^e-{n:010x}] ^{mid}\n\n"
                        f"[^e-{n:010x}]: Time: `2026`; Sources: [x](D1:{n})\n" for n, mid in enumerate(own))
                texts[p] = made[spec]
            where = cache.block_locations(texts, switches=current_switches())
            assert rewrite_block_links(texts, locations=where, mode="check") == rewrite_block_links(texts)
    finally:
        linkcache.LOCATIONS_DELTA_MAX = saved


# ``WorkspaceCache.tree`` looks again only at the positions whose text is another object, whose
# topic had problems, or whose handed-out parse was set since its last call; what happens in
# between is any mix of these steps.
CACHE_STEPS = st.lists(st.one_of(
    st.tuples(st.just("text"), st.sampled_from(PATHS), TOPIC),  # new bytes at a path (added if absent)
    st.tuples(st.just("copy"), st.sampled_from(PATHS)),  # the same bytes, another object
    st.tuples(st.just("broken"), st.sampled_from(PATHS)),  # a topic with problems
    st.tuples(st.just("drop"), st.sampled_from(PATHS)),
    st.tuples(st.just("reorder"), st.booleans()),  # the same paths given in another order
    st.tuples(st.just("entry"), st.sampled_from(PATHS), TOPIC),  # another parse handed out at a path
    st.tuples(st.just("retain"), st.booleans()),  # the handed-out map replaced (some paths dropped)
    st.tuples(st.just("replace_map"), st.booleans()),  # replaced by a copy, as a test's reference filter does
    st.tuples(st.just("token"), st.booleans()),  # the archives moved on (the one cited came or went, or not)
    st.tuples(st.just("again"), st.booleans()),  # the same dict once more
), min_size=1, max_size=14)


@settings(max_examples=200, deadline=None)
@given(first=TREE, steps=CACHE_STEPS)
def test_cache_tree_is_what_every_entry_gives(first, steps, tmp_path_factory):
    from memory_tui.core.format.sources import SourceIndex, index_file

    root = tmp_path_factory.mktemp("ws")
    # every record cites D1: an index with that archive changes every topic's signature
    indexes = (SourceIndex.from_files(root, {}),
               SourceIndex.from_files(root, {"sources/D1.md": index_file("sources/D1.md", b"# D1\n")}))
    index = indexes[0]
    cache = txcache.WorkspaceCache(root)
    token = object()
    texts = _texts(first)
    n = 0
    for step in [("again", True), *steps]:
        kind = step[0]
        if kind == "text":
            texts[step[1]] = _texts({step[1]: step[2]})[step[1]]
            if n % 2:
                texts[step[1]] += f"\nMore {n}.[^e-{n:010x}]\n\n[^e-{n:010x}]: Time: `2026`; Sources: [x](D9:{n})\n"
        elif kind == "copy" and step[1] in texts:
            texts[step[1]] = "".join(list(texts[step[1]]))
        elif kind == "broken":
            texts[step[1]] = f"# Broken\n\nA claim without a source {n}.\n"
        elif kind == "drop" and len(texts) > 1:
            texts.pop(step[1], None)
        elif kind == "reorder":
            texts = dict(sorted(texts.items(), reverse=step[1]))
        elif kind == "entry":
            cache.entry(step[1], _texts({step[1]: step[2]})[step[1]] + "\nAnother.\n", index, token)
        elif kind == "retain":
            cache.retain({rel: text for i, (rel, text) in enumerate(texts.items()) if step[1] or i % 2})
        elif kind == "replace_map":
            cache.trees.topic_keys = dict(cache.trees.topic_keys)
        elif kind == "token":
            index, token = indexes[step[1]], object()
        n += 1
        tree = cache.tree(texts, index, token, switches=current_switches())
        order = sorted(texts, key=topic_sort_key)
        assert [t.path for t in tree.topics] == order
        for rel, topic in zip(order, tree.topics):
            assert topic.text == texts[rel]
            # what ``entry`` hands out for these bytes now (looked up without handing it out)
            want = cache.trees._parse_entry(rel, texts[rel], index, token, sha(texts[rel])).topic
            assert topic is want or (not topic.ok and topic == want)
            if topic.ok:
                assert cache.trees.topic_keys[rel][0] is topic  # and it is the one handed out
        assert same_tree(tree, assemble_tree(list(tree.topics)))


REFS_STEPS = st.lists(st.tuples(
    st.sampled_from(["cite", "same", "add", "drop", "index"]),  # what changes before the call
    st.integers(0, 9),
    st.sets(st.sampled_from(PATHS)),  # the paths excluded from this call
), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(steps=REFS_STEPS)
def test_refs_unfine_is_every_topic_asked(steps, tmp_path_factory):
    from memory_tui.core.format.sources import MARKER, SourceIndex, SourceRecord, archive_path, render_frame

    root = tmp_path_factory.mktemp("refs")

    def archive(thread: str, count: int) -> None:
        path = root / archive_path(f"openprogram/{thread}/m0")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{MARKER}\n\n" + "\n".join(
            render_frame(SourceRecord("openprogram", thread, f"m{i}", i, "user", f"Said {i}.")) for i in range(count)))

    archive("th", 4)
    indexes = [SourceIndex.load(root)]
    archive("th", 8)  # m4..m7 exist only in the second index
    indexes.append(SourceIndex.load(root))
    cache = txcache.WorkspaceCache(root)
    index = indexes[0]
    token = cache.observe_index(index)

    def topic(path: str, cited: int):
        # m0-m3 are in both indexes, m4-m7 in the second, m8, m9 and D1 in neither (a parse
        # without problems all the same: only the ref check finds them missing)
        ref = f"openprogram/th/m{cited}" if cited < 9 else "D1:9"
        text = (f"# {path}\n\nSaid {cited}.[^e-{cited:010x}] ^{IDS[cited % len(IDS)]}\n\n"
                f"[^e-{cited:010x}]: Time: `2026`; Sources: [x]({ref})\n")
        return cache.entry(path, text, index, token).topic

    cites = {path: n for n, path in enumerate(PATHS)}
    for kind, n, exclude in [("same", 0, set()), *steps]:
        path = PATHS[n % len(PATHS)]
        if kind == "cite":  # another parse at a path: its ref found in one index, both or neither
            cites[path] = n
        elif kind == "add":
            cites.setdefault(path, n)
        elif kind == "drop" and len(cites) > 1:
            cites.pop(path, None)
        elif kind == "index":  # a new token exactly when an archive entry changed
            before, index = index, indexes[n % 2]
            token, was = cache.observe_index(index), token
            assert (token is was) == (index is before)
            assert cache.observe_index(SourceIndex.from_files(root, index.files)) is token
        topics = tuple(topic(p, cites[p]) for p in sorted(cites, key=topic_sort_key))
        assert all(t.ok for t in topics)
        want = {t.path for t in topics if t.path not in exclude and not cache.refs_ok(t, index)}
        assert cache.refs_unfine(topics, exclude, index) == want
