"""The parsed tree of one memory root: each topic parsed once per (path, bytes, archive
signature), the tree assembled from the last one's, and the source-ref checks of the parses.

A parse is reused only while the signature of the source archives its links depend on is
unchanged (``parsecache.deps_signature``), so a source that appears, vanishes or moves
re-parses exactly the topics that cite it. Parses also persist across processes in the parse
cache (``parsecache``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from itertools import compress, repeat
from operator import attrgetter, is_, is_not, itemgetter, not_
from pathlib import Path
from typing import Iterable, Mapping, NamedTuple

from ..format.sources import SourceIndex
from ..format.topics import Topic, TopicTree, assemble_tree, parse_topic, reassemble_tree, topic_sort_key
from .committed import CommittedFiles, sha
from .memos import without
from .parsecache import deps_signature, store_for, topic_deps
from ..switches import Switches

_NOT_HANDED = (None,)  # a path no parse was handed out for


def same_tree(a: TopicTree, b: TopicTree) -> bool:
    """Two trees hold the very same topics and units, the same problems and id maps."""
    return (len(a.topics) == len(b.topics) and all(x is y for x, y in zip(a.topics, b.topics))
            and len(a.units) == len(b.units) and all(x is y for x, y in zip(a.units, b.units))
            and a.problems == b.problems
            and a.id_view == b.id_view and all(a.by_id(k) is b.by_id(k) for k in a.id_view)
            and {t.path: t for t in a.topics} == {t.path: t for t in b.topics}
            and all(a.topic(t.path) is t for t in b.topics)
            and a.dupfree == b.dupfree)


@dataclass
class ParsedEntry:
    topic: Topic
    deps: tuple[str, ...]
    sig: str
    checked: object  # the index token the signature was last checked against
    refs_ok: bool | None = None  # every source ref of every unit exists (checked under ``sig``)


class _Parsed(NamedTuple):
    """What ``TreeCache.tree`` was last given and answered: positions are those of the
    texts as given (insertion order), ``topics`` in tree order."""

    token: object  # the archive token
    keys: tuple[str, ...]  # the paths as given
    values: list[str]  # their texts, aligned
    at: dict[str, int]  # path -> its position
    tpos: list[int]  # position -> its topic's place in ``topics``
    topics: list[Topic]  # tree order
    bad: tuple[int, ...]  # the positions whose topic had problems (looked up again every time)
    handed: Mapping  # ``topic_keys`` as it was when the call began

    @classmethod
    def of(cls, token: object, keys: tuple[str, ...], values: list[str], order: list[str], topics: list[Topic],
           handed: Mapping) -> "_Parsed":
        place = dict(zip(order, range(len(order))))
        tpos = list(map(place.__getitem__, keys))
        bad = tuple(compress(range(len(keys)), map(not_, map(_OK, map(topics.__getitem__, tpos)))))
        return cls(token, keys, values, dict(zip(keys, range(len(keys)))), tpos, topics, bad, handed)


_OK = attrgetter("ok")


class TreeCache:
    """Parses and trees of one memory root. Shares the workspace cache's lock; asks
    ``committed`` for the digests of committed texts (comparing is cheaper than hashing)."""

    def __init__(self, root: Path, lock: threading.RLock, committed: CommittedFiles) -> None:
        self.root = root
        self.lock = lock
        self.committed = committed
        self.parsed: dict[tuple[str, str], ParsedEntry] = {}
        self.topic_keys: dict[str, tuple[Topic, str, str]] = {}  # path -> (topic, sha256, deps sig) last handed out
        self._token: object = object()
        self._index_files: Mapping | None = None
        self._index: SourceIndex | None = None  # the index last observed, of ``_index_files``' entries
        self._trees: list[TopicTree] = []  # the last two assembled trees
        self._order_covered: tuple[TopicTree, object] | None = None
        # the last tree's parses (``_Parsed``), and the paths whose ``topic_keys`` entry was
        # set since that call began (``_entry``): what ``_topics_since_last`` looks at again
        self._last_parsed: _Parsed | None = None
        self._handed_moved: set[str] = set()
        # ``refs_unfine``: (index, the topics asked of, the positions not found fine)
        self._refs_fine: tuple[object, tuple[Topic, ...], frozenset[int]] = (None, (), frozenset())

    # -- the source index generation ------------------------------------------------------
    def observe_index(self, index: SourceIndex) -> object:
        """A token for ``index``: the same object as last time when no archive entry changed,
        so a signature checked once is not checked again. Pass it to the other methods."""
        with self.lock:
            if index is self._index:  # an index is never changed once made: the same entries
                return self._token
            prev = self._index_files
            files = index.files
            if prev is not None and len(prev) == len(files) and all(map(is_, map(files.get, prev), prev.values())):
                self._index = index
                return self._token
            self._index_files = dict(files)
            self._index = index
            self._token = object()
            return self._token

    # -- parsing --------------------------------------------------------------------------
    def entry(self, rel: str, text: str, index: SourceIndex, token: object, digest: str | None = None) -> ParsedEntry:
        made = self._entry(rel, text, index, token, digest or self.committed.sha_of(rel, text))
        return made

    def _entry(self, rel: str, text: str, index: SourceIndex, token: object, digest: str) -> ParsedEntry:
        made = self._parse_entry(rel, text, index, token, digest)
        with self.lock:  # one step for ``tree``, which takes the set of moved paths under the lock
            self._handed_moved.add(rel)
            self.topic_keys[rel] = (made.topic, digest, made.sig)
        return made

    def _parse_entry(self, rel: str, text: str, index: SourceIndex, token: object, digest: str) -> ParsedEntry:
        key = (rel, digest)
        hit = self.parsed.get(key)
        if hit is not None:
            if hit.checked is token:
                return hit
            if deps_signature(index, hit.deps) == hit.sig:
                hit.checked = token
                return hit

        store = store_for(self.root)
        stored = store.topic_for_sha(rel, digest, index)
        if stored is not None and stored[0].text == text:  # the last process's parse of these bytes
            made = ParsedEntry(stored[0], stored[1], stored[2], token)
            self.parsed[key] = made
            return made
        topic = parse_topic(rel, text, resolve=index.resolve_target, strict=True)
        deps = topic_deps(topic)
        made = ParsedEntry(topic, deps, deps_signature(index, deps), token)
        if topic.ok:  # a topic with errors is parsed again each time (its problems may depend on more)
            self.parsed[key] = made
            hit_file = self.committed.files.get(rel)
            known = hit_file is not None and hit_file[2] == digest and hit_file[0][0] != -1
            store.put_topic(rel, hit_file[0] if known else None, digest, topic, deps, made.sig)
        return made

    def tree(self, texts: Mapping[str, str], index: SourceIndex, token: object,
             shas: Mapping[str, str] | None = None, *, switches: Switches) -> TopicTree:
        """The strict parse of ``texts`` (== ``parse_tree(texts, resolve=..., strict=True)``)."""
        shas = shas or {}
        with self.lock:
            last, moved = self._last_parsed, self._handed_moved
            self._handed_moved = set()
            handed = self.topic_keys

        def full() -> list[Topic]:
            return [self.entry(rel, texts[rel], index, token, shas.get(rel)).topic
                    for rel in sorted(texts, key=topic_sort_key)]

        made: list[_Parsed] = []
        mode = switches
        topics = mode.choose("tree topics", lambda: self._topics_since_last(texts, index, token, shas, last, moved,
                                                                            handed, made), full,
                             lambda a, b: len(a) == len(b) and all(x is y or (not x.ok and x == y) for x, y in zip(a, b)))
        # what the next call starts from: the topics handed out (in check mode, the full
        # derivation's, which are this one's very parses but for topics with problems, and
        # those are looked at again every time)
        with self.lock:
            self._last_parsed = made[0]._replace(topics=topics) if made else None
        # The tree is a function of its topics alone: the baseline of an edit is the tree the
        # previous edit installed (the same parses), so it is not assembled again.
        with self.lock:
            for known in self._trees:
                if len(known.topics) == len(topics) and all(map(is_, known.topics, topics)):
                    self._trees = [known, *(t for t in self._trees if t is not known)]
                    return known
            previous = self._trees[0] if self._trees else None
        if previous is None:
            tree = assemble_tree(topics)
        else:  # an edit's tree from its baseline: only the changed topics' ids move
            tree = mode.choose("tree", lambda: reassemble_tree(previous, topics), lambda: assemble_tree(topics), same_tree)
        with self.lock:
            self._trees = [tree, *self._trees[:1]]
        return tree

    def _topics_since_last(self, texts: Mapping[str, str], index: SourceIndex, token: object,
                           shas: Mapping[str, str], last: "_Parsed | None", moved: set[str],
                           handed: Mapping[str, tuple[Topic, str, str]], made: list) -> list[Topic]:
        """``entry(...).topic`` of every text in tree order, where a text that is the one (or
        equal to the one) the last call parsed under the same archive token keeps that call's
        parse without being looked up again: ``entry`` would return that very parse (same
        path, same bytes, same signature), and it is still the one handed out for its path.
        Topics with problems are always looked up (``entry`` never keeps them).

        ``moved``: the paths whose handed-out parse was set since ``last`` began, ``handed``
        the map of handed-out parses now. With the same paths in the same order as ``last``,
        only the positions whose text is another object, whose topic had problems or whose
        path is in ``moved`` are looked at (one C-level identity pass finds the first): every
        other parse was the one handed out when that call ended, and nothing set its path
        since. A ``handed`` that is not the map ``last`` began with (``retain`` replaced it)
        is compared at every position. Appends to ``made`` what the next call starts from."""
        keys = tuple(texts)
        values = list(texts.values())
        if last is None or last.token is not token:
            order = sorted(texts, key=topic_sort_key)
            out = [self.entry(rel, texts[rel], index, token, shas.get(rel)).topic for rel in order]
            made.append(_Parsed.of(token, keys, values, order, out, handed))
            return out
        if keys != last.keys:
            # other paths: each text looked up by path in the last call's
            order = sorted(texts, key=topic_sort_key)
            out = [self._topic_since_last(rel, texts[rel], index, token, shas, last, handed) for rel in order]
            made.append(_Parsed.of(token, keys, values, order, out, handed))
            return out
        # every text equal to the last one (the baseline of an edit: the texts the last one
        # installed, read back) keeps its parse unless it had problems or its path moved
        positions = set() if values == last.values else set(compress(range(len(keys)),
                                                                     map(is_not, values, last.values)))
        positions.update(last.bad)
        if handed is last.handed:
            at = last.at
            positions.update(at[path] for path in moved if path in at)
        else:
            by_text_order = map(last.topics.__getitem__, last.tpos)
            now_handed = map(itemgetter(0), map(handed.get, keys, repeat(_NOT_HANDED)))
            positions.update(compress(range(len(keys)), map(is_not, now_handed, by_text_order)))
        out = list(last.topics)
        tpos = last.tpos
        for i in sorted(positions):
            out[tpos[i]] = self._topic_since_last(keys[i], values[i], index, token, shas, last, handed, i)
        bad = tuple(i for i in positions if not out[tpos[i]].ok)
        made.append(last._replace(values=values, topics=out, bad=bad, handed=handed))
        return out

    def _topic_since_last(self, rel: str, text: str, index: SourceIndex, token: object, shas: Mapping[str, str],
                          last: "_Parsed", handed: Mapping[str, tuple[Topic, str, str]], i: int | None = None) -> Topic:
        if i is None:
            i = last.at.get(rel)
        if i is not None and i not in last.bad:
            was = last.values[i]
            if was is text or was == text:
                topic = last.topics[last.tpos[i]]
                known = handed.get(rel)
                if known is not None and known[0] is topic:
                    return topic
        return self.entry(rel, text, index, token, shas.get(rel)).topic

    def refs_ok(self, topic: Topic, index: SourceIndex) -> bool:
        """Every source ref of ``topic`` exists (a cached answer while its deps are unchanged)."""
        known = self.topic_keys.get(topic.path)  # the digest of a parse handed out, not re-hashed per edit
        digest = known[1] if known is not None and known[0] is topic else sha(topic.text)
        hit = self.parsed.get((topic.path, digest))
        if hit is None or hit.topic is not topic:
            return False
        if hit.refs_ok is None:
            # a function of the bytes and of the archives the refs live in (the deps), so it
            # persists under the same key as the parse
            store = store_for(self.root)
            key = (self.committed.sha_of(topic.path, topic.text), hit.sig)
            stored = store.derived("refs", topic.path, key)
            if type(stored) is bool:
                hit.refs_ok = stored
            else:
                hit.refs_ok = all(index.validate_ref(ref) is None for unit in topic.units for ref in unit.source_refs)
                if topic.ok:
                    store.put_derived("refs", topic.path, key, hit.refs_ok)
        return hit.refs_ok

    def refs_unfine(self, topics: tuple[Topic, ...], exclude: set[str], index: SourceIndex) -> set[str]:
        """The paths of ``topics`` (but ``exclude``) whose ``refs_ok`` does not hold. A True
        found for a parse under this very index is not asked again: the answer is a function
        of the parse and of the archives (the index), and the parse entry of a live text is
        neither dropped nor replaced while the index stands. With as many topics as the last
        call, one C-level identity pass finds the positions holding another parse; only those,
        and the ones not found fine last time, are asked."""
        with self.lock:
            last_index, last_topics, not_fine = self._refs_fine
        n = len(topics)
        if last_index is not index:
            ask: Iterable[int] = range(n)
        elif len(last_topics) == n:
            ask = set(compress(range(n), map(is_not, topics, last_topics)))
            ask.update(not_fine)
        else:  # topics came or went: the fine parses found by path
            fine = {t.path: t for i, t in enumerate(last_topics) if i not in not_fine}
            ask = [i for i, t in enumerate(topics) if fine.get(t.path) is not t]
        out: set[str] = set()
        unknown: set[int] = set()
        for i in sorted(ask):
            topic = topics[i]
            if topic.path in exclude:
                unknown.add(i)
            elif not self.refs_ok(topic, index):
                out.add(topic.path)
                unknown.add(i)
        with self.lock:
            self._refs_fine = (index, topics, frozenset(unknown))
        return out

    # -- creation order -------------------------------------------------------------------
    def order_covers(self, tree: TopicTree, state: object) -> bool:
        """Every id of ``tree`` is known to be in ``state``'s creation order (both the very
        objects noted last)."""
        with self.lock:
            noted = self._order_covered
        return noted is not None and noted[0] is tree and noted[1] is state

    def note_order_covers(self, tree: TopicTree, state: object) -> None:
        with self.lock:
            self._order_covered = (tree, state)

    def key_of(self, topic: Topic) -> tuple[str, str] | None:
        """``(sha256, deps signature)`` of ``topic`` when it is the parse last handed out for
        its path (what the values derived from it are keyed by), else None."""
        known = self.topic_keys.get(topic.path)
        if known is None or known[0] is not topic:
            return None
        return known[1], known[2]

    def entry_count(self) -> int:
        return len(self.parsed) + len(self.topic_keys)

    def retain(self, keep: set, names) -> None:
        """Forget the parses whose ``(path, sha256)`` is not in ``keep``, and what was handed
        out for paths not in ``names``."""
        self.parsed = without(self.parsed, self.parsed.keys() - keep)
        self.topic_keys = without(self.topic_keys, self.topic_keys.keys() - names)


__all__ = ["ParsedEntry", "TreeCache", "same_tree"]
