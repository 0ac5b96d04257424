"""Building many frozen dataclass instances cheaply (the parser, the archive scanner and the
parse cache build ~10^5 of them per workspace), and with the collector out of the way."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from typing import Callable, Iterator


def positional(cls: type) -> Callable[..., object]:
    """A constructor taking every field of the frozen dataclass ``cls`` positionally, in field
    order, that builds the very instance ``cls(*values)`` would (same ``__dict__``, so equal,
    same hash, same pickle). The generated ``__init__`` of a frozen dataclass pays one
    ``object.__setattr__`` per field; the parser and the parse cache build ~10^5 of these
    objects per workspace, and this is about three times cheaper. Only for classes without
    ``__post_init__`` or ``init=False`` fields."""
    fields_ = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or "__slots__" in vars(cls) or any(not f.init for f in fields_):
        raise TypeError(f"{cls.__name__} cannot be built positionally")
    names = [f.name for f in fields_]
    # Generated like dataclasses' own __init__: one dict store per field is the cheapest way
    # CPython has to fill a fresh instance (a zip into dict.update costs twice as much).
    params = ", ".join(names)
    if any(n.startswith("_fd_") for n in names):
        raise TypeError(f"{cls.__name__} has a field named like positional()'s own locals")
    stores = "".join(f"    _fd_d[{n!r}] = {n}\n" for n in names)
    source = f"def make({params}):\n    _fd_obj = _fd_new(_fd_cls)\n    _fd_d = _fd_obj.__dict__\n{stores}    return _fd_obj\n"
    namespace: dict[str, object] = {"_fd_new": object.__new__, "_fd_cls": cls}
    exec(source, namespace)  # noqa: S102 - the source is built from the class's own field names
    make = namespace["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"  # type: ignore[attr-defined]
    return make  # type: ignore[return-value]


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """Pause the cyclic collector while a parse or its rows are built: they are ~10^5 acyclic
    objects, and each of the collections their allocation triggers traverses the whole young
    heap to find nothing (half the time of a cached load). Re-enabled as it was found.

    On the way out the new objects go straight to the oldest generation (freeze, then
    unfreeze: two list splices, no traversal) instead of waiting in the youngest: left there,
    the first collection after re-enabling walks all of them (0.12-0.18 s after a cold load
    at scale 1, ~345 000 objects) and the next one of the middle generation walks them again,
    only to promote what is nearly all long-lived. They are still examined by full
    collections, like every old object. A process that froze its heap through
    :func:`hold_heap` (the app does, after its first load) keeps its frozen set: then nothing
    is moved. (Asking the collector instead, ``gc.get_freeze_count()``, walks the whole
    frozen set: milliseconds per parse in an app holding millions of objects.)"""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            if not _HELD[0]:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


_HELD = [False]  # this process froze its heap for good (``hold_heap``)


def hold_heap() -> None:
    """``gc.freeze()`` for the rest of the process: every object alive now is left out of
    every later collection (still freed by reference counting), and :func:`bulk` no longer
    moves objects through the permanent generation, which would let these go."""
    gc.freeze()
    _HELD[0] = True


def release_heap() -> None:
    """Undo :func:`hold_heap` (tests that need the collector's generations as a fresh process has them)."""
    gc.unfreeze()
    _HELD[0] = False


__all__ = ["bulk", "hold_heap", "positional", "release_heap"]
