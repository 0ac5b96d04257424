"""Making a test's files old enough for a stamp to vouch for them.

A stat stamp younger than the clock tick proves nothing (a later write in the same tick could
leave it as it is), so the caches never keep one; a test that wants a cache to be used first
ages what it wrote."""

from __future__ import annotations

import os
import time
from pathlib import Path


def age(top: Path) -> None:
    """Every file and folder under ``top`` (``top`` too) an hour old, and out of the racy window."""
    t = time.time_ns() - 3_600 * 10**9
    for p in [top, *top.rglob("*")]:
        os.utime(p, ns=(t, t), follow_symlinks=False)
    settle()


def settle() -> None:
    time.sleep(0.15)  # utime moved every ctime: let it leave the racy window
