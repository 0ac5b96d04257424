"""The post-install revision hashed ahead (``WorkspaceCache.start_revision``: the new bytes of
the files an install will write, the rest of the stream from the chain's memory or from disk)
equals ``workspace_revision`` (memory spec §2.6) of the workspace once those files are
written -- with tiny memory, checkpoint and run limits so that held bytes, checkpoints, the
cap and the joining of buffers are all exercised; with a writer that does not take the lock
changing another file while the hash runs; and after a job is cancelled (a transaction that
failed) the chain still gives the right revision."""

from __future__ import annotations

import contextlib
import os
import time

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_tui.core.store import revstream, txmode
from memory_tui.core.store.parsecache import RACY_NS
from memory_tui.core.store.txcache import WorkspaceCache
from memory_tui.core.store.walk import revision_walk
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.switches import current as current_switches

NAMES = ["core.md", "relations.json", "sources/a/_v2/x.md", "timeline/2026/01.md", "timeline/2026/02.md",
         "topics/a.md", "topics/a/b.md", "topics/a-b.md", "topics/z.md", "topics.md", ".scriptorium/runtime.json",
         ".scriptorium/write.lock"]

CHANGE = st.tuples(st.sampled_from(NAMES), st.one_of(st.none(), st.binary(max_size=30)))
TX = st.tuples(st.lists(CHANGE, min_size=1, max_size=4),
               st.sampled_from(["plain", "plain", "foreign", "cancel", "age"]),
               st.sampled_from(NAMES))
LIMITS = st.tuples(st.sampled_from([0, 40, 120, 1 << 30]),  # TAIL_BYTES
                   st.sampled_from([1, 25, 1 << 30]),  # CHECKPOINT_BYTES
                   st.sampled_from([1, 2, 16]))  # MAX_RUNS


def _write(path, data: bytes) -> None:
    """As an install does: a new file renamed over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.lists(CHANGE, min_size=2, max_size=8), txs=st.lists(TX, min_size=1, max_size=6), limits=LIMITS,
       one_shot=st.booleans())
@example(seed=[("timeline/2026/01.md", b"t1"), ("topics/a.md", b"a"), ("topics/z.md", b"z")],
         txs=[([("timeline/2026/01.md", b"t2"), ("topics/a.md", b"a2")], "plain", "core.md"),
              ([("timeline/2026/01.md", b"t3"), ("topics/a.md", b"a3")], "plain", "core.md"),
              ([("topics/z.md", b"z2")], "foreign", "topics/a-b.md")],
         limits=(1 << 30, 1 << 30, 16), one_shot=False)
def test_revision_hashed_ahead_equals_the_full_stream(tmp_path_factory, monkeypatch, seed, txs, limits, one_shot):
    """``one_shot``: the jobs hold no bytes for the next feed (the CLI's one transaction)."""
    with txmode.one_shot() if one_shot else contextlib.nullcontext():
        _transactions(tmp_path_factory, monkeypatch, seed, txs, limits)


def _transactions(tmp_path_factory, monkeypatch, seed, txs, limits) -> None:
    tail, checkpoint, runs = limits
    monkeypatch.setattr(revstream, "TAIL_BYTES", tail)
    monkeypatch.setattr(revstream, "CHECKPOINT_BYTES", checkpoint)
    monkeypatch.setattr(revstream, "MAX_RUNS", runs)
    root, cache = _seeded(tmp_path_factory, "job", seed)
    for step, (changes, how, other) in enumerate(txs):
        planned = {name: None if data is None else data + f" {step}".encode() for name, data in changes}
        planned = {name: data for name, data in planned.items() if data is not None or (root / name).exists()}
        before = revision_walk(root, switches=current_switches())[0]
        job = cache.start_revision(before, planned, switches=current_switches())
        if how == "foreign" and other not in planned:  # a writer that takes no lock, mid-hash
            with open(root / other, "ab") if (root / other).exists() else open(_mk(root / other), "wb") as fh:
                fh.write(b" foreign %d" % step)
        if how == "cancel":  # the install failed: nothing written, the chain as it was
            job.cancel()
            assert cache.revision(revision_walk(root, switches=current_switches())[0], switches=current_switches()) == workspace_revision(root)
            continue
        for name, data in planned.items():
            if data is None:
                (root / name).unlink()
            else:
                _write(root / name, data)
        assert job.result(revision_walk(root, switches=current_switches())[0]) == workspace_revision(root), (step, how, sorted(planned))
        if how == "age":  # stamps older than the clock tick: their bytes come from memory next time
            time.sleep(RACY_NS / 1e9 + 0.01)
        assert cache.revision(revision_walk(root, switches=current_switches())[0], switches=current_switches()) == workspace_revision(root), step


def _seeded(tmp_path_factory, name: str, seed) -> tuple:
    """A memory root holding ``seed``'s files, and a cache whose chain has hashed them."""
    root = tmp_path_factory.mktemp(name) / "memory"
    root.mkdir()
    for rel, data in seed:
        if data is not None:
            _write(root / rel, data)
    cache = WorkspaceCache(root)
    assert cache.revision(revision_walk(root, switches=current_switches())[0], switches=current_switches()) == workspace_revision(root)
    return root, cache


def _mk(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
