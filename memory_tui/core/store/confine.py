"""Where memory-tui may write: never through a symbolic link it did not resolve on purpose.

One rule for every writer (the lock checks it before every hold, the installer before every
rename, the writer bookkeeping before every status line):

* The workspace root ``<M>`` itself (and the state dir above it) may be a link -- a memory
  folder kept on another disk is a deliberate set-up. It is resolved **once**, when the
  workspace is opened (:func:`workspace_root`), and every write stays inside the resolved tree:
  a link swapped in later does not move the writes.
* Below the resolved root, no write follows a link: not a linked ``topics/``, ``sources/``,
  ``timeline/``, runtime dir, ``.git``, scratch or stage area, not any entry of the runtime dir
  (``runtime.json``, ``writer-status.json``, ``agent-history.jsonl``, the cache folders …),
  not any entry under ``topics/`` (a linked topic's records are never read, so no job may
  decide without them), and not a linked file or folder on the way to a file an install
  changes. Such a write is refused with ``PATH_OUTSIDE_WORKSPACE``, naming the link; nothing
  is written anywhere.

Its own module because the lock, the stage, the installer and the pipeline's bookkeeping all
use it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ..format.errors import MemoryError
from ..format.paths import RUNTIME_NAMES, Layout

STAGE_DIR_SUFFIX = "-stage"  # <M>/<rt>-stage/: hidden like every <rt>-* name (paths.is_internal_top)

OUTSIDE = "PATH_OUTSIDE_WORKSPACE"


def workspace_root(path: Path | str) -> Path:
    """The memory root as every write of this open uses it: the link (if ``path`` or a folder
    above it is one) resolved now, once. Writes below it never follow another link."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _refused(shown: str, what: str = "") -> MemoryError:
    return MemoryError(
        OUTSIDE,
        f"{shown} is a symbolic link{what}; memory-tui never writes through or replaces one "
        "(make it a regular file or folder, or move it away)",
        path=shown,
    )


def refuse_symlink(path: Path, shown: str | None = None) -> None:
    if path.is_symlink():
        raise _refused(shown or path.name)


def refuse_linked_path(root: Path, rel: str) -> None:
    """Refuse when ``rel`` (workspace-relative) or a folder on the way to it is a link below
    ``root``: writing there would leave the workspace, replacing it would destroy the link."""
    p = Path(root)
    for part in rel.split("/"):
        if not part or part == ".":
            continue
        p = p / part
        if os.path.islink(p):
            raise _refused(p.relative_to(root).as_posix())


def refuse_linked_paths(root: Path, rels: Iterable[str]) -> None:
    for rel in rels:
        refuse_linked_path(root, rel)


WRITE_CONFINED = ("topics", "sources", "timeline", ".git")


def check_write_confinement(memory_root: Path) -> None:
    """Refuse to write when a folder memory-tui writes into, or any entry of the runtime dir,
    is a symlink: a write would land outside the workspace (or replace the link). Call before
    any write under ``<M>`` (the lock does, before every hold)."""
    layout = Layout(Path(memory_root))
    root = layout.root
    for name in (*WRITE_CONFINED, *RUNTIME_NAMES):
        refuse_symlink(root / name, name)
    for name in RUNTIME_NAMES:
        refuse_symlink(root / f"{name}-txn", f"{name}-txn")
        refuse_symlink(root / f"{name}{STAGE_DIR_SUFFIX}", f"{name}{STAGE_DIR_SUFFIX}")
        _refuse_linked_entries(root, name)
    _refuse_linked_topics(root)


def _refuse_linked_topics(root: Path) -> None:
    """A link anywhere under ``topics/`` (a topic file or a folder of them): every write is
    refused until it is a regular file or gone -- its records are not read, so a job would
    decide without them, and an install at its path would replace it. ``scandir`` knows an
    entry is a link without an ``lstat``: one listing per folder, not a stat per file."""
    stack = [("topics", root / "topics")]
    while stack:
        rel, folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                raise _refused(f"{rel}/{entry.name}", " in topics/")
            if entry.is_dir(follow_symlinks=False):
                stack.append((f"{rel}/{entry.name}", Path(entry.path)))


def _refuse_linked_entries(root: Path, runtime_name: str) -> None:
    """Every entry of the runtime dir is memory-tui's or OpenProgram's own (the lock, status,
    history, runtime state, caches): a link there is never followed by a write."""
    folder = root / runtime_name
    try:
        entries = os.scandir(folder)
    except OSError:
        return
    with entries:
        for entry in entries:
            if entry.is_symlink():
                raise _refused(f"{runtime_name}/{entry.name}", " in the runtime folder")
