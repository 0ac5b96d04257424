"""The one transaction path every change to the memory workspace goes through.

stage → (change) → normalise → validate → rebuild views → plan → crash-safe install → git.

Entry points (all share ``_synchronize``):

* ``staged_edit``   hand edit / delete of one ``topics/**/*.md`` (editor, CLI ``edit``).
* ``update``        OpenProgram's structured transaction (§5.3): compare-and-set on revision.
* ``open_stage`` + ``commit_edits``   writers (agent commit, §5.5).
* ``rebuild_views`` ``views --rebuild``.
* ``validate_only=True`` on any of them: the same checks, nothing installed.

Citation rules (pitfall 5) differ by entry point and every rejection names the rule:

* hand edit: a paragraph may cite any existing, valid source; a source new to a block must
  be trusted;
* ``memory_changes`` record ops: any trusted source declared in the ops or archived now;
* whole-file ``changes`` / ``patch``: only sources archived in this same transaction;
* writers (restricted stage): only the batch's source ids.

Staged sources: unrestricted writer stages copy ``sources/`` (read-only 0444); ``update``
with ``sources`` (and a ``Provenance``) copies only the archives it appends to and indexes
them over the committed index (``Stage.stage_sources``); otherwise validation reads the
committed archives through a cached, stat-keyed ``SourceIndex`` (identical bytes, pitfall 4).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from itertools import compress, repeat
from operator import is_, is_not
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..store import gitlog
from ..format.errors import CORRUPT_FILE, MemoryError, Problem
from ..store.confine import check_write_confinement
from ..store.install import (FILE_TARGETS, InstallPlan, install, make_stage_dir, needs_recovery, plan_install, recover,
                      remove_stage_dir)
from ..store.lock import TIMEOUT_DEFAULT, TIMEOUT_EDIT, write_lock
from ..format.paths import Layout, check_writable
from ..format.sources import SourceIndex, SourceRecord
from ..format.topics import (CITATION_RE, DEFINITION_RE, Topic, TopicTree, Unit, is_error, iter_blocks, parse_topic, read_topic_texts,
                     topic_sort_key)
from ..store.parsecache import store_for
from ..store.fsmonitor import monitor_for
from ..store.revision import InstalledRevision, PendingRevision, RevisionJob, revision_text
from ..store.txcache import WorkspaceCache, cache_for
from ..store.txmode import IncrementalMismatch, derive, in_one_shot, tx_mode
from ..store.walk import any_racy, installed_stamps, revision_walk, stamps_under
from ..store import noopcache
from ..store.viewcache import mode as views_mode
from ..store.workspace import RuntimeState, dump_runtime_json, load_runtime_state, workspace_revision

GIT_MODES = ("auto", "on", "off")
CORE_MASTER = "topics/core.md"
MAX_REMOVED_LISTED = 5

RULE_HAND = "hand-edit rule: a paragraph may cite any existing valid source; a source new to a block must be trusted"
RULE_RECORDS = "memory_changes rule: new citations must be trusted sources declared in the ops or archived now"
RULE_FILES = "whole-file/patch rule: new citations must be sources archived in this same transaction"
RULE_WRITER = "writer rule: new citations must be source ids of this batch"
RULE_ORGANIZE = "organize rule: no new citations are allowed"

TRANSACTION_PROVIDER = "claude-code"  # §4.1: sources supplied to update()
AUTHORITY_REQUIRED = "creating a source requires complete persisted authority"
_SEP = "\x1f"  # U+001F, the field separator of §5.3 step 4


# ------------------------------------------------------------------------------- provenance


@dataclass(frozen=True)
class Provenance:
    """Who supplies ``update(..., sources=...)`` (§5.3 step 4): the persisted authority of the
    caller. ``origin_id`` names where the request came from (OpenProgram: ``<session>/<turn>``
    for the tool, ``owner-rest/memory-changes`` for the web route; which ``memory-tui apply`` uses too)."""

    principal_id: str
    speaker_kind: str
    speaker_id: str
    authority_tier: str
    origin_id: str
    speaker_display: str | None = None  # the label in the record line; not part of the id seed

    @property
    def complete(self) -> bool:
        fields = (self.principal_id, self.speaker_kind, self.speaker_id, self.authority_tier, self.origin_id)
        return all(isinstance(f, str) and f.strip() for f in fields) and self.authority_tier in ("owner", "paired")

    @property
    def seed(self) -> str:
        return _SEP.join((self.principal_id, self.speaker_kind, self.speaker_id, self.authority_tier, self.origin_id))


OWNER_FILE = "owner.json"
OWNER_SPEAKER_ID = "owner/local"
OWNER_DISPLAY = "Owner"  # OpenProgram labels the owner's own records "Owner (owner/local)" (§4.3, §4.8)


def read_owner_principal(state_dir: Any) -> str:
    """``principal_id`` of ``<state>/owner.json`` (session spec: ``{"version": 1,
    "principal_id": "owner/install/<16 hex>"}``). A missing or unusable file is
    ``WRITER_PRECONDITION_FAILED`` naming the file (and the line of a JSON error)."""
    import json

    path = Path(state_dir) / OWNER_FILE

    def refuse(why: str, line: int | None = None) -> MemoryError:
        return MemoryError(
            "WRITER_PRECONDITION_FAILED",
            f"{AUTHORITY_REQUIRED}: {path}{f':{line}' if line else ''}: {why}",
            details={"file": str(path)},
        )

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise refuse("the owner file is missing (OpenProgram writes it on first start)") from None
    except OSError as exc:
        raise refuse(f"cannot read the owner file: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise refuse("the owner file is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise refuse(f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None
    principal = data.get("principal_id") if isinstance(data, dict) else None
    if not isinstance(principal, str) or not principal.strip() or not principal.isprintable():
        raise refuse("principal_id must be a non-empty printable string")
    return principal


def owner_provenance(state_dir: Any, origin_id: str) -> Provenance:
    """The local owner as the speaker of sources supplied by ``origin_id``."""
    return Provenance(read_owner_principal(state_dir), "owner", OWNER_SPEAKER_ID, "owner", origin_id, OWNER_DISPLAY)


def _hex16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def transaction_source_records(sources: Iterable[Any], provenance: Provenance) -> list[tuple[str, SourceRecord]]:
    """(label, record) for each declared source, content addressed (§5.3 step 4): the thread
    hashes the seed and every (role, content, observed) line, each message hashes the seed,
    thread, 1-based ordinal and its own fields, so the same request archives the same ids."""
    items = list(sources)
    seed = provenance.seed
    lines = [_SEP.join((s.role, s.content, s.observed_at or "")) for s in items]
    thread = _hex16(seed + "\n" + "\n".join(lines))
    out: list[tuple[str, SourceRecord]] = []
    for ordinal, s in enumerate(items, start=1):
        observed = s.observed_at or ""
        message = _hex16(_SEP.join((seed, thread, str(ordinal), s.role, s.content, observed)))
        out.append((s.label, SourceRecord(
            provider=TRANSACTION_PROVIDER,
            thread_id=thread,
            message_id=message,
            ordinal=ordinal,
            role=s.role,
            content=s.content,
            timestamp=observed,
            speaker_id=provenance.speaker_id,
            speaker_display=provenance.speaker_display,
            speaker_kind=provenance.speaker_kind,
            principal_id=provenance.principal_id,
            authority_tier=provenance.authority_tier,
            trust_state="trusted",
        )))
    return out


# ----------------------------------------------------------------------------------- result


@dataclass(frozen=True)
class CoreInfo:
    tokens: int | None
    omitted_ids: tuple[str, ...] = ()
    budget: int = 2000

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "omitted_ids": list(self.omitted_ids), "budget": self.budget}


class _Revision:
    """``TxResult.revision``: given a string or a pending revision (``txcache``'s
    ``PendingRevision``, or ``InstalledRevision`` in an install's own result), read as the
    string, hashed at the first read: an install's caller that never reads the new revision
    never pays for its O(workspace) hash."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = "_" + name

    def __get__(self, obj: Any, owner: type | None = None) -> str | None:
        if obj is None:
            return None  # the dataclass field's default
        return revision_text(obj.__dict__[self._slot])

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self._slot] = value  # frozen: only ``__init__`` sets it


@dataclass(frozen=True)
class TxResult:
    ok: bool
    code: str | None = None
    message: str = ""
    path: str | None = None
    line: int | None = None
    column: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    revision: str | None = _Revision()  # type: ignore[assignment]
    changed_files: tuple[str, ...] = ()
    block_ids: Mapping[str, str] = field(default_factory=dict)
    evidence_ids: Mapping[str, str] = field(default_factory=dict)
    source_ids: Mapping[str, str] = field(default_factory=dict)
    memory_committed: bool = False
    git_committed: bool = False
    git_commit: str | None = None
    git_error: str | None = None
    core: CoreInfo | None = None
    problems: tuple[Problem, ...] = ()
    dropped: tuple[Any, ...] = ()
    validate_only: bool = False
    warnings: tuple[str, ...] = ()

    @classmethod
    def failure(cls, exc: MemoryError, **extra: Any) -> "TxResult":
        problems = exc.problems or (exc.as_problem(),)
        return cls(
            ok=False,
            code=exc.code,
            message=exc.message,
            path=exc.path,
            line=exc.line,
            column=exc.column,
            details=dict(exc.details),
            problems=tuple(problems),
            memory_committed=bool(exc.details.get("memory_committed", False)),
            **extra,
        )

    def error(self) -> MemoryError:
        return MemoryError(
            self.code or "TRANSACTION_FAILURE_UNKNOWN",
            self.message,
            path=self.path,
            line=self.line,
            column=self.column,
            details=dict(self.details),
            problems=self.problems,
        )

    def to_json(self) -> dict[str, Any]:
        """OpenProgram's result / error object (§5.3), plus our extra keys on success."""
        if not self.ok:
            err: dict[str, Any] = {"code": self.code, "message": self.message, "path": self.path}
            if self.line is not None:
                err["line"] = self.line
                err["column"] = self.column
            if self.details:
                err["details"] = dict(self.details)
            return {"ok": False, "error": err}
        out: dict[str, Any] = {
            "ok": True,
            "revision": self.revision,
            "source_ids": dict(self.source_ids),
            "block_ids": dict(self.block_ids),
            "evidence_ids": dict(self.evidence_ids),
            "changed_files": list(self.changed_files),
            "memory_committed": self.memory_committed,
            "git_committed": self.git_committed,
            "git_commit": self.git_commit,
        }
        if self.git_error:
            out["git_error"] = self.git_error
        if self.core is not None:
            out["core"] = self.core.to_json()
        if self.dropped:
            out["dropped"] = [d.to_json() if hasattr(d, "to_json") else d for d in self.dropped]
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out

    def all_errors(self) -> tuple[Problem, ...]:
        """Every error of a refusal: first the one reported (OpenProgram's), then the others
        in file order (path, line, column), each once. Empty when ok."""
        if self.ok:
            return ()
        first = Problem(self.code or "TRANSACTION_FAILURE_UNKNOWN", self.message, self.path, self.line, self.column,
                        dict(self.details))
        rest = [p for p in self.problems if is_error(p)]
        rest.sort(key=lambda p: (topic_sort_key(p.path or ""), p.line or 0, p.column or 0))
        out = [first]
        seen = {(first.path, first.line, first.column, first.message)}
        for p in rest:
            key = (p.path, p.line, p.column, p.message)
            if key not in seen:
                seen.add(key)
                out.append(p)
        return tuple(out)

    def edit_json(self) -> dict[str, Any]:
        """The CLI ``edit --json`` shape: the first error in the top-level fields, as before,
        and every error in ``errors``."""
        return {
            "ok": self.ok,
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "revision": self.revision,
            "changed_files": list(self.changed_files),
            "errors": [
                {"code": p.code, "message": p.message, "path": p.path, "line": p.line, "column": p.column}
                for p in self.all_errors()
            ],
        }


# ------------------------------------------------------------------------------- locating


def memory_root(state: Any) -> Path:
    """``state`` may be the state dir (``~/.openprogram``), the memory root, or a ``Layout``."""
    if isinstance(state, Layout):
        return state.root
    root = getattr(state, "memory_root", None)
    if root is not None:
        return Path(root)
    p = Path(state)
    if p.name == "memory" or (p / "topics").is_dir() or (p / ".scriptorium").is_dir():
        if not (p / "memory").is_dir():
            return p
    return p / "memory"


def _state_dir(root: Path) -> Path:
    return root.parent


# ---------------------------------------------------------------------------------- stage

_INDEX_CACHE: dict[str, SourceIndex] = {}
# memory root -> (its index, the archive paths and stamps of the last walk that found it current)
_INDEX_SEEN: dict[str, tuple[SourceIndex, list[str], list[tuple[int, int, int, int]]]] = {}


def source_index(root: Path, stamps: Mapping[str, tuple[int, int, int, int]] | None = None) -> SourceIndex:
    """The committed archives, scanned once and refreshed by (mtime, size, inode).

    ``stamps``: ``revision_walk`` of the workspace, just taken. Its ``sources/`` entries are the
    very files the index walks (regular ``*.md`` files, symlinks not followed), so when they
    all carry the keys the last index was made from, that index is what a walk would return,
    and ``sources/`` is not walked a second time."""

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
                    if entry is None or entry.key != st[:3]:
                        break
                else:
                    _INDEX_SEEN[key] = (previous, rels, listed)
                    return previous
        return full()

    index = derive("source index", incremental, full, lambda a, b: a is b or (a.files == b.files))
    _INDEX_CACHE[key] = index
    return index


def _copy_entry(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=False, ignore_dangling_symlinks=True)
    elif src.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


STAGE_MODE_ENV = "MEMORY_TUI_STAGE"  # "sparse" (default) or "full"


def stage_mode() -> str:
    """``full`` makes every stage a complete copy of topics/ and timeline/, planned and
    installed by comparing whole trees (the check side of the sparse-stage equivalence test)."""
    value = (os.environ.get(STAGE_MODE_ENV) or "sparse").strip().lower()
    if value not in ("sparse", "full"):
        raise ValueError(f"{STAGE_MODE_ENV} must be sparse or full, not {value!r}")
    return value


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
    ) -> None:
        self.memory_root = Path(root)
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
        # A stage of the optimistic pass, whose install waits for ``_unchanged``'s walk under the
        # lock, may start from the stamps this process's last install left instead of walking:
        # that walk compares the workspace with the state the stage was built from either way
        # (see ``_OPTIMISTIC``). Taken once: a stage made after a refusal walks.
        walked = self.cache.take_walk() if getattr(_OPTIMISTIC, "on", False) and tx_mode() != "full" else None
        if walked is not None:
            _OPTIMISTIC.reused = True
            self.stamps, self.links, remembered, self.monitor_generation = walked
        else:
            # the file-system monitor's generation before the walk: the stamps are true at least from then on
            watch = monitor_for(self.memory_root)
            self.monitor_generation = watch.drain() if watch is not None and tx_mode() != "full" else None
            self.stamps, self.links = revision_walk(self.memory_root)
        self.locked_stamps: dict[str, tuple[int, int, int, int]] | None = None  # walked again under the lock
        self.locked_links: tuple[str, ...] | None = None
        self.locked_generation: int | None = None  # the monitor's, when the lock was taken
        now = time.time_ns()
        self.stamps_racy = any_racy(self.stamps, now)
        # remembered: the revision of the bytes installed, never of what the files hold now (a
        # file changed since is then found by the walk under the lock, or by its revision);
        # possibly not hashed yet (``PendingRevision``: see ``revision``)
        self.revision_ref: str | PendingRevision = remembered if walked is not None else self.cache.revision(self.stamps)
        # baseline next, from the committed tree, before anything is copied; unchanged files
        # are neither read nor parsed again (txcache)
        self.index = source_index(self.memory_root, self.stamps)
        self.token = self.cache.observe_index(self.index)
        self.cache.load_disk(self.layout)
        self.committed_texts, self.committed_shas, read_problems = self.cache.read_topics(
            self.layout.topics, walk=(self.stamps, self.links))
        self.baseline: TopicTree = self.cache.tree(self.committed_texts, self.index, self.token, self.committed_shas)
        self.baseline_problems = tuple(read_problems) + tuple(self.baseline.problems)
        if not link_topics:  # a copied stage would follow the link and install its target's bytes
            _raise_first([p for p in read_problems if p.details.get("kind") == "symlink"])
        check_write_confinement(self.memory_root)
        self._stage_dir = make_stage_dir(self.layout)
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
        self.sparse = link_topics and stage_mode() == "sparse"
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
            # ``runtime.json`` grow with the workspace: ≈ 3 MB copied, then compared back, per
            # edit at scale 4): it reads the committed ones, whose bytes the walk under the
            # lock proves, and holds only those it writes, until ``own_root_files``.
            self.root_owned = False
            if not self.sparse:
                self.own_root_files()
            if copy_sources and not restricted:
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
            files[rel] = index_file(rel, path.read_bytes(), (st.st_mtime_ns, st.st_size, st.st_ino), files.get(rel))
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

    def _refuse_linked(self, rel: str) -> None:
        """A committed symlink on the way to ``rel`` (the topic or a folder above it) is
        refused: replacing it would destroy the link, writing into it would leave the workspace."""
        p = self.memory_root
        for part in rel.split("/"):
            p = p / part
            if p.is_symlink():
                raise MemoryError("PATH_OUTSIDE_WORKSPACE", f"{p.relative_to(self.memory_root).as_posix()} is a symbolic "
                                  "link; memory-tui never replaces or writes through one", path=rel)

    def write_topic(self, rel: str, text: str) -> None:
        rel = check_writable(rel)
        self._refuse_linked(rel)
        self._put(rel[len("topics/"):], text)

    def _put(self, topic_rel: str, text: str) -> None:
        target = self.topics / topic_rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_file() or target.is_symlink():
            target.unlink()
        target.write_text(text, encoding="utf-8", newline="")
        self._unread.pop("topics/" + topic_rel, None)
        self._drops.discard(topic_rel)
        if self._texts is not None:
            self._texts[topic_rel] = text
            self._touched.add(topic_rel)

    def _drop(self, topic_rel: str) -> None:
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


def revision_stamps(root: Path) -> dict[str, tuple[int, int, int, int]]:
    """Stat stamps of every file that makes up the revision (ctime included: no tool can set it)."""
    return revision_walk(root)[0]


# Set while ``_transact_once`` makes the stage of its optimistic pass. Such a stage is
# installed only after ``_unchanged`` walked the workspace under the lock and found the stamps
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
_OPTIMISTIC = threading.local()


def _unchanged(stage: Stage) -> bool:
    """The workspace still has the revision ``stage`` was read at (cheap when no file was
    touched; with a file-system monitor that recorded no change since the stage's stamps were
    true, without even a walk). Call under the write lock."""
    root = stage.memory_root
    mode = tx_mode()
    watch = monitor_for(root, create=not in_one_shot()) if mode != "full" else None
    generation = stage.locked_generation = watch.drain() if watch is not None else None
    if generation is not None and generation == stage.monitor_generation:
        if mode == "check" and not _unchanged_by_walk(stage):
            raise IncrementalMismatch("the file-system monitor recorded no change, but the walk under the lock found one")
        stage.locked_stamps, stage.locked_links = stage.stamps, stage.links
        return True
    return _unchanged_by_walk(stage)


def _unchanged_by_walk(stage: Stage) -> bool:
    root = stage.memory_root
    stamps, links = revision_walk(root)  # one walk: the revision below is of these very stamps
    stage.locked_stamps, stage.locked_links = stamps, links
    if links != stage.links:
        return False  # a link appeared or vanished: the stage may have read through it
    if stamps == stage.stamps and (not stage.stamps_racy or (
            tx_mode() != "full" and stage.cache.holds_revision(stamps, stage.revision_ref))):
        return True  # inside the clock tick only the files young then are read again, not the stream
    return stage.cache.revision(stamps) == stage.revision


def _open_locked(root: Path) -> None:
    """Every open under the lock first finishes or forgets an interrupted install."""
    recover(root)


@contextmanager
def open_stage(
    state: Any,
    *,
    restricted: bool = False,
    allowed_refs: Iterable[str] | None = None,
    timeout: float = TIMEOUT_DEFAULT,
) -> Iterator[Stage]:
    """A stage for a writer: refreshed under the lock (briefly), discarded on exit.

    The writer edits ``stage.topics``; ``commit_edits(stage, ...)`` installs the result.
    """
    root = memory_root(state)
    with write_lock(root, timeout):
        _open_locked(root)
        stage = Stage(root, restricted=restricted, allowed_refs=allowed_refs, copy_sources=not restricted)
    try:
        yield stage
    finally:
        stage.discard()


# ---------------------------------------------------------------------------- validation


@dataclass
class _Context:
    required_ids: frozenset[str]  # block ids the result must still hold ...
    rule: str
    allowed_refs: frozenset[str] | None
    validate_only: bool
    git_commit: str
    commit_message: str | None
    git_env: Mapping[str, str] | None
    counter: Any
    reported_changed: tuple[str, ...] = ()
    source_ids: Mapping[str, str] = field(default_factory=dict)
    structured: bool = False
    refuse_drops: bool = False  # the owner's own texts: nothing may be pruned away (pitfall 13)
    # ... or, when set, every block id of the baseline except these (``required_ids`` is then
    # not used): what a hand edit requires, without a set of every id of the workspace
    required_except: frozenset[str] | None = None
    # a hand edit with the default counter; its ``no change`` answer is remembered
    # (``noopcache``) under this config key, read before the transaction read the config
    noop_config: str | None = None


def _precheck(rel: str, text: str) -> list[Problem]:
    """A heading citing a footnote that this file defines: OpenProgram drops the definition
    (and, in a new topic, the heading) while answering ok (pitfall 13); refuse it. A heading
    citation with no definition, or whose definition a record cites too, is kept verbatim by
    OpenProgram (``# Ideas[^e1]``) and loses nothing, so it is accepted (cases 057, 098, 102)."""
    path = "topics/" + rel
    problems: list[Problem] = []
    _, lines, _ = iter_blocks(text)
    defined = {m.group(1) for line in lines if line.kind == "definition" and (m := DEFINITION_RE.match(line.text))}
    by_records = {fid for line in lines if line.kind == "text" for fid in CITATION_RE.findall(line.text)}
    for line in lines:
        if line.kind != "heading" or "[^" not in line.text:
            continue
        for m in CITATION_RE.finditer(line.text):
            if m.group(1) in defined and m.group(1) not in by_records:
                problems.append(
                    Problem(
                        "INVALID_TOPIC_FORMAT",
                        f"citation [^{m.group(1)}] in a heading is not a record: its definition would be "
                        f"dropped: {path}",
                        path,
                        line.number,
                        m.start() + 1,
                    )
                )
                break
    return problems


def _missing_sources(texts: Mapping[str, str], changed: frozenset[str], index: SourceIndex, rule: str) -> list[Problem]:
    """Definitions in changed files naming a source the archives do not hold, located on the
    definition line (before normalisation turns a plain handle into an unresolvable link)."""
    problems: list[Problem] = []
    for rel in sorted(changed, key=topic_sort_key):
        if rel not in texts:
            continue
        topic = parse_topic(rel, texts[rel], resolve=index.resolve_target, strict=False)
        for ev in topic.evidence:
            for link in ev.links:
                if not link.source_id:
                    continue
                found = index.validate_ref(link.source_id, rule=rule)
                if found is None:
                    continue
                column = ev.text.find(link.target) + 1 if link.target in ev.text else 1
                problems.append(
                    Problem("INVALID_TOPIC_FORMAT", f"{found.message} ({rule})", "topics/" + rel, ev.line, column,
                            dict(found.details))
                )
    return problems


def _normalize(texts: Mapping[str, str], stage: Stage, refuse_drops: bool = False) -> Any:
    """§3.8 normalisation + §3.9 pruning (helper module ``normalize``).

    A committed file passes through unchanged only when the cache holds a proof that
    normalising exactly those bytes (with the same source archives) is the identity; every
    other file is normalised as OpenProgram would (pitfall 4 without losing byte-compatibility).
    """
    from ..format.normalize import normalize_tree

    cache, index, token = stage.cache, stage.index, stage.token
    return normalize_tree(
        texts,
        committed=stage.baseline,
        resolve=index.resolve_target,
        link_for=index.link_for,
        assume_committed_normal=True,
        proven_canonical=lambda rel, text: cache.is_proven(rel, text, index, token),
        memo=cache.memo,
        refuse_drops=refuse_drops,
        # is_proven's True for a text object under this token stands while the token does
        proof_key=token,
        mode=tx_mode(),
    )


def _removed_error(missing: set[str], baseline: TopicTree) -> MemoryError:
    ordered = sorted(missing)
    shown = ", ".join(ordered[:MAX_REMOVED_LISTED]) + ("…" if len(ordered) > MAX_REMOVED_LISTED else "")
    first = baseline.by_id(ordered[0])
    return MemoryError(
        "INVALID_TOPIC_FORMAT",
        f"block ID must not be removed: {shown}",
        path=first.path if first is not None else None,
        line=first.line if first is not None else None,
        column=1 if first is not None else None,
        details={"removed": ordered},
    )


class _Errors:
    """The errors of one validation, gathered across its stages so the owner sees every one
    at once (a dropped block id must not hide the uncited prose beside it). The first error
    found stays the one reported (OpenProgram's, since the stages run in its order); a stage
    whose input an earlier error made meaningless (an unreadable file, text pruning removed)
    ends the gathering with ``stop``."""

    def __init__(self) -> None:
        self.found: list[Problem] = []

    def add(self, problems: Iterable[Problem]) -> None:
        self.found.extend(p for p in problems if is_error(p))

    def stop(self, problems: Iterable[Problem] = ()) -> None:
        self.add(problems)
        _raise_first(self.found)


def _raise_first(problems: Iterable[Problem]) -> None:
    errors = [p for p in problems if is_error(p)]
    if errors:
        first = errors[0]
        raise MemoryError(
            first.code if first.code else "INVALID_TOPIC_FORMAT",
            first.message,
            path=first.path,
            line=first.line,
            column=first.column,
            details=dict(first.details),
            problems=tuple(errors),
        )


def _check_units(tree: TopicTree, baseline: TopicTree, index: SourceIndex, ctx: _Context,
                 stage: Stage | None = None) -> list[Problem]:
    problems: list[Problem] = []
    # refs each committed block already had (ids are unique in an assembled tree), looked up
    # only for the units checked below, not built for the whole baseline
    def known_refs(memory_id: str) -> frozenset[str]:
        unit = baseline.by_id(memory_id)
        return frozenset(unit.source_refs) if unit is not None else frozenset()
    # A topic that is the very committed one (same bytes, same archives) has no ref new to its
    # blocks; if every ref it cites exists (cached per deps signature) it needs no check.
    checked: Iterable[Unit]
    if stage is None:
        checked = [u for topic in tree.topics for u in topic.units] if tree.dupfree else tree.units
    else:
        cache = stage.cache

        def full() -> set[str]:  # the paths of the topics whose units are checked
            return {t.path for t in tree.topics if not (baseline.topic(t.path) is t and cache.refs_ok(t, index))}

        def incremental() -> set[str]:
            diff = _differing(tree, baseline)
            if diff is None:
                return full()
            made = {t.path for t in diff[0]}
            return made | cache.refs_unfine(tree.topics, made, index)

        check = derive("topics whose refs are checked", incremental, full)
        if tree.dupfree:  # its units are its topics' units in order: whole topics
            checked = [u for topic in _topics_at(tree, check) for u in topic.units]
        else:
            checked = [u for u in tree.units if u.topic_path in check]
    for unit in checked:
        known = known_refs(unit.memory_id)
        for ref in unit.source_refs:
            new = ref not in known
            found = index.validate_ref(ref, new=new, allowed=ctx.allowed_refs, rule=ctx.rule)
            if found is None:
                continue
            line, column = unit.line, 1
            for ev in unit.evidence:
                if ref in ev.source_ids:
                    line, column = ev.line, 1
                    break
            message = found.message
            if "not evidence of this transaction" in message or "not trusted" in message:
                message = f"{message} ({ctx.rule})"
            problems.append(Problem("INVALID_TOPIC_FORMAT", message, unit.path, line, column, dict(found.details)))
    return problems


def _differing(tree: TopicTree, baseline: TopicTree) -> tuple[list[Topic], list[Topic]] | None:
    """``(made, gone)``: the topics of ``tree`` that are not the very parse ``baseline`` holds
    at their path, and the topics of ``baseline`` that ``tree`` does not hold as the very same
    parse, both in tree order -- found by one C-level identity pass when both trees list the
    same paths in the same order (every edit that adds or drops no file), else ``None``.
    Equal objects at a position mean equal paths there, so only the differing positions are
    compared by path."""
    global _LAST_DIFF
    last = _LAST_DIFF
    if last[0] is tree and last[1] is baseline:
        return last[2]
    a, b = tree.topics, baseline.topics
    if len(a) != len(b):
        return None
    at = list(compress(range(len(a)), map(is_not, a, b)))
    made = [a[i] for i in at]
    gone = [b[i] for i in at]
    out = None if any(x.path != y.path for x, y in zip(made, gone)) else (made, gone)
    _LAST_DIFF = (tree, baseline, out)
    return out


# (tree, baseline, ``_differing(tree, baseline)``) of the last call: a transaction asks it of
# the same two trees three times (the lists answered are never changed)
_LAST_DIFF: tuple[Any, Any, Any] = (None, None, None)


def _missing_ids(ctx: _Context, tree: TopicTree, baseline: TopicTree) -> set[str]:
    """The required block ids ``tree`` lacks."""
    excluded = ctx.required_except
    if excluded is None:
        return set(ctx.required_ids) - set(tree.id_view)

    def full() -> set[str]:
        return (set(baseline.id_view) - excluded) - set(tree.id_view)

    def incremental() -> set[str]:
        # every unit id of a topic is an id of its tree, so an id of a baseline topic that the
        # new tree holds unchanged (the same parse) cannot be missing
        out: set[str] = set()
        diff = _differing(tree, baseline)
        for topic in (diff[1] if diff is not None else baseline.topics):
            if tree.topic(topic.path) is topic:
                continue
            out.update(u.memory_id for u in topic.units if u.memory_id not in excluded and not tree.has_id(u.memory_id))
        return out

    return derive("missing ids", incremental, full)


def _topics_at(tree: TopicTree, paths: Iterable[str]) -> list[Topic]:
    """The topics of ``tree`` at ``paths`` (those it holds), in tree order: each looked up by
    path instead of a pass over every topic. ``tree.topic`` takes a leading ``topics/`` off,
    so paths that start with one are found by the pass."""
    paths = set(paths)

    def every() -> list[Topic]:
        return [t for t in tree.topics if t.path in paths]

    def looked_up() -> list[Topic]:
        return [t for t in map(tree.topic, sorted(paths, key=topic_sort_key)) if t is not None]

    if any(path.startswith("topics/") for path in paths):
        return every()
    return derive("topics at paths", looked_up, every, lambda a, b: len(a) == len(b) and all(map(is_, a, b)))


def _non_ascii_times(tree: TopicTree, changed: frozenset[str]) -> list[Problem]:
    out = []
    for topic in _topics_at(tree, changed):
        for unit in topic.units:
            for ev in unit.evidence:
                if ev.non_ascii_time:
                    out.append(
                        Problem(
                            "INVALID_TOPIC_FORMAT",
                            f"invalid evidence date: {ev.raw_when} (times are written with ASCII digits YYYY[-MM[-DD]])",
                            unit.path,
                            ev.line,
                            1,
                        )
                    )
    return out


def _write_stage_texts(stage: Stage, texts: Mapping[str, str], existing: Mapping[str, str] | None = None) -> None:
    if existing is None:
        existing, _ = stage.topic_texts()
    keys = list(texts)
    if keys == list(existing):
        # the same paths in the same order (an edit that adds or removes no file): the texts
        # the normaliser and the link rewrite left alone are the very objects given, so one
        # C-level identity pass finds the few to compare
        now, was = list(texts.values()), list(existing.values())
        puts = [keys[i] for i in compress(range(len(keys)), map(is_not, now, was)) if now[i] != was[i]]
    else:
        for rel in [rel for rel in existing if rel not in texts]:
            stage._drop(rel)
        puts = [rel for rel, text in texts.items() if existing.get(rel) != text]
    for rel in puts:
        stage._put(rel, texts[rel])
    # empty directories left by deleted topics are not part of the tree
    for dirpath, dirnames, filenames in sorted(os.walk(stage.topics), key=lambda t: -len(t[0])):
        if dirpath != str(stage.topics) and not os.listdir(dirpath):
            os.rmdir(dirpath)


def _write_views(stage: Stage, tree: TopicTree, index: SourceIndex, runtime: RuntimeState, ctx: _Context) -> CoreInfo | None:
    from ..format.config import load_memory_config
    from ..format.views import TIMELINE_DIR

    config = load_memory_config(_state_dir(stage.memory_root))
    master = tree.topic("core.md")
    views = stage.cache.build_views(
        tree,
        master_text=master.text if master is not None else None,
        trusted_ids=index.trusted_ids(),
        creation_order=runtime.creation_order,
        recent_limit=config.recent_limit,
        counter=ctx.counter,
        budget=config.core_budget_tokens,
        link_for=index.link_for,
    )
    timeline = stage.path / TIMELINE_DIR
    if timeline.exists():
        shutil.rmtree(timeline)
    files = views.files
    if stage.sparse:
        # a sparse timeline/: only the files whose text differs from the committed one
        stage._timeline_drops = {rel[len(TIMELINE_DIR) + 1:] for rel in stage.committed_entries(TIMELINE_DIR)
                                 if rel not in files}
        files = {rel: text for rel, text in files.items()
                 if not stage.cache.committed_equals(rel, stage.stamps.get(rel), text)}
    for rel, text in files.items():
        target = stage.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="")
    if views.core is None:
        return None
    return CoreInfo(views.core.rendered_tokens, tuple(views.core.omitted_ids), views.core.budget)


def _write_runtime(stage: Stage, tree: TopicTree) -> RuntimeState:
    """Grow ``creation_order``; keep every byte when nothing changed (pitfall 1)."""
    rt = stage.layout.runtime_name
    path = stage.path / rt / "runtime.json"
    source = stage.root_file(f"{rt}/runtime.json")
    base, layout = (stage.path, Layout(stage.path)) if source == path else (stage.memory_root, stage.layout)

    def load() -> tuple[RuntimeState, tuple[Problem, ...]]:
        return load_runtime_state(base, layout)

    # the committed file is the one the stage's walk stamped (the walk under the lock proves it unchanged)
    stamp = stage.stamps.get(f"{rt}/runtime.json") if source != path else None
    state, problems = derive("runtime state", lambda: stage.cache.by_stamp("runtime.json", source, stamp, load),
                             lambda: stage.cache.by_bytes("runtime.json", source, load))
    if state.corrupt:  # rewriting it from defaults would lose creation_order and legacy cursors
        first = problems[0]
        raise MemoryError(
            CORRUPT_FILE,
            f"{first.message}; fix or remove it first (writing memory would replace it with defaults, "
            "losing its creation order and any legacy cursors)",
            path=first.path, line=first.line, column=first.column,
        )
    cache, baseline = stage.cache, stage.baseline

    def full() -> RuntimeState:
        # a cached topic's ids, without building its units
        ids = [mid for topic in sorted(tree.topics, key=lambda t: topic_sort_key(t.path)) for mid in topic.memory_ids]
        return state.with_creation_order(ids)

    def incremental() -> RuntimeState:
        if not cache.order_covers(baseline, state):
            return full()
        # every id of the baseline is in the order already, so only ids of the topics this
        # change made can be new, and they are numbered in the same (tree) order
        diff = _differing(tree, baseline)
        made = diff[0] if diff is not None else [t for t in tree.topics if baseline.topic(t.path) is not t]
        return state.with_creation_order(
            u.memory_id for topic in sorted(made, key=lambda t: topic_sort_key(t.path)) for u in topic.units)

    grown = derive("creation order", incremental, full, lambda a, b: a == b and (a is state) == (b is state))
    cache.note_order_covers(tree, grown)
    if grown is not state or not source.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_runtime_json(grown), encoding="utf-8", newline="")
    return grown


CORE_REMOVED = (
    "topics/core.md cannot be removed: it is the core master, and without it core.md would be "
    "rebuilt from the clipped root core.md, losing every record beyond the token budget"
)


def _guard_core_master(stage: Stage, staged: Mapping[str, str], normalized: Mapping[str, str]) -> None:
    """Pitfall 10, whatever the entry point: a change must not remove ``topics/core.md``."""
    if "core.md" not in stage.committed_texts or "core.md" in normalized:
        return
    if "core.md" not in staged:
        raise MemoryError(
            "INVALID_ARGUMENT",
            f"{CORE_REMOVED} (remove core records one by one instead)",
            path=CORE_MASTER,
        )
    raise MemoryError(
        "INVALID_TOPIC_FORMAT",
        f"{CORE_REMOVED}: this change leaves it without any record, and a topic without records "
        "is deleted (keep at least one core record)",
        path=CORE_MASTER,
        line=1,
        column=1,
    )


def _promote_legacy_core(stage: Stage, normalized: dict[str, str], ctx: _Context) -> tuple[dict[str, str], str | None]:
    """§5.4 step 4 / §8.4: no ``topics/core.md`` but a root ``core.md`` -> copy it into
    ``topics/core.md`` with links re-based to ``topics/``; kept only if the whole tree still
    parses (and, stricter than OpenProgram, only if its sources validate, so a legacy file
    never makes an unrelated edit fail). Returns (texts, note)."""
    from ..format.blocklinks import rewrite_block_links
    from ..format.views import promote_legacy_core

    if "core.md" in normalized:
        return normalized, None
    root_core = stage.root_file("core.md")
    try:
        if root_core.is_symlink() or not root_core.is_file():
            return normalized, None
        legacy = root_core.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return normalized, "root core.md is unreadable; not promoted to topics/core.md"
    if not legacy.strip():
        return normalized, None
    candidate = dict(normalized)
    candidate["core.md"] = promote_legacy_core(legacy)
    candidate = {rel: text for rel, text in rewrite_block_links(candidate, file_ids=stage.cache.file_ids, rewritten=stage.cache.link_rewrite).items() if text is not None}
    tree = stage.cache.tree(candidate, stage.index, stage.token)
    if tree.errors:
        return normalized, f"root core.md not promoted to topics/core.md: {tree.errors[0]}"
    core_topic = tree.topic("core.md")
    assert core_topic is not None
    for unit in core_topic.units:
        for ref in unit.source_refs:
            found = stage.index.validate_ref(ref, new=True, allowed=None, rule=ctx.rule)
            if found is not None:
                return normalized, f"root core.md not promoted to topics/core.md: {found.message}"
    return dict(normalized, **{"core.md": candidate["core.md"]}), "promoted the legacy root core.md to topics/core.md"


@dataclass
class _Prepared:
    plan: InstallPlan
    base: dict[str, Any]
    new_texts: dict[str, str]
    warnings: tuple[str, ...] = ()
    revision_job: RevisionJob | None = None  # the post-install revision, hashing since the plan was known


def _is_link_summary(value: object) -> bool:
    return (type(value) is tuple and len(value) == 2 and type(value[0]) is bool and type(value[1]) is tuple
            and all(type(b) is str for b in value[1]))


def _link_summaries(cache: WorkspaceCache):
    """``normalize.topic_link_summary`` of a topic, kept by its path and bytes in the parse
    cache: a fresh process checks the links of the topics it did not change without building
    their units (the check builds a topic only when its summary names an id the tree lacks)."""
    from ..format.linkcheck import topic_link_summary

    def summary(topic: Topic) -> tuple[bool, tuple[str, ...]]:
        return cache.kept("blinks", topic.path, topic.text, lambda: topic_link_summary(topic), _is_link_summary)
    return summary


def _present(texts: Mapping[str, str | None]) -> dict[str, str]:
    """``texts`` without the paths whose text is ``None`` (removed), in order; a copy by one
    C-level pass when there is none (every edit that removes no file)."""
    if not any(map(is_, texts.values(), repeat(None))):
        return dict(texts)
    return {rel: text for rel, text in texts.items() if text is not None}


def _prepare(stage: Stage, ctx: _Context) -> _Prepared:
    """Normalise, validate and rebuild views in the stage; plan the install. No lock needed:
    everything read here comes from the stage and the caches (the caller checks the revision
    under the lock before installing)."""
    root = stage.memory_root
    index = stage.index  # staged sources are byte-identical to these (read-only)
    cache, token = stage.cache, stage.token
    errors = _Errors()
    texts, read_problems = stage.topic_texts()
    errors.stop(read_problems)  # a file that cannot be read leaves nothing to check
    committed = stage.committed_texts

    def differing(paths: Iterable[str]) -> frozenset[str]:
        return frozenset(rel for rel in paths if texts.get(rel) != committed.get(rel))

    touched = stage.touched
    changed = derive("changed topics", lambda: differing(set(texts) | set(committed) if touched is None else touched),
                     lambda: differing(set(texts) | set(committed)))
    problems: list[Problem] = []
    for rel in sorted(changed, key=topic_sort_key):
        if rel in texts:
            problems.extend(_precheck(rel, texts[rel]))
    errors.add(problems)
    errors.add(_missing_sources(texts, changed, index, ctx.rule))

    from ..format.blocklinks import rewrite_block_links
    from ..format.linkcheck import check_cross_topic_links, check_cross_topic_links_incremental

    # The owner's own texts (hand edit, whole-file change, patch) must land whole; record ops,
    # writers and organize legitimately leave empty sections for pruning.
    result = _normalize(texts, stage, refuse_drops=ctx.refuse_drops)
    # pruning moved lines: what later stages find would point at the wrong lines
    errors.stop(result.errors)
    noted = {p.path for p in (*result.problems, *result.dropped)}
    # a file passed through was found proven under this token, and proofs of live texts stay
    for rel in result.texts.keys() - result.passed:
        out = result.texts[rel]
        if out is not None and texts.get(rel) == out and "topics/" + rel not in noted:
            cache.prove(rel, out, index, token)
    dropped = tuple(p for p in result.dropped if not is_error(p))
    normalized = _present(result.texts)
    try:
        _guard_core_master(stage, texts, normalized)
    except MemoryError as exc:
        errors.stop([exc.as_problem()])
        raise
    normalized, promotion = _promote_legacy_core(stage, normalized, ctx)
    new_texts = _present(rewrite_block_links(
        normalized, file_ids=cache.file_ids, rewritten=cache.link_rewrite, memo=cache.memo,
        locations=cache.block_locations(normalized), mode=tx_mode()))

    tree = cache.tree(new_texts, index, token)
    missing = _missing_ids(ctx, tree, stage.baseline)
    if missing:
        errors.add([_removed_error(missing, stage.baseline).as_problem()])
    errors.add(derive("cross-topic link check", lambda: check_cross_topic_links_incremental(
                          tree, committed=stage.baseline, summary=_link_summaries(cache)),
                      lambda: check_cross_topic_links(tree, committed=stage.baseline)))
    errors.add(tree.problems)
    errors.add(_non_ascii_times(tree, changed) + _check_units(tree, stage.baseline, index, ctx, stage))
    errors.stop()

    _write_stage_texts(stage, new_texts, existing=texts)
    runtime = _write_runtime(stage, tree)
    core = _write_views(stage, tree, index, runtime, ctx)
    plan = plan_install(root, stage.path, compare_sources=stage.sources_staged, sparse=stage.sparse_trees())
    base = dict(
        block_ids=dict(result.block_ids),
        evidence_ids=dict(result.evidence_ids),
        source_ids=dict(ctx.source_ids),
        core=core,
        dropped=dropped,
        validate_only=ctx.validate_only,
    )
    return _Prepared(plan, base, new_texts, (promotion,) if promotion else ())


def _validated(stage: Stage, ctx: _Context, prep: _Prepared) -> TxResult:
    stage.cache.retain_lazily({**stage.committed_texts, **prep.new_texts})
    return TxResult(ok=True, message="valid", revision=stage.revision_ref, changed_files=_changed(prep.plan, ctx),
                    warnings=prep.warnings, **prep.base)


def _finish(stage: Stage, ctx: _Context, prep: _Prepared) -> TxResult:
    """Install a prepared stage and commit. Call under the write lock, with the workspace at
    ``stage.revision``."""
    root = stage.memory_root
    if ctx.validate_only:
        return _validated(stage, ctx, prep)
    if prep.plan.empty:
        stage.cache.retain_lazily(stage.committed_texts)  # a no-op writes nothing, not even the cache
        # the workspace as walked under this lock (a stage made under it: as walked then)
        stage.cache.note_walk(stage.locked_stamps if stage.locked_stamps is not None else stage.stamps,
                              stage.locked_links if stage.locked_links is not None else stage.links, stage.revision_ref,
                              _generation(stage))
        _remember_noop(stage, ctx, prep)  # ... except its own answer, once (noopcache)
        return TxResult(
            ok=True, message="no change", revision=stage.revision_ref, changed_files=tuple(ctx.reported_changed),
            memory_committed=True, git_error=gitlog.NOTHING_TO_COMMIT if ctx.git_commit != "off" else None,
            warnings=prep.warnings, **prep.base,
        )
    if ctx.git_commit != "off" and ctx.commit_message is not None:
        gitlog.mark_pending(root)  # a kill before the commit below is finished on the next open
    # the stamps walked under this lock (by ``_unchanged``, or by a stage made under it)
    before = stage.locked_stamps if stage.locked_stamps is not None else stage.stamps
    job = prep.revision_job if prep.revision_job is not None else _start_revision(stage, prep, before)
    # no job: the revision is left for its first reader (``defer_revision``), from the bytes
    # staged now (the install moves the staged files into place)
    puts = _staged_bytes(stage, prep) if job is None and stage.cache.can_defer() else None
    generation = _generation(stage)
    try:
        try:
            install(root, stage.path, prep.plan)
        finally:
            generation = _absorb_install(root, prep.plan, generation)
        stage.cache.retain_lazily(prep.new_texts)
        stage.cache.save_disk(stage.layout)
        # ``before`` with what the install replaced stat-ed again: no second walk of the whole workspace
        targets = [(t.kind, t.path) for t in prep.plan.targets]

        def after_install() -> dict:
            return installed_stamps(root, before, targets) or revision_stamps(root)

        stamps = derive("post-install stamps", after_install, lambda: revision_stamps(root))

        def installed_revision() -> str | PendingRevision:
            if job is not None:
                return job.result(stamps)
            if puts is not None:
                deferred = stage.cache.defer_revision(stamps, puts)
                if deferred is not None:
                    return deferred
            return stage.cache.revision(stamps, installed=True)

        revision = derive("post-install revision", installed_revision, lambda: workspace_revision(root),
                          lambda a, b: revision_text(a) == b)
        if all(t.kind == "file" for t in prep.plan.targets):
            # one regular file renamed over (or removed) per target: no link came or went
            links = stage.locked_links if stage.locked_links is not None else stage.links
            stage.cache.note_walk(stamps, links, revision, generation)
    finally:
        if job is not None:
            job.cancel()
    changed_files = _changed(prep.plan, ctx)
    git_committed, git_commit, git_error, warnings = False, None, None, prep.warnings
    if ctx.git_commit != "off" and ctx.commit_message is not None:
        outcome = gitlog.commit(root, ctx.commit_message, env=ctx.git_env)
        git_committed, git_commit, git_error = outcome.committed, outcome.commit, outcome.error
        if not outcome.committed:
            warnings = warnings + (f"memory changed but Git commit failed: {outcome.error}",)
    return TxResult(
        ok=True,
        message="installed",
        revision=InstalledRevision(revision) if isinstance(revision, PendingRevision) else revision,
        changed_files=changed_files,
        memory_committed=True,
        git_committed=git_committed,
        git_commit=git_commit,
        git_error=git_error,
        warnings=warnings,
        **prep.base,
    )


def _generation(stage: Stage) -> int | None:
    """The file-system monitor's generation at which the stamps an install starts from were true:
    the lock's (``_unchanged``), else the stage's own (a stage made under the lock)."""
    return stage.locked_generation if stage.locked_stamps is not None else stage.monitor_generation


def _absorb_install(root: Path, plan: InstallPlan, since: int | None) -> int | None:
    """The file-system monitor's generation at which the stamps an install left are true
    (right after it, under the same lock; the workspace was at ``since`` before it), or
    ``None``: something besides the install's own writes changed meanwhile, or it replaced a
    whole tree, whose folders the monitor does not watch yet. Either way every other stage
    of this process sees a new generation (see ``FsMonitor.after_install``)."""
    watch = monitor_for(root)
    if watch is None:
        return None
    own: set[str] = set()
    for t in plan.targets:
        if t.kind != "file":
            watch.invalidate()
            return None
        parts = t.path.split("/")
        own.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
    generation = watch.after_install(own, since) if since is not None else None
    if since is None:
        watch.invalidate()
    return generation


def _start_revision(stage: Stage, prep: _Prepared, before: Mapping[str, tuple[int, int, int, int]]) -> RevisionJob | None:
    """Start hashing the revision the install of ``prep`` will leave (memory spec §2.6: one
    stream, so everything after the first changed file is hashed again) on the second core,
    from the staged bytes, while the install and the bookkeeping run -- unless the cache can
    leave it for its first reader (``WorkspaceCache.can_defer``: a process that keeps a chain
    between transactions). Only for plans whose every target is one file (the new bytes are
    exactly the staged file's); a tree target, or ``MEMORY_TUI_TX=full``, takes the revision
    from the files after the install."""
    if prep.plan.empty or tx_mode() == "full" or stage.cache.can_defer():
        return None
    changes = _staged_bytes(stage, prep)
    return None if changes is None else stage.cache.start_revision(before, changes)


def _staged_bytes(stage: Stage, prep: _Prepared) -> dict[str, bytes | None] | None:
    """What the install of ``prep`` will write, by path (``None``: removed); ``None`` when a
    target is a whole tree."""
    changes: dict[str, bytes | None] = {}
    for t in prep.plan.targets:
        if t.kind != "file":
            return None
        changes[t.path] = None if t.new is None else (stage.path / t.path).read_bytes()
    return changes


def _remember_noop(stage: Stage, ctx: _Context, prep: _Prepared) -> None:
    """A hand edit that changed nothing: its answer is a function of the workspace, the
    config and the code (``noopcache``), kept for the next fresh process."""
    base = prep.base
    if ctx.noop_config is None or stage.stamps_racy or base["block_ids"] or base["evidence_ids"] or base["dropped"]:
        return
    core = base["core"]
    noopcache.record(stage.memory_root, stage.stamps, stage.links, stage.revision,
                     None if core is None else (core.tokens, tuple(core.omitted_ids), core.budget),
                     prep.warnings, ctx.noop_config)


class NoopMismatch(AssertionError):
    """``MEMORY_TUI_VIEWS=check``: the remembered no-op answer differs from the full path's."""


def _known_noop(root: Path, rel: str, text: str, mode: str, git_env: Mapping[str, str] | None,
                timeout: float, base_revision: str | None) -> TxResult | None:
    """The answer of a hand edit whose text is the committed file's own bytes, from the
    remembered no-op verdict of exactly this workspace (``noopcache``), or ``None`` (then the
    full path runs; it reports every refusal itself). Under the write lock, as the full path
    installs a no-op: recovery first, the workspace re-checked, git history ensured."""
    if views_mode() == "full" or stage_mode() != "sparse" or needs_recovery(root):
        return None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None  # not a text the stage could even be written with
    verdict = noopcache.lookup(root, rel, data)
    if verdict is None or (base_revision is not None and base_revision != verdict.revision):
        return None
    try:
        check_write_confinement(root)
    except MemoryError:
        return None
    with write_lock(root, timeout):
        _open_locked(root)
        if not noopcache.holds(root, verdict):
            return None
        _ensure_git(root, mode, git_env)
    core = None if verdict.core is None else CoreInfo(verdict.core[0], verdict.core[1], verdict.core[2])
    return TxResult(ok=True, message="no change", revision=verdict.revision, memory_committed=True,
                    git_error=gitlog.NOTHING_TO_COMMIT if mode != "off" else None, warnings=verdict.warnings,
                    core=core)


def _synchronize(stage: Stage, ctx: _Context) -> TxResult:
    """Prepare and install in one go (the caller holds the lock)."""
    return _finish(stage, ctx, _prepare(stage, ctx))


def _transact(root: Path, make: Callable[[], tuple[Stage, _Context]], **kw: Any) -> TxResult:
    """A file under the workspace that appears or vanishes while a transaction reads it (an
    editor saving, another tool) is a race, not an internal error: the transaction runs once
    more, and if the race persists it is refused as CONCURRENT_UPDATE (retryable)."""
    try:
        return _transact_once(root, make, **kw)
    except (FileNotFoundError, NotADirectoryError):
        pass
    try:
        return _transact_once(root, make, **kw)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise MemoryError("CONCURRENT_UPDATE", f"a file appeared or vanished during the transaction; retry "
                          f"({exc.strerror}: {os.path.basename(exc.filename or '')})") from None


def _transact_once(
    root: Path,
    make: Callable[[], tuple[Stage, _Context]],
    *,
    timeout: float,
    validate_only: bool,
    before_install: Callable[[], Any] | None = None,
) -> TxResult:
    """Run a transaction holding the write lock only for the part that needs it.

    Optimistic pass: stage, normalise, validate, rebuild views and plan without the lock;
    then take the lock and install only if the workspace still has the revision the stage
    was read at (a validate-only run just re-checks the revision). Otherwise (or when an
    interrupted install must be recovered first) everything runs again under the lock, as
    OpenProgram does. Rejections found on a snapshot that is still current are final.
    """
    # The first pass may start from the stamps this process's last install left; when the
    # workspace moved since, the pass is made again from a fresh walk before anything runs
    # under the lock -- exactly the pass there would have been without the remembered stamps.
    for remembered in (True, False):
        if needs_recovery(root):
            break
        _OPTIMISTIC.on, _OPTIMISTIC.reused = remembered, False
        try:
            stage, ctx = make()
        except MemoryError:
            if not _OPTIMISTIC.reused:
                raise
            continue  # a refusal is decided on the workspace as it is now, never on remembered stamps
        finally:
            _OPTIMISTIC.on = False
        reused = _OPTIMISTIC.reused
        with stage:
            try:
                prep = _prepare(stage, ctx)
            except MemoryError:
                if _unchanged(stage):
                    raise
                prep = None  # read while the workspace changed: decide under the lock
            if prep is not None and validate_only:
                if _unchanged(stage):
                    return _validated(stage, ctx, prep)
            elif prep is not None:
                # the hash of the new revision runs while the lock is taken and the workspace
                # walked again; it is kept only if that walk finds the stamps it started from
                prep.revision_job = _start_revision(stage, prep, stage.stamps)
                try:
                    with write_lock(root, timeout):
                        _open_locked(root)
                        if _unchanged(stage):
                            if before_install is not None:
                                before_install()
                            return _finish(stage, ctx, prep)
                finally:
                    if prep.revision_job is not None:
                        prep.revision_job.cancel()
        if not reused:
            break
    with write_lock(root, timeout):
        _open_locked(root)
        if before_install is not None and not validate_only:
            before_install()
        stage, ctx = make()
        with stage:
            return _synchronize(stage, ctx)


def _changed(plan: InstallPlan, ctx: _Context) -> tuple[str, ...]:
    seen = dict.fromkeys(ctx.reported_changed)
    seen.update(dict.fromkeys(plan.changed_files))
    return tuple(seen)


def _git_mode(value: Any) -> str:
    if value not in GIT_MODES:
        raise MemoryError("INVALID_ARGUMENT", "git_commit must be auto, on or off")
    return value


def _ensure_git(root: Path, mode: str, env: Mapping[str, str] | None) -> str | None:
    if mode == "off":
        return None
    return gitlog.ensure_history(root, env=env)


def _counter(counter: Any) -> Any:
    if counter is not None:
        return counter
    from ..format.tokens import DEFAULT_COUNTER

    return DEFAULT_COUNTER


# ------------------------------------------------------------------------------- entry points


def staged_edit(
    state: Any,
    path: str,
    text: str | None,
    *,
    message: str | None = None,
    git_commit: str = "auto",
    validate_only: bool = False,
    timeout: float = TIMEOUT_EDIT,
    git_env: Mapping[str, str] | None = None,
    counter: Any = None,
    base_revision: str | None = None,
    removable_ids: Iterable[str] = (),
) -> TxResult:
    """Hand edit (``text``) or delete (``text=None``) of one ``topics/**/*.md`` file.

    Every committed block id must survive, except the ids of a topic being deleted and
    ``removable_ids`` (a revert drops the blocks added since; a block someone still links to
    fails the dangling-link check all the same). A new paragraph may cite any existing valid
    source (new-to-block sources must be trusted). With ``base_revision`` the edit is a
    compare-and-set: ``CONCURRENT_UPDATE`` when the workspace has moved on since it was read.
    Never raises for a rejected edit: the result says why, with path/line/column.
    """
    try:
        mode = _git_mode(git_commit)
        rel = check_writable(path)
        deleting = text is None
        if deleting and rel == CORE_MASTER:
            raise MemoryError(
                "INVALID_ARGUMENT",
                "topics/core.md cannot be deleted: it is the core master (remove core records one by one instead)",
                path=rel,
            )
        if not deleting and not isinstance(text, str):
            raise MemoryError("INVALID_ARGUMENT", "text must be a string", path=rel)
        root = memory_root(state)
        if not root.parent.is_dir():
            raise MemoryError("MEMORY_NOT_FOUND", f"state directory not found: {root.parent}")
        remember = not deleting and not validate_only and counter is None
        known = None
        if remember:
            assert text is not None
            known = _known_noop(root, rel, text, mode, git_env, timeout, base_revision)
            if known is not None and views_mode() != "check":
                return known

        def make() -> tuple[Stage, _Context]:
            noop_config = noopcache.config_key(root.parent) if remember else None
            stage = Stage(root, link_topics=True)
            try:
                if base_revision is not None and base_revision != stage.revision:
                    raise MemoryError(
                        "CONCURRENT_UPDATE",
                        "workspace changed since base_revision was read",
                        details={"base_revision": base_revision, "revision": stage.revision},
                    )
                topic_rel = rel[len("topics/"):]
                excluded = set(removable_ids)
                if deleting:
                    if not stage.delete_topic(rel):
                        raise MemoryError("MEMORY_NOT_FOUND", f"topic does not exist: {rel}", path=rel)
                    excluded |= set(stage.baseline.block_ids(topic_rel))
                else:
                    stage.write_topic(rel, text)
            except BaseException:
                stage.discard()
                raise
            return stage, _Context(
                required_ids=frozenset(),
                required_except=frozenset(excluded),
                rule=RULE_HAND,
                allowed_refs=None,
                validate_only=validate_only,
                git_commit=mode,
                refuse_drops=True,
                commit_message=message or gitlog.edit_message(rel, deleted=deleting),
                git_env=git_env,
                counter=_counter(counter),
                noop_config=noop_config,
            )

        result = _transact(root, make, timeout=timeout, validate_only=validate_only,
                           before_install=lambda: _ensure_git(root, mode, git_env))
        if known is not None and result != known:  # check mode: the remembered answer, verified
            raise NoopMismatch(f"the remembered no-op answer differs from the full path's: {known} != {result}")
        return result
    except MemoryError as exc:
        return TxResult.failure(exc, validate_only=validate_only)


def validate_edit(state: Any, path: str, text: str | None, **kw: Any) -> TxResult:
    """The editor's check: the full transaction path, nothing installed."""
    return staged_edit(state, path, text, validate_only=True, **kw)


def edit_errors(state: Any, path: str, text: str | None, **kw: Any) -> tuple[Problem, ...]:
    """Validate-only API for an editor checking as the owner types: every error the hand edit
    of ``path`` with ``text`` (``None`` = delete) would be refused with, the one OpenProgram
    reports first, the others in file order. Empty when the edit would be accepted. Installs
    nothing, takes no lock; the same checks as ``staged_edit``."""
    return validate_edit(state, path, text, **kw).all_errors()


def commit_edits(
    stage: Stage,
    *,
    git_commit: str = "off",
    commit_message: str | None = None,
    timeout: float = TIMEOUT_EDIT,
    validate_only: bool = False,
    git_env: Mapping[str, str] | None = None,
    counter: Any = None,
    rule: str | None = None,
) -> TxResult:
    """Install a writer's stage (agent commit, §5.5). No git commit unless asked."""
    root = stage.memory_root
    try:
        mode = _git_mode(git_commit)
        if stage.sources_copied:
            committed = root / "sources"
            plan = plan_install(root, stage.path, compare_sources=True)
            if any(t.path.startswith("sources/") for t in plan.targets) or _sources_removed(committed, stage.path / "sources"):
                raise MemoryError("APPEND_ONLY_REQUIRED", "Source Memory is append-only")
        texts, _ = stage.topic_texts()
        staged_ids = set(stage.cache.tree(texts, stage.index, stage.token).ids)
        required = set(stage.baseline.ids) & staged_ids
        if stage.restricted:
            default_rule = RULE_WRITER if stage.allowed_refs else RULE_ORGANIZE
        else:
            default_rule = RULE_HAND
        ctx = _Context(
            required_ids=frozenset(required),
            rule=rule or default_rule,
            allowed_refs=stage.allowed_refs,
            validate_only=validate_only,
            git_commit=mode,
            commit_message=commit_message if mode != "off" else None,
            git_env=git_env,
            counter=_counter(counter),
        )

        def changed_error() -> MemoryError:
            return MemoryError(
                "CONCURRENT_UPDATE",
                "workspace changed while the writer was running",
                details={"base_revision": stage.revision, "revision": workspace_revision(root)},
            )

        # Normalise, validate and build views without the lock; install under it.
        if not _unchanged(stage):
            raise changed_error()
        prep = _prepare(stage, ctx)
        if validate_only:
            return _validated(stage, ctx, prep)
        with write_lock(root, timeout):
            _open_locked(root)
            if not _unchanged(stage):
                raise changed_error()
            return _finish(stage, ctx, prep)
    except MemoryError as exc:
        return TxResult.failure(exc, validate_only=validate_only)


def _sources_removed(committed: Path, staged: Path) -> bool:
    if not committed.is_dir():
        return False
    for dirpath, _, filenames in os.walk(committed):
        for name in filenames:
            rel = Path(dirpath, name).relative_to(committed)
            if not (staged / rel).is_file():
                return True
    return False


def update(
    state: Any,
    base_revision: Any = None,
    *,
    memory_changes: Any = None,
    changes: Any = None,
    patch: Any = None,
    sources: Any = None,
    commit_message: Any = None,
    git_commit: Any = "auto",
    append_only: Any = False,
    validate_only: bool = False,
    timeout: float = TIMEOUT_EDIT,
    git_env: Mapping[str, str] | None = None,
    counter: Any = None,
    provenance: Provenance | None = None,
) -> TxResult:
    """OpenProgram's structured transaction (§5.3), compare-and-set on ``base_revision``.

    Caller-supplied ``sources`` need complete ``provenance`` (who is speaking, with which
    authority tier, from where); without it they are refused with
    ``WRITER_PRECONDITION_FAILED`` exactly as OpenProgram refuses them. With it, they are
    archived into the stage as trusted ``claude-code`` sources (content addressed, so a retry
    archives the same ids), their ``new-source-…`` labels are replaced by those ids, and
    exactly those ids may be newly cited (plus, for record ops, the refs the ops declare).
    The archives are installed with the topics, or not at all.
    """
    from ..changes.files import apply_file_changes
    from ..changes.labels import replace_new_source_labels
    from ..changes.patch import apply_patch
    from ..changes.records import apply_memory_changes
    from ..changes.request import check_append_only, validate_request
    from ..changes.workcopy import is_scan_summary, scan_summary

    payload = {
        "base_revision": base_revision,
        "memory_changes": memory_changes,
        "changes": changes,
        "patch": patch,
        "sources": sources,
        "commit_message": commit_message,
        "git_commit": git_commit,
        "append_only": append_only,
    }
    try:
        request = validate_request({k: v for k, v in payload.items() if v is not None})
        if request.sources and (not isinstance(provenance, Provenance) or not provenance.complete):
            raise MemoryError("WRITER_PRECONDITION_FAILED", AUTHORITY_REQUIRED)
        declared = transaction_source_records(request.sources, provenance) if request.sources else []
        root = memory_root(state)
        if not root.parent.is_dir():
            raise MemoryError("MEMORY_NOT_FOUND", f"state directory not found: {root.parent}")

        def make() -> tuple[Stage, _Context]:
            stage = Stage(root, link_topics=True)
            try:
                if request.base_revision != stage.revision:
                    raise MemoryError(
                        "CONCURRENT_UPDATE",
                        "workspace changed since base_revision was read",
                        details={"base_revision": request.base_revision, "revision": stage.revision},
                    )
                source_ids: dict[str, str] = {}
                if declared:
                    stage.stage_sources([record for _, record in declared])
                    source_ids = {label: record.source_id for label, record in declared}
                req = replace_new_source_labels(request, source_ids)
                texts, _ = stage.topic_texts()
                if req.form == "memory_changes":
                    cache = stage.cache

                    def summaries(path: str, text: str) -> Any:
                        return cache.kept("scan", path, text, lambda: scan_summary(path, text),
                                          is_scan_summary)

                    def owned() -> Any:
                        from ..store import recordindex

                        return apply_memory_changes(
                            texts, stage.baseline, req.memory_changes, link_for=stage.index.link_for,
                            summaries=summaries,
                            owned=recordindex.owners(root, texts, stage.committed_shas, summaries),
                        )

                    outcome = derive("record ops", owned, lambda: apply_memory_changes(
                        texts, stage.baseline, req.memory_changes, link_for=stage.index.link_for,
                        summaries=summaries,
                    ))
                    rule = RULE_RECORDS
                    allowed = frozenset(source_ids.values()) | outcome.allowed_refs
                elif req.form == "changes":
                    outcome = apply_file_changes(texts, req.changes)
                    rule, allowed = RULE_FILES, frozenset(source_ids.values())
                else:
                    outcome = apply_patch(texts, req.patch or "")
                    rule, allowed = RULE_FILES, frozenset(source_ids.values())
                if req.append_only:
                    check_append_only(texts, outcome.texts)
                _write_stage_texts(stage, outcome.texts, existing=texts)
                # None: nothing required; else every baseline id but the removable ones
                excluded = None if outcome.removable_ids is None else frozenset(outcome.removable_ids)
            except BaseException:
                stage.discard()
                raise
            return stage, _Context(
                required_ids=frozenset(),
                required_except=excluded,
                rule=rule,
                allowed_refs=allowed,
                validate_only=validate_only,
                git_commit=req.git_commit,
                commit_message=req.commit_message,
                git_env=git_env,
                counter=_counter(counter),
                reported_changed=outcome.changed_files,
                source_ids=source_ids,
                structured=True,
                refuse_drops=req.form != "memory_changes",
            )

        result = _transact(root, make, timeout=timeout, validate_only=validate_only,
                           before_install=lambda: _ensure_git(root, request.git_commit, git_env))
        return _structured_git(result, request.git_commit)
    except MemoryError as exc:
        return TxResult.failure(exc, validate_only=validate_only)
    except (ValueError, TypeError) as exc:  # §5.3 step 9: validation failures keep their text
        return TxResult.failure(MemoryError("INVALID_TOPIC_FORMAT", str(exc)), validate_only=validate_only)


def _structured_git(result: TxResult, mode: str) -> TxResult:
    """§5.3 step 10: with ``on`` a missing commit is an error, but memory stays committed."""
    if not result.ok or result.validate_only or mode != "on" or result.git_committed:
        return result
    reason = result.git_error or "not a git repository"
    message = (
        "memory committed but there was nothing to commit"
        if reason == gitlog.NOTHING_TO_COMMIT
        else f"memory committed but git commit failed: {reason}"
    )
    return replace(
        result,
        ok=False,
        code="GIT_COMMIT_FAILED",
        message=message,
        details={"memory_committed": True, "git_committed": False, "revision": result.revision},
    )


def rebuild_views(
    state: Any,
    *,
    timeout: float = TIMEOUT_DEFAULT,
    counter: Any = None,
    validate_only: bool = False,
) -> TxResult:
    """``views --rebuild``: re-derive every view from the committed topics; installs only
    what differs (a workspace whose views are current is left untouched, revision included)."""
    try:
        root = memory_root(state)
        if not root.is_dir():  # nothing to derive from: never create a workspace here
            raise MemoryError("MEMORY_NOT_FOUND", f"no memory workspace at {root}")

        def make() -> tuple[Stage, _Context]:
            stage = Stage(root, link_topics=True)
            return stage, _Context(
                required_ids=frozenset(),
                required_except=frozenset(),
                rule=RULE_HAND,
                allowed_refs=None,
                validate_only=validate_only,
                git_commit="off",
                commit_message=None,
                git_env=None,
                counter=_counter(counter),
            )

        return _transact(root, make, timeout=timeout, validate_only=validate_only)
    except MemoryError as exc:
        return TxResult.failure(exc, validate_only=validate_only)
