"""Derived views built from per-topic contributions (cost that grows with the change).

``views.build_views`` derives ``timeline/``, ``recent_events.jsonl``, ``relations.json`` and
``core.md`` from every unit of the tree on every transaction. Here each topic file contributes
a :class:`TopicPart` — its timeline rows and its ``relations.json`` fragments — computed once
per parsed topic and reused while that topic is the same parse (the parse caches already
reuse a :class:`~memory_tui.core.format.topics.Topic` only for the same bytes and the same archive
signature, which is everything a row depends on: the unit, and ``link_for``'s answer for the
sources its links name, which lives in the archives of the topic's deps). The parts are
combined at the end with the same orderings ``build_views`` uses, so the bytes are the same;
timeline files whose rows are the very same objects as last time keep last time's text.

Exactness is by construction *and* checked: ``MEMORY_TUI_TEST_DERIVE=full`` derives everything with
``build_views`` (the full-rebuild mode), ``MEMORY_TUI_TEST_DERIVE=check`` derives both ways and
raises on the first differing file; the property tests run random edit sequences both ways.
A tree whose units are not the plain concatenation of its topics' units (a duplicate id was
dropped) always takes the full path.

Parts persist across processes in the parse cache (``parsecache``, kind ``views``), keyed by
the topic path, the sha256 of its bytes and its deps signature, so a fresh process does not
re-render 20 000 rows for a one-file edit.

**The combined views persist too** — a fresh process used to load all
every topic's part and combine them from nothing (a sixth of a fresh ``apply``; see
``benchmarks/README.md``) to change one row. When the caller can key its topics (the transaction path: ``key_of`` and
``stored_part``), the result of the last build is kept in ``<M>/<runtime-dir>/memory-tui-views/``
(:class:`Snapshot`): the parts' keys in tree order, each timeline day's text with the
(topic, sort_ref, id, line length) of its rows in file order (in segments, so that a reword
writes the segment it changed, not the day), and the ``relations.json`` text.
It is a pure function of those keys: a part is a function of its key (what the parse cache
already relies on), and the combination of parts is a function of the parts. A build whose
topics differ from the snapshot's in a few keys takes only those topics' old parts (from the
parse cache, by the snapshot's key) and new parts, re-renders the days whose rows of those
topics differ, and re-derives ``relations.json`` (from its own JSON) only when their relation
fragments differ. Rows of one id belong to one topic (a tree that dropped a duplicate id takes
the full path), so the kept rows of a day keep their file order and the rows put back sort in
exactly where ``timeline_file_text`` sorts them. Anything missing, damaged (crc32), foreign
(another code tag) or too different is a miss: every part is combined as before and the
snapshot is written whole. ``check`` mode compares every build, from a snapshot or not, with
the full rebuild; ``full`` mode never reads or writes it.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
from ..cache import codec
import os
import threading
from dataclasses import dataclass
from itertools import chain, compress
from operator import attrgetter, is_not
from typing import Any, Callable, Iterable, Mapping

from ..fsutil import replace_cache_file
from ..cache import envelope
from ..format.views import (
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
from ..cache.registry import keeps
from ..switches import Switches


class ViewsMismatch(AssertionError):
    """``check`` mode: the incremental views differ from the full rebuild."""


@dataclass(frozen=True)
class TopicPart:
    """What one parsed topic contributes to the views (plain data: it is persisted)."""

    rows: tuple[TimelineRow, ...]
    outbound: tuple[tuple[str, str], ...]  # (memory_id, its JSON '"id": [targets]' fragment)
    backlinks: tuple[tuple[str, str], ...]  # (target id, memory_id linking to it)


_ROW_FIELDS = attrgetter("when", "memory_id", "topic_path", "text", "sort_ref", "line")


def part_plain(part: TopicPart) -> tuple:
    """``part`` as plain tuples (how the parse cache keeps it): its rows' fields, in order,
    and its relation fragments."""
    return (tuple(map(_ROW_FIELDS, part.rows)), part.outbound, part.backlinks)


def part_from_plain(value: Any) -> TopicPart | None:
    """The part ``part_plain`` made ``value`` from; ``None`` for anything of another shape."""
    if not (type(value) is tuple and len(value) == 3 and all(type(v) is tuple for v in value)):
        return None
    rows, outbound, backlinks = value
    if not all(type(r) is tuple and len(r) == 6 and all(type(f) is str for f in r) for r in rows):
        return None
    if not all(type(p) is tuple and len(p) == 2 and type(p[0]) is str and type(p[1]) is str
               for p in chain(outbound, backlinks)):
        return None
    return TopicPart(tuple(TimelineRow(*r) for r in rows), outbound, backlinks)


def stored_parts(store: Any, key_of: Callable[[Any], tuple | None]
                 ) -> tuple[Callable[[Any], TopicPart | None], Callable[[Any, TopicPart], None]]:
    """``(lookup, remember)`` for :meth:`ViewCache.build`: each topic's part kept in the parse
    cache ``store`` (its ``derived("views")``) under ``key_of(topic)``, the key of everything the
    part depends on (the topic's bytes and its deps' signature), or none when it has no key."""

    def lookup(topic: Any) -> TopicPart | None:
        key = key_of(topic)
        return part_from_plain(store.derived("views", topic.path, key)) if key is not None else None

    def remember(topic: Any, part: TopicPart) -> None:
        key = key_of(topic)
        if key is not None and topic.ok:
            store.put_derived("views", topic.path, key, part_plain(part))

    return lookup, remember


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

    def __init__(self, root: str | None = None) -> None:
        self.root = root  # the memory root whose snapshot this keeps (``view_cache_for``)
        self._snap: Snapshot | None = None  # the last snapshot read or written
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
        self._covered_topics: tuple | None = None  # the last topics seen covered, all of them
        # the last ``_keys``: (its topics, its keys); and what the last call changed of the one
        # before: (the keys it started from, the topics at the positions that differ)
        self._keyed: tuple[tuple, dict[str, tuple]] | None = None
        self._keys_delta: tuple[dict[str, tuple], list] | None = None

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

    def recent(self, tree: Any, topics: tuple, units: tuple | None, creation_order: Mapping[str, int] | None,
               limit: int) -> str:
        """``recent_events.jsonl`` (== ``views.render_recent``) without ranking every unit when the
        creation order already holds every id of the tree (a transaction grows it first):
        then the newest units are the first ids of that order, newest first, that the tree
        still has. Kept per creation-order object: its ids by falling order, and which topic
        parses were seen to be covered by it. Equal orders (a hand-edited runtime.json) or an
        uncovered id take the full ranking, whose position tie-break needs every unit."""
        if units is None:  # the full ranking reads the tree's units; the common path does not
            units = tree
        if limit <= 0 or not creation_order:
            return render_recent(units, creation_order, limit)
        with self.lock:
            if self._recent_order is not creation_order:
                self._recent_order = creation_order
                self._recent_desc = sorted(creation_order, key=creation_order.__getitem__, reverse=True)
                self._covered = {}
                self._covered_topics = None
            covered, seen = self._covered, self._covered_topics
            if seen is not None and len(seen) == len(topics):
                # the parses where the last covered topics had them are covered (an order object is
                # never changed): one C-level identity pass finds the others
                ask = [topics[i] for i in compress(range(len(topics)), map(is_not, topics, seen))]
            else:
                ask = topics
            for topic in ask:
                if covered.get(topic.path) is not topic:
                    if not all(map(creation_order.__contains__, topic.memory_ids)):  # no unit built
                        return render_recent(units, creation_order, limit)
                    covered[topic.path] = topic
            if len(covered) != len(topics):
                self._covered = covered = {t.path: covered[t.path] for t in topics}
            self._covered_topics = topics
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
        key_of: Callable[[Any], tuple | None] | None = None,
        switches: Switches,
        **options: Any,
    ) -> DerivedViews:
        """``views.build_views(tree, **options)``, byte for byte, from per-topic parts.

        ``parts_out`` (a dict) receives topic path -> its part, in tree order, when the views
        came from parts; it stays empty on the full path (then the parts' rows are not the
        tree's rows: a duplicate id was dropped, or ``full`` mode). ``key_of`` (a topic's
        persistent key: a function of everything its part depends on, or ``None``) lets the
        build start from, and update, the persisted snapshot. ``switches``: the caller's test
        switches (``full`` builds from scratch, ``check`` compares with it)."""
        how = switches.derive
        topics = tuple(tree.topics)
        # a duplicate-free tree's units are its topics' units (its ``units`` is then not built)
        if how == "full" or (not getattr(tree, "dupfree", False)
                             and sum(map(len, map(_UNITS, topics))) != len(tree.units)):
            return build_views(tree, **options)
        link_for = options.get("link_for")
        persist = key_of is not None and parts_out is None and self.root is not None
        with self.lock:
            made = self._from_snapshot(topics, key_of, link_for, how == "check") if persist else None
            if made is None:
                parts = [self.part(t, link_for, lookup, store) for t in topics]
                if parts_out is not None:
                    parts_out.update(zip((t.path for t in topics), parts))
                self._parts = {t.path: self._parts[t.path] for t in topics}  # bounded by the live tree
                timeline, relations = self.combine(topics, parts)
                if persist:
                    self._snapshot_combined(topics, key_of)
            else:
                timeline, relations = made
        recent = self.recent(tree, topics, None, options.get("creation_order"), options.get("recent_limit", 50))
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

    # -- the persisted snapshot ---------------------------------------------------------------
    def _keys(self, topics: tuple, key_of: Callable[[Any], tuple | None]) -> dict[str, tuple] | None:
        self._keys_delta = None
        last = self._keyed
        if last is not None and len(last[0]) == len(topics):
            # A key describes the parse it was taken of (the digest of its text and the deps
            # signature it was parsed under; a parse is immutable and a tree holds a parse only
            # while its signature stands), so the topics that are the very parses of the last
            # call keep their keys; one C-level identity pass finds the others.
            before, before_keys = last
            at = list(compress(range(len(topics)), map(is_not, topics, before)))
            if len(at) <= MAX_CHANGED and all(topics[i].path == before[i].path for i in at):
                keys = dict(before_keys)  # the same paths in the same order
                for i in at:
                    t = topics[i]
                    key = key_of(t) if t.ok else None
                    if key is None:
                        self._keyed = None
                        return None
                    keys[t.path] = tuple(key)
                self._keyed = (topics, keys)
                self._keys_delta = (before_keys, [topics[i] for i in at])
                return keys
        keys = {}
        for t in topics:
            key = key_of(t) if t.ok else None  # a part with errors is not stored: it cannot be a base
            if key is None:
                self._keyed = None
                return None
            keys[t.path] = tuple(key)
        self._keyed = (topics, keys)
        return keys

    def _from_snapshot(self, topics: tuple, key_of: Callable[[Any], tuple | None],
                       link_for: LinkFor | None, check: bool) -> tuple[dict[str, str], str] | None:
        """``combine``'s answer from the snapshot and the parts of the topics whose keys moved,
        or ``None`` (no usable snapshot: the caller combines every part)."""
        keys = self._keys(topics, key_of)
        if keys is None:
            return None
        snap = self._snap
        if snap is None:
            snap = self._snap = Snapshot.load(self.root)
            if snap is None:
                return None
        delta = self._keys_delta
        if delta is not None and delta[0] is snap.keys:
            # the snapshot holds the keys of the last call's topics, and these topics differ
            # from those only at the positions ``_keys`` found (the same paths: none gone)
            changed = [t for t in delta[1] if snap.keys.get(t.path) != keys[t.path]]
            gone: list[str] = []
        else:
            changed = [t for t in topics if snap.keys.get(t.path) != keys[t.path]]
            gone = [p for p in snap.keys if p not in keys]
        if check:
            want = [t for t in topics if snap.keys.get(t.path) != keys[t.path]]
            if [t.path for t in changed] != [t.path for t in want] or gone != [p for p in snap.keys if p not in keys]:
                raise ViewsMismatch("incremental snapshot delta differs from comparing every key")
        if len(changed) + len(gone) > MAX_CHANGED:
            return None
        old: dict[str, tuple] = {}
        for path in [t.path for t in changed if t.path in snap.keys] + gone:
            flat = snap.part(self.root, path)
            if flat is None:
                return None
            old[path] = flat
        # rendered here, not looked up: the parse cache's first lookup of a part unpickles all
        # of them, while rendering the few changed topics' rows costs far less
        new = {t.path: _flat(self.part(t, link_for)) for t in changed}  # tree order
        for path in gone:
            self._parts.pop(path, None)
        moved = set(new) | set(gone)

        dirty: set[str] = set()
        for path in moved:
            before, after = _by_day(old.get(path)), _by_day(new.get(path))
            dirty.update(w for w in before.keys() | after.keys() if before.get(w) != after.get(w))
        put_back: dict[str, list[TimelineRow]] = {}
        for flat in new.values():
            for when, sort_ref, mid, line in flat[0]:
                put_back.setdefault(when, []).append(TimelineRow(when, mid, "", "", sort_ref, line))
        texts, segs = dict(snap.texts), dict(snap.segs)
        patches = dict(snap.patches)
        owners = {w: o for w, o in snap.owners.items() if w not in dirty}
        patched: set[str] = set()  # dirty days whose base file stays, the segments spliced in its patch
        for when in dirty:
            if when in texts:
                index = snap.owners_of(when)
                spliced = _splice_day(when, texts[when], segs[when], index, moved, put_back.get(when, ()))
                if spliced is not None:
                    texts[when], segs[when], replaced = spliced
                    owners[when] = (segs[when][1], index)  # the same rows in the same segments
                    patch = {**patches.get(when, {}), **replaced}
                    # a patch over the base on disk while it is the smaller write; else the day whole
                    if when in snap.names and sum(len(t) for t, _m in patch.values()) <= PATCH_SHARE * len(texts[when]):
                        patches[when] = patch
                        patched.add(when)
                    else:
                        patches.pop(when, None)
                    continue
            patches.pop(when, None)
            rows = []
            if when in texts:
                text, at = texts[when], len(when) + 3  # after "# <when>\n"
                for path, sort_ref, mid, n in chain.from_iterable(map(codec.loads, segs[when][1])):
                    if path not in moved:  # this topic's rows are the snapshot's: kept in file order
                        rows.append(TimelineRow(when, mid, path, "", sort_ref, text[at + 1:at + 1 + n]))
                    at += n + 2  # "\n<line>\n"
            for row in put_back.get(when, ()):
                rows.append(row)
            if not rows:
                texts.pop(when, None)
                segs.pop(when, None)
                continue
            ordered = sorted(rows, key=_row_key)
            texts[when] = timeline_file_text(when, ordered)
            segs[when] = _segments(when, ordered, _owner(ordered, new))

        relations = snap.relations
        if any(_relation_of(old.get(p)) != _relation_of(new.get(p)) for p in moved):
            relations = _patch_relations(relations, [old[p] for p in moved if p in old], list(new.values()))
        # kept in memory, written by ``flush`` (after an install: a no-op writes nothing); the
        # next build in this process starts from it either way
        same_paths = not gone and ((delta is not None and delta[0] is snap.keys) or list(keys) == list(snap.keys))
        if same_paths:  # the snapshot's parts are all of paths in ``keys`` (its keys, the same paths)
            part_names = dict(snap.part_names)
            for path in new:
                part_names.pop(path, None)
        else:
            part_names = {p: n for p, n in snap.part_names.items() if p in keys and p not in new}
        made = Snapshot(keys, texts, segs, relations,
                        {w: n for w, n in snap.names.items() if w in texts and (w not in dirty or w in patched)},
                        snap.relations_name if relations is snap.relations else None,
                        part_names,
                        {**{p: f for p, f in snap.flats.items() if p in keys and p not in new}, **new})
        made.patches = patches
        made.patch_names = {w: n for w, n in snap.patch_names.items() if w in texts and w not in dirty}
        made.owners = owners
        if same_paths:
            made.follow(snap, dirty, moved)
        self._snap = made
        return dict(sorted((timeline_path(w), t) for w, t in texts.items())), relations

    def _snapshot_combined(self, topics: tuple, key_of: Callable[[Any], tuple | None]) -> None:
        """Write the snapshot of what ``combine`` just made (every day: a cold start or a miss)."""
        keys = self._keys(topics, key_of)
        if keys is None or self._relations is None or self._combined is None:
            self._snap = None
            return
        order = {t.path: i for i, t in enumerate(topics)}
        segs = {}
        for when, bucket in self._days.items():
            rows = [row for path in sorted(bucket, key=order.__getitem__) for row in bucket[path]]
            ordered = sorted(rows, key=_row_key)
            segs[when] = _segments(when, ordered, [r.topic_path for r in ordered])
        flats = {path: _flat(part) for path, part in self._combined.items()}
        self._snap = Snapshot(keys, dict(self._day_text), segs, self._relations, {}, None, {}, flats)

    def flush(self) -> None:
        """Write the snapshot of the last build, if it is not on disk (best effort)."""
        with self.lock:
            if self._snap is not None and not self._snap.saved:
                self._snap.save(self.root)


_UNITS = attrgetter("units")


def _row_key(row: TimelineRow) -> tuple[str, str]:
    return (row.sort_ref, row.memory_id)  # == timeline_file_text's order


def _flat(part: TopicPart) -> tuple:
    """A part as the snapshot keeps it: what its rows render (day, sort_ref, id, line) and
    its relation fragments, in plain tuples (marshal)."""
    return (tuple((r.when, r.sort_ref, r.memory_id, r.line) for r in part.rows), part.outbound, part.backlinks)


def _owner(ordered: list[TimelineRow], new: dict[str, tuple]) -> list[str]:
    """The topic of each row of a re-rendered day: kept rows carry theirs; rows put back are
    the only rows of their id, and ids are unique across topics."""
    owner_of = {mid: path for path, flat in new.items() for _w, _s, mid, _l in flat[0]}
    return [r.topic_path or owner_of[r.memory_id] for r in ordered]


def _splice_day(when: str, text: str, day: tuple[tuple[int, ...], tuple[bytes, ...]],
                owners: Mapping[str, tuple[int, ...]], moved: set[str], put_back: Iterable[TimelineRow],
                ) -> tuple[str, tuple[tuple[int, ...], tuple[bytes, ...]], dict[int, tuple[str, bytes]]] | None:
    """The day file with the rows of the ``moved`` topics replaced by ``put_back``, without
    sorting, when those are the same rows by sort key (a reword: the lines change, the order
    cannot) -- what sorting every row again gives, since the file is in sort-key order and no
    other row's key ties with theirs (ids are unique across topics, and a key that occurs
    twice here takes the sort). ``None`` otherwise.

    ``day`` is the day's segments (``_segments``) and ``owners`` the segments holding each
    topic's rows, so only the segments of the moved topics are read: the answer is the new
    text, the new segments, and each replaced segment's text and meta (for the patch)."""
    lines: dict[tuple[str, str], str] = {}
    for row in put_back:
        key = (row.sort_ref, row.memory_id)
        if key in lines:
            return None
        lines[key] = row.line
    offs, metas = day
    new_metas = list(metas)
    pieces: list[str] = []
    replaced: dict[int, tuple[str, bytes]] = {}
    matched: set[tuple[str, str]] = set()
    last = 0
    for i in sorted({i for path in moved for i in owners.get(path, ())}):
        rows = list(codec.loads(metas[i]))
        at = start = offs[i]
        pieces.append(text[last:start])
        seg: list[str] = []
        last = start
        for j, (path, sort_ref, mid, n) in enumerate(rows):
            if path in moved:
                key = (sort_ref, mid)
                line = lines.get(key)
                if line is None or key in matched:
                    return None
                matched.add(key)
                seg.append(text[last:at + 1])
                seg.append(line)
                last = at + 1 + n
                if len(line) != n:
                    rows[j] = (path, sort_ref, mid, len(line))
            at += n + 2  # "\n<line>\n"
        seg.append(text[last:offs[i + 1]])
        piece = "".join(seg)
        pieces.append(piece)
        if piece != text[start:offs[i + 1]]:  # (a segment whose lines all came back the same is kept)
            new_metas[i] = codec.dumps(tuple(rows), 4)
            replaced[i] = (piece, new_metas[i])
        last = offs[i + 1]
    if len(matched) != len(lines) or not matched:
        return None
    pieces.append(text[last:])
    return "".join(pieces), (_offsets(offs, replaced), tuple(new_metas)), replaced


def _offsets(offs: tuple[int, ...], replaced: Mapping[int, tuple[str, bytes]]) -> tuple[int, ...]:
    """The segments' offsets ``offs`` with the segments of ``replaced`` taking their new length."""
    out = [offs[0]]
    for i in range(len(offs) - 1):
        hit = replaced.get(i)
        out.append(out[-1] + (len(hit[0]) if hit is not None else offs[i + 1] - offs[i]))
    return tuple(out)


def _segments(when: str, ordered: list[TimelineRow], owners: list[str]) -> tuple[tuple[int, ...], tuple[bytes, ...]]:
    """A day file's rows (file order) cut in segments of ``SEGMENT`` rows: the offset in the
    text where each segment starts (and where the last ends), and each segment's marshalled
    ``(topic path, sort_ref, id, line length)`` rows. A reword replaces lines in the segments
    of its topic only, so the snapshot writes those segments, not the day."""
    rows = tuple((o, r.sort_ref, r.memory_id, len(r.line)) for o, r in zip(owners, ordered))
    offs = [len(when) + 3]  # after "# <when>\n"
    metas = []
    for k in range(0, len(rows), SEGMENT):
        part = rows[k:k + SEGMENT]
        metas.append(codec.dumps(part, 4))
        offs.append(offs[-1] + sum(r[3] for r in part) + 2 * len(part))  # "\n<line>\n" each
    return tuple(offs), tuple(metas)


def _owners(metas: tuple[bytes, ...]) -> dict[str, tuple[int, ...]]:
    """Topic path -> the segments holding its rows."""
    out: dict[str, list[int]] = {}
    for i, meta in enumerate(metas):
        for path in {row[0] for row in codec.loads(meta)}:
            out.setdefault(path, []).append(i)
    return {path: tuple(at) for path, at in out.items()}


def _by_day(flat: tuple | None) -> dict[str, tuple]:
    out: dict[str, list[tuple]] = {}
    for row in flat[0] if flat is not None else ():
        out.setdefault(row[0], []).append(row)
    return {w: tuple(rows) for w, rows in out.items()}


def _relation_of(flat: tuple | None) -> tuple | None:
    return None if flat is None else (flat[1], flat[2])


def _patch_relations(text: str, old: list[tuple], new: list[tuple]) -> str:
    """``relations.json`` ``text`` with the fragments of ``old`` parts taken out and those of
    ``new`` put in. The file is ``json.dumps``' own rendering of ``{"backlinks": {target:
    sorted ids}, "outbound": {id: sorted targets}}`` with sorted keys (what ``combine`` and
    ``views.join_relations`` write fragment by fragment), so loading, patching and dumping it
    gives their bytes. Ids are unique across the parts (else the full path ran)."""
    body = json.loads(text)
    back = {k: set(v) for k, v in body["backlinks"].items()}
    out = body["outbound"]
    for _rows, outbound, backlinks in old:
        for mid, _frag in outbound:
            out.pop(mid, None)
        for target, mid in backlinks:
            linked = back.get(target)
            if linked is not None:
                linked.discard(mid)
                if not linked:
                    del back[target]
    for _rows, outbound, backlinks in new:
        targets: dict[str, list[str]] = {}
        for target, mid in backlinks:  # each id's targets, sorted (``relation_parts``)
            targets.setdefault(mid, []).append(target)
            back.setdefault(target, set()).add(mid)
        for mid, _frag in outbound:
            out[mid] = targets.get(mid, [])
    return _encode({"backlinks": {k: sorted(back[k]) for k in sorted(back)},
                    "outbound": {m: out[m] for m in sorted(out)}}) + "\n"


# ---------------------------------------------------------------------------- the snapshot

SNAPSHOT_DIR = "memory-tui-views"
SNAPSHOT_FORMAT = 4  # 2: the keys in chunks; 3: the days in segments, with patches; 4: the kit's envelope
MAX_CHANGED = 48  # topics whose keys moved; beyond that combining every part costs about the same
CHUNK = 128  # topics per chunk of the keys' rows
SEGMENT = 64  # rows per segment of a day file
PATCH_SHARE = 0.5  # of a day's text, the most its patch holds; beyond, the day is written whole
_KIND = "views"  # every file of the snapshot is one envelope of the cache kit of this kind
_MANIFEST = "manifest"


def _seal(value: Any, stable: bool = False) -> bytes:
    return envelope.pack(_KIND, value, SNAPSHOT_FORMAT, stable=stable)


def _unseal(data: bytes) -> Any:
    return envelope.unpack(_KIND, data, SNAPSHOT_FORMAT)


def snapshot_dir(memory_root: Any) -> Any:
    from pathlib import Path

    from ..format.paths import Layout

    return Layout(Path(memory_root)).runtime_dir / SNAPSHOT_DIR


def _tag() -> str:
    from .parsecache import code_tag  # the parts' own code tag: views.py, viewcache.py, the parsers

    return f"{SNAPSHOT_FORMAT}/{code_tag()}"


class Snapshot:
    """What the last build combined: the parts' keys (tree order) and each part's rendered
    rows and relation fragments (``_flat``), per timeline day its text and its rows'
    ``(topic path, sort_ref, id, line length)`` in file order, cut in segments of
    ``SEGMENT`` rows (``_segments``), and ``relations.json``. On disk: one envelope (``cache.envelope``) per
    day and per part (named by a digest of its bytes, so a rewrite writes only what changed),
    one for ``relations.json``, the keys' rows in chunks of ``CHUNK`` topics (also named by
    their bytes: a one-topic edit rewrites one chunk, not 1 200 rows), and a manifest naming
    them all, replaced last and atomically.

    A day whose rows were only spliced keeps its file (the *base*) and gains a *patch* file:
    the segments that differ from the base, each whole (text and rows). A reword then writes
    one segment, not the day (≈ 230 KB at scale 4, four times scale 1's: the days are the
    same, their rows are not); a patch that would hold more than half the day's text gives
    way to the day written whole (``PATCH_SHARE``). Loading applies the patch to its base
    (named in it).

    Every file's bytes name its slot (a day file holds its day, a part its topic path, a
    chunk its position), so a name dropped from a slot is garbage unless that very slot
    names it again (the same bytes came back): a snapshot made from the one before
    remembers what it dropped (``replaced``, name -> slot) and its save unlinks only those,
    instead of listing the folder. ``replaced is None`` (a snapshot loaded, combined, or
    made with other paths) sweeps the whole folder, which also collects what a crashed or
    concurrent process left: the first save in each process does."""

    __slots__ = ("keys", "texts", "segs", "relations", "names", "relations_name", "part_names", "flats", "saved",
                 "chunks", "chunk_of", "chunk_names", "replaced", "patches", "patch_names", "owners")

    def __init__(self, keys: dict[str, tuple], texts: dict[str, str],
                 segs: dict[str, tuple[tuple[int, ...], tuple[bytes, ...]]], relations: str,
                 names: dict[str, str], relations_name: str | None, part_names: dict[str, str],
                 flats: dict[str, tuple]) -> None:
        self.keys, self.texts, self.segs, self.relations = keys, texts, segs, relations
        self.names = names  # day -> its base file on disk (the day itself, but for its patch)
        self.patches: dict[str, dict[int, tuple[str, bytes]]] = {}  # day -> segment -> (text, rows) over its base
        self.patch_names: dict[str, str] = {}  # day -> file on disk holding exactly its patch
        # day -> (its segments' rows, topic path -> the segments holding its rows), made when needed
        self.owners: dict[str, tuple[tuple[bytes, ...], dict[str, tuple[int, ...]]]] = {}
        self.relations_name = relations_name
        self.part_names = part_names  # topic path -> file on disk holding its part (under keys[path])
        self.flats = flats  # topic path -> its part, not written yet
        self.saved = False
        # the keys' paths in chunks (None: cut from ``keys`` when saved), path -> its chunk,
        # and each chunk's file (None: to be written)
        self.chunks: list[tuple[str, ...]] | None = None
        self.chunk_of: dict[str, int] = {}
        self.chunk_names: list[str | None] = []
        self.replaced: dict[str, tuple] | None = None  # file -> the slot it was dropped from

    def follow(self, before: Snapshot, dirty: Iterable[str], moved: Iterable[str]) -> None:
        """Take ``before``'s chunks (this snapshot has its paths in its order) and remember
        the files this one no longer names: those of the ``dirty`` days, the ``moved``
        topics' parts and chunks, and ``relations.json`` if it changed."""
        if before.chunks is None:
            return
        self.chunks, self.chunk_of, self.chunk_names = before.chunks, before.chunk_of, list(before.chunk_names)
        replaced = None if before.replaced is None else dict(before.replaced)  # None: not swept yet
        for path in moved:
            i = self.chunk_of[path]
            name, self.chunk_names[i] = self.chunk_names[i], None
            if replaced is not None:
                if name is not None:
                    replaced[name] = ("k", i)
                name = before.part_names.get(path)
                if name is not None:
                    replaced[name] = ("p", path)
        if replaced is None:
            return
        for when in dirty:
            name = before.names.get(when)
            if name is not None:
                replaced[name] = ("d", when)
            name = before.patch_names.get(when)
            if name is not None:
                replaced[name] = ("e", when)
        if before.relations_name is not None and self.relations_name is None:
            replaced[before.relations_name] = ("r",)
        self.replaced = replaced

    def _names_slot(self, slot: tuple) -> str | None:
        if slot[0] == "d":
            return self.names.get(slot[1])
        if slot[0] == "e":
            return self.patch_names.get(slot[1])
        if slot[0] == "p":
            return self.part_names.get(slot[1])
        if slot[0] == "k":
            return self.chunk_names[slot[1]]
        return self.relations_name

    def owners_of(self, when: str) -> dict[str, tuple[int, ...]]:
        """Topic path -> the segments of day ``when`` holding its rows (kept per segments object)."""
        metas = self.segs[when][1]
        hit = self.owners.get(when)
        if hit is None or hit[0] is not metas:
            hit = self.owners[when] = (metas, _owners(metas))
        return hit[1]

    def part(self, memory_root: Any, path: str) -> tuple | None:
        """The flattened part of ``path`` under ``keys[path]`` (read from disk), else ``None``."""
        hit = self.flats.get(path)
        if hit is not None:
            return hit
        name = self.part_names.get(path)
        if name is None:
            return None
        try:
            body = _unseal((snapshot_dir(memory_root) / name).read_bytes())
        except OSError:
            return None
        if not (isinstance(body, tuple) and len(body) == 5 and body[0] == path and body[1] == self.keys[path]):
            return None
        return body[2:]

    @classmethod
    def load(cls, memory_root: Any) -> Snapshot | None:
        folder = snapshot_dir(memory_root)
        try:
            manifest = _unseal((folder / _MANIFEST).read_bytes())
            if not (isinstance(manifest, tuple) and len(manifest) == 4 and manifest[0] == _tag()):
                return None
            _tag_, chunk_names, days, relations_name = manifest
            keys, part_names, chunks = {}, {}, []
            for i, name in enumerate(chunk_names):
                chunk = _unseal((folder / name).read_bytes())
                if not (isinstance(chunk, tuple) and len(chunk) == 2 and chunk[0] == i):
                    return None
                for row in chunk[1]:
                    keys[row[0]] = tuple(row[1:-1])
                    part_names[row[0]] = row[-1]
                chunks.append(tuple(row[0] for row in chunk[1]))
            if len(keys) != sum(map(len, chunks)):
                return None  # a path in two chunks: not a snapshot this code wrote
            texts, segs, names, patches, patch_names = {}, {}, {}, {}, {}
            for when, name, patch_name in days:
                day = _unseal((folder / name).read_bytes())
                if not (isinstance(day, tuple) and len(day) == 4 and day[0] == when and isinstance(day[1], str)
                        and isinstance(day[2], tuple) and isinstance(day[3], tuple)
                        and len(day[2]) == len(day[3]) + 1 and day[2][-1] == len(day[1])):
                    return None
                text, offs, metas = day[1:]
                if patch_name:
                    patch = _unseal((folder / patch_name).read_bytes())
                    if not (isinstance(patch, tuple) and len(patch) == 3 and patch[0] == when and patch[1] == name):
                        return None
                    patches[when] = dict(patch[2])
                    patch_names[when] = patch_name
                    text, offs, metas = _apply_patch(text, offs, metas, patches[when])
                texts[when], segs[when], names[when] = text, (offs, metas), name
            relations = _unseal((folder / relations_name).read_bytes())
        except (OSError, ValueError, TypeError, IndexError):
            return None
        if not isinstance(relations, str):
            return None
        snap = cls(keys, texts, segs, relations, names, relations_name, part_names, {})
        snap.patches, snap.patch_names = patches, patch_names
        snap.chunks, snap.chunk_names = chunks, list(chunk_names)
        snap.chunk_of = {path: i for i, paths in enumerate(chunks) for path in paths}
        snap.saved = True
        return snap

    def save(self, memory_root: Any) -> bool:
        """Write the files not on disk yet, then the manifest; drop files nothing names. Best
        effort (a cache): ``False`` when it could not be written."""
        folder = snapshot_dir(memory_root)
        runtime = folder.parent
        try:
            if runtime.is_symlink() or not runtime.is_dir():
                return False  # never write through a symlinked runtime dir, never create one for a cache
            if folder.is_symlink():
                return False
            if not folder.is_dir():
                os.mkdir(folder, 0o700)
            for when, text in self.texts.items():
                if when not in self.names:
                    self.names[when] = _write(folder, "d-", _seal((when, text, *self.segs[when])))
                    self.patches.pop(when, None)  # (a patch is only ever made over a base on disk)
                    self.patch_names.pop(when, None)
                patch = self.patches.get(when)
                if patch and when not in self.patch_names:
                    self.patch_names[when] = _write(folder, "e-", _seal((when, self.names[when], tuple(sorted(patch.items())))))
            for path, flat in self.flats.items():
                self.part_names[path] = _write(folder, "p-", _seal((path, self.keys[path], *flat)))
            self.flats = {}
            if self.relations_name is None:
                self.relations_name = _write(folder, "r-", _seal(self.relations))
            if self.chunks is None:
                paths = tuple(self.keys)
                self.chunks = [paths[i:i + CHUNK] for i in range(0, len(paths), CHUNK)]
                self.chunk_of = {path: i for i, chunk in enumerate(self.chunks) for path in chunk}
                self.chunk_names = [None] * len(self.chunks)
            for i, name in enumerate(self.chunk_names):
                if name is None:
                    # stable: the bytes (and so the name) are the value's alone, whichever of its
                    # strings this process happened to intern or share
                    chunk = (i, tuple((path, *self.keys[path], self.part_names[path]) for path in self.chunks[i]))
                    self.chunk_names[i] = _write(folder, "k-", _seal(chunk, stable=True))
            days = tuple((when, self.names[when], self.patch_names.get(when, "")) for when in self.texts)
            _write(folder, "", _seal((_tag(), tuple(self.chunk_names), days, self.relations_name), stable=True), _MANIFEST)
            if self.replaced is None:
                live = {*self.names.values(), *self.patch_names.values(), *self.part_names.values(), *self.chunk_names,
                        self.relations_name, _MANIFEST}
                dropped = [name for name in os.listdir(folder) if name not in live and not name.startswith(".")]
            else:
                dropped = [name for name, slot in self.replaced.items() if self._names_slot(slot) != name]
            for name in dropped:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(folder / name)
        except (OSError, ValueError, KeyError):
            return False
        self.replaced = {}
        self.saved = True
        return True


def _apply_patch(text: str, offs: tuple[int, ...], metas: tuple[bytes, ...],
                 patch: Mapping[int, tuple[str, bytes]]) -> tuple[str, tuple[int, ...], tuple[bytes, ...]]:
    """A day's base (text, segment offsets, segment rows) with the segments of ``patch`` replaced."""
    if not all(type(i) is int and 0 <= i < len(metas) and type(seg[0]) is str and type(seg[1]) is bytes
               for i, seg in patch.items()):
        raise ValueError("a patch that does not fit its base")
    pieces = [text[:offs[0]]]
    new_metas = list(metas)
    for i in range(len(metas)):
        hit = patch.get(i)
        if hit is None:
            pieces.append(text[offs[i]:offs[i + 1]])
        else:
            pieces.append(hit[0])
            new_metas[i] = hit[1]
    return "".join(pieces), _offsets(offs, patch), tuple(new_metas)


def _write(folder: Any, prefix: str, data: bytes, name: str | None = None) -> str:
    name = name or prefix + hashlib.blake2b(data, digest_size=12).hexdigest()
    replace_cache_file(folder / name, data)
    return name


_CACHES: dict[str, ViewCache] = keeps({})
_CACHES_LOCK = threading.Lock()


def view_cache_for(root: Any) -> ViewCache:
    key = os.path.realpath(str(root))
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = ViewCache(key)
        return cache


@keeps
def forget_in_process() -> None:
    with _CACHES_LOCK:
        _CACHES.clear()


__all__ = ["MAX_CHANGED", "SNAPSHOT_DIR", "Snapshot", "TopicPart", "ViewCache", "ViewsMismatch",
           "forget_in_process", "part_from_plain", "part_plain", "mode", "snapshot_dir", "stored_parts", "topic_part",
           "view_cache_for"]
