"""What a transaction may reuse from the previous one (pitfall 4: a one-topic edit on a
20 000-record workspace in <= 0.5 s), without giving up byte-compatibility.

Three things, per memory root, in-process:

* **Committed topic texts** keyed by file stats ``(mtime_ns, size, inode, ctime_ns)``:
  an unchanged file is not read again.
* **Parsed topics** keyed by ``(path, sha256 of the text)`` *and* a signature of the source
  archives the topic's links depend on (the file each link points into plus the canonical
  v2 / legacy / D location of every resolved source id; v2 files by content digest, others
  by stat key). A parse is only reused while that signature is unchanged, so a source that
  appears, vanishes or moves re-parses exactly the topics that cite it.
* **Canonical proofs**: ``(path, sha256, signature)`` for which normalising the file was
  observed to be the identity (no local labels, no allocation, no pruning, no problems).
  OpenProgram re-normalises every file on every transaction; memory-tui passes a file
  through unchanged only when such a proof exists, and re-normalises every other file.

Proofs also persist across processes in ``<M>/<runtime-dir>/memory-tui-canonical.json``:
inside the runtime dir, so an internal name (memory spec §2.1) that is neither part of the
revision nor of git, and never copied into a stage. The file names the code it was made
with (a digest of the normaliser, grammar and archive modules); a file made by other code,
or one that does not parse, is ignored. Losing it only costs speed.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat as stat_mod
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import compress, repeat
from operator import and_, attrgetter, is_, is_not, itemgetter, ne, not_
from pathlib import Path
from typing import Iterable, Iterator, Mapping, NamedTuple

from ..format.errors import Problem
from ..fsutil import replace_cache_file
from .fsmonitor import forget_monitors, monitor_for
from . import revmemo
from ..format.paths import RUNTIME_NAMES, Layout, is_internal_top
from ..format.sources import SourceIndex
from ..format.normalize import block_id_locations, file_block_ids, has_local_label
from .parsecache import RACY_NS, deps_signature, forget_in_process, is_racy, store_for, topic_deps
from ..format.topics import (INVALID_TOPIC_FORMAT, Topic, TopicTree, assemble_tree, parse_topic, read_topic_file,
                     reassemble_tree, topic_sort_key)
from .viewcache import TopicPart, view_cache_for
from .viewcache import forget_in_process as forget_views

# normalize's per-text memos that persist in the parse cache (module, function) -> kind
PERSISTED_MEMOS = {("memory_tui.core.format.normalize", "_text_line_end_ids"): "lineids",
                   ("memory_tui.core.format.normalize", "definition_ids"): "defids"}

CACHE_NAME = "memory-tui-canonical.json"
CACHE_VERSION = 1
MAX_DISK_PROOFS = 200_000


@lru_cache(maxsize=1)
def code_tag() -> str:
    """A digest of the code whose output a proof vouches for."""
    from ..cache.codetag import code_tag as tag_of
    from ..format import normalize, sources, topics
    from . import txcache

    return tag_of(normalize, topics, sources, txcache, salt=f"v{CACHE_VERSION}", length=16)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ------------------------------------------------------------------ incremental vs full mode

TX_MODE_ENV = "MEMORY_TUI_TX"  # "" / "incremental" (default), "full", "check"


def tx_mode() -> str:
    """How the transaction derives its tree-wide facts (the tree, the id checks, the link and
    ref checks, the block-link locations, the creation order) from the previous transaction's:
    ``incremental`` from what changed; ``full`` from scratch, as before any of it existed;
    ``check`` both, raising ``IncrementalMismatch`` where they differ (the equivalence tests
    run it)."""
    value = (os.environ.get(TX_MODE_ENV) or "incremental").strip().lower()
    if value not in ("incremental", "full", "check"):
        raise ValueError(f"{TX_MODE_ENV} must be incremental, full or check, not {value!r}")
    return value


class IncrementalMismatch(AssertionError):
    """An incremental derivation differs from the full one (``MEMORY_TUI_TX=check``): a bug."""


def derive(what: str, incremental, full, same=None):
    """``incremental()`` or ``full()`` by ``tx_mode()``; in check mode both, compared by
    ``same(a, b)`` (default ``==``)."""
    mode = tx_mode()
    if mode == "full":
        return full()
    if mode == "incremental":
        return incremental()
    a, b = incremental(), full()
    if not (same(a, b) if same is not None else a == b):
        raise IncrementalMismatch(f"incremental {what} differs from the full derivation:\n{a!r}\n!=\n{b!r}"[:4000])
    return b


_NOT_HANDED = (None,)  # a path no parse was handed out for


def same_tree(a: TopicTree, b: TopicTree) -> bool:
    """Two trees hold the very same topics and units, the same problems and id maps."""
    return (len(a.topics) == len(b.topics) and all(x is y for x, y in zip(a.topics, b.topics))
            and len(a.units) == len(b.units) and all(x is y for x, y in zip(a.units, b.units))
            and a.problems == b.problems
            and a.id_view == b.id_view and all(a.by_id(k) is b.by_id(k) for k in a.id_view)
            and {t.path: t for t in a.topics} == {t.path: t for t in b.topics}
            and all(a.topic(t.path) is t for t in b.topics)
            and a.dupfree == b.dupfree)


# ------------------------------------------------------------------------- the revision walk

Stamp = tuple[int, int, int, int]  # (mtime_ns, size, inode, ctime_ns)


def revision_walk(root: Path) -> tuple[dict[str, Stamp], tuple[str, ...]]:
    """``(stamps, links)``: the stat stamp of every file of the revision (exactly the files of
    ``workspace.iter_revision_files``, in its order) and the workspace-relative paths of the
    symbolic links met in the same places (never followed, never part of the revision).

    Every file is ``lstat``-ed on every call: a writer that takes no lock and rewrites a file
    in place moves no folder's mtime, so only the file's own stamp shows it. What is reused is
    a folder's *listing* (names and kinds, in order), while the folder's own stamp is the one
    it was listed under and that stamp was older than the clock tick then: a name cannot
    appear, vanish or change kind without moving its folder's mtime and ctime, and a change
    after the listing is stamped later than the tick. The files are then ``lstat``-ed by one
    C-level ``map`` instead of one ``DirEntry`` and a Python loop each. ``MEMORY_TUI_TX=full``
    walks every folder; ``check`` does both and compares.

    Where this process keeps a file-system monitor of the workspace (``fsmonitor``), every
    folder listed is watched from now on."""
    base = os.fspath(root)
    watch = monitor_for(base)
    folders: list[str] | None = [] if watch is not None else None
    walked = derive("revision walk", lambda: _walk_listed(base, folders), lambda: _walk_full(base, folders),
                    lambda a, b: list(a[0].items()) == list(b[0].items()) and a[1] == b[1])
    if watch is not None and folders:
        watch.cover(folders)
    return walked


def _walk_full(base: str, folders: list[str] | None = None) -> tuple[dict[str, Stamp], tuple[str, ...]]:
    found: dict[str, Stamp] = {}
    links: list[str] = []
    if os.path.isdir(base):
        _walk_revision(base, "", found, links, folders)
    return found, tuple(links)


def _walk_revision(dir_path: str, prefix: str, found: dict[str, Stamp], links: list[str],
                   folders: list[str] | None = None) -> None:
    """Depth first with each folder's entries by name: that visits files in the order of
    their path components, the revision's order, with no sort of the whole list. Each folder
    listed (the runtime folder included) is added to ``folders``."""
    try:
        with os.scandir(dir_path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    if folders is not None:
        folders.append(dir_path)
    top = not prefix
    for entry in entries:
        name = entry.name
        if top and is_internal_top(name) and name not in RUNTIME_NAMES:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        mode = st.st_mode
        if stat_mod.S_ISREG(mode):
            found[prefix + name] = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
        elif stat_mod.S_ISDIR(mode):
            if top and name in RUNTIME_NAMES:
                if folders is not None:
                    folders.append(entry.path)
                try:
                    rst = os.lstat(os.path.join(entry.path, "runtime.json"))
                except OSError:
                    continue
                if stat_mod.S_ISREG(rst.st_mode):
                    found[name + "/runtime.json"] = (rst.st_mtime_ns, rst.st_size, rst.st_ino, rst.st_ctime_ns)
                continue
            _walk_revision(entry.path, prefix + name + "/", found, links, folders)
        elif stat_mod.S_ISLNK(mode):
            links.append(prefix + name)


# memory root -> folder path -> (its stamp when listed, its listing as segments): see revision_walk
_LISTINGS: dict[str, dict[str, tuple[tuple, tuple]]] = {}
_STAMP_OF = attrgetter("st_mtime_ns", "st_size", "st_ino", "st_ctime_ns")
_MODE_OF = attrgetter("st_mode")
_FILES, _DIR, _RUNTIME, _LINK = 0, 1, 2, 3
# a folder opened only to stat its files by name: never through a link put in its place
_BY_NAME = os.stat in os.supports_dir_fd and os.stat in os.supports_follow_symlinks and hasattr(os, "O_DIRECTORY")
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class _Moved(Exception):
    """The workspace changed under the listed walk (a race): walk every folder instead."""


def _list_folder(dir_path: str, prefix: str) -> tuple:
    """A folder's entries in name order as segments: runs of regular files (their relative
    paths and names), sub-folders, the runtime folder and symbolic links -- the classification
    of ``_walk_revision``. The kinds come from the listing itself (``d_type``; ``DirEntry``
    stats only where the file system leaves it unknown): a folder an install just wrote into
    is listed again on every walk, and one ``lstat`` per entry doubled its cost."""
    with os.scandir(dir_path) as it:
        entries = sorted(it, key=lambda e: e.name)
    top = not prefix
    segments: list[tuple] = []
    rels: list[str] = []
    names: list[str] = []
    for entry in entries:
        name = entry.name
        if top and is_internal_top(name) and name not in RUNTIME_NAMES:
            continue
        if entry.is_file(follow_symlinks=False):
            rels.append(prefix + name)
            names.append(name)
            continue
        link = entry.is_symlink()
        if link or entry.is_dir(follow_symlinks=False):
            if rels:
                segments.append((_FILES, tuple(rels), tuple(names)))
                rels, names = [], []
            if link:
                segments.append((_LINK, prefix + name))
            elif top and name in RUNTIME_NAMES:
                segments.append((_RUNTIME, name, entry.path))
            else:
                segments.append((_DIR, prefix + name + "/", entry.path))
    if rels:
        segments.append((_FILES, tuple(rels), tuple(names)))
    return tuple(segments)


def _walk_listed(base: str, folders: list[str] | None = None) -> tuple[dict[str, Stamp], tuple[str, ...]]:
    """``_walk_full(base)`` from the folders' remembered listings (see ``revision_walk``);
    anything unexpected -- a folder or file that vanished or changed kind meanwhile -- walks
    every folder instead, as the full walk would meet it."""
    try:
        return _walk_listed_once(base, folders)
    except (OSError, _Moved):
        if folders is not None:
            folders.clear()
        return _walk_full(base, folders)


def _walk_listed_once(base: str, folders: list[str] | None = None) -> tuple[dict[str, Stamp], tuple[str, ...]]:
    now = time.time_ns()  # before any folder's stat (the listings' proof below)
    try:
        st = os.stat(base)
    except OSError:
        return {}, ()
    if not stat_mod.S_ISDIR(st.st_mode):
        return {}, ()
    previous = _LISTINGS.get(base) or {}
    listings: dict[str, tuple[tuple, tuple]] = {}
    rels: list[str] = []
    stats: list[os.stat_result] = []
    links: list[str] = []
    fds: list[int] = []

    def visit(dir_path: str, prefix: str, st: os.stat_result) -> None:
        if folders is not None:
            folders.append(dir_path)
        key = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        hit = previous.get(dir_path)
        if hit is not None and hit[0] == key:
            segments = hit[1]
            listings[dir_path] = hit
        else:
            segments = _list_folder(dir_path, prefix)
            # a listing is reused only if a later change must move this stamp: the stamp was
            # taken after ``now``, so a change after it is stamped at least a tick later
            if now - max(st.st_mtime_ns, st.st_ctime_ns) >= RACY_NS:
                listings[dir_path] = (key, segments)
        fd = -1
        for seg in segments:
            kind = seg[0]
            if kind == _FILES:
                rels.extend(seg[1])
                if not _BY_NAME:
                    stats.extend(map(os.lstat, map(os.path.join, repeat(dir_path), seg[2])))
                    continue
                if fd < 0:
                    # by name in the open folder: each lstat then resolves one component, not
                    # the whole path (a syscall is dear in a VM; this is most of the walk)
                    fd = os.open(dir_path, _DIR_FLAGS)
                    fds.append(fd)
                stats.extend(map(partial(os.stat, dir_fd=fd, follow_symlinks=False), seg[2]))
            elif kind == _DIR:
                sub = os.lstat(seg[2])
                if not stat_mod.S_ISDIR(sub.st_mode):
                    raise _Moved
                visit(seg[2], seg[1], sub)
            elif kind == _RUNTIME:
                # only its runtime.json, while that is a regular file (it is not listed: the
                # folder's other files are memory-tui's own caches, rewritten all the time)
                if folders is not None:
                    folders.append(seg[2])
                path = os.path.join(seg[2], "runtime.json")
                try:
                    rst = os.lstat(path)
                except OSError:
                    continue
                if stat_mod.S_ISREG(rst.st_mode):
                    rels.append(seg[1] + "/runtime.json")
                    stats.append(rst)
            else:
                links.append(seg[1])

    try:
        visit(base, "", st)  # FileNotFoundError: the race, walked in full
    finally:
        for fd in fds:
            os.close(fd)
    _LISTINGS[base] = listings
    if not all(map(stat_mod.S_ISREG, map(_MODE_OF, stats))):
        raise _Moved
    return dict(zip(rels, map(_STAMP_OF, stats))), tuple(links)


def installed_stamps(root: Path, before: Mapping[str, Stamp], targets: Iterable[tuple[str, str]]) -> dict[str, Stamp] | None:
    """``revision_walk(root)[0]`` right after an install of ``targets`` (``(kind, path)``:
    ``file`` targets replaced or removed one file, ``tree`` targets a whole top-level folder)
    into a workspace whose stamps were ``before`` (walked under the same lock): the stamps of
    what the install touched are taken again, the rest are ``before``'s. None when a target
    is not one this can follow (the caller walks)."""
    stamps = dict(before)
    keys_moved = False
    base = os.fspath(root)
    for kind, path in targets:
        parts = tuple(path.split("/"))
        if kind == "tree":
            if len(parts) != 1 or is_internal_top(parts[0]):
                return None
            prefix = path + "/"
            for rel in [r for r in stamps if r.startswith(prefix)]:
                del stamps[rel]
            found: dict[str, Stamp] = {}
            links: list[str] = []
            top = os.path.join(base, path)
            try:
                st = os.lstat(top)
            except FileNotFoundError:
                keys_moved = True
                continue
            if not stat_mod.S_ISDIR(st.st_mode):
                return None
            _walk_revision(top, path + "/", found, links)
            if links:
                return None
            stamps.update(found)
            keys_moved = True
            continue
        if kind != "file" or (is_internal_top(parts[0]) and not (len(parts) == 2 and parts[0] in RUNTIME_NAMES
                                                                  and parts[1] == "runtime.json")):
            return None
        # every folder on the way must be a real folder (the walk never follows a link)
        here = base
        for part in parts[:-1]:
            here = os.path.join(here, part)
            try:
                if not stat_mod.S_ISDIR(os.lstat(here).st_mode):
                    return None
            except FileNotFoundError:
                return None
        try:
            st = os.lstat(os.path.join(base, path))
        except FileNotFoundError:
            if stamps.pop(path, None) is not None:
                keys_moved = True
            continue
        if not stat_mod.S_ISREG(st.st_mode):
            return None
        if path not in stamps:
            keys_moved = True
        stamps[path] = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
    if keys_moved:
        stamps = {rel: stamps[rel] for rel in sorted(stamps, key=lambda r: tuple(r.split("/")))}
    return stamps


# ---------------------------------------------------------------------------- dependencies


# -------------------------------------------------------------------------------- the cache


@dataclass
class ParsedEntry:
    topic: Topic
    deps: tuple[str, ...]
    sig: str
    checked: object  # the index token the signature was last checked against
    refs_ok: bool | None = None  # every source ref of every unit exists (checked under ``sig``)


class _Parsed(NamedTuple):
    """What ``WorkspaceCache.tree`` was last given and answered: positions are those of the
    texts as given (insertion order), ``topics`` in tree order."""

    token: object  # the archive token
    keys: tuple[str, ...]  # the paths as given
    values: list[str]  # their texts, aligned
    at: dict[str, int]  # path -> its position
    tpos: list[int]  # position -> its topic's place in ``topics``
    topics: list[Topic]  # tree order
    bad: tuple[int, ...]  # the positions whose topic had problems (looked up again every time)
    handed: Mapping  # ``_topic_keys`` as it was when the call began

    @classmethod
    def of(cls, token: object, keys: tuple[str, ...], values: list[str], order: list[str], topics: list[Topic],
           handed: Mapping) -> "_Parsed":
        place = dict(zip(order, range(len(order))))
        tpos = list(map(place.__getitem__, keys))
        bad = tuple(compress(range(len(keys)), map(not_, map(_OK, map(topics.__getitem__, tpos)))))
        return cls(token, keys, values, dict(zip(keys, range(len(keys)))), tpos, topics, bad, handed)


_OK = attrgetter("ok")


def _topic_symlinks(topics_dir: Path) -> list[str]:
    """Topics-relative paths of symbolic links (files or folders) under ``topics_dir``."""
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(topics_dir):
        for name in (*dirnames, *filenames):
            path = Path(dirpath, name)
            if path.is_symlink():
                out.append(path.relative_to(topics_dir).as_posix())
    return sorted(out)


class WorkspaceCache:
    """Per memory root; use through :func:`cache_for`. Thread-safe by one lock."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.lock = threading.RLock()
        self.files: dict[str, tuple[tuple[int, int, int, int], str, str]] = {}  # rel -> (stat, text, sha)
        # the last walked ``read_topics``: (its paths, their stamps, the positions to read again,
        # (texts, shas) answered, the ``files`` it left)
        self._last_read: tuple | None = None
        self.parsed: dict[tuple[str, str], ParsedEntry] = {}
        self.proofs: dict[tuple[str, str], str] = {}  # (rel, sha) -> deps signature
        self._ids: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._memo: dict[tuple[str, str], tuple[str, object]] = {}
        self._links: dict[str, tuple[tuple[str, str], str]] = {}
        self._kept: dict[tuple[str, str], tuple[str, object]] = {}
        self._token: object = object()
        self._revision: tuple[dict, str] | None = None
        self._walk: tuple[dict[str, Stamp], tuple[str, ...], object, int | None] | None = None  # ``note_walk``
        self._chain: list[Entry] = []  # the revision stream's chain (``_feed_stream``)
        self._stale = 0  # the chain's hash states from this index on are not of its bytes (a deferred install's)
        self._pending: PendingRevision | None = None  # the last install's revision, not yet hashed
        self._chain_of: PendingRevision | None = None  # the pending revision whose hash the chain is
        # the last revision hashed here: (its stamps, its value, rel -> SHA-256 of every file
        # whose stamp did not prove its bytes then); see ``holds_revision``
        self._hashed: tuple[dict[str, Stamp], str, dict[str, str]] | None = None
        self._topic_keys: dict[str, tuple[Topic, str, str]] = {}  # path -> (topic, sha256, deps sig) last handed out
        self._index_files: Mapping | None = None
        self._index: SourceIndex | None = None  # the index last observed, of ``_index_files``' entries
        self._trees: list[TopicTree] = []  # the last two assembled trees
        self._by_bytes: dict[str, tuple[bytes, object]] = {}
        self._by_stamp: dict[str, tuple[Stamp, object]] = {}  # ``by_stamp``: key -> (the file's stamp, value)
        self._derived: dict[str, tuple[Stamp, str]] = {}  # committed derived file -> (stamp, text)
        self._order_covered: tuple[TopicTree, object] | None = None
        self._proven_now: dict[str, tuple[str, object]] = {}  # rel -> (text object, token) proven
        self._links_fast: dict[str, tuple[str, tuple, str]] = {}  # rel -> (text object, locations, rewrite)
        # the last tree's parses (``_Parsed``), and the paths whose ``_topic_keys`` entry was
        # set since that call began (``_entry``): what ``_topics_since_last`` looks at again
        self._last_parsed: _Parsed | None = None
        self._handed_moved: set[str] = set()
        # the last block-id locations: (paths, their texts, each one's file ids, id -> rel, no id in two files)
        self._locations: tuple[tuple[str, ...], list[str], list[tuple[str, ...]], Mapping[str, str], bool] | None = None
        # ``refs_unfine``: (index, the topics asked of, the positions not found fine)
        self._refs_fine: tuple[object, tuple[Topic, ...], frozenset[int]] = (None, (), frozenset())
        self._disk_loaded = False
        self._unsaved: dict[tuple[str, str], str] = {}  # proofs made since the last ``save_disk``
        self._base_bytes = 0  # the proofs file's size when last read or written
        # ``retain``'s last live paths, their text objects and (path, sha256) keys, aligned
        self._retained: tuple[tuple[str, ...], list[str], list[tuple[str, str]]] | None = None
        self._retained_size = 0  # cached entries the last ``retain`` left (``retain_lazily``)

    # -- the revision -------------------------------------------------------------------
    def revision(self, stamps: Mapping[str, tuple], installed: bool = False) -> str:
        """The workspace revision (memory spec §2.6) of the files named by ``stamps`` (as
        ``revision_walk`` lists them: sorted, ``rel -> (mtime_ns, size, inode, ctime_ns)``).

        The revision is one SHA-256 stream over every file in order, so per-file digests cannot
        be combined into it; what can be reused is the hash *state* after a prefix of files,
        and the bytes of the files after it (``_feed_stream``). The bytes fed are exactly
        ``workspace.workspace_revision``'s (a property test compares the two). ``installed``:
        the files a transaction of this process just installed, whose revision is kept for the
        next process (``revmemo``; only then, so a refused or read-only run writes nothing)."""
        with self.lock:
            last = self._revision
            if last is not None and last[0] == stamps:
                return last[1]
            chain, stale, pending = self._chain, self._stale, self._pending
        if pending is not None and pending.holds(stamps):
            return pending.value()
        now = time.time_ns()

        def fed() -> tuple[str, list | None]:
            out = _feed_stream(os.fspath(self.root), chain, list(stamps.items()), {}, now, stale=stale)
            assert out is not None  # only a cancelled feed stops early
            return out

        def kept() -> tuple[str, list | None]:
            # a fresh process has no chain: the revision the last process kept, when it proves
            # these files (the chain stays empty; the next feed reads the files)
            value = revmemo.lookup(self.root, stamps) if not chain else None
            return (value, None) if value is not None else fed()

        value, entries = derive("revision", kept, fed, lambda a, b: a[0] == b[0])
        with self.lock:
            if entries is not None:
                self._chain, self._stale, self._chain_of = entries, len(entries), None
                self._note_hashed(stamps, value, entries)
            if not any_racy(stamps, now):
                self._revision = (dict(stamps), value)
        if installed and entries is not None:
            self._keep_revision(value, entries)
        return value

    def _keep_revision(self, value: str, entries: list) -> None:
        if tx_mode() != "full":  # the full mode is the code before any cache: it keeps none
            revmemo.keep(self.root, value, entries)

    def note_walk(self, stamps: Mapping[str, Stamp], links: tuple[str, ...], revision: object,
                  generation: int | None = None) -> None:
        """``revision_walk(root)`` as an install under the lock just left it, the revision of
        exactly the bytes it installed (a string or a ``PendingRevision``), and the file-system
        monitor's generation at which these stamps were true (``fsmonitor``; ``None``: no
        monitor), for the next optimistic stage, which ``take_walk`` hands them to once."""
        with self.lock:
            self._walk = (dict(stamps), tuple(links), revision, generation)

    def take_walk(self) -> tuple[dict[str, Stamp], tuple[str, ...], object, int | None] | None:
        with self.lock:
            walk, self._walk = self._walk, None
        return walk

    def start_revision(self, before: Mapping[str, Stamp], changes: Mapping[str, bytes | None]) -> "RevisionJob":
        """The revision the workspace will have once ``changes`` (path -> new bytes, ``None``
        = removed) are installed over the files ``before`` names, computed in a worker thread
        from now on: the hash of the new bytes and of everything after them runs while the
        caller installs, flushes caches and writes its bookkeeping (``hashlib`` releases the
        GIL while it hashes, and the stream's unchanged bytes come from memory in a few large
        buffers, so the worker rarely needs the GIL). :meth:`RevisionJob.result` hands the
        value out only for the very stamps the install left; anything else is recomputed."""
        return RevisionJob(self, before, changes)

    def can_defer(self) -> bool:
        """Whether an install's revision can be left for :meth:`defer_revision` (the caller
        then starts no :class:`RevisionJob`): a chain to build on, held bytes kept between
        transactions (never in a ``one_shot`` process, whose one result is printed at once)
        and not the full-rebuild mode, which keeps nothing."""
        with self.lock:
            return bool(self._chain) and not in_one_shot() and tx_mode() != "full"

    def defer_revision(self, stamps: Mapping[str, Stamp], puts: Mapping[str, bytes]) -> "PendingRevision | str | None":
        """The revision of the files ``stamps`` names right after an install (call under the
        write lock, ``stamps`` as ``installed_stamps`` gives them; ``puts``: the bytes the
        install wrote, by path), hashed only when it is read (:class:`PendingRevision`).

        Everything that could change after the lock is released is settled here: the chain's
        prefix is proven (stamps, young files re-read), and every byte after the resume point
        is taken into memory -- the chain's held bytes (their stamps proven), ``puts``, and any
        other file read now. The chain becomes that unhashed one, so the next install builds
        on it. ``None`` when more than ``TAIL_BYTES`` would have to be read or given (the
        caller hashes now); the value itself when the chain already ends in these files."""
        with self.lock:
            chain, stale = self._chain, self._stale
        now = time.time_ns()
        base = os.fspath(self.root)
        new = {rel: data for rel, data in puts.items() if data is not None and rel in stamps}
        rels = list(stamps)
        deferred = _NOT_IN_PLACE
        if len(rels) == len(chain) and list(map(_ENTRY_REL, chain)) == rels:
            deferred = _defer_in_place(base, chain, stale, rels, list(stamps.values()), new, now)
        if deferred is _NOT_IN_PLACE:
            planned = _plan_stream(base, chain, list(stamps.items()), new, now, read_now=True, read_limit=TAIL_BYTES,
                                   stale=stale)
            if planned is None:
                return None
            if planned[0] is None:
                return planned[1]
            _digest, entries, todo = planned
            resume = len(entries) - 1
            for rel, st, check, seg, data in todo:
                entries.append((rel, st, check, None, seg if seg is not None else _held(rel, data)))
            deferred = entries, resume, resume + 1
        if deferred is None:
            return None
        entries, resume, stale = deferred
        young = {entries[j][0]: entries[j][2] for j in _young_at(entries)}
        pending = PendingRevision(self, dict(stamps), entries, resume, young, now)
        with self.lock:
            self._chain, self._stale, self._chain_of = entries, stale, None
            self._pending = pending
        return pending

    def _complete(self, pending: "PendingRevision", entries: list, resume: int) -> str:
        """Hash what ``pending`` holds (everything after its resume point is in memory); the
        hashed chain replaces the cache's when that is still ``pending``'s unhashed one."""
        digest = entries[resume][3].copy() if resume >= 0 else hashlib.sha256()
        todo = [(e[0], e[1], e[2], e[4], None) for e in entries[resume + 1:]]
        fed = _feed_planned(os.fspath(self.root), digest, entries[:resume + 1], todo, pending.planned_at, True)
        assert fed is not None  # only a cancelled feed stops early
        value, out = fed
        now = time.time_ns()
        with self.lock:
            if self._chain is entries:
                self._chain, self._stale, self._chain_of = out, len(out), pending
                self._pending = None
                self._note_hashed(pending.stamps, value, out)
                if not any_racy(pending.stamps, now):
                    self._revision = (pending.stamps, value)
        return value

    def _keep_hashed(self, pending: "PendingRevision", value: str) -> None:
        """Keep ``pending``'s value for the next process while the chain is still its hash."""
        with self.lock:
            chain = self._chain if self._chain_of is pending else None
        if chain is not None:
            self._keep_revision(value, chain)

    def _note_hashed(self, stamps: Mapping[str, Stamp], value: str, entries: list) -> None:
        if len(entries) == len(stamps):  # call with ``self.lock`` held
            self._hashed = (dict(stamps), value, {e[0]: e[2] for e in entries if e[2] is not None})

    def holds_revision(self, stamps: Mapping[str, Stamp], revision: str) -> bool:
        """The files ``stamps`` names (just walked) provably hold the bytes of ``revision``
        without hashing the stream again: the last revision hashed here is ``revision``, of these
        very stamps, and every file whose stamp did not prove its bytes then (inside the clock
        tick: a same-size write in place may keep the stamp) holds the bytes hashed, by SHA-256
        read again now. A file whose stamp proved its bytes then still does (its stamp is
        unchanged, and no later write can keep it). What is read is the files young at that
        hash -- after an install, the ones it wrote -- not the whole stream. ``False`` means
        "not proven" (the caller compares revisions), never "changed"."""
        if isinstance(revision, PendingRevision):
            return revision.cache is self and revision.holds(stamps)
        with self.lock:
            hashed = self._hashed
        if hashed is None or hashed[1] != revision or hashed[0] != stamps:
            return False
        return _still_holds(os.fspath(self.root), hashed[2])

    def _commit_stream(self, entries: list, stamps: Mapping[str, Stamp], value: str, now: int) -> None:
        with self.lock:
            self._chain, self._stale, self._chain_of = entries, len(entries), None
            self._note_hashed(stamps, value, entries)
            if not any_racy(stamps, now):
                self._revision = (dict(stamps), value)
        self._keep_revision(value, entries)

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
            if _STAMP_OF(st) == stamp:
                with self.lock:
                    self._by_stamp[key] = (stamp, value)
        return value

    # -- block-id locations -----------------------------------------------------------------
    def block_locations(self, texts: Mapping[str, str]) -> dict[str, str]:
        """``normalize.block_id_locations(texts)`` (topics-relative keys), from the last call's
        when only a few texts changed and no id lives in two files: the changed files' ids are
        taken out and put back, the rest is as it was."""

        def full() -> dict[str, str]:
            return block_id_locations(texts, self.file_ids)

        def incremental() -> dict[str, str]:
            with self.lock:
                last = self._locations
            if last is not None and last[4]:
                where = self._moved_locations(last, texts)
                if where is not None:
                    return where
            return self._full_locations(texts)

        if tx_mode() != "check":
            return derive("block-link locations", incremental, full)
        # check mode hands on the incremental map (derive raises unless it equals the full
        # one): ``rewrite_block_links`` tells the ids that moved from how it lies over the last
        kept = incremental()
        derive("block-link locations", lambda: kept, full)
        return kept

    def _full_locations(self, texts: Mapping[str, str]) -> dict[str, str]:
        where = block_id_locations(texts, self.file_ids)
        rels = tuple(texts)
        values = list(texts.values())
        ids = list(map(self.file_ids, rels, values))
        dupfree = len(where) == sum(map(len, map(set, ids)))
        with self.lock:
            self._locations = (rels, values, ids, where, dupfree)
        return where

    def _moved_locations(self, last, texts: Mapping[str, str]) -> Mapping[str, str] | None:
        """The last call's locations with the changed files' ids taken out and put back, as
        a ``Locations`` over the last plain map (copying the 80 000 entries on every edit
        touched every key's reference count); ``None`` when that cannot be decided here."""
        rels_old, texts_old, ids_old, where_old, _ = last
        rels = tuple(texts)
        values = list(texts.values())
        if rels == rels_old:
            # one C-level identity pass; only texts that are other objects are compared
            changed_at = [i for i in compress(range(len(rels)), map(is_not, values, texts_old))
                          if values[i] != texts_old[i]]
            changed = [rels[i] for i in changed_at]
            removed: list[str] = []
            ids = ids_old
        else:
            at_old = dict(zip(rels_old, range(len(rels_old))))
            changed = [rel for rel, text in zip(rels, values)
                       if (k := at_old.get(rel)) is None or (texts_old[k] is not text and texts_old[k] != text)]
            removed = [rel for rel in rels_old if rel not in texts]
            ids = None
        if len(changed) + len(removed) > 64 or any(rel.startswith("topics/") for rel in changed):
            return None
        if not changed and not removed:
            with self.lock:
                self._locations = (rels, values, ids_old if ids is not None else list(map(self.file_ids, rels, values)),
                                   where_old, True)
            return where_old
        old_ids = dict(zip(rels_old, ids_old)) if ids is None else None
        leaving: dict[str, str] = {}
        for rel in (*changed, *removed):
            before = old_ids.get(rel) if old_ids is not None else ids_old[rels_old.index(rel)]
            if before is not None:
                leaving.update((bid, rel) for bid in before)
        arriving: dict[str, str] = {}
        new_ids: dict[str, tuple[str, ...]] = {}
        for rel in changed:
            found = new_ids[rel] = self.file_ids(rel, texts[rel])
            for bid in found:
                if arriving.setdefault(bid, rel) != rel or (bid in where_old and bid not in leaving):
                    return None  # an id in two files: the first in tree order wins, decided in full
        if ids is None:
            ids = [new_ids[rel] if rel in new_ids else (old_ids[rel] if rel in old_ids else self.file_ids(rel, text))
                   for rel, text in zip(rels, values)]
        else:
            ids = list(ids)
            for i, rel in zip(changed_at, changed):
                ids[i] = new_ids[rel]
        where = Locations.moved(where_old, leaving.keys() - arriving.keys(), arriving)
        with self.lock:
            self._locations = (rels, values, ids, where, True)
        return where

    # -- creation order -------------------------------------------------------------------
    def order_covers(self, tree: TopicTree, state: object) -> bool:
        """Every id of ``tree`` is known to be in ``state``'s creation order (both the very
        objects noted last)."""
        with self.lock:
            noted = self._order_covered
        return noted is not None and noted[0] is tree and noted[1] is state

    def note_order_covers(self, tree: TopicTree, state: object) -> None:
        with self.lock:
            self._order_covered = (tree, state)

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

    # -- the source index generation ------------------------------------------------------
    def observe_index(self, index: SourceIndex) -> object:
        """A token for ``index``: the same object as last time when no archive entry changed,
        so a signature checked once is not checked again. Pass it to the other methods."""
        with self.lock:
            if index is self._index:  # an index is never changed once made: the same entries
                return self._token
            prev = self._index_files
            files = index.files
            if prev is not None and len(prev) == len(files) and all(map(is_, map(files.get, prev), prev.values())):
                self._index = index
                return self._token
            self._index_files = dict(files)
            self._index = index
            self._token = object()
            return self._token

    # -- committed texts ------------------------------------------------------------------
    def read_topics(self, topics_dir: Path, walk: tuple[Mapping[str, Stamp], tuple[str, ...]] | None = None,
                    ) -> tuple[dict[str, str], dict[str, str], list[Problem]]:
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

            return derive("committed topic texts", lambda: self._read_again(topics_dir, rels, listed, links) or full(),
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

    # -- parsing --------------------------------------------------------------------------
    def entry(self, rel: str, text: str, index: SourceIndex, token: object, digest: str | None = None) -> ParsedEntry:
        made = self._entry(rel, text, index, token, digest or self._sha_of(rel, text))
        return made

    def _entry(self, rel: str, text: str, index: SourceIndex, token: object, digest: str) -> ParsedEntry:
        made = self._parse_entry(rel, text, index, token, digest)
        with self.lock:  # one step for ``tree``, which takes the set of moved paths under the lock
            self._handed_moved.add(rel)
            self._topic_keys[rel] = (made.topic, digest, made.sig)
        return made

    def _parse_entry(self, rel: str, text: str, index: SourceIndex, token: object, digest: str) -> ParsedEntry:
        key = (rel, digest)
        hit = self.parsed.get(key)
        if hit is not None:
            if hit.checked is token:
                return hit
            if deps_signature(index, hit.deps) == hit.sig:
                hit.checked = token
                return hit

        store = store_for(self.root)
        stored = store.topic_for_sha(rel, digest, index)
        if stored is not None and stored[0].text == text:  # the last process's parse of these bytes
            made = ParsedEntry(stored[0], stored[1], stored[2], token)
            self.parsed[key] = made
            return made
        topic = parse_topic(rel, text, resolve=index.resolve_target, strict=True)
        deps = topic_deps(topic)
        made = ParsedEntry(topic, deps, deps_signature(index, deps), token)
        if topic.ok:  # a topic with errors is parsed again each time (its problems may depend on more)
            self.parsed[key] = made
            hit_file = self.files.get(rel)
            known = hit_file is not None and hit_file[2] == digest and hit_file[0][0] != -1
            store.put_topic(rel, hit_file[0][:3] if known else None, digest, topic, deps, made.sig)
        return made

    def tree(self, texts: Mapping[str, str], index: SourceIndex, token: object,
             shas: Mapping[str, str] | None = None) -> TopicTree:
        """The strict parse of ``texts`` (== ``parse_tree(texts, resolve=..., strict=True)``)."""
        shas = shas or {}
        with self.lock:
            last, moved = self._last_parsed, self._handed_moved
            self._handed_moved = set()
            handed = self._topic_keys

        def full() -> list[Topic]:
            return [self.entry(rel, texts[rel], index, token, shas.get(rel)).topic
                    for rel in sorted(texts, key=topic_sort_key)]

        made: list[_Parsed] = []
        topics = derive("tree topics", lambda: self._topics_since_last(texts, index, token, shas, last, moved, handed,
                                                                       made), full,
                        lambda a, b: len(a) == len(b) and all(x is y or (not x.ok and x == y) for x, y in zip(a, b)))
        # what the next call starts from: the topics handed out (in check mode, the full
        # derivation's, which are this one's very parses but for topics with problems, and
        # those are looked at again every time)
        with self.lock:
            self._last_parsed = made[0]._replace(topics=topics) if made else None
        # The tree is a function of its topics alone: the baseline of an edit is the tree the
        # previous edit installed (the same parses), so it is not assembled again.
        with self.lock:
            for known in self._trees:
                if len(known.topics) == len(topics) and all(map(is_, known.topics, topics)):
                    self._trees = [known, *(t for t in self._trees if t is not known)]
                    return known
            previous = self._trees[0] if self._trees else None
        if previous is None:
            tree = assemble_tree(topics)
        else:  # an edit's tree from its baseline: only the changed topics' ids move
            tree = derive("tree", lambda: reassemble_tree(previous, topics), lambda: assemble_tree(topics), same_tree)
        with self.lock:
            self._trees = [tree, *self._trees[:1]]
        return tree

    def _topics_since_last(self, texts: Mapping[str, str], index: SourceIndex, token: object,
                           shas: Mapping[str, str], last: "_Parsed | None", moved: set[str],
                           handed: Mapping[str, tuple[Topic, str, str]], made: list) -> list[Topic]:
        """``entry(...).topic`` of every text in tree order, where a text that is the one (or
        equal to the one) the last call parsed under the same archive token keeps that call's
        parse without being looked up again: ``entry`` would return that very parse (same
        path, same bytes, same signature), and it is still the one handed out for its path.
        Topics with problems are always looked up (``entry`` never keeps them).

        ``moved``: the paths whose handed-out parse was set since ``last`` began, ``handed``
        the map of handed-out parses now. With the same paths in the same order as ``last``,
        only the positions whose text is another object, whose topic had problems or whose
        path is in ``moved`` are looked at (one C-level identity pass finds the first): every
        other parse was the one handed out when that call ended, and nothing set its path
        since. A ``handed`` that is not the map ``last`` began with (``retain`` replaced it)
        is compared at every position. Appends to ``made`` what the next call starts from."""
        keys = tuple(texts)
        values = list(texts.values())
        if last is None or last.token is not token:
            order = sorted(texts, key=topic_sort_key)
            out = [self.entry(rel, texts[rel], index, token, shas.get(rel)).topic for rel in order]
            made.append(_Parsed.of(token, keys, values, order, out, handed))
            return out
        if keys != last.keys:
            # other paths: each text looked up by path in the last call's
            order = sorted(texts, key=topic_sort_key)
            out = [self._topic_since_last(rel, texts[rel], index, token, shas, last, handed) for rel in order]
            made.append(_Parsed.of(token, keys, values, order, out, handed))
            return out
        # every text equal to the last one (the baseline of an edit: the texts the last one
        # installed, read back) keeps its parse unless it had problems or its path moved
        positions = set() if values == last.values else set(compress(range(len(keys)),
                                                                     map(is_not, values, last.values)))
        positions.update(last.bad)
        if handed is last.handed:
            at = last.at
            positions.update(at[path] for path in moved if path in at)
        else:
            by_text_order = map(last.topics.__getitem__, last.tpos)
            now_handed = map(itemgetter(0), map(handed.get, keys, repeat(_NOT_HANDED)))
            positions.update(compress(range(len(keys)), map(is_not, now_handed, by_text_order)))
        out = list(last.topics)
        tpos = last.tpos
        for i in sorted(positions):
            out[tpos[i]] = self._topic_since_last(keys[i], values[i], index, token, shas, last, handed, i)
        bad = tuple(i for i in positions if not out[tpos[i]].ok)
        made.append(last._replace(values=values, topics=out, bad=bad, handed=handed))
        return out

    def _topic_since_last(self, rel: str, text: str, index: SourceIndex, token: object, shas: Mapping[str, str],
                          last: "_Parsed", handed: Mapping[str, tuple[Topic, str, str]], i: int | None = None) -> Topic:
        if i is None:
            i = last.at.get(rel)
        if i is not None and i not in last.bad:
            was = last.values[i]
            if was is text or was == text:
                topic = last.topics[last.tpos[i]]
                known = handed.get(rel)
                if known is not None and known[0] is topic:
                    return topic
        return self.entry(rel, text, index, token, shas.get(rel)).topic

    def refs_ok(self, topic: Topic, index: SourceIndex) -> bool:
        """Every source ref of ``topic`` exists (a cached answer while its deps are unchanged)."""
        known = self._topic_keys.get(topic.path)  # the digest of a parse handed out, not re-hashed per edit
        digest = known[1] if known is not None and known[0] is topic else sha(topic.text)
        hit = self.parsed.get((topic.path, digest))
        if hit is None or hit.topic is not topic:
            return False
        if hit.refs_ok is None:
            # a function of the bytes and of the archives the refs live in (the deps), so it
            # persists under the same key as the parse
            store = store_for(self.root)
            key = (self._sha_of(topic.path, topic.text), hit.sig)
            stored = store.derived("refs", topic.path, key)
            if type(stored) is bool:
                hit.refs_ok = stored
            else:
                hit.refs_ok = all(index.validate_ref(ref) is None for unit in topic.units for ref in unit.source_refs)
                if topic.ok:
                    store.put_derived("refs", topic.path, key, hit.refs_ok)
        return hit.refs_ok

    def refs_unfine(self, topics: tuple[Topic, ...], exclude: set[str], index: SourceIndex) -> set[str]:
        """The paths of ``topics`` (but ``exclude``) whose ``refs_ok`` does not hold. A True
        found for a parse under this very index is not asked again: the answer is a function
        of the parse and of the archives (the index), and the parse entry of a live text is
        neither dropped nor replaced while the index stands. With as many topics as the last
        call, one C-level identity pass finds the positions holding another parse; only those,
        and the ones not found fine last time, are asked."""
        with self.lock:
            last_index, last_topics, not_fine = self._refs_fine
        n = len(topics)
        if last_index is not index:
            ask: Iterable[int] = range(n)
        elif len(last_topics) == n:
            ask = set(compress(range(n), map(is_not, topics, last_topics)))
            ask.update(not_fine)
        else:  # topics came or went: the fine parses found by path
            fine = {t.path: t for i, t in enumerate(last_topics) if i not in not_fine}
            ask = [i for i, t in enumerate(topics) if fine.get(t.path) is not t]
        out: set[str] = set()
        unknown: set[int] = set()
        for i in sorted(ask):
            topic = topics[i]
            if topic.path in exclude:
                unknown.add(i)
            elif not self.refs_ok(topic, index):
                out.add(topic.path)
                unknown.add(i)
        with self.lock:
            self._refs_fine = (index, topics, frozenset(unknown))
        return out

    def memo(self, rel: str, text: str, fn):
        """``fn(text)``, remembered per (path, function) while the text stays the same; the
        functions in ``PERSISTED_MEMOS`` (frozensets of str) also across processes."""
        try:  # not ``getattr(fn, "__qualname__", repr(fn))``: that builds the repr on every call
            name = fn.__qualname__
        except AttributeError:
            name = repr(fn)
        key = (rel, name)
        hit = self._memo.get(key)
        if hit is not None and hit[0] == text:
            return hit[1]
        kind = PERSISTED_MEMOS.get((getattr(fn, "__module__", None), name))
        value = None
        if kind is not None:
            store = store_for(self.root)
            digest = self._sha_of(rel, text)
            value = store.derived(kind, rel, (digest,))
            if not (type(value) is frozenset and all(map(is_, map(type, value), repeat(str)))):
                value = None
        if value is None:
            value = fn(text)
            if kind is not None:
                store.put_derived(kind, rel, (digest,), value)
        self._memo[key] = (text, value)
        return value

    def kept(self, kind: str, rel: str, text: str, compute, valid):
        """``compute()``, a pure function of (``rel``, ``text``), remembered by the text in
        memory and in the parse cache (kind ``kind``; a stored value ``valid`` rejects is a miss)."""
        hit = self._kept.get((kind, rel))
        if hit is not None and hit[0] == text:
            return hit[1]
        store = store_for(self.root)
        digest = self._sha_of(rel, text)
        value = store.derived(kind, rel, (digest,))
        if value is None or not valid(value):
            value = compute()
            store.put_derived(kind, rel, (digest,), value)
        self._kept[(kind, rel)] = (text, value)
        return value

    def link_rewrite(self, rel: str, text: str, locations: tuple, compute) -> str:
        """``normalize.rewrite_block_links``' memo of one file: its output is a function of
        the path, the bytes and ``locations`` (the files holding the ids it may link to)."""
        fast = self._links_fast.get(rel)
        if fast is not None and fast[0] is text and fast[1] == locations:
            return fast[2]  # the very text, its ids where they were: the same rewrite
        loc_key = hashlib.sha256(repr(locations).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        key = (self._sha_of(rel, text), loc_key)
        hit = self._links.get(rel)
        if hit is not None and hit[0] == key:
            value = hit[1]
        else:
            store = store_for(self.root)
            value = store.derived("links", rel, key)
            if type(value) is not str:
                value = compute()
                store.put_derived("links", rel, key, value)
        if value is not text and value == text:
            # a rewrite that changes nothing hands back the very text: the passes after it
            # (the tree, the stage's writes) then find the file unchanged by identity, instead
            # of an equal copy that alternates with the committed text from edit to edit
            value = text
        self._links[rel] = (key, value)
        self._links_fast[rel] = (text, locations, value)
        return value

    def file_ids(self, rel: str, text: str) -> tuple[str, ...]:
        """``normalize.file_block_ids`` of ``text``, remembered per path (and across
        processes in the parse cache, by the text's sha256)."""

        hit = self._ids.get(rel)
        if hit is not None and hit[0] == text:
            return hit[1]
        store = store_for(self.root)
        digest = self._sha_of(rel, text)
        ids = store.derived("ids", rel, (digest,))
        if not (isinstance(ids, tuple) and all(map(isinstance, ids, repeat(str)))):
            ids = file_block_ids(text)
            store.put_derived("ids", rel, (digest,), ids)
        self._ids[rel] = (text, ids)
        return ids

    # -- derived views ----------------------------------------------------------------------
    def build_views(self, tree: TopicTree, **kwargs):
        """``views.build_views(tree, **kwargs)`` from per-topic parts (``viewcache``): parts of
        topics parsed before come from memory or the parse cache, keyed by bytes + deps."""
        store = store_for(self.root)

        def key_of(topic: Topic) -> tuple[str, str] | None:
            known = self._topic_keys.get(topic.path)
            if known is None or known[0] is not topic:
                return None
            return known[1], known[2]

        def lookup(topic: Topic) -> TopicPart | None:
            key = key_of(topic)
            part = store.derived("views", topic.path, key) if key is not None else None
            return part if isinstance(part, TopicPart) else None

        def remember(topic: Topic, part: TopicPart) -> None:
            key = key_of(topic)
            if key is not None and topic.ok:
                store.put_derived("views", topic.path, key, part)

        # key_of lets the views start from (and keep) the persisted snapshot
        return view_cache_for(self.root).build(tree, lookup=lookup, store=remember, key_of=key_of, **kwargs)

    # -- canonical proofs -----------------------------------------------------------------
    def is_proven(self, rel: str, text: str, index: SourceIndex, token: object) -> bool:
        if self._proven_as(rel, text, token):
            return True
        digest = self._sha_of(rel, text)
        sig = self.proofs.get((rel, digest))
        if sig is None:
            return False
        proven = self.entry(rel, text, index, token, digest).sig == sig
        if proven:
            self._proven_now[rel] = (text, token)
        return proven

    def prove(self, rel: str, text: str, index: SourceIndex, token: object) -> None:
        """Record that normalising ``text`` at ``rel`` was the identity."""
        if self._proven_as(rel, text, token):
            return
        digest = self._sha_of(rel, text)
        entry = self.entry(rel, text, index, token, digest)
        if self.proofs.get((rel, digest)) != entry.sig:
            if has_local_label(text) or not entry.topic.ok:
                return
            self.proofs[(rel, digest)] = entry.sig
            self._unsaved[(rel, digest)] = entry.sig
        self._proven_now[rel] = (text, token)

    def _proven_as(self, rel: str, text: str, token: object) -> bool:
        """This very text object was found proven under this very archive token (the same
        bytes and the same signature: the answer cannot have changed, and proofs of live
        texts are never forgotten)."""
        hit = self._proven_now.get(rel)
        return hit is not None and hit[0] is text and hit[1] is token

    def _sha_of(self, rel: str, text: str) -> str:
        hit = self.files.get(rel)
        if hit is not None and (hit[1] is text or hit[1] == text):  # comparing is cheaper than hashing
            return hit[2]
        return sha(text)

    def retain_lazily(self, live: Mapping[str, str]) -> None:
        """``retain(live)`` once the caches hold ``RETAIN_SLACK`` entries more than the last
        ``retain`` left them, else nothing. Every cache is keyed by content or checks the text
        it was made from, so an entry for a text no longer committed is never handed out for
        another: forgetting it only bounds memory, and a transaction adds about two (its new
        parse and proof). Pruning on each one cost a pass over every cached entry
        (≈ 2.7 ms at scale 4); this way it runs once per ~30 edits. ``MEMORY_TUI_TX=full``
        retains every time, as before."""
        if tx_mode() != "full" and self._cached_entries() <= self._retained_size + RETAIN_SLACK:
            return
        self.retain(live)

    def _cached_entries(self) -> int:
        return (len(self.parsed) + len(self.proofs) + len(self._ids) + len(self._topic_keys) + len(self._memo)
                + len(self._links) + len(self._links_fast) + len(self._kept) + len(self._proven_now))

    def retain(self, live: Mapping[str, str], extra: Iterable[tuple[str, str]] = ()) -> None:
        """Forget entries for texts no longer committed (bounded memory).

        Each kept dict is the old one without the entries whose key is not live, in the same
        order (``test_edit_deltas_props`` compares it with a filter of one entry at a time).
        Every edit asks this of every cached entry, so the entries to drop are found by C-level
        passes (set differences over the keys, ``map``/``compress`` for the keys that hold a
        path inside), and the live texts' digests are reused for the very text objects the
        last call was given; a dict with nothing to drop is kept as it is."""
        rels = tuple(live)
        texts = list(live.values())
        last = self._retained
        if last is not None and last[0] == rels:
            keys = last[2]
            stale = list(compress(range(len(rels)), map(is_not, texts, last[1])))
            if stale:
                keys = list(keys)
                for i in stale:
                    keys[i] = (rels[i], self._sha_of(rels[i], texts[i]))
        else:
            keys = list(zip(rels, map(self._sha_of, rels, texts)))
        self._retained = (rels, texts, keys)
        keep = set(keys)
        keep.update(extra)
        names = live.keys() if isinstance(live, dict) else frozenset(rels)
        self.parsed = _without(self.parsed, self.parsed.keys() - keep)
        self.proofs = _without(self.proofs, self.proofs.keys() - keep)
        self._ids = _without(self._ids, self._ids.keys() - names)
        self._topic_keys = _without(self._topic_keys, self._topic_keys.keys() - names)
        self._memo = _without(self._memo, compress(self._memo, map(not_, map(names.__contains__, map(itemgetter(0), self._memo)))))
        self._links = _without(self._links, self._links.keys() - names)
        self._links_fast = _without(self._links_fast, self._links_fast.keys() - names)
        self._kept = _without(self._kept, compress(self._kept, map(not_, map(names.__contains__, map(itemgetter(1), self._kept)))))
        self._proven_now = _without(self._proven_now, compress(
            self._proven_now, map(is_not, map(live.get, self._proven_now), map(itemgetter(0), self._proven_now.values()))))
        self._retained_size = self._cached_entries()

    # -- persistence ----------------------------------------------------------------------
    def _path(self, layout: Layout) -> Path:
        return layout.runtime_dir / CACHE_NAME

    def load_disk(self, layout: Layout) -> None:
        if self._disk_loaded:
            return
        self._disk_loaded = True
        on_disk: dict[tuple[str, str], str] = {}
        try:
            raw = self._path(layout).read_bytes()
            body = json.loads(raw.decode("utf-8"))
            if body.get("version") == CACHE_VERSION and body.get("code") == code_tag():
                for rel, pairs in body["proofs"].items():
                    for digest, sig in pairs.items():
                        if isinstance(rel, str) and isinstance(digest, str) and isinstance(sig, str):
                            on_disk[(rel, digest)] = sig
                self._base_bytes = len(raw)
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            on_disk.clear()
        on_disk.update(read_proof_log(layout.runtime_dir / LOG_NAME))  # later proofs win, as in memory
        for key, sig in on_disk.items():
            self.proofs.setdefault(key, sig)

    def save_disk(self, layout: Layout) -> None:
        """Write the proofs made since the last save (best effort; only after an install),
        and the parse cache (``parsecache``: what this process parsed).

        The proofs file is rewritten whole only now and then: in between, each save appends
        its new proofs to ``LOG_NAME`` (every edit proves about one text, and re-sorting and
        dumping every live proof after each one cost O(topics)). A rewrite (atomic replace,
        0600) holds every live proof, then starts an empty log. Proofs are facts about
        ``(path, sha256, signature)`` under one code tag, true whichever base file they sit
        beside; a proof on disk for a text no longer live costs only bytes, until the next
        rewrite leaves it out."""

        store_for(self.root).flush()
        view_cache_for(self.root).flush()  # the combined views' snapshot
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
        body = json.dumps({"version": CACHE_VERSION, "code": code_tag(), "proofs": out}, separators=(",", ":"))
        data = body.encode("utf-8")
        replace_cache_file(self._path(layout), data)
        # only now: a log dropped before the base holding its proofs is in place loses them
        replace_cache_file(layout.runtime_dir / LOG_NAME, _log_header())
        self._base_bytes = len(data)
        self._unsaved = {}


LOG_NAME = "memory-tui-canonical.log"
LOG_MIN_BYTES = 64 << 10  # the log is folded into the proofs file past this, or half that file's size
_HEX = frozenset("0123456789abcdef")


def _log_header() -> bytes:
    return json.dumps({"version": CACHE_VERSION, "code": code_tag()}, separators=(",", ":")).encode("utf-8") + b"\n"


def _log_line(rel: str, digest: str, sig: str) -> bytes:
    return json.dumps([rel, digest, sig], separators=(",", ":")).encode("utf-8") + b"\n"


def read_proof_log(path: Path) -> dict[tuple[str, str], str]:
    """The proofs ``path`` holds, in order (a later one for the same key wins): none unless
    its first line names this code; only whole lines (ending in a newline) that are a JSON
    ``[path, sha256, signature]``, so a line cut short by a crash, or what a crash left in
    its place, is skipped."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    header, _, rest = data.partition(b"\n")
    if header + b"\n" != _log_header():
        return {}
    out: dict[tuple[str, str], str] = {}
    lines = rest.split(b"\n")
    for line in lines[:-1]:  # the last piece has no newline: empty, or cut short
        try:
            item = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        if (isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)
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
        data = b"".join(_log_line(rel, digest, sig) for (rel, digest), sig in proofs)
        if st.st_size > len(header) and os.pread(fd, 1, st.st_size - 1) != b"\n":
            data = b"\n" + data  # what a crash cut short stays a line of its own, and is skipped
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


# ---------------------------------------------------------------------- the revision stream
# A chain entry is ``(rel, stamp, check, state, seg)``: the file fed, what proves it still holds
# the bytes fed (``check`` None: its stamp, which was older than the clock tick; else the
# SHA-256 of those bytes, re-read and compared), the hash state right after it (``None``
# between checkpoints: a resume backs up to the last entry that has one and feeds again from
# there), and ``seg``: ``(buffer, start, end)``, the stream bytes fed for it
# (``path NUL bytes NUL``) when they are held in memory.

CHECKPOINT_BYTES = 4 << 20  # along bytes fed from memory, a hash state at least this often
READ_AGAIN_MAX = 64  # topic files looked at again by ``_read_again``; beyond that the full loop
TAIL_BYTES = 48 << 20  # stream bytes held in memory at most (the end of the stream)
MAX_RUNS = 16  # held bytes spread over more separate buffers than this are joined into one
RETAIN_SLACK = 64  # cached entries beyond what the last retain left before ``retain_lazily`` prunes

Entry = tuple  # (rel, stamp | None, check | None, state | None, seg | None)


_GONE = None  # a ``Locations`` delta value: the id is no longer anywhere
_ABSENT = object()
LOCATIONS_DELTA_MAX = 4096  # past this many ids laid over the base, a plain dict again


class Locations(Mapping):
    """``block_id_locations``'s id -> path map as a shared plain ``base`` (never changed)
    with ``delta`` laid over it (id -> path, or ``_GONE`` for an id taken out). Read-only."""

    __slots__ = ("base", "delta", "_len")

    def __init__(self, base: dict[str, str], delta: dict[str, str | None]) -> None:
        self.base, self.delta = base, delta
        size = len(base)
        for key, value in delta.items():
            if value is _GONE:
                size -= 1
            elif key not in base:
                size += 1
        self._len = size

    @classmethod
    def moved(cls, last: Mapping[str, str], gone: Iterable[str], arriving: Mapping[str, str]) -> Mapping[str, str]:
        """``last`` without the ids in ``gone`` (which it holds) and with ``arriving`` set."""
        if isinstance(last, cls):
            base, delta = last.base, dict(last.delta)
        else:
            base, delta = last, {}
        for key in gone:
            if key in base:
                delta[key] = _GONE
            else:
                del delta[key]
        for key, rel in arriving.items():
            if base.get(key, _ABSENT) == rel:
                delta.pop(key, None)
            else:
                delta[key] = rel
        if len(delta) > LOCATIONS_DELTA_MAX:
            return dict(cls(base, delta).items())
        return cls(base, delta) if delta else base

    def __getitem__(self, key: str) -> str:
        value = self.delta.get(key, _ABSENT)
        if value is _ABSENT:
            return self.base[key]
        if value is _GONE:
            raise KeyError(key)
        return value

    def get(self, key, default=None):
        value = self.delta.get(key, _ABSENT)
        if value is _ABSENT:
            return self.base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key) -> bool:
        value = self.delta.get(key, _ABSENT)
        return key in self.base if value is _ABSENT else value is not _GONE

    def __iter__(self):
        base, delta = self.base, self.delta
        for key in base:
            if delta.get(key, _ABSENT) is not _GONE:
                yield key
        for key, value in delta.items():
            if value is not _GONE and key not in base:
                yield key

    def __len__(self) -> int:
        return self._len


def _without(entries: dict, drop: Iterable) -> dict:
    """``entries`` without the keys in ``drop`` (which it holds): a new dict in the same order
    when there is any (a reader holding the old one never sees it change), else ``entries``."""
    drop = list(drop)
    if not drop:
        return entries
    out = dict(entries)
    for key in drop:
        del out[key]
    return out


def _paths_under(stamps: Mapping[str, Stamp], prefix: str, suffix: str) -> list[str]:
    """The paths in ``stamps`` under ``prefix`` whose names end in ``suffix``, in order (C-level
    passes: every transaction asks it of every file's path)."""
    return list(compress(stamps, map(and_, map(str.startswith, stamps, repeat(prefix)),
                                     map(str.endswith, stamps, repeat(suffix)))))


# (prefix, suffix) -> (every path of the stamps last asked, in order; the paths answered; their positions)
_UNDER: dict[tuple[str, str], tuple[list[str], list[str], list[int]]] = {}


def stamps_under(stamps: Mapping[str, Stamp], prefix: str, suffix: str) -> tuple[list[str], list[Stamp]]:
    """``_paths_under(stamps, prefix, suffix)`` and those paths' stamps. When ``stamps`` names
    the very paths the last call was given, in the same order, the answer is at the same
    positions: one comparison of the two lists of names (by identity, as the remembered walks
    and their copies share the path objects) replaces the two string tests per path, and the
    stamps are taken by position instead of looked up by name. The lists answered are shared:
    never change them."""
    names = list(stamps)
    last = _UNDER.get((prefix, suffix))
    if last is not None and last[0] == names:
        rels, at = last[1], last[2]
    else:
        at = list(compress(range(len(names)), map(and_, map(str.startswith, names, repeat(prefix)),
                                                  map(str.endswith, names, repeat(suffix)))))
        rels = list(map(names.__getitem__, at))
        _UNDER[(prefix, suffix)] = (names, rels, at)
    values = list(stamps.values())
    if at and at[-1] - at[0] == len(at) - 1:  # one run, as a folder's files are in the revision's order
        return rels, values[at[0]:at[-1] + 1]
    return rels, list(map(values.__getitem__, at))


def any_racy(stamps: Mapping[str, Stamp], now: int) -> bool:
    """``any(is_racy(st[0], st[3], now) for st in stamps.values())``, with the newest mtime
    and ctime found by C-level ``max`` (every transaction asks it of every file's stamp)."""
    if not stamps:
        return False
    values = stamps.values()
    return is_racy(max(map(itemgetter(0), values)), max(map(itemgetter(3), values)), now)


def _proof(data: bytes, st: Stamp, now: int) -> str | None:
    """``None`` when ``st`` proves the file holds ``data`` (its size, and older than the clock
    tick: no later write can keep that stamp), else the SHA-256 that must be re-checked."""
    if len(data) == st[1] and not is_racy(st[0], st[3], now):
        return None
    return hashlib.sha256(data).hexdigest()


def _feed_stream(base: str, chain: list, items: list, new: Mapping[str, bytes], now: int,
                 cancelled: threading.Event | None = None, hold: bool = False,
                 stale: int | None = None) -> tuple[str, list] | None:
    """The revision of the files ``items`` (``(rel, stamp)`` in the revision's order) and the
    chain to keep for the next call, where a path in ``new`` will hold those bytes (its stamp
    is ``None``: the caller fills it in once the file is written) and every other file's bytes
    are on disk under ``base``. Pure: reads ``chain``, never changes it.

    The longest prefix of ``chain`` that still holds (same paths; stamps equal, or young files
    re-read and their SHA-256 compared) gives the state to resume from; after it, a file whose
    entry proves it by stamp and holds its bytes in memory is fed from there -- runs of such
    files are contiguous in one buffer and go to ``hashlib`` in a few large updates, which
    release the GIL --, anything else is read from disk. With ``hold`` the bytes read or
    given are kept in memory for the next call (at most ``TAIL_BYTES``, the end of the
    stream: what follows a change, and so what the next change of the same files re-hashes).
    ``stale``: the chain's hash states from that index on are not to be resumed from (see
    ``WorkspaceCache.defer_revision``). ``None`` when ``cancelled`` was set."""
    planned = _plan_stream(base, chain, items, new, now, read_now=hold, stale=stale)
    if planned[0] is None:
        return planned[1], planned[2]
    return _feed_planned(base, planned[0], planned[1], planned[2], now, hold, cancelled)


def _plan_stream(base: str, chain: list, items: list, new: Mapping[str, bytes], now: int,
                 read_now: bool, read_limit: int | None = None, stale: int | None = None) -> tuple | None:
    """``_feed_stream``'s first half: everything that must look at the files, nothing hashed.
    ``(None, value, kept)`` when the chain already ends in the state of ``items``; else
    ``(digest, out, todo)``: the state to resume from, the chain entries before it, and what to
    feed after it as ``(rel, stamp, check, seg, data)`` (``seg`` xor ``data``; neither when the
    file is to be read as it is fed, which ``read_now`` rules out). A file in ``new`` with a
    stamp (an install already wrote it) is proven by that stamp like any other. With
    ``read_limit``, ``None`` as soon as more than that many bytes would have to be read from
    disk or given (what a deferred hash would have to hold)."""
    n = len(items)
    kept: list = []
    i = 0
    limit = min(n, len(chain))
    while i < limit:
        rel, st = items[i]
        entry = chain[i]
        if entry[0] != rel or rel in new:
            break
        if entry[2] is None:
            if entry[1] != st:
                break
        else:
            try:
                data = _read(base, rel)
            except OSError:
                break
            if hashlib.sha256(data).hexdigest() != entry[2]:
                break
            proven = len(data) == st[1] and not is_racy(st[0], st[3], now)
            entry = (rel, st, None if proven else entry[2], entry[3], entry[4])
        kept.append(entry)
        i += 1
    k = (i if stale is None else min(i, stale)) - 1
    while k >= 0 and kept[k][3] is None:
        k -= 1
    if k == n - 1:
        return None, (kept[k][3].hexdigest()[:32] if k >= 0 else hashlib.sha256().hexdigest()[:32]), kept
    digest = kept[k][3].copy() if k >= 0 else hashlib.sha256()
    out = kept[:k + 1]

    todo: list = []
    later: dict | None = None
    budget = read_limit
    for j in range(k + 1, n):
        rel, st = items[j]
        if j < i:  # proven above; only its state was missing
            e = kept[j]
            if e[4] is not None:
                todo.append((rel, e[1], e[2], e[4], None))
                continue
        elif rel in new:
            data = new[rel]
            if budget is not None:
                budget -= len(data)
                if budget < 0:
                    return None
            check = hashlib.sha256(data).hexdigest() if st is None else _proof(data, st, now)
            todo.append((rel, st, check, None, data))
            continue
        else:
            e = chain[j] if j < len(chain) and chain[j][0] == rel else None
            if e is None:
                if later is None:
                    later = {c[0]: c for c in chain[i:]}
                e = later.get(rel)
            if e is not None and e[2] is None and e[1] == st and e[4] is not None:
                todo.append((rel, st, None, e[4], None))
                continue
        if read_now:
            if budget is not None:
                budget -= st[1]
                if budget < 0:
                    return None
            data = _read(base, rel)
            todo.append((rel, st, _proof(data, st, now), None, data))
        else:  # read as it is fed: one file in memory at a time, not the whole stream
            todo.append((rel, st, None, None, None))
    return digest, out, todo


_ENTRY_REL, _ENTRY_STAMP, _ENTRY_CHECK, _ENTRY_SEG = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(4)
_NOT_IN_PLACE = object()


def _held(rel: str, data: bytes) -> tuple[bytes, int, int]:
    """A file's stream bytes (``path NUL bytes NUL``) as a held segment."""
    piece = b"".join((rel.encode("utf-8"), b"\x00", data, b"\x00"))
    return piece, 0, len(piece)


def _young_at(entries: list) -> list[int]:
    """Where ``entries`` has a file whose stamp did not prove its bytes (C-level passes)."""
    return list(compress(range(len(entries)), map(is_not, map(_ENTRY_CHECK, entries), repeat(None))))


def _defer_in_place(base: str, chain: list, stale: int, rels: list[str], stamps: list, new: Mapping[str, bytes],
                    now: int):
    """``WorkspaceCache.defer_revision`` when the install added and removed no file (the
    chain's paths are ``rels``, in order): ``(entries, resume, stale)``, the chain with the
    entries that moved replaced by their new bytes, the index of the state to resume from and
    the index from which the entries' states are stale. The files that moved, the young ones
    and the ones whose bytes are not held are found by C-level passes over the chain, so the
    work grows with what changed, not with the workspace. ``None`` when more than
    ``TAIL_BYTES`` would have to be read or given; ``_NOT_IN_PLACE`` when the general plan
    must decide."""
    n = len(rels)
    moved = set(compress(range(n), map(ne, map(_ENTRY_STAMP, chain), stamps)))
    checks: dict[int, str | None] = {}  # young entries still holding their bytes -> their check now
    for j in _young_at(chain):
        rel = rels[j]
        if j in moved or rel in new:
            continue
        try:
            data = _read(base, rel)
        except OSError:
            return _NOT_IN_PLACE
        if hashlib.sha256(data).hexdigest() != chain[j][2]:
            moved.add(j)
            continue
        checks[j] = _proof(data, stamps[j], now)
    moved.update(map(rels.index, new))
    if not moved:
        return _NOT_IN_PLACE  # nothing moved: the general plan answers from the chain
    stale = min(min(moved), stale)
    resume = stale - 1
    while resume >= 0 and chain[resume][3] is None:
        resume -= 1
    entries = list(chain)
    for j, check in checks.items():
        e = entries[j]
        entries[j] = (e[0], e[1], check, e[3], e[4])
    # after the resume point every byte is held: what moved, and whatever was not held
    unheld = compress(range(resume + 1, n), map(is_, map(_ENTRY_SEG, chain[resume + 1:]), repeat(None)))
    budget = TAIL_BYTES
    for j in sorted(moved.union(unheld)):
        rel, st = rels[j], stamps[j]
        data = new.get(rel)
        if data is None:
            budget -= st[1]
            if budget < 0:
                return None
            data = _read(base, rel)
        else:
            budget -= len(data)
            if budget < 0:
                return None
        entries[j] = (rel, st, _proof(data, st, now), None, _held(rel, data))
    return entries, resume, stale


def _feed_planned(base: str, digest, out: list, todo: list, now: int, hold: bool,
                  cancelled: threading.Event | None = None) -> tuple[str, list] | None:
    """``_feed_stream``'s second half: hash ``todo`` (``_plan_stream``) into ``digest`` after
    the entries ``out``, keeping in memory what ``hold`` and ``TAIL_BYTES`` allow."""
    # what stays in memory: the last TAIL_BYTES of the stream
    budget = TAIL_BYTES
    held = [False] * len(todo)
    for j in range(len(todo) - 1, -1, -1):
        rel, _st, _check, seg, data = todo[j]
        if seg is None and not hold:
            continue
        size = seg[2] - seg[1] if seg is not None else len(rel) + len(data) + 2
        if size > budget:
            break
        budget -= size
        held[j] = True
    for j in range(len(out) - 1, -1, -1):
        seg = out[j][4]
        if seg is None:
            continue
        if seg[2] - seg[1] > budget:
            out[j] = out[j][:4] + (None,)
            budget = 0
        else:
            budget -= seg[2] - seg[1]

    # bytes from memory spread over too many separate buffers: joined into one (once after
    # the files were first read, each into its own)
    segs = [t[3] for t in todo if t[3] is not None]
    if segs and 1 + sum(1 for a, b in zip(segs, segs[1:]) if not (a[0] is b[0] and a[2] == b[1])) > MAX_RUNS:
        joined = b"".join([memoryview(sg[0])[sg[1]:sg[2]] for sg in segs])
        pos = 0
        for j, t in enumerate(todo):
            if t[3] is not None:
                size = t[3][2] - t[3][1]
                todo[j] = (t[0], t[1], t[2], (joined, pos, pos + size), None)
                pos += size

    # feed: runs of contiguous held bytes in large updates, other files one by one
    run: list = []  # indexes into todo of the current run of contiguous bytes

    def flush() -> bool:
        if not run:
            return True
        buf, start = todo[run[0]][3][0], todo[run[0]][3][1]
        view = memoryview(buf)
        mark = start
        for pos, j in enumerate(run):
            rel, st, check, seg, _data = todo[j]
            state = None
            if pos == len(run) - 1 or seg[2] - mark >= CHECKPOINT_BYTES:
                if cancelled is not None and cancelled.is_set():
                    return False
                digest.update(view[mark:seg[2]])
                mark = seg[2]
                state = digest.copy()
            out.append((rel, st, check, state, seg if held[j] else None))
        run.clear()
        return True

    for j, (rel, st, check, seg, data) in enumerate(todo):
        if seg is not None:
            if run:
                prev = todo[run[-1]][3]
                if not (prev[0] is seg[0] and prev[2] == seg[1]):
                    if not flush():
                        return None
            run.append(j)
            continue
        if not flush():
            return None
        if cancelled is not None and cancelled.is_set():
            return None
        if data is None:
            data = _read(base, rel)
            check = _proof(data, st, now)
        name = rel.encode("utf-8")
        if held[j]:
            piece = b"".join((name, b"\x00", data, b"\x00"))
            digest.update(piece)
            kept_seg = (piece, 0, len(piece))
        else:
            digest.update(name)
            digest.update(b"\x00")
            digest.update(data)
            digest.update(b"\x00")
            kept_seg = None
        out.append((rel, st, check, digest.copy(), kept_seg))
    if not flush():
        return None
    return digest.hexdigest()[:32], out


_ONE_SHOT = [0]  # ``one_shot`` blocks open in this process


@contextmanager
def one_shot() -> Iterator[None]:
    """For a process that runs one transaction and exits (the CLI's ``apply``, ``edit``): the
    post-install revision holds no file bytes in memory for a next transaction that will not
    come (with no chain, a fresh process would hold every file: ≈ 28 MB at scale 1, a page
    fault per 4 kB). The revision is the same either way; only what a later feed reads from
    memory instead of disk differs."""
    with _CACHES_LOCK:
        _ONE_SHOT[0] += 1
    try:
        yield
    finally:
        with _CACHES_LOCK:
            _ONE_SHOT[0] -= 1


def in_one_shot() -> bool:
    """Inside a ``one_shot`` block: this process runs one transaction and exits, so nothing
    kept for a next one (held bytes, a file-system monitor) pays for itself."""
    return bool(_ONE_SHOT[0])


class PendingRevision:
    """The revision an install left, hashed when first read (:meth:`value`).

    The revision is one SHA-256 stream over every file (memory spec §2.6), so hashing it after
    an edit costs the stream from the first changed file to the end: O(workspace) for any
    edit. An edit whose caller never reads the value (a run of edits in process, each
    compared with the next by :meth:`holds`) does not pay it; one that does pays it then,
    outside the write lock. The value is exact whenever it is read: every byte it hashes was
    proven or read under the lock (``WorkspaceCache.defer_revision``) and is held in memory;
    nothing is read from disk afterwards, so a later change of the files cannot leak in."""

    def __init__(self, cache: WorkspaceCache, stamps: dict[str, Stamp], entries: list, resume: int,
                 young: dict[str, str], planned_at: int) -> None:
        self.cache = cache
        self.stamps = stamps  # the files as the install left them
        self.planned_at = planned_at
        self._entries: list | None = entries  # the unhashed chain, until hashed
        self._resume = resume  # index of its last entry with a hash state (-1: none)
        self._young = young  # rel -> SHA-256 of each file its stamp did not prove then
        self._value: str | None = None
        self._kept = False  # kept for the next process (``revmemo``) once
        self._lock = threading.Lock()

    def value(self, installer: bool = False) -> str:
        """The revision, hashed at the first call. ``installer``: the caller is the install's
        own result (``TxResult.revision``), whose value is kept for the next process
        (``revmemo``) as an install that hashed at once keeps it; a reader's call never writes."""
        with self._lock:
            if self._value is None:
                assert self._entries is not None
                self._value = self.cache._complete(self, self._entries, self._resume)
                self._entries = None  # the cache keeps what it needs; the held bytes go
            if installer and not self._kept:
                self._kept = True
                self.cache._keep_hashed(self, self._value)
            return self._value

    @property
    def hashed(self) -> bool:
        return self._value is not None

    def holds(self, stamps: Mapping[str, Stamp]) -> bool:
        """The files ``stamps`` names (just walked) hold exactly the bytes of this revision:
        the same stamps, and every file young then re-read and its SHA-256 compared (a
        same-size write in place inside the clock tick can keep a stamp). ``False`` means
        "not proven", never "changed"."""
        return stamps == self.stamps and _still_holds(os.fspath(self.cache.root), self._young)

    def __repr__(self) -> str:
        return f"PendingRevision({self._value or 'not hashed'})"


class InstalledRevision:
    """A ``PendingRevision`` as its install's own result holds it: read there, its value is
    kept for the next process (``PendingRevision.value``'s ``installer``)."""

    __slots__ = ("pending",)

    def __init__(self, pending: PendingRevision) -> None:
        self.pending = pending

    def value(self) -> str:
        return self.pending.value(installer=True)


def revision_text(revision: "str | PendingRevision | InstalledRevision | None") -> str | None:
    """A revision as the string every reader sees (a pending one is hashed now)."""
    return revision if revision is None or type(revision) is str else revision.value()


class RevisionJob:
    """``WorkspaceCache.start_revision``'s worker: the revision after an install, hashed while
    the install runs. Nothing it computes is kept unless :meth:`result` is handed the stamps
    the install left and they are exactly the ones it assumed; a cancelled or failed job (the
    transaction failed, or was refused under the lock) leaves the cache as it was."""

    def __init__(self, cache: WorkspaceCache, before: Mapping[str, Stamp], changes: Mapping[str, bytes | None]) -> None:
        self.cache = cache
        puts: dict[str, bytes] = {}
        gone: set[str] = set()
        for rel, data in changes.items():
            parts = rel.split("/")
            if is_internal_top(parts[0]) and not (len(parts) == 2 and parts[0] in RUNTIME_NAMES and parts[1] == "runtime.json"):
                continue  # not part of the revision
            if data is None:
                gone.add(rel)
            else:
                puts[rel] = data
        before = dict(before)  # the caller's may change while the worker reads it
        self._puts = puts
        # the chain is then ``before``'s paths in its order (see ``result``)
        self._before = before if not gone and all(rel in before for rel in puts) else None
        self._out: tuple[str, list] | None = None
        self._error: BaseException | None = None
        self._cancel = threading.Event()
        with cache.lock:
            chain, stale = cache._chain, cache._stale
        now = time.time_ns()
        base = os.fspath(cache.root)
        hold = not _ONE_SHOT[0]

        def run() -> None:
            try:
                if gone or any(rel not in before for rel in puts):
                    items = [(rel, st) for rel, st in before.items() if rel not in gone and rel not in puts]
                    items += [(rel, None) for rel in puts]
                    items.sort(key=lambda item: tuple(item[0].split("/")))
                else:
                    items = [(rel, None if rel in puts else st) for rel, st in before.items()]
                self._out = _feed_stream(base, chain, items, puts, now, self._cancel, hold=hold, stale=stale)
            except BaseException as exc:  # handed to ``result``, which re-raises what is not a race
                self._error = exc

        self._thread = threading.Thread(target=run, name="memory-tui-revision", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Stop and wait for the worker (a no-op once :meth:`result` ran)."""
        self._cancel.set()
        self._thread.join()

    def result(self, stamps: Mapping[str, Stamp]) -> str:
        """The revision of the workspace whose files are ``stamps`` (walked, or derived by
        ``installed_stamps``, after the install): the worker's value when every path, and the
        stamp of every file the install did not write, is the one it assumed; otherwise (or
        when it met a file vanishing) ``WorkspaceCache.revision(stamps)``, from the files."""
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            if not isinstance(error, OSError):
                raise error
            return self.cache.revision(stamps, installed=True)
        out, self._out = self._out, None
        if out is None or len(out[1]) != len(stamps):
            return self.cache.revision(stamps, installed=True)
        value, entries = out
        now = time.time_ns()
        puts = self._puts
        if self._before is not None:
            return self._result_in_place(value, entries, stamps, now)
        fixed: list = []
        for entry, (rel, st) in zip(entries, stamps.items()):
            if entry[0] != rel:
                return self.cache.revision(stamps, installed=True)
            if entry[1] is None:  # written by the install: its stamp proves it once old enough
                data = puts[rel]
                check = None if len(data) == st[1] and not is_racy(st[0], st[3], now) else entry[2]
                entry = (rel, st, check, entry[3], entry[4])
            elif entry[1] != st:
                return self.cache.revision(stamps, installed=True)
            fixed.append(entry)
        self.cache._commit_stream(fixed, stamps, value, now)
        return value

    def _result_in_place(self, value: str, entries: list, stamps: Mapping[str, Stamp], now: int) -> str:
        """``result`` for an install that removed and added no file: the chain's paths are
        ``before``'s, in its order, and each entry the install did not write carries
        ``before``'s stamp, so the walk's check is two C-level comparisons (``before`` with the
        written files' new stamps equals ``stamps``, in the same order) and only the written
        files' entries are made again -- not a Python loop over every file."""
        before, puts = self._before, self._puts
        assert before is not None
        expected = dict(before)
        for rel in puts:
            expected[rel] = stamps.get(rel)
        keys = list(stamps)
        if expected != stamps or keys != list(expected):
            return self.cache.revision(stamps, installed=True)
        fixed = list(entries)
        for rel in puts:
            i = keys.index(rel)
            entry, st, data = fixed[i], stamps[rel], puts[rel]
            if entry[0] != rel or entry[1] is not None:
                return self.cache.revision(stamps, installed=True)
            check = None if len(data) == st[1] and not is_racy(st[0], st[3], now) else entry[2]
            fixed[i] = (rel, st, check, entry[3], entry[4])
        self.cache._commit_stream(fixed, stamps, value, now)
        return value


def _still_holds(base: str, checks: Mapping[str, str]) -> bool:
    """Every file ``checks`` names (``rel -> SHA-256``) still holds those bytes."""
    for rel, check in checks.items():
        try:
            data = _read(base, rel)
        except OSError:
            return False
        if hashlib.sha256(data).hexdigest() != check:
            return False
    return True


def _read(base: str, rel: str) -> bytes:
    # plain ``open``: the revision reads every file after the first changed one, and a Path
    # per file costs as much as the read of a small one
    with open(os.path.join(base, rel), "rb") as fh:
        return fh.read()


_CACHES: dict[str, WorkspaceCache] = {}
_CACHES_LOCK = threading.Lock()


def cache_for(root: Path) -> WorkspaceCache:
    key = str(Path(root).resolve())
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = WorkspaceCache(Path(root))
        return cache


def clear_caches() -> None:
    """Forget every in-process cache (tests; the on-disk proofs and parse cache stay)."""

    with _CACHES_LOCK:
        _CACHES.clear()
    forget_in_process()
    forget_views()
    forget_monitors()


__all__ = ["CACHE_NAME", "InstalledRevision", "LOG_NAME", "PendingRevision", "WorkspaceCache", "assemble_tree", "cache_for", "clear_caches", "code_tag", "revision_walk",
           "deps_signature", "in_one_shot", "revision_text", "topic_deps"]
