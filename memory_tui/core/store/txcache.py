"""What a transaction may reuse from the previous one (a one-topic edit on a large workspace
stays fast), without giving up byte-compatibility: one ``WorkspaceCache`` per memory root,
in-process, composed of parts that each own one kind of fact and the memos it keeps.

* ``revision.RevisionChain``: the workspace revision, resumed from the last one's chain.
* ``committed.CommittedFiles``: committed topic texts and values made from one file's bytes,
  keyed by file stamps ``(mtime_ns, size, inode, ctime_ns)``: an unchanged file is not read again.
* ``treecache.TreeCache``: parsed topics keyed by ``(path, sha256 of the text)`` and a
  signature of the source archives the topic's links depend on, the assembled tree, the
  source-ref checks of the parses.
* ``linkcache.BlockLinks``: where each block id lives, and each file's block-link rewrite.
* ``memos.TextMemos`` / ``memos.KeptValues``: named per-text facts and values kept by kind.
* ``proofs.CanonicalProofs``: the texts for which normalising was observed to be the identity
  (persisted across processes in the runtime dir).

Every cache is keyed by content or checks the text it was made from, so ``retain`` only bounds
memory: it forgets the entries of texts no longer committed, in every part at once.
"""

from __future__ import annotations

import threading
from itertools import compress
from operator import is_not
from pathlib import Path
from typing import Iterable, Mapping

from ..format.paths import Layout
from ..format.sources import SourceIndex
from ..format.topics import Topic, TopicTree
from .committed import CommittedFiles
from .fsmonitor import forget_monitors
from .linkcache import BlockLinks
from .memos import KeptValues, TextMemos
from .parsecache import forget_in_process, store_for
from .proofs import CanonicalProofs
from .revision import PendingRevision, RevisionChain, RevisionJob
from .treecache import ParsedEntry, TreeCache
from ..switches import Switches
from .viewcache import stored_parts, view_cache_for
from .viewcache import forget_in_process as forget_views
from .walk import Stamp
from ..cache.registry import keeps

RETAIN_SLACK = 64  # cached entries beyond what the last retain left before ``retain_lazily`` prunes


class WorkspaceCache:
    """Per memory root; use through :func:`cache_for`. Thread-safe by one lock, which every
    part shares. The methods a transaction calls are handed to the part that owns the fact."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.lock = threading.RLock()
        self.committed = CommittedFiles(self.root, self.lock)
        sha_of = self.committed.sha_of
        self.revisions = RevisionChain(self.root, self.lock)
        self.trees = TreeCache(self.root, self.lock, self.committed)
        self.links = BlockLinks(self.root, self.lock, sha_of)
        self.memo = TextMemos(self.root, sha_of)  # ``normalize_tree``'s and ``rewrite_block_links``' memo
        self.file_ids = self.links.file_ids  # ``links.file_block_ids`` of a file, remembered
        self.values = KeptValues(self.root, sha_of)
        self.canonical = CanonicalProofs(self.trees, self.committed)
        # ``retain``'s last live paths, their text objects and (path, sha256) keys, aligned
        self._retained: tuple[tuple[str, ...], list[str], list[tuple[str, str]]] | None = None
        self._retained_size = 0  # cached entries the last ``retain`` left (``retain_lazily``)

    # -- the revision (``RevisionChain``) -----------------------------------------------
    def revision(self, stamps: Mapping[str, tuple], installed: bool = False, *, switches: Switches) -> str:
        return self.revisions.revision(stamps, installed, switches=switches)

    def note_walk(self, stamps: Mapping[str, Stamp], links: tuple[str, ...], revision: object,
                  generation: int | None = None) -> None:
        self.revisions.note_walk(stamps, links, revision, generation)

    def take_walk(self) -> tuple[dict[str, Stamp], tuple[str, ...], object, int | None] | None:
        return self.revisions.take_walk()

    def start_revision(self, before: Mapping[str, Stamp], changes: Mapping[str, bytes | None], *,
                       switches: Switches) -> RevisionJob:
        return self.revisions.start_revision(before, changes, switches=switches)

    def can_defer(self, switches: Switches) -> bool:
        return self.revisions.can_defer(switches)

    def defer_revision(self, stamps: Mapping[str, Stamp], puts: Mapping[str, bytes], *,
                       switches: Switches) -> PendingRevision | str | None:
        return self.revisions.defer_revision(stamps, puts, switches=switches)

    def holds_revision(self, stamps: Mapping[str, Stamp], revision: str) -> bool:
        return self.revisions.holds_revision(stamps, revision)

    # -- committed bytes (``CommittedFiles``) --------------------------------------------
    def read_topics(self, topics_dir: Path, walk: tuple[Mapping[str, Stamp], tuple[str, ...]] | None = None, *,
                    switches: Switches):
        return self.committed.read_topics(topics_dir, walk, switches=switches)

    def by_bytes(self, key: str, path: Path, load):
        return self.committed.by_bytes(key, path, load)

    def by_stamp(self, key: str, path: Path, stamp: Stamp | None, load):
        return self.committed.by_stamp(key, path, stamp, load)

    def committed_equals(self, rel: str, stamp: Stamp | None, text: str) -> bool:
        return self.committed.committed_equals(rel, stamp, text)

    # -- parses and trees (``TreeCache``) ------------------------------------------------
    def observe_index(self, index: SourceIndex) -> object:
        return self.trees.observe_index(index)

    def entry(self, rel: str, text: str, index: SourceIndex, token: object, digest: str | None = None) -> ParsedEntry:
        return self.trees.entry(rel, text, index, token, digest)

    def tree(self, texts: Mapping[str, str], index: SourceIndex, token: object,
             shas: Mapping[str, str] | None = None, *, switches: Switches) -> TopicTree:
        return self.trees.tree(texts, index, token, shas, switches=switches)

    def refs_ok(self, topic: Topic, index: SourceIndex) -> bool:
        return self.trees.refs_ok(topic, index)

    def refs_unfine(self, topics: tuple[Topic, ...], exclude: set[str], index: SourceIndex) -> set[str]:
        return self.trees.refs_unfine(topics, exclude, index)

    def order_covers(self, tree: TopicTree, state: object) -> bool:
        return self.trees.order_covers(tree, state)

    def note_order_covers(self, tree: TopicTree, state: object) -> None:
        self.trees.note_order_covers(tree, state)

    # -- block links (``BlockLinks``) and kept values ------------------------------------
    def block_locations(self, texts: Mapping[str, str], switches: Switches) -> dict[str, str]:
        return self.links.block_locations(texts, switches)

    def link_rewrite(self, rel: str, text: str, locations: tuple, compute) -> str:
        return self.links.link_rewrite(rel, text, locations, compute)

    def kept(self, kind: str, rel: str, text: str, compute, valid):
        return self.values.kept(kind, rel, text, compute, valid)

    # -- derived views ----------------------------------------------------------------------
    def build_views(self, tree: TopicTree, *, switches: Switches, **kwargs):
        """``views.build_views(tree, **kwargs)`` from per-topic parts (``viewcache``): parts of
        topics parsed before come from memory or the parse cache, keyed by bytes + deps."""
        key_of = self.trees.key_of
        lookup, remember = stored_parts(store_for(self.root), key_of)
        # key_of lets the views start from (and keep) the persisted snapshot
        return view_cache_for(self.root).build(tree, lookup=lookup, store=remember, key_of=key_of, switches=switches,
                                               **kwargs)

    # -- canonical proofs (``CanonicalProofs``) ------------------------------------------
    def is_proven(self, rel: str, text: str, index: SourceIndex, token: object) -> bool:
        return self.canonical.is_proven(rel, text, index, token)

    def prove(self, rel: str, text: str, index: SourceIndex, token: object) -> None:
        self.canonical.prove(rel, text, index, token)

    def load_disk(self, layout: Layout) -> None:
        self.canonical.load(layout)

    def save_disk(self, layout: Layout) -> None:
        """Write what this process made to disk (best effort; only after an install): the
        parse cache (``parsecache``), the combined views' snapshot and the new proofs."""
        store_for(self.root).flush()
        view_cache_for(self.root).flush()
        self.canonical.save(layout)

    # -- retention ----------------------------------------------------------------------------
    def retain_lazily(self, live: Mapping[str, str], switches: Switches) -> None:
        """``retain(live)`` once the caches hold ``RETAIN_SLACK`` entries more than the last
        ``retain`` left them, else nothing. Every cache is keyed by content or checks the text
        it was made from, so an entry for a text no longer committed is never handed out for
        another: forgetting it only bounds memory, and a transaction adds about two (its new
        parse and proof). Pruning on each one would cost a pass over every cached entry per
        edit; this way it runs once per some thirty edits. ``switches`` in ``full`` mode retains
        every time, as before."""
        if not switches.full and self._cached_entries() <= self._retained_size + RETAIN_SLACK:
            return
        self.retain(live)

    def _cached_entries(self) -> int:
        return (self.trees.entry_count() + self.canonical.entry_count() + self.links.entry_count()
                + self.memo.entry_count() + len(self.values.entries))

    def retain(self, live: Mapping[str, str], extra: Iterable[tuple[str, str]] = ()) -> None:
        """Forget entries for texts no longer committed (bounded memory).

        Each kept dict is the old one without the entries whose key is not live, in the same
        order (``test_edit_deltas_props`` compares it with a filter of one entry at a time).
        Every edit asks this of every cached entry, so the entries to drop are found by C-level
        passes (set differences over the keys, ``map``/``compress`` for the keys that hold a
        path inside), and the live texts' digests are reused for the very text objects the
        last call was given; a dict with nothing to drop is kept as it is."""
        rels = tuple(live)
        texts = list(live.values())
        sha_of = self.committed.sha_of
        last = self._retained
        if last is not None and last[0] == rels:
            keys = last[2]
            stale = list(compress(range(len(rels)), map(is_not, texts, last[1])))
            if stale:
                keys = list(keys)
                for i in stale:
                    keys[i] = (rels[i], sha_of(rels[i], texts[i]))
        else:
            keys = list(zip(rels, map(sha_of, rels, texts)))
        self._retained = (rels, texts, keys)
        keep = set(keys)
        keep.update(extra)
        names = live.keys() if isinstance(live, dict) else frozenset(rels)
        self.trees.retain(keep, names)
        self.canonical.retain(keep, live)
        self.links.retain(names)
        self.memo.retain(names)
        self.values.retain(names)
        self._retained_size = self._cached_entries()


_CACHES: dict[str, WorkspaceCache] = keeps({})
_CACHES_LOCK = threading.Lock()


def cache_for(root: Path) -> WorkspaceCache:
    key = str(Path(root).resolve())
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = WorkspaceCache(Path(root))
        return cache


def clear_caches() -> None:
    """Forget every in-process cache (tests; the on-disk proofs and parse cache stay): the
    cache kit's one ``forget``, which reaches every registered table and memo."""
    from ..cache.registry import forget

    forget()


__all__ = ["RETAIN_SLACK", "WorkspaceCache", "cache_for", "clear_caches"]
