"""The one stat stamp every file-derived cache keys on, and the one rule for when it proves
nothing.

Modelled on git's index stat data: a cached value made from a file is reused only while the
file's ``(mtime_ns, size, inode, ctime_ns)`` is the one the value was made from. The mtime
alone is not enough: any tool can put it back (``touch -d``, ``os.utime``, an archive
extractor), so a same-size rewrite with its mtime restored would hide behind the old entry.
No tool can set the ctime; the kernel moves it on every write, rename, chmod or link.

The stamp is a plain tuple (not a class): walks build one per file of the workspace, and
tuples are compared, hashed and stored (marshal, JSON) as they are. Its fields are at fixed
positions: ``MTIME, SIZE, INO, CTIME``.

**Racy stamps** (git's ``is_racy_timestamp``): file times tick with the kernel's coarse
clock, so a file written twice within one tick may keep its stamp across both writes. A
stamp whose newest time is within ``RACY_NS`` of the moment it was looked at therefore
proves nothing: it is never stored as a key, and an entry is never trusted on it.
"""

from __future__ import annotations

import os
import time
from operator import attrgetter, itemgetter
from typing import Mapping

Stamp = tuple[int, int, int, int]  # (mtime_ns, size, inode, ctime_ns)
MTIME, SIZE, INO, CTIME = 0, 1, 2, 3

# Longer than any file system's timestamp granularity memory-tui meets (ext4 and tmpfs tick
# with the kernel's jiffy clock, a few ms; FAT's 2 s is refused elsewhere as not local).
RACY_NS = 100_000_000

stamp_of = attrgetter("st_mtime_ns", "st_size", "st_ino", "st_ctime_ns")
"""``stamp_of(os.stat_result) -> Stamp`` (C-level: walks call it once per file)."""

NO_STAMP: Stamp = (-1, -1, -1, -1)  # what no file has: an entry stored under it never matches


def is_racy(mtime_ns: int, ctime_ns: int, now_ns: int | None = None) -> bool:
    """Whether a stamp with these times, looked at ``now_ns`` (default: now), may not show a
    change made later within the same clock tick."""
    now = time.time_ns() if now_ns is None else now_ns
    return now - max(mtime_ns, ctime_ns) < RACY_NS


def stamp_racy(stamp: Stamp, now_ns: int | None = None) -> bool:
    """``is_racy`` of a whole stamp."""
    return is_racy(stamp[MTIME], stamp[CTIME], now_ns)


def any_racy(stamps: Mapping[str, Stamp], now_ns: int | None = None) -> bool:
    """``any(stamp_racy(st, now_ns) for st in stamps.values())``, with the newest mtime and
    ctime found by C-level ``max`` (walks ask it of every file's stamp)."""
    if not stamps:
        return False
    values = stamps.values()
    return is_racy(max(map(itemgetter(MTIME), values)), max(map(itemgetter(CTIME), values)), now_ns)


def is_stamp(value: object) -> bool:
    """A well-formed stamp (as read back from a cache file)."""
    return isinstance(value, tuple) and len(value) == 4 and all(type(v) is int for v in value)


def file_stamp(path: str | os.PathLike, follow_symlinks: bool = True) -> Stamp | None:
    """The stamp of a regular file, ``None`` for anything else or an unreadable path."""
    import stat as stat_mod

    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except OSError:
        return None
    return stamp_of(st) if stat_mod.S_ISREG(st.st_mode) else None


__all__ = ["CTIME", "INO", "MTIME", "NO_STAMP", "RACY_NS", "SIZE", "Stamp", "any_racy", "file_stamp", "is_racy", "is_stamp",
           "stamp_of", "stamp_racy"]
