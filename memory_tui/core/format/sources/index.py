"""The source index: every archive under ``sources/`` scanned once, lookups dictionary reads
(pitfall 4: OpenProgram re-reads a whole archive for every citation); link targets
(memory spec §3.5) and reference checks (§5.4 step 6) answered from it."""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat as stat_mod
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain, compress, repeat
from operator import not_
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from .entries import FROM_KEPT, UNPROVEN, ArchiveFile, _read_regular, classify, index_file, proven
from .ids import (_D_FRAGMENT, REF_PROBLEM, SOURCES_DIR, anchor, archive_path, d_anchor, d_archive_path,
                  is_v2_valid_id, parse_d_ref, split_source_id)
from .frames import FrameFacts, SourceFrame
from ..errors import CORRUPT_FILE, Problem
from ..paths import relpath
from ...cache.registry import keeps
from ...cache.stamp import NO_STAMP, stamp_of, stamp_racy


def _walk_sources(root: Path) -> Iterator[tuple[str, Path, os.stat_result]]:
    """Regular ``*.md`` files under ``<root>/sources`` (symlinks neither followed nor listed)."""
    top = root / SOURCES_DIR
    stack = [(top, SOURCES_DIR)]
    while stack:
        directory, rel = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            child_rel = f"{rel}/{entry.name}"
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                stack.append((Path(entry.path), child_rel))
            elif stat_mod.S_ISREG(st.st_mode) and entry.name.endswith(".md"):
                yield child_rel, Path(entry.path), st


def walk_sources(root: Path) -> Iterator[tuple[str, Path, os.stat_result]]:
    """The files ``SourceIndex.load`` indexes, with their stats (for the parse cache)."""
    return _walk_sources(root)


@keeps
@lru_cache(maxsize=8192)
def _sources_file_of(topic_path: str, rel_part: str) -> str | None:
    """The ``sources/`` file a link's path part names from ``topics/<topic_path>``, else
    ``None``. Cached: a topic's links point into a few archives, thousands of times."""
    if not rel_part or rel_part.startswith("/") or "\\" in rel_part or "\x00" in rel_part:
        return None
    topic_dir = posixpath.dirname(topic_path.replace("\\", "/").lstrip("/"))
    base = posixpath.join("topics", topic_dir) if topic_dir else "topics"
    joined = posixpath.normpath(posixpath.join(base, rel_part))
    if not joined.startswith(SOURCES_DIR + "/"):
        return None
    return joined


def _ref_problem(message: str, ref: str, rule: str) -> Problem:
    return Problem(REF_PROBLEM, message, None, None, None, {"ref": ref, "rule": rule})


class SourceResolver:
    """``index.resolve_target`` as a callable, with the index's ``file_lookup``."""

    __slots__ = ("_resolve", "file_lookup")

    def __init__(self, index: "SourceIndex") -> None:
        self._resolve = index.resolve_target
        self.file_lookup = index.file_lookup

    def __call__(self, topic_path: str, target: str) -> str | None:
        return self._resolve(topic_path, target)


@dataclass(frozen=True, eq=False)
class SourceIndex:
    """Every archive under ``<M>/sources`` scanned once; lookups are dictionary reads.

    The id maps lead to the archive entry holding a frame, not to the frame: an index is
    built from the entries' outlines, so archives whose frames nobody asks for (a cached
    load, a transaction) never build them."""

    root: Path
    files: Mapping[str, ArchiveFile]
    _v2: Mapping[str, ArchiveFile] = field(repr=False)  # source id -> the v2 entry whose frame wins
    _legacy: Mapping[str, ArchiveFile] = field(repr=False)  # source id -> the first legacy/D entry with it
    _trusted: frozenset[str] = field(repr=False)
    _pending: frozenset[str] = field(repr=False)
    _all: frozenset[str] = field(repr=False)

    # -- building -------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        memory_root: Path | str,
        previous: "SourceIndex | None" = None,
        walked: "Iterable[tuple[str, Path, os.stat_result]] | None" = None,
    ) -> "SourceIndex":
        """Index ``<memory_root>/sources``; with ``previous``, re-read only changed files.
        ``walked``: what ``walk_sources(memory_root)`` just gave (the caller's own walk)."""
        root = Path(memory_root)
        old = previous.files if previous is not None and Path(previous.root) == root else {}
        files: dict[str, ArchiveFile] = {}
        for rel, path, st in _walk_sources(root) if walked is None else walked:
            key = stamp_of(st)
            prior = old.get(rel)
            if prior is not None and prior.key == key and proven(prior):
                files[rel] = prior
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                problem = Problem(CORRUPT_FILE, f"unreadable: {exc.strerror}", rel)
                # a key no stat can have, so the next load tries again
                files[rel] = ArchiveFile(rel, classify(rel) or "legacy", NO_STAMP, (), False, problem)
                continue
            if len(data) != key[1]:  # changed while reading: index what was read, re-read next time
                key = (key[0], len(data), key[2], key[3])
            entry = files[rel] = index_file(rel, data, key, prior)
            if stamp_racy(key):  # a stamp that proves nothing: the next load reads the file again
                entry.__dict__[UNPROVEN] = True
        return cls.from_files(root, files)

    @classmethod
    def from_files(cls, root: Path | str, files: Mapping[str, ArchiveFile]) -> "SourceIndex":
        v2: dict[str, ArchiveFile] = {}
        legacy: dict[str, ArchiveFile] = {}
        # the id sets are built once each from these parts (no set copied into a frozenset)
        trusted_parts: list[Iterable[str]] = []
        pending_parts: list[Iterable[str]] = []
        other_parts: list[Iterable[str]] = []
        for rel in sorted(files):
            entry = files[rel]
            sids, _anchors, flags = entry.outline()
            if entry.kind == "v2":
                v2.update(zip(sids, repeat(entry)))  # a later file's frame overwrites, as before
                trusted_parts.append(compress(sids, flags))
                pending_parts.append(compress(sids, map(not_, flags)))
            else:
                for sid in sids:
                    legacy.setdefault(sid, entry)
                ids = sids if entry.kind == "d" else entry.comment_ids
                trusted_parts.append(ids)
                other_parts.append(ids)
        trusted = frozenset(chain.from_iterable(trusted_parts))
        pending = frozenset(chain.from_iterable(pending_parts)) - trusted
        every = frozenset(chain(v2, *other_parts))
        return cls(Path(root), dict(files), v2, legacy, trusted, pending, every)

    # -- queries --------------------------------------------------------------------------

    @property
    def problems(self) -> tuple[Problem, ...]:
        return tuple(f.problem for _, f in sorted(self.files.items()) if f.problem is not None)

    def frame(self, source_id: str) -> SourceFrame | None:
        """The v2 frame for ``source_id``, else the legacy (or D) one."""
        entry = self._v2.get(source_id) or self._legacy.get(source_id)
        return None if entry is None else entry.frame_of(source_id)

    def frame_facts(self, source_id: str) -> FrameFacts | None:
        """:class:`FrameFacts` of :meth:`frame`'s frame, without building the frames of an
        entry read from the parse cache."""
        entry = self._v2.get(source_id) or self._legacy.get(source_id)
        return None if entry is None else entry.facts_of(source_id)

    def v2_frame(self, source_id: str) -> SourceFrame | None:
        entry = self._v2.get(source_id)
        return None if entry is None else entry.frame_of(source_id)

    def has_v2(self, source_id: str) -> bool:
        """Whether a v2 archive holds ``source_id`` (no frame is built to say so)."""
        return source_id in self._v2

    def is_trusted(self, source_id: str) -> bool:
        return source_id in self._trusted

    def is_pending(self, source_id: str) -> bool:
        return source_id in self._pending

    def trusted_ids(self) -> frozenset[str]:
        return self._trusted

    def pending_ids(self) -> frozenset[str]:
        return self._pending

    def all_ids(self) -> frozenset[str]:
        return self._all

    def events(self) -> list[SourceFrame]:
        """Every readable frame once (v2 preferred over legacy copies), by (path, line, id)."""
        out = [entry.frame_of(sid) for sid, entry in self._v2.items()]
        out.extend(entry.frame_of(sid) for sid, entry in self._legacy.items() if sid not in self._v2)
        out.sort(key=lambda fr: (fr.path, fr.line, fr.source_id))
        return out

    def complete(self, rel: str) -> bool:
        entry = self.files.get(rel)
        return entry is None or entry.complete

    # -- §3.5 link targets ----------------------------------------------------------------

    def resolve_target(self, topic_path: str, target: str) -> str | None:
        """The source id a definition's link target names (memory spec §3.5), or ``None``.

        ``topic_path`` is relative to ``topics/`` (``people/ada.md``).
        """
        if not isinstance(target, str):
            return None
        target = target.strip()
        if not target:
            return None
        # 1. plain handle (a D reference starts with its "D": the usual file link skips the regex)
        if target[0] == "D" and parse_d_ref(target) is not None:
            return target
        if "#" not in target and is_v2_valid_id(target):
            return target
        # 2. relpath#fragment inside sources/
        if "#" in target:
            rel_part, _, fragment = target.partition("#")
            found = self._resolve_file_fragment(topic_path, rel_part, fragment)
            if found is not None:
                return found
        # 3. fallback: #d<n>-<m>
        m = _D_FRAGMENT.search(target)
        if m:
            return f"D{m.group(1)}:{m.group(2)}"
        return None

    @property
    def resolver(self) -> "SourceResolver":
        """``resolve_target`` as a resolver that also offers ``file_lookup`` (see ``topics``).
        A new one each time: kept on the index it would make the index part of a cycle, freed
        only by a full collection."""
        return SourceResolver(self)

    def file_lookup(self, topic_path: str, rel_part: str) -> Callable[[str], str | None] | None:
        """The function from a fragment to what ``resolve_target(topic_path, rel_part + "#" +
        fragment)`` finds in the file ``rel_part`` names, when that is an indexed v2 or legacy
        archive (steps 1 and 3 never apply to a target with "#" that the file answers)."""
        joined = _sources_file_of(topic_path, rel_part)
        entry = None if joined is None else self.files.get(joined)
        if entry is None or entry.kind not in ("v2", "legacy"):
            return None
        return entry.sid_at

    def _resolve_file_fragment(self, topic_path: str, rel_part: str, fragment: str) -> str | None:
        joined = _sources_file_of(topic_path, rel_part)
        if joined is None:
            return None
        entry = self.files.get(joined)  # only regular, non-symlink files are indexed
        if entry is None:
            return None
        if entry.kind in ("v2", "legacy"):
            return entry.sid_at(fragment)
        return None

    def link_for(self, source_id: str, from_dir: str) -> str:
        """Canonical committed link target for ``source_id`` from a workspace-relative dir.

        v2 frame -> ``…/sources/<p>/_v2/<t>.md#source-<hex16>``; only a legacy frame -> the
        legacy file; ``D<n>:<m>`` -> ``…/sources/D<n>.md#d<n>-<m>``. A source the index does
        not hold gets the v2 form.
        """
        from_dir = from_dir.strip("/") or "."
        if parse_d_ref(source_id) is not None:
            return relpath(d_archive_path(source_id), from_dir) + "#" + d_anchor(source_id)
        if source_id not in self._v2 and source_id in self._legacy:
            fr = self._legacy[source_id].frame_of(source_id)
            return relpath(fr.path, from_dir) + "#" + fr.anchor
        return relpath(archive_path(source_id), from_dir) + "#" + anchor(source_id)

    # -- §5.4 step 6 ----------------------------------------------------------------------

    def validate_ref(
        self,
        ref: str,
        *,
        new: bool = False,
        allowed: Iterable[str] | None = None,
        rule: str = "",
    ) -> Problem | None:
        """Check one source reference of a unit (memory spec §5.4 step 6).

        ``new``: the ref is new to that block id, so it must be a trusted v2 frame (a legacy
        or D source is accepted as is) and, when ``allowed`` is given (restricted or structured
        transactions), one of the allowed ids. ``rule`` names the citation rule that applied
        (pitfall 5); it goes into the problem's details.
        """
        dref = parse_d_ref(ref)
        if dref is not None:
            entry = self.files.get(d_archive_path(ref))
            if entry is None or entry.kind != "d" or not entry.has_anchor(d_anchor(ref)):
                return _ref_problem(f"missing source reference: {ref}", ref, rule or "exists")
            return self._check_new(ref, new, allowed, rule, v2=False)
        if split_source_id(ref) is None:
            return _ref_problem(f"invalid source reference: {ref}", ref, rule or "well-formed")
        if ref in self._v2:
            return self._check_new(ref, new, allowed, rule, v2=True)
        try:
            legacy_rel = archive_path(ref, legacy=True)
        except (ValueError, UnicodeEncodeError):
            return _ref_problem(f"invalid source reference: {ref}", ref, rule or "well-formed")
        entry = self.files.get(legacy_rel)
        if entry is not None and entry.kind == "legacy" and anchor(ref) in entry.anchor_lines:
            return self._check_new(ref, new, allowed, rule, v2=False)
        return _ref_problem(f"missing source reference: {ref}", ref, rule or "exists")

    def _verified(self, entry: ArchiveFile) -> ArchiveFile:
        """``entry``, or the entry its file's bytes give now when it came from a persisted
        cache and those bytes are no longer the ones it was made from (its sha256 digest). A
        trust verdict lets a citation into memory: it is decided on bytes read by this
        process, never on a value another process left behind."""
        if not entry.__dict__.get(FROM_KEPT):
            return entry
        path = os.path.join(self.root, entry.path)
        try:
            data = _read_regular(path)
        except OSError:
            data = None
        if data is not None and entry.digest and hashlib.sha256(data).hexdigest() == entry.digest:
            entry.__dict__.pop(FROM_KEPT, None)
            return entry
        if data is None:
            return ArchiveFile(entry.path, entry.kind, NO_STAMP, (), False, Problem(CORRUPT_FILE, "unreadable", entry.path))
        return index_file(entry.path, data, NO_STAMP)

    def _check_new(self, ref: str, new: bool, allowed: Iterable[str] | None, rule: str, *, v2: bool) -> Problem | None:
        if not new:
            return None
        if v2:
            fr = self._verified(self._v2[ref]).frame_of(ref)
            if fr is None:
                return _ref_problem(f"missing source reference: {ref}", ref, rule or "exists")
            if fr.meta is None or not fr.meta.trusted:
                return _ref_problem(f"source reference is not trusted; promote it first: {ref}", ref, rule or "trusted")
        if allowed is not None and ref not in set(allowed):
            return _ref_problem(
                f"source reference is not evidence of this transaction: {ref}", ref, rule or "transaction-evidence"
            )
        return None
