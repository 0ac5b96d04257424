"""Which staged topic files ``normalize_tree`` passes through unchanged, and what it remembers
of the last call to ask only the files that changed since.

A file passes through when its staged text is its committed text, it holds no local label,
every line-end id it holds is committed, and (when the caller proves canonical texts) the
caller's proof holds for exactly that text. A one-topic edit hands every topic of the tree:
what is asked of every file is one C-level pass at most, and only the files that changed
since the last call (``_SEEN``) are looked at one by one. ``mode="check"`` compares the
remembered answer with the test of every file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set as AbstractSet
from itertools import compress, filterfalse, repeat
from operator import and_, attrgetter, is_, is_not, not_
from typing import NamedTuple, Protocol

from .linkcheck import TOPIC_PATH, forget_dead_parses
from .topics import Topic, TopicTree, topic_sort_key
from ..cache.registry import keeps


class PassFacts(Protocol):
    """The per-text facts the passthrough test asks (``normalize.TextFacts``; a caller's memo
    of them, ``memos.TextMemos``)."""

    def has_local_label(self, path: str, text: str) -> bool: ...

    def line_end_ids(self, path: str, text: str) -> frozenset[str]: ...


class Committed(NamedTuple):
    """What is committed, as the passthrough test and the normalisation steps ask it."""

    texts: dict[str, str]  # the committed texts when given as texts (else empty)
    tree: TopicTree | None
    topic_at: Callable[[str], Topic | None]  # the committed topic at exactly this path
    text_of: Callable[[str], str | None]  # the committed text at this path
    ids: AbstractSet[str]  # every committed block id


class Selection(NamedTuple):
    """``select``'s answer: the files to normalise and what passes through."""

    passed: frozenset[str]  # the input paths passed through unchanged
    order: list[str]  # the live paths to normalise, in tree order
    order_inputs: list[str] | None  # every input path in tree order, when it was computed
    in_order: bool | None  # whether the input paths are in tree order (None: not known)
    live: Mapping[str, str]  # the inputs that are not deletions


# committed topic (by identity) -> (the id set asked about, whether the topic's own block ids hold it)
_OWN_IDS: dict[int, tuple[Topic, frozenset[str], bool]] = keeps({})


def _ids_own(topic: Topic, ids: frozenset[str]) -> bool:
    """``ids`` are all block ids of ``topic`` itself (so of any tree holding it): the
    passthrough test without looking up every file's ids among every id of the workspace."""
    hit = _OWN_IDS.get(id(topic))
    if hit is not None and hit[0] is topic and hit[1] is ids:
        return hit[2]
    value = ids <= frozenset(topic.memory_ids)  # a cached topic answers without building its units
    _OWN_IDS[id(topic)] = (topic, ids, value)
    return value


class Seen(NamedTuple):
    """What one ``normalize_tree`` call with a proof key saw and found. Every fact in it stays
    true while the key does: whether a path passes on its own committed topic's ids is a
    function of its text and that topic (its label, its line-end ids, the committed text) and
    of the proof, which holds for a text object while the key does."""

    key: object  # the proof key
    paths: tuple[str, ...]  # the input paths in the order given, none of them ``topics/``-prefixed
    values: list[str | None]  # their texts, aligned
    tree: TopicTree  # the committed tree
    # the paths that did not pass on their own committed topic's ids: not passed (deleted
    # included), or passed on the whole tree's ids -- the only ones asked again while their
    # text and committed topic stay the objects they were
    retest: frozenset[str]
    unpassed: frozenset[str]  # the paths not passed through
    passed: frozenset[str]  # the others (``NormalizeResult.passed``)
    in_order: bool  # ``paths`` is tree order
    deleted: bool  # some value is None


# the last call's ``Seen``; replaced whole, so a thread reads one consistent snapshot (and any
# snapshot under the same key is as good as the newest, only older)
_SEEN: Seen | None = None
# the last path order asked for: (the paths in the order given, topic order, whether they are the same)
_ORDER: tuple[tuple[str, ...], tuple[str, ...], bool] = ((), (), True)
# More texts or committed parses moved than this since the last call and the paths are matched by name.
SEEN_MAX_MOVED = 64
_ABSENT = object()


class PassthroughMismatch(AssertionError):
    """``mode="check"``: the remembered passthrough set differs from the file-by-file test."""


def _remember_seen(seen: Seen) -> None:
    global _SEEN
    _SEEN = seen


def topic_at(tree: TopicTree) -> Callable[[str], Topic | None]:
    """The committed topic at exactly this path (``TopicTree.topic`` also strips a
    ``topics/`` prefix, which a path of ``topics/topics/…`` keeps)."""
    return tree._topic_index.get


def _texts_of(tree: TopicTree | None) -> dict[str, str]:
    return {} if tree is None else dict(zip(map(TOPIC_PATH, tree.topics), map(_TOPIC_TEXT, tree.topics)))


def _to_test(seen: Seen, same_paths: bool, paths: tuple[str, ...], values: list[str | None], tree: TopicTree,
             ) -> tuple[set[str], list[int] | None]:
    """``(paths to test, changed positions)``: every path but those ``seen`` found passing on
    their own committed topic whose text and committed topic are still the very objects it saw
    (the changed positions when ``paths`` are ``seen``'s, else None). Found by C-level passes:
    by position while the paths and the committed topics' paths stand where they stood, else
    by name."""
    if same_paths:
        at = list(compress(range(len(values)), map(is_not, values, seen.values)))
        tops, old = tree.topics, seen.tree.topics
        if len(at) <= SEEN_MAX_MOVED and len(tops) == len(old):
            moved = list(compress(range(len(tops)), map(is_not, tops, old)))
            if len(moved) <= SEEN_MAX_MOVED:
                # a path whose committed topic is another object had one at a position that
                # moved (paths are distinct), or had none and did not pass
                out = set(seen.retest)
                out.update(map(paths.__getitem__, at))
                out.update(map(TOPIC_PATH, map(old.__getitem__, moved)))
                return out, at
    else:
        at = None
    where = dict(zip(seen.paths, range(len(seen.paths))))
    before = [*seen.values, _ABSENT]
    then = map(before.__getitem__, map(where.get, paths, repeat(len(seen.paths))))
    same = map(and_, map(is_, values, then), map(is_, map(topic_at(tree), paths), map(topic_at(seen.tree), paths)))
    kept = map(and_, same, map(not_, map(seen.retest.__contains__, paths)))
    return set(compress(paths, map(not_, kept))), at


def _sorted_paths(keys: tuple[str, ...], mode: str = "incremental") -> tuple[list[str], bool]:
    """``(sorted(keys, key=topic_sort_key), whether that is their order)``, remembered for the
    last tuple of keys (a transaction hands the same keys in the same order every time)."""
    global _ORDER
    last_keys, last_order, last_same = _ORDER
    if last_keys == keys and mode != "full":
        return list(last_order), last_same
    order = tuple(sorted(keys, key=topic_sort_key))
    _ORDER = (keys, order, order == keys)
    return list(order), order == keys


def check_order(texts: Mapping[str, str | None], order: list[str], inputs: Mapping[str, str | None],
                live: Mapping[str, str], passed: AbstractSet[str]) -> None:
    """``MEMORY_TUI_TEST_DERIVE=check``: the result's paths in tree order and the files normalised those
    not passed through, in tree order."""
    tree_order = sorted(inputs, key=topic_sort_key)
    if list(texts) != tree_order:
        raise PassthroughMismatch("the result's paths are not in tree order")
    if order != [p for p in tree_order if p in live and p not in passed]:
        raise PassthroughMismatch(f"incremental files to normalise differ: {order[:10]}")


def _check_passthrough(passthrough, live, committed_texts, committed_tree, committed_set, proven_canonical, memo) -> None:
    """``MEMORY_TUI_TEST_DERIVE=check``: the passthrough set as the test for every file gives it."""
    own_of = {t.path: t for t in committed_tree.topics} if committed_tree is not None else {}
    full: set[str] = set()
    for path, text in live.items():
        if committed_texts.get(path) != text or memo.has_local_label(path, text):
            continue
        ids = memo.line_end_ids(path, text)
        own = own_of.get(path)
        if ((own is not None and _ids_own(own, ids)) or ids <= committed_set) and (
                proven_canonical is None or proven_canonical(path, text)):
            full.add(path)
    if full != passthrough:
        raise PassthroughMismatch(f"incremental passthrough differs: {sorted(full ^ passthrough)[:10]}")



def usable_seen(assume_committed_normal: bool, committed: object, mode: str, proof_key: object | None) -> Seen | None:
    """The last call's ``Seen`` when this call may start from it: the same proof key, a
    committed tree, and not the full mode."""
    seen = _SEEN
    if seen is not None and not (assume_committed_normal and isinstance(committed, TopicTree) and mode != "full"
                                 and proof_key is not None and seen.key is proof_key):
        return None
    return seen


def select(inputs: dict[str, str | None], paths: tuple[str, ...], seen: Seen | None, same_paths: bool, plain: bool,
           base: Committed, *, assume_committed_normal: bool, proven_canonical: Callable[[str, str], bool] | None,
           memo: PassFacts, proof_key: object | None, committed: object, mode: str) -> Selection:
    """The files to normalise: with ``assume_committed_normal``, those that do not pass
    through (``passes``), else every live file."""
    values = list(inputs.values())
    test: set[str] | None = None  # the paths whose passthrough test is asked; None: every path
    deleted: bool | None = None  # whether an input is None; None: not known yet
    in_order: bool | None = None  # whether ``paths`` is tree order; None: not known yet
    if seen is not None:
        test, at = _to_test(seen, same_paths, paths, values, base.tree)  # type: ignore[arg-type]
        if at is not None:  # the same paths: only a changed position can hold a new None
            deleted = None if seen.deleted else any(values[i] is None for i in at)
            in_order = seen.in_order
    if deleted is None:
        deleted = None in values
    live = inputs if not deleted else {p: t for p, t in inputs.items() if t is not None}
    order_inputs: list[str] | None = None  # distinct paths: the order of any subset is this one's
    if not in_order or test is None or not assume_committed_normal:
        order_inputs, in_order = _sorted_paths(paths, mode)
    if base.tree is not None:
        forget_dead_parses(_OWN_IDS, base.tree.topics)
    if not assume_committed_normal:
        assert order_inputs is not None
        order = order_inputs if not deleted else [p for p in order_inputs if p in live]
        return Selection(frozenset(), order, order_inputs, in_order, live)
    if test is None:
        assert order_inputs is not None
        asked: Iterable[str] = order_inputs
    else:
        asked = sorted(filter(inputs.__contains__, test), key=topic_sort_key)
    unpassed, retest = _test_files(asked, inputs, base, proven_canonical, memo)
    if same_paths and seen.unpassed == unpassed:  # type: ignore[union-attr]
        passed = seen.passed  # type: ignore[union-attr]
    else:
        passed = frozenset(filterfalse(unpassed.__contains__, inputs))
    if plain and proof_key is not None and isinstance(committed, TopicTree):
        _remember_seen(Seen(proof_key, paths, values, committed, frozenset(retest), frozenset(unpassed),
                             passed, bool(in_order), bool(deleted)))
    if mode == "check":
        _check_passthrough(passed, live, base.texts or _texts_of(base.tree), base.tree, base.ids, proven_canonical,
                           memo)
    order = sorted(filter(live.__contains__, unpassed), key=topic_sort_key)
    return Selection(passed, order, order_inputs, in_order, live)


def _test_files(asked: Iterable[str], inputs: Mapping[str, str | None], base: Committed,
                proven_canonical: Callable[[str, str], bool] | None, memo: PassFacts) -> tuple[set[str], set[str]]:
    """``(unpassed, retest)``: of the paths ``asked``, those that do not pass through, and
    those not passed on their own committed topic's ids (a function of the whole committed
    tree: not remembered)."""
    unpassed: set[str] = set()
    retest: set[str] = set()
    for path in asked:
        text = inputs[path]
        if text is not None and base.text_of(path) == text and not memo.has_local_label(path, text):
            own = base.topic_at(path)
            ids = memo.line_end_ids(path, text)
            by_own = own is not None and _ids_own(own, ids)
            if (by_own or ids <= base.ids) and (proven_canonical is None or proven_canonical(path, text)):
                if not by_own:
                    retest.add(path)
                continue
        unpassed.add(path)
        retest.add(path)
    return unpassed, retest


_TOPIC_TEXT = attrgetter("text")


__all__ = ["Committed", "PassFacts", "PassthroughMismatch", "SEEN_MAX_MOVED", "Seen", "Selection", "check_order", "select",
           "topic_at", "usable_seen"]
