"""The byte-compatible memory marker (session spec §4.6).

``mark_nodes`` sets ``metadata["memory_written_scriptorium"] = <workspace id>`` on the given
nodes, one node file at a time, atomically, exactly as OpenProgram's own
``merge_node_metadata_batch`` serializes it. It never touches ``meta.json``, ``index.json``,
``updated_at``, the head, or the session's git repository.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from memory_tui.core.format.errors import CORRUPT_FILE, Problem
from memory_tui.core.fsutil import atomic_write

MARK_KEY = "memory_written_scriptorium"
INTENT_NAME = "marks-pending.json"  # in <M>/<rt>/: a batch installed whose marks may be incomplete
NODE_KEYS = ("id", "created_at", "seq", "role", "name", "input", "output", "caller", "predecessor", "reads", "metadata")
_DEFAULTS: dict[str, Any] = {"name": "", "input": None, "output": None, "caller": "", "predecessor": None, "reads": []}


@dataclass(frozen=True)
class MarkResult:
    marked: tuple[str, ...]  # files rewritten
    already: tuple[str, ...]  # already carried this exact mark: left alone
    missing: tuple[str, ...]  # no node file with that id (skipped, as OpenProgram does)
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def serialize_node(data: dict[str, Any]) -> str:
    """OpenProgram's node encoding: 11 keys in canonical order, compact default separators."""
    ordered: dict[str, Any] = {}
    for key in NODE_KEYS:
        if key in data and not (data[key] is None and key in ("name", "caller", "reads", "metadata")):
            ordered[key] = data[key]
        elif key == "metadata":
            ordered[key] = {}
        elif key in _DEFAULTS:
            ordered[key] = _DEFAULTS[key]
    # Unknown top-level keys: OpenProgram drops them on its own rewrite; we keep them (after the
    # canonical ones) rather than lose data. Files OpenProgram wrote never have any.
    for key, value in data.items():
        if key not in ordered:
            ordered[key] = value
    return json.dumps(ordered, ensure_ascii=False)


def find_node_files(session_dir: Path, node_id: str) -> list[Path]:
    """Files ``history/*-<id>.json`` whose ``id`` field really is ``node_id``."""
    return find_nodes_files(session_dir, (node_id,)).get(node_id, [])


def find_nodes_files(session_dir: Path, node_ids: Iterable[str]) -> dict[str, list[Path]]:
    """:func:`find_node_files` for many ids with one listing of ``history/`` (a batch of
    thousands of turns would otherwise list the folder once per turn). Ids with no file are
    left out."""
    hist = Path(session_dir) / "history"
    wanted = set(node_ids)
    try:
        names = sorted(e.name for e in os.scandir(hist) if e.name.endswith(".json"))
    except OSError:
        return {}
    out: dict[str, list[Path]] = {}
    for name in names:
        stem = name[:-5]
        # Every "-" may start the id: the same match as endswith(f"-{id}.json") for each id.
        at = stem.find("-")
        while at != -1:
            if stem[at + 1:] in wanted:
                out.setdefault(stem[at + 1:], []).append(hist / name)
            at = stem.find("-", at + 1)
    return out


def check_markable(session_dir: str | os.PathLike[str], rel_base: str | os.PathLike[str] | None = None) -> None:
    """Raise ``PATH_OUTSIDE_WORKSPACE`` when marking this session would write through a symlink
    (checked before a batch is archived or written, so a refusal costs nothing)."""
    from memory_tui.core.format.errors import MemoryError

    sdir = Path(session_dir)
    base = Path(rel_base) if rel_base is not None else sdir.parent.parent
    escape = _escapes(sdir, base)
    if escape is not None:
        raise MemoryError("PATH_OUTSIDE_WORKSPACE", f"{escape.name} of session {sdir.name} is a symbolic link or lies "
                          "outside the state directory; its nodes are never marked", path=str(escape))


def _escapes(session_dir: Path, base: Path) -> Path | None:
    """The first of ``<base>/sessions``, the session folder and its ``history/`` that is a
    symlink (or the session folder when it is not inside ``<base>/sessions`` at all)."""
    hist = session_dir / "history"
    for p in (session_dir.parent, session_dir, hist):
        if p.is_symlink():
            return p
    try:
        hist.resolve().relative_to(Path(base).resolve())
    except (ValueError, OSError):
        return hist
    return None


def mark_nodes(
    session_dir: str | os.PathLike[str],
    node_ids: Iterable[str],
    workspace_id: str,
    *,
    key: str = MARK_KEY,
    rel_base: str | os.PathLike[str] | None = None,
) -> MarkResult:
    """Mark the given nodes, in the given (batch, oldest-first) order. Never raises for bad data."""
    sdir = Path(session_dir)
    base = Path(rel_base) if rel_base is not None else sdir.parent.parent

    def rel(p: Path) -> str:
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            return p.as_posix()

    marked: list[str] = []
    already: list[str] = []
    missing: list[str] = []
    problems: list[Problem] = []
    escape = _escapes(sdir, base)
    if escape is not None:
        # A symlinked sessions/, session or history/ folder would make every mark a write
        # outside the state directory: nothing is marked.
        problems.append(Problem("PATH_OUTSIDE_WORKSPACE", f"{escape} is a symbolic link; nodes there are not marked",
                                rel(escape)))
        return MarkResult((), (), (), tuple(problems))
    node_ids = list(node_ids)
    files = find_nodes_files(sdir, [i for i in node_ids if isinstance(i, str)])
    for node_id in node_ids:
        if not isinstance(node_id, str) or not node_id or "/" in node_id or "\\" in node_id:
            problems.append(Problem("INVALID_ARGUMENT", f"not a node id: {node_id!r}", None))
            continue
        hits = []
        for path in files.get(node_id, []):
            if path.is_symlink():
                problems.append(Problem("PATH_OUTSIDE_WORKSPACE", "node file is a symbolic link; not marked", rel(path)))
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(Problem(CORRUPT_FILE, f"cannot read node file: {exc}", rel(path)))
                continue
            except json.JSONDecodeError as exc:
                problems.append(Problem(CORRUPT_FILE, f"invalid JSON: {exc.msg}", rel(path), exc.lineno, exc.colno))
                continue
            except RecursionError:
                problems.append(Problem(CORRUPT_FILE, "invalid JSON: nested too deeply", rel(path), 1))
                continue
            if isinstance(data, dict) and data.get("id") == node_id:
                hits.append((path, data))
        if not hits:
            missing.append(node_id)
            continue
        for path, data in hits:
            metadata = data.get("metadata")
            if metadata is None:
                metadata = {}
            if not isinstance(metadata, dict):
                problems.append(Problem(CORRUPT_FILE, f"node {node_id!r} metadata is not an object; not marked", rel(path), 1, 1))
                continue
            if metadata.get(key) == workspace_id:
                already.append(node_id)
                continue
            metadata[key] = workspace_id  # an existing key keeps its position; a new one goes last
            data["metadata"] = metadata
            try:
                atomic_write(path, serialize_node(data))
            except OSError as exc:
                problems.append(Problem(CORRUPT_FILE, f"cannot write node file: {exc.strerror or exc}", rel(path)))
                continue
            marked.append(node_id)
    return MarkResult(tuple(marked), tuple(already), tuple(missing), tuple(problems))


# --------------------------------------------------------------------------- the marks intent
#
# A batch's marks are one file per node. A kill between two of them leaves the batch half
# marked; its unmarked tail would then be offered to the writer as a batch of its own, which
# the topics need not cite, and every later write stalls on WRITER_NO_PROGRESS. A kill between
# the install and the first mark leaves the batch installed and unmarked, a state that is
# neither the old nor the new one. So the intent names the batch (its node ids and source ids)
# before the writer runs; the next locked open marks the batch if and only if the topics cite
# it (the install landed), and otherwise drops the intent (the batch stays pending, unmarked).


def write_intent(runtime_dir: Path, session_id: str, node_ids: Iterable[str], workspace_id: str,
                 source_ids: Iterable[str] | None = None, extra: dict[str, Any] | None = None) -> None:
    """``extra``: what else the batch's end does (its counters, an organize), finished with
    the marks by the next locked open (``pipeline.recovery``)."""
    body: dict[str, Any] = {"version": 1, "session": session_id, "ids": list(node_ids), "workspace_id": workspace_id}
    if source_ids is not None:
        body["source_ids"] = list(source_ids)
    body.update(extra or {})
    atomic_write(Path(runtime_dir) / INTENT_NAME, json.dumps(body) + "\n")


def batch_cited(memory_root: Path, source_ids: Iterable[str]) -> bool:
    """Whether any topic cites any of these archive records: the test that a batch installed."""
    from memory_tui.core.format.sources import anchor

    needles = set()
    for sid in source_ids:
        needles.add(anchor(sid))
        needles.add(f"({sid})")
    root = Path(memory_root) / "topics"
    if not needles or not root.is_dir():
        return False
    for p in root.rglob("*.md"):
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if any(n in text for n in needles):
            return True
    return False


def clear_intent(runtime_dir: Path) -> None:
    try:
        os.unlink(Path(runtime_dir) / INTENT_NAME)
    except FileNotFoundError:
        pass


def finish_intent(runtime_dir: Path, sessions_dir: Path) -> MarkResult | None:
    """Finish the marks of an installed batch whose marking was killed (call under the lock).
    None when there was nothing to finish, or the named batch never installed. An intent that does not parse is dropped: the
    worst case is the pre-intent behaviour (the batch is offered again and recovered)."""
    path = Path(runtime_dir) / INTENT_NAME
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        clear_intent(runtime_dir)
        return None
    try:
        body = json.loads(raw)
        session, ids, wid = body["session"], body["ids"], body["workspace_id"]
        ok = (isinstance(session, str) and session not in ("", ".", "..") and "/" not in session and "\\" not in session
              and isinstance(wid, str) and wid and isinstance(ids, list) and all(isinstance(i, str) for i in ids))
    except (ValueError, KeyError, TypeError, RecursionError):
        ok = False
    if not ok:
        clear_intent(runtime_dir)
        return None
    sources = body.get("source_ids")
    if sources is not None:  # written before the writer ran: mark only if its install landed
        if not (isinstance(sources, list) and all(isinstance(x, str) for x in sources)
                and batch_cited(Path(runtime_dir).parent, sources)):
            clear_intent(runtime_dir)
            return None
    sdir = Path(sessions_dir) / session
    result = mark_nodes(sdir, ids, wid) if sdir.is_dir() else MarkResult((), (), tuple(ids))
    clear_intent(runtime_dir)
    return result
