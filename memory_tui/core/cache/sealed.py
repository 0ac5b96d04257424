"""marshal behind a crc32: the entry format of memory-tui's own caches in the runtime dir.

Only this code writes these files, into the owner's 0700 runtime dir, so the crc guards
against damage (a torn write, a flipped bit), not against an author; marshal of plain
tuples, strings, numbers and dicts reads back an order of magnitude faster than a pickle.
"""

from __future__ import annotations

import marshal
import zlib
from pathlib import Path
from typing import Any

from ..fsutil import replace_cache_file


def seal(magic: bytes, value: Any, version: int = 4) -> bytes:
    """``magic``, the payload's crc32 as 8 hex digits and LF, then the payload. ``version`` 0
    gives bytes that are a function of the value alone (later versions record which strings
    were interned or shared), for files whose bytes must not depend on the process's history."""
    payload = marshal.dumps(value, version)
    return magic + b"%08x\n" % zlib.crc32(payload) + payload


def unseal(magic: bytes, data: bytes) -> Any:
    """The sealed value, or ``None`` for anything that is not an intact entry of ``magic``."""
    head = len(magic) + 9
    if len(data) < head or not data.startswith(magic) or data[head - 1:head] != b"\n":
        return None
    try:
        crc = int(data[len(magic):head - 1], 16)
    except ValueError:
        return None
    payload = memoryview(data)[head:]
    if zlib.crc32(payload) != crc:
        return None
    try:
        return marshal.loads(payload)
    except (EOFError, ValueError, TypeError):  # damaged beyond what the crc saw: a miss
        return None


def read_kept(path: Path, magic: bytes) -> Any:
    """The sealed value of one of memory-tui's files in the runtime dir (``path``), or ``None``
    when it is missing, unreadable, damaged, or the runtime dir is a symbolic link."""
    try:
        if path.parent.is_symlink():
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return unseal(magic, data)


def write_kept(path: Path, magic: bytes, value: Any, version: int = 4) -> None:
    """Replace ``path`` with ``value`` sealed (marshal ``version``); never through a symlinked
    runtime dir, never creating one for a cache. Best effort: a cache the next process rebuilds."""
    try:
        if not path.parent.is_symlink() and path.parent.is_dir():
            replace_cache_file(path, seal(magic, value, version))
    except (OSError, ValueError):  # ValueError: a value marshal cannot hold
        pass
