"""Finished layouts of big sessions kept across processes (the Sessions view's open).

Laying out a 10 000-node session is one pure-Python sweep over every row (a few hundred ms),
while its result, written as plain tuples, reads back in a few tens. The layout is a pure
function of its input nodes and options, so an entry is keyed by a SHA-256 of exactly those
(every :class:`~.graph.LayoutNode` field, in order, with its type: ``marshal`` keeps
``True`` and ``1`` apart) and of this code: a hit is the layout :func:`.graph.layout` would
compute, never one of an older session state or an older layout algorithm.

Only layouts worth it are kept: at least :data:`MIN_NODES` nodes, and no group expanded by
hand (the options a session opens with; every expand would otherwise write a new entry).
Entries live in memory-tui's cache directory (``layouts/`` under
:func:`memory_tui.core.fsutil.user_cache_dir`), never in the state dir;
at most :data:`KEEP` of them, the least recently used go first. Anything unreadable, of
another format or key, or of the wrong shape is a miss; losing the folder only costs time.
"""

from __future__ import annotations

import hashlib
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable, Sequence

from memory_tui.core.cache import codec, envelope
from memory_tui.core.cache.codetag import code_tag
from memory_tui.core.fsutil import replace_cache_file, user_cache_dir

from . import graph as G
from memory_tui.core.cache.registry import keeps

FORMAT = "memory-tui/layout-table/2"  # 2: an envelope of the cache kit
KIND = "layout"
VERSION = 2
MIN_NODES = 2000  # below this a layout takes a few ms: not worth a file
KEEP = 24  # entries kept (about 1 MB per 10 000 nodes)
# The key's bytes: marshal's version 2 writes neither back-references nor whether a string
# was interned (version 3 on writes both, and both depend on how the caller built the data),
# so equal data written twice gives equal bytes.
_KEY_MARSHAL = 2
_SUFFIX = ".layout"


def table_dir() -> Path:
    return user_cache_dir("layouts")


@keeps
@lru_cache(maxsize=1)
def _code_tag() -> bytes:
    """The layout's code and this table's (``cache.code_tag``: an entry of other code is a miss)."""
    return code_tag(G, sys.modules[__name__], salt=FORMAT).encode()


def persistable(nodes: Sequence[G.LayoutNode], opts: G.LayoutOptions) -> bool:
    return len(nodes) >= MIN_NODES and not opts.expanded


def table_key(nodes: Sequence[G.LayoutNode], opts: G.LayoutOptions) -> str | None:
    """The digest of everything :func:`.graph.layout` reads, or ``None`` when a field holds
    something ``marshal`` cannot write exactly (then the layout is not kept)."""
    plain = tuple((n.id, n.parents, n.seq, n.state, n.markers, n.role, n.text, n.note, n.tool) for n in nodes)
    options = (opts.reverse, opts.collapse, tuple(sorted(opts.expanded)), opts.linear_min, opts.linear_keep,
               opts.tool_min)
    return digest_key(_code_tag(), (plain, options))


def digest_key(code: bytes, plain: object) -> str | None:
    """SHA-256 of ``code`` and ``plain`` as ``marshal`` version 2 writes it, or ``None`` when it
    cannot write it exactly (a str subclass, say: equal to a str, but not what marshal writes)."""
    try:
        data = codec.dumps(plain, _KEY_MARSHAL)
    except ValueError:
        return None
    h = hashlib.sha256(code)
    h.update(data)
    return h.hexdigest()


def _path(where: Path, key: str) -> Path:
    return where / f"{key}{_SUFFIX}"


def _encode(key: str, lay: G.Layout) -> bytes:
    rows = tuple((r.kind, r.id, r.lane, r.cells, r.hgap, r.above, r.below, r.members, r.text) for r in lay.rows)
    # The edges too: deriving them again from the nodes costs more than reading them.
    return envelope.pack(KIND, (FORMAT, key, rows, dict(lay.collapsible), lay.dropped_edges, lay.lanes,
                                dict(lay.parents), dict(lay.children)), VERSION)


def _decode(key: str, data: bytes, nodes: Sequence[G.LayoutNode], opts: G.LayoutOptions) -> G.Layout | None:
    try:
        fmt, got, rows, collapsible, dropped, lanes, parents, children = envelope.unpack(KIND, data, VERSION)
    except (ValueError, TypeError):  # None, or a value of another shape: not an entry this code wrote
        return None
    if fmt != FORMAT or got != key:
        return None
    by_id: dict[str, G.LayoutNode] = {}
    for n in nodes:
        by_id.setdefault(n.id, n)  # as the layout resolves a duplicate id: its first occurrence
    Row = G.Row
    out = []
    row_of: dict[str, int] = {}
    get = by_id.get
    try:
        for i, (kind, rid, lane, cells, hgap, above, below, members, text) in enumerate(rows):
            node = None
            if kind == "node":
                node = get(rid)
                if node is None:
                    return None
            out.append(Row(kind, rid, lane, cells, hgap, above, below, node, members, text))
            for m in members:
                row_of[m] = i
    except (TypeError, ValueError):  # the wrong shape: not an entry this code wrote
        return None
    return G.Layout(
        rows=tuple(out),
        nodes=by_id,
        row_of=row_of,
        parents=parents,
        collapsible=collapsible,
        lanes=lanes,
        options=opts,
        dropped_edges=tuple(dropped),
        children=children,
    )


def read(key: str, nodes: Sequence[G.LayoutNode], opts: G.LayoutOptions, where: Path | None = None) -> G.Layout | None:
    data = read_entry(_path(where if where is not None else table_dir(), key))
    return None if data is None else _decode(key, data, nodes, opts)


def write(key: str, lay: G.Layout, where: Path | None = None) -> None:
    write_entry(where if where is not None else table_dir(), _path(Path(), key).name, _encode(key, lay))


# The file side, shared with ``overview_table``: one file per entry, the least recently read
# pruned first, every failure a miss (a cache that cannot be read or written only costs time).
def read_entry(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        os.utime(path)  # recently used: pruned last
    except OSError:
        pass
    return data


def write_entry(folder: Path, name: str, data: bytes) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        replace_cache_file(folder / name, data)
    except OSError:
        return
    _prune(folder, Path(name).suffix)


def _prune(folder: Path, suffix: str) -> None:
    try:
        entries = [(e.stat().st_mtime_ns, e.path) for e in os.scandir(folder) if e.name.endswith(suffix)]
    except OSError:
        return
    if len(entries) <= KEEP:
        return
    entries.sort(reverse=True)
    for _mtime, path in entries[KEEP:]:
        try:
            os.unlink(path)
        except OSError:
            pass


def layout(nodes: Sequence[G.LayoutNode], opts: G.LayoutOptions,
           compute: Callable[[Sequence[G.LayoutNode], G.LayoutOptions], G.Layout] = G.layout) -> G.Layout:
    """``compute(nodes, opts)``, read from the table when it has that exact input's layout."""
    key = table_key(nodes, opts) if persistable(nodes, opts) else None
    if key is None:
        return compute(nodes, opts)
    hit = read(key, nodes, opts)
    if hit is not None:
        return hit
    lay = compute(nodes, opts)
    write(key, lay)
    return lay


def lookup(nodes: Sequence[G.LayoutNode], opts: G.LayoutOptions) -> G.Layout | None:
    """The table's layout of exactly this input, or ``None`` (nothing is computed)."""
    key = table_key(nodes, opts) if persistable(nodes, opts) else None
    return read(key, nodes, opts) if key is not None else None


__all__ = ["FORMAT", "KEEP", "digest_key", "MIN_NODES", "layout", "lookup", "persistable", "read", "read_entry", "table_dir", "table_key", "write",
           "write_entry"]
