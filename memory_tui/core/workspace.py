"""The read side of one OpenProgram state directory: revision, state files, snapshots.

Everything here only *reads*. Opening a snapshot never creates a file or directory, never
takes ``write.lock`` and never runs git (memory spec §2, §7.7, §7.9, §7.10). A snapshot is
an immutable value; ``refresh(previous)`` builds the next one and re-reads only the files
whose ``(mtime_ns, size, inode)`` changed.

Files owned here:

* ``workspace_revision`` — the compare-and-set token (§2.6), byte-exact.
* ``<runtime>/workspace-id`` (§2.5), ``runtime.json`` (§7.7, with pitfall 1: unknown keys and
  ``cursors`` are kept, never dropped), ``writer-status.json`` and ``agent-history.jsonl``
  (§7.9), ``session-end.json`` (§7.10).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat as stat_mod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from .errors import CORRUPT_FILE, STATE_NOT_FOUND, WRITE_FAILURE_CODES, MemoryError, Problem
from .paths import RUNTIME_NAMES, Layout, is_internal_top

EMPTY_REVISION = hashlib.sha256(b"").hexdigest()[:32]
WORKSPACE_ID_RE = re.compile(r"w-[0-9a-f]{8}")
RUNTIME_KEYS = ("creation_order", "write_commits_since_global", "local_batches", "local_tokens", "last_global_at")


# --------------------------------------------------------------------------------------------
# File stamps and the revision walk
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStamp:
    """What decides whether a file must be re-read: ``(mtime_ns, size, inode)``."""

    mtime_ns: int
    size: int
    inode: int

    @classmethod
    def of(cls, st: os.stat_result) -> "FileStamp":
        return cls(st.st_mtime_ns, st.st_size, st.st_ino)


def _stamp(path: Path) -> FileStamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return FileStamp.of(st) if stat_mod.S_ISREG(st.st_mode) else None


def _revision_counts(rel_parts: tuple[str, ...]) -> bool:
    """Does a workspace-relative path take part in the revision (§2.6)?"""
    top = rel_parts[0]
    if not is_internal_top(top):
        return True
    return len(rel_parts) == 2 and top in RUNTIME_NAMES and rel_parts[1] == "runtime.json"


def iter_revision_files(memory_root: Path) -> Iterator[tuple[tuple[str, ...], Path, os.stat_result]]:
    """Files that make up the revision, in Python ``sorted(Path.rglob("*"))`` order.

    pathlib sorts component-wise (``topics/a/x.md`` < ``topics/a-b.md`` < ``topics.md``); we sort
    tuples of path segments, which compares the same way. Symlinks are neither followed nor
    hashed, exactly like ``rglob`` + ``is_file() and not is_symlink()``.
    """
    found: list[tuple[tuple[str, ...], Path, os.stat_result]] = []

    def walk(dir_path: Path, prefix: tuple[str, ...]) -> None:
        try:
            entries = list(os.scandir(dir_path))
        except OSError:
            return
        for entry in entries:
            parts = prefix + (entry.name,)
            if not prefix and is_internal_top(entry.name) and entry.name not in RUNTIME_NAMES:
                continue  # .git, .scriptorium-bm25.json, block backup: never part of it
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat_mod.S_ISLNK(st.st_mode):
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                if not prefix and entry.name in RUNTIME_NAMES:
                    rt = Path(entry.path) / "runtime.json"
                    try:
                        rst = rt.lstat()
                    except OSError:
                        continue
                    if stat_mod.S_ISREG(rst.st_mode):
                        found.append(((entry.name, "runtime.json"), rt, rst))
                    continue
                walk(Path(entry.path), parts)
            elif stat_mod.S_ISREG(st.st_mode):
                if _revision_counts(parts):
                    found.append((parts, Path(entry.path), st))

    if memory_root.is_dir():
        walk(memory_root, ())
    found.sort(key=lambda item: item[0])
    return iter(found)


def workspace_revision(memory_root: Path) -> str:
    """OpenProgram's workspace revision (§2.6): first 32 hex of one SHA-256 stream.

    For each counted file: posix relative path, NUL, bytes, NUL. An empty or missing workspace
    gives ``e3b0c44298fc1c149afbf4c8996fb924``.
    """
    digest = hashlib.sha256()
    for parts, path, _st in iter_revision_files(memory_root):
        data = path.read_bytes()
        digest.update("/".join(parts).encode("utf-8"))
        digest.update(b"\x00")
        digest.update(data)
        digest.update(b"\x00")
    return digest.hexdigest()[:32]


def revision_stamps(memory_root: Path) -> dict[str, FileStamp]:
    return {"/".join(parts): FileStamp.of(st) for parts, _p, st in iter_revision_files(memory_root)}


# --------------------------------------------------------------------------------------------
# workspace-id
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# JSON helpers
# --------------------------------------------------------------------------------------------


def _rel(memory_root: Path, path: Path) -> str:
    try:
        return path.relative_to(memory_root).as_posix()
    except ValueError:
        return path.as_posix()


def _load_json(path: Path, rel: str) -> tuple[Any, Problem | None, bool]:
    """(value, problem, exists)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None, False
    except OSError as exc:
        return None, Problem(CORRUPT_FILE, f"cannot read: {exc.strerror or exc}", rel), True
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return None, Problem(CORRUPT_FILE, "not valid UTF-8", rel, line), True
    try:
        return json.loads(text), None, True
    except json.JSONDecodeError as exc:
        return None, Problem(CORRUPT_FILE, f"invalid JSON: {exc.msg}", rel, exc.lineno, exc.colno), True
    except RecursionError:
        return None, Problem(CORRUPT_FILE, "invalid JSON: nested too deeply", rel, 1), True


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# runtime.json (§7.7, pitfall 1)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeState:
    """``runtime.json``. ``extra`` holds every key we do not own (``cursors`` included), in file
    order, so writing the state back never loses them (pitfall 1)."""

    creation_order: Mapping[str, int] = field(default_factory=dict)
    write_commits_since_global: int = 0
    local_batches: int = 0
    local_tokens: int = 0
    last_global_at: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    exists: bool = False

    @property
    def cursors(self) -> Any:
        return self.extra.get("cursors")

    @property
    def has_legacy_cursors(self) -> bool:
        return "cursors" in self.extra

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "creation_order": dict(self.creation_order),
            "write_commits_since_global": self.write_commits_since_global,
            "local_batches": self.local_batches,
            "local_tokens": self.local_tokens,
            "last_global_at": self.last_global_at,
        }
        for key, value in self.extra.items():
            if key not in out:
                out[key] = value
        return out

    def with_creation_order(self, ids: Iterable[str]) -> "RuntimeState":
        """``creation_order`` grown by ``ids`` not yet in it (max+1, occurrence order)."""
        order = dict(self.creation_order)
        nxt = max(order.values(), default=-1) + 1
        changed = False
        for mid in ids:
            if mid not in order:
                order[mid] = nxt
                nxt += 1
                changed = True
        return replace(self, creation_order=order) if changed else self


def parse_runtime_state(data: Any, rel: str = ".scriptorium/runtime.json") -> tuple[RuntimeState, tuple[Problem, ...]]:
    problems: list[Problem] = []
    if not isinstance(data, dict):
        problems.append(Problem(CORRUPT_FILE, "runtime state is not a JSON object; using defaults", rel, 1))
        return RuntimeState(exists=True), tuple(problems)
    order_raw = data.get("creation_order", {})
    order: dict[str, int] = {}
    if isinstance(order_raw, dict):
        for key, value in order_raw.items():
            if _is_int(value):
                order[key] = value
            else:
                problems.append(Problem(CORRUPT_FILE, f"creation_order[{key!r}] is not an integer; ignored", rel))
    else:
        problems.append(Problem(CORRUPT_FILE, "creation_order is not an object; using {}", rel))

    def count(key: str) -> int:
        value = data.get(key, 0)
        if _is_int(value) and value >= 0:
            return value
        problems.append(Problem(CORRUPT_FILE, f"{key} is not a non-negative integer; using 0", rel))
        return 0

    last = data.get("last_global_at")
    if last is not None and not isinstance(last, str):
        problems.append(Problem(CORRUPT_FILE, "last_global_at is not a string; using null", rel))
        last = None
    extra = {k: v for k, v in data.items() if k not in RUNTIME_KEYS}
    state = RuntimeState(
        creation_order=order,
        write_commits_since_global=count("write_commits_since_global"),
        local_batches=count("local_batches"),
        local_tokens=count("local_tokens"),
        last_global_at=last,
        extra=extra,
        exists=True,
    )
    return state, tuple(problems)


def load_runtime_state(memory_root: Path, layout: Layout | None = None) -> tuple[RuntimeState, tuple[Problem, ...]]:
    """Missing → defaults; unreadable → defaults plus a Problem naming file and line."""
    layout = layout or Layout(memory_root)
    path = layout.runtime_json
    rel = _rel(memory_root, path)
    data, problem, exists = _load_json(path, rel)
    if not exists:
        return RuntimeState(), ()
    if problem is not None:
        return RuntimeState(exists=True), (problem,)
    return parse_runtime_state(data, rel)


def dump_runtime_json(state: RuntimeState) -> str:
    """Byte-exact ``runtime.json`` text: indent 2, non-ASCII kept, final LF, §7.7 key order,
    then the keys we keep but do not own."""
    return json.dumps(state.to_json(), indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------------------------
# writer-status.json and agent-history.jsonl (§7.9)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriterFailure:
    at: str | None
    reason_code: str
    retryable: bool

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "reason_code": self.reason_code, "retryable": self.retryable}


@dataclass(frozen=True)
class WriterStatus:
    last_outcome: str | None = None
    last_success_at: str | None = None
    last_failure: WriterFailure | None = None
    exists: bool = False
    raw_reason_code: str | None = None  # before normalisation, when it was not in the enum

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "last_outcome": self.last_outcome,
            "last_success_at": self.last_success_at,
            "last_failure": self.last_failure.to_json() if self.last_failure else None,
        }


def parse_writer_status(data: Any) -> WriterStatus:
    """A different ``version`` (or shape) reads as all-null, as in OpenProgram."""
    if not isinstance(data, dict) or data.get("version") != 1 or isinstance(data.get("version"), bool):
        return WriterStatus(exists=True)
    outcome = data.get("last_outcome")
    outcome = outcome if outcome in ("success", "failure") else None
    success_at = data.get("last_success_at")
    success_at = success_at if isinstance(success_at, str) else None
    failure = None
    raw_code = None
    lf = data.get("last_failure")
    if isinstance(lf, dict):
        code = lf.get("reason_code")
        if code not in WRITE_FAILURE_CODES:
            raw_code = code if isinstance(code, str) else None
            code = "WRITER_FAILURE_UNKNOWN"
        at = lf.get("at")
        failure = WriterFailure(
            at=at if isinstance(at, str) else None,
            reason_code=code,
            retryable=lf.get("retryable") is True,
        )
    return WriterStatus(outcome, success_at, failure, exists=True, raw_reason_code=raw_code)


def load_writer_status(memory_root: Path, layout: Layout | None = None) -> tuple[WriterStatus, tuple[Problem, ...]]:
    layout = layout or Layout(memory_root)
    rel = _rel(memory_root, layout.writer_status)
    data, problem, exists = _load_json(layout.writer_status, rel)
    if not exists:
        return WriterStatus(), ()
    if problem is not None:
        return WriterStatus(exists=True), (problem,)
    return parse_writer_status(data), ()


HISTORY_STAGES = ("write", "backfill", "promote", "organize")


@dataclass(frozen=True)
class AgentRun:
    """One line of ``agent-history.jsonl``: a writer/organizer model run."""

    line: int
    stage: str
    data: Mapping[str, Any]

    @property
    def failed(self) -> bool:
        return "error" in self.data

    @property
    def error(self) -> str | None:
        err = self.data.get("error")
        return err if isinstance(err, str) else (None if err is None else str(err))

    @property
    def is_repair(self) -> bool:
        return self.stage.endswith("-repair")


def parse_agent_history(text: str, rel: str = ".scriptorium/agent-history.jsonl") -> tuple[tuple[AgentRun, ...], tuple[Problem, ...]]:
    runs: list[AgentRun] = []
    problems: list[Problem] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(CORRUPT_FILE, f"invalid JSON line: {exc.msg}", rel, lineno, exc.colno))
            continue
        except RecursionError:
            problems.append(Problem(CORRUPT_FILE, "invalid JSON line: nested too deeply", rel, lineno))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(CORRUPT_FILE, "history line is not a JSON object", rel, lineno))
            continue
        stage = obj.get("stage")
        if not isinstance(stage, str):
            problems.append(Problem(CORRUPT_FILE, "history line has no stage", rel, lineno))
            continue
        runs.append(AgentRun(lineno, stage, obj))
    return tuple(runs), tuple(problems)


def load_agent_history(memory_root: Path, layout: Layout | None = None) -> tuple[tuple[AgentRun, ...], tuple[Problem, ...]]:
    layout = layout or Layout(memory_root)
    rel = _rel(memory_root, layout.agent_history)
    try:
        raw = layout.agent_history.read_bytes()
    except FileNotFoundError:
        return (), ()
    except OSError as exc:
        return (), (Problem(CORRUPT_FILE, f"cannot read: {exc.strerror or exc}", rel),)
    return parse_agent_history(raw.decode("utf-8", errors="replace"), rel)


# --------------------------------------------------------------------------------------------
# session-end.json (§7.10)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionEnd:
    """The idle watcher's ``{session_id: updated_at}``; ``corrupt`` means its scan aborts."""

    handled: Mapping[str, float] = field(default_factory=dict)
    exists: bool = False
    corrupt: bool = False


def parse_session_end(data: Any, rel: str = ".scriptorium/session-end.json") -> tuple[SessionEnd, tuple[Problem, ...]]:
    if not isinstance(data, dict):
        return SessionEnd(exists=True, corrupt=True), (
            Problem(CORRUPT_FILE, "idle-watcher state is not a JSON object; OpenProgram's idle scan aborts", rel, 1),
        )
    handled: dict[str, float] = {}
    problems: list[Problem] = []
    for sid, value in data.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            handled[sid] = float(value)
        else:
            problems.append(Problem(CORRUPT_FILE, f"session {sid!r}: updated_at is not a number", rel))
    return SessionEnd(handled, exists=True), tuple(problems)


def load_session_end(memory_root: Path, layout: Layout | None = None) -> tuple[SessionEnd, tuple[Problem, ...]]:
    layout = layout or Layout(memory_root)
    rel = _rel(memory_root, layout.session_end)
    data, problem, exists = _load_json(layout.session_end, rel)
    if not exists:
        return SessionEnd(), ()
    if problem is not None:
        return SessionEnd(exists=True, corrupt=True), (
            replace(problem, message=problem.message + "; OpenProgram's idle scan aborts"),
        )
    return parse_session_end(data, rel)


def dump_session_end(handled: Mapping[str, float]) -> str:
    """§7.10: indent 2, no final LF."""
    return json.dumps(dict(handled), indent=2, ensure_ascii=False)
