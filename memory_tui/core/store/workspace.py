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
import stat as stat_mod
from dataclasses import dataclass, field, replace
from itertools import repeat
from operator import is_
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..format.errors import CORRUPT_FILE, SPECIAL_TOKEN_TEXT, STATE_NOT_FOUND, WRITE_FAILURE_CODES, MemoryError, Problem
from ..format.paths import RUNTIME_NAMES, Layout, is_internal_top, read_workspace_id  # noqa: F401 (re-exported)
from ..format.tokens import TokenCounter
from ..switches import Switches, current as current_switches
from .viewcache import stored_parts, view_cache_for
from ..format.views import ViewMismatch, compare_views, core_injection, special_token_problems
from ..cache.stamp import is_racy, stamp_of
from ..format.sources import proven
from ..fsutil import md_file_stats
from .parsecache import deps_signature, stat_key, store_for, topic_deps

EMPTY_REVISION = hashlib.sha256(b"").hexdigest()[:32]
RUNTIME_KEYS = ("creation_order", "write_commits_since_global", "local_batches", "local_tokens", "last_global_at")


# --------------------------------------------------------------------------------------------
# File stamps and the revision walk
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileStamp:
    """What decides whether a file must be re-read: the cache kit's stamp (ctime included)."""

    mtime_ns: int
    size: int
    inode: int
    ctime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> "FileStamp":
        return cls(*stamp_of(st))

    @property
    def racy(self) -> bool:
        return is_racy(self.mtime_ns, self.ctime_ns)


class _Unproven:
    """The stamp of a file too young to vouch for anything: equal only to itself (``stamp``
    is the real one, for a later look that checks the bytes instead)."""

    __slots__ = ("stamp", "sha")

    def __init__(self, stamp: "FileStamp | None" = None, sha: str | None = None) -> None:
        self.stamp, self.sha = stamp, sha  # sha: of the bytes read under it, when known


def _stamp(path: Path) -> "FileStamp | _Unproven | None":
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    stamp = FileStamp.of(st)
    # a stamp inside the clock tick proves nothing: an object equal to no other stamp
    return _Unproven(stamp) if stamp.racy else stamp


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
    # Read without the lock (status, the app, a caller's base revision), a walk can meet a
    # file a writer renames away in between (its atomic-write temp file): walk again, and if
    # the workspace will not hold still, say so with the retryable code, never a traceback.
    for _attempt in range(5):
        digest = hashlib.sha256()
        try:
            for parts, path, _st in iter_revision_files(memory_root):
                data = path.read_bytes()
                digest.update("/".join(parts).encode("utf-8"))
                digest.update(b"\x00")
                digest.update(data)
                digest.update(b"\x00")
        except FileNotFoundError:
            continue
        return digest.hexdigest()[:32]
    raise MemoryError("CONCURRENT_UPDATE", "the workspace kept changing while its revision was read; try again",
                      details={"retryable": True})


# --------------------------------------------------------------------------------------------
# workspace-id
# --------------------------------------------------------------------------------------------


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
    # the file exists but could not be read as a JSON object: these are defaults, not its content
    corrupt: bool = field(default=False, compare=False)

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
        known = self.creation_order
        ids = [mid for mid in ids if mid not in known]
        if not ids:  # nothing new: no copy of (and no max over) every id of the workspace
            return self
        order = dict(known)
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
        return RuntimeState(exists=True, corrupt=True), tuple(problems)
    order_raw = data.get("creation_order", {})
    order: dict[str, int] = {}
    if type(order_raw) is dict and all(map(is_, map(type, order_raw.values()), repeat(int))):
        # every value a plain int (what a sound file holds): the loop below would keep each one
        order = dict(order_raw)
    elif isinstance(order_raw, dict):
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
        return RuntimeState(exists=True, corrupt=True), (problem,)
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


# --------------------------------------------------------------------------------------------
# Snapshots
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TopicEntry:
    stamp: FileStamp
    topic: Any  # memory_tui.core.format.topics.Topic, or None when the file could not be read
    problem: Problem | None = None


@dataclass(frozen=True)
class StateView:
    """One immutable reading of a state directory, for the TUI and the CLI.

    ``views`` are the derived views *rebuilt* from the topics (what OpenProgram would write);
    ``check_views`` compares them with the committed files.
    """

    state_dir: Path
    memory_root: Path
    layout: Layout
    config: Any  # memory_tui.core.format.config.MemoryConfig
    workspace_id: str | None
    revision: str
    tree: Any  # memory_tui.core.format.topics.TopicTree
    sources: Any  # memory_tui.core.format.sources.SourceIndex
    views: Any  # memory_tui.core.format.views.DerivedViews
    runtime: RuntimeState
    writer_status: WriterStatus
    agent_history: tuple[AgentRun, ...]
    session_end: SessionEnd
    problems: tuple[Problem, ...]
    memory_missing: bool
    memory_disabled: bool
    writer_disabled: bool
    empty_workspace: bool
    # refresh bookkeeping
    # rel -> (mtime_ns, size, inode, ctime_ns), as walk.revision_walk lists them
    revision_stamps: Mapping[str, tuple] = field(default_factory=dict, repr=False, compare=False)
    state_stamps: Mapping[str, FileStamp | None] = field(default_factory=dict, repr=False, compare=False)
    topic_entries: Mapping[str, _TopicEntry] = field(default_factory=dict, repr=False, compare=False)
    counter: Any = field(default=None, repr=False, compare=False)
    reparsed_topics: tuple[str, ...] = field(default=(), compare=False)  # topics re-read by this refresh
    row_cache: Mapping[int, Any] = field(default_factory=dict, repr=False, compare=False)  # timeline rows per unit
    # topic path -> its ``viewcache.TopicPart`` (tree order) when the views came from parts;
    # empty when they were built whole (then ``row_cache`` holds the rows)
    topic_parts: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # the test switches the snapshot was opened with; ``refresh`` keeps them
    switches: Switches = field(default_factory=Switches, repr=False, compare=False)

    @property
    def core_master(self) -> str | None:
        topic = self.tree.topic("core.md") if self.tree is not None else None
        return topic.text if topic is not None else None

    @property
    def core(self) -> Any:
        return self.views.core if self.views is not None else None

    def root_core_text(self) -> str | None:
        try:
            return (self.memory_root / "core.md").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def core_injection(self) -> Any:

        return core_injection(self.root_core_text(), inject=self.config.core_inject, counter=self.counter)

    def problems_for(self, rel_path: str) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.path == rel_path)

    def status_json(self) -> dict[str, Any]:
        return {
            "state_dir": str(self.state_dir),
            "memory_root": str(self.memory_root),
            "workspace_id": self.workspace_id,
            "revision": self.revision,
            "memory_missing": self.memory_missing,
            "memory_disabled": self.memory_disabled,
            "writer_disabled": self.writer_disabled,
            "empty_workspace": self.empty_workspace,
            "topics": len(self.tree.topics) if self.tree is not None else 0,
            "records": self.tree.unit_count if self.tree is not None else 0,
            "problems": [p.to_json() for p in self.problems],
        }


Snapshot = StateView

_STATE_FILES = ("config", "runtime", "writer_status", "agent_history", "session_end", "workspace_id")


def _state_file_paths(state_dir: Path, layout: Layout) -> dict[str, Path]:
    return {
        "config": state_dir / "config.json",
        "runtime": layout.runtime_json,
        "writer_status": layout.writer_status,
        "agent_history": layout.agent_history,
        "session_end": layout.session_end,
        "workspace_id": layout.workspace_id_file,
    }


def _topic_files(topics_dir: Path) -> dict[str, tuple[FileStamp, os.stat_result]]:
    """Same file set as ``topics.read_topic_texts`` (``rglob("*.md")`` that are files), in
    ``sorted(Path)`` order: by path parts, which is not the order of the strings."""
    if not topics_dir.is_dir():
        return {}
    found = md_file_stats(topics_dir)
    return {rel: (FileStamp.of(found[rel]), found[rel]) for rel in sorted(found, key=_path_parts)}


def _path_parts(rel: str) -> list[str]:
    return rel.split("/")


def _assemble_tree(entries: Mapping[str, _TopicEntry], previous: Any = None) -> Any:
    """A TopicTree from cached per-file parses. With ``previous`` (the last snapshot's tree,
    over the same sources) and no file that failed to read, only the changed topics' ids are
    swapped in its id map (``reassemble_tree``, equal to a full assembly) instead of every
    id of the workspace being mapped again."""
    from ..format.topics import assemble_tree, reassemble_tree, topic_sort_key

    problems: list[Problem] = []
    parsed = []
    for rel in sorted(entries, key=topic_sort_key):
        entry = entries[rel]
        if entry.problem is not None:
            problems.append(entry.problem)
        if entry.topic is not None:
            parsed.append(entry.topic)
    if previous is not None and not problems:
        return reassemble_tree(previous, parsed)
    return assemble_tree(parsed, problems)


def _parse_topics(
    topics_dir: Path, previous: Mapping[str, _TopicEntry], index: Any, reuse: bool
) -> tuple[dict[str, _TopicEntry], list[str]]:
    import hashlib

    from ..format.topics import parse_topic, read_topic_file

    store = store_for(topics_dir.parent)
    entries: dict[str, _TopicEntry] = {}
    reparsed: list[str] = []
    files = _topic_files(topics_dir)
    for rel, (stamp, st) in files.items():
        prior = previous.get(rel) if reuse else None
        if prior is not None and prior.stamp == stamp:
            entries[rel] = prior
            continue
        if prior is not None and isinstance(prior.stamp, _Unproven) and prior.stamp.stamp == stamp:
            # read within its clock tick last time: the stamp proves nothing, the bytes do
            _text, data, _problem = read_topic_file(topics_dir, rel)
            sha = hashlib.sha256(data).hexdigest() if data is not None else None
            if sha is not None and sha == prior.stamp.sha:
                entries[rel] = _TopicEntry(_Unproven(stamp, sha) if stamp.racy else stamp, prior.topic, prior.problem)
                continue
        reparsed.append(rel)
        racy = stamp.racy
        cached = None if racy else store.topic_for_stat(rel, stat_key(st), index)
        if cached is not None:  # a fresh process: the last one's parse of these very bytes
            entries[rel] = _TopicEntry(stamp, cached)
            continue
        text, data, problem = read_topic_file(topics_dir, rel)
        if racy:  # kept under a stamp no later walk matches: the digest of these bytes decides
            stamp = _Unproven(stamp, hashlib.sha256(data).hexdigest() if data is not None else None)
        if problem is not None:
            entries[rel] = _TopicEntry(stamp, None, problem)
            continue
        topic = parse_topic(rel, text, resolve=index.resolve_target, strict=True)
        deps = topic_deps(topic)
        key = stat_key(st) if len(data) == st.st_size else None
        store.put_topic(rel, key, hashlib.sha256(data).hexdigest(), topic, deps, deps_signature(index, deps))
        entries[rel] = _TopicEntry(stamp, topic)
    # Reading never writes to the state dir: what was parsed here is written by the next
    # transaction of this process (txcache flushes the store), never by a reader.
    store.retain_topics(files)
    return entries, reparsed


def open_state(state_dir: Path | str, *, counter: Any = None, views: bool = True,
               switches: Switches | None = None) -> StateView:
    """Read a whole state directory into a snapshot. Raises ``MemoryError(STATE_NOT_FOUND)``
    when ``state_dir`` is not a directory; everything else becomes a flag or a Problem.
    ``views=False``: no derived views (``views`` is ``None``), for readers that print none
    of them (the views are most of a warm open and add no problem of their own).
    ``switches``: the test switches (default: this process's, read from the environment once),
    kept by the snapshot for its refreshes."""
    return _build(Path(state_dir), None, counter, switches or current_switches(), views)


def refresh(previous: StateView) -> StateView:
    """The next snapshot: files whose ``(mtime_ns, size, inode)`` did not change are reused."""
    return _build(previous.state_dir, previous, previous.counter, previous.switches)


def _special_token_problems(tree: Any, prev: StateView | None, counter: Any) -> list[Problem]:
    """Warnings for special-token text (memory-tui itself counts it as text); a topic that is
    the very parse of the previous snapshot keeps its warnings instead of a rescan of its text."""
    before: dict[str, list[Problem]] = {}
    same: set[str] = set()
    if prev is not None and prev.tree is not None:
        old = {t.path: t for t in prev.tree.topics}
        same = {t.path for t in tree.topics if old.get(t.path) is t}
        for p in prev.problems:
            if p.code == SPECIAL_TOKEN_TEXT and p.path:
                before.setdefault(p.path, []).append(p)
    out: list[Problem] = []
    for topic in tree.topics:
        if topic.path in same:
            out.extend(before.get(topic.workspace_path, ()))
        else:
            out.extend(special_token_problems((topic,), counter))
    return out


def _revision_of(memory_root: Path, prev: StateView | None, switches: Switches) -> tuple[Mapping[str, Any], str]:
    """``(stamps, revision)``. The revision is one SHA-256 stream over every file, so a
    refresh after a one-file change used to read and hash the whole workspace again (most of
    an app reload); the transaction cache's stream resumes from the hash state saved before
    the first changed file and feeds exactly the bytes ``workspace_revision`` feeds."""
    from .txcache import cache_for
    from .walk import revision_walk

    stamps, _links = revision_walk(memory_root, switches=switches)
    if prev is not None and prev.revision_stamps == stamps:
        return stamps, prev.revision
    try:
        return stamps, cache_for(memory_root).revision(stamps, switches=switches)
    except OSError:  # a file renamed away mid-read: the plain walk retries, or says so
        return stamps, workspace_revision(memory_root)


def _derive_views(memory_root: Path, tree: Any, prev: StateView | None, sources: Any, sources_same: bool,
                  runtime: Any, config: Any, counter: Any,
                  switches: Switches) -> tuple[Any, dict[int, Any], dict[str, Any]]:
    """``(views, row_cache, topic_parts)`` of a snapshot: the previous snapshot's when none of
    their inputs changed, else built from per-topic parts (``viewcache``)."""
    views_inputs_same = (
        prev is not None and prev.views is not None and tree is prev.tree and sources_same
        and runtime is prev.runtime and config is prev.config
    )
    if views_inputs_same:
        return prev.views, dict(prev.row_cache), dict(prev.topic_parts)
    row_cache: dict[int, Any] = {}
    topic_parts: dict[str, Any] = {}
    # Per-topic parts (``viewcache``): a refresh re-derives only the topics it re-parsed,
    # byte for byte what ``build_views`` gives (``MEMORY_TUI_TEST_DERIVE=full|check``).
    if prev is not None and sources_same and prev.row_cache:  # filled only by a whole build
        for unit in tree.units:  # units of unchanged topics are the very same objects
            hit = prev.row_cache.get(id(unit))
            if hit is not None and hit[0] is unit:
                row_cache[id(unit)] = hit
    master = tree.topic("core.md")
    # each topic's part kept in the parse cache under its parse's key (the readers' copy for a
    # reading process): a fresh reader derives only the topics no process derived before
    store = store_for(memory_root)
    lookup, remember = stored_parts(store, store.key_of)
    views = view_cache_for(memory_root).build(
        tree,
        lookup=lookup,
        store=remember,
        parts_out=topic_parts,
        master_text=master.text if master is not None else None,
        trusted_ids=sources.trusted_ids(),
        creation_order=runtime.creation_order,
        recent_limit=config.recent_limit,
        counter=counter,
        budget=config.core_budget_tokens,
        link_for=sources.link_for,
        row_cache=row_cache,
        switches=switches,
    )
    store.drop_kept_derived()
    return views, row_cache, topic_parts


def _build(state_dir: Path, prev: StateView | None, counter: Any, switches: Switches,
           derive: bool = True) -> StateView:
    from ..format.config import load_memory_config
    from ..format.tokens import DEFAULT_COUNTER

    if not state_dir.is_dir():
        raise MemoryError(STATE_NOT_FOUND, f"state directory not found: {state_dir}", path=str(state_dir))
    counter = counter or DEFAULT_COUNTER
    memory_root = state_dir / "memory"
    layout = Layout(memory_root)
    memory_missing = not memory_root.is_dir()

    paths = _state_file_paths(state_dir, layout)
    stamps = {name: _stamp(path) for name, path in paths.items()}
    _absent = object()

    def same(name: str) -> bool:
        # unchanged stamp, or absent both times (defaults both times)
        return prev is not None and prev.state_stamps.get(name, _absent) == stamps[name]

    problems: list[Problem] = []

    config = prev.config if same("config") else load_memory_config(state_dir)
    problems.extend(config.problems)
    workspace_id = prev.workspace_id if same("workspace_id") else read_workspace_id(memory_root, layout)

    def state_file(name: str, loader: Callable[[Path, Layout], tuple[Any, tuple[Problem, ...]]]) -> Any:
        # An unchanged file keeps its parsed value and the problems it raised last time.
        if same(name):
            value, rel = getattr(prev, name), _rel(memory_root, paths[name])
            found = tuple(p for p in prev.problems if p.path == rel)
        else:
            value, found = loader(memory_root, layout)
        problems.extend(found)
        return value

    from .install import health_problems

    problems.extend(health_problems(memory_root))  # a half-finished install, git trouble: said, not hidden
    runtime = state_file("runtime", load_runtime_state)
    writer_status = state_file("writer_status", load_writer_status)
    history = state_file("agent_history", load_agent_history)
    session_end = state_file("session_end", load_session_end)

    # Sources first: topic citations resolve through the index.
    prev_sources = prev.sources if prev is not None else None
    sources = store_for(memory_root).source_index(previous=prev_sources)
    sources_same = prev_sources is not None and {k: v.key for k, v in sources.files.items()} == {
        k: v.key for k, v in prev_sources.files.items()
    } and all(map(proven, sources.files.values()))
    problems.extend(sources.problems)

    prev_entries = prev.topic_entries if prev is not None else {}
    entries, reparsed = _parse_topics(layout.topics, prev_entries, sources, reuse=sources_same)
    if prev is not None and sources_same and not reparsed and set(entries) == set(prev_entries):
        tree = prev.tree
    else:
        tree = _assemble_tree(entries, prev.tree if prev is not None and sources_same else None)
    problems.extend(tree.problems)
    problems.extend(_special_token_problems(tree, prev, counter))

    views, row_cache, topic_parts = (_derive_views(memory_root, tree, prev, sources, sources_same, runtime, config,
                                                   counter, switches) if derive else (None, {}, {}))
    rev_stamps, revision = _revision_of(memory_root, prev, switches)

    return StateView(
        state_dir=state_dir,
        memory_root=memory_root,
        layout=layout,
        config=config,
        workspace_id=workspace_id,
        revision=revision,
        tree=tree,
        sources=sources,
        views=views,
        runtime=runtime,
        writer_status=writer_status,
        agent_history=history,
        session_end=session_end,
        problems=tuple(problems),
        memory_missing=memory_missing,
        memory_disabled=not config.enabled,
        writer_disabled=not config.writer_enabled,
        empty_workspace=(not memory_missing) and not tree.unit_count,
        revision_stamps=rev_stamps,
        state_stamps=stamps,
        topic_entries=entries,
        counter=counter,
        reparsed_topics=tuple(reparsed),
        row_cache=row_cache,
        topic_parts=topic_parts, switches=switches,
    )


class Workspace:
    """A handle that keeps the latest snapshot of one state directory."""

    def __init__(self, state_dir: Path | str, *, counter: Any = None, switches: Switches | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.counter = counter
        self.switches = switches
        self._snapshot: StateView | None = None

    @property
    def snapshot(self) -> StateView:
        if self._snapshot is None:
            self._snapshot = open_state(self.state_dir, counter=self.counter, switches=self.switches)
        return self._snapshot

    def refresh(self) -> StateView:
        self._snapshot = refresh(self._snapshot) if self._snapshot is not None else open_state(self.state_dir, counter=self.counter, switches=self.switches)
        return self._snapshot


def open_memory_views(memory_root: Path, *, counter: Any = None, state_dir: Path | None = None,
                      switches: Switches | None = None) -> Any:
    """Derived views rebuilt from the committed topics of ``memory_root`` (reads only)."""
    state_dir = state_dir or memory_root.parent
    return open_state(state_dir, counter=counter, switches=switches).views


def check_views(memory_root: Path, *, counter: TokenCounter | None = None, state_dir: Path | None = None,
                switches: Switches | None = None) -> list[ViewMismatch]:
    """Rebuild every derived view from the committed topics and list the files that differ."""
    views = open_memory_views(memory_root, counter=counter, state_dir=state_dir, switches=switches)
    return compare_views(memory_root, views)
