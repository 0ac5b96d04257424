"""The records' citations per session, kept across processes: what ``why SESSION`` needs of
the topics without parsing them.

Which records cite a session's turns is a fact of the topic files, and where each turn's
archive frame is, of the archive files; reading either means parsing the whole workspace
(every topic, ~20 000 records at the benchmark's scale 1), although ``why SESSION`` asks
about one session's hundred or so. This index holds, per session, the citing records
(node id, memory id, topic path, line, source id) and the archive frames of its turns
(source id -> archive path and line), or the reason the topics could not be read, and is
keyed by the stamp (``core/cache/stamp``: mtime, size, inode, ctime) of every topic file and
every archive file it was made from: a stat of each (O(files), not O(records)) says whether
it still holds. Any difference -- a stamp moved, a file appeared or vanished -- and the
index is made again from a full parse (``parsecache.load_tree``, as without it); a stamp
that is racy when taken is never stored, so a write within one clock tick cannot hide.

Where it lives: ``<user cache>/citations/<sha256 of the memory path>.index``, one envelope of
the cache kit (``envelope.pack_indexed``, kind ``session-citations``): its head (format, code
tag, the memory path, the stamps, the unread reason), then one packed value per session with
its own crc, of which a reader reads and decodes only the sessions it is asked about. A damaged file (the envelope's crc), another version's,
another workspace's or another code's is a miss, never an answer. Reading a state never
writes into it; losing the folder only costs time.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from memory_tui.core.cache import envelope
from memory_tui.core.cache.registry import keeps
from memory_tui.core.cache.stamp import Stamp, stamp_of
from memory_tui.core.cache.stamp import any_racy as stamps_racy
from memory_tui.core.fsutil import cache_name_of, md_file_stats, user_cache_dir

KIND = "session-citations"
VERSION = 2
FORMAT = "memory-tui/session-citations/2"
SUB = "citations"

# A session's entry (plain data, one packed value each):
#   (groups, frames)
#   groups: ((node id, ((memory id, topic path, line, source id), ...)), ...) -- ``Citations``'
#           grouping: per turn, the first citation of each record, in the records' order
#   frames: ((source id, archive path, line), ...) -- every frame of an ``openprogram/<sid>/``
#           id the archives hold (``SourceIndex.frame``)
Entry = tuple[tuple, tuple]


def index_path(memory_root: Path | str) -> Path:
    return user_cache_dir(SUB) / f"{cache_name_of(memory_root)}.index"


_TAG: list[str] = keeps([])


def code_tag() -> str:
    """The code an entry is made by: all of ``core`` (the topic and archive readers and the
    parse cache are there; naming the package, not a list of its modules, so none is left
    out, and nothing of it is imported to say so) and the grouping here and in ``kept``."""
    if not _TAG:
        from memory_tui.core.cache.codetag import code_tag as tag_of

        _TAG.append(tag_of("memory_tui.core", "memory_tui.sessions.kept", "memory_tui.sessions.citeindex",
                           salt=FORMAT, length=32))
    return _TAG[0]


def stamps_now(memory_root: Path) -> tuple[dict[str, Stamp], dict[str, Stamp]] | None:
    """``(topic stamps, archive stamps)``: every ``*.md`` file under ``topics/`` and under
    ``sources/`` -- every file ``parsecache.load_tree`` reads (its topic walk and the source
    index's) and possibly more (a symlinked archive, which the source index skips), so a
    change to any file a parse would read moves this table (``fsutil.md_file_stats``: light
    to import, unlike the parser). ``None`` when a folder cannot be walked: then no index is
    read or kept, and the parse says what is wrong."""
    try:
        return _md_stamps(memory_root / "topics"), _md_stamps(memory_root / "sources", "sources/")
    except OSError:
        return None


def _md_stamps(top: Path, prefix: str = "") -> dict[str, Stamp]:
    if not top.is_dir():
        return {}
    return {rel: stamp_of(st) for rel, st in md_file_stats(top, prefix).items()}


def any_racy(*tables: Mapping[str, Stamp]) -> bool:
    now = time.time_ns()
    return any(stamps_racy(table, now) for table in tables)


class Stored:
    """An index read back whose stamps are the ones asked for: its reason, and each
    session's entry decoded on request."""

    def __init__(self, reason: str | None, blobs: Mapping[str, bytes]) -> None:
        self.reason = reason
        self._blobs = blobs

    def sessions(self) -> Iterable[str]:
        return self._blobs.keys()

    def entry(self, sid: str) -> Entry | None:
        """The session's entry (``((), ())`` for a session nothing cites and no archive
        holds), ``None`` when the stored value is not one this code wrote."""
        blob = self._blobs.get(sid)
        if blob is None:
            return (), ()
        value = envelope.loads_part(blob)
        return value if _entry_ok(value) else None


def read(memory_root: Path, topics: Mapping[str, Stamp], archives: Mapping[str, Stamp],
         path: Path | None = None, sessions: Iterable[str] | None = None) -> Stored | None:
    """The index of ``memory_root`` when it was made from exactly these stamps, else ``None``:
    the entries of ``sessions`` only (every session's when ``None``), the rest left unread."""
    where = str(memory_root.absolute())

    def holds(head: Any) -> bool:
        if not (type(head) is tuple and len(head) == 6):
            return False
        fmt, tag, at, t_stamps, a_stamps, reason = head
        if fmt != FORMAT or tag != code_tag() or at != where:
            return False
        if not (type(t_stamps) is dict and type(a_stamps) is dict and (reason is None or type(reason) is str)):
            return False
        # tables equal to the live ones (so of well-formed stamps), none of them racy (a racy
        # one is never stored, and one equal to a stored stamp is as old as it was then)
        return t_stamps == topics and a_stamps == archives and not any_racy(topics, archives)

    got = envelope.read_indexed(path or index_path(memory_root), KIND, VERSION, sessions, holds)
    if got is None:
        return None
    head, blobs = got
    return Stored(head[5], blobs)


def write(memory_root: Path, topics: Mapping[str, Stamp], archives: Mapping[str, Stamp], reason: str | None,
          entries: Mapping[str, Entry], path: Path | None = None) -> bool:
    """Keep the index made from files with these stamps (taken before they were read). Not
    when any stamp is racy: it could not tell a write made within the same tick."""
    if any_racy(topics, archives):
        return False
    try:
        blobs = {sid: envelope.packed_value(entry) for sid, entry in entries.items()}
    except ValueError:  # a value marshal cannot hold: nothing kept
        return False
    head = (FORMAT, code_tag(), str(memory_root.absolute()), dict(topics), dict(archives), reason)
    return envelope.write_indexed(path or index_path(memory_root), KIND, head, blobs, VERSION, make_folder=True)


def entries_of(raw: Mapping[tuple[str, str], Mapping[str, tuple[str, int, str]]], sources: Any
               ) -> dict[str, Entry]:
    """Every session's entry from ``Citations``' grouping (``raw``) and the source index."""
    groups: dict[str, list] = {}
    for (sid, nid), bucket in raw.items():
        groups.setdefault(sid, []).append((nid, tuple((mid, path, line, src) for mid, (path, line, src) in bucket.items())))
    frames: dict[str, list] = {}
    if sources is not None:
        prefix = "openprogram/"
        ids: set[str] = set()
        # every id an archive holds is in its file's outline (``SourceIndex.frame`` finds
        # nothing for any other)
        for entry in sources.files.values():
            ids.update(s for s in entry.outline()[0] if s.startswith(prefix))
        for source_id in sorted(ids):
            parts = source_id.split("/", 2)
            if len(parts) != 3 or not parts[1] or not parts[2]:
                continue
            fr = sources.frame(source_id)
            if fr is not None:
                frames.setdefault(parts[1], []).append((source_id, fr.path, fr.line))
    return {sid: (tuple(groups.get(sid, ())), tuple(frames.get(sid, ()))) for sid in {*groups, *frames}}


def _entry_ok(value: Any) -> bool:
    """Whether a decoded entry has the shape ``Entry`` says, checked column by column with
    C-level passes (``status`` decodes every session's entry: ~10^5 refs at scale 4)."""
    if not (type(value) is tuple and len(value) == 2 and type(value[0]) is tuple and type(value[1]) is tuple):
        return False
    groups, frames = value
    if not _rows_of(groups, 2, (str,), (tuple,)):
        return False
    refs = [ref for _nid, cites in groups for ref in cites]
    return _rows_of(refs, 4, (str,), (str,), (int, type(None)), (str,)) and _rows_of(frames, 3, (str,), (str,), (int,))


def _rows_of(rows: Any, width: int, *columns: tuple[type, ...]) -> bool:
    """Every row a tuple of ``width`` whose i-th values' exact types are among ``columns[i]``."""
    if not rows:
        return True
    if set(map(type, rows)) != {tuple} or set(map(len, rows)) != {width}:
        return False
    return all(set(map(type, column)) <= set(kinds) for column, kinds in zip(zip(*rows), columns))


def forget(memory_root: Path | str) -> None:
    """Delete the index of ``memory_root`` (benchmarks' cold runs, tests)."""
    try:
        os.unlink(index_path(memory_root))
    except OSError:
        pass


__all__ = ["Entry", "FORMAT", "KIND", "Stored", "VERSION", "code_tag", "entries_of", "forget", "index_path", "read",
           "stamps_now", "write"]
