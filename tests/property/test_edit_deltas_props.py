"""The per-edit structures a transaction keeps as deltas instead of rebuilding them equal what
the rebuild gives: the block-id locations laid over a shared map (``linkcache.Locations``), the
cache's ``retain`` by C-level passes (against ``_retain_full`` here, the per-entry filter) and its
lazy form (against a retain after every edit), and the
proofs kept on disk as a file plus an append-only log (against the proofs the process held,
through crashes that cut the log short or leave garbage in it)."""

from __future__ import annotations

import hashlib
import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_tui.core.cache import envelope
from memory_tui.core.store import linkcache, txcache
from memory_tui.core.store import proofs as proofs_mod
from memory_tui.core.store.committed import sha
from memory_tui.core.format.paths import Layout

KEYS = tuple(f"id{n}" for n in range(10))
RELS = ("a.md", "b.md", "c.md", "sub/d.md")


# the cache's per-path and per-text dicts, by name: (the part holding it, its attribute)
PARTS = {
    "parsed": ("trees", "parsed"), "proofs": ("canonical", "proofs"), "ids": ("links.file_ids", "entries"),
    "topic_keys": ("trees", "topic_keys"), "lineids": ("memo.line_end_ids", "entries"),
    "labels": ("memo.has_local_label", "entries"), "rewrites": ("links", "rewrites"),
    "rewrites_fast": ("links", "rewrites_fast"), "kept": ("values", "entries"), "proven_now": ("canonical", "proven_now"),
}


def _part(cache, name):
    owner = cache
    for attr in PARTS[name][0].split("."):
        owner = getattr(owner, attr)
    return owner


def _get(cache, name) -> dict:
    return getattr(_part(cache, name), PARTS[name][1])


def _set(cache, name, value: dict) -> None:
    setattr(_part(cache, name), PARTS[name][1], value)


def _retain_full(cache, live, extra=()) -> None:
    """What ``WorkspaceCache.retain`` does, one entry at a time (the reference)."""
    keep = {(rel, cache.committed.sha_of(rel, text)) for rel, text in live.items()} | set(extra)
    for name in ("parsed", "proofs"):
        _set(cache, name, {k: v for k, v in _get(cache, name).items() if k in keep})
    for name in ("ids", "topic_keys", "lineids", "labels", "rewrites", "rewrites_fast"):
        _set(cache, name, {k: v for k, v in _get(cache, name).items() if k in live})
    _set(cache, "kept", {k: v for k, v in _get(cache, "kept").items() if k[1] in live})
    _set(cache, "proven_now", {k: v for k, v in _get(cache, "proven_now").items() if live.get(k) is v[0]})


@settings(max_examples=60, deadline=None)
@given(first=st.dictionaries(st.sampled_from(KEYS), st.sampled_from(RELS)),
       steps=st.lists(st.tuples(st.sets(st.sampled_from(KEYS)), st.dictionaries(st.sampled_from(KEYS), st.sampled_from(RELS))),
                      max_size=8),
       limit=st.sampled_from([0, 2, 4096]))
def test_locations_overlay_is_the_dict_it_stands_for(first, steps, limit):
    saved, linkcache.LOCATIONS_DELTA_MAX = linkcache.LOCATIONS_DELTA_MAX, limit
    try:
        ref = dict(first)
        where = dict(first)
        for gone, arriving in steps:
            gone = {key for key in gone if key in ref and key not in arriving}
            where = linkcache.Locations.moved(where, gone, arriving)
            for key in gone:
                del ref[key]
            ref.update(arriving)
            assert len(where) == len(ref)
            assert sorted(where) == sorted(ref)
            assert dict(where.items()) == ref and where == ref
            for key in KEYS:
                assert (key in where) == (key in ref)
                assert where.get(key) == ref.get(key) and where.get(key, 0) == ref.get(key, 0)
                if key in ref:
                    assert where[key] == ref[key]
                else:
                    try:
                        where[key]
                    except KeyError:
                        pass
                    else:
                        raise AssertionError(f"{key} found in the overlay, not in the dict")
            if isinstance(where, linkcache.Locations):
                assert len(where.delta) <= limit
                assert not isinstance(where.base, linkcache.Locations)
    finally:
        linkcache.LOCATIONS_DELTA_MAX = saved


TEXTS = st.sampled_from(["x", "y", "z", "x\n"])
ENTRY_RELS = st.sampled_from(RELS + ("e.md",))


@settings(max_examples=60, deadline=None)
@given(rounds=st.lists(st.tuples(
    st.one_of(st.dictionaries(ENTRY_RELS, TEXTS, min_size=0, max_size=5),  # the live texts
              st.lists(TEXTS, min_size=5, max_size=5)),  # the last round's paths, in order, with these texts
    st.lists(st.tuples(st.sampled_from([*PARTS, "files"]), ENTRY_RELS, TEXTS), max_size=8),
    st.booleans(),  # the same text objects as the last round where the text is equal
    st.booleans(),  # an extra key kept
), min_size=1, max_size=6))
def test_retain_equals_the_per_entry_filter(rounds, tmp_path_factory):
    root = tmp_path_factory.mktemp("retain")
    fast, slow = txcache.WorkspaceCache(root), txcache.WorkspaceCache(root)
    objects: dict[str, str] = {}
    last: dict[str, str] = {}
    for live_spec, adds, reuse, extra in rounds:
        if isinstance(live_spec, list):
            live_spec = dict(zip(last, live_spec))
        live = {}
        for rel, text in live_spec.items():
            if reuse and last.get(rel) == text:
                live[rel] = last[rel]  # the very object
            else:
                live[rel] = "".join(list(text))  # an equal text, another object (most of the time)
                objects[rel] = live[rel]
        for cache in (fast, slow):
            for kind, rel, text in adds:
                if rel in live and text == "z":
                    text = live[rel]  # an entry for a live text (most of the others are for dead ones)
                digest = sha(text)
                value = live.get(rel, text)
                if kind in ("parsed", "proofs"):
                    _get(cache, kind)[(rel, digest)] = kind
                elif kind == "kept":
                    _get(cache, kind)[("kind", rel)] = (text, 1)
                elif kind == "proven_now":
                    _get(cache, kind)[rel] = (value, None)
                elif kind == "files":
                    cache.committed.files[rel] = ((0, 0, 0, 0), value, sha(value))
                else:
                    _get(cache, kind)[rel] = (text, ())
        keep = [(RELS[0], sha("x"))] if extra else []
        fast.retain(live, keep)
        _retain_full(slow, live, keep)
        for name in PARTS:
            got, want = _get(fast, name), _get(slow, name)
            assert list(got.items()) == list(want.items()), name  # the same entries in the same order
        last = live


SIG = "sig"


def _digest(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(
    st.lists(st.tuples(st.sampled_from(RELS), st.integers(0, 5), st.sampled_from(["s1", "s2"])), max_size=4),  # proofs made
    st.sampled_from(["save", "save", "restart", "cut", "garbage", "foreign"]),
    st.integers(0, 400),
), min_size=1, max_size=8), log_min=st.sampled_from([0, 200, 1 << 20]))
def test_proofs_on_disk_are_the_ones_made(steps, log_min, tmp_path_factory):
    """What a process loads is every proof the processes before it held at their last save
    (unless a crash cut the log: then a subset), and only proofs some process made, whatever
    a crash left at the end of the log."""
    root = tmp_path_factory.mktemp("proofs")
    layout = Layout(root)
    layout.runtime_dir.mkdir()
    log = layout.runtime_dir / proofs_mod.LOG_NAME
    saved, proofs_mod.LOG_MIN_BYTES = proofs_mod.LOG_MIN_BYTES, log_min
    try:
        cache = txcache.WorkspaceCache(root)
        cache.load_disk(layout)
        made: set[tuple[tuple[str, str], str]] = set()  # every proof any process made
        sure: dict[tuple[str, str], str] = {}  # saved since the last damage: must be loaded
        for proofs, event, where in steps:
            for rel, n, sig in proofs:
                key = (rel, _digest(n))
                cache.canonical.proofs[key] = sig  # as ``prove`` records one
                cache.canonical._unsaved[key] = sig
                made.add((key, sig))
            if event == "save":
                sure.update(cache.canonical._unsaved)
                cache.save_disk(layout)
            elif event in ("cut", "garbage", "foreign") and log.exists():
                data = log.read_bytes()
                if event == "cut":
                    data = data[:where % (len(data) + 1)]  # a crash mid-append (or mid-replace)
                elif event == "garbage":
                    data += b"\0" * (where % 7) + b'["a.md","' + b"0" * (where % 70)  # what a torn write may leave
                else:
                    data = (envelope.pack(proofs_mod.LOG_KIND, "other", proofs_mod.CACHE_VERSION, stable=True)
                            + _line("a.md", _digest(0), "forged"))
                log.write_bytes(data)
                sure = {}  # a crash may lose proofs (it only costs speed), never invent one
            else:  # a new process
                cache = txcache.WorkspaceCache(root)
                cache.load_disk(layout)
                loaded = set(cache.canonical.proofs.items())
                assert loaded <= made, "a proof nobody made was loaded"
                assert set(sure.items()) <= loaded, "a saved proof was lost"
        fresh = txcache.WorkspaceCache(root)
        fresh.load_disk(layout)
        assert set(fresh.canonical.proofs.items()) <= made
        base = envelope.read(layout.runtime_dir / proofs_mod.CACHE_NAME, proofs_mod.KIND, proofs_mod.CACHE_VERSION)
        if (layout.runtime_dir / proofs_mod.CACHE_NAME).exists():
            assert base[0] == proofs_mod.code_tag()
    finally:
        proofs_mod.LOG_MIN_BYTES = saved


def _line(rel: str, digest: str, sig: str) -> bytes:
    return envelope.pack(proofs_mod.LOG_KIND, (rel, digest, sig), proofs_mod.CACHE_VERSION, stable=True)


def test_old_proofs_file_without_log_is_read_and_a_log_started(tmp_path):
    layout = Layout(tmp_path)
    layout.runtime_dir.mkdir()
    old = (proofs_mod.code_tag(), {"a.md": {_digest(1): "s"}})
    (layout.runtime_dir / proofs_mod.CACHE_NAME).write_bytes(envelope.pack(proofs_mod.KIND, old, proofs_mod.CACHE_VERSION))
    cache = txcache.WorkspaceCache(tmp_path)
    cache.load_disk(layout)
    assert cache.canonical.proofs == {("a.md", _digest(1)): "s"}
    cache.canonical.proofs[("b.md", _digest(2))] = cache.canonical._unsaved[("b.md", _digest(2))] = "t"
    cache.save_disk(layout)  # no log yet: the file is rewritten whole, and an empty log started
    body = envelope.read(layout.runtime_dir / proofs_mod.CACHE_NAME, proofs_mod.KIND, proofs_mod.CACHE_VERSION)
    assert body[1] == {"a.md": {_digest(1): "s"}, "b.md": {_digest(2): "t"}}
    assert proofs_mod.read_proof_log(layout.runtime_dir / proofs_mod.LOG_NAME) == {}
    cache.canonical.proofs[("c.md", _digest(3))] = cache.canonical._unsaved[("c.md", _digest(3))] = "u"
    cache.save_disk(layout)  # now only appended
    assert proofs_mod.read_proof_log(layout.runtime_dir / proofs_mod.LOG_NAME) == {("c.md", _digest(3)): "u"}
    again = txcache.WorkspaceCache(tmp_path)
    again.load_disk(layout)
    assert again.canonical.proofs == cache.canonical.proofs


def test_log_is_not_written_through_a_symlink(tmp_path):
    layout = Layout(tmp_path)
    layout.runtime_dir.mkdir()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    os.symlink(target, layout.runtime_dir / proofs_mod.LOG_NAME)
    assert proofs_mod.append_proof_log(layout.runtime_dir / proofs_mod.LOG_NAME, [(("a.md", _digest(1)), "s")]) is None \
        or target.read_bytes() == b""
    assert target.read_bytes() == b""


def test_a_line_cut_short_costs_only_itself(tmp_path):
    layout = Layout(tmp_path)
    layout.runtime_dir.mkdir()
    log = layout.runtime_dir / proofs_mod.LOG_NAME
    cache = txcache.WorkspaceCache(tmp_path)
    cache.canonical.proofs[("a.md", _digest(1))] = cache.canonical._unsaved[("a.md", _digest(1))] = "s"
    cache.save_disk(layout)  # starts the log
    for n, rel in enumerate(("b.md", "c.md"), start=2):
        cache.canonical.proofs[(rel, _digest(n))] = cache.canonical._unsaved[(rel, _digest(n))] = "s"
        cache.save_disk(layout)
    data = log.read_bytes()
    log.write_bytes(data[:-9])  # a crash in the middle of the last append
    cache.canonical.proofs[("d.md", _digest(4))] = cache.canonical._unsaved[("d.md", _digest(4))] = "s"
    cache.save_disk(layout)
    again = txcache.WorkspaceCache(tmp_path)
    again.load_disk(layout)
    assert set(again.canonical.proofs) == {("a.md", _digest(1)), ("b.md", _digest(2)), ("d.md", _digest(4))}


def test_lazy_retain_bounds_the_caches_and_answers_as_an_exact_retain(tmp_path, monkeypatch):
    """``retain_lazily`` lets at most ``RETAIN_SLACK`` dead entries stay between prunes, and a
    run of edits answers exactly as with a full ``retain`` after every one (every cache checks
    the text it was made from, so a dead entry is never handed out)."""
    from memory_tui.core.tx import api as tx
    from memory_tui.demo import build_demo

    monkeypatch.setattr(txcache, "RETAIN_SLACK", 6)
    rel = "topics/conversations/kyoto-trip-in-spring.md"
    answers = {}
    for how in ("lazy", "exact"):
        txcache.clear_caches()
        if how == "exact":
            monkeypatch.setattr(txcache.WorkspaceCache, "retain_lazily", lambda self, live, switches: self.retain(live))
        state = build_demo(tmp_path / how, now=1796000000.0)
        path = state / "memory" / rel
        base = path.read_text()
        words = [w for w in base.split() if w.isalpha() and len(w) > 4][:12]
        assert len(words) >= 6
        cache = txcache.cache_for(state / "memory")
        seen, sizes, pruned = [], [], False
        for i, word in enumerate(words * 2):
            text = path.read_text().replace(word, word.upper(), 1) if i % 3 else base
            r = tx.staged_edit(state, rel, text, git_commit="off")
            seen.append((r.ok, r.code, r.changed_files, path.read_bytes()))
            before = cache._cached_entries()
            sizes.append(before)
            if how == "lazy":
                assert before <= cache._retained_size + txcache.RETAIN_SLACK + 4  # one edit adds a few
                pruned = pruned or before < max(sizes)
        if how == "lazy":
            assert pruned  # the slack was reached and the caches pruned back
        answers[how] = seen
    assert answers["lazy"] == answers["exact"]
