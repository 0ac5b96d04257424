"""The last no-op verdict of a workspace, so a fresh ``edit`` with a file's own bytes answers
without re-deriving the whole workspace (a no-op edit in <= 0.5 s).

A hand edit whose new text is byte for byte the committed file leaves the stage equal to the
committed workspace, so what the transaction answers is a function of the workspace alone
(its revision files and symbolic links), of ``<state>/config.json`` (the views' limits) and of
the code: not of which file was "edited". When the full path answered ``no change`` for such
an edit, that answer is written here (``<M>/<runtime-dir>/memory-tui-noop``, one envelope of the cache
kit) keyed by

* the stat stamps ``(mtime_ns, size, inode, ctime_ns)`` of every revision file and the list of
  symbolic links, as ``txcache.revision_walk`` gives them -- none of them younger than the
  clock tick (``parsecache.is_racy``: a file rewritten within one tick keeps its stamp), the
  same proof the in-process revision cache accepts; ctime cannot be set back by any tool;
* the bytes and the stamp of ``config.json`` (read before and after the verdict was made);
* a digest of every module under ``core/``, the token counter's tag and the Python version
  (any change of the code that computes the answer is a miss).

An entry is used only when all of that is equal now; anything else (a missing, corrupt,
foreign or stale file) is a miss and the full path runs, never an error. Only the answer of
the default token counter and of incremental views is stored. ``MEMORY_TUI_TEST_DERIVE=full``
never uses an entry; ``MEMORY_TUI_TEST_DERIVE=check`` answers from it *and* runs the full path,
and raises when the two differ (``transaction`` does the comparing).

The file is an internal name in the runtime dir: outside the revision and git, never copied
into a stage; OpenProgram ignores it. Writing it is the one thing a no-op writes, and only
when the answer was not there already.
"""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from ..cache import envelope
from ..fsutil import replace_cache_file
from ..cache.stamp import is_racy
from ..format.paths import Layout
from ..switches import Switches
from .walk import revision_walk
from ..cache.registry import keeps

NAME = "memory-tui-noop"
KIND = "noop"
VERSION = 2  # 2: an envelope of the cache kit (1 was JSON)


@keeps
@lru_cache(maxsize=1)
def code_tag() -> str:
    """A digest of every module of ``core/`` (the whole transaction path), this format, the
    token counter's tag (rank file and tiktoken version: core.md's budget is counted with it)
    and the Python version (its Unicode tables decide what the parser calls whitespace)."""
    from ..format.tokens import CountMemo

    from ... import core
    from ..cache.codetag import package_tag

    return package_tag(core, salt=f"noop v{VERSION} {CountMemo.tag()}")


def workspace_key(stamps: Mapping[str, tuple], links: tuple[str, ...]) -> str | None:
    """What proves the workspace unchanged, or ``None`` when a stamp proves nothing (too young)."""
    if any(is_racy(st[0], st[3]) for st in stamps.values()):
        return None
    h = hashlib.sha256()
    for rel, st in stamps.items():
        h.update(f"{rel}\x00{st[0]},{st[1]},{st[2]},{st[3]}\n".encode("utf-8", "surrogatepass"))
    h.update(b"\x01")
    for rel in links:
        h.update(f"{rel}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def config_key(state_dir: Path) -> str | None:
    """The bytes and stamp of ``config.json`` (``-`` when there is none); ``None`` when it
    cannot be read or is too young for its stamp to prove anything."""
    path = Path(state_dir) / "config.json"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "-"
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode) or is_racy(st.st_mtime_ns, st.st_ctime_ns):
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    stamp = f"{st.st_mtime_ns},{st.st_size},{st.st_ino},{st.st_ctime_ns}"
    return stamp + ":" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Verdict:
    """What the full path answered for a no-op hand edit of this workspace."""

    revision: str
    core: tuple[int | None, tuple[str, ...], int] | None  # CoreInfo's (tokens, omitted_ids, budget)
    warnings: tuple[str, ...]
    key: str  # workspace_key it was made under


def _path(memory_root: Path) -> Path:
    return Layout(Path(memory_root)).runtime_dir / NAME


def _decode(body: Any) -> Verdict | None:
    if not isinstance(body, dict) or body.get("version") != VERSION or body.get("code") != code_tag():
        return None
    revision, key, warnings, core = body.get("revision"), body.get("workspace"), body.get("warnings"), body.get("core")
    if not (type(revision) is str and type(key) is str and type(warnings) is tuple
            and all(type(w) is str for w in warnings)):
        return None
    if core is not None:
        if not (type(core) is tuple and len(core) == 3 and (core[0] is None or type(core[0]) is int)
                and type(core[1]) is tuple and all(type(i) is str for i in core[1]) and type(core[2]) is int):
            return None
    return Verdict(revision, core, warnings, key)


@dataclass(frozen=True)
class Candidate:
    """A stored verdict that may answer an edit of ``rel``: the file held the edit's bytes
    when stamped ``stamp``, and the verdict was made for this config and code. Whether the
    workspace is still the one it was made for is :func:`confirm`'s one walk."""

    verdict: Verdict
    rel: str
    stamp: tuple[int, int, int, int]


def candidate(memory_root: Path, rel: str, data: bytes) -> Candidate | None:
    """The stored verdict if ``rel`` (``topics/…``) holds exactly ``data`` and the verdict
    was made for this config and code, without walking the workspace; else ``None``. An edit
    that changes something costs one read of its file here."""
    root = Path(memory_root)
    target = root / rel
    try:
        st = os.lstat(target)
        if not stat_mod.S_ISREG(st.st_mode) or st.st_size != len(data) or target.read_bytes() != data:
            return None
    except OSError:
        return None
    body = envelope.read(_path(root), KIND, VERSION)
    verdict = _decode(body)
    if verdict is None or body.get("config") != config_key(root.parent):
        return None
    return Candidate(verdict, rel, (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns))


def confirm(memory_root: Path, found: Candidate, switches: Switches) -> Verdict | None:
    """``found``'s verdict if the workspace is, by one walk now, exactly the one it was made
    for and the edited file still has the stamp it had when its bytes were compared (so the
    bytes compared are the bytes walked; a racy stamp proves nothing and misses). Called under
    the write lock, this one walk is both the lookup and the re-check of the locked open."""
    stamps, links = revision_walk(Path(memory_root), switches=switches)
    if found.rel not in stamps or workspace_key(stamps, links) != found.verdict.key:
        return None
    if found.stamp != tuple(stamps[found.rel]):
        return None  # changed between the compare and the walk
    return found.verdict


def lookup(memory_root: Path, rel: str, data: bytes, switches: Switches) -> Verdict | None:
    """The stored verdict, if it holds for the workspace as it is now and ``rel`` (``topics/…``)
    holds exactly ``data``; else ``None`` (:func:`candidate` then :func:`confirm`)."""
    found = candidate(memory_root, rel, data)
    return None if found is None else confirm(memory_root, found, switches)


def record(memory_root: Path, stamps: Mapping[str, tuple], links: tuple[str, ...], revision: str,
           core: tuple[int | None, tuple[str, ...], int] | None, warnings: tuple[str, ...], config: str | None) -> None:
    """Remember a no-op verdict made from a stage read at ``stamps``/``links`` with the config
    keyed ``config`` (read before the verdict was made). Best effort: a workspace whose stamps
    or config prove nothing, or that cannot be written, is skipped."""
    root = Path(memory_root)
    key = workspace_key(stamps, links)
    if key is None or config is None or config != config_key(root.parent):
        return
    path = _path(root)
    body = {"version": VERSION, "code": code_tag(), "workspace": key, "config": config, "revision": revision,
            "core": None if core is None else (core[0], tuple(core[1]), core[2]), "warnings": tuple(warnings)}
    try:
        data = envelope.pack(KIND, body, VERSION, stable=True)  # stable: equal verdicts, equal bytes
    except ValueError:
        return
    runtime = path.parent
    try:
        if runtime.is_symlink() or not runtime.is_dir():
            return  # never write through a symlinked runtime dir, never create one for a cache
        try:
            if path.read_bytes() == data:
                return
        except OSError:
            pass
        replace_cache_file(path, data)
    except OSError:
        pass


__all__ = ["NAME", "Candidate", "Verdict", "candidate", "code_tag", "config_key", "confirm", "lookup", "record",
           "workspace_key"]
