"""A persistent parse cache: a fresh process starts from the last one's parses.

Two kinds of parse entry, one file each (or one pack per kind), under ``<M>/<runtime-dir>/memory-tui-cache/<code tag>/``:

* **archives/** — the scanned :class:`~memory_tui.core.format.sources.ArchiveFile` of one
  ``sources/**/*.md`` file, keyed by its path and ``(mtime_ns, size, inode)``;
* **topics/** — the strict parse of one ``topics/**/*.md`` file, keyed by its path, the same
  stat key and the sha256 of its bytes, plus the archive dependencies of that parse
  (``topic_deps``) and their signature (``deps_signature``).

Exactness: an entry is used only when the file's stat key (for topics: or its digest) is
the one it was made from *and*, for a topic, the signature of every archive its links
point into is unchanged; anything else is parsed again. Stamps younger than the kernel's
clock tick (``is_racy``) are never stored, so a file rewritten within one tick
cannot hide behind an old entry. Topics whose parse has problems are never stored: a file
that needs reporting is always parsed for real. The directory name is a digest of the
parser code and the cache format, so other code's entries are never read.

The cache lives in the runtime dir: an internal name (memory spec §2.1) outside the revision
and outside git, never copied into a stage; OpenProgram ignores it. Topic and archive entries
are *rows* (plain tuples of their fields, rebuilt with positional constructors only when
used; a cold flush writes each kind as one ``<kind>.pack``); derived entries are plain data
too (id sets, strings, tuples). Every file is one envelope of the cache kit
(``cache.envelope``: kind, version, crc32, marshal payload), so no file names a class and
nothing but plain data comes out of one. A corrupt, truncated, foreign or unreadable entry
is ignored (and overwritten when its file is parsed again), never an error. Losing the cache
only costs time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import posixpath
import shutil
import threading
import time
from functools import lru_cache
from itertools import chain, repeat
from operator import attrgetter, itemgetter, methodcaller
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..format.fastdata import bulk
from ..fsutil import md_file_stats, replace_cache_file
from ..format.paths import Layout
from ..cache import envelope
from ..cache.stamp import NO_STAMP, RACY_NS, SIZE, Stamp, is_racy, is_stamp, stamp_of, stamp_racy  # noqa: F401 (re-exported)
from ..format.sources import (FROM_KEPT, proven, SourceIndex, archive_paths, d_archive_path, parse_d_ref,
                              split_source_id, walk_sources)
from ..format.topics import Topic, assemble_tree, handed_links, parse_topic, read_topic_file, topic_sort_key
from ..cache.registry import keeps



def topic_deps(topic: Topic) -> tuple[str, ...]:
    """Every ``sources/`` file whose content can change how ``topic`` parses or normalises."""
    handed = handed_links(topic)
    if handed is not None:  # the link fields the one-pass reader kept: no read of the objects
        targets, sids = list(map(_SECOND, handed)), list(map(_THIRD, handed))
    else:
        links = list(chain.from_iterable(map(_LINKS, topic.evidence)))
        targets, sids = list(map(_TARGET, links)), list(map(_SOURCE_ID, links))
    deps: set[str] = set()
    topic_dir = posixpath.dirname("topics/" + topic.path)
    # the file part of each link target (a topic links into a handful of archives)
    for rel_part in set(map(_FIRST, map(_PARTITION_HASH, map(str.strip, targets)))):
        joined = _file_dep(topic_dir, rel_part)
        if joined is not None:
            deps.add(joined)
    cited = set(sids)
    cited.discard(None)
    cited.discard("")
    if not cited:
        return tuple(sorted(deps))
    # an archive pair per place (provider and thread); most topics cite one or two places, so
    # the ids of the place of any one id are checked together: an id starting with
    # "<provider>/<thread>/" and longer splits into exactly those (neither holds a "/")
    places: dict[tuple[str, str], str] = {}  # (provider, thread) -> one id of it
    rest = cited
    some = next(iter(cited))
    parts = split_source_id(some)
    if parts is not None:
        place = f"{parts[0]}/{parts[1]}/"
        if all(map(str.startswith, cited, repeat(place))) and min(map(len, cited)) > len(place):
            places[parts[0], parts[1]] = some
            rest = ()
    for sid in rest:
        if sid[0] == "D" and parse_d_ref(sid) is not None:
            deps.add(d_archive_path(sid))
            continue
        parts = split_source_id(sid)
        if parts is not None:
            places.setdefault((parts[0], parts[1]), sid)
    for sid in places.values():  # the two paths depend on the place only
        try:
            v2, legacy = archive_paths(sid)
        except (ValueError, UnicodeEncodeError):
            continue
        deps.add(v2)
        deps.add(legacy)
    return tuple(sorted(deps))


_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)
_PARTITION_HASH = methodcaller("partition", "#")
_TARGET = attrgetter("target")
_LINKS = attrgetter("links")
_SOURCE_ID = attrgetter("source_id")


@keeps
@lru_cache(maxsize=16384)
def _file_dep(topic_dir: str, rel_part: str) -> str | None:
    """The ``sources/`` file a link's path part names. Cached: thousands of links share a
    handful of archive files."""
    if rel_part and not rel_part.startswith("/") and "\\" not in rel_part:
        joined = posixpath.normpath(posixpath.join(topic_dir, rel_part))
        if joined.startswith("sources/"):
            return joined
    return None


def deps_signature(index: SourceIndex, deps: Iterable[str]) -> str:
    h = hashlib.sha256()
    for rel in deps:
        entry = index.files.get(rel)
        if entry is None:
            token = "-"
        elif entry.kind == "v2" and entry.digest:
            token = entry.digest
        else:
            token = f"{entry.kind}:{entry.key}"
        h.update(f"{rel}\x00{token}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


DIR_NAME = "memory-tui-cache"
FORMAT = 5  # 5: every file an envelope of the cache kit, every value plain data
# Per-topic values derived from one parse, keyed by what they are a function of:
# "views" (sha256, deps signature) -> viewcache.TopicPart as plain tuples (``part_plain``); "ids" (sha256,) -> file_block_ids;
# "refs" (sha256, deps signature) -> whether every source ref of the parse exists;
# "lineids" / "defids" (sha256,) -> normalize's per-text id sets (``WorkspaceCache.memo``);
# "links" (sha256, digest of the locations of the ids it links to) -> rewrite_block_links'
# output for the file; "scan" (sha256,) -> changes.scan_summary (what a record op needs of a
# file it does not touch); "blinks" (sha256,) -> normalize.topic_link_summary. Readers check
# the value's type: anything else is a miss.
DERIVED = ("views", "ids", "refs", "lineids", "defids", "links", "scan", "blinks")
# Kinds whose values are small: one envelope holds every entry of the kind (``<kind>.pack``),
# so a fresh process opens, checks and decodes one file instead of one per topic.
PACKED = frozenset(("ids", "refs", "lineids", "defids", "links", "scan", "blinks"))
PACK_SUFFIX = ".pack"
# Derived kinds a reading process keeps in the readers' copy (one pack each), beside its parses:
# the Timeline's per-topic parts, which every fresh reader would otherwise derive again.
READER_DERIVED = ("views",)
_UNREAD: Any = object()  # a readers' copy table not read yet (``None``: read, then let go)
ENTRY_SUFFIX = ".entry"
# The parses themselves (big): their pack is a marshal pack (``decode_pack``).
BULK = frozenset(("archives", "topics"))
# Every packed kind (PACKED and BULK) is written the same way, so a flush costs what changed
# (a pack rewritten whole made every one-record edit pay for the whole kind): a flush
# that changes most entries of a kind (a cold start) writes the whole kind into its pack and
# removes the per-entry files; a smaller one writes only the changed entries, as per-entry
# files (``<kind>/<name>.entry``) that win over the pack when read. Once more per-entry files
# than LOOSE_MIN or an eighth of the kind exist, the next flush folds them into a new pack:
# a rewrite of N entries every N/8 changed ones, a bounded cost per change, and a bounded
# number of files for a fresh process to open. Every file is written whole under a temporary
# name and renamed into place, so a reader sees an old or a new file, never half of one; two
# processes flushing at once can only lose each other's entries (a pack write removes the
# per-entry files it lists), which costs a recomputation, never a wrong answer: every entry
# says what it is a function of and is checked against that when used.
LOOSE_MIN = 16

# The cache kit's stamp, ctime included: a same-size rewrite with its mtime put back keeps
# (mtime, size, inode) but never the ctime. An install that hard-links a topic file into its
# stage moves the ctime without touching a byte; a topic entry whose stamp differs only there
# is checked against the sha256 of the file's bytes (``topic_for_stat``) and re-stamped.
StatKey = Stamp


@keeps
@lru_cache(maxsize=1)
def code_tag() -> str:
    """A digest of the code whose output an entry holds (and of this format)."""
    from ..cache.codetag import code_tag as tag_of

    # The entries hold parses and the derived parts and memos that txcache and viewcache keep
    # in them; named, not imported, because those modules import this one.
    return tag_of(*(f"memory_tui.core.{name}" for name in (
        "format.topics", "format.sources", "format.errors", "store.txcache", "store.parsecache", "store.parserows",
        "format.views", "store.viewcache", "format.normalize", "changes.request", "changes.labels", "changes.files", "changes.patch",
        "changes.records", "changes.workcopy", "format.fastdata", "format.blocklinks", "format.linkcheck",
        "store.treecache", "store.linkcache", "store.memos")), salt=f"format {FORMAT}", length=16)


stat_key = stamp_of
_racy = stamp_racy


# ------------------------------------------------------------------------------ encoding
#
# Every file of the cache is one envelope of the cache kit (``cache.envelope``: magic, kind,
# version, crc32, marshal payload): a per-entry file is ``(rel, body)`` of kind
# ``parse-<kind>``, a pack of kind ``parse-<kind>-pack`` (a ``pack_many`` of such pairs for the
# parses, one dict for the small derived kinds). Only plain data is stored (rows, frozensets,
# tuples, strings): a value marshal cannot hold is not stored, and a file that is not an intact
# envelope of its kind and this FORMAT is a miss.

def _entry_kind(kind: str) -> str:
    return "parse-" + kind


def _pack_kind(kind: str) -> str:
    return "parse-" + kind + "-pack"


def encode_entry(kind: str, rel: str, body: Any) -> bytes:
    """The per-entry file of ``rel``'s ``body`` in ``kind`` (ValueError: not plain data)."""
    return envelope.pack(_entry_kind(kind), (rel, body), FORMAT)


def decode_entry(kind: str, data: bytes) -> tuple[str, Any] | None:
    """``(rel, body)`` of an intact per-entry file of ``kind``, else ``None``."""
    value = envelope.unpack(_entry_kind(kind), data, FORMAT)
    if not (type(value) is tuple and len(value) == 2 and type(value[0]) is str):
        return None
    return value


def encode_pack(kind: str, table: Mapping[str, Any]) -> bytes:
    """The pack of a small derived ``kind``: every entry that is plain data."""
    try:
        return envelope.pack(_pack_kind(kind), dict(table), FORMAT)
    except ValueError:  # some value marshal cannot hold: leave that one out
        plain = {}
        for rel, body in table.items():
            try:
                envelope.packed_value(body)
            except ValueError:
                continue
            plain[rel] = body
        return envelope.pack(_pack_kind(kind), plain, FORMAT)


def decode_pack(kind: str, data: bytes) -> dict[str, Any]:
    """The entries of an intact pack of ``kind`` (either shape); ``{}`` for anything else."""
    if kind in BULK:
        items = envelope.unpack_many(_pack_kind(kind), data, FORMAT) or ()
        return {item[0]: item[1] for item in items
                if type(item) is tuple and len(item) == 2 and type(item[0]) is str}
    table = envelope.unpack(_pack_kind(kind), data, FORMAT)
    if type(table) is not dict:
        return {}
    return {rel: body for rel, body in table.items() if type(rel) is str}


# The rows an entry holds (``parserows``): re-exported, a parse cache's callers name them here.
from .parserows import (_ROW_ERRORS, _TOPIC_HEAD_WIDTH, _Unrepresentable, _archive_row_ok,  # noqa: E402
                        archive_from_rows, archive_rows, topic_deferred, topic_from_rows, topic_head, topic_rows)


class _Stored:
    """Rows read from disk, rebuilt into objects only when an entry is used."""

    __slots__ = ("rows",)

    def __init__(self, rows: tuple) -> None:
        self.rows = rows


def _name(rel: str) -> str:
    return hashlib.sha256(rel.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ENTRY_SUFFIX


# --------------------------------------------------------------------------------- store


@dataclasses.dataclass
class _TopicEntry:
    key: StatKey
    sha: str
    topic: Any  # memory_tui.core.format.topics.Topic
    deps: tuple[str, ...]
    sig: str
    rows: tuple | None = None  # the stored head (``topic_head``) ``topic`` was made from


class _ReadersCopy:
    """The readers' copy of a :class:`ParseStore` (``reader_dir``: in the user cache, one folder
    per workspace path and code tag): what reading processes parsed and derived, consulted on
    a miss in the workspace's own cache and written by readers only, never by ``flush``."""

    def _alt_archive_map(self) -> dict[str, tuple[StatKey, Any]]:
        if self._alt_archives is None:
            with bulk():
                self._alt_archives = _archive_table(self._load_pack("archives", reader_dir(self.memory_root)))
        return self._alt_archives

    def _alt_topic_map(self) -> dict[str, _TopicEntry]:
        if self._alt_topics is None:
            with bulk():
                self._alt_topics = _topic_table(self._load_pack("topics", reader_dir(self.memory_root)))
        return self._alt_topics

    def drop_kept_derived(self) -> None:
        """Let go of the readers' copy's derived tables: once a build has turned them into
        parts, the parts hold what they said, and the plain rows of every topic would stay
        alive beside them (tens of MB at scale 4). Later lookups miss (a reload's changed topic
        is derived, as no copy made before the change holds it); a write reads them again."""
        with self.lock:
            for kind in READER_DERIVED:
                self._alt_derived[kind] = None

    def _alt_derived_map(self, kind: str, *, writing: bool = False) -> dict[str, tuple]:
        table = self._alt_derived.get(kind, _UNREAD)
        if table is None and not writing:
            return {}
        if table is None or table is _UNREAD:
            with bulk():
                table = {rel: body for rel, body in self._load_pack(kind, reader_dir(self.memory_root)).items()
                         if isinstance(body, tuple) and len(body) >= 2}
            if not writing:
                self._alt_derived[kind] = table
        return table

    def keep_for_readers(self) -> None:
        """Write what this process parsed (and found fresh) into the readers' copy in the
        user cache (``reader_dir``), never into the state dir: the next reading process
        starts from these parses when the workspace's own cache is missing or stale. Only
        when something was parsed anew; the dirty marks stay for a later :meth:`flush`."""
        with self.lock:
            if not (self._dirty_archives or self._dirty_topics
                    or any(self._dirty_derived[kind] for kind in READER_DERIVED)):
                return
            folder = reader_dir(self.memory_root)
            try:
                # the cache root may not exist yet (a first run): made like the other user caches
                folder.parent.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                for level in (folder.parent, folder):
                    level.mkdir(exist_ok=True, mode=0o700)
                for name in os.listdir(folder.parent):  # other code's copies are never read
                    if name != folder.name:
                        shutil.rmtree(folder.parent / name, ignore_errors=True)
                self._write_bulk("archives", self._archives or {}, folder)
                self._write_bulk("topics", self._topics or {}, folder)
                live = self._topics or {}
                for kind in READER_DERIVED:
                    # the copy's entries of the topics that are still here, this process's over them
                    table = {rel: body for rel, body in
                             {**self._alt_derived_map(kind, writing=True), **self._derived_map(kind)}.items()
                             if rel in live}
                    _atomic(folder / (kind + PACK_SUFFIX), encode_pack(kind, table))
            except OSError:
                return
            # what this process holds is now the readers' copy too
            self._alt_archives = dict(self._archives or {})
            self._alt_topics = dict(self._topics or {})


class ParseStore(_ReadersCopy):
    """The cache of one memory root. Use through :func:`store_for`; thread-safe.

    Readers only read it; :meth:`flush` (called by transactions, which write anyway) writes
    what readers and writers of this process parsed since."""

    def __init__(self, memory_root: Path) -> None:
        self.memory_root = Path(memory_root)
        self.dir = Layout(self.memory_root).runtime_dir / DIR_NAME / code_tag()
        self.lock = threading.RLock()
        self._archives: dict[str, tuple[StatKey, Any]] | None = None
        self._topics: dict[str, _TopicEntry] | None = None
        self._dirty_archives: set[str] = set()
        self._dirty_topics: set[str] = set()
        # derived per-file values (kinds in DERIVED): rel -> (*key, value); see derived()
        self._derived: dict[str, dict[str, tuple]] = {}
        self._dirty_derived: dict[str, set[str]] = {kind: set() for kind in DERIVED}
        # per kind, the entries whose per-entry file (written after the pack) was read or written
        self._loose: dict[str, set[str]] = {}
        # the readers' copy in the user cache (``reader_dir``): what reading processes parsed
        # when this cache was missing or stale; consulted on a miss here, never written by flush
        self._alt_archives: dict[str, tuple[StatKey, Any]] | None = None
        self._alt_topics: dict[str, _TopicEntry] | None = None
        self._alt_derived: dict[str, dict[str, tuple] | None] = {}  # kinds in READER_DERIVED
        # rel -> (the parse handed out for it, its sha256, its deps signature): the key of the
        # values derived from that very parse (``key_of``), as a transaction's tree cache keys them
        self._handed: dict[str, tuple[Any, str, str]] = {}

    # -- reading ------------------------------------------------------------------------
    def _load_pack(self, kind: str, folder: Path | None = None) -> dict[str, Any]:
        try:
            data = _read(str((folder or self.dir) / (kind + PACK_SUFFIX)))
        except OSError:
            return {}
        return decode_pack(kind, data)

    def _load_kind(self, kind: str) -> dict[str, Any]:
        with bulk():
            return self._load_kind_files(kind)

    def _load_kind_files(self, kind: str) -> dict[str, Any]:
        out: dict[str, Any] = self._load_pack(kind)
        loose = self._loose[kind] = set()
        folder = self.dir / kind
        try:
            names = os.listdir(folder)
        except OSError:
            return out
        base = str(folder) + os.sep
        for name in names:
            if not name.endswith(ENTRY_SUFFIX):
                continue
            try:
                value = decode_entry(kind, _read(base + name))
            except OSError:
                continue
            if value is None:
                continue
            rel, body = value
            if _name(rel) == name:
                out[rel] = body
                loose.add(rel)
        return out

    def _archive_map(self) -> dict[str, tuple[StatKey, Any]]:
        """rel -> (stat key, ArchiveFile or the _Stored rows of one[, the rows it came from])."""
        if self._archives is None:
            self._archives = _archive_table(self._load_kind("archives"))
        return self._archives

    def _archive_hit(self, rel: str, key: StatKey) -> Any:
        """The cached scan of ``rel`` made from exactly ``key``, else ``None`` (the readers'
        copy is asked when this cache has no such entry)."""
        cached = self._archive_map()
        hit = cached.get(rel)
        if hit is None or hit[0] != key:
            alt = self._alt_archive_map().get(rel)
            if alt is None or alt[0] != key:
                return None
            hit = cached[rel] = alt  # checked like its own below; a flush may write it here
        if _racy(key):
            return None
        entry = hit[1]
        if isinstance(entry, _Stored):
            rows = entry.rows
            try:
                entry = archive_from_rows(rows)
            except _ROW_ERRORS:  # not rows this code wrote: a miss, overwritten by the next flush
                del cached[rel]
                return None
            cached[rel] = (key, entry, rows)  # the rows are what a flush writes again for it
            entry.__dict__[FROM_KEPT] = True  # a trust verdict on it checks its bytes first
        return entry

    def _topic_map(self) -> dict[str, _TopicEntry]:
        if self._topics is None:
            self._topics = _topic_table(self._load_kind("topics"))
        return self._topics

    def _topic_of(self, rel: str, hit: _TopicEntry, index: Any) -> Any:
        topic = hit.topic
        if isinstance(topic, _Stored):
            rows = topic.rows
            resolve = index.resolve_target
            try:
                topic = topic_deferred(rows, lambda path, text: parse_topic(path, text, resolve=resolve, strict=True))
            except _ROW_ERRORS:
                for table in (self._topics, self._alt_topics):
                    if table is not None and table.get(rel) is hit:
                        del table[rel]
                return None
            hit.topic = topic
            hit.rows = rows  # what a flush writes again for it, without building or encoding it
        return topic

    # -- archives -----------------------------------------------------------------------
    def source_index(self, previous: Any = None) -> Any:
        """``SourceIndex.load`` that starts from cached scans of unchanged archives."""

        with self.lock:
            if previous is not None and Path(previous.root) == self.memory_root:
                prior_files = dict(previous.files)
            else:
                prior_files = {}
            keys: dict[str, StatKey] = {}
            walked = list(walk_sources(self.memory_root))
            for rel, _path, st in walked:
                keys[rel] = stat_key(st)
            if prior_files and keys.keys() == prior_files.keys() and all(
                    prior_files[rel].key == key and proven(prior_files[rel]) for rel, key in keys.items()):
                return previous  # what SourceIndex.load would rebuild from the very same entries
            cached = self._archive_map()
            for rel, key in keys.items():
                if rel in prior_files and proven(prior_files[rel]):
                    continue
                hit = self._archive_hit(rel, key)
                if hit is not None:
                    prior_files[rel] = hit
            index = SourceIndex.load(self.memory_root, previous=_Prior(self.memory_root, prior_files), walked=walked)
            for rel, entry in index.files.items():
                key = keys.get(rel)
                if key is None or _racy(key) or entry.key != key or entry.problem is not None or not proven(entry):
                    continue
                hit = cached.get(rel)
                if hit is None or hit[0] != key or hit[1] is not entry:
                    cached[rel] = (key, entry)
                    self._dirty_archives.add(rel)
            for rel in [r for r in cached if r not in index.files]:
                del cached[rel]
                self._dirty_archives.add(rel)
            return index

    # -- topics -------------------------------------------------------------------------
    def topic_for_stat(self, rel: str, key: StatKey, index: Any) -> Any:
        """The cached strict parse of ``topics/<rel>`` if its stat key and deps are unchanged."""

        with self.lock:
            topics = self._topic_map()
            hit = topics.get(rel)
            found = None if hit is None else self._topic_check(rel, hit, key, index)
            if found is None:
                # the readers' copy (user cache): what a reading process parsed last time
                alt = self._alt_topic_map().get(rel)
                if alt is not None and alt is not hit and alt.key == key:
                    found = self._topic_check(rel, alt, key, index)
                    if found is not None:
                        topics[rel] = alt  # as if read here (a flush may write it here)
                        hit = alt
            if found is not None:
                self._handed[rel] = (found, hit.sha, hit.sig)
            return found

    def key_of(self, topic: Any) -> tuple[str, str] | None:
        """``(sha256, deps signature)`` of ``topic`` when it is the parse this store handed out
        last for its path (``topic_for_stat``, ``put_topic``), else ``None``."""
        with self.lock:
            known = self._handed.get(topic.path)
        return None if known is None or known[0] is not topic else (known[1], known[2])

    def _topic_check(self, rel: str, hit: _TopicEntry, key: StatKey, index: Any) -> Any:
        if hit.key != key or _racy(key):
            if hit.key[:3] != key[:3] or not self._same_bytes(rel, hit, key):
                return None
        if deps_signature(index, hit.deps) != hit.sig:
            return None
        return self._topic_of(rel, hit, index)

    def _same_bytes(self, rel: str, hit: _TopicEntry, key: StatKey) -> bool:
        """Whether ``topics/<rel>``, whose stamp differs from the entry's only in its ctime (a
        hard link or chmod by an install), still holds the bytes the entry was parsed from;
        if so the entry is re-stamped (git's index refresh), unless the new stamp is racy."""
        try:
            data = _read(os.path.join(self.memory_root, "topics", rel))
        except OSError:
            return False
        if len(data) != key[SIZE] or hashlib.sha256(data).hexdigest() != hit.sha:
            return False
        if not _racy(key):
            hit.key = key
            self._dirty_topics.add(rel)
        return True

    def topic_for_sha(self, rel: str, sha: str, index: Any) -> tuple[Any, tuple[str, ...], str] | None:
        """``(topic, deps, sig)`` cached for this exact text (by digest), deps unchanged."""

        with self.lock:
            hit = self._topic_map().get(rel)
            if hit is None or hit.sha != sha:
                return None
            if deps_signature(index, hit.deps) != hit.sig:
                return None
            topic = self._topic_of(rel, hit, index)
            return None if topic is None else (topic, hit.deps, hit.sig)

    def put_topic(self, rel: str, key: StatKey | None, sha: str, topic: Any, deps: tuple[str, ...], sig: str) -> None:
        """Remember a problem-free strict parse (``key`` None: known by digest only)."""
        if not topic.ok or topic.path != rel:
            return
        with self.lock:
            self._handed[rel] = (topic, sha, sig)
            topics = self._topic_map()
            old = topics.get(rel)
            stored_key: StatKey = key if key is not None and not _racy(key) else NO_STAMP
            if old is not None and old.sha == sha and old.sig == sig and (old.key == stored_key or stored_key[0] == -1):
                return
            topics[rel] = _TopicEntry(stored_key, sha, topic, deps, sig)
            self._dirty_topics.add(rel)

    def retain_topics(self, live: Iterable[str]) -> None:
        live = set(live)
        with self.lock:
            topics = self._topic_map()
            for rel in [r for r in topics if r not in live]:
                del topics[rel]
                self._dirty_topics.add(rel)
            self._handed = {rel: known for rel, known in self._handed.items() if rel in live}
        self.retain_derived(live)

    # -- derived per-file values -----------------------------------------------------------
    def _derived_map(self, kind: str) -> dict[str, tuple]:
        table = self._derived.get(kind)
        if table is None:
            table = self._derived[kind] = {
                rel: body for rel, body in self._load_kind(kind).items() if isinstance(body, tuple) and len(body) >= 2
            }
        return table

    def derived(self, kind: str, rel: str, key: tuple) -> Any:
        """The value stored for ``topics/<rel>`` under exactly ``key`` (e.g. its sha256 and
        deps signature), else ``None``; for the kinds readers keep (``READER_DERIVED``), the
        readers' copy's when this cache has none."""
        with self.lock:
            body = self._derived_map(kind).get(rel)
            if (body is None or body[:-1] != key) and kind in READER_DERIVED:
                body = self._alt_derived_map(kind).get(rel)
            if body is None or body[:-1] != key:
                return None
            return body[-1]

    def put_derived(self, kind: str, rel: str, key: tuple, value: Any) -> None:
        with self.lock:
            table = self._derived_map(kind)
            body = (*key, value)
            old = table.get(rel)
            if old is not None and old[:-1] == key:
                return
            table[rel] = body
            self._dirty_derived[kind].add(rel)

    def retain_derived(self, live: Iterable[str]) -> None:
        live = set(live)
        with self.lock:
            for kind in DERIVED:
                table = self._derived.get(kind)
                if table is None:  # never loaded: nothing to prune in memory, entries stay valid by key
                    continue
                for rel in [r for r in table if r not in live]:
                    del table[rel]
                    self._dirty_derived[kind].add(rel)

    # -- writing ------------------------------------------------------------------------
    def flush(self) -> None:
        """Write changed entries (atomic replace, 0600) and drop other code's caches. Best effort."""
        with self.lock:
            if not (self._dirty_archives or self._dirty_topics or any(self._dirty_derived.values())):
                return
            runtime = self.dir.parent.parent
            if not runtime.is_dir():  # no workspace skeleton: never create one for a cache
                return
            try:
                self._prune_other_tags()
                kinds = [("archives", self._dirty_archives, self._archives or {}),
                         ("topics", self._dirty_topics, self._topics or {})]
                kinds += [(kind, self._dirty_derived[kind], self._derived.get(kind, {})) for kind in DERIVED]
                for kind, dirty, table in kinds:
                    if not dirty:
                        continue
                    loose = self._loose.setdefault(kind, set())
                    if kind in BULK or kind in PACKED:
                        grown = len(loose | {rel for rel in dirty if rel in table})
                        if len(dirty) * 2 >= len(table) or grown > max(LOOSE_MIN, len(table) // 8):
                            self._write_pack(kind, table)
                            loose.clear()
                            dirty.clear()
                            continue
                    folder = self.dir / kind
                    # level by level: ``parents=True`` would give the parents the default
                    # mode, and every folder in the workspace is 0700 (memory spec §2.4)
                    for level in (self.dir.parent, self.dir, folder):
                        level.mkdir(exist_ok=True, mode=0o700)
                    for rel in sorted(dirty):
                        path = folder / _name(rel)
                        entry = table.get(rel)
                        data = None if entry is None else _entry_bytes(kind, rel, entry)
                        if data is None:
                            try:
                                path.unlink()
                            except FileNotFoundError:
                                pass
                            loose.discard(rel)
                            continue
                        _atomic(path, data)
                        loose.add(rel)
                    dirty.clear()
            except OSError:
                return

    def _write_pack(self, kind: str, table: Mapping[str, Any]) -> None:
        """Every entry of ``kind`` in one file, and the per-entry files it supersedes gone."""
        for level in (self.dir.parent, self.dir):
            level.mkdir(exist_ok=True, mode=0o700)
        if kind in PACKED:
            _atomic(self.dir / (kind + PACK_SUFFIX), encode_pack(kind, table))
        else:
            self._write_bulk(kind, table)
        folder = str(self.dir / kind)
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in names:
            if name.endswith(ENTRY_SUFFIX):
                try:
                    os.unlink(os.path.join(folder, name))
                except FileNotFoundError:
                    pass

    def _write_bulk(self, kind: str, table: Mapping[str, Any], folder: Path | None = None) -> None:
        # Entry by entry: only one entry's rows exist at a time, and the file is the blobs
        # themselves (one buffer of the whole kind would double the peak memory of a flush).
        blobs = []
        for rel in sorted(table):
            value = _entry_value(kind, rel, table[rel])
            if value is None:
                continue
            try:
                blobs.append(envelope.packed_value(value))
            except ValueError:  # a value marshal cannot hold (say, a details object): not stored
                continue
        _atomic((folder or self.dir) / (kind + PACK_SUFFIX), envelope.pack_many(_pack_kind(kind), blobs, FORMAT))

    def _prune_other_tags(self) -> None:
        parent = self.dir.parent
        try:
            names = os.listdir(parent)
        except OSError:
            return
        for name in names:
            if name != self.dir.name:
                shutil.rmtree(parent / name, ignore_errors=True)


_is_key = is_stamp


def _archive_table(loaded: Mapping[str, Any]) -> dict[str, tuple[StatKey, Any]]:
    return {rel: (tuple(body[0]), _Stored(body[1])) for rel, body in loaded.items()
            if isinstance(body, tuple) and len(body) == 2 and _is_key(body[0]) and _archive_row_ok(body[1], rel)}


def _topic_table(loaded: Mapping[str, Any]) -> dict[str, _TopicEntry]:
    out: dict[str, _TopicEntry] = {}
    for rel, body in loaded.items():
        if (isinstance(body, tuple) and len(body) == 5 and _is_key(body[0]) and isinstance(body[1], str)
                and isinstance(body[3], tuple) and isinstance(body[4], str) and isinstance(body[2], tuple)
                and len(body[2]) == _TOPIC_HEAD_WIDTH and body[2][0] == rel):
            out[rel] = _TopicEntry(tuple(body[0]), body[1], _Stored(body[2]), tuple(body[3]), body[4])
    return out


READER_SUB = "parse"


def reader_dir(memory_root: Path | str) -> Path:
    """The readers' copy of ``memory_root``'s parse cache: in the user cache (readers never
    write into a state dir), one folder per workspace path and code tag."""
    from ..fsutil import user_cache_dir

    where = str(Path(memory_root).absolute())
    name = hashlib.sha256(where.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return user_cache_dir(READER_SUB) / name / code_tag()


def keep_for_readers(memory_root: Path | str) -> None:
    """:meth:`ParseStore.keep_for_readers` of ``memory_root``'s store (reading commands, at
    their end). Nothing when this process opened no store there: it parsed nothing (a reader
    answered from its own index), and making one would only fingerprint the parser's code."""
    store = _BY_GIVEN.get(os.fspath(memory_root))
    if store is None:
        with _STORES_LOCK:
            store = _STORES.get(str(Path(memory_root).resolve()))
    if store is not None:
        store.keep_for_readers()


def _entry_value(kind: str, rel: str, entry: Any) -> tuple | None:
    """``(rel, rows)`` of one archive or topic entry; ``None`` for one that is not stored."""
    try:
        if kind == "archives":
            key, value = entry[0], entry[1]
            if len(entry) == 3:  # made from these rows: writing them again builds no frame
                rows = entry[2]
            else:
                rows = value.rows if isinstance(value, _Stored) else archive_rows(value)
            value = (rel, (key, rows))
        else:
            value = entry.topic
            rows = value.rows if isinstance(value, _Stored) else entry.rows or topic_head(topic_rows(value))
            value = (rel, (entry.key, entry.sha, rows, entry.deps, entry.sig))
        return value
    except _Unrepresentable:
        return None


def _entry_bytes(kind: str, rel: str, entry: Any) -> bytes | None:
    """The file of one entry; ``None`` for one that is not stored (see _Unrepresentable)."""
    value = _entry_value(kind, rel, entry) if kind in BULK else (rel, entry)
    try:
        return None if value is None else encode_entry(kind, *value)
    except ValueError:  # marshal met a value it cannot hold (say, a details object): not stored
        return None


@dataclasses.dataclass(frozen=True)
class _Prior:
    """What ``SourceIndex.load`` reads of a previous index: its root and its files."""

    root: Path
    files: Mapping[str, Any]


def _read(path: str) -> bytes:
    """A whole file with plain os calls (hundreds of entries: pathlib and buffered files
    cost as much as the reading)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        chunks = []
        while True:
            chunk = os.read(fd, max(size, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def _atomic(path: Path, data: bytes | tuple[bytes, ...]) -> None:
    replace_cache_file(path, data)


_STORES: dict[str, ParseStore] = keeps({})
_STORES_LOCK = threading.Lock()


# the store by the path as given, so the per-file lookups of one transaction
# (one per topic file) do not resolve the root each time (a system call or more each)
_BY_GIVEN: dict[str, ParseStore] = keeps({})


def store_for(memory_root: Path | str) -> ParseStore:
    given = os.fspath(memory_root)
    store = _BY_GIVEN.get(given)
    if store is not None:
        return store
    key = str(Path(memory_root).resolve())
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None:
            store = _STORES[key] = ParseStore(Path(memory_root))
        if os.path.isabs(given):  # a relative one means another place after a chdir
            _BY_GIVEN[given] = store
        return store


@keeps
def forget_in_process() -> None:
    """Forget the in-memory copies (the next use re-reads the files; tests, benchmarks)."""
    with _STORES_LOCK:
        _STORES.clear()
        _BY_GIVEN.clear()


def drop(memory_root: Path | str) -> None:
    """Delete the on-disk cache of ``memory_root`` (benchmarks' cold runs)."""
    shutil.rmtree(Layout(Path(memory_root)).runtime_dir / DIR_NAME, ignore_errors=True)
    forget_in_process()


def topic_stats(topics_dir: Path) -> dict[str, StatKey]:
    """topics-relative path -> stat key of each topic file (the regular ``*.md`` files
    ``topics_dir.rglob("*.md")`` lists: ``fsutil.md_file_stats``)."""
    return {rel: stat_key(st) for rel, st in md_file_stats(topics_dir).items()}


def load_tree(memory_root: Path | str, *, persist: bool = False) -> tuple[Any, Any]:
    """``(SourceIndex, strict TopicTree)`` of the committed workspace, through the cache.

    Equal to ``SourceIndex.load(M)`` and ``parse_tree(M/topics, resolve=..., strict=True)``.
    Reading never writes into the state dir, so new parses are written only with ``persist``
    (writers; the benchmarks) or by the next transaction of this process.
    """

    with bulk():
        return _load_tree(Path(memory_root), persist)


def _load_tree(root: Path, persist: bool) -> tuple[Any, Any]:
    store = store_for(root)
    index = store.source_index()
    topics_dir = root / "topics"
    problems = []
    parsed = []
    rels = topic_stats(topics_dir) if topics_dir.is_dir() else {}
    for rel in sorted(rels, key=topic_sort_key):
        topic = store.topic_for_stat(rel, rels[rel], index)
        if topic is None:
            text, data, problem = read_topic_file(topics_dir, rel)
            if problem is not None:
                problems.append(problem)
                continue
            topic = parse_topic(rel, text, resolve=index.resolver, strict=True)
            deps = topic_deps(topic)
            key = rels[rel] if len(data) == rels[rel][1] else None
            store.put_topic(rel, key, hashlib.sha256(data).hexdigest(), topic, deps, deps_signature(index, deps))
        parsed.append(topic)
    store.retain_topics(rels)
    if persist:
        store.flush()
    return index, assemble_tree(parsed, problems)


__all__ = ["DIR_NAME", "ENTRY_SUFFIX", "keep_for_readers", "reader_dir", "decode_entry", "decode_pack", "encode_entry", "encode_pack", "ParseStore", "code_tag", "drop", "forget_in_process", "load_tree", "stat_key", "store_for"]
