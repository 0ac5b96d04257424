"""Where things live: the state directory, the memory workspace and its internal names.

Discovery order (memory spec §1): ``--state DIR``; else ``OPENPROGRAM_PROFILE`` →
``~/.openprogram-<profile>``; else ``~/.openprogram``.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath

from .errors import MemoryError
from ..cache.registry import keeps

RUNTIME_DIR = ".scriptorium"
LEGACY_RUNTIME_DIR = ".nativemem"
RUNTIME_NAMES = (RUNTIME_DIR, LEGACY_RUNTIME_DIR)

# Files and folders a transaction stages and installs (memory spec §5.2, §5.4).
DERIVED_FILES = ("recent_events.jsonl", "commitments.jsonl", "relations.json", "core.md")
GIT_TRACKED = ("core.md", "recent_events.jsonl", "commitments.jsonl", "relations.json", "sources", "topics", "timeline")


def discover_state_dir(explicit: str | os.PathLike[str] | None = None, *, env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if explicit:
        return Path(explicit).expanduser()
    profile = (env.get("OPENPROGRAM_PROFILE") or "").strip()
    home = Path(env.get("HOME") or Path.home())
    if profile:
        return home / f".openprogram-{profile}"
    return home / ".openprogram"


def display_path(path: Path, *, home: Path | None = None) -> str:
    """A path as a user wants to read it: relative to home with ``~`` where possible."""
    home = home or Path.home()
    try:
        rel = path.resolve().relative_to(home.resolve())
    except (ValueError, OSError):
        return str(path)
    return "~" if str(rel) == "." else f"~/{rel.as_posix()}"


@dataclass(frozen=True)
class Layout:
    """Names inside one memory workspace ``<state>/memory``."""

    root: Path

    @property
    def runtime_name(self) -> str:
        # A legacy workspace keeps its old runtime dir: stored hashes cover its bytes.
        return LEGACY_RUNTIME_DIR if (self.root / LEGACY_RUNTIME_DIR).is_dir() else RUNTIME_DIR

    @property
    def runtime_dir(self) -> Path:
        return self.root / self.runtime_name

    @property
    def topics(self) -> Path:
        return self.root / "topics"

    @property
    def sources(self) -> Path:
        return self.root / "sources"

    @property
    def timeline(self) -> Path:
        return self.root / "timeline"

    @property
    def lock_file(self) -> Path:
        return self.runtime_dir / "write.lock"

    @property
    def workspace_id_file(self) -> Path:
        return self.runtime_dir / "workspace-id"

    @property
    def runtime_json(self) -> Path:
        return self.runtime_dir / "runtime.json"

    @property
    def writer_status(self) -> Path:
        return self.runtime_dir / "writer-status.json"

    @property
    def agent_history(self) -> Path:
        return self.runtime_dir / "agent-history.jsonl"

    @property
    def session_end(self) -> Path:
        return self.runtime_dir / "session-end.json"


def is_internal_top(name: str) -> bool:
    """Top-level names hidden from listings and the revision (memory spec §2.1)."""
    if name == ".git":
        return True
    return any(name == rt or name.startswith(rt + "-") for rt in RUNTIME_NAMES)


def check_writable(rel: str) -> str:
    """The one path rule for every write entry point (pitfall 11): only ``topics/**/*.md``.

    OpenProgram's rule (its ``changes`` route, its record ops, its CLI edit), read on the path
    as given with ``/`` the only separator: an absolute path or a ``..`` part escapes the
    workspace (``PATH_OUTSIDE_WORKSPACE``); anything but ``topics/<name>.md`` is read-only
    (``READ_ONLY_PATH``) -- so ``topics\\misc.md`` is one name outside ``topics/`` and refused,
    never turned into ``topics/misc.md``. Stricter, each a row of the README's table: a
    backslash anywhere (OpenProgram installs ``topics/a\\b.md`` as a file whose name holds a
    backslash), a hidden part (``topics/.md``, ``topics/.scriptorium/x.md``) and NUL are
    refused ``READ_ONLY_PATH`` too.

    Returns the normalised posix path or raises.
    """
    if not isinstance(rel, str) or not rel.strip():
        raise MemoryError("INVALID_ARGUMENT", "path is required", path=None)
    parts = PurePosixPath(rel).parts
    if PurePosixPath(rel).is_absolute() or ".." in parts:
        raise MemoryError("PATH_OUTSIDE_WORKSPACE", "path escapes the workspace", path=rel)
    norm = posixpath.normpath(rel)
    if not norm.startswith("topics/") or not norm.endswith(".md"):
        raise MemoryError("READ_ONLY_PATH", "only topics/**/*.md is writable", path=rel)
    if "\\" in norm:
        raise MemoryError("READ_ONLY_PATH", "only topics/**/*.md is writable: a topic path separates its folders "
                          "with '/', and a backslash in a name is refused", path=rel)
    if any(part.startswith(".") for part in PurePosixPath(norm).parts[1:]) or "\x00" in norm:
        raise MemoryError("READ_ONLY_PATH", "only topics/**/*.md is writable: a hidden name (starting with '.') "
                          "or NUL is refused", path=rel)
    return norm


@keeps
@lru_cache(maxsize=65536)
def relpath(target: str, start: str) -> str:
    """``posixpath.relpath`` for workspace-relative strings, without touching the cwd.

    ``posixpath.relpath`` calls ``os.getcwd()`` twice per call (about 100x slower, and it
    fails outright when the cwd has been removed); link targets are computed per row on
    every view build, so every core module uses this one.
    """
    t = [p for p in posixpath.normpath(target).split("/") if p not in ("", ".")]
    s = [p for p in posixpath.normpath(start).split("/") if p not in ("", ".")] if start else []
    i = 0
    while i < len(t) and i < len(s) and t[i] == s[i]:
        i += 1
    parts = [".."] * (len(s) - i) + t[i:]
    return "/".join(parts) or "."


WORKSPACE_ID_RE = re.compile(r"w-[0-9a-f]{8}")


# Here rather than in workspace.py: the app's first paint reads the id and nothing else of
# the engine's snapshot code.
def read_workspace_id(memory_root: Path, layout: Layout | None = None) -> str | None:
    """The marker value (§2.5), or ``None`` when absent or not exactly ``w-`` + hex8.

    OpenProgram would generate a new id in that case; a reader never does.
    """
    layout = layout or Layout(memory_root)
    try:
        raw = layout.workspace_id_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    value = raw.strip()
    return value if WORKSPACE_ID_RE.fullmatch(value) else None
