"""A whole ``topics/`` tree: the per-file parses in tree order, the cross-file rule (a block id
is unique across files), the id map, and the incremental reassembly of a tree from the
previous one when a few topics changed (``tests/property/test_tree_incremental_props.py``
compares it with a full assembly).
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .files import _decode, read_topic_texts
from .grammar import _strip_topics_prefix, topic_sort_key
from .model import INVALID_TOPIC_FORMAT, SourceResolver, Topic, Unit, is_error
from .parse import parse_topic, raise_for_problems
from ..errors import Problem
from ..fastdata import bulk

_MISSING = object()


class _IdsByTopic(Mapping):
    """The id map of a tree without duplicate ids, before its units are built: each id names
    the topic holding it, and a lookup builds that topic's units (once) and answers with the
    unit. Keys in tree order, as ``assemble_tree``'s dict. Read-only; shared as the base of
    the ``IdOverlay`` of the trees reassembled from it."""

    __slots__ = ("where", "found")

    def __init__(self, where: dict[str, Topic]) -> None:
        self.where = where
        self.found: dict[str, Unit] = {}  # the units of the topics looked into so far

    def __getitem__(self, key):
        unit = self.found.get(key)
        if unit is None:
            topic = self.where[key]
            unit = topic._units_by_id()[key]
            self.found.update(topic._units_by_id())
        return unit

    def get(self, key, default=None):
        unit = self.found.get(key)
        if unit is None:
            topic = self.where.get(key)
            if topic is None:
                return default
            units = topic._units_by_id()
            self.found.update(units)
            unit = units[key]
        return unit

    def __contains__(self, key) -> bool:
        return key in self.where

    def __iter__(self):
        return iter(self.where)

    def __len__(self) -> int:
        return len(self.where)

    def keys(self):
        return self.where.keys()


class IdOverlay(Mapping):
    """A tree's id map as ``base`` (another tree's map, shared, never changed) with ``over``
    laid on it and the ids in ``gone`` taken out. ``reassemble_tree`` makes one for a tree
    that differs from the previous in a few topics instead of copying the previous tree's
    80 000 entries (each copy touches every unit's reference count, all over the heap).
    Read-only; ``over`` and ``gone`` are the new tree's own."""

    __slots__ = ("base", "over", "gone", "_len")

    def __init__(self, base: dict, over: dict, gone: frozenset) -> None:
        self.base, self.over, self.gone = base, over, gone
        self._len = len(base) - len(gone) + sum(1 for key in over if key not in base)  # never a pass over base

    def __getitem__(self, key):
        value = self.over.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if key in self.gone:
            raise KeyError(key)
        return self.base[key]

    def get(self, key, default=None):
        value = self.over.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if key in self.gone:
            return default
        return self.base.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self.over or (key not in self.gone and key in self.base)

    def __iter__(self):
        gone, base = self.gone, self.base
        for key in base:
            if key not in gone:
                yield key
        for key in self.over:
            if key not in base:
                yield key

    def __len__(self) -> int:
        return self._len


# More replaced ids than this laid over a shared map and the new tree's map is a plain dict again.
OVERLAY_MAX = 4096


@dataclass(frozen=True)
class TopicTree:
    topics: tuple[Topic, ...]  # sorted component-wise by path
    units: tuple[Unit, ...]  # tree order
    problems: tuple[Problem, ...]
    _index: Mapping[str, Unit] = field(default_factory=dict, compare=False, repr=False)  # a dict or an IdOverlay
    _topic_index: dict[str, Topic] = field(default_factory=dict, compare=False, repr=False)
    # True only when made by ``assemble_tree``/``reassemble_tree`` and no memory_id occurs twice
    # among all the topics' units: then ``units`` is exactly the topics' units one after the
    # other and every id names one unit, which is what the incremental paths rely on.
    _dupfree: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self._index:
            for unit in self.units:
                self._index.setdefault(unit.memory_id, unit)
        if not self._topic_index:
            for topic in self.topics:
                self._topic_index[topic.path] = topic

    # ``units`` of a tree made by ``assemble_tree`` from topics without duplicate ids is built
    # on first read (the concatenation of the topics' units, which builds deferred topics):
    # the id map, the problems and the topics answer without it. Reached only while
    # ``units`` is missing from the instance dict.
    def __getattr__(self, name: str):
        if name == "units":
            d = self.__dict__
            units_of = d.get("_lazy_units")
            if units_of is not None:
                return d.setdefault("units", units_of(d["topics"]))
        raise AttributeError(name)

    def __getstate__(self) -> dict:
        self.units  # noqa: B018 - pickled built, with a plain id map
        d = dict(self.__dict__)
        d.pop("_lazy_units", None)
        if not isinstance(d["_index"], dict):
            d["_index"] = dict(d["_index"].items())
        return d

    @classmethod
    def _lazy(cls, topics: tuple[Topic, ...], problems: tuple[Problem, ...], index: Mapping[str, Unit],
              topic_index: dict[str, Topic], units_of: Callable[[tuple[Topic, ...]], tuple[Unit, ...]] | None = None
              ) -> TopicTree:
        """A duplicate-free tree whose ``units`` is ``units_of(topics)`` (by default the
        topics' units one after the other), built on first read."""
        tree = object.__new__(cls)
        tree.__dict__.update(topics=topics, problems=problems, _index=index, _topic_index=topic_index,
                             _dupfree=True, _lazy_units=units_of or _concat_units)
        return tree

    def by_id(self, memory_id: str) -> Unit | None:
        return self._index.get(memory_id)

    def has_id(self, memory_id: str) -> bool:
        return memory_id in self._index

    @property
    def id_view(self):
        """The ids as a read-only set view (``in``, ``<=``, ``-``): ``ids`` without building a
        frozenset of every id of the tree."""
        return self._index.keys()

    @property
    def dupfree(self) -> bool:
        return self._dupfree

    @property
    def unit_count(self) -> int:
        """``len(units)``, without building them when no id occurs twice (one unit per id)."""
        return len(self._index) if self._dupfree else len(self.units)

    def topic(self, topic_path: str) -> Topic | None:
        return self._topic_index.get(_strip_topics_prefix(topic_path))

    def block_ids(self, topic_path: str) -> tuple[str, ...]:
        topic = self.topic(topic_path)
        return topic.block_ids if topic else ()

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self._index)

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if is_error(p))

    @property
    def ok(self) -> bool:
        return not self.errors


def parse_tree(
    topics: Path | Mapping[str, str | bytes | None],
    *,
    resolve: SourceResolver | None = None,
    strict: bool = True,
) -> TopicTree:
    """Parse a whole ``topics/`` tree (a directory, or a mapping of topics-relative path -> text;
    ``None`` values are deleted files). Never raises for bad files."""
    problems: list[Problem] = []
    if isinstance(topics, Path):
        texts, read_problems = read_topic_texts(topics)
        problems.extend(read_problems)
    else:
        texts = {}
        for key, value in topics.items():
            rel = _strip_topics_prefix(key)
            if value is None:
                continue
            if isinstance(value, bytes):
                text, problem = _decode(rel, value)
                if problem is not None:
                    problems.append(problem)
                    continue
                value = text  # type: ignore[assignment]
            texts[rel] = value  # type: ignore[assignment]
    parsed: list[Topic] = []
    for rel in sorted(texts, key=topic_sort_key):
        parsed.append(parse_topic(rel, texts[rel], resolve=resolve, strict=strict))
    return assemble_tree(parsed, problems)


def assemble_tree(parsed: Iterable[Topic], problems: Iterable[Problem] = ()) -> TopicTree:
    """Combine per-file parses (already in tree order) into a tree: the cross-file rules
    (a block id must be unique across files) and problem ordering. Callers that cache per-file
    parses use this so they can never drift from ``parse_tree``."""
    parsed = tuple(parsed)
    problems = list(problems)
    # Without a duplicate id (every workspace OpenProgram accepts) the tree is its topics in
    # order, an id map from the topics' id columns and their problems; the units tuple, and
    # the units of topics from the cache, are built when first read.
    where: dict[str, Topic] = {}
    total = 0
    for topic in parsed:
        mids = topic.memory_ids
        total += len(mids)
        where.update(zip(mids, itertools.repeat(topic)))
    if len(where) == total:
        for topic in parsed:
            problems.extend(topic.problems)
        problems.sort(key=_problem_order)
        return TopicTree._lazy(parsed, tuple(problems), _IdsByTopic(where), {t.path: t for t in parsed})
    units: list[Unit] = []
    first_seen: dict[str, Unit] = {}
    for topic in parsed:
        problems.extend(topic.problems)
        for unit in topic.units:
            if unit.memory_id in first_seen:
                other = first_seen[unit.memory_id]
                if other.topic_path != unit.topic_path:  # same-file duplicates are reported by parse_topic
                    problems.append(Problem(
                        INVALID_TOPIC_FORMAT, f"duplicate memory_id: {unit.memory_id}", unit.path, unit.line, 1,
                        {"memory_id": unit.memory_id, "first": f"{other.path}:{other.line}"},
                    ))
                continue
            first_seen[unit.memory_id] = unit
            units.append(unit)
    problems.sort(key=_problem_order)
    dupfree = len(units) == sum(len(topic.units) for topic in parsed)
    index = {unit.memory_id: unit for unit in units}
    return TopicTree(parsed, tuple(units), tuple(problems), index, {t.path: t for t in parsed}, dupfree)


def _problem_order(p: Problem) -> tuple:
    return (topic_sort_key(p.path or ""), p.line or 0, p.column or 0)


# More changed topics than this and the tree is assembled from scratch (it is cheaper).
REASSEMBLE_MAX_CHANGED = 64


def reassemble_tree(previous: TopicTree, parsed: Iterable[Topic]) -> TopicTree:
    """``assemble_tree(parsed)`` when ``parsed`` differs from ``previous.topics`` in a few
    topics: the id map is ``previous``'s with the replaced topics' ids swapped, instead of
    being rebuilt from every unit. Taken only when both trees are free of duplicate ids (then
    ``units`` is the concatenation of the topics' units and ``problems`` the sorted
    concatenation of theirs, exactly what ``assemble_tree`` produces); anything else is
    assembled in full. ``tests/property/test_tree_incremental_props.py`` compares the two."""
    parsed = tuple(parsed)
    if not previous._dupfree:
        return assemble_tree(parsed)
    old_topics = previous.topics
    moved: list[int] | None = None
    if len(parsed) == len(old_topics):
        # the common edit: the same paths in the same order, a few parses replaced -- found by
        # one C-level pass instead of a dict of every topic and a lookup per topic
        moved = list(itertools.compress(range(len(parsed)), map(operator.is_not, parsed, old_topics)))
        if not moved:
            return previous
        if len(moved) > REASSEMBLE_MAX_CHANGED or any(parsed[i].path != old_topics[i].path for i in moved):
            moved = None
    if moved is not None:
        added = [parsed[i] for i in moved]
        gone = [old_topics[i] for i in moved]
        topic_index = dict(previous._topic_index)
        topic_index.update((t.path, t) for t in added)
    else:
        old_index = previous._topic_index
        topic_index = {t.path: t for t in parsed}
        if len(topic_index) != len(parsed):
            return assemble_tree(parsed)
        added = [t for t in parsed if old_index.get(t.path) is not t]
        gone = [t for t in previous.topics if topic_index.get(t.path) is not t]
        if len(added) + len(gone) > REASSEMBLE_MAX_CHANGED:
            return assemble_tree(parsed)
        if not added and not gone:  # the same topics: the same tree, if in the same order
            return previous if all(a is b for a, b in zip(parsed, previous.topics)) else assemble_tree(parsed)
    previous_map = previous._index
    leaving = {mid for topic in gone for mid in topic.memory_ids}
    arriving: dict[str, Unit] = {}
    for topic in added:
        for unit in topic.units:
            mid = unit.memory_id
            if mid in arriving or (mid in previous_map and mid not in leaving):
                return assemble_tree(parsed)  # a duplicate: the full rules decide what it means
            arriving[mid] = unit
    # The new map shares the previous one's base and lays the changed ids over it.
    if isinstance(previous_map, IdOverlay):
        base, over, removed = previous_map.base, dict(previous_map.over), set(previous_map.gone)
    else:
        base, over, removed = previous_map, {}, set()
    for mid in leaving - arriving.keys():
        over.pop(mid, None)
        if mid in base:
            removed.add(mid)
    over.update(arriving)
    removed.difference_update(arriving)
    index: Mapping[str, Unit]
    if len(over) + len(removed) <= OVERLAY_MAX:
        index = IdOverlay(base, over, frozenset(removed))
    else:  # built by insertion: no deleted slots, so the next copy (if any) is one memcpy
        index = {mid: unit for mid, unit in IdOverlay(base, over, frozenset(removed)).items()}
    # The units tuple is its topics' units one after the other (no duplicate), made when first
    # read: an edit whose readers never ask for it pays nothing for it.
    if moved is not None:
        built = previous.__dict__.get("units")
        units_of = _concat_units if built is None else functools.partial(_splice_units, built, old_topics, moved)
        if not previous.problems and not any(t.problems for t in added):
            return TopicTree._lazy(parsed, (), index, topic_index, units_of)
    else:
        units_of = _concat_units
    problems = [p for topic in parsed for p in topic.problems]
    problems.sort(key=_problem_order)
    return TopicTree._lazy(parsed, tuple(problems), index, topic_index, units_of)


def _splice_units(previous: tuple[Unit, ...], old_topics: tuple[Topic, ...], moved: list[int],
                  parsed: tuple[Topic, ...]) -> tuple[Unit, ...]:
    """The units of ``parsed`` from the units of ``old_topics`` (``previous``), where the
    topics at ``moved`` were replaced: the replaced runs swapped by slicing."""
    starts = [0, *itertools.accumulate(map(len, map(_MEMORY_IDS, old_topics)))]
    pieces: list[tuple[Unit, ...]] = []
    at = 0
    for i in moved:
        pieces.append(previous[at:starts[i]])
        pieces.append(tuple(parsed[i].units))
        at = starts[i + 1]
    pieces.append(previous[at:])
    return pieces[0] + pieces[1] + pieces[2] if len(pieces) == 3 else tuple(itertools.chain.from_iterable(pieces))


_MEMORY_IDS = operator.attrgetter("memory_ids")


def _concat_units(parsed: tuple[Topic, ...]) -> tuple[Unit, ...]:
    if len(parsed) < 4:
        return tuple(u for topic in parsed for u in topic.units)
    out: list[Unit] = []
    # Building deferred topics makes ~10^5 acyclic objects: with the collector running between
    # topics, each collection their allocation triggers traverses them all again.
    with bulk():
        for topic in parsed:
            out.extend(topic.units)
    return tuple(out)


def parse_tree_strict(
    topics: Path | Mapping[str, str | bytes | None], *, resolve: SourceResolver | None = None
) -> TopicTree:
    tree = parse_tree(topics, resolve=resolve, strict=True)
    raise_for_problems(tree.problems)
    return tree
