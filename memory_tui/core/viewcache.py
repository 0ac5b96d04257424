"""Derived views built from per-topic contributions (issue 12: cost that grows with the change).

``views.build_views`` derives ``timeline/``, ``recent_events.jsonl``, ``relations.json`` and
``core.md`` from every unit of the tree on every transaction. Here each topic file contributes
a :class:`TopicPart` — its timeline rows and its ``relations.json`` fragments — computed once
per parsed topic and reused while that topic is the same parse (the parse caches already
reuse a :class:`~memory_tui.core.topics.Topic` only for the same bytes and the same archive
signature, which is everything a row depends on: the unit, and ``link_for``'s answer for the
sources its links name, which lives in the archives of the topic's deps). The parts are
combined at the end with the same orderings ``build_views`` uses, so the bytes are the same;
timeline files whose rows are the very same objects as last time keep last time's text.

Exactness is by construction *and* checked: ``MEMORY_TUI_VIEWS=full`` derives everything with
``build_views`` (the full-rebuild mode), ``MEMORY_TUI_VIEWS=check`` derives both ways and
raises on the first differing file; the property tests run random edit sequences both ways.
A tree whose units are not the plain concatenation of its topics' units (a duplicate id was
dropped) always takes the full path.

Parts persist across processes in the parse cache (``parsecache``, kind ``views``), keyed by
the topic path, the sha256 of its bytes and its deps signature, so a fresh process does not
re-render 20 000 rows for a one-file edit.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .views import (
    DerivedViews,
    LinkFor,
    TimelineRow,
    build_views,
    join_relations,
    relation_parts,
    rows_by_time,
    timeline_file_text,
    timeline_path,
    timeline_rows,
)

MODE_ENV = "MEMORY_TUI_VIEWS"  # "" / "incremental" (default), "full", "check"


def mode() -> str:
    value = (os.environ.get(MODE_ENV) or "incremental").strip().lower()
    if value not in ("incremental", "full", "check"):
        raise ValueError(f"{MODE_ENV} must be incremental, full or check, not {value!r}")
    return value


class ViewsMismatch(AssertionError):
    """``check`` mode: the incremental views differ from the full rebuild."""


@dataclass(frozen=True)
class TopicPart:
    """What one parsed topic contributes to the views (plain data: it is persisted)."""

    rows: tuple[TimelineRow, ...]
    outbound: tuple[tuple[str, str], ...]  # (memory_id, its JSON '"id": [targets]' fragment)
    backlinks: tuple[tuple[str, str], ...]  # (target id, memory_id linking to it)


def topic_part(topic: Any, link_for: LinkFor | None) -> TopicPart:
    outbound, backlinks = relation_parts(topic.units)
    return TopicPart(tuple(timeline_rows(topic.units, link_for=link_for)), outbound, backlinks)


class ViewCache:
    """Per memory root, in-process (use :func:`view_cache_for`); thread-safe by one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._parts: dict[str, tuple[Any, TopicPart]] = {}  # topic path -> (Topic, its part)
        self._files: dict[str, tuple[tuple[TimelineRow, ...], str]] = {}  # when -> (rows, text)

    def part(self, topic: Any, link_for: LinkFor | None, lookup: Callable[[Any], TopicPart | None] | None = None,
             store: Callable[[Any, TopicPart], None] | None = None) -> TopicPart:
        hit = self._parts.get(topic.path)
        if hit is not None and hit[0] is topic:
            return hit[1]
        made = lookup(topic) if lookup is not None else None
        if made is None:
            made = topic_part(topic, link_for)
            if store is not None:
                store(topic, made)
        self._parts[topic.path] = (topic, made)
        return made

    def timeline(self, parts: Iterable[TopicPart]) -> dict[str, str]:
        by_when = rows_by_time(row for part in parts for row in part.rows)
        out: dict[str, str] = {}
        files: dict[str, tuple[tuple[TimelineRow, ...], str]] = {}
        for when in sorted(by_when):
            rows = tuple(by_when[when])
            old = self._files.get(when)
            if old is not None and len(old[0]) == len(rows) and all(a is b for a, b in zip(old[0], rows)):
                text = old[1]
            else:
                text = timeline_file_text(when, rows)
            files[when] = (rows, text)
            out[timeline_path(when)] = text
        self._files = files
        return dict(sorted(out.items()))

    def build(
        self,
        tree: Any,
        *,
        lookup: Callable[[Any], TopicPart | None] | None = None,
        store: Callable[[Any, TopicPart], None] | None = None,
        **options: Any,
    ) -> DerivedViews:
        """``views.build_views(tree, **options)``, byte for byte, from per-topic parts."""
        how = mode()
        topics = tuple(tree.topics)
        if how == "full" or sum(len(t.units) for t in topics) != len(tree.units):
            return build_views(tree, **options)
        link_for = options.get("link_for")
        with self.lock:
            parts = [self.part(t, link_for, lookup, store) for t in topics]
            self._parts = {t.path: self._parts[t.path] for t in topics}  # bounded by the live tree
            timeline = self.timeline(parts)
        relations = join_relations((o for p in parts for o in p.outbound), (b for p in parts for b in p.backlinks))
        views = build_views(tree, timeline=timeline, relations=relations, **options)
        if how == "check":
            full = build_views(tree, **options)
            got, want = views.files, full.files
            for rel in sorted(set(got) | set(want)):
                if got.get(rel) != want.get(rel):
                    raise ViewsMismatch(f"incremental views differ from the full rebuild: {rel}")
        return views


_CACHES: dict[str, ViewCache] = {}
_CACHES_LOCK = threading.Lock()


def view_cache_for(root: Any) -> ViewCache:
    key = os.path.realpath(str(root))
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = ViewCache()
        return cache


def forget_in_process() -> None:
    with _CACHES_LOCK:
        _CACHES.clear()


__all__ = ["MODE_ENV", "TopicPart", "ViewCache", "ViewsMismatch", "forget_in_process", "mode", "topic_part",
           "view_cache_for"]
