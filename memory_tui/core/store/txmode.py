"""Whether this process runs only one transaction.

``one_shot`` marks a process that runs one transaction and exits, so nothing is kept in
memory for a next one. (Which way a transaction derives its facts, incrementally, fully or
both, is ``core.switches``'s ``MEMORY_TUI_TEST_DERIVE``.)
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

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


__all__ = ["in_one_shot", "one_shot"]
