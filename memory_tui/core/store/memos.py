"""Per-text memos of one memory root: named pure functions of a file's text, remembered per
path while the text stays the same (and, for the kinds the parse cache holds, across
processes by the text's sha256).

Each memo is an explicit object with a name, the function it remembers and the parse-cache
kind it persists under (if any), owned by the part of the workspace cache that uses it:
``TextMemos`` holds the facts normalisation and the block-link rewrite ask of every file
(handed to them as their ``memo``), ``KeptValues`` the values a transaction keeps by a kind
it names itself.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import is_, itemgetter, not_
from pathlib import Path
from typing import Callable, Iterable

from ..format.blocklinks import linked_ids
from ..format.normalize import definition_ids, has_local_label, line_end_ids
from .parsecache import store_for


def is_str_set(value: object) -> bool:
    """A frozenset of str: the shape of a stored id set (anything else is a miss)."""
    return type(value) is frozenset and all(map(is_, map(type, value), repeat(str)))


def is_str_tuple(value: object) -> bool:
    """A tuple of str: the shape of a stored id list (anything else is a miss)."""
    return isinstance(value, tuple) and all(map(isinstance, value, repeat(str)))


class TextMemo:
    """``compute(text)`` for the file at a path, remembered per path while its text stays the
    same. With ``kind``, also kept in the parse cache under that kind, keyed by the text's
    sha256 (``sha_of(rel, text)``); a stored value ``valid`` rejects is a miss."""

    __slots__ = ("name", "compute", "kind", "valid", "entries", "_root", "_sha_of")

    def __init__(self, name: str, compute: Callable[[str], object], root: Path | None = None,
                 sha_of: Callable[[str, str], str] | None = None, kind: str | None = None,
                 valid: Callable[[object], bool] | None = None) -> None:
        self.name = name
        self.compute = compute
        self.kind = kind
        self.valid = valid
        self.entries: dict[str, tuple[str, object]] = {}  # rel -> (text, value)
        self._root = root
        self._sha_of = sha_of

    def __call__(self, rel: str, text: str):
        hit = self.entries.get(rel)
        if hit is not None and hit[0] == text:
            return hit[1]
        if self.kind is None:
            value = self.compute(text)
        else:
            store = store_for(self._root)
            digest = self._sha_of(rel, text)
            value = store.derived(self.kind, rel, (digest,))
            if not self.valid(value):
                value = self.compute(text)
                store.put_derived(self.kind, rel, (digest,), value)
        self.entries[rel] = (text, value)
        return value

    def retain(self, names) -> None:
        """Forget the paths not in ``names``."""
        self.entries = without(self.entries, self.entries.keys() - names)

    def __repr__(self) -> str:
        return f"TextMemo({self.name!r}, kind={self.kind!r})"


class TextMemos:
    """The per-text facts ``normalize_tree`` and ``rewrite_block_links`` ask of every file
    (their ``memo``; ``normalize.TextFacts`` computes them without remembering): whether it
    still cites a local label and its line-end ids (the passthrough test), its definition ids
    (the labels to allocate around passed-through files) and the ids its block links may name.
    The two id sets are kept in the parse cache as well."""

    def __init__(self, root: Path, sha_of: Callable[[str, str], str]) -> None:
        self.has_local_label = TextMemo("has_local_label", has_local_label)
        self.line_end_ids = TextMemo("line_end_ids", line_end_ids, root, sha_of, kind="lineids", valid=is_str_set)
        self.definition_ids = TextMemo("definition_ids", definition_ids, root, sha_of, kind="defids", valid=is_str_set)
        self.linked_ids = TextMemo("linked_ids", linked_ids)

    def all(self) -> tuple[TextMemo, ...]:
        return (self.has_local_label, self.line_end_ids, self.definition_ids, self.linked_ids)

    def entry_count(self) -> int:
        return sum(len(memo.entries) for memo in self.all())

    def retain(self, names) -> None:
        for memo in self.all():
            memo.retain(names)


class KeptValues:
    """Values a transaction keeps per (kind, path) by the text they are a pure function of,
    in memory and in the parse cache under that kind (the caller names the kind: ``scan``,
    ``blinks``)."""

    def __init__(self, root: Path, sha_of: Callable[[str, str], str]) -> None:
        self.root = root
        self._sha_of = sha_of
        self.entries: dict[tuple[str, str], tuple[str, object]] = {}  # (kind, rel) -> (text, value)

    def kept(self, kind: str, rel: str, text: str, compute, valid):
        """``compute()``, a pure function of (``rel``, ``text``), remembered by the text in
        memory and in the parse cache (kind ``kind``; a stored value ``valid`` rejects is a miss)."""
        hit = self.entries.get((kind, rel))
        if hit is not None and hit[0] == text:
            return hit[1]
        store = store_for(self.root)
        digest = self._sha_of(rel, text)
        value = store.derived(kind, rel, (digest,))
        if value is None or not valid(value):
            value = compute()
            store.put_derived(kind, rel, (digest,), value)
        self.entries[(kind, rel)] = (text, value)
        return value

    def retain(self, names) -> None:
        entries = self.entries
        self.entries = without(entries, compress(entries, map(not_, map(names.__contains__, map(_REL, entries)))))


_REL = itemgetter(1)


def without(entries: dict, drop: Iterable) -> dict:
    """``entries`` without the keys in ``drop`` (which it holds): a new dict in the same order
    when there is any (a reader holding the old one never sees it change), else ``entries``."""
    drop = list(drop)
    if not drop:
        return entries
    out = dict(entries)
    for key in drop:
        del out[key]
    return out


__all__ = ["KeptValues", "TextMemo", "TextMemos", "is_str_set", "is_str_tuple", "without"]
