"""A cold load leaves its objects to the oldest collector generation, and never undoes the
freeze of a process that held its heap (``fastdata.hold_heap``, the app after its first load)."""

from __future__ import annotations

import gc

import pytest
from parsecache_helpers import mem  # noqa: F401  (a fixture)

from memory_tui.core.format import fastdata

from memory_tui.core.store import parsecache


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation))


@pytest.mark.parametrize("persist", [False, True])
def test_a_cold_load_puts_its_objects_in_the_oldest_generation(mem, persist):
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")
    # An app run earlier in this test process held its heap after its first load, and a
    # load never touches that freeze (the next test): let those objects go first.
    fastdata.release_heap()
    _index, tree = parsecache.load_tree(mem, persist=persist)
    unit = tree.units[0]
    assert gc.is_tracked(unit)
    # the youngest generations would walk it (twice) before promoting it
    assert _in_generation(unit, 2)
    assert not _in_generation(unit, 0) and not _in_generation(unit, 1)


def test_a_held_heap_is_kept_and_never_counted(mem, monkeypatch):
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")
    kept = [object(), {}]  # tracked objects held before the load
    fastdata.hold_heap()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        # counting the frozen set walks all of it: an app holding millions of objects paid
        # that on every parse (and the test suite's workers, once an app test had run, on
        # every hypothesis example that parsed: 75 s for a 1 s property)
        real = gc.get_freeze_count

        def walked() -> int:
            raise AssertionError("a load walked the frozen set")
        monkeypatch.setattr(gc, "get_freeze_count", walked)
        _index, tree = parsecache.load_tree(mem, persist=True)
        monkeypatch.setattr(gc, "get_freeze_count", real)
        assert gc.get_freeze_count() >= frozen  # an unfreeze would have let them all go back
        assert len(tree.units) > 0
    finally:
        fastdata.release_heap()
    del kept


def test_frames_built_after_a_cold_load_go_to_the_oldest_generation(mem):
    """A cold load builds an archive's frames when first asked for: that build, too, leaves
    them to the oldest generation (it is ~10^4 objects per archive at scale)."""
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")
    fastdata.release_heap()
    index, _tree = parsecache.load_tree(mem)
    entry = next(e for e in index.files.values() if e.kind == "v2" and "_build" in vars(e))
    frame = entry.frames[0]
    assert gc.is_tracked(frame) and _in_generation(frame, 2)
    assert not _in_generation(frame, 0) and not _in_generation(frame, 1)
