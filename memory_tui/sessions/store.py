"""Read OpenProgram's session store straight from the files (session spec §1, §2).

Nothing here writes: discovery, the registry, ``meta.json`` and every ``history/*.json`` node
file are parsed into frozen dataclasses. A corrupt file becomes a :class:`Problem` naming the
file and line/column, and the session still loads whatever else it can.

Re-reading is incremental: pass the previous :class:`SessionSnapshot` and only files whose
``(mtime_ns, size, inode)`` changed are parsed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from array import array
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from memory_tui.core.cache.stamp import RACY_NS, Stamp, is_racy, stamp_of
from memory_tui.core.format.errors import CORRUPT_FILE, Problem

# the frozen JSON of every node (re-exported: readers import ``thaw`` and ``FrozenMap`` from here)
from .frozen import FrozenMap, _freeze, _freeze_metadata, _intern, _intern_short, thaw  # noqa: F401

ROOT_ID = "ROOT"
REGISTRY_NAME = "index.json"
LOCATIONS_NAME = "locations.json"

# Problem codes used by the reader (CORRUPT_FILE comes from core.errors).
NOT_A_SESSION = "NOT_A_SESSION"
NOT_IN_REGISTRY = "NOT_IN_REGISTRY"
DUPLICATE_NODE = "DUPLICATE_NODE"

Fingerprint = Stamp  # the cache kit's (mtime_ns, size, inode, ctime_ns)


# --------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True, slots=True)
class Node:
    """One ``history/*.json`` file (session spec §2.2). ``metadata`` is a read-only mapping
    (a :class:`FrozenMap`). Slots: 60 000 of them are alive in the app."""

    id: str
    seq: int
    role: str
    name: str
    input: Any
    output: Any
    caller: str
    predecessor: str | None
    reads: tuple[str, ...]
    metadata: Mapping[str, Any]
    created_at: float
    file: str  # state-relative posix path of the node file (absolute for out-of-state sessions)

    # ---- convenience views over metadata (session spec §2.3)
    def meta(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    @property
    def display(self) -> Any:
        return self.metadata.get("display")

    @property
    def source(self) -> Any:
        return self.metadata.get("source")

    @property
    def is_root(self) -> bool:
        return self.metadata.get("display") == "root"

    @property
    def rewound(self) -> bool:
        return bool(self.metadata.get("rewound"))

    @property
    def is_attach(self) -> bool:
        return self.metadata.get("function") == "attach"

    @property
    def is_context(self) -> bool:
        return isinstance(self.name, str) and self.name.startswith("context/")

    @property
    def is_spawn_root(self) -> bool:
        return bool(self.metadata.get("spawn_branch_root")) or self.metadata.get("source") == "agent_spawn"

    @property
    def covers_ids(self) -> tuple[str, ...] | None:
        value = self.metadata.get("covers_ids")
        return value if isinstance(value, tuple) else None

    @property
    def root_level(self) -> bool:
        return self.caller in ("", ROOT_ID)

    def mark(self, key: str = "memory_written_scriptorium") -> Any:
        return self.metadata.get(key)


@dataclass(frozen=True, slots=True)
class UnreadableNode:
    """A ``history/*.json`` file that exists but does not parse: what its name and readable
    prefix still tell (its id and seq are in the file name, ``<seq>-<role>-<id>.json``; its
    predecessor when the prefix holds the field whole) and the error."""

    file: str  # state-relative posix path
    id: str | None
    seq: int | None
    predecessor: str | None
    code: str
    message: str
    line: int | None
    column: int | None


_PRED_RE = None


def _salvage_predecessor(path: Path) -> str | None:
    """The ``predecessor`` of a cut node file when its readable prefix holds the field whole."""
    global _PRED_RE
    import re

    if _PRED_RE is None:
        _PRED_RE = re.compile(r'"predecessor"\s*:\s*(null|"((?:[^"\\]|\\.)*)")')
    try:
        text = path.read_bytes()[: 1 << 20].decode("utf-8", "replace")
    except OSError:
        return None
    m = _PRED_RE.search(text)
    if m is None or m.group(1) == "null":
        return None
    try:
        value = json.loads(f'"{m.group(2)}"')
    except ValueError:
        return None
    return value if isinstance(value, str) and value else None


def unreadable_node(path: Path, rel: str, problem: Problem) -> UnreadableNode:
    name = path.name[:-5] if path.name.endswith(".json") else path.name
    seq = _seq_from_name(name)
    parts = name.split("-", 2)
    nid = parts[2] if len(parts) == 3 and parts[2] else None
    return UnreadableNode(rel, nid, seq, _salvage_predecessor(path), problem.code, problem.message, problem.line,
                          problem.column)


@dataclass(frozen=True)
class Session:
    id: str
    dir: Path
    rel: str  # state-relative posix path of the session dir (absolute when outside the state dir)
    meta: Mapping[str, Any]
    nodes: Mapping[str, Node]  # by id, in seq order
    order: tuple[str, ...]  # node ids in seq order
    head_id: str | None
    branches_meta: Mapping[str, Any]
    merged_heads: tuple[str, ...]
    in_registry: bool
    registry_entry: Mapping[str, Any] | None
    updated_at: float | None
    problems: tuple[Problem, ...] = ()
    commit_parent_heads: tuple[str, ...] = ()  # non-primary parent heads of multi-parent context commits
    unreadable: tuple[UnreadableNode, ...] = ()  # node files that exist but do not parse

    @property
    def unreadable_predecessors(self) -> frozenset[str]:
        """Nodes whose child is an unreadable node file: they are no tip (their child exists)."""
        return frozenset(u.predecessor for u in self.unreadable if u.predecessor)

    @property
    def meta_file(self) -> str:
        return f"{self.rel}/meta.json"

    @property
    def archived(self) -> bool:
        entry = self.registry_entry or {}
        return bool(entry.get("archived", self.meta.get("archived", False)))

    @property
    def title(self) -> str:
        entry = self.registry_entry or {}
        value = entry.get("title") or self.meta.get("title") or ""
        return value if isinstance(value, str) else str(value)

    def get(self, node_id: str | None) -> Node | None:
        if not node_id:
            return None
        return self.nodes.get(node_id)


@dataclass(frozen=True, slots=True)
class _CachedFile:
    fingerprint: int  # _packed(_fingerprint(path)): one int, not a tuple of four
    result: Any  # Node | dict | None
    problems: tuple[Problem, ...]


@dataclass(frozen=True)
class _SessionStamp:
    """What must be unchanged for a whole session to be reused without looking inside."""

    dir: str
    history: tuple[int, int, int]  # (mtime_ns, inode, ctime_ns) of history/: a node file added, removed or replaced
    meta: Fingerprint | None
    commits: tuple[int, int, int] | None  # context/commits/
    registry_ok: bool
    entry: str  # the session's registry entry, as canonical JSON


@dataclass(frozen=True)
class SessionSnapshot:
    state_dir: Path
    root: Path | None  # <state>/sessions (or legacy sessions-git); None when absent
    sessions: Mapping[str, Session]
    registry: Mapping[str, Any]
    registry_ok: bool
    problems: tuple[Problem, ...] = ()
    # per session id: the parsed files of that session, and the stamp that lets it be reused
    _cache: Mapping[str, Mapping[str, _CachedFile]] = field(default_factory=dict, repr=False, compare=False)
    _stamps: Mapping[str, _SessionStamp] = field(default_factory=dict, repr=False, compare=False)
    # every session folder discovery found, read or not (``only``): what a caller that must look
    # past the sessions it read (spawn links) walks without discovering them again
    discovered: tuple[tuple[str, Path], ...] = field(default=(), repr=False, compare=False)

    def get(self, session_id: str) -> Session | None:
        return self.sessions.get(session_id)

    def all_problems(self) -> tuple[Problem, ...]:
        out = list(self.problems)
        for session in self.sessions.values():
            out.extend(session.problems)
        return tuple(out)


# --------------------------------------------------------------------------- helpers


def valid_session_id(sid: Any) -> bool:
    """Session spec §1.2 id rule."""
    return isinstance(sid, str) and sid not in ("", ".", "..") and "/" not in sid and "\\" not in sid and "\x00" not in sid


def is_session_dir(path: Path) -> bool:
    """Session spec §1.2: not a symlink, has ``.git``, has a ``history/`` directory."""
    try:
        if path.is_symlink() or not path.is_dir():
            return False
        return os.path.lexists(path / ".git") and (path / "history").is_dir()
    except OSError:
        return False


def rel_path(path: Path, state_dir: Path) -> str:
    try:
        return path.relative_to(state_dir).as_posix()
    except ValueError:
        return path.as_posix()


def _fingerprint(path: Path | str) -> Fingerprint | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return stamp_of(st)


_U64 = (1 << 64) - 1


def _packed(fp: Fingerprint | None) -> int | None:
    """The fingerprint as one exact int (each part taken mod 2**64, which is injective for
    the kernel's 64-bit fields): a file cache entry per node file is alive for every one of
    60 000 nodes, and a tuple of three ints costs three times as much."""
    if fp is None:
        return None
    mtime, size, ino, ctime = fp
    return ((ctime & _U64) << 192) | ((ino & _U64) << 128) | ((size & _U64) << 64) | (mtime & _U64)


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return line, col


def read_json(path: Path, rel: str) -> tuple[Any, tuple[Problem, ...]]:
    """Parse one JSON file. Returns (value or None, problems) and never raises."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, ()
    except OSError as exc:
        return None, (Problem(CORRUPT_FILE, f"cannot read: {exc.strerror or exc}", rel),)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        prefix = raw[: exc.start].decode("utf-8", "replace")
        line, col = _position(prefix, len(prefix))
        return None, (Problem(CORRUPT_FILE, f"not UTF-8 ({exc.reason})", rel, line, col),)
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return json.loads(text), ()
    except json.JSONDecodeError as exc:
        return None, (Problem(CORRUPT_FILE, f"invalid JSON: {exc.msg}", rel, exc.lineno, exc.colno),)
    except (ValueError, RecursionError) as exc:  # e.g. absurd nesting
        return None, (Problem(CORRUPT_FILE, f"invalid JSON: {exc}", rel, 1, 1),)


def _key_position(text_path: Path, key: str) -> tuple[int, int]:
    """Best-effort line/column of ``"key"`` in a file (for structural problems)."""
    try:
        text = text_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 1, 1
    idx = text.find(json.dumps(key))
    return _position(text, idx) if idx >= 0 else (1, 1)


def _str_or(value: Any, default: str) -> str:
    return value if isinstance(value, str) else default


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _seq_from_name(name: str) -> int | None:
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() else None


def parse_node(data: Any, path: Path, rel: str, shared: dict[Any, Mapping[str, Any]] | None = None
               ) -> tuple[Node | None, tuple[Problem, ...]]:
    """Turn one parsed node object into a :class:`Node` (session spec §2.2 load rules).
    ``shared``: see :func:`_freeze_metadata`."""
    if not isinstance(data, dict):
        return None, (Problem(CORRUPT_FILE, f"node file holds {type(data).__name__}, not an object", rel, 1, 1),)
    problems: list[Problem] = []
    node_id = data.get("id")
    if not isinstance(node_id, str) or not node_id:
        line, col = _key_position(path, "id")
        return None, (
            Problem(
                "WRITER_PRECONDITION_FAILED",
                "node has no stable id (OpenProgram's writer raises 'memory source message requires a stable id')",
                rel,
                line,
                col,
                {"reason": "missing_id"},
            ),
        )
    seq = data.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int):
        fallback = _seq_from_name(path.name)
        line, col = _key_position(path, "seq")
        problems.append(Problem(CORRUPT_FILE, f"node {node_id!r} has no integer seq; using {fallback}", rel, line, col))
        seq = fallback if fallback is not None else 1 << 62
    role = data.get("role")
    if not isinstance(role, str):
        line, col = _key_position(path, "role")
        problems.append(Problem(CORRUPT_FILE, f"node {node_id!r} has no string role", rel, line, col))
        role = ""
    metadata = data.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        line, col = _key_position(path, "metadata")
        problems.append(Problem(CORRUPT_FILE, f"node {node_id!r} metadata is not an object", rel, line, col))
        metadata = {}
    pred = data.get("predecessor")
    if pred is not None and not isinstance(pred, str):
        line, col = _key_position(path, "predecessor")
        problems.append(Problem(CORRUPT_FILE, f"node {node_id!r} predecessor is not a string", rel, line, col))
        pred = None
    reads = data.get("reads")
    reads_t = tuple(r for r in reads if isinstance(r, str)) if isinstance(reads, list) else ()
    created = _float_or_none(data.get("created_at"))
    # Interned — each file is decoded on its own, so every node held its
    # own "user"/"llm", caller and predecessor strings; interned, a predecessor is the very
    # string its predecessor's id is.
    node = Node(
        id=_intern(node_id),
        seq=seq,
        role=_intern(role),
        name=_intern_short(_str_or(data.get("name"), "")),
        input=_freeze(data.get("input")),
        output=_freeze(data.get("output")),
        caller=_intern_short(_str_or(data.get("caller"), "")),
        predecessor=_intern(pred) if pred is not None else None,
        reads=reads_t,
        metadata=_freeze_metadata(metadata, shared),
        created_at=created if created is not None else 0.0,
        file=rel,
    )
    return node, tuple(problems)


# --------------------------------------------------------------------------- discovery


def registry_rel(state_dir: Path) -> str:
    root = sessions_root(state_dir) or (state_dir / "sessions")
    return rel_path(root / REGISTRY_NAME, state_dir)


def sessions_root(state_dir: Path) -> Path | None:
    """``<state>/sessions``, or the legacy ``sessions-git`` when only that exists (§1.1)."""
    primary = state_dir / "sessions"
    if primary.is_dir():
        return primary
    legacy = state_dir / "sessions-git"
    if legacy.is_dir():
        return legacy
    return None


def discover(state_dir: Path) -> tuple[list[tuple[str, Path]], dict[str, Any], bool, list[Problem]]:
    """Candidate session dirs, the registry, whether it was readable, and problems."""
    problems: list[Problem] = []
    root = sessions_root(state_dir)
    found: dict[str, Path] = {}
    if root is None:
        return [], {}, False, problems
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        problems.append(Problem(CORRUPT_FILE, f"cannot list sessions: {exc.strerror or exc}", rel_path(root, state_dir)))
        entries = []
    for entry in entries:
        if not valid_session_id(entry.name):
            continue
        path = Path(entry.path)
        try:
            if entry.is_symlink() or not entry.is_dir():
                continue
        except OSError:
            continue
        if is_session_dir(path):
            found[entry.name] = path
    loc_rel = rel_path(root / LOCATIONS_NAME, state_dir)
    locations, loc_problems = read_json(root / LOCATIONS_NAME, loc_rel)
    problems.extend(loc_problems)
    if locations is not None and not isinstance(locations, dict):
        problems.append(Problem(CORRUPT_FILE, "locations.json is not an object", loc_rel, 1, 1))
        locations = None
    for sid, target in (locations or {}).items():
        if not valid_session_id(sid) or not isinstance(target, str) or not target:
            continue
        path = Path(target).expanduser()
        if not path.is_absolute():
            path = root / path
        if is_session_dir(path):
            found[sid] = path  # an entry whose history/ exists wins (§1.1 step 1)
    reg_path = root / REGISTRY_NAME
    reg_rel = rel_path(reg_path, state_dir)
    registry, reg_problems = read_json(reg_path, reg_rel)
    registry_ok = True
    if reg_problems:
        problems.extend(
            Problem(p.code, p.message + " (OpenProgram rebuilds the registry from every meta.json)", p.path, p.line, p.column)
            for p in reg_problems
        )
        registry, registry_ok = {}, False
    elif registry is None:
        registry, registry_ok = {}, False  # missing: rebuilt from meta by OpenProgram
    elif not isinstance(registry, dict):
        problems.append(Problem(CORRUPT_FILE, "index.json is not an object; OpenProgram rebuilds it", reg_rel, 1, 1))
        registry, registry_ok = {}, False
    return sorted(found.items()), registry, registry_ok, problems


# --------------------------------------------------------------------------- loading


def _cached_read(
    path: Path | str,
    rel: str,
    parse: Any,
    previous: Mapping[str, _CachedFile],
    cache_out: dict[str, _CachedFile],
    trusted: bool = False,
) -> tuple[Any, tuple[Problem, ...]]:
    # Keyed by the state-relative name (the string the Node keeps as ``file`` anyway), not
    # a second absolute path string per node file: ``previous`` is one session's files.
    key = rel
    if trusted:
        old = previous.get(key)
        if old is not None:
            cache_out[key] = old
            return old.result, old.problems
    stamp = _fingerprint(path)
    # a stamp inside the clock tick proves nothing about a later read: such a file is not kept
    fp = None if stamp is None or is_racy(stamp[0], stamp[3]) else _packed(stamp)
    old = previous.get(key)
    if fp is not None and old is not None and old.fingerprint == fp:
        cache_out[key] = old
        return old.result, old.problems
    path = Path(path)  # a hit needs only the stat; a Path per node file is made on a miss
    data, problems = read_json(path, rel)
    result = None
    if data is not None or not problems:
        result, more = parse(data, path, rel)
        problems = problems + more
    if fp is not None:
        cache_out[key] = _CachedFile(fp, result, tuple(problems))
    return result, tuple(problems)


def _parse_meta(data: Any, path: Path, rel: str) -> tuple[Mapping[str, Any], tuple[Problem, ...]]:
    if data is None:
        return MappingProxyType({}), ()
    if not isinstance(data, dict):
        return MappingProxyType({}), (Problem(CORRUPT_FILE, "meta.json is not an object", rel, 1, 1),)
    return _freeze(data), ()


def _parse_commit(data: Any, path: Path, rel: str) -> tuple[Any, tuple[Problem, ...]]:
    if not isinstance(data, dict):
        return None, ()
    return _freeze({k: data.get(k) for k in ("id", "head_node_id", "commit_parents")}), ()


def load_session_dir(
    sid: str,
    sdir: Path,
    state_dir: Path,
    registry: Mapping[str, Any],
    registry_ok: bool,
    previous: Mapping[str, _CachedFile] | None = None,
    cache_out: dict[str, _CachedFile] | None = None,
    *,
    trusted: bool = False,
) -> Session:
    """Session ``sid`` as its folder ``sdir`` holds it now. ``previous``: files read before
    (``cache_out`` of an earlier call), each taken again when its stat stamp is unchanged.
    ``trusted``: the caller vouches that ``previous`` holds every file of the folder as it is
    now (it was stored under the session's :func:`session_content_key`, and that key is the
    same now): the folders are not listed and the stored files not stat-ed again; a file
    missing from ``previous`` is read as usual."""
    previous = previous or {}
    cache_out = {} if cache_out is None else cache_out
    srel = rel_path(sdir, state_dir)
    problems: list[Problem] = []
    meta, meta_problems = _cached_read(sdir / "meta.json", f"{srel}/meta.json", _parse_meta, previous, cache_out,
                                       trusted)
    meta = meta if meta is not None else MappingProxyType({})
    problems.extend(meta_problems)
    nodes, order, unreadable = _read_history(sdir, srel, previous, cache_out, problems, trusted)

    if "head_id" in meta:
        head = meta.get("head_id")
    else:
        head = meta.get("last_node_id")
    head = head if isinstance(head, str) and head else None
    branches = meta.get("branches")
    if not isinstance(branches, Mapping):
        branches = MappingProxyType({})
    merged = meta.get("merged_heads")
    merged_t = tuple(m for m in merged if isinstance(m, str)) if isinstance(merged, tuple) else ()
    commit_heads = _commit_parent_heads(sdir, srel, previous, cache_out, trusted)

    entry = registry.get(sid) if isinstance(registry, Mapping) else None
    if registry_ok:
        in_registry = isinstance(entry, Mapping)
    else:
        # A missing or corrupt registry is rebuilt from every meta.json by OpenProgram.
        in_registry = bool(meta)
        entry = None
    if in_registry and isinstance(entry, Mapping):
        updated = _float_or_none(entry.get("updated_at"))
        registry_entry = _freeze(dict(entry)) if isinstance(entry, dict) else entry
    else:
        updated = _float_or_none(meta.get("updated_at"))
        registry_entry = None
    if registry_ok and not in_registry:
        problems.append(
            Problem(
                NOT_IN_REGISTRY,
                f"session {sid} is not in the registry; OpenProgram's idle watcher cannot see it until its next turn",
                registry_rel(state_dir),
                None,
                None,
                {"session_id": sid},
            )
        )
    return Session(
        id=sid,
        dir=sdir,
        rel=srel,
        meta=meta,
        nodes=MappingProxyType(nodes),
        order=order,
        head_id=head,
        branches_meta=branches,
        merged_heads=merged_t,
        in_registry=in_registry,
        registry_entry=registry_entry,
        updated_at=updated,
        problems=tuple(problems),
        commit_parent_heads=tuple(commit_heads),
        unreadable=tuple(u for u in unreadable if u.id is None or u.id not in nodes),
    )


def _stored_names(previous: Mapping[str, _CachedFile], folder: str) -> list[str]:
    """The names of the files ``previous`` holds directly in ``folder`` (state-relative)."""
    prefix = folder + "/"
    return sorted(rel[len(prefix):] for rel in previous if rel.startswith(prefix) and "/" not in rel[len(prefix):])


def _read_history(sdir: Path, srel: str, previous: Mapping[str, _CachedFile], cache_out: dict[str, _CachedFile],
                  problems: list[Problem], trusted: bool = False,
                  ) -> tuple[dict[str, Node], tuple[str, ...], list[UnreadableNode]]:
    """Every ``history/*.json`` node of the session in seq order (a duplicate id: the later
    seq wins, and is a problem), and the node files that do not parse. Problems are appended."""
    parsed: list[Node] = []
    hist = sdir / "history"
    if trusted:
        names = _stored_names(previous, f"{srel}/history")
    else:
        try:
            names = sorted(e.name for e in os.scandir(hist) if e.name.endswith(".json"))
        except OSError as exc:
            names = []
            problems.append(Problem(CORRUPT_FILE, f"cannot list history: {exc.strerror or exc}", f"{srel}/history"))
    shared: dict[Any, Mapping[str, Any]] = {}

    def parse(data: Any, path: Path, rel: str) -> tuple[Node | None, tuple[Problem, ...]]:
        return parse_node(data, path, rel, shared)

    unreadable: list[UnreadableNode] = []
    where = str(hist)
    for name in names:
        node, node_problems = _cached_read(f"{where}/{name}", f"{srel}/history/{name}", parse, previous, cache_out,
                                           trusted)
        problems.extend(node_problems)
        if node is not None:
            parsed.append(node)
        elif node_problems and node_problems[0].code == CORRUPT_FILE:
            unreadable.append(unreadable_node(hist / name, f"{srel}/history/{name}", node_problems[0]))
    parsed.sort(key=lambda n: (n.seq, n.file))
    nodes: dict[str, Node] = {}
    for node in parsed:
        if node.id in nodes:
            problems.append(
                Problem(DUPLICATE_NODE, f"node id {node.id!r} also in {nodes[node.id].file}; the later seq wins", node.file, 1, 1)
            )
        nodes[node.id] = node
    order = tuple(sorted(nodes, key=lambda i: (nodes[i].seq, nodes[i].file)))
    return {i: nodes[i] for i in order}, order, unreadable


def _commit_parent_heads(sdir: Path, srel: str, previous: Mapping[str, _CachedFile],
                         cache_out: dict[str, _CachedFile], trusted: bool = False) -> list[str]:
    """Multi-parent context commits: their non-primary parent heads are hidden tips (§3.5)."""
    commit_heads: list[str] = []
    cdir = sdir / "context" / "commits"
    if trusted:
        cnames = _stored_names(previous, f"{srel}/context/commits")
    elif not cdir.is_dir():
        return commit_heads
    else:
        try:
            cnames = sorted(e.name for e in os.scandir(cdir) if e.name.endswith(".json"))
        except OSError:
            cnames = []
    commits: dict[str, Any] = {}
    for name in cnames:
        commit, _ = _cached_read(cdir / name, f"{srel}/context/commits/{name}", _parse_commit, previous, cache_out,
                                 trusted)
        if commit is not None and isinstance(commit.get("id"), str):
            commits[commit["id"]] = commit
    for commit in commits.values():
        parents = commit.get("commit_parents")
        if isinstance(parents, tuple) and len(parents) > 1:
            for parent in parents[1:]:
                head_node = (commits.get(parent) or {}).get("head_node_id") if isinstance(parent, str) else None
                if isinstance(head_node, str):
                    commit_heads.append(head_node)
    return commit_heads


def _dir_key(path: Path | str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def _stamp_parts(sdir: str) -> tuple[Any, Any, Any]:
    """``(history/, meta.json, context/commits/)`` stamps of a session folder (as a string:
    this runs for every session of every ``status``)."""
    try:
        st = os.stat(sdir + "/meta.json")
    except OSError:
        meta = None
    else:
        meta = stamp_of(st)
    return _dir_key(sdir + "/history"), meta, _dir_key(sdir + "/context/commits")


def session_stamp(sid: str, sdir: Path, registry: Mapping[str, Any], registry_ok: bool) -> _SessionStamp | None:
    """The session's stamp, or ``None`` when it cannot vouch for anything (racy or unreadable).

    Node files are written by replacing them (OpenProgram and ``marks`` alike), which changes
    the directory's mtime; a stamp younger than the clock tick is never trusted."""
    where = str(sdir)
    hist, meta, commits = _stamp_parts(where)
    if hist is None:
        return None
    now = time.time_ns()
    if any(k is not None and is_racy(k[0], k[-1], now) for k in (hist, meta, commits)):
        return None
    entry = registry.get(sid) if isinstance(registry, Mapping) else None
    try:
        entry_json = json.dumps(entry, sort_keys=True, default=repr)
    except (TypeError, ValueError, RecursionError):
        return None
    return _SessionStamp(where, hist, meta, commits, registry_ok, entry_json)


def session_content_key(
    sid: str, sdir: Path, state_dir: Path, registry: Mapping[str, Any], registry_ok: bool, *,
    reg_rel: str | None = None,
) -> str | None:
    """A digest of everything :func:`load_session_dir` reads for this session, or ``None``
    when it cannot vouch for that (racy or unreadable): the session stamp (§1.8: ``history/``,
    ``meta.json``, ``context/commits/``, the registry entry) plus the stat stamp
    (``core.cache.stamp``: mtime, size, inode, ctime) of every node and commit file, so a
    node file rewritten in place is seen too, its mtime put back or not. Equal keys mean an
    equal :class:`Session` (the persistent per-session result cache in ``sessions.cache``).
    It costs one ``stat`` per file, never a read. ``reg_rel``: :func:`registry_rel` of
    ``state_dir``, when the caller takes many keys at once."""
    stamp = session_stamp(sid, sdir, registry, registry_ok)
    if stamp is None:
        return None
    # The session stamp holds the two folders' (mtime, inode, ctime) and meta.json's whole
    # stamp, each checked against the racy rule: a folder's size adds nothing to them.
    h = hashlib.sha256(json.dumps([sid, stamp.dir, rel_path(sdir, state_dir),
                                   registry_rel(state_dir) if reg_rel is None else reg_rel, stamp.history,
                                   stamp.meta, stamp.commits, stamp.registry_ok, stamp.entry]).encode())
    now = time.time_ns()
    for where in (stamp.dir + "/history", stamp.dir + "/context/commits" if stamp.commits is not None else None):
        if where is None:
            h.update(b"\0no-commits")
            continue
        rows = _folder_stamps(where, now)
        if rows is None:
            return None
        if rows is _NOT_A_FOLDER:
            h.update(b"\0no-commits")
            continue
        h.update(rows)
    if _stamp_parts(stamp.dir) != (stamp.history, stamp.meta, stamp.commits):
        return None  # the directory moved while it was listed
    return h.hexdigest()


_NAME = attrgetter("name")
_MTIME_NS = attrgetter("st_mtime_ns")
_CTIME_NS = attrgetter("st_ctime_ns")
_SIZE = attrgetter("st_size")
_INO = attrgetter("st_ino")
_ENTRY_STAT = os.DirEntry.stat
_NOT_A_FOLDER = b""


def _folder_stamps(where: str, now: int) -> bytes | None:
    """The stat stamps of a folder's ``*.json`` files as bytes (names, then stamps, in name
    order), ``None`` when any is racy or the folder cannot be listed, ``_NOT_A_FOLDER`` for a
    file where the folder should be (read as no commits). One ``stat`` per file; the rest is
    C-level passes over the lists (one per stamp field, into machine-int arrays: no tuple and
    no text per file), so sixty thousand node files cost little more than their system calls."""
    try:
        with os.scandir(where) as it:
            entries = list(it)
    except NotADirectoryError:
        return _NOT_A_FOLDER
    except OSError:
        return None
    names = list(map(_NAME, entries))
    if not all(map(str.endswith, names, repeat(".json"))):
        entries = [e for e, name in zip(entries, names) if name.endswith(".json")]
    entries.sort(key=_NAME)
    names = "/".join(map(_NAME, entries)).encode("utf-8", "surrogateescape")
    try:
        stats = list(map(_ENTRY_STAT, entries))
    except FileNotFoundError:  # a dangling link (read as a problem, and stable) or a file just removed
        return _stamps_one_by_one(entries, names, now)
    except OSError:
        return None
    if stats and now - max(max(map(_MTIME_NS, stats)), max(map(_CTIME_NS, stats))) < RACY_NS:
        return None
    # Names hold neither NUL nor "/" and are unique within a folder: the joined names and the
    # four fixed-width columns are exact.
    return b"".join((b"\0A", names, b"\0", array("q", map(_MTIME_NS, stats)).tobytes(),
                     array("Q", map(_SIZE, stats)).tobytes(), array("Q", map(_INO, stats)).tobytes(),
                     array("q", map(_CTIME_NS, stats)).tobytes()))


def _stamps_one_by_one(entries: list[Any], names: bytes, now: int) -> bytes | None:
    """``_folder_stamps`` of a folder holding a dangling link: its stamp is ``None``."""
    stamps: list[Any] = []
    for e in entries:
        try:
            st = e.stat()
        except FileNotFoundError:
            stamps.append(None)
            continue
        except OSError:
            return None
        if is_racy(st.st_mtime_ns, st.st_ctime_ns, now):
            return None
        stamps.append(stamp_of(st))
    return b"\0R" + names + b"\0" + repr(stamps).encode()


def load_sessions(
    state_dir: str | os.PathLike[str], previous: SessionSnapshot | None = None, *, trust_dir_stamps: bool = False,
    only: Iterable[str] | None = None,
) -> SessionSnapshot:
    """Every readable session under ``state_dir`` (discovery §1.1-§1.2, parsing §1.5, §2).

    With ``previous``, only files whose ``(mtime_ns, size, inode)`` changed are parsed again.
    With ``trust_dir_stamps`` too, a session whose stamp (:func:`session_stamp`) is unchanged
    is the very same :class:`Session` object and none of its files is looked at: OpenProgram's
    own cross-process freshness rule (session spec §1.8), exact for every writer that replaces
    node files, blind to a node file rewritten in place (which the default still catches).

    With ``only``, just those session ids are read (discovery, the registry and its problems
    stay whole): each session's parse depends on its own directory and registry entry alone,
    so every one of them equals its counterpart in a full load."""
    state = Path(state_dir)
    found, registry, registry_ok, problems = discover(state)
    discovered = tuple(found)
    if only is not None:
        wanted = set(only)
        found = [(sid, sdir) for sid, sdir in found if sid in wanted]
    prev_cache = previous._cache if previous is not None else {}
    prev_stamps = previous._stamps if previous is not None else {}
    cache: dict[str, Mapping[str, _CachedFile]] = {}
    stamps: dict[str, _SessionStamp] = {}
    sessions: dict[str, Session] = {}
    for sid, sdir in found:
        stamp = session_stamp(sid, sdir, registry, registry_ok)
        old = previous.sessions.get(sid) if previous is not None else None
        if trust_dir_stamps and stamp is not None and old is not None and prev_stamps.get(sid) == stamp:
            sessions[sid], cache[sid], stamps[sid] = old, prev_cache.get(sid, {}), stamp
            continue
        files: dict[str, _CachedFile] = {}
        sessions[sid] = load_session_dir(sid, sdir, state, registry, registry_ok, prev_cache.get(sid, {}), files)
        cache[sid] = files
        if stamp is not None and session_stamp(sid, sdir, registry, registry_ok) == stamp:
            stamps[sid] = stamp  # nothing moved while it was read
    ordered = dict(sorted(sessions.items(), key=lambda kv: (-(kv[1].updated_at or 0.0), kv[0])))
    return SessionSnapshot(
        state_dir=state,
        root=sessions_root(state),
        sessions=MappingProxyType(ordered),
        registry=_freeze(registry) if isinstance(registry, dict) else MappingProxyType({}),
        registry_ok=registry_ok,
        problems=tuple(problems),
        _cache=MappingProxyType(cache),
        _stamps=MappingProxyType(stamps),
        discovered=discovered,
    )
