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

import bisect
import json
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .views import (
    DerivedViews,
    LinkFor,
    TimelineRow,
    build_views,
    core_root_text,
    recent_event,
    relation_parts,
    render_recent,
    split_core_chunks,
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


# one encoder (json.dumps builds one per call); the bytes are json.dumps(..., ensure_ascii=False)'s
_encode = json.JSONEncoder(ensure_ascii=False).encode


def _core_pending(master_text: str, trusted_ids: Iterable[str] | None, tree: Any) -> frozenset[str]:
    """``views.pending_block_ids`` restricted to the blocks ``render_core`` asks about (those of
    the master's chunks): looked up by id instead of testing every unit of the tree. Exact
    because the ids are unique here (a tree that dropped a duplicate takes the full path)."""
    if trusted_ids is None:
        return frozenset()
    trusted = trusted_ids if isinstance(trusted_ids, (set, frozenset)) else frozenset(trusted_ids)
    out = set()
    for _chunk, block_id in split_core_chunks(core_root_text(master_text)):
        unit = tree.by_id(block_id) if block_id is not None else None
        if unit is not None and any(ref not in trusted for ref in (getattr(unit, "source_refs", ()) or ())):
            out.add(block_id)
    return frozenset(out)


class ViewCache:
    """Per memory root, in-process (use :func:`view_cache_for`); thread-safe by one lock."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._parts: dict[str, tuple[Any, TopicPart]] = {}  # topic path -> (Topic, its part)
        # the running aggregates of ``combine`` (what the last combined parts add up to)
        self._combined: dict[str, TopicPart] | None = None  # topic path -> its part
        self._days: dict[str, dict[str, tuple[TimelineRow, ...]]] = {}  # when -> topic path -> rows
        self._day_text: dict[str, str] = {}  # when -> the day file's text
        self._timeline: dict[str, str] | None = None
        self._outbound: dict[str, str] = {}  # memory_id -> its outbound fragment
        self._out_ids: list[str] = []
        self._back: dict[str, set[str]] = {}  # target id -> ids linking to it
        self._back_text: str | None = None
        self._relations: str | None = None
        self._recent_order: Mapping[str, int] | None = None  # the creation order ``recent`` last saw
        self._recent_desc: list[str] = []
        self._covered: dict[str, Any] = {}  # topic path -> the parse seen covered by that order


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

    def recent(self, tree: Any, topics: tuple, units: tuple, creation_order: Mapping[str, int] | None, limit: int) -> str:
        """``recent_events.jsonl`` (== ``views.render_recent``) without ranking every unit when the
        creation order already holds every id of the tree (a transaction grows it first):
        then the newest units are the first ids of that order, newest first, that the tree
        still has. Kept per creation-order object: its ids by falling order, and which topic
        parses were seen to be covered by it. Equal orders (a hand-edited runtime.json) or an
        uncovered id take the full ranking, whose position tie-break needs every unit."""
        if limit <= 0 or not creation_order:
            return render_recent(units, creation_order, limit)
        with self.lock:
            if self._recent_order is not creation_order:
                self._recent_order = creation_order
                self._recent_desc = sorted(creation_order, key=creation_order.__getitem__, reverse=True)
                self._covered = {}
            covered = self._covered
            for topic in topics:
                if covered.get(topic.path) is not topic:
                    if not all(u.memory_id in creation_order for u in topic.units):
                        return render_recent(units, creation_order, limit)
                    covered[topic.path] = topic
            if len(covered) != len(topics):
                self._covered = covered = {t.path: covered[t.path] for t in topics}
            chosen: list[Any] = []
            last = None
            for mid in self._recent_desc:
                unit = tree.by_id(mid)
                if unit is None:
                    continue  # an id the tree no longer has
                value = creation_order[mid]
                if value == last:
                    return render_recent(units, creation_order, limit)  # a tie: ranked by position
                if len(chosen) == limit:
                    break
                chosen.append(unit)
                last = value
        chosen.reverse()
        return "".join(_encode(recent_event(u, creation_order[u.memory_id])) + "\n" for u in chosen)

    def combine(self, topics: tuple, parts: list[TopicPart]) -> tuple[dict[str, str], str]:
        """``(timeline files, relations.json text)`` of ``parts`` (one per topic, tree order).

        Running aggregates are kept between calls and only the parts that are not the very
        same objects as last time are taken out and put back: the rows of each timeline day
        per topic, every outbound fragment by id, the backlinks by target. A day file is
        re-rendered only when one of its topics' parts changed, ``relations.json`` only when
        a fragment did. The orderings are ``views.build_views``'s: rows by (sort_ref, id)
        with ties in tree order, fragments by id, backlinks by target."""
        new = {t.path: part for t, part in zip(topics, parts)}
        prev = self._combined
        if prev is None:
            self._days, self._day_text, self._outbound, self._out_ids, self._back = {}, {}, {}, [], {}
            prev = {}
        days, outbound, back = self._days, self._outbound, self._back
        dirty: set[str] = set()
        out_dirty = back_dirty = False
        removed: dict[str, str | None] = {}  # ids taken out (and not put back with the same fragment)
        added: list[str] = []
        replaced: dict[str, dict[str, tuple[TimelineRow, ...]]] = {}  # path -> its old rows by day
        for path in [p for p in prev if p not in new or new[p] is not prev[p]]:
            old = prev[path]
            old_days = replaced[path] = {}
            for row in old.rows:
                bucket = days.get(row.when)
                if bucket is not None and row.when not in old_days:
                    old_days[row.when] = bucket.pop(path, ())
            for mid, frag in old.outbound:
                removed[mid] = outbound.pop(mid, None)
            for target, mid in old.backlinks:
                linked = back.get(target)
                if linked is not None:
                    linked.discard(mid)
                    if not linked:
                        del back[target]
                back_dirty = True
        for path, part in new.items():
            if prev.get(path) is part:
                continue
            grouped: dict[str, list[TimelineRow]] = {}
            for row in part.rows:
                grouped.setdefault(row.when, []).append(row)
            old_days = replaced.get(path, {})
            for when, rows in grouped.items():
                rows = days.setdefault(when, {})[path] = tuple(rows)
                if old_days.pop(when, None) != rows:  # equal rows (a reword elsewhere in the topic) render the same
                    dirty.add(when)
            dirty.update(old_days)  # days this topic no longer has rows in
            for mid, frag in part.outbound:
                outbound[mid] = frag
                if removed.pop(mid, None) != frag:
                    added.append(mid)
                    out_dirty = True
            for target, mid in part.backlinks:
                back.setdefault(target, set()).add(mid)
                back_dirty = True
        for path, old_days in replaced.items():
            if path not in new:  # a topic that is gone
                dirty.update(old_days)
        self._combined = new
        if removed:
            out_dirty = True
        order = {t.path: i for i, t in enumerate(topics)}
        for when in dirty:
            bucket = days.get(when)
            if not bucket:
                days.pop(when, None)
                self._day_text.pop(when, None)
                continue
            rows = [row for path in sorted(bucket, key=order.__getitem__) for row in bucket[path]]
            self._day_text[when] = timeline_file_text(when, rows)
        if dirty or self._timeline is None:
            self._timeline = dict(sorted((timeline_path(w), text) for w, text in self._day_text.items()))
        if self._relations is None:
            self._out_ids = sorted(outbound)
        elif out_dirty:
            ids = self._out_ids
            for mid in removed:  # gone for good (not put back by any changed part)
                at = bisect.bisect_left(ids, mid)
                if at < len(ids) and ids[at] == mid:
                    del ids[at]
            for mid in added:
                at = bisect.bisect_left(ids, mid)
                if at == len(ids) or ids[at] != mid:
                    ids.insert(at, mid)
        if back_dirty or self._back_text is None:
            self._back_text = ", ".join(f"{_encode(k)}: {_encode(sorted(v))}" for k, v in sorted(back.items()))
        if out_dirty or back_dirty or self._relations is None:
            out_text = ", ".join(map(outbound.__getitem__, self._out_ids))
            self._relations = '{"backlinks": {' + self._back_text + '}, "outbound": {' + out_text + "}}\n"
        return dict(self._timeline), self._relations

    def build(
        self,
        tree: Any,
        *,
        lookup: Callable[[Any], TopicPart | None] | None = None,
        store: Callable[[Any, TopicPart], None] | None = None,
        parts_out: dict[str, TopicPart] | None = None,
        **options: Any,
    ) -> DerivedViews:
        """``views.build_views(tree, **options)``, byte for byte, from per-topic parts.

        ``parts_out`` (a dict) receives topic path -> its part, in tree order, when the views
        came from parts; it stays empty on the full path (then the parts' rows are not the
        tree's rows: a duplicate id was dropped, or ``full`` mode)."""
        how = mode()
        topics = tuple(tree.topics)
        if how == "full" or sum(len(t.units) for t in topics) != len(tree.units):
            return build_views(tree, **options)
        link_for = options.get("link_for")
        with self.lock:
            parts = [self.part(t, link_for, lookup, store) for t in topics]
            if parts_out is not None:
                parts_out.update(zip((t.path for t in topics), parts))
            self._parts = {t.path: self._parts[t.path] for t in topics}  # bounded by the live tree
            timeline, relations = self.combine(topics, parts)
        recent = self.recent(tree, topics, tuple(tree.units), options.get("creation_order"), options.get("recent_limit", 50))
        master = options.get("master_text")
        pending = _core_pending(master, options.get("trusted_ids"), tree) if master is not None else None
        views = build_views(tree, timeline=timeline, relations=relations, recent=recent, core_pending=pending, **options)
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
