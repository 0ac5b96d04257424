"""The header's insight figures kept across processes, under what they are computed from.

Why: the figures (every record's evidence, the alternatives count) read every cited session's
shape and walk 20 000 records at the benchmark's scale 1, 80 000 at scale 4: most of an app
start after the model, on every start, though an owner's memory and sessions mostly did not
change since the last one.

What they depend on, all in the key: the memory revision (the content hash of every topic and
archive file, memory spec §2.6), every session's :func:`~memory_tui.sessions.store.session_content_key`
as the session list took it (the stat stamp of each node, meta and commit file and of the
registry entry), the state's path, and the code that computes them. A figure is kept only when
every part of that is known: no revision, a session without a key (racy or unreadable), or a
snapshot that is not the session list's, and the figures are computed and not kept.

Where: ``<user cache>/insights/<state>.figures``, one indexed envelope (kind ``insight-figures``)
per state holding the last :data:`KEEP` figures, newest first, each its own part with its own
crc: an owner who edits a topic and puts it back, or OpenProgram writing and the owner reverting,
finds the figures of either text, and a start reads and decodes only the figures of its key. A
damaged part, another version's, state's or code's is a miss.
``MEMORY_TUI_TEST_DERIVE=full`` computes every time; ``check`` does both and compares.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from memory_tui.core import switches as switches_mod
from memory_tui.core.cache import envelope
from memory_tui.core.cache.registry import keeps
from memory_tui.core.fsutil import cache_name_of, user_cache_dir

from . import insights as computed
from .insights import EvidenceRowVM, InsightCountsVM, InsightsVM

if TYPE_CHECKING:  # pragma: no cover
    from .data import WorkspaceModel

KIND = "insight-figures"
VERSION = 2
KEEP = 3
FORMAT = "memory-tui/insight-figures/1"
_ROW_FIELDS = tuple(f.name for f in fields(EvidenceRowVM))
_COUNT_FIELDS = tuple(f.name for f in fields(InsightCountsVM))
_TAG: list[str] = keeps([])


def code_tag() -> str:
    """The code the figures come from: the insights engine, the session reader, the topic and
    source parsers and this adapter."""
    if not _TAG:
        import memory_tui.core.format as fmt
        import memory_tui.insights as engine
        import memory_tui.sessions as sessions
        from memory_tui.core.cache.codetag import code_tag as tag_of, package_tag

        _TAG.append(package_tag(engine, salt=FORMAT) + package_tag(sessions, salt=FORMAT, length=16)
                    + package_tag(fmt, salt=FORMAT, length=16)
                    + tag_of("memory_tui.tui.model.insights", __name__, salt=FORMAT, length=16))
    return _TAG[0]


def key_of(model: WorkspaceModel) -> str | None:
    """The digest of everything ``model``'s figures are computed from, or ``None`` when some
    of it is not known (then nothing is kept)."""
    from memory_tui.sessions.ondemand import SummarySnapshot

    snapshot = model.session_snapshot
    if not model.revision or not isinstance(snapshot, SummarySnapshot):
        return None
    keys = snapshot.keys
    if set(keys) != set(snapshot.sessions) or any(k is None for k in keys.values()):
        return None
    parts = [FORMAT, code_tag(), str(Path(snapshot.state_dir).absolute()), model.revision,
             snapshot.registry_ok, sorted(keys.items())]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _path(model: WorkspaceModel) -> Path:
    return user_cache_dir("insights") / f"{cache_name_of(model.state_dir)}.figures"


def _pack(vm: InsightsVM) -> tuple:
    rows = tuple(tuple(getattr(r, f) for f in _ROW_FIELDS) for r in vm.rows)
    counts = tuple(getattr(vm.counts, f) for f in _COUNT_FIELDS)
    lists = tuple(sorted((name, tuple(sorted(ids))) for name, ids in vm.lists.items()))
    return vm.revision, rows, counts, lists


def _unpack(value: Any) -> InsightsVM | None:
    try:
        revision, rows, counts, lists = value
        vms = tuple(EvidenceRowVM(*row) for row in rows)
        return InsightsVM(revision, vms, InsightCountsVM(*counts), {name: frozenset(ids) for name, ids in lists},
                          {r.memory_id: r for r in vms})
    except (TypeError, ValueError):  # not figures this code wrote
        return None


def _is_head(head: Any) -> bool:
    return type(head) is tuple and all(type(k) is str for k in head)


def _keep(path: Path, key: str, vm: InsightsVM, older: tuple[str, ...]) -> None:
    """Write ``vm`` under ``key`` first, then up to ``KEEP - 1`` of the figures kept before it
    (their parts copied as they are: intact ones only, never decoded)."""
    others = [k for k in older if k != key][:KEEP - 1]
    found = envelope.read_indexed(path, KIND, VERSION, names=others, accept=_is_head) if others else None
    parts = {key: envelope.packed_value(_pack(vm))}
    parts.update(found[1] if found is not None else {})
    envelope.write_indexed(path, KIND, tuple(parts), parts, VERSION, make_folder=True)


def load_insights(model: WorkspaceModel) -> InsightsVM | None:
    """:func:`.insights.load_insights`, or the figures kept under ``model``'s key."""
    return insights_of(model, computed.load_insights)


def insights_of(model: WorkspaceModel, compute: Callable[[WorkspaceModel], InsightsVM | None]) -> InsightsVM | None:
    """``compute(model)``, or the figures kept under ``model``'s key."""
    key = key_of(model)
    if key is None:
        return compute(model)
    path = _path(model)

    def kept() -> InsightsVM | None:
        found = envelope.read_indexed(path, KIND, VERSION, names=(key,), accept=_is_head)
        if found is not None and key in found[1]:
            hit = _unpack(envelope.loads_part(found[1][key]))
            if hit is not None:
                return hit
        vm = compute(model)
        if vm is not None:
            _keep(path, key, vm, found[0] if found is not None else ())
        return vm

    return switches_mod.current().choose("insight figures", kept, lambda: compute(model))


__all__ = ["FORMAT", "KEEP", "KIND", "VERSION", "code_tag", "insights_of", "key_of", "load_insights"]
