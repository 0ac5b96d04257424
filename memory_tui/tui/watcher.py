"""File watching: which paths matter, and the async loop the app runs in one worker."""

from __future__ import annotations

import re
from pathlib import Path
from typing import AsyncIterator

_TEMP = re.compile(r"(\.tmp$|\.lock$|~$|\.swp$|\.swx$|^\.#|\.[0-9a-f]{32}\.tmp$|-block-backup)")


def relevant(state_dir: Path, path: str) -> str | None:
    """Return the state-relative posix path if a change there matters, else None."""
    try:
        rel = Path(path).resolve().relative_to(state_dir.resolve())
    except (ValueError, OSError):
        try:
            rel = Path(path).relative_to(state_dir)
        except ValueError:
            return None
    parts = rel.parts
    if not parts:
        return None
    if parts[0] not in ("memory", "sessions") and rel.as_posix() != "config.json":
        return None
    if ".git" in parts:
        return None
    name = parts[-1]
    if _TEMP.search(name):
        return None
    if parts[0] == "memory" and len(parts) > 1 and parts[1].startswith((".scriptorium", ".nativemem")):
        # Runtime state: only writer health matters to the app.
        if name not in ("writer-status.json", "runtime.json", "workspace-id"):
            return None
    return rel.as_posix()


async def watch_changes(state_dir: Path, stop_event=None) -> AsyncIterator[frozenset[str]]:
    """Yield batches of relevant changed paths (debounced by watchfiles)."""
    from watchfiles import awatch

    def _filter(_change, path: str) -> bool:
        return relevant(state_dir, path) is not None

    async for changes in awatch(state_dir, watch_filter=_filter, debounce=200, step=50, stop_event=stop_event):
        paths = frozenset(p for _c, path in changes if (p := relevant(state_dir, path)))
        if paths:
            yield paths
