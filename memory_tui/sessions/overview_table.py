"""Overviews of big sessions kept across processes (the Sessions view's open).

:func:`.overview.session_overview` classifies every node of a session (its message projection,
the record filter, the token count of each unmarked record) and sweeps its DAG twice: on a
10 000-node session that is the largest part of opening the Sessions view, every time, for a
session that has usually not changed since the last open. The overview is a pure function of
the :class:`~.store.Session` as read, the workspace id, the token counter and this package's
code, so an entry is keyed by a SHA-256 of exactly those: every field of every node and of the
session, written by ``marshal`` (``True``, ``1`` and ``1.0`` stay apart; a read-only mapping
is written with a ``bytes`` tag no parsed JSON holds, so it cannot pass for a list) — the
content itself, not file stamps, so an entry can never describe other files than the ones the
app's snapshot read. A hit is what :func:`.overview.session_overview` would return.

The entry holds only the per-node answers and the row's figures (plain strings, ints and bools);
the branch rows are listed again from the session (a few ms). Sessions below
:data:`MIN_NODES` nodes are computed (a few ms), as is a session whose overview is ``None`` (the
engine's path), one holding a value ``marshal`` cannot write exactly, and any session when the
counter has no stable name. Files live next to the layout table's (``overviews/``
under :func:`memory_tui.core.fsutil.user_cache_dir`), never in the state
dir; unreadable, truncated, of another format or key: a miss.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from memory_tui.core.cache import envelope
from memory_tui.core.cache.codetag import code_tag
from memory_tui.core.fsutil import user_cache_dir

from . import dag, overview, records, store
from .cache import counter_tag
from .dag import forced_pass_branch_order, list_branches, tips_of
from .layout_table import digest_key, read_entry, write_entry
from .overview import SessionOverview, session_overview
from .records import CachedCounter, cached_counter
from .store import FrozenMap, Node, Session
from memory_tui.core.cache.registry import keeps

FORMAT = "memory-tui/overview-table/2"  # 2: an envelope of the cache kit
KIND = "overview"
VERSION = 2
MIN_NODES = 2000  # below this an overview takes a few ms: not worth a file
_SUFFIX = ".overview"
_LEAVES = frozenset({str, int, float, bool, type(None)})
_MAP_TAG = b"m"


def table_dir() -> Path:
    return user_cache_dir("overviews")


@keeps
@lru_cache(maxsize=1)
def _code_tag() -> bytes:
    """The code an overview is computed and read by, and this table's."""
    return code_tag(overview, records, dag, store, sys.modules[__name__], salt=FORMAT).encode()


def _plain(value: Any) -> Any:
    """A frozen JSON value as plain tuples ``marshal`` writes exactly; ValueError otherwise."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is tuple:
        return tuple(_plain(v) for v in value)
    if kind is FrozenMap:  # the metadata's type: the ABC check below is slow on 10 000 nodes
        return (_MAP_TAG, value._shape.keys, tuple(_plain(v) for v in value._values))
    if isinstance(value, Mapping):
        return (_MAP_TAG, tuple(_plain(k) for k in value), tuple(_plain(v) for v in value.values()))
    raise ValueError(f"not a frozen JSON value: {kind.__name__}")


def _plain_metadata(node: Node, seen: dict[int, Any]) -> Any:
    # Half a big session's nodes share one metadata object (frozen._freeze_metadata): once each.
    meta = node.metadata
    hit = seen.get(id(meta))
    if hit is None:
        hit = seen[id(meta)] = _plain(meta)
    return hit


def table_key(session: Session, workspace_id: str, counter: Any) -> str | None:
    """The digest of everything the overview reads, or ``None`` when it cannot be named exactly."""
    ctag = counter_tag(counter.counter if isinstance(counter, CachedCounter) else counter)
    if ctag is None:
        return None
    try:
        seen: dict[int, Any] = {}
        nodes = tuple((n.id, n.seq, n.role, n.name, _plain(n.input), _plain(n.output), n.caller, n.predecessor,
                       n.reads, _plain_metadata(n, seen), n.created_at, n.file) for n in session.nodes.values())
        whole = (session.id, str(session.dir), session.rel, _plain(session.meta), session.order, session.head_id,
                 _plain(session.branches_meta), session.merged_heads, session.in_registry,
                 _plain(session.registry_entry), session.updated_at, session.commit_parent_heads,
                 tuple(tuple(u.__getattribute__(f) for f in u.__slots__) for u in session.unreadable))
    except ValueError:  # a value no parsed JSON holds
        return None
    return digest_key(_code_tag(), (nodes, whole, workspace_id, ctag))


def _encode(key: str, ov: SessionOverview) -> bytes:
    return envelope.pack(KIND, (FORMAT, key, dict(ov.kinds), tuple(ov.foreign_ids), dict(ov.best_tip),
                                dict(ov.tip_of), dict(ov.archived), ov.pending_turns, ov.pending_tokens, ov.stranded,
                                ov.foreign, ov.runtime_only_tips, ov.walk_total), VERSION)


def _decode(key: str, data: bytes, session: Session) -> SessionOverview | None:
    try:
        (fmt, got, kinds, foreign_ids, best_tip, tip_of, archived, pending_turns, pending_tokens, stranded, foreign,
         runtime_only, walk_total) = envelope.unpack(KIND, data, VERSION)
    except (ValueError, TypeError):  # None, or a value of another shape: not an entry this code wrote
        return None
    if fmt != FORMAT or got != key:
        return None
    rows = list_branches(session)
    try:
        return SessionOverview(
            session=session, rows=rows, tips=tips_of(session, rows), forced_order=forced_pass_branch_order(session, rows),
            kinds=kinds, foreign_ids=frozenset(foreign_ids), best_tip=best_tip, tip_of=tip_of, archived=archived,
            pending_turns=pending_turns, pending_tokens=pending_tokens, stranded=stranded, foreign=foreign,
            runtime_only_tips=tuple(runtime_only), walk_total=walk_total,
        )
    except TypeError:  # the wrong shape: not an entry this code wrote
        return None


def _path(where: Path, key: str) -> Path:
    return where / f"{key}{_SUFFIX}"


def cached_overview(session: Session, workspace_id: str, counter: Any = None,
                    where: Path | None = None) -> SessionOverview | None:
    """``session_overview(session, workspace_id, counter)``, read from the table when it
    holds that exact session's overview."""
    cc = cached_counter(counter)
    key = table_key(session, workspace_id, cc) if len(session.nodes) >= MIN_NODES else None
    if key is None:
        return session_overview(session, workspace_id, cc)
    folder = where if where is not None else table_dir()
    data = read_entry(_path(folder, key))
    hit = _decode(key, data, session) if data is not None else None
    if hit is not None:
        return hit
    ov = session_overview(session, workspace_id, cc)
    if ov is not None:
        write_entry(folder, _path(folder, key).name, _encode(key, ov))
    return ov


__all__ = ["FORMAT", "MIN_NODES", "cached_overview", "table_dir", "table_key"]
