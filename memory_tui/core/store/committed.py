"""Committed bytes by stamp: what a transaction may take from the last one instead of reading
the files again.

A file whose stat stamp ``(mtime_ns, size, inode, ctime_ns)`` did not change, and was older
than the clock tick when it was read, holds the bytes read then: a write cannot keep such a
stamp (git's "racily clean" rule). A younger stamp proves nothing, and the file is read again.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
import threading
import time
from itertools import compress
from operator import ne
from pathlib import Path
from typing import Mapping

from ..format.errors import Problem
from ..format.topics import INVALID_TOPIC_FORMAT, read_topic_file
from ..cache.stamp import RACY_NS, is_racy
from ..switches import Switches
from .walk import STAMP_OF, Stamp, stamps_under

READ_AGAIN_MAX = 64  # topic files looked at again by ``_read_again``; beyond that the full loop


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _topic_symlinks(topics_dir: Path) -> list[str]:
    """Topics-relative paths of symbolic links (files or folders) under ``topics_dir``."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(topics_dir):
        for name in (*dirnames, *filenames):
            path = Path(dirpath, name)
            if path.is_symlink():
                out.append(path.relative_to(topics_dir).as_posix())
    return sorted(out)


class CommittedFiles:
    """The committed topic texts (by stamp), values made from one file's bytes (by bytes or
    stamp), and committed derived files known to hold a text. Shares the workspace cache's lock."""

    def __init__(self, root: Path, lock: threading.RLock) -> None:
        self.root = root
        self.lock = lock
        self.files: dict[str, tuple[tuple[int, int, int, int], str, str]] = {}  # rel -> (stat, text, sha)
        # the last walked ``read_topics``: (its paths, their stamps, the positions to read again,
        # (texts, shas) answered, the ``files`` it left)
        self._last_read: tuple | None = None
        self._by_bytes: dict[str, tuple[bytes, object]] = {}
        self._by_stamp: dict[str, tuple[Stamp, object]] = {}  # ``by_stamp``: key -> (the file's stamp, value)
        self._derived: dict[str, tuple[Stamp, str]] = {}  # committed derived file -> (stamp, text)

    def sha_of(self, rel: str, text: str) -> str:
        """The SHA-256 of ``text``, from the committed file ``rel`` when it holds that text."""
        hit = self.files.get(rel)
        if hit is not None and (hit[1] is text or hit[1] == text):  # comparing is cheaper than hashing
            return hit[2]
        return sha(text)

    def read_topics(self, topics_dir: Path, walk: tuple[Mapping[str, Stamp], tuple[str, ...]] | None = None, *,
                    switches: Switches) -> tuple[dict[str, str], dict[str, str], list[Problem]]:
        """Like ``topics.read_topic_texts`` (same files, same problems), plus each text's
        sha256; files whose stats did not change are not read again. ``walk`` is
        ``revision_walk`` of the workspace holding ``topics_dir``, taken just before: its
        listing and stamps are used instead of walking and stat-ing the tree again."""
        texts: dict[str, str] = {}
        shas: dict[str, str] = {}
        problems: list[Problem] = []
        if not topics_dir.is_dir():
            self.files.clear()
            self._last_read = None
            return texts, shas, problems
        if walk is not None and "topics" not in walk[1]:
            stamps = walk[0]
            rels, listed = stamps_under(stamps, "topics/", ".md")
            links = [rel[7:] for rel in walk[1] if rel.startswith("topics/")]

            def full() -> tuple[dict[str, str], dict[str, str], list[Problem]]:
                return self._read_listed(topics_dir, [(rel[7:], st) for rel, st in zip(rels, listed)], links, rels)

            return switches.choose("committed topic texts", lambda: self._read_again(topics_dir, rels, listed, links) or full(),
                                    full, lambda a, b: a == b and list(a[0]) == list(b[0]))
        try:
            found = sorted(topics_dir.rglob("*.md"))
        except OSError as exc:
            problems.append(Problem(INVALID_TOPIC_FORMAT, f"cannot list topic files: {exc.strerror or exc}", "topics", None, None))
            return texts, shas, problems
        listing = []
        links = _topic_symlinks(topics_dir)
        for file in found:
            rel = file.relative_to(topics_dir).as_posix()
            if any(rel == link or rel.startswith(link + "/") for link in links):
                continue
            try:
                st = file.stat()
            except OSError:
                continue
            if not stat_mod.S_ISREG(st.st_mode):
                continue
            listing.append((rel, (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)))
        return self._read_listed(topics_dir, listing, links)

    def _read_again(self, topics_dir: Path, rels: list[str], listed: list[Stamp], links: list[str],
                    ) -> tuple[dict[str, str], dict[str, str], list[Problem]] | None:
        """``_read_listed``'s answer from the last one's, when the walk lists the same topic
        files: only those whose stamps moved, or that were young or unreadable last time,
        are looked at again (a stamp that did not move and was old then is what the full
        loop would find in ``files`` under that very key). ``None`` when it cannot tell:
        another listing, a symbolic link, too many changes, or a file that becomes readable
        (the full loop would put it in its place in the order)."""
        last = self._last_read
        if last is None or links or last[4] is not self.files or last[0] != rels:
            return None
        _rels, before, again, answer, _seen = last
        at = sorted(again.union(compress(range(len(listed)), map(ne, listed, before))))
        if len(at) > READ_AGAIN_MAX:
            return None
        texts, shas = dict(answer[0]), dict(answer[1])
        seen = dict(self.files)
        problems: list[Problem] = []
        again = set()
        young_after = time.time_ns() - RACY_NS
        for i in at:
            rel, stamp = rels[i][7:], listed[i]
            read = self._read_one(topics_dir, rel, stamp, young_after)
            if isinstance(read, Problem):
                problems.append(read)
                texts.pop(rel, None)
                shas.pop(rel, None)
                seen.pop(rel, None)
                again.add(i)
                continue
            if rel not in texts:
                return None
            seen[rel] = read
            texts[rel], shas[rel] = read[1], read[2]
            if read[0][0] == -1:
                again.add(i)
        self.files = seen
        self._last_read = (rels, listed, again, (texts, shas), seen)
        return texts, shas, problems  # never changed once answered: the next call copies them

    def _read_one(self, topics_dir: Path, rel: str, stamp: Stamp, young_after: int,
                  ) -> tuple[Stamp, str, str] | Problem:
        """One listed file as ``files`` keeps it, from ``files`` when its stamp proves it."""
        # a file changed twice within one clock tick keeps its stamps (git's "racily clean"
        # rule): a young stamp proves nothing, and the file is read again next time
        key = (-1, -1, -1, -1) if (stamp[0] > young_after or stamp[3] > young_after) else stamp
        hit = self.files.get(rel)
        if hit is not None and key[0] != -1 and hit[0] == key:
            return hit
        text, data, problem = read_topic_file(topics_dir, rel)
        if problem is not None:
            return problem
        assert text is not None
        if len(data) != stamp[1]:
            key = (-1, -1, -1, -1)  # changed while reading: read again next time
        return key, text, hashlib.sha256(data).hexdigest()

    def _read_listed(self, topics_dir: Path, listing: list[tuple[str, Stamp]], links: list[str],
                     walked: list[str] | None = None) -> tuple[dict[str, str], dict[str, str], list[Problem]]:
        texts: dict[str, str] = {}
        shas: dict[str, str] = {}
        problems: list[Problem] = []
        seen: dict[str, tuple[tuple[int, int, int, int], str, str]] = {}
        root = topics_dir.resolve().parent
        for rel in links:
            target = (topics_dir / rel).resolve()
            outside = not target.is_relative_to(root)
            problems.append(Problem(
                "PATH_OUTSIDE_WORKSPACE" if outside else INVALID_TOPIC_FORMAT,
                f"topic entry is a symbolic link{' to outside the workspace' if outside else ''}; a write "
                "would replace or remove it, so none is made until it is a regular file or gone",
                "topics/" + rel, None, None, {"kind": "symlink"},
            ))
        # ``is_racy`` against one clock reading taken before any check: an earlier "now" only
        # calls more stamps young (read again), never fewer
        young_after = time.time_ns() - RACY_NS
        again: set[int] = set()  # positions to look at again next time: young or unreadable
        for i, (rel, stamp) in enumerate(listing):
            read = self._read_one(topics_dir, rel, stamp, young_after)
            if isinstance(read, Problem):
                problems.append(read)
                again.add(i)
                continue
            seen[rel] = read
            texts[rel], shas[rel] = read[1], read[2]
            if read[0][0] == -1:
                again.add(i)
        self.files = seen
        # what ``_read_again`` starts from: only for a walk's listing without symbolic links
        self._last_read = (walked, [st for _rel, st in listing], again, (texts, shas), seen) \
            if walked is not None and not links else None
        return texts, shas, problems

    def by_bytes(self, key: str, path: Path, load):
        """``load()`` (which reads ``path``), remembered per ``key`` while ``path`` holds the
        same bytes: a 20 000-id ``runtime.json`` is parsed and checked once, not per edit."""
        return self._by_bytes_read(key, path, load)[0]

    def _by_bytes_read(self, key: str, path: Path, load) -> tuple[object, bytes | None]:
        """``by_bytes``' value, and the bytes of ``path`` it is known to be made from (None
        when that is not known: the file could not be read, or changed while ``load`` ran)."""
        try:
            data = path.read_bytes()
        except OSError:
            return load(), None
        with self.lock:
            hit = self._by_bytes.get(key)
        if hit is not None and hit[0] == data:
            return hit[1], data
        value = load()
        try:
            same = path.read_bytes() == data  # what ``load`` read is what is remembered
        except OSError:
            same = False
        if same:
            with self.lock:
                self._by_bytes[key] = (data, value)
            return value, data
        return value, None

    def by_stamp(self, key: str, path: Path, stamp: Stamp | None, load):
        """``by_bytes(key, path, load)``, where ``stamp`` is ``path``'s stamp in the walk the
        caller's reads are checked against (``None``: not known). While that stamp is the one
        remembered for ``key`` and older than the clock tick, the file is not read at all: no
        write can keep such a stamp, so the file holds the bytes the value was made from (or
        it has moved since the walk, which the walk under the lock finds). Remembered only
        when the file, once read, still has that stamp and its size: a 20 000-id
        ``runtime.json`` (1.8 MB) was read and compared on every edit."""
        if stamp is None or is_racy(stamp[0], stamp[3]):
            return self.by_bytes(key, path, load)
        stamp = tuple(stamp)
        with self.lock:
            hit = self._by_stamp.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value, data = self._by_bytes_read(key, path, load)
        if data is not None and len(data) == stamp[1]:
            try:
                st = os.lstat(path)
            except OSError:
                return value
            if STAMP_OF(st) == stamp:
                with self.lock:
                    self._by_stamp[key] = (stamp, value)
        return value

    # -- committed derived files ----------------------------------------------------------
    def committed_equals(self, rel: str, stamp: Stamp | None, text: str) -> bool:
        """The committed file ``rel``, as stamped ``stamp`` (when the stage was read), holds
        exactly ``text``. Remembered per stamp, so an unchanged derived file is neither read
        nor written again; a stamp younger than the clock tick proves nothing and the file is
        read (only the files the last install wrote are that young)."""
        if stamp is None:
            return False
        with self.lock:
            hit = self._derived.get(rel)
        if hit is not None and hit[0] == stamp and not is_racy(stamp[0], stamp[3]):
            if hit[1] is text:
                return True
            if hit[1] == text:
                with self.lock:
                    self._derived[rel] = (stamp, text)  # the next compare is by identity
                return True
            return False
        path = self.root / rel
        try:
            data = path.read_bytes()
            st = os.lstat(path)
        except OSError:
            return False
        if (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) != tuple(stamp) or len(data) != stamp[1]:
            return False  # changed since the stage was read: write it (the install re-checks)
        try:
            committed = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        same = committed == text
        if not is_racy(stamp[0], stamp[3]):
            with self.lock:
                if len(self._derived) > 100_000:
                    self._derived.clear()
                self._derived[rel] = (stamp, text if same else committed)
        return same


__all__ = ["CommittedFiles", "READ_AGAIN_MAX", "sha"]
