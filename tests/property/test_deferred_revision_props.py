"""The revision an install leaves for its first reader (``WorkspaceCache.defer_revision``,
``PendingRevision``) is exactly ``workspace_revision`` (memory spec §2.6) of the workspace as
the install left it -- read at once, after later installs that built on it, after a writer
that takes no lock changed files, or never -- and ``holds`` proves "the files are still those
bytes" only when they are: a changed stamp, or a young file rewritten in place under a stamp
that did not move, is "not proven". With tiny memory and checkpoint limits the held bytes,
the over-budget fallback and the stale hash states of a chain built on a pending one are all
exercised."""

from __future__ import annotations

import time

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_tui.core.store import revstream
from memory_tui.core.store.parsecache import RACY_NS
from memory_tui.core.store.revision import PendingRevision, revision_text
from memory_tui.core.store.txcache import WorkspaceCache
from memory_tui.core.store.walk import installed_stamps, revision_walk
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.switches import current as current_switches
from tests.property.test_revision_job_props import _mk, _seeded, _write

NAMES = ["core.md", "relations.json", "sources/a/_v2/x.md", "timeline/2026/01.md", "timeline/2026/02.md",
         "topics/a.md", "topics/a/b.md", "topics/a-b.md", "topics/z.md", "topics.md", ".scriptorium/runtime.json"]

CHANGE = st.tuples(st.sampled_from(NAMES), st.one_of(st.none(), st.binary(max_size=30)))
# how each install's revision is read: at once, after the next install, at the very end, never
READ = st.sampled_from(["now", "next", "end", "never"])
# what happens after the install: nothing, a writer without the lock, the clock tick passing
AFTER = st.sampled_from(["plain", "plain", "foreign", "age"])
# a reader of the workspace after the install (hashes a pending revision that still holds, so
# the next install builds on a hashed chain; without one it builds on the pending one)
TX = st.tuples(st.lists(CHANGE, min_size=1, max_size=4), READ, AFTER, st.sampled_from(NAMES), st.booleans())
LIMITS = st.tuples(st.sampled_from([0, 40, 120, 1 << 30]),  # TAIL_BYTES
                   st.sampled_from([1, 25, 1 << 30]))  # CHECKPOINT_BYTES


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.lists(CHANGE, min_size=2, max_size=8), txs=st.lists(TX, min_size=1, max_size=7), limits=LIMITS)
@example(seed=[("timeline/2026/01.md", b"t1"), ("topics/a.md", b"a"), ("topics/z.md", b"z")],
         txs=[([("timeline/2026/01.md", b"t2"), ("topics/a.md", b"a2")], "never", "plain", "core.md", False),
              ([("timeline/2026/01.md", b"t3"), ("topics/a.md", b"a3")], "end", "plain", "core.md", False),
              ([("topics/z.md", b"z2")], "next", "foreign", "topics/a-b.md", False),
              ([("topics/a.md", b"a4")], "now", "age", "core.md", True)],
         limits=(1 << 30, 1 << 30))
@example(seed=[("timeline/2026/01.md", b"t1"), ("topics/a.md", b"a"), ("topics/z.md", b"z")],
         # the first install holds topics/z.md's bytes; a writer without the lock then changes it
         txs=[([("timeline/2026/01.md", b"t2")], "end", "foreign", "topics/z.md", False),
              ([("topics/a.md", b"a2")], "now", "plain", "core.md", False)],
         limits=(1 << 30, 1 << 30))
def test_a_deferred_revision_is_the_revision_the_install_left(tmp_path_factory, monkeypatch, seed, txs, limits):
    tail, checkpoint = limits
    monkeypatch.setattr(revstream, "TAIL_BYTES", tail)
    monkeypatch.setattr(revstream, "CHECKPOINT_BYTES", checkpoint)
    root, cache = _seeded(tmp_path_factory, "deferred", seed)
    waiting: list[tuple] = []  # (pending, the revision it must give, when to read it)
    for step, (changes, read, after, other, reader) in enumerate(txs):
        puts = {name: data + f" {step}".encode() for name, data in changes if data is not None}
        gone = list(dict.fromkeys(name for name, data in changes
                                  if data is None and name not in puts and (root / name).exists()))
        before = revision_walk(root, switches=current_switches())[0]
        for name, data in puts.items():  # the install
            _write(root / name, data)
        for name in gone:
            (root / name).unlink()
        stamps = installed_stamps(root, before, [("file", n) for n in [*puts, *gone]])
        assert stamps == revision_walk(root, switches=current_switches())[0]
        truth = workspace_revision(root)
        got = cache.defer_revision(stamps, puts, switches=current_switches())
        if got is None:  # more than the memory limit: the caller hashes now
            assert tail < 1 << 30, "only a memory limit may refuse"
            got = cache.revision(stamps, installed=True, switches=current_switches())
        if isinstance(got, PendingRevision):
            assert got.holds(stamps)
            assert cache.holds_revision(stamps, got)
        else:
            assert got == truth
        for pending, value, when in [w for w in waiting if w[2] == "next"]:
            assert pending.value() == value, ("read after a later install", step)
        waiting = [w for w in waiting if w[2] != "next"]
        if read == "now":
            assert revision_text(got) == truth, step
        elif isinstance(got, PendingRevision):
            waiting.append((got, truth, read))
        if after == "foreign" and other not in puts:  # a writer that takes no lock
            with open(root / other, "ab") if (root / other).exists() else open(_mk(root / other), "wb") as fh:
                fh.write(b" foreign %d" % step)
            if isinstance(got, PendingRevision):
                assert not got.holds(revision_walk(root, switches=current_switches())[0])
        if after == "age":  # stamps older than the clock tick: their bytes come from memory next time
            time.sleep(RACY_NS / 1e9 + 0.01)
        if reader:  # of the workspace as it is now: the pending value is used only when it holds
            assert cache.revision(revision_walk(root, switches=current_switches())[0], switches=current_switches()) == workspace_revision(root), step
    for pending, value, _when in waiting:
        assert pending.value() == value, "read at the end"


def test_a_young_file_rewritten_in_place_under_the_same_stamp_is_not_proven(tmp_path):
    """A same-size write inside the clock tick can leave a file's stamp as it was: the walk
    would list these very stamps, and only the bytes tell."""
    root = tmp_path / "memory"
    for name, data in (("timeline/2026/01.md", b"t1"), ("topics/a.md", b"aaaa"), ("topics/z.md", b"z")):
        _write(root / name, data)
    cache = WorkspaceCache(root)
    cache.revision(revision_walk(root, switches=current_switches())[0], switches=current_switches())
    before = revision_walk(root, switches=current_switches())[0]
    _write(root / "topics/a.md", b"bbbb")
    stamps = installed_stamps(root, before, [("file", "topics/a.md")])
    pending = cache.defer_revision(stamps, {"topics/a.md": b"bbbb"}, switches=current_switches())
    assert isinstance(pending, PendingRevision)
    truth = workspace_revision(root)
    assert pending.holds(stamps)
    (root / "topics/a.md").write_bytes(b"cccc")  # in place, same size
    assert not pending.holds(stamps)  # the stamps as the install left them, the bytes not
    assert not cache.holds_revision(stamps, pending)
    assert pending.value() == truth  # still the revision the install left, from memory


def test_nothing_is_hashed_until_the_value_is_read(tmp_path, monkeypatch):
    root = tmp_path / "memory"
    for name, data in (("timeline/2026/01.md", b"t1"), ("topics/a.md", b"a"), ("topics/z.md", b"z")):
        _write(root / name, data)
    cache = WorkspaceCache(root)
    cache.revision(revision_walk(root, switches=current_switches())[0], switches=current_switches())
    fed: list = []
    real = revstream.feed_planned
    monkeypatch.setattr(revstream, "feed_planned", lambda *a, **k: fed.append(1) or real(*a, **k))
    for text in (b"a2", b"a3"):
        before = revision_walk(root, switches=current_switches())[0]
        _write(root / "topics/a.md", text)
        stamps = installed_stamps(root, before, [("file", "topics/a.md")])
        pending = cache.defer_revision(stamps, {"topics/a.md": text}, switches=current_switches())
        assert isinstance(pending, PendingRevision) and not pending.hashed
    assert fed == []
    assert pending.value() == workspace_revision(root)
    assert fed == [1]
