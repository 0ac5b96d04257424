"""Canonical proofs: ``(path, sha256, signature)`` for which normalising the file was observed
to be the identity (no local labels, no allocation, no pruning, no problems).

OpenProgram re-normalises every file on every transaction; memory-tui passes a file through
unchanged only when such a proof exists, and re-normalises every other file.

Proofs also persist across processes in ``<M>/<runtime-dir>/memory-tui-canonical`` (and an
append-only log beside it; both envelopes of the cache kit, the log one small envelope per
appended proof): inside the runtime dir, so an internal name (memory spec §2.1)
that is neither part of the revision nor of git, and never copied into a stage. The file
names the code it was made with (a digest of the normaliser, grammar, archive and cache
modules); a file made by other code, or one that does not parse, is ignored. Losing it only
costs speed. This module is the only one that knows that on-disk format.
"""

from __future__ import annotations

import os
import stat as stat_mod
from functools import lru_cache
from itertools import compress
from operator import is_not, itemgetter
from pathlib import Path
from typing import Mapping

from ..format.normalize import has_local_label
from ..format.paths import Layout
from ..format.sources import SourceIndex
from ..cache import envelope
from ..fsutil import replace_cache_file
from .committed import CommittedFiles
from .memos import without
from .treecache import TreeCache
from ..cache.registry import keeps

CACHE_NAME = "memory-tui-canonical"
CACHE_VERSION = 2  # 2: envelopes of the cache kit (1 was JSON)
KIND, LOG_KIND = "canonical", "canonical-log"
MAX_DISK_PROOFS = 200_000
LOG_NAME = "memory-tui-canonical.log"
LOG_MIN_BYTES = 64 << 10  # the log is folded into the proofs file past this, or half that file's size
_HEX = frozenset("0123456789abcdef")


@keeps
@lru_cache(maxsize=1)
def code_tag() -> str:
    """A digest of the code whose output a proof vouches for."""
    from ..cache.codetag import code_tag as tag_of
    from ..format import blocklinks, normalize, sources, topics
    from . import proofs, treecache

    # blocklinks: normalising rewrites every block link, so its rules are part of the proof
    return tag_of(normalize, blocklinks, topics, sources, proofs, treecache, salt=f"v{CACHE_VERSION}", length=16)


class CanonicalProofs:
    """The canonical proofs of one memory root, in memory and on disk. A proof holds for a
    text while its parse's signature is the one proven (``trees.entry``)."""

    def __init__(self, trees: TreeCache, committed: CommittedFiles) -> None:
        self.trees = trees
        self.committed = committed
        self.proofs: dict[tuple[str, str], str] = {}  # (rel, sha) -> deps signature
        self.proven_now: dict[str, tuple[str, object]] = {}  # rel -> (text object, token) proven
        self._disk_loaded = False
        self._unsaved: dict[tuple[str, str], str] = {}  # proofs made since the last ``save``
        self._base_bytes = 0  # the proofs file's size when last read or written

    def is_proven(self, rel: str, text: str, index: SourceIndex, token: object) -> bool:
        if self._proven_as(rel, text, token):
            return True
        digest = self.committed.sha_of(rel, text)
        sig = self.proofs.get((rel, digest))
        if sig is None:
            return False
        proven = self.trees.entry(rel, text, index, token, digest).sig == sig
        if proven:
            self.proven_now[rel] = (text, token)
        return proven

    def prove(self, rel: str, text: str, index: SourceIndex, token: object) -> None:
        """Record that normalising ``text`` at ``rel`` was the identity."""
        if self._proven_as(rel, text, token):
            return
        digest = self.committed.sha_of(rel, text)
        entry = self.trees.entry(rel, text, index, token, digest)
        if self.proofs.get((rel, digest)) != entry.sig:
            if has_local_label(text) or not entry.topic.ok:
                return
            self.proofs[(rel, digest)] = entry.sig
            self._unsaved[(rel, digest)] = entry.sig
        self.proven_now[rel] = (text, token)

    def _proven_as(self, rel: str, text: str, token: object) -> bool:
        """This very text object was found proven under this very archive token (the same
        bytes and the same signature: the answer cannot have changed, and proofs of live
        texts are never forgotten)."""
        hit = self.proven_now.get(rel)
        return hit is not None and hit[0] is text and hit[1] is token

    def entry_count(self) -> int:
        return len(self.proofs) + len(self.proven_now)

    def retain(self, keep: set, live: Mapping[str, str]) -> None:
        """Forget the proofs whose ``(path, sha256)`` is not in ``keep``, and the texts found
        proven that are no longer the live text objects."""
        self.proofs = without(self.proofs, self.proofs.keys() - keep)
        now = self.proven_now
        self.proven_now = without(now, compress(now, map(is_not, map(live.get, now), map(_TEXT, now.values()))))

    def _path(self, layout: Layout) -> Path:
        return layout.runtime_dir / CACHE_NAME

    def load(self, layout: Layout) -> None:
        if self._disk_loaded:
            return
        self._disk_loaded = True
        on_disk: dict[tuple[str, str], str] = {}
        try:
            raw = self._path(layout).read_bytes()
        except OSError:
            raw = b""
        body = envelope.unpack(KIND, raw, CACHE_VERSION) if raw else None
        try:
            if type(body) is tuple and len(body) == 2 and body[0] == code_tag():
                for rel, pairs in body[1].items():
                    for digest, sig in pairs.items():
                        if type(rel) is str and type(digest) is str and type(sig) is str:
                            on_disk[(rel, digest)] = sig
                self._base_bytes = len(raw)
        except (ValueError, TypeError, AttributeError):  # not the shape this code writes
            on_disk.clear()
        on_disk.update(read_proof_log(layout.runtime_dir / LOG_NAME))  # later proofs win, as in memory
        for key, sig in on_disk.items():
            self.proofs.setdefault(key, sig)

    def save(self, layout: Layout) -> None:
        """Write the proofs made since the last save (best effort; only after an install).

        The proofs file is rewritten whole only now and then: in between, each save appends
        its new proofs to ``LOG_NAME`` (every edit proves about one text, and re-sorting and
        dumping every live proof after each one cost O(topics)). A rewrite (atomic replace,
        0600) holds every live proof, then starts an empty log. Proofs are facts about
        ``(path, sha256, signature)`` under one code tag, true whichever base file they sit
        beside; a proof on disk for a text no longer live costs only bytes, until the next
        rewrite leaves it out."""
        added = [(key, sig) for key, sig in self._unsaved.items() if self.proofs.get(key) == sig]
        self._unsaved = dict(added)  # what retain dropped is not written (nor kept for later)
        if not added:
            return
        if len(self.proofs) > MAX_DISK_PROOFS:
            return
        runtime = layout.runtime_dir
        try:
            if not runtime.is_dir() or runtime.is_symlink():
                return  # never write through a symlinked runtime dir
            size = append_proof_log(runtime / LOG_NAME, added)
            if size is not None and size <= max(LOG_MIN_BYTES, self._base_bytes // 2):
                self._unsaved = {}
                return
            self._write_proofs(layout)
        except OSError:
            pass

    def _write_proofs(self, layout: Layout) -> None:
        out: dict[str, dict[str, str]] = {}
        for (rel, digest), sig in sorted(self.proofs.items()):
            out.setdefault(rel, {})[digest] = sig
        data = envelope.pack(KIND, (code_tag(), out), CACHE_VERSION)
        replace_cache_file(self._path(layout), data)
        # only now: a log dropped before the base holding its proofs is in place loses them
        replace_cache_file(layout.runtime_dir / LOG_NAME, _log_header())
        self._base_bytes = len(data)
        self._unsaved = {}


_TEXT = itemgetter(0)



def _log_header() -> bytes:
    """The log's first record: the code its proofs were made by (stable bytes, so a writer
    compares them as they are)."""
    return envelope.pack(LOG_KIND, code_tag(), CACHE_VERSION, stable=True)


def _log_line(rel: str, digest: str, sig: str) -> bytes:
    return envelope.pack(LOG_KIND, (rel, digest, sig), CACHE_VERSION, stable=True)


def read_proof_log(path: Path) -> dict[tuple[str, str], str]:
    """The proofs ``path`` holds, in order (a later one for the same key wins): none unless
    its first record names this code; only intact records (``envelope.records``) that are a
    ``(path, sha256, signature)``, so a record cut short by a crash, or what a crash left in
    its place, is skipped."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    header = _log_header()
    if not data.startswith(header):
        return {}
    out: dict[tuple[str, str], str] = {}
    for item in envelope.records(LOG_KIND, memoryview(data)[len(header):], CACHE_VERSION):
        if (type(item) is tuple and len(item) == 3 and all(type(x) is str for x in item)
                and len(item[1]) == 64 and _HEX.issuperset(item[1])):
            out[(item[0], item[1])] = item[2]
    return out


def append_proof_log(path: Path, proofs: list[tuple[tuple[str, str], str]]) -> int | None:
    """Append ``proofs`` to the log at ``path`` in one write and return its size after;
    ``None`` (nothing written) when there is no log for this code to append to. The header
    is read through the very descriptor written to, so a log replaced meanwhile by another
    process (or code) only takes the lines into the file it no longer names."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # none yet, or not a file memory-tui made (a symlink): the caller starts one
        return None
    try:
        header = _log_header()
        st = os.fstat(fd)
        if not stat_mod.S_ISREG(st.st_mode) or os.pread(fd, len(header), 0) != header:
            return None
        # a record a crash cut short needs nothing here: the reader goes on from the next record
        data = b"".join(_log_line(rel, digest, sig) for (rel, digest), sig in proofs)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


__all__ = ["CACHE_NAME", "CanonicalProofs", "LOG_NAME", "append_proof_log", "code_tag", "read_proof_log"]
