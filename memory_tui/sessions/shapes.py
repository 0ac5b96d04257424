"""Each session's shape kept across processes: what its node files say, without the turns' words.

The header's insights ask, for every record, where each cited turn sits in its conversation
(its role, its predecessor chain, the forks above it): the :func:`~.ondemand.shape` of every
cited session. Reading a shape meant reading every node file of the session (one ``open`` and
one JSON parse each, 60 000 files at the benchmark's scale 1: most of the app's load after the
model), on every start, for sessions that had not changed.

This table keeps, per session, what :func:`.store.load_session_dir` made of each file it read
-- the in-memory per-file cache that a reload passes as ``previous`` -- with each node's words
left out: the file's stat stamp (``_packed``: mtime, size, inode, ctime) and its parsed
result and problems. A read hands the stored files to ``load_session_dir`` as ``previous``, so
a shape is made by the very code of a full read: a file whose stamp is unchanged is taken from
the table, any other is read and parsed, a racy stamp is never stored (``_cached_read``), and
the folder listing, the registry entry and every rule after the files are applied afresh. The
answer is therefore the shape of a full read of the files as they are now; only the cost
differs (one ``stat`` per file instead of a read).

Where it lives: ``<user cache>/session-shapes/<state>/<session>.shape``, one envelope of the
cache kit per session (kind ``session-shape``), written only when a file was read again. A
damaged file (the crc), another version's, another state's, session's or code's is a miss.
Reading a state never writes into it; losing the folder only costs time.
``MEMORY_TUI_TEST_DERIVE=full`` reads every file; ``check`` does both and compares.

Each table also keeps the session's :func:`.store.session_content_key` that its caller took
before the files were read (the key the session list takes anyway). When the caller's key now
is that one, the stored files are the folder as it is (the key holds the stamp of every file
and of both folders) and are taken without a ``stat`` or a listing. A key taken before a read
that then saw other files can never come back: some ctime moved, and ctimes only grow.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from memory_tui.core import switches as switches_mod
from memory_tui.core.cache import envelope
from memory_tui.core.cache.registry import keeps
from memory_tui.core.fsutil import cache_name_of, user_cache_dir
from memory_tui.core.format.errors import Problem

from .frozen import _freeze, _freeze_metadata, frozen_from_parts, frozen_parts, thaw
from .store import Node, Session, _CachedFile, load_session_dir

KIND = "session-shape"
VERSION = 2
FORMAT = "memory-tui/session-shape/2"
SUB = "session-shapes"
SUFFIX = ".shape"

# A stored file: (state-relative name, packed stamp, kind, value, problems as JSON)
#   kind "n": a node, value (id, seq, role, name, caller, predecessor, reads, metadata, created_at), its
#             metadata the index of a plain JSON object in the table's list of them
#   kind "m": a mapping (meta.json, a commit), value its plain JSON
#   kind "-": nothing parsed (value None)
_NODE, _MAP, _NONE = "n", "m", "-"


def shape(session: Session) -> Session:
    """``session`` without its turns' words: every node with its ``input`` and ``output``
    left out, all else as read (ids, predecessors, seq, role, caller, metadata). What walks
    the conversation's shape (lineages, chains, forks) reads is all there; a reader that
    keeps many sessions' lineages at once keeps this, not every turn's text."""
    # a node without words is its own shape (those the shape table gives back): not copied
    nodes = {nid: n if n.input is None and n.output is None else
             Node(n.id, n.seq, n.role, n.name, None, None, n.caller, n.predecessor, n.reads, n.metadata, n.created_at,
                  n.file)
             for nid, n in session.nodes.items()}
    return replace(session, nodes=MappingProxyType(nodes))


def problem_of_json(data: Mapping[str, Any]) -> Problem:
    """The :class:`Problem` that ``Problem.to_json`` wrote ``data`` from."""
    return Problem(data["code"], data["message"], data.get("path"), data.get("line"), data.get("column"),
                   dict(data.get("details") or {}))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def state_dir_of(state: Path) -> Path:
    """The folder of ``state``'s shapes."""
    return user_cache_dir(SUB) / cache_name_of(state)


def _path(state: Path, sid: str) -> Path:
    return state_dir_of(state) / f"{_digest(sid)}{SUFFIX}"


_TAG: list[str] = keeps([])


def code_tag() -> str:
    """The code a shape is made by: the reader (``store``) and this table."""
    if not _TAG:
        from memory_tui.core.cache.codetag import code_tag as tag_of

        _TAG.append(tag_of("memory_tui.sessions.store", "memory_tui.sessions.frozen", "memory_tui.sessions.shapes",
                           salt=FORMAT, length=32))
    return _TAG[0]


def _pack_file(rel: str, cached: _CachedFile, metas: dict[int, int], plain: list) -> tuple:
    result = cached.result
    problems = tuple(p.to_json() for p in cached.problems)
    if type(result) is Node:
        # half of a session's nodes share one metadata object (``frozen._freeze_metadata``):
        # each is written once and frozen once when read back
        at = metas.get(id(result.metadata))
        if at is None:
            at = metas[id(result.metadata)] = len(plain)
            plain.append(_pack_meta(result.metadata))
        value = (result.id, result.seq, result.role, result.name, result.caller, result.predecessor, result.reads,
                 at, result.created_at)
        return rel, cached.fingerprint, _NODE, value, problems
    if result is None:
        return rel, cached.fingerprint, _NONE, None, problems
    if isinstance(result, Mapping):
        return rel, cached.fingerprint, _MAP, thaw(result), problems
    raise ValueError(f"{rel}: a parsed result of type {type(result).__name__}")


def _pack_meta(metadata: Mapping[str, Any]) -> tuple:
    """A node's metadata as stored: its frozen parts as they are (``"f"``, keys, values) when
    its values are scalars, which come back from ``marshal`` as they went in, interned
    strings included, so reading them back is one object, not a walk over every value (most
    of a read before); anything else as plain JSON (``"j"``), frozen again when read."""
    parts = frozen_parts(metadata)
    return ("f", *parts) if parts is not None else ("j", thaw(metadata))


def _unpack_meta(meta: Any, shared: dict) -> Any:
    if meta[0] == "f":
        keys, values = meta[1], meta[2]
        if type(keys) is not tuple or type(values) is not tuple or len(keys) != len(values):
            raise ValueError("not stored metadata")
        return frozen_from_parts(keys, values)
    if meta[0] == "j" and type(meta[1]) is dict:
        return _freeze_metadata(meta[1], shared)
    raise ValueError("not stored metadata")


def _unpack_file(row: Any, metas: list) -> tuple[str, _CachedFile]:
    rel, fingerprint, kind, value, problems = row
    if type(rel) is not str or type(fingerprint) is not int:
        raise ValueError("not a stored file")
    found = tuple([problem_of_json(p) for p in problems]) if problems else ()
    if kind == _NODE:
        nid, seq, role, name, caller, pred, reads, at, created = value
        # as ``store.parse_node`` builds it, the words left out; its strings were interned
        # when written, and ``marshal`` gives them back interned
        result: Any = Node(nid, seq, role, name, None, None, caller, pred,
                           reads if type(reads) is tuple else tuple(reads), metas[at], created, rel)
    elif kind == _MAP:
        result = _freeze(value)
    elif kind == _NONE:
        result = None
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return rel, _CachedFile(fingerprint, result, found)


def _read(state: Path, sid: str) -> tuple[dict[str, _CachedFile], str | None]:
    """The stored files of ``sid`` and the content key they were stored under (empty and
    ``None`` on any miss)."""
    value = envelope.read(_path(state, sid), KIND, VERSION)
    if not (type(value) is tuple and len(value) == 7):
        return {}, None
    fmt, tag, where, got_sid, key, metas, rows = value
    if fmt != FORMAT or tag != code_tag() or where != str(state.absolute()) or got_sid != sid \
            or type(metas) is not tuple or type(rows) is not tuple or not (key is None or type(key) is str):
        return {}, None
    try:
        shared: dict = {}
        frozen = [_unpack_meta(m, shared) for m in metas]
        return dict(_unpack_file(row, frozen) for row in rows), key
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):  # not a table this code wrote
        return {}, None


def _write(state: Path, sid: str, files: Mapping[str, _CachedFile], key: str | None) -> bool:
    metas: dict[int, int] = {}
    plain: list = []
    try:
        rows = tuple(_pack_file(rel, cached, metas, plain) for rel, cached in sorted(files.items()))
    except ValueError:
        return False
    return envelope.write(_path(state, sid), KIND,
                          (FORMAT, code_tag(), str(state.absolute()), sid, key, tuple(plain), rows),
                          VERSION, make_folder=True)


def keep(state_dir: Path, sid: str, files: Mapping[str, _CachedFile], content_key: str, *,
         switches: Any = None) -> bool:
    """Store ``files`` (a :class:`~.store.SessionSnapshot`'s cache of session ``sid``, read
    after ``content_key`` was taken) as its table, as :func:`load_shape` would after reading
    them itself: a reader that read the session already spares the next shape its reads. The
    full mode keeps nothing."""
    sw = switches if switches is not None else switches_mod.current()
    return not sw.full and _write(Path(state_dir), sid, files, content_key)


def load_shape(state_dir: Path, sid: str, sdir: Path, registry: Mapping[str, Any], registry_ok: bool, *,
               content_key: str | None = None, switches: Any = None) -> Session:
    """The :func:`~.ondemand.shape` of session ``sid`` as its files are now (``sdir``: its
    folder, ``registry``/``registry_ok``: discovery's answer, as ``load_session_dir`` takes
    them), its unchanged files taken from the table and the table brought up to date.
    ``content_key``: the session's :func:`.store.session_content_key`, taken before this call
    (the session list's); when the table was stored under it, nothing is listed or stat-ed."""
    state = Path(state_dir)
    sw = switches if switches is not None else switches_mod.current()

    def full() -> Session:
        return shape(load_session_dir(sid, sdir, state, registry, registry_ok))

    def kept() -> Session:
        stored, stored_key = _read(state, sid)
        seen: dict[str, _CachedFile] = {}
        if content_key is not None and stored_key == content_key:
            return shape(load_session_dir(sid, sdir, state, registry, registry_ok, previous=stored, cache_out=seen,
                                          trusted=True))
        session = load_session_dir(sid, sdir, state, registry, registry_ok, previous=stored, cache_out=seen)
        if stored_key != content_key or seen.keys() != stored.keys() or any(seen[k] is not stored[k] for k in seen):
            _write(state, sid, seen, content_key)
        return shape(session)

    if sw.full:
        return full()
    return sw.choose("session shape", kept, full)


def prune(state_dir: Path, sids: Iterable[str]) -> int:
    """Delete the shapes of sessions not in ``sids`` (gone from the state); how many."""
    folder = state_dir_of(Path(state_dir))
    if folder.is_symlink():  # never delete through a link the table did not make
        return 0
    live = {f"{_digest(sid)}{SUFFIX}" for sid in sids}
    gone = 0
    try:
        with os.scandir(folder) as it:
            names = [e.name for e in it if e.name.endswith(SUFFIX) and e.name not in live]
    except OSError:
        return 0
    for name in names:
        try:
            os.unlink(folder / name)
            gone += 1
        except OSError:
            pass
    return gone


__all__ = ["FORMAT", "KIND", "VERSION", "code_tag", "load_shape", "problem_of_json", "prune", "shape", "state_dir_of"]
