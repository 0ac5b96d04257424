"""The revision walk: the stat stamp of every file of the workspace revision, in its order.

A transaction proves the workspace unchanged since it was prepared by these stamps (and by
re-reading the files whose stamps are too young to prove anything); the folders' listings are
reused while their own stamps prove them, so a walk costs one ``lstat`` per file.
"""

from __future__ import annotations

import os
import stat as stat_mod
import time
from functools import partial
from itertools import compress, repeat
from operator import and_, attrgetter
from pathlib import Path
from typing import Iterable, Mapping

from ..format.paths import RUNTIME_NAMES, is_internal_top
from .fsmonitor import monitor_for
from ..cache.stamp import RACY_NS, any_racy, is_racy  # noqa: F401 (any_racy: re-exported)
from ..switches import Switches

from ..cache.stamp import Stamp, stamp_of
from ..cache.registry import keeps


def revision_walk(root: Path, *, switches: Switches) -> tuple[dict[str, Stamp], tuple[str, ...]]:
    """``(stamps, links)``: the stat stamp of every file of the revision (exactly the files of
    ``workspace.iter_revision_files``, in its order) and the workspace-relative paths of the
    symbolic links met in the same places (never followed, never part of the revision).

    Every file is ``lstat``-ed on every call: a writer that takes no lock and rewrites a file
    in place moves no folder's mtime, so only the file's own stamp shows it. What is reused is
    a folder's *listing* (names and kinds, in order), while the folder's own stamp is the one
    it was listed under and that stamp was older than the clock tick then: a name cannot
    appear, vanish or change kind without moving its folder's mtime and ctime, and a change
    after the listing is stamped later than the tick. The files are then ``lstat``-ed by one
    C-level ``map`` instead of one ``DirEntry`` and a Python loop each. ``switches`` in ``full``
    mode walks every folder; ``check`` does both and compares.

    Where this process keeps a file-system monitor of the workspace (``fsmonitor``), every
    folder listed is watched from now on."""
    base = os.fspath(root)
    watch = monitor_for(base, switches=switches)
    folders: list[str] | None = [] if watch is not None else None
    walked = switches.choose("revision walk", lambda: _walk_listed(base, folders), lambda: _walk_full(base, folders),
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
_LISTINGS: dict[str, dict[str, tuple[tuple, tuple]]] = keeps({})
STAMP_OF = stamp_of
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
    return dict(zip(rels, map(STAMP_OF, stats))), tuple(links)


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


# (prefix, suffix) -> (every path of the stamps last asked, in order; the paths answered; their positions)
_UNDER: dict[tuple[str, str], tuple[list[str], list[str], list[int]]] = keeps({})


def stamps_under(stamps: Mapping[str, Stamp], prefix: str, suffix: str) -> tuple[list[str], list[Stamp]]:
    """The paths in ``stamps`` under ``prefix`` whose names end in ``suffix``, in order, and
    those paths' stamps (C-level passes: every transaction asks it of every file's path).
    When ``stamps`` names the very paths the last call was given, in the same order, the
    answer is at the same
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


__all__ = ["STAMP_OF", "Stamp", "any_racy", "installed_stamps", "revision_walk", "stamps_under"]
