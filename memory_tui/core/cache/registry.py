"""Every per-process cache of memory-tui, known in one place, and one ``forget()`` that
clears all of them (tests and benchmarks start cold from it; nothing in a normal run needs
it, since every entry is keyed by what it was made from).

A module registers what it keeps where it defines it: ``_TABLE: dict = keeps({})`` for a
module dictionary, ``@keeps`` above ``@lru_cache`` for a memoised function, or
``keeps(fn)`` for a function that forgets something more involved (a per-root cache object).
The kit never imports the code whose values it forgets.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

_FORGETTERS: list[Callable[[], Any]] = []
_LOCK = threading.Lock()


def keeps(obj: T) -> T:
    """Register ``obj`` (a dict or set, an ``lru_cache``-d function, or a function of no
    arguments that forgets) with ``forget``; returns ``obj`` unchanged."""
    if isinstance(obj, (dict, set, list)):
        forgetter = obj.clear
    elif hasattr(obj, "cache_clear"):
        forgetter = obj.cache_clear  # type: ignore[attr-defined]
    elif callable(obj):
        forgetter = obj
    else:
        raise TypeError(f"cannot forget a {type(obj).__name__}")
    with _LOCK:
        _FORGETTERS.append(forgetter)
    return obj


def forget() -> None:
    """Clear every per-process cache registered so far (the on-disk ones stay: their entries
    are checked against what they were made from when read)."""
    with _LOCK:
        forgetters = list(_FORGETTERS)
    for forgetter in forgetters:
        forgetter()


__all__ = ["forget", "keeps"]
