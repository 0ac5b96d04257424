"""The stage: a private copy of the committed workspace in which one transaction builds its
result (§5.2), where the committed workspace is found, and whether it still has the revision a
stage was read at.

Staged sources: unrestricted writer stages copy ``sources/`` (read-only 0444); ``update``
with ``sources`` (and a ``Provenance``) copies only the archives it appends to and indexes
them over the committed index (``Stage.stage_sources``); otherwise validation reads the
committed archives through a cached, stat-keyed ``SourceIndex`` (identical bytes, pitfall 4).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import compress
from operator import is_not
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from ..format.errors import CORRUPT_FILE, MemoryError, Problem
from ..format.paths import Layout, check_writable
from ..format.sources import SourceIndex, SourceRecord, proven
from ..format.topics import TopicTree, read_topic_texts
from ..fsutil import named_errors
from ..store.confine import check_write_confinement, refuse_linked_path, workspace_root
from ..store.fsmonitor import monitor_for
from ..store.install import FILE_TARGETS, InstallPlan, make_stage_dir, plan_install, recover, remove_stage_dir
from ..store.parsecache import store_for
from ..store.revision import PendingRevision, revision_text
from ..store.txcache import WorkspaceCache, cache_for
from ..store.txmode import in_one_shot
from ..switches import IncrementalMismatch, Switches
from ..store.walk import any_racy, revision_walk, stamps_under
from .result import raise_first
from .roots import memory_root, open_locked  # re-exported: the stage's callers find them here too
from ..cache.registry import keeps
from ..cache.stamp import stamp_of


# ------------------------------------------------------------------------------- locating


def state_dir(root: Path) -> Path:
    return root.parent


# ---------------------------------------------------------------------------------- stage

# Set while a validate-only transaction makes its stages: nothing of a check is written into
# the workspace, so its stage lives in the system temp dir (``make_stage_dir(outside=True)``).
_CHECK_ONLY: ContextVar[bool] = ContextVar("memory_tui_check_only", default=False)


@contextmanager
def checking_only(on: bool = True) -> Iterator[None]:
    token = _CHECK_ONLY.set(on)
    try:
        yield
    finally:
        _CHECK_ONLY.reset(token)


_INDEX_CACHE: dict[str, SourceIndex] = keeps({})
# memory root -> (its index, the archive paths and stamps of the last walk that found it current)
_INDEX_SEEN: dict[str, tuple[SourceIndex, list[str], list[tuple[int, int, int, int]]]] = keeps({})


def source_index(root: Path, stamps: Mapping[str, tuple[int, int, int, int]] | None = None,
                 switches: Switches | None = None) -> SourceIndex:
    """The committed archives, scanned once and refreshed by their stamps (``cache.stamp``).

    ``stamps``: ``revision_walk`` of the workspace, just taken. Its ``sources/`` entries are the
    very files the index walks (regular ``*.md`` files, symlinks not followed), so when they
    all carry the keys the last index was made from, that index is what a walk would return,
    and ``sources/`` is not walked a second time. Without ``stamps`` the archives are walked
    (there is nothing to choose between); with them, ``switches`` (the caller's) choose."""

    key = str(Path(root).resolve())
    previous = _INDEX_CACHE.get(key)

    def full() -> SourceIndex:
        return store_for(root).source_index(previous=previous)

    def incremental() -> SourceIndex:
        if previous is not None and stamps is not None and Path(previous.root) == Path(root):
            rels, listed = stamps_under(stamps, "sources/", ".md")
            seen = _INDEX_SEEN.get(key)
            # the stamps this index was last found current with: one C-level comparison of the
            # two lists (equal stamps have equal keys) instead of a lookup per archive
            if seen is not None and seen[0] is previous and seen[1] == rels and seen[2] == listed:
                return previous
            files = previous.files
            if len(rels) == len(files):
                for rel, st in zip(rels, listed):
                    entry = files.get(rel)
                    if entry is None or entry.key != st or not proven(entry):
                        break
                else:
                    _INDEX_SEEN[key] = (previous, rels, listed)
                    return previous
        return full()

    if stamps is None:
        index = full()
    else:
        if switches is None:
            raise TypeError("source_index: stamps given without the switches that choose how to use them")
        index = switches.choose("source index", incremental, full, lambda a, b: a is b or (a.files == b.files))
    _INDEX_CACHE[key] = index
    return index


def _copy_entry(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=False, ignore_dangling_symlinks=True)
    elif src.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


# Set while ``optimistic.transact`` makes the stage of its optimistic pass. Such a stage is
# installed only after ``unchanged`` walked the workspace under the lock and found the stamps
# (and symbolic links) the stage was built from -- or, for stamps inside the clock tick, the
# stage's revision recomputed from the files. A stage may take its stamps and revision from
# this process's last install (``WorkspaceCache.note_walk``: the stamps walked under that
# lock with the installed files stat-ed again, and the revision of exactly the bytes
# installed) instead of walking: everything it reads is then a function of those stamps
# (cached texts and parses are keyed by them) or read from files that, once the walk under the
# lock accepts, provably hold the bytes of that revision. A byte changed since by any writer,
# with or without the lock, moved a stamp (ctime cannot be set back) or, inside the tick, the
# revision, so the pass is refused and the transaction runs again under the lock from a fresh
# walk -- as when a writer slips in between two walks. A refusal found while making the stage
# is decided again on a fresh walk. What a writer without the lock does after the walk under
# the lock is as undetectable as before.
_OPTIMISTIC = threading.local()  # ``current``: this thread's ``OptimisticPass``, or none


class OptimisticPass:
    """The making of one optimistic pass's stage: ``remembered`` lets the stage start from the
    walk this process's last install left; ``reused`` says that it did."""

    __slots__ = ("remembered", "reused")

    def __init__(self, remembered: bool) -> None:
        self.remembered = remembered
        self.reused = False


@contextmanager
def optimistic_pass(remembered: bool) -> Iterator[OptimisticPass]:
    """While open, a ``Stage`` made on this thread belongs to an optimistic pass."""
    current = _OPTIMISTIC.current = OptimisticPass(remembered)
    try:
        yield current
    finally:
        _OPTIMISTIC.current = None


class Stage:
    """A private copy of the committed workspace in the system temp dir (§5.2)."""

    def __init__(
        self,
        root: Path,
        *,
        restricted: bool = False,
        allowed_refs: Iterable[str] | None = None,
        copy_sources: bool = False,
        link_topics: bool = False,
        switches: Switches,
    ) -> None:
        self.memory_root = Path(root)
        # the test switches this transaction was opened with, for everything it calls
        self.switches = switches
        self.layout = Layout(self.memory_root)
        topics_entry = self.memory_root / "topics"
        if (topics_entry.exists() or topics_entry.is_symlink()) and not topics_entry.is_dir():
            # the install would replace it with a directory, losing whatever it is
            raise MemoryError(CORRUPT_FILE, "topics is not a directory; move it away first", path="topics")
        self.restricted = restricted
        self.allowed_refs = frozenset(allowed_refs) if allowed_refs is not None else (frozenset() if restricted else None)
        # The revision first: a stage prepared outside the lock is installed only if the
        # workspace still has this revision when the lock is taken (so nothing read below
        # can come from a newer state than the one installed over).
        self.cache: WorkspaceCache = cache_for(self.memory_root)
        self._walk()
        # baseline next, from the committed tree, before anything is copied; unchanged files
        # are neither read nor parsed again (txcache)
        self.index = source_index(self.memory_root, self.stamps, self.switches)
        self.token = self.cache.observe_index(self.index)
        self.cache.load_disk(self.layout)
        self.committed_texts, self.committed_shas, read_problems = self.cache.read_topics(
            self.layout.topics, walk=(self.stamps, self.links), switches=self.switches)
        self.baseline: TopicTree = self.cache.tree(self.committed_texts, self.index, self.token, self.committed_shas,
                                                   switches=self.switches)
        self.baseline_problems = tuple(read_problems) + tuple(self.baseline.problems)
        # A linked topic entry refuses every transaction, whatever it touches: a copied stage
        # would follow the link and install its target's bytes, a linked one would replace the
        # link on a write and miss the records behind it on every lookup.
        raise_first([p for p in read_problems if p.details.get("kind") == "symlink"])
        check_write_confinement(self.memory_root)
        self._stage_dir = make_stage_dir(self.layout, outside=_CHECK_ONLY.get())
        self.path = self._stage_dir.path
        self.sources_copied = False
        self.sources_staged = False  # stage/sources holds archives appended by this transaction
        self.discarded = False
        # ``link_topics``: the stage's topics/ and timeline/ are *sparse*: they hold only the
        # files this transaction adds or replaces (``_drops`` names the ones it removes), the
        # rest is the committed tree, which nothing here links, copies or touches (a hard link
        # would change every committed file's ctime, and so its stamp, on each edit). Only for
        # stages whose every write goes through this module (never for a writer's stage,
        # whose agent edits a full copy in place).
        self.linked = link_topics
        self.sparse = link_topics and self.switches.sparse_stage
        self._drops: set[str] = set()
        self._timeline_drops: set[str] = set()
        self._texts: dict[str, str] | None = None
        self._touched: set[str] = set()  # the paths ``_put`` or ``_drop`` changed in ``_texts``
        # Committed topic files that could not be read or decoded are not in ``_texts`` and
        # not linked into the stage; until the edit replaces or deletes them they fail the
        # transaction (else the install would silently delete them).
        self._unread: dict[str | None, list[Problem]] = {}
        if link_topics:
            for problem in read_problems:
                self._unread.setdefault(problem.path, []).append(problem)
        self._fill(link_topics, copy_sources)

    def _walk(self) -> None:
        """The stamps, links and revision the stage is read at."""
        # A stage of the optimistic pass, whose install waits for ``unchanged``'s walk under the
        # lock, may start from the stamps this process's last install left instead of walking:
        # that walk compares the workspace with the state the stage was built from either way
        # (see ``_OPTIMISTIC``). Taken once: a stage made after a refusal walks.
        attempt = getattr(_OPTIMISTIC, "current", None)
        walked = self.cache.take_walk() if attempt is not None and attempt.remembered and not self.switches.full else None
        if walked is not None:
            attempt.reused = True
            self.stamps, self.links, remembered, self.monitor_generation = walked
        else:
            # the file-system monitor's generation before the walk: the stamps are true at least from then on
            watch = monitor_for(self.memory_root, switches=self.switches)
            self.monitor_generation = watch.drain() if watch is not None and not self.switches.full else None
            self.stamps, self.links = revision_walk(self.memory_root, switches=self.switches)
        self.locked_stamps: dict[str, tuple[int, int, int, int]] | None = None  # walked again under the lock
        self.locked_links: tuple[str, ...] | None = None
        self.locked_generation: int | None = None  # the monitor's, when the lock was taken
        now = time.time_ns()
        self.stamps_racy = any_racy(self.stamps, now)
        # remembered: the revision of the bytes installed, never of what the files hold now (a
        # file changed since is then found by the walk under the lock, or by its revision);
        # possibly not hashed yet (``PendingRevision``: see ``revision``)
        self.revision_ref: str | PendingRevision = remembered if walked is not None else self.cache.revision(self.stamps, switches=self.switches)

    def _fill(self, link_topics: bool, copy_sources: bool) -> None:
        """Lay the stage's own files out (discarded on failure)."""
        try:
            topics = self.memory_root / "topics"
            if link_topics:
                self._texts = dict(self.committed_texts)
                (self.path / "topics").mkdir()
                if not self.sparse:  # the full-rebuild mode: every committed text, as read
                    for rel, text in self.committed_texts.items():
                        target = self.path / "topics" / rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_text(text, encoding="utf-8", newline="")
            elif topics.is_dir():
                _copy_entry(topics, self.path / "topics")
            else:
                (self.path / "topics").mkdir()
            # timeline/ is not copied: every transaction deletes and regenerates it (§8.1).
            # A sparse stage does not copy the root files either (``relations.json`` and
            # ``runtime.json`` grow with the workspace, and each edit would copy them, then
            # compare them back): it reads the committed ones, whose bytes the walk under the
            # lock proves, and holds only those it writes, until ``own_root_files``.
            self.root_owned = False
            if not self.sparse:
                self.own_root_files()
            if copy_sources and not self.restricted:
                self.ensure_sources()
        except BaseException:
            self.discard()
            raise

    @property
    def revision(self) -> str:
        """The revision the stage was read at, as a string (hashed now if the last install
        left it pending; the transaction itself compares by ``revision_ref``)."""
        text = revision_text(self.revision_ref)
        assert text is not None
        return text

    def own_root_files(self) -> None:
        """Copy the committed root files (derived views, legacy commitments, runtime.json) into
        the stage, once: before anything that reads or writes the stage as a whole tree."""
        if self.root_owned:
            return
        for name in (*FILE_TARGETS, f"{self.layout.runtime_name}/runtime.json"):
            dest = self.path / name
            if not dest.exists():  # a file the stage already wrote stays
                _copy_entry(self.memory_root / name, dest)
        self.root_owned = True

    def root_file(self, name: str) -> Path:
        """Where this stage's root file ``name`` (``FILE_TARGETS``, ``<rt>/runtime.json``) is
        read: the stage's copy when it holds one, else the committed file (a sparse stage's
        untouched root file)."""
        staged = self.path / name
        return staged if self.root_owned or os.path.lexists(staged) else self.memory_root / name

    # -- sources ------------------------------------------------------------------------
    def ensure_sources(self) -> Path:
        """Copy ``sources/`` into the stage, read-only (0444); refused for restricted stages."""
        if self.restricted:
            raise MemoryError("WRITER_PRECONDITION_FAILED", "a restricted stage has no sources/")
        self.own_root_files()
        dest = self.path / "sources"
        if not self.sources_copied:
            src = self.memory_root / "sources"
            if src.is_dir():
                _copy_entry(src, dest)
            else:
                dest.mkdir()
            for dirpath, _, filenames in os.walk(dest):
                for name in filenames:
                    os.chmod(os.path.join(dirpath, name), 0o444)
            self.sources_copied = True
        return dest

    def stage_sources(self, records: list[SourceRecord]) -> tuple[str, ...]:
        """Archive ``records`` into the stage (§5.3 step 4): ``stage/sources`` receives copies
        of just the archives appended to, the appender runs there (idempotent: ids already
        framed are skipped), and ``self.index`` becomes the committed index plus those files,
        so validation sees the new frames and the install replaces exactly those archives
        (sources stay append-only). Returns the source ids of ``records``."""
        from ..format.sources import APPEND_REFUSED, archive_path, index_file
        from ..store.archives import append_records

        if self.restricted:
            raise MemoryError("WRITER_PRECONDITION_FAILED", "a restricted stage cannot archive sources")
        if self.sources_copied:
            raise MemoryError("WRITER_PRECONDITION_FAILED", "this stage already holds a full copy of sources/")
        self.own_root_files()  # the appender keeps its temporary files in the stage's runtime dir
        committed_sources = (self.memory_root / "sources").resolve()
        dest = self.path / "sources"
        dest.mkdir(exist_ok=True)
        for rel in sorted({archive_path(r.source_id) for r in records}):
            src = self.memory_root / rel
            try:
                src.parent.resolve().relative_to(committed_sources)
            except ValueError:
                raise MemoryError(APPEND_REFUSED, "source archive path escapes sources/", path=rel) from None
            if src.is_symlink() or (src.exists() and not src.is_file()):
                raise MemoryError(APPEND_REFUSED, f"invalid or truncated v2 archive: {rel}", path=rel,
                                  details={"reason": "not a regular file"})
            if src.is_file():
                target = self.path / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, target)
        result = append_records(self.path, records, runtime_dir=self.path / self.layout.runtime_name,
                                existing_root=self.memory_root)
        files = dict(self.index.files)
        for rel in result.changed_paths:
            path = self.path / rel
            st = path.stat()
            files[rel] = index_file(rel, path.read_bytes(), stamp_of(st), files.get(rel))
        if result.changed_paths:
            self.index = SourceIndex.from_files(self.memory_root, files)
            self.token = self.cache.observe_index(self.index)
        self.sources_staged = True
        return tuple(r.source_id for r in records)

    # -- topics -------------------------------------------------------------------------
    @property
    def topics(self) -> Path:
        return self.path / "topics"

    def topic_texts(self) -> tuple[dict[str, str], list[Problem]]:
        if self._texts is not None:
            return dict(self._texts), [p for problems in self._unread.values() for p in problems]
        return read_topic_texts(self.topics)

    @property
    def touched(self) -> frozenset[str] | None:
        """The paths whose text in ``topic_texts`` may differ from ``committed_texts``: every
        other one is the very committed text object (``_texts`` starts as a copy of them and
        only ``_put`` and ``_drop`` change it). ``None`` when the texts are read from the
        stage's files (a writer's stage)."""
        return frozenset(self._touched) if self._texts is not None else None

    def changes(self) -> tuple[dict[str, str], frozenset[str]]:
        """The staged topic texts, and the paths whose text differs from the committed one. A
        file that cannot be read refuses the transaction: it leaves nothing to check."""
        texts, problems = self.topic_texts()
        raise_first(problems)
        committed, touched = self.committed_texts, self.touched

        def differing(paths: Iterable[str]) -> frozenset[str]:
            return frozenset(rel for rel in paths if texts.get(rel) != committed.get(rel))

        return texts, self.switches.choose("changed topics",
                             lambda: differing(set(texts) | set(committed) if touched is None else touched),
                             lambda: differing(set(texts) | set(committed)))

    def _refuse_linked(self, rel: str) -> None:
        """A committed symlink on the way to ``rel`` (the topic or a folder above it) is
        refused: replacing it would destroy the link, writing into it would leave the workspace."""
        refuse_linked_path(self.memory_root, rel)

    def write_topic(self, rel: str, text: str) -> None:
        rel = check_writable(rel)
        self._refuse_linked(rel)
        self._put(rel[len("topics/"):], text)

    def _put(self, topic_rel: str, text: str) -> None:
        # Every staged topic write comes here (an edit, a record op, a writer's commit): a
        # committed symlink at the path is refused here, not per verb; replacing it would drop
        # the linked file's records and clear the problem that refuses the transaction.
        self._refuse_linked("topics/" + topic_rel)
        target = self.topics / topic_rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_file() or target.is_symlink():
            target.unlink()
        with named_errors(target):
            target.write_text(text, encoding="utf-8", newline="")
        self._unread.pop("topics/" + topic_rel, None)
        self._drops.discard(topic_rel)
        if self._texts is not None:
            self._texts[topic_rel] = text
            self._touched.add(topic_rel)

    def _drop(self, topic_rel: str) -> None:
        self._refuse_linked("topics/" + topic_rel)
        target = self.topics / topic_rel
        if self.linked:
            if target.is_file():
                target.unlink()
            self._drops.add(topic_rel)
        else:
            target.unlink()
        if self._texts is not None:
            self._texts.pop(topic_rel, None)
            self._touched.add(topic_rel)

    def committed_entries(self, top: str) -> list[str]:
        """Workspace-relative paths of every committed file and symbolic link under ``top``
        when the stage was read."""
        prefix = top + "/"
        return [*stamps_under(self.stamps, prefix, "")[0], *(rel for rel in self.links if rel.startswith(prefix))]

    def sparse_trees(self) -> dict[str, frozenset[str]] | None:
        """For ``plan_install``: the trees this stage holds sparsely, with what each drops."""
        if not self.sparse:
            return None
        return {"topics": frozenset(self._drops), "timeline": frozenset(self._timeline_drops)}

    def delete_topic(self, rel: str) -> bool:
        rel = check_writable(rel)
        self._refuse_linked(rel)
        target = self.path / rel
        if self.linked:
            topic_rel = rel[len("topics/"):]
            if self._texts is not None and topic_rel in self._texts:
                self._drop(topic_rel)
                return True
            if self._unread.pop(rel, None) is not None:
                self._drops.add(topic_rel)  # an unreadable committed file: the install removes it
                return True
            return False
        if target.is_file():
            self._drop(rel[len("topics/"):])
            return True
        return False

    # -- what the transaction derived --------------------------------------------------
    def write_texts(self, texts: Mapping[str, str], existing: Mapping[str, str] | None = None) -> None:
        """Make the staged topics hold exactly ``texts`` (``existing``: what they hold now)."""
        if existing is None:
            existing, _ = self.topic_texts()
        keys = list(texts)
        if keys == list(existing):
            # the same paths in the same order (an edit that adds or removes no file): the texts
            # the normaliser and the link rewrite left alone are the very objects given, so one
            # C-level identity pass finds the few to compare
            now, was = list(texts.values()), list(existing.values())
            puts = [keys[i] for i in compress(range(len(keys)), map(is_not, now, was)) if now[i] != was[i]]
        else:
            for rel in [rel for rel in existing if rel not in texts]:
                self._drop(rel)
            puts = [rel for rel, text in texts.items() if existing.get(rel) != text]
        for rel in puts:
            self._put(rel, texts[rel])
        # empty directories left by deleted topics are not part of the tree
        for dirpath, dirnames, filenames in sorted(os.walk(self.topics), key=lambda t: -len(t[0])):
            if dirpath != str(self.topics) and not os.listdir(dirpath):
                os.rmdir(dirpath)

    def write_views(self, files: Mapping[str, str]) -> None:
        """Write the derived views (workspace-relative ``files``); timeline/ is made anew."""
        from ..format.views import TIMELINE_DIR

        timeline = self.path / TIMELINE_DIR
        if timeline.exists():
            shutil.rmtree(timeline)
        if self.sparse:
            # a sparse timeline/: only the files whose text differs from the committed one
            self._timeline_drops = {rel[len(TIMELINE_DIR) + 1:] for rel in self.committed_entries(TIMELINE_DIR)
                                    if rel not in files}
            files = {rel: text for rel, text in files.items()
                     if not self.cache.committed_equals(rel, self.stamps.get(rel), text)}
        for rel, text in files.items():
            target = self.path / rel
            with named_errors(target):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8", newline="")

    def plan(self) -> InstallPlan:
        """The install that makes the committed workspace what this stage holds."""
        return plan_install(self.memory_root, self.path, compare_sources=self.sources_staged, sparse=self.sparse_trees())

    def discard(self) -> None:
        if self.discarded:
            return
        self.discarded = True
        if self.path.exists():
            for dirpath, dirnames, filenames in os.walk(self.path):
                for name in dirnames:
                    os.chmod(os.path.join(dirpath, name), 0o700)
                for name in filenames:
                    try:
                        os.chmod(os.path.join(dirpath, name), 0o644)
                    except OSError:
                        pass
            shutil.rmtree(self.path, ignore_errors=True)
        remove_stage_dir(self._stage_dir)

    def __enter__(self) -> "Stage":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.discard()


def revision_stamps(root: Path, switches: Switches) -> dict[str, tuple[int, int, int, int]]:
    """Stat stamps of every file that makes up the revision (ctime included: no tool can set it)."""
    return revision_walk(root, switches=switches)[0]


def unchanged(stage: Stage) -> bool:
    """The workspace still has the revision ``stage`` was read at (cheap when no file was
    touched; with a file-system monitor that recorded no change since the stage's stamps were
    true, without even a walk). Call under the write lock."""
    root = stage.memory_root
    mode = stage.switches
    watch = monitor_for(root, create=not in_one_shot(), switches=mode) if not mode.full else None
    generation = stage.locked_generation = watch.drain() if watch is not None else None
    if generation is not None and generation == stage.monitor_generation:
        if mode.check and not _unchanged_by_walk(stage):
            raise IncrementalMismatch("the file-system monitor recorded no change, but the walk under the lock found one")
        stage.locked_stamps, stage.locked_links = stage.stamps, stage.links
        return True
    return _unchanged_by_walk(stage)


def _unchanged_by_walk(stage: Stage) -> bool:
    root = stage.memory_root
    stamps, links = revision_walk(root, switches=stage.switches)  # one walk: the revision below is of these very stamps
    stage.locked_stamps, stage.locked_links = stamps, links
    if links != stage.links:
        return False  # a link appeared or vanished: the stage may have read through it
    if stamps == stage.stamps and (not stage.stamps_racy or (
            not stage.switches.full and stage.cache.holds_revision(stamps, stage.revision_ref))):
        return True  # inside the clock tick only the files young then are read again, not the stream
    return stage.cache.revision(stamps, switches=stage.switches) == stage.revision
