"""The one on-disk envelope of memory-tui's persisted caches: magic, kind, version, crc32,
payload length, then the payload (``marshal`` of plain tuples, lists, dicts, strings,
numbers and bytes: no class is named in a file, so nothing but plain data comes out of one).

    b"memory-tui-cache\\0" + kind + b"\\0" + ">HIQ"(version, crc32(payload), len(payload)) + payload

A file that is not an intact envelope of the kind and version asked for -- a torn write, a
flipped bit, a count edited by hand, another version's file -- reads as ``None``: a cache
miss, recomputed, never an answer. The crc guards against damage, not against an author:
these files are written only by this code into the owner's own folders.

Every persisted cache of memory-tui is one of these (or, for a cache of thousands of entries,
``pack_many``: the same envelope whose payload is an index of lengths and the entries; for a
cache read one entry at a time, ``pack_indexed``: an envelope of a head and a table, then the
entries, each with its own crc; for an append-only log, envelopes laid end to end and read back
with ``records``).

Writes replace the file whole through ``fsutil.replace_cache_file``: the temporary file is
``.<name>.<pid>.<thread id>.tmp`` beside the target, renamed over it, so a reader sees the old
or the new file, never half of one; never through a symbolic link put in the folder's place.
"""

from __future__ import annotations

import marshal
import os
import struct
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..fsutil import replace_cache_file

MAGIC = b"memory-tui-cache\0"
_HEAD = struct.Struct(">HIQ")  # version, crc32 of the payload, payload length
_COUNT = struct.Struct(">I")  # pack_many: the length of its index


def _prefix(kind: str) -> bytes:
    return MAGIC + kind.encode("ascii") + b"\0"


def pack(kind: str, value: Any, version: int = 1, *, stable: bool = False) -> bytes:
    """The envelope of ``value``. ``stable`` gives bytes that are a function of the value
    alone (no marshal back-references, which depend on which strings the process interned):
    for files whose bytes are compared or shown."""
    payload = marshal.dumps(value, 2 if stable else 4)
    return _prefix(kind) + _HEAD.pack(version, zlib.crc32(payload), len(payload)) + payload


def pack_many(kind: str, parts: list[bytes] | tuple[bytes, ...], version: int = 1) -> tuple[bytes, ...]:
    """An envelope of many values written without joining them (each part a ``packed_value``):
    its payload is the length of an index, the index (the parts' lengths, marshal), then the
    parts. A cache of thousands of entries writes them as they are made and reads them back
    with ``unpack_many``."""
    index = marshal.dumps(tuple(map(len, parts)), 2)
    head = _COUNT.pack(len(index)) + index
    crc = zlib.crc32(head)
    for part in parts:
        crc = zlib.crc32(part, crc)
    return (_prefix(kind) + _HEAD.pack(version, crc, len(head) + sum(map(len, parts))), head, *parts)


def unpack_many(kind: str, data: bytes, version: int = 1) -> list[Any] | None:
    """The values of an intact ``pack_many`` envelope of ``kind`` and ``version``, else ``None``."""
    payload = payload_of(kind, data, version)
    if payload is None:
        return None
    try:
        (size,) = _COUNT.unpack_from(payload)
        at = _COUNT.size + size
        lengths = marshal.loads(payload[_COUNT.size:at])
        if type(lengths) is not tuple or at + sum(lengths) != len(payload):
            return None
        out = []
        for length in lengths:
            out.append(marshal.loads(payload[at:at + length]))
            at += length
    except (struct.error, EOFError, ValueError, TypeError):  # not an index this code wrote
        return None
    return out


def pack_indexed(kind: str, head: Any, parts: Mapping[str, bytes], version: int = 1) -> tuple[bytes, ...]:
    """An envelope of ``head`` followed by named parts (each a ``packed_value``) that a reader
    fetches one by one (``read_indexed``): the envelope's value is ``(head, table)``, the table
    giving each part's offset after the envelope, length and crc32. A cache holding one entry
    per session lets a question about one session read the head and that entry, not the
    whole file."""
    table: dict[str, tuple[int, int, int]] = {}
    at = 0
    for name, blob in parts.items():
        table[name] = (at, len(blob), zlib.crc32(blob))
        at += len(blob)
    return (pack(kind, (head, table), version), *parts.values())


def read_indexed(path: Path, kind: str, version: int = 1, names: Iterable[str] | None = None,
                 accept: Callable[[Any], bool] | None = None) -> tuple[Any, dict[str, bytes]] | None:
    """``(head, {name: part})`` of a ``pack_indexed`` file: the parts named (every part when
    ``None``; a name the file does not hold is left out), read from the same open file as the
    head, each checked against its own crc. ``None`` when the file is missing, unreadable,
    not such an envelope of ``kind`` and ``version``, any part asked for is damaged, its
    folder is a symbolic link, or ``accept(head)`` is false (then no part is read)."""
    prefix = _prefix(kind)
    start = len(prefix) + _HEAD.size
    try:
        if path.parent.is_symlink():
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        fixed = os.pread(fd, start, 0)
        if len(fixed) < start or not fixed.startswith(prefix):
            return None
        got_version, crc, length = _HEAD.unpack_from(fixed, len(prefix))
        size = os.fstat(fd).st_size
        if got_version != version or start + length > size:  # a length no read could fill
            return None
        payload = os.pread(fd, length, start)
        if len(payload) != length or zlib.crc32(payload) != crc:
            return None
        value = loads_part(payload)
        if not (type(value) is tuple and len(value) == 2 and type(value[1]) is dict):
            return None
        head, table = value
        if accept is not None and not accept(head):
            return None
        base = start + length
        out: dict[str, bytes] = {}
        for name in (table if names is None else names):
            where = table.get(name)
            if where is None:
                continue
            if not (type(where) is tuple and len(where) == 3 and all(type(v) is int and v >= 0 for v in where)):
                return None
            offset, part_size, part_crc = where
            if base + offset + part_size > size:
                return None
            blob = os.pread(fd, part_size, base + offset)
            if len(blob) != part_size or zlib.crc32(blob) != part_crc:
                return None
            out[name] = blob
        return head, out
    except OSError:
        return None
    finally:
        os.close(fd)


def write_indexed(path: Path, kind: str, head: Any, parts: Mapping[str, bytes], version: int = 1, *,
                  make_folder: bool = False) -> bool:
    """``write`` of a ``pack_indexed`` file."""
    try:
        return _replace(path, pack_indexed(kind, head, parts, version), make_folder)
    except ValueError:  # a value marshal cannot hold
        return False


def packed_value(value: Any) -> bytes:
    """One part of ``pack_many``."""
    return marshal.dumps(value, 4)


def loads_part(payload: memoryview | bytes) -> Any:
    """A value of ``packed_value``, or ``None`` when it does not decode."""
    try:
        return marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None


def records(kind: str, data: bytes | memoryview, version: int = 1) -> Iterator[Any]:
    """The values of the intact envelopes of ``kind`` laid end to end in ``data`` (an
    append-only log of small envelopes), in order. A damaged or cut-short record is skipped:
    the walk goes on from the next place the record prefix appears, so a record a crash cut
    short never hides the ones appended after it."""
    prefix = _prefix(kind)
    start = len(prefix) + _HEAD.size
    data = bytes(data)
    at = 0 if data.startswith(prefix) else data.find(prefix)
    while at >= 0:
        end = None
        if len(data) - at >= start:
            got_version, crc, length = _HEAD.unpack_from(data, at + len(prefix))
            stop = at + start + length
            if got_version == version and stop <= len(data):
                payload = memoryview(data)[at + start:stop]
                if zlib.crc32(payload) == crc:
                    try:
                        value = marshal.loads(payload)
                    except (EOFError, ValueError, TypeError):
                        pass
                    else:
                        end = stop
                        yield value
        at = data.find(prefix, end if end is not None else at + 1)


def payload_of(kind: str, data: bytes, version: int = 1) -> memoryview | None:
    """The verified payload of an envelope of ``kind`` and ``version``, else ``None``."""
    prefix = _prefix(kind)
    start = len(prefix) + _HEAD.size
    if len(data) < start or not data.startswith(prefix):
        return None
    got_version, crc, length = _HEAD.unpack_from(data, len(prefix))
    payload = memoryview(data)[start:]
    if got_version != version or length != len(payload) or zlib.crc32(payload) != crc:
        return None
    return payload


def unpack(kind: str, data: bytes, version: int = 1) -> Any:
    """The value of an intact envelope of ``kind`` and ``version``; ``None`` for anything else."""
    payload = payload_of(kind, data, version)
    return None if payload is None else loads_part(payload)


def read(path: Path, kind: str, version: int = 1) -> Any:
    """The value kept at ``path``, or ``None`` when it is missing, unreadable, damaged, of
    another kind or version, or its folder is a symbolic link."""
    try:
        if path.parent.is_symlink():
            return None
        data = path.read_bytes()
    except OSError:
        return None
    return unpack(kind, data, version)


def write(path: Path, kind: str, value: Any, version: int = 1, *, stable: bool = False,
          make_folder: bool = False) -> bool:
    """Replace ``path`` with the envelope of ``value``. Best effort (a cache the next process
    rebuilds): ``False`` when nothing was written. Never through a symlinked folder; the folder
    is created (0700) only with ``make_folder``."""
    try:
        return _replace(path, pack(kind, value, version, stable=stable), make_folder)
    except ValueError:  # a value marshal cannot hold
        return False


def _replace(path: Path, data: bytes | tuple[bytes, ...], make_folder: bool) -> bool:
    folder = path.parent
    try:
        if make_folder and not folder.exists():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if folder.is_symlink() or not folder.is_dir():
            return False
        replace_cache_file(path, data)
    except OSError:
        return False
    return True


__all__ = ["MAGIC", "loads_part", "pack", "pack_indexed", "pack_many", "packed_value", "payload_of", "read",
           "read_indexed", "records", "unpack", "unpack_many", "write", "write_indexed"]
