"""A sealed pickle names the modules its classes may come from; a package named there allows
the rooms under it, and nothing else."""
from __future__ import annotations

from memory_tui.core.cache import codec
from memory_tui.core.format.errors import Problem
from memory_tui.core.format.sources import TrustMeta
from memory_tui.core.format.topics import Heading, SourceLink

MAGIC = b"TEST1\n"


def test_classes_of_a_named_package_s_rooms_read_back():
    value = (SourceLink("a", "b", None), Heading(1, "T", 3), TrustMeta(), Problem("C", "m", "p", 1))
    sealed = codec.pickle_seal(MAGIC, value)
    allowed = ("memory_tui.core.format.topics", "memory_tui.core.format.sources", "memory_tui.core.format.errors")
    assert codec.pickle_unseal(MAGIC, sealed, allowed) == value


def test_a_module_outside_the_named_ones_is_still_refused():
    sealed = codec.pickle_seal(MAGIC, (SourceLink("a", "b", None),))
    assert codec.pickle_unseal(MAGIC, sealed, ("memory_tui.core.format.sources",)) is None
    # a name that only starts like a named package is not under it
    assert codec.pickle_unseal(MAGIC, sealed, ("memory_tui.core.format.top",)) is None
