"""Appending frames to the v2 source archives: the one place the archive format is written.

The format itself (frames, ids, paths, scanning) lives in ``format/sources/`` as pure
functions of bytes; writing needs the workspace's runtime folder, atomic replacement and the
git "commit pending" marker, which belong to the store.
"""
from __future__ import annotations

import os
import posixpath
import stat as stat_mod
import unicodedata
from pathlib import Path
from typing import Any, Sequence

from ..cache.stamp import stamp_of
from ..format.errors import MemoryError
from ..format.paths import Layout
from ..format.sources import (proven, APPEND_REFUSED, MARKER, SOURCES_DIR, AppendResult, SourceIndex, SourceRecord, archive_path,
                              index_file, is_v2_valid_id, render_frame)
from ..fsutil import atomic_write
from .gitlog import mark_pending


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def _refuse(message: str, *, path: str | None = None, line: int | None = None, **details: Any) -> MemoryError:
    return MemoryError(APPEND_REFUSED, message, path=path, line=line, details=details)


def _check_collisions(root: Path, rels: Sequence[str]) -> None:
    """Abort if two path prefixes are equal under NFC+casefold but spelled differently,
    within the batch or against names already on disk (memory spec §4.5)."""
    spelled: dict[str, str] = {}  # folded prefix -> the batch's spelling
    parents: set[str] = set()
    for rel in rels:
        parts = rel.split("/")
        for depth in range(2, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            other = spelled.setdefault(_fold(prefix), prefix)
            if other != prefix:
                raise _refuse("source archive path collision", path=rel, other=other)
            parents.add("/".join(parts[: depth - 1]))
    for parent in sorted(parents):
        try:
            names = os.listdir(root / parent)
        except OSError:
            continue
        for name in names:
            existing = f"{parent}/{name}"
            mine = spelled.get(_fold(existing))
            if mine is not None and mine != existing:
                raise _refuse("source archive path collision", path=mine, other=existing)


def _contained(root: Path, rel: str) -> bool:
    norm = posixpath.normpath(rel)
    if norm != rel or not rel.startswith(SOURCES_DIR + "/") or ".." in rel.split("/"):
        return False
    sources = (root / SOURCES_DIR).resolve()
    try:
        (root / rel).resolve().relative_to(sources)
    except ValueError:
        return False
    return True


def _mkdirs(root: Path, rel_dir: str) -> None:
    cur = root
    for part in rel_dir.split("/"):
        cur = cur / part
        try:
            cur.mkdir(mode=0o700)
        except FileExistsError:
            if not cur.is_dir() or cur.is_symlink():
                raise _refuse(f"not a directory: {cur.relative_to(root).as_posix()}")
            continue
        os.chmod(cur, 0o700)


def append_records(
    memory_root: Path | str,
    records: Sequence[SourceRecord],
    *,
    runtime_dir: Path | str | None = None,
    index: SourceIndex | None = None,
    existing_root: Path | str | None = None,
) -> AppendResult:
    """Archive ``records`` into their v2 files (memory spec §4.5).

    Content addressed and idempotent: a source id already framed in its v2 file is skipped
    (content is not compared), so archiving twice leaves the bytes identical. Every check
    (ids, containment, collisions, complete existing files) runs before any file is written;
    each file is replaced atomically (temp in the runtime dir, fsync, 0600, rename).
    The caller holds the workspace write lock. ``index`` (a ``SourceIndex`` of this root) spares
    re-scanning files it already holds unchanged, or resumes the scan of files that only grew.
    ``existing_root``: where names already on disk are looked up for the path-collision check
    (default ``memory_root``); a transaction stage that holds only the archives it appends to
    passes the committed memory root.
    """
    root = Path(memory_root)
    rt = Path(runtime_dir) if runtime_dir is not None else Layout(root).runtime_dir
    ordered = sorted(records, key=lambda r: (r.provider, r.thread_id, r.ordinal))

    groups: dict[str, list[tuple[SourceRecord, bytes]]] = {}
    for rec in ordered:
        sid = rec.source_id
        if not is_v2_valid_id(sid):
            raise _refuse(f"invalid source id: {sid}", source_id=sid)
        try:
            frame = render_frame(rec).encode("utf-8")  # lone surrogates fail here, before any write
            rel = archive_path(sid)
        except (ValueError, UnicodeEncodeError) as exc:
            raise _refuse(str(exc), source_id=sid) from None
        groups.setdefault(rel, []).append((rec, frame))

    rels = list(groups)
    for rel in rels:
        if not _contained(root, rel):
            raise _refuse("source archive path escapes sources/", path=rel)
    _check_collisions(Path(existing_root) if existing_root is not None else root, rels)

    plans: list[tuple[str, bytes]] = []
    known = index.files if index is not None and Path(index.root) == root else {}
    written: list[str] = []
    skipped: list[str] = []
    for rel in rels:
        target = root / rel
        existing: set[str] = set()
        old: bytes | None = None
        empty_archive = False
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            st = None
        except NotADirectoryError:
            raise _refuse(f"invalid or truncated v2 archive: {rel}", path=rel, reason="parent is not a directory") from None
        if st is not None and not stat_mod.S_ISREG(st.st_mode):
            raise _refuse(f"invalid or truncated v2 archive: {rel}", path=rel, reason="not a regular file")
        if st is not None:
            data = target.read_bytes()
            key = stamp_of(st)
            prior = known.get(rel)
            if prior is not None and prior.kind == "v2" and prior.key == key and proven(prior) and len(data) == key[1]:
                entry = prior
            else:
                entry = index_file(rel, data, key, prior)
            if not entry.complete:
                prob = entry.problem
                raise _refuse(
                    f"invalid or truncated v2 archive: {rel}",
                    path=rel,
                    line=prob.line if prob else None,
                    reason=prob.message if prob else "",
                )
            old = data
            existing = set(entry.ids)
            empty_archive = not entry.frames
        new_frames: list[bytes] = []
        for rec, frame in groups[rel]:
            sid = rec.source_id
            if sid in existing:
                skipped.append(sid)
                continue
            existing.add(sid)
            new_frames.append(frame)
            written.append(sid)
        if not new_frames:
            continue
        if old is None or empty_archive:
            # OpenProgram appends after an empty archive's blank line, leaving two blank lines
            # that its own scanner rejects; writing the new-file form keeps the file valid.
            out = MARKER.encode("ascii") + b"\n\n" + b"\n".join(new_frames)
        else:
            sep = b"\n" if old.endswith(b"\n") else b"\n\n"
            out = old + sep + b"\n".join(new_frames)
        plans.append((rel, out))

    if plans:
        rt.mkdir(mode=0o700, parents=True, exist_ok=True)
        mark_pending(root)  # appended frames reach git with the next commit or the next locked open
    for rel, out in plans:
        _mkdirs(root, posixpath.dirname(rel))
        atomic_write(root / rel, out, tmp_dir=rt, tmp_prefix="source-archive-")
    return AppendResult(tuple(written), tuple(skipped), tuple(rel for rel, _ in plans))
