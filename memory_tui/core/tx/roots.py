"""Where a transaction's workspace is, and its locked open: what every entry point needs before
it knows whether it will stage anything (a remembered no-op never does), kept apart from the
stage so that answering one imports none of the staging, parsing and views code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..format.paths import Layout
from ..store.confine import workspace_root
from ..store.install import recover


def memory_root(state: Any) -> Path:
    """``state`` may be the state dir (``~/.openprogram``), the memory root, or a ``Layout``."""
    if isinstance(state, Layout):
        return workspace_root(state.root)
    root = getattr(state, "memory_root", None)
    if root is not None:
        return workspace_root(root)
    p = Path(state)
    if p.name == "memory" or (p / "topics").is_dir() or (p / ".scriptorium").is_dir():
        if not (p / "memory").is_dir():
            return workspace_root(p)
    # a linked memory folder (or state dir) is followed on purpose, resolved here, once per
    # transaction: every write of it stays in the resolved tree (confine.workspace_root)
    return workspace_root(p / "memory")


def open_locked(root: Path) -> None:
    """Every open under the lock first finishes or forgets an interrupted install."""
    recover(root)


__all__ = ["memory_root", "open_locked"]
