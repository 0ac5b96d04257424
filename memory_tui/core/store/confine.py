"""Where memory-tui may write: never through a symbolic link out of the workspace.

Its own module because both the lock (checked before every hold) and the installer use it.
"""

from __future__ import annotations

from pathlib import Path

from ..format.errors import MemoryError
from ..format.paths import RUNTIME_NAMES, Layout

STAGE_DIR_SUFFIX = "-stage"  # <M>/<rt>-stage/: hidden like every <rt>-* name (paths.is_internal_top)


def refuse_symlink(path: Path) -> None:
    if path.is_symlink():
        raise MemoryError(
            "PATH_OUTSIDE_WORKSPACE",
            f"{path.name} is a symbolic link; memory-tui never writes through one",
            path=path.name,
        )


WRITE_CONFINED = ("topics", "sources", "timeline")


def check_write_confinement(memory_root: Path) -> None:
    """Refuse to write when a directory memory-tui writes into is a symlink: a write would land
    outside the workspace (or replace the link). Call before any write under ``<M>``."""
    layout = Layout(Path(memory_root))
    for name in (*WRITE_CONFINED, *RUNTIME_NAMES):
        refuse_symlink(layout.root / name)
    for name in RUNTIME_NAMES:
        refuse_symlink(layout.root / f"{name}-txn")
        refuse_symlink(layout.root / f"{name}{STAGE_DIR_SUFFIX}")
