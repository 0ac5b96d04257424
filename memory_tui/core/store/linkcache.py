"""Block links of one memory root (memory spec §3.7): where each block id lives, and each
file's rewritten block links, kept from the last transaction's.

The locations of an edit are the last ones with the changed files' ids taken out and put
back (``Locations`` lays them over the shared last map); a file's rewrite is a function of
its path, its bytes and where the ids it links to live, and is kept by exactly that.
"""

from __future__ import annotations

import hashlib
import threading
from itertools import compress
from operator import is_not
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..format.blocklinks import block_id_locations, file_block_ids
from .memos import TextMemo, is_str_tuple, without
from .parsecache import store_for
from ..switches import Switches

_GONE = None  # a ``Locations`` delta value: the id is no longer anywhere
_ABSENT = object()
LOCATIONS_DELTA_MAX = 4096  # past this many ids laid over the base, a plain dict again


class Locations(Mapping):
    """``block_id_locations``'s id -> path map as a shared plain ``base`` (never changed)
    with ``delta`` laid over it (id -> path, or ``_GONE`` for an id taken out). Read-only."""

    __slots__ = ("base", "delta", "_len")

    def __init__(self, base: dict[str, str], delta: dict[str, str | None]) -> None:
        self.base, self.delta = base, delta
        size = len(base)
        for key, value in delta.items():
            if value is _GONE:
                size -= 1
            elif key not in base:
                size += 1
        self._len = size

    @classmethod
    def moved(cls, last: Mapping[str, str], gone: Iterable[str], arriving: Mapping[str, str]) -> Mapping[str, str]:
        """``last`` without the ids in ``gone`` (which it holds) and with ``arriving`` set."""
        if isinstance(last, cls):
            base, delta = last.base, dict(last.delta)
        else:
            base, delta = last, {}
        for key in gone:
            if key in base:
                delta[key] = _GONE
            else:
                del delta[key]
        for key, rel in arriving.items():
            if base.get(key, _ABSENT) == rel:
                delta.pop(key, None)
            else:
                delta[key] = rel
        if len(delta) > LOCATIONS_DELTA_MAX:
            return dict(cls(base, delta).items())
        return cls(base, delta) if delta else base

    def __getitem__(self, key: str) -> str:
        value = self.delta.get(key, _ABSENT)
        if value is _ABSENT:
            return self.base[key]
        if value is _GONE:
            raise KeyError(key)
        return value

    def get(self, key, default=None):
        value = self.delta.get(key, _ABSENT)
        if value is _ABSENT:
            return self.base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key) -> bool:
        value = self.delta.get(key, _ABSENT)
        return key in self.base if value is _ABSENT else value is not _GONE

    def __iter__(self):
        base, delta = self.base, self.delta
        for key in base:
            if delta.get(key, _ABSENT) is not _GONE:
                yield key
        for key, value in delta.items():
            if value is not _GONE and key not in base:
                yield key

    def __len__(self) -> int:
        return self._len



class BlockLinks:
    """Block-id locations and block-link rewrites of one memory root. Shares the workspace
    cache's lock."""

    def __init__(self, root: Path, lock: threading.RLock, sha_of: Callable[[str, str], str]) -> None:
        self.root = root
        self.lock = lock
        self._sha_of = sha_of
        # ``links.file_block_ids`` of a file, per path (and across processes in the parse
        # cache, by the text's sha256)
        self.file_ids = TextMemo("file_block_ids", file_block_ids, root, sha_of, kind="ids", valid=is_str_tuple)
        self.rewrites: dict[str, tuple[tuple[str, str], str]] = {}  # rel -> ((sha256, locations key), rewrite)
        self.rewrites_fast: dict[str, tuple[str, tuple, str]] = {}  # rel -> (text object, locations, rewrite)
        # the last block-id locations: (paths, their texts, each one's file ids, id -> rel, no id in two files)
        self._locations: tuple[tuple[str, ...], list[str], list[tuple[str, ...]], Mapping[str, str], bool] | None = None

    def block_locations(self, texts: Mapping[str, str], switches: Switches) -> dict[str, str]:
        """``links.block_id_locations(texts)`` (topics-relative keys), from the last call's
        when only a few texts changed and no id lives in two files: the changed files' ids are
        taken out and put back, the rest is as it was."""

        def full() -> dict[str, str]:
            return block_id_locations(texts, self.file_ids)

        def incremental() -> dict[str, str]:
            with self.lock:
                last = self._locations
            if last is not None and last[4]:
                where = self._moved_locations(last, texts)
                if where is not None:
                    return where
            return self._full_locations(texts)

        mode = switches
        if not mode.check:
            return mode.choose("block-link locations", incremental, full)
        # check mode hands on the incremental map (derive raises unless it equals the full
        # one): ``rewrite_block_links`` tells the ids that moved from how it lies over the last
        kept = incremental()
        mode.choose("block-link locations", lambda: kept, full)
        return kept

    def _full_locations(self, texts: Mapping[str, str]) -> dict[str, str]:
        where = block_id_locations(texts, self.file_ids)
        rels = tuple(texts)
        values = list(texts.values())
        ids = list(map(self.file_ids, rels, values))
        dupfree = len(where) == sum(map(len, map(set, ids)))
        with self.lock:
            self._locations = (rels, values, ids, where, dupfree)
        return where

    def _moved_locations(self, last, texts: Mapping[str, str]) -> Mapping[str, str] | None:
        """The last call's locations with the changed files' ids taken out and put back, as
        a ``Locations`` over the last plain map (copying the 80 000 entries on every edit
        touched every key's reference count); ``None`` when that cannot be decided here."""
        rels_old, texts_old, ids_old, where_old, _ = last
        rels = tuple(texts)
        values = list(texts.values())
        if rels == rels_old:
            # one C-level identity pass; only texts that are other objects are compared
            changed_at = [i for i in compress(range(len(rels)), map(is_not, values, texts_old))
                          if values[i] != texts_old[i]]
            changed = [rels[i] for i in changed_at]
            removed: list[str] = []
            ids = ids_old
        else:
            at_old = dict(zip(rels_old, range(len(rels_old))))
            changed = [rel for rel, text in zip(rels, values)
                       if (k := at_old.get(rel)) is None or (texts_old[k] is not text and texts_old[k] != text)]
            removed = [rel for rel in rels_old if rel not in texts]
            ids = None
        if len(changed) + len(removed) > 64 or any(rel.startswith("topics/") for rel in changed):
            return None
        if not changed and not removed:
            with self.lock:
                self._locations = (rels, values, ids_old if ids is not None else list(map(self.file_ids, rels, values)),
                                   where_old, True)
            return where_old
        old_ids = dict(zip(rels_old, ids_old)) if ids is None else None
        leaving: dict[str, str] = {}
        for rel in (*changed, *removed):
            before = old_ids.get(rel) if old_ids is not None else ids_old[rels_old.index(rel)]
            if before is not None:
                leaving.update((bid, rel) for bid in before)
        arriving: dict[str, str] = {}
        new_ids: dict[str, tuple[str, ...]] = {}
        for rel in changed:
            found = new_ids[rel] = self.file_ids(rel, texts[rel])
            for bid in found:
                if arriving.setdefault(bid, rel) != rel or (bid in where_old and bid not in leaving):
                    return None  # an id in two files: the first in tree order wins, decided in full
        if ids is None:
            ids = [new_ids[rel] if rel in new_ids else (old_ids[rel] if rel in old_ids else self.file_ids(rel, text))
                   for rel, text in zip(rels, values)]
        else:
            ids = list(ids)
            for i, rel in zip(changed_at, changed):
                ids[i] = new_ids[rel]
        where = Locations.moved(where_old, leaving.keys() - arriving.keys(), arriving)
        with self.lock:
            self._locations = (rels, values, ids, where, True)
        return where

    def link_rewrite(self, rel: str, text: str, locations: tuple, compute) -> str:
        """``links.rewrite_block_links``' memo of one file: its output is a function of
        the path, the bytes and ``locations`` (the files holding the ids it may link to)."""
        fast = self.rewrites_fast.get(rel)
        if fast is not None and fast[0] is text and fast[1] == locations:
            return fast[2]  # the very text, its ids where they were: the same rewrite
        loc_key = hashlib.sha256(repr(locations).encode("utf-8", "surrogatepass")).hexdigest()[:32]
        key = (self._sha_of(rel, text), loc_key)
        hit = self.rewrites.get(rel)
        if hit is not None and hit[0] == key:
            value = hit[1]
        else:
            store = store_for(self.root)
            value = store.derived("links", rel, key)
            if type(value) is not str:
                value = compute()
                store.put_derived("links", rel, key, value)
        if value is not text and value == text:
            # a rewrite that changes nothing hands back the very text: the passes after it
            # (the tree, the stage's writes) then find the file unchanged by identity, instead
            # of an equal copy that alternates with the committed text from edit to edit
            value = text
        self.rewrites[rel] = (key, value)
        self.rewrites_fast[rel] = (text, locations, value)
        return value

    def entry_count(self) -> int:
        return len(self.file_ids.entries) + len(self.rewrites) + len(self.rewrites_fast)

    def retain(self, names) -> None:
        self.file_ids.retain(names)
        self.rewrites = without(self.rewrites, self.rewrites.keys() - names)
        self.rewrites_fast = without(self.rewrites_fast, self.rewrites_fast.keys() - names)


__all__ = ["BlockLinks", "LOCATIONS_DELTA_MAX", "Locations"]
