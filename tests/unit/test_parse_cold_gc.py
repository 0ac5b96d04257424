"""A cold load leaves its objects to the oldest collector generation, and never undoes a
freeze the process made itself."""

from __future__ import annotations

import gc

import pytest
from parsecache_helpers import mem  # noqa: F401  (a fixture)

from memory_tui.core import parsecache


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation))


@pytest.mark.parametrize("persist", [False, True])
def test_a_cold_load_puts_its_objects_in_the_oldest_generation(mem, persist):
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")
    # An app run earlier in this test process froze its heap after its first load, and a
    # load never touches someone else's freeze (the next test): let those objects go first.
    gc.unfreeze()
    _index, tree = parsecache.load_tree(mem, persist=persist)
    unit = tree.units[0]
    assert gc.is_tracked(unit)
    # the youngest generations would walk it (twice) before promoting it
    assert _in_generation(unit, 2)
    assert not _in_generation(unit, 0) and not _in_generation(unit, 1)


def test_a_freeze_made_by_the_process_is_kept(mem):
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")
    kept = [object(), {}]  # tracked objects frozen by "someone else" before the load
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        _index, tree = parsecache.load_tree(mem, persist=True)
        assert gc.get_freeze_count() >= frozen  # an unfreeze would have let them all go back
        assert len(tree.units) > 0
    finally:
        gc.unfreeze()
    del kept


def test_frames_built_after_a_cold_load_go_to_the_oldest_generation(mem):
    """A cold load builds an archive's frames when first asked for: that build, too, leaves
    them to the oldest generation (it is ~10^4 objects per archive at scale)."""
    if not gc.isenabled():
        pytest.skip("the collector is off in this process")
    gc.unfreeze()
    index, _tree = parsecache.load_tree(mem)
    entry = next(e for e in index.files.values() if e.kind == "v2" and "_build" in vars(e))
    frame = entry.frames[0]
    assert gc.is_tracked(frame) and _in_generation(frame, 2)
    assert not _in_generation(frame, 0) and not _in_generation(frame, 1)
