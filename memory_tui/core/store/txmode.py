"""How a transaction derives its tree-wide facts, and whether this process runs only one.

``MEMORY_TUI_TX`` chooses between the incremental derivations (from what changed since the
last transaction) and the full ones (from scratch, as before any cache existed); ``check``
runs both and compares, which is how the property tests prove the fast paths equal the full
ones. ``one_shot`` marks a process that runs one transaction and exits, so nothing is kept
in memory for a next one.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator

TX_MODE_ENV = "MEMORY_TUI_TX"  # "" / "incremental" (default), "full", "check"


def tx_mode() -> str:
    """How the transaction derives its tree-wide facts (the tree, the id checks, the link and
    ref checks, the block-link locations, the creation order) from the previous transaction's:
    ``incremental`` from what changed; ``full`` from scratch, as before any of it existed;
    ``check`` both, raising ``IncrementalMismatch`` where they differ (the equivalence tests
    run it)."""
    value = (os.environ.get(TX_MODE_ENV) or "incremental").strip().lower()
    if value not in ("incremental", "full", "check"):
        raise ValueError(f"{TX_MODE_ENV} must be incremental, full or check, not {value!r}")
    return value


class IncrementalMismatch(AssertionError):
    """An incremental derivation differs from the full one (``MEMORY_TUI_TX=check``): a bug."""


def derive(what: str, incremental, full, same=None):
    """``incremental()`` or ``full()`` by ``tx_mode()``; in check mode both, compared by
    ``same(a, b)`` (default ``==``)."""
    mode = tx_mode()
    if mode == "full":
        return full()
    if mode == "incremental":
        return incremental()
    a, b = incremental(), full()
    if not (same(a, b) if same is not None else a == b):
        raise IncrementalMismatch(f"incremental {what} differs from the full derivation:\n{a!r}\n!=\n{b!r}"[:4000])
    return b


_ONE_SHOT = [0]  # ``one_shot`` blocks open in this process
_ONE_SHOT_LOCK = threading.Lock()


@contextmanager
def one_shot() -> Iterator[None]:
    """For a process that runs one transaction and exits (the CLI's ``apply``, ``edit``): the
    post-install revision holds no file bytes in memory for a next transaction that will not
    come (with no chain, a fresh process would hold every file and fault in every page of
    them). The revision is the same either way; only what a later feed reads from memory
    instead of disk differs."""
    with _ONE_SHOT_LOCK:
        _ONE_SHOT[0] += 1
    try:
        yield
    finally:
        with _ONE_SHOT_LOCK:
            _ONE_SHOT[0] -= 1


def in_one_shot() -> bool:
    """Inside a ``one_shot`` block: this process runs one transaction and exits, so nothing
    kept for a next one (held bytes, a file-system monitor) pays for itself."""
    return bool(_ONE_SHOT[0])


__all__ = ["IncrementalMismatch", "TX_MODE_ENV", "derive", "in_one_shot", "one_shot", "tx_mode"]
