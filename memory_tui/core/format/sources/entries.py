"""One indexed file under ``sources/``: its frames, the outline an index is built from without
them, the stamp it was read at, and ``index_file``, which scans an archive once (and resumes
a v2 scan over bytes that only grew)."""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any, Callable, Mapping

from .frames import FrameFacts, SourceFrame
from .ids import _D_FILE, SOURCES_DIR, V2_DIR
from .legacy import scan_d, scan_legacy
from .scan import _V2_START, V2Scan, _frames_of, _well_formed_fields, scan_v2, scan_v2_appended
from ..errors import Problem
from ..fastdata import bulk
from ...cache.stamp import Stamp

StatKey = Stamp  # the cache kit's (mtime_ns, size, inode, ctime_ns)
# Set (in an entry's instance dict) on an entry rebuilt from a persisted cache rather than
# from bytes this process read: ``SourceIndex._verified`` checks its bytes before a trust
# verdict rests on it.
FROM_KEPT = "_from_kept"


# Set on an entry whose stamp was inside the clock tick when its bytes were read: the stamp
# may not show a write later in the same tick, so no later load reuses the entry by it.
UNPROVEN = "_unproven"


def proven(entry: "ArchiveFile") -> bool:
    """Whether ``entry``'s stamp vouches for its bytes (see ``UNPROVEN``)."""
    return UNPROVEN not in entry.__dict__


def _read_regular(path: str) -> bytes:
    """The bytes of a regular file, never through a symbolic link."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"not a regular file: {path}")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# The fields two indexes of the same bytes agree on (``scan`` and ``by_anchor`` are derived).
_COMPARED = ("path", "kind", "key", "frames", "complete", "problem", "comment_ids", "anchor_lines", "digest")
_SOURCE_ID, _ANCHOR, _TRUSTED = attrgetter("source_id"), attrgetter("anchor"), attrgetter("trusted")


@dataclass(frozen=True, eq=False)
class ArchiveFile:
    """One indexed file under ``sources/``.

    Besides its frames, an entry answers what an index is built from without them: the
    ``outline`` (source ids, anchors, trusted flags in frame order), ``sid_at`` / ``has_anchor``
    and ``frame_of``. :meth:`deferred` makes an entry whose frames are built only when asked
    for (a cached load needs the ids, not the 32 800 frames behind them).
    """

    path: str  # workspace-relative posix
    kind: str  # "v2" | "legacy" | "d"
    key: StatKey  # (mtime_ns, size, inode, ctime_ns)
    frames: tuple[SourceFrame, ...]
    complete: bool = True
    problem: Problem | None = None
    comment_ids: frozenset[str] = frozenset()
    anchor_lines: frozenset[str] = frozenset()
    digest: str = ""  # sha256 of the bytes indexed (lets an append-only change resume)
    scan: V2Scan | None = field(default=None, repr=False)
    by_anchor: Mapping[str, SourceFrame] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        frames = self.frames
        mapping: dict[str, SourceFrame] = dict(zip(map(_ANCHOR, frames), frames))
        if len(mapping) != len(frames):  # an anchor twice: the first frame with it wins
            mapping = {}
            for fr in frames:
                mapping.setdefault(fr.anchor, fr)
        object.__setattr__(self, "by_anchor", mapping)

    @classmethod
    def deferred(
        cls,
        path: str,
        kind: str,
        key: StatKey,
        outline: tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]],
        build: "Callable[[], tuple[SourceFrame, ...]]",
        complete: bool = True,
        comment_ids: frozenset[str] = frozenset(),
        anchor_lines: frozenset[str] = frozenset(),
        digest: str = "",
        scan_row: tuple[bool, bool, int, bool] | None = None,
        facts: "Callable[[], tuple[FrameFacts, ...]] | None" = None,
    ) -> "ArchiveFile":
        """An entry equal to ``ArchiveFile(path, kind, key, build(), …)`` whose frames (and
        ``scan``, ``by_anchor``) are built by ``build`` on first use. ``outline`` must be what
        the built frames' outline is; ``scan_row`` is ``(complete, ends_with_lf, n_lines,
        resumable)`` of a problem-free scan of those frames, ``None`` for no scan. ``facts``:
        the frames' :class:`FrameFacts` in frame order, built without the frames (``facts_of``
        then builds no frame). (Such an entry is not rebuilt by ``dataclasses.replace``: make a
        new one.)"""
        return _DeferredArchiveFile.make(path, kind, key, outline, build, complete, comment_ids, anchor_lines, digest,
                                         scan_row, facts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArchiveFile):
            return NotImplemented
        if self is other:
            return True
        return all(getattr(self, name) == getattr(other, name) for name in _COMPARED)

    def __hash__(self) -> int:
        return hash((self.path, self.kind, self.key, self.digest))

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self.outline()[0])

    def outline(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]]:
        """``(source ids, anchors, trusted flags)`` of the frames, in frame order."""
        got = self.__dict__.get("_outline")
        if got is None:
            frames = self.frames
            got = (tuple(map(_SOURCE_ID, frames)), tuple(map(_ANCHOR, frames)), tuple(map(_TRUSTED, frames)))
            got = self.__dict__.setdefault("_outline", got)
        return got

    def sid_at(self, anchor_value: str) -> str | None:
        """The source id of the first frame with this anchor (``by_anchor``'s), else ``None``."""
        fr = self.by_anchor.get(anchor_value)
        return None if fr is None else fr.source_id

    def has_anchor(self, anchor_value: str) -> bool:
        return anchor_value in self.by_anchor

    def facts_of(self, source_id: str) -> FrameFacts | None:
        """:class:`FrameFacts` of :meth:`frame_of`'s frame."""
        frame = self.frame_of(source_id)
        return None if frame is None else FrameFacts.of(frame)

    def frame_of(self, source_id: str) -> SourceFrame | None:
        """The frame the index holds for ``source_id`` from this file: the last one of a v2
        file (a later frame overwrites), the first one of a legacy or D file."""
        table = self.__dict__.get("_by_id")
        if table is None:
            table = {}
            if self.kind == "v2":
                for fr in self.frames:
                    table[fr.source_id] = fr
            else:
                for fr in self.frames:
                    table.setdefault(fr.source_id, fr)
            table = self.__dict__.setdefault("_by_id", table)
        return table.get(source_id)


class _DeferredArchiveFile(ArchiveFile):
    """An ``ArchiveFile`` whose frames are built on first use (see ``ArchiveFile.deferred``).

    The built values are kept in the instance dict with ``setdefault``, so threads racing
    on the first access all get the one object that was kept."""

    @classmethod
    def make(cls, path: str, kind: str, key: StatKey, outline: Any, build: Any, complete: bool,
             comment_ids: frozenset[str], anchor_lines: frozenset[str], digest: str,
             scan_row: tuple | None, facts: Any = None) -> "ArchiveFile":
        self = object.__new__(cls)
        self.__dict__.update(path=path, kind=kind, key=key, complete=complete, problem=None, comment_ids=comment_ids,
                             anchor_lines=anchor_lines, digest=digest, _outline=outline, _build=build,
                             _scan_row=scan_row, _facts_build=facts)
        return self

    def facts_of(self, source_id: str) -> FrameFacts | None:
        d = self.__dict__
        build = d.get("_facts_build")
        if build is None or "_frames" in d:
            return super().facts_of(source_id)
        table = d.get("_facts")
        if table is None:
            sids = d["_outline"][0]
            rows = build()
            if len(rows) != len(sids):
                raise ValueError(f"frame facts of {self.path} do not match the outline they were indexed by")
            if self.kind == "v2":  # as ``frame_of``: a later v2 frame overwrites, else the first one stays
                table = dict(zip(sids, rows))
            else:
                table = {}
                for sid, row in zip(sids, rows):
                    table.setdefault(sid, row)
            table = d.setdefault("_facts", table)
        return table.get(source_id)

    @property
    def frames(self) -> tuple[SourceFrame, ...]:  # type: ignore[override]
        d = self.__dict__
        got = d.get("_frames")
        if got is None:
            build = d.get("_build")
            if build is None:  # another thread built them (it keeps them before it lets go of the builder)
                return d["_frames"]
            built = build()
            if len(built) != len(d["_outline"][0]):
                raise ValueError(f"frames of {self.path} do not match the outline they were indexed by")
            got = d.setdefault("_frames", built)
            d.pop("_build", None)  # what it built them from is no longer needed
        return got

    @property
    def scan(self) -> V2Scan | None:  # type: ignore[override]
        row = self.__dict__["_scan_row"]
        if row is None:
            return None
        got = self.__dict__.get("_scan")
        if got is None:
            got = self.__dict__.setdefault("_scan", V2Scan(self.frames, row[0], None, *row[1:]))
        return got

    @property
    def by_anchor(self) -> Mapping[str, SourceFrame]:  # type: ignore[override]
        got = self.__dict__.get("_by_anchor")
        if got is None:
            mapping: dict[str, SourceFrame] = {}
            for fr in self.frames:
                mapping.setdefault(fr.anchor, fr)
            got = self.__dict__.setdefault("_by_anchor", mapping)
        return got

    def _anchor_ids(self) -> dict[str, str]:
        got = self.__dict__.get("_anchor_map")
        if got is None:
            sids, anchors, _trusted = self.__dict__["_outline"]
            mapping: dict[str, str] = {}
            for a, s in zip(anchors, sids):
                mapping.setdefault(a, s)
            got = self.__dict__.setdefault("_anchor_map", mapping)
        return got

    def sid_at(self, anchor_value: str) -> str | None:
        return self._anchor_ids().get(anchor_value)

    def has_anchor(self, anchor_value: str) -> bool:
        return anchor_value in self._anchor_ids()

    def __reduce__(self) -> tuple:
        # a copy or pickle is the plain entry it stands for (its builder is not data)
        return (ArchiveFile, (self.path, self.kind, self.key, self.frames, self.complete, self.problem,
                              self.comment_ids, self.anchor_lines, self.digest, self.scan))


def classify(rel: str) -> str | None:
    """``v2`` for ``sources/<p>/_v2/<t>.md``, ``d`` for ``sources/D<n>.md``, else ``legacy``."""
    parts = rel.split("/")
    if not rel.endswith(".md") or len(parts) < 2 or parts[0] != SOURCES_DIR:
        return None
    if len(parts) == 4 and parts[2] == V2_DIR:
        return "v2"
    if len(parts) == 2 and _D_FILE.fullmatch(parts[1]):
        return "d"
    return "legacy"


def index_file(rel: str, data: bytes, key: StatKey = (0, 0, 0, 0), previous: ArchiveFile | None = None) -> ArchiveFile:
    """Index one archive. With ``previous`` (an earlier index of the same path) and bytes that
    only grew, a v2 scan resumes after the old end instead of starting over."""
    kind = classify(rel) or "legacy"
    if kind == "v2":
        scan = None
        if (
            previous is not None
            and previous.scan is not None
            and previous.scan.resumable
            and previous.digest
            and len(data) > previous.key[1]
        ):
            hasher = hashlib.sha256(data[: previous.key[1]])
            if hasher.hexdigest() == previous.digest:
                scan = scan_v2_appended(rel, data, previous.scan, previous.key[1])
                if scan is not None:
                    hasher.update(data[previous.key[1] :])
                    digest = hasher.hexdigest()
        if scan is None:
            digest = hashlib.sha256(data).hexdigest()
            entry = _well_formed_entry(rel, data, key, digest)
            if entry is not None:
                return entry
            scan = scan_v2(rel, data)
        return ArchiveFile(rel, kind, key, scan.frames, scan.complete, scan.problem, digest=digest, scan=scan)
    legacy = scan_d(rel, data) if kind == "d" else scan_legacy(rel, data)
    return ArchiveFile(
        rel, kind, key, legacy.frames, legacy.problem is None, legacy.problem, legacy.comment_ids, legacy.anchor_lines
    )


def _well_formed_entry(rel: str, data: bytes, key: StatKey, digest: str) -> ArchiveFile | None:
    """``index_file``'s entry for a well-formed v2 archive, its frames built when first asked
    for (a cold load's readers need the ids, anchors and trust flags, not 32 800 frames, as
    the parse cache's entries do); ``None`` for any other archive."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    read = _well_formed_fields(rel, text) if text.startswith(_V2_START) else None
    if read is None:
        return None
    fields, n_lines, resumable = read
    sids, anchors, trusted = (tuple(map(itemgetter(i), fields)) for i in range(3))

    def build() -> tuple[SourceFrame, ...]:
        with bulk():
            return _frames_of(rel, fields)

    entry = ArchiveFile.deferred(rel, "v2", key, (sids, anchors, trusted), build, True, digest=digest,
                                 scan_row=(True, True, n_lines, resumable))
    vars(entry)[HANDED] = (fields, (True, True, n_lines, resumable))
    return entry


# A well-formed archive's entry hands the parse cache each frame's fields as they were read:
# reading them back off 32 800 frames at a cold flush costs several times more (memory-bound
# attribute reads). Kept on the entry (not a field: equality, hash and repr ignore it) until
# taken.
HANDED = "_handed_fields"


def take_handed(entry: ArchiveFile) -> tuple[list[tuple], tuple[bool, bool, int, bool]] | None:
    """What ``entry`` (an ``index_file`` entry of a well-formed v2 archive) was made from, at
    most once (``None`` after, or for an entry made another way): the fields of every frame,
    in order, ``(source_id, anchor, trusted, speaker_id_raw, meta_token, lines, timestamp,
    speaker_label, offset of the text in its first record line, pending, line)`` (path and
    kind are the entry's own, ``v2``), and its scan's ``(complete, ends_with_lf, n_lines,
    resumable)``."""
    return vars(entry).pop(HANDED, None)
