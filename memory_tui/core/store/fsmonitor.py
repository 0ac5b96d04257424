"""A file-system monitor of the workspace: proof that no file of the revision changed since
a transaction last looked, without ``lstat``-ing every file (Linux inotify; what git's
fsmonitor does for the index).

A transaction prepared outside the write lock installs only if the workspace still holds
what it was prepared from; ``walk.revision_walk`` proves that by the stamp of every file,
one ``lstat`` per file of the workspace on every edit. The monitor watches every folder the
walk lists (``cover``) and counts the changes it is told about: each event that is not one of
this process's own install moves its ``generation`` on. A transaction records the generation
at which its stamps were true; when it is the same under the lock, no file, folder or link of
the workspace was created, written, truncated, renamed, removed or had its attributes changed
since, so the stamps still hold and the walk is not needed.

Why that is a proof: the kernel queues an inotify event in the system call that makes the
change, before the call returns; a writer that takes the write lock releases it after its
writes, so everything it did is queued before the lock is ours and a drain under the lock
reads it. Anything the monitor cannot vouch for moves the generation on, so the caller walks:
a lost event (queue overflow), a watch removed (its folder gone or moved), a folder the walk
listed that was not watched before the walk, the workspace root replaced (its inode changed),
a tree installed (its folders are new), a fork (an inherited queue is shared with the parent).
It is used only where inotify sees every change: on local file systems (``LOCAL_FS``); on a
network or FUSE file system another host's writes raise no event, and there every edit walks.
Writes through a shared ``mmap`` raise no event either; no writer of the workspace
(OpenProgram, editors, memory-tui) writes that way.

``MEMORY_TUI_TEST_DERIVE=full`` never uses it and ``check`` walks as well and compares
(``switches.IncrementalMismatch`` when the monitor missed a change).
A process that runs one transaction (``txmode.one_shot``) starts none: it would not pay for
itself, and the CLI's fresh edit imports nothing it does not need (``inotify_simple`` and
``ctypes`` are imported when a monitor starts).
"""

from __future__ import annotations

import itertools
import os
import stat as stat_mod
import sys
import threading
from pathlib import Path
from typing import Any, Iterable

from ..format.paths import RUNTIME_NAMES, is_internal_top
from ..cache.registry import keeps
from ..switches import Switches

# statfs f_type of the file systems where every change to a file raises its inotify event
LOCAL_FS = {
    0xEF53: "ext2/3/4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
    0x2FC12FC1: "zfs", 0xF2F52010: "f2fs", 0x794C7630: "overlayfs", 0x52654973: "reiserfs",
    0x3153464A: "jfs", 0x4244: "hfs", 0x858458F6: "ramfs",
}


class _Flags:
    """inotify's event bits, read from ``inotify_simple`` when the first monitor starts."""

    def __init__(self, flags: Any) -> None:
        self.mask = (flags.MODIFY | flags.ATTRIB | flags.CLOSE_WRITE | flags.MOVED_FROM | flags.MOVED_TO
                     | flags.CREATE | flags.DELETE | flags.DELETE_SELF | flags.MOVE_SELF | flags.DONT_FOLLOW
                     | flags.ONLYDIR)
        self.overflow, self.ignored, self.isdir, self.create = flags.Q_OVERFLOW, flags.IGNORED, flags.ISDIR, flags.CREATE
        self.self_gone = flags.DELETE_SELF | flags.MOVE_SELF


_INOTIFY: list = []  # [(INotify, _Flags)] once imported; [None] where there is no inotify


def inotify() -> tuple[Any, _Flags] | None:
    """``inotify_simple.INotify`` and the flags, or ``None`` (not Linux, no inotify in libc)."""
    if not _INOTIFY:
        try:
            from inotify_simple import INotify, flags
            _INOTIFY.append((INotify, _Flags(flags)))
        except (ImportError, OSError, AttributeError):
            _INOTIFY.append(None)
    return _INOTIFY[0]


def enabled(switches: Switches) -> bool:
    """Not in the full-derivation mode (``MEMORY_TUI_TEST_DERIVE=full``), which walks every file."""
    return switches.monitor


def fs_type(path: str) -> int | None:
    """``statfs(path).f_type`` (the first field of ``struct statfs`` on Linux), or ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        buf = ctypes.create_string_buffer(256)  # larger than any struct statfs
        if libc.statfs(os.fsencode(path), buf) != 0:
            return None
        return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF
    except (OSError, AttributeError, ValueError):
        return None


class FsMonitor:
    """One memory root's inotify watches (see the module docstring). Thread-safe."""

    def __init__(self, root: str, notify: Any, bits: _Flags, ident: tuple[int, int]) -> None:
        self.root = root
        self._notify = notify
        self._bits = bits
        self._ident = ident  # the root folder's (st_dev, st_ino) when it was first watched
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._wds: dict[int, str] = {}  # watch -> its folder, relative ("" for the root)
        self._watched: dict[str, int] = {}  # absolute folder path -> watch
        self.generation = next(_GENERATIONS)
        self.alive = True  # False once the root was replaced: a new monitor must start over

    # -- watching -------------------------------------------------------------------------
    def cover(self, folders: Iterable[str]) -> None:
        """Watch every folder a walk just listed (absolute paths under the root, the runtime
        folder included). A folder that was not watched before the walk may have changed
        before its watch began without the monitor knowing, so that moves the generation on
        (the next transaction walks)."""
        with self._lock:
            for path in folders:
                if path not in self._watched:
                    self._watch(path)
                    self.generation = next(_GENERATIONS)

    def _watch(self, path: str) -> None:
        rel = os.path.relpath(path, self.root)
        rel = "" if rel == "." else rel.replace(os.sep, "/")
        try:
            wd = self._notify.add_watch(path, self._bits.mask)
        except OSError:  # gone, not a folder any more, or out of watches: nothing is vouched for
            self.generation = next(_GENERATIONS)
            return
        self._wds[wd] = rel
        self._watched[path] = wd

    # -- reading ----------------------------------------------------------------------------
    def drain(self) -> int:
        """Read every queued event and return the generation (moved on by any change)."""
        with self._lock:
            return self._drain(frozenset())

    def after_install(self, own: Iterable[str], since: int) -> int | None:
        """Call right after an install, under the write lock that held the workspace at
        generation ``since``: the generation at which the stamps the install left are true,
        or ``None`` when something else changed meanwhile. The install's own events (on the
        workspace-relative paths ``own``: the files it wrote or removed and the folders on
        their way) are not a change of their own -- but the install is one for every other
        stage of this process, which read the files before it, so the generation moves on
        either way."""
        with self._lock:
            clean = self._drain(frozenset(own)) == since
            self.generation = next(_GENERATIONS)
            return self.generation if clean else None

    def _drain(self, own_paths: frozenset[str]) -> int:
        """``drain``; an event on a path in ``own_paths`` moves nothing. Call with the lock."""
        if os.getpid() != self._pid or not self._same_root():
            self.alive = False
            self.generation = next(_GENERATIONS)
            return self.generation
        try:
            events = self._notify.read(timeout=0)
        except OSError:
            self.generation = next(_GENERATIONS)
            return self.generation
        bits = self._bits
        new_folders: list[str] = []
        moved = False
        for event in events:
            mask = event.mask
            if mask & bits.overflow:
                moved = True
                continue
            folder = self._wds.get(event.wd)
            if mask & bits.ignored or folder is None:
                if folder is not None:
                    self._forget(event.wd)
                moved = True
                continue
            name = event.name
            if not name:  # about the watched folder itself
                if mask & bits.self_gone:
                    moved = True
                continue  # its own attributes: no file of the revision changed
            if not _counts(folder, name):
                continue
            rel = f"{folder}/{name}" if folder else name
            if rel in own_paths:
                if mask & bits.isdir and mask & bits.create:  # a folder the install made: watch it from now on
                    new_folders.append(os.path.join(self.root, rel))
                continue
            moved = True
        for path in new_folders:
            if path not in self._watched:
                self._watch(path)
                moved = True  # its files were written before its watch began
        if moved:
            self.generation = next(_GENERATIONS)
        return self.generation

    def invalidate(self) -> None:
        """Vouch for nothing done so far (an install replaced whole trees, whose folders the
        monitor does not watch yet)."""
        with self._lock:
            self.generation = next(_GENERATIONS)

    def _forget(self, wd: int) -> None:
        folder = self._wds.pop(wd, None)
        if folder is not None:
            self._watched.pop(os.path.join(self.root, folder) if folder else self.root, None)

    def _same_root(self) -> bool:
        try:
            st = os.lstat(self.root)
        except OSError:
            return False
        return stat_mod.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == self._ident

    def close(self) -> None:
        with self._lock:
            try:
                self._notify.close()
            except OSError:
                pass


def _counts(folder: str, name: str) -> bool:
    """Whether a change of ``name`` in ``folder`` can change the revision: never the internal
    top-level names (git, the runtime folder's caches and locks, the stages, the install's
    scratch), except the runtime folder's ``runtime.json``."""
    if folder == "":
        return not name or not is_internal_top(name) or name in RUNTIME_NAMES
    if folder in RUNTIME_NAMES:
        return name == "runtime.json"
    return True


# Generations are drawn from one counter for the whole process, so a monitor started again for
# a root (after a fork, a replaced root, an eviction) never repeats a number a stage recorded.
_GENERATIONS = itertools.count(1)
_MONITORS: dict[str, FsMonitor | None] = {}  # least recently used first: the order evictions go by
_MONITORS_LOCK = threading.Lock()
MAX_MONITORS = 8  # each holds an inotify instance (a file descriptor, 128 per user by default)


def monitor_for(root: Path | str, create: bool = False, *, switches: Switches) -> FsMonitor | None:
    """This process's monitor of ``root``; with ``create``, one is started where the monitor is
    available (Linux, a local file system, the caller's ``switches`` not ``full``), else ``None``."""
    if not enabled(switches):
        return None
    key = os.fspath(root)
    with _MONITORS_LOCK:
        if key in _MONITORS:
            monitor = _MONITORS[key]
            if monitor is None or (monitor._pid == os.getpid() and (monitor.alive or not create)):
                _MONITORS[key] = _MONITORS.pop(key)  # the most recently used goes last
                return monitor
            del _MONITORS[key]  # inherited through a fork (never read a queue the parent reads), or dead
            if monitor._pid == os.getpid():
                monitor.close()
        if not create or inotify() is None:
            return None
        monitor, final = _start(key)
        if monitor is None and not final:
            return None  # asked again next time: the root may appear, an inotify instance be freed
        _MONITORS[key] = monitor
        while len(_MONITORS) > MAX_MONITORS:
            oldest = _MONITORS.pop(next(iter(_MONITORS)))
            if oldest is not None:
                oldest.close()
        return monitor


def _start(root: str) -> tuple[FsMonitor | None, bool]:
    """A monitor of ``root``, or ``None`` and whether that is final for this process (a file
    system inotify does not see every change on) or not (no folder there yet, or no inotify
    instance free now)."""
    try:
        st = os.lstat(root)
    except OSError:
        return None, False
    if not stat_mod.S_ISDIR(st.st_mode):
        return None, False
    if fs_type(root) not in LOCAL_FS:
        return None, True
    found = inotify()
    if found is None:
        return None, True
    try:
        notify = found[0](nonblocking=True)
    except OSError:  # out of inotify instances (a per-user limit): walk for now
        return None, False
    return FsMonitor(root, notify, found[1], (st.st_dev, st.st_ino)), True


@keeps
def forget_monitors() -> None:
    """Close every monitor of this process (``cache.registry.forget``)."""
    with _MONITORS_LOCK:
        monitors = [m for m in _MONITORS.values() if m is not None]
        _MONITORS.clear()
    for monitor in monitors:
        monitor.close()


__all__ = ["FsMonitor", "LOCAL_FS", "enabled", "forget_monitors", "fs_type", "monitor_for"]
