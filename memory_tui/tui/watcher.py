"""File watching: which paths matter, and the async loop the app runs in one worker."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import AsyncIterator, Callable

_TEMP = re.compile(r"(\.tmp$|\.lock$|~$|\.swp$|\.swx$|^\.#|\.[0-9a-f]{32}\.tmp$|-block-backup)")


def relevance(state_dir: Path) -> Callable[[str], str | None]:
    """The filter ``relevant`` applies, with the state folder's spellings worked out once.

    The watcher hands over every file a job writes (each git object, archive frame and mark
    among them), a few thousand per batch, on the UI thread. A path under the folder as it
    was given or as it resolves is cut by its text; only a path spelled neither way (another
    link to the same folder) is resolved, which costs a system call per component."""
    given = os.path.abspath(state_dir)
    try:
        real: str | None = os.path.realpath(given)
    except (OSError, ValueError):
        real = None
    prefixes = tuple(dict.fromkeys(root.rstrip(os.sep) + os.sep for root in (given, real) if root))

    def rel_of(path: str) -> str | None:
        full = path if os.path.isabs(path) else os.path.abspath(path)
        for prefix in prefixes:
            if full.startswith(prefix):
                return full[len(prefix):]
        if real is None:
            return None
        try:
            return str(Path(full).resolve().relative_to(real))
        except (ValueError, OSError):
            return None

    def check(path: str) -> str | None:
        rel = rel_of(path)
        if not rel:
            return None
        parts = Path(rel).parts
        if not parts:
            return None
        if parts[0] not in ("memory", "sessions") and rel != "config.json":
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
        return "/".join(parts)

    return check


def relevant(state_dir: Path, path: str) -> str | None:
    """Return the state-relative posix path if a change there matters, else None."""
    return relevance(state_dir)(path)


async def watch_changes(state_dir: Path, stop_event=None) -> AsyncIterator[frozenset[str]]:
    """Yield batches of relevant changed paths (debounced by watchfiles)."""
    from watchfiles import awatch

    check = relevance(state_dir)

    def _filter(_change, path: str) -> bool:
        return check(path) is not None

    async for changes in awatch(state_dir, watch_filter=_filter, debounce=200, step=50, stop_event=stop_event):
        paths = frozenset(p for _c, path in changes if (p := check(path)))
        if paths:
            yield paths
