"""The last workspace revision a process computed, kept for the next process, so a fresh
``apply`` or ``edit`` does not read and hash every file (≈ 28 MB at scale 1) only to learn
the revision the previous transaction installed.

The revision (memory spec §2.6) is one SHA-256 stream over every file in order, so it cannot
be put together from parts, and ``hashlib`` cannot save a stream's state. What is kept is the
value with what proves it, exactly what the in-process chain resumes by
(``txcache._feed_stream``): for every file of the revision, in order, its path and stat
stamp ``(mtime_ns, size, inode, ctime_ns)``, and for each file whose stamp was younger than
the clock tick when its bytes were hashed (a later write in the same tick could leave that
stamp as it was) the SHA-256 of those bytes. The value holds for a walk that lists the same
paths in the same order, every other file with the kept stamp (no write keeps a stamp older
than the tick: the ctime moves) and every young one holding bytes of the kept SHA-256, which
are read again to know.

``<M>/<runtime-dir>/memory-tui-revision``: ``(revision, paths joined by NUL, stamps,
{index: sha256 of a young file})``, one envelope of the cache kit (``cache.envelope``),
written by this code only; never through a symlinked runtime dir. Outside the revision, git and every
stage; OpenProgram ignores it. A missing, damaged or foreign file is a miss (the revision is
hashed as before). ``MEMORY_TUI_TEST_DERIVE=full`` neither reads nor writes it; ``check`` hashes the
files as well and compares (``txcache.WorkspaceCache.revision``).

A reading process (``status``, the app) never writes into the state dir, so the revision it
had to hash is kept in the user cache instead (:func:`reader_keep`, the same envelope under
``U/revision/<fsutil.cache_name_of(memory root)>.bin``) and looked up there when the state's own
file does not prove the files (:func:`reader_lookup`): after OpenProgram wrote, only the first
reader after the write reads every file.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from itertools import compress
from operator import itemgetter, ne
from pathlib import Path

from ..format.paths import Layout
from ..cache import envelope

NAME = "memory-tui-revision"
READER_SUB = "revision"
KIND = "revision"
VERSION = 2


def _file(root: Path) -> Path:
    return Layout(Path(root)).runtime_dir / NAME


def _reader_file(root: Path) -> Path:
    from ..fsutil import cache_name_of, user_cache_dir

    return user_cache_dir(READER_SUB) / f"{cache_name_of(root)}.bin"


def lookup(root: Path, stamps: Mapping[str, tuple]) -> str | None:
    """The kept revision when it is the revision of the files ``stamps`` names (as
    ``txcache.revision_walk`` lists them, in the revision's order), else ``None``."""
    return _lookup_in(_file(root), root, stamps)


def reader_lookup(root: Path, stamps: Mapping[str, tuple]) -> str | None:
    """:func:`lookup` in the readers' copy (the user cache)."""
    return _lookup_in(_reader_file(root), root, stamps)


def _lookup_in(where: Path, root: Path, stamps: Mapping[str, tuple]) -> str | None:
    value = envelope.read(where, KIND, VERSION)
    if not (type(value) is tuple and len(value) == 4):
        return None
    revision, paths, kept, young = value
    if not (type(revision) is str and type(paths) is str and type(kept) is tuple and type(young) is dict):
        return None
    if paths != "\0".join(stamps) or len(kept) != len(stamps):
        return None
    now = list(stamps.values())
    # a stamp that moved is fine only for a young file, whose bytes decide
    if any(i not in young for i in compress(range(len(now)), map(ne, now, kept))):
        return None
    names = paths.split("\0")
    base = os.fspath(root)
    for i, digest in young.items():
        if type(i) is not int or not 0 <= i < len(names):
            return None
        try:
            with open(os.path.join(base, names[i]), "rb") as fh:
                held = fh.read()
        except OSError:
            return None
        if hashlib.sha256(held).hexdigest() != digest:
            return None
    return revision


def reader_keep(root: Path, revision: str, entries: Sequence[tuple]) -> None:
    """:func:`keep` into the readers' copy (the user cache; its folder made as the other user
    caches are)."""
    _keep_in(_reader_file(root), revision, entries, make_folder=True)


def keep(root: Path, revision: str, entries: Sequence[tuple]) -> None:
    """Remember ``revision`` of the files ``entries`` name: the revision stream's chain
    (``(rel, stamp, sha256 of a young file's bytes or None, ...)`` per file, in order)."""
    _keep_in(_file(root), revision, entries)


def _keep_in(where: Path, revision: str, entries: Sequence[tuple], make_folder: bool = False) -> None:
    kept = tuple(map(_STAMP, entries))
    young = {i: e[2] for i, e in enumerate(entries) if e[2] is not None}
    # Every install writes this file. The paths as one string (no path holds a NUL): one per
    # file cost as much as the rest of the write. ``stable``: marshal version 2, which records no shared
    # references: in a process holding a large heap, version 4's table of every object written
    # (every stamp number of a large workspace) costs more in cache misses than the dump itself.
    envelope.write(where, KIND, (revision, "\0".join(map(_REL, entries)), kept, young), VERSION, stable=True,
                   make_folder=make_folder)


_REL, _STAMP = itemgetter(0), itemgetter(1)
