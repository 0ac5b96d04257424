"""Temp files a killed memory-tui process leaves behind, removed by the next locked open.

Every durable replace writes a temp file beside its target and renames it over the target;
a ``kill -9`` in between leaves the temp file for good. Which temp files are memory-tui's
own, and when one is certainly dead:

* ``fsutil.atomic_write`` names its temp ``<name>.<16 hex>-p<pid>.tmp`` (OpenProgram's own
  ``<name>.<32 hex>.tmp`` has no ``-p<pid>``, so OpenProgram's temp files, which it writes
  without our lock, are never taken for ours);
* ``fsutil.replace_cache_file`` names its temp ``.<name>.<pid>.<thread>.tmp``.

A temp file is removed only when the process named in it is gone (``kill(pid, 0)`` says no
such process). A live process (another memory-tui reading and filling a cache while we hold
the write lock, or this very process) keeps its temp files: it is about to rename them. A
pid reused by an unrelated process only delays the removal until that process ends.

Where: the runtime folder and everything under it (runtime files, archive temps, the parse,
view and proof caches), memory-tui's user cache dir (session index, token memo, outline,
layout and overview tables: shared by every state, so only the pid decides) and, for the
sessions a marks intent names, their ``history/``. The
session folders are not all walked at every open: a node file is only ever rewritten by a
mark, and every mark happens while an intent naming its session is on disk.

The same open removes the cache files of earlier versions that nothing reads any more
(``RETIRED``): when the cache kit put every store on one envelope, the no-op verdict and the
canonical proofs (runtime folder) and the topic outline tables (user cache dir) changed their
names, so an upgraded workspace would otherwise keep the old files for good. They are removed
whatever process wrote them: no reader of this version opens them, and a reader of an older
one only misses its cache. Their temp siblings follow the pid rule above. Only a locked open
removes anything; a read never writes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable

ATOMIC_TEMP = re.compile(r"^.+[.-][0-9a-f]{16}-p(\d+)\.tmp$")
CACHE_TEMP = re.compile(r"^\..+\.(\d+)\.(\d+)\.tmp$")

# Retired cache files: where (``runtime``: the workspace's runtime folder; ``outline``: the
# outline tables' folder in the user cache dir), the retired name, and the temp files its
# writers left (the pid is the first number). Older writers named the temp
# ``.<name>.<pid>.tmp`` or ``<name>.<pid>.tmp`` before ``replace_cache_file`` added the thread.
RETIRED = (
    ("runtime", re.compile(r"^memory-tui-(?:noop|canonical)\.json$"),
     re.compile(r"^\.?memory-tui-(?:noop|canonical)\.json\.(\d+)(?:\.\d+)?\.tmp$")),
    ("outline", re.compile(r"^[0-9a-f]{24}\.json$"), re.compile(r"^\.[0-9a-f]{24}\.json\.(\d+)\.\d+\.tmp$")),
)


def temp_owner(name: str) -> int | None:
    """The pid a memory-tui temp file name carries, or None when the name is not ours."""
    m = ATOMIC_TEMP.match(name) or CACHE_TEMP.match(name)
    return int(m.group(1)) if m else None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    except OSError:
        return True
    return True


def _scan(folder: Path, recursive: bool, out: list[Path]) -> None:
    try:
        it = os.scandir(folder)
    except OSError:
        return
    with it:
        for e in it:
            try:
                if e.is_symlink():
                    continue  # never follow a link out of the workspace
                if e.is_dir(follow_symlinks=False):
                    if recursive:
                        _scan(Path(e.path), True, out)
                    continue
            except OSError:
                continue
            if e.name.endswith(".tmp"):
                pid = temp_owner(e.name)
                if pid is not None and not _alive(pid):
                    out.append(Path(e.path))


def dead_temps(folders: Iterable[tuple[Path, bool]]) -> list[Path]:
    """Temp files of dead memory-tui processes under ``(folder, recursive)`` pairs."""
    out: list[Path] = []
    for folder, recursive in folders:
        if folder.is_symlink() or not folder.is_dir():
            continue
        _scan(folder, recursive, out)
    return out


def _unlink_all(paths: Iterable[Path]) -> tuple[str, ...]:
    """Remove ``paths``; the ones removed (for a report). Never raises."""
    removed = []
    for p in paths:
        try:
            p.unlink()
            removed.append(str(p))
        except OSError:
            continue
    return tuple(removed)


def remove_dead_temps(folders: Iterable[tuple[Path, bool]]) -> tuple[str, ...]:
    """Remove them; returns the removed paths (for a report). Never raises."""
    return _unlink_all(dead_temps(folders))


def retired_caches(folders: dict[str, Path]) -> list[Path]:
    """The retired cache files (``RETIRED``) in ``folders`` (``"runtime"``/``"outline"`` -> the
    folder), and their temp files whose writer is gone. Only regular files, never through a link."""
    out: list[Path] = []
    for where, name, temp in RETIRED:
        folder = folders.get(where)
        if folder is None or folder.is_symlink() or not folder.is_dir():
            continue
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            try:
                if not e.is_file(follow_symlinks=False):
                    continue
            except OSError:
                continue
            if name.match(e.name):
                out.append(Path(e.path))
                continue
            m = temp.match(e.name)
            if m is not None and not _alive(int(m.group(1))):
                out.append(Path(e.path))
    return out


def remove_retired_caches(folders: dict[str, Path]) -> tuple[str, ...]:
    """Remove ``retired_caches(folders)``; returns the removed paths. Never raises."""
    return _unlink_all(retired_caches(folders))
