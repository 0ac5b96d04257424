"""Making a test's files old enough for a stamp to vouch for them, and seeing what was read.

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


def session_reads(monkeypatch) -> list[str]:
    """The state-relative names of the session files read from now on (one entry per read),
    for a test that asks which node files a cache let be."""
    from memory_tui.sessions import store

    read: list[str] = []
    real = store.read_json

    def counting(path, rel):
        read.append(rel)
        return real(path, rel)

    monkeypatch.setattr(store, "read_json", counting)
    return read
