"""One-time legacy cursor migration (memory spec §7.8, session spec §4.9).

``runtime.json`` may still carry ``cursors`` (one position per session, from removed code).
They are replaced by node marks, trusting only what the archive proves:

* a legacy ``sources/openprogram/<file>.md`` contributes only its **first** record, and only
  when the file starts with ``# <unquoted stem>`` LF LF immediately followed by an anchor
  line whose anchor is the right hash and a ``source-id`` line naming
  ``openprogram/<that session>/<node>`` (a record body can forge later headers);
* a v2 ``sources/openprogram/_v2/*.md`` contributes every frame of its strict valid prefix
  (a truncated tail is never trusted).

For each candidate node, the branch ending at that node is walked and its records are
kept from the start while they are candidates: the first gap stops (tool, runtime and empty
rows neither open a gap nor get marked). Those nodes are marked, oldest first. Only when
every session's marks succeeded is ``runtime.json`` rewritten without ``cursors`` (all
other keys kept); if marking fails, ``cursors`` stay for a retry.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from memory_tui.core.format.errors import MemoryError
from memory_tui.core.store.lock import TIMEOUT_EDIT
from memory_tui.core.format.sources import anchor, scan_v2, split_source_id
from memory_tui.core.store.workspace import load_runtime_state, read_workspace_id
from memory_tui.pipeline import recovery
from memory_tui.pipeline.context import Context, ensure_workspace, load_snapshot, locked
from memory_tui.sessions.dag import get_branch
from memory_tui.sessions.records import records_for
from memory_tui.sessions.store import rel_path, sessions_root

_ANCHOR_LINE = re.compile(r'<a id="(source-[0-9a-f]{16})"></a>')
_SOURCE_LINE = re.compile(r"<!-- source-id:(.+) -->")


def legacy_first_candidate(name: str, text: str) -> tuple[str, str] | None:
    """(session, node) of a legacy file's first record, if its header is genuine."""

    stem = unquote(name[:-3]) if name.endswith(".md") else None
    if not stem:
        return None
    head = f"# {stem}\n\n"
    if not text.startswith(head):
        return None
    lines = text[len(head):].split("\n")
    if len(lines) < 2:
        return None
    a, s = _ANCHOR_LINE.fullmatch(lines[0]), _SOURCE_LINE.fullmatch(lines[1])
    if not a or not s:
        return None
    sid = s.group(1)
    parts = split_source_id(sid)
    if parts is None or parts[0] != "openprogram" or parts[1] != stem or a.group(1) != anchor(sid):
        return None
    return parts[1], parts[2]


def candidates(memory_root: Path) -> dict[str, set[str]]:
    """session id → candidate node ids proven by the archive."""

    out: dict[str, set[str]] = {}
    base = memory_root / "sources" / "openprogram"
    if base.is_dir():
        for p in sorted(base.glob("*.md")):
            if not p.is_file() or p.is_symlink():
                continue
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            hit = legacy_first_candidate(p.name, text)
            if hit:
                out.setdefault(hit[0], set()).add(hit[1])
    v2 = base / "_v2"
    if v2.is_dir():
        for p in sorted(v2.glob("*.md")):
            if not p.is_file() or p.is_symlink():
                continue
            try:
                data = p.read_bytes()
            except OSError:
                continue
            scan = scan_v2(p.relative_to(memory_root).as_posix(), data)
            for fr in scan.frames:
                parts = split_source_id(fr.source_id)
                if parts and parts[0] == "openprogram":
                    out.setdefault(parts[1], set()).add(parts[2])
    return out


def prefix_to_mark(session: Any, cands: set[str]) -> list[str]:
    """Union over candidate nodes of the continuous candidate prefix of their real branch."""
    chosen: set[str] = set()
    for node_id in sorted(cands):
        if session.get(node_id) is None:
            continue
        nodes = tuple(get_branch(session, node_id))
        for rec in records_for(session, nodes).records:
            if rec.id not in cands:
                break
            chosen.add(rec.id)
    return sorted(chosen, key=lambda i: (session.nodes[i].seq, i))


def migrate_locked(ctx: Context) -> dict[str, Any] | None:
    state, _ = load_runtime_state(ctx.memory_root)
    if not state.has_legacy_cursors:
        return None
    wid = read_workspace_id(ctx.memory_root) or ensure_workspace(ctx)
    cands = candidates(ctx.memory_root)
    snap = load_snapshot(ctx)
    marked: dict[str, list[str]] = {}
    dirs: dict[str, str] = {}
    blocked: list[str] = []
    for sid in sorted(cands):
        session = snap.get(sid)
        if session is None:
            why = _unreadable_session(ctx, sid)
            if why:
                blocked.append(why)  # its marks cannot land, so its cursor must stay
            continue
        ids = prefix_to_mark(session, cands[sid])
        if ids:
            marked[sid] = list(ids)
            dirs[sid] = str(session.dir)
    if blocked:  # refused before any mark: the cursors stand for marks that could not land
        raise MemoryError("SESSION_NODES_UNAVAILABLE", "marking failed; legacy cursors kept for a retry: " + "; ".join(blocked))
    # Every mark the migration makes is named on disk before the first one, so a kill between
    # two marks (or before the cursors go) is finished by the next locked open.
    recovery.write_migrate_intent(ctx.memory_root, wid, marked, dirs)
    problems = recovery.finish_migration(ctx.memory_root, wid, marked, dirs)
    if problems:
        (ctx.layout.runtime_dir / recovery.MIGRATE_INTENT).unlink(missing_ok=True)
        raise MemoryError("SESSION_NODES_UNAVAILABLE", "marking failed; legacy cursors kept for a retry: " + "; ".join(problems))
    return {"sessions": marked, "marked": sum(len(v) for v in marked.values()), "cursors_removed": True}


def _unreadable_session(ctx: Context, sid: str) -> str | None:
    """Why the archive's candidates of ``sid`` cannot be marked, when its folder exists but the
    snapshot left it out: a session folder that is a symbolic link is never written through
    (its marks would land outside the state dir), so the cursor that stands for them stays.
    A session that is simply gone implies no mark."""
    root = sessions_root(ctx.state_dir)
    if root is None:
        return None
    path = root / sid
    if path.is_symlink():
        return f"{rel_path(path, ctx.state_dir)}: PATH_OUTSIDE_WORKSPACE: session folder is a symbolic link; its nodes are never marked"
    return None


def migrate_if_needed(ctx: Context) -> dict[str, Any] | None:
    """Run the migration under the write lock if ``runtime.json`` has ``cursors``."""

    if not ctx.memory_root.is_dir():
        return None
    state, _ = load_runtime_state(ctx.memory_root)
    if not state.has_legacy_cursors:
        return None
    ctx.checkpoint("migrate")
    with locked(ctx, TIMEOUT_EDIT):
        return migrate_locked(ctx)
