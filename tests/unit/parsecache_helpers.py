"""Fixture helpers shared by the parse-cache tests (imported by module name)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memory_tui.core.cache.stamp import RACY_NS
from memory_tui.core.store import parsecache


def age(root: Path) -> None:
    """Make every stamp older than the racy window (a cache never stores younger stamps)."""
    for p in root.rglob("*.md"):
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))
    # the ctime (moved by the utime itself) cannot be set back: wait out the clock tick
    time.sleep(RACY_NS / 1e9)


@pytest.fixture
def mem(fixture_state) -> Path:
    """The fixture's memory folder, aged, with no parse cache on disk or in the process."""
    m = fixture_state / "memory"
    age(m)
    parsecache.drop(m)
    return m
