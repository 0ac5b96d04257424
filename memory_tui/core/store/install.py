"""Crash-safe install of a validated stage into the memory workspace, and its recovery.

OpenProgram installs with a sequence of renames and an in-process rollback only, so a
``kill -9`` midway leaves a mixed workspace (pitfall 8). This module installs the same files
with an *intent record* and an idempotent roll-forward.

Invariant
---------
At every instant, the workspace ``<M>`` plus the install scratch area is in exactly one of
two situations, and :func:`recover` (run under the write lock on every open) turns it into a
clean workspace at exactly the OLD or exactly the NEW revision:

1. **No journal** (``<M>/<rt>/install-journal.json`` absent). Nothing under ``<M>`` outside
   the scratch dir ``<M>/<rt>-txn/`` has been touched yet (or the install finished). Recovery
   deletes the scratch dir. Result: the OLD revision (or NEW if the install had finished).
2. **Journal present.** The journal was written atomically (temp file, fsync, rename, dir
   fsync) only after every new byte had been written and fsynced into ``<rt>-txn/new/``.
   It lists every target with the content hash it had before (``old``) and must have after
   (``new``), ``null`` for absent. Every target is at all times either at ``old`` with its
   ``new`` copy waiting in the scratch dir, or already at ``new``; each step is one atomic
   ``rename`` (or ``renameat2(RENAME_EXCHANGE)`` for whole trees). Recovery first checks that
   every target is in one of these two states and then rolls forward to NEW. If some target
   is in neither (someone else changed the workspace after we died), the journal is stale:
   recovery touches nothing, drops the journal and reports it.

Targets are installed in an order that keeps every intermediate state readable by
OpenProgram: source archives first (append-only supersets of the old ones, one atomic
rename each), then ``topics/`` as one atomic directory exchange (so a reader never sees a
mix of old and new topic files), then ``timeline/``, the other derived files, and
``runtime.json`` last. Installed files are 0600 and directories 0700 (spec §2.4).

The runtime dir name may be ``.scriptorium`` or the legacy ``.nativemem``; the scratch dir
``<rt>-txn`` is an internal name (hidden from listings, the revision and git).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat as stat_mod
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from ..cache.stamp import is_racy
from ..format.errors import Problem
from . import gitlog
from .confine import STAGE_DIR_SUFFIX, refuse_linked_paths, refuse_symlink
from ..fsutil import fsync_dir, named_errors
from .lock import hold_depth
from ..format.paths import Layout
from ..cache.registry import keeps
from ..switches import current as switches

JOURNAL_NAME = "install-journal.json"
JOURNAL_VERSION = 1
TREE_TARGETS = ("topics", "timeline")
FILE_TARGETS = ("recent_events.jsonl", "commitments.jsonl", "relations.json", "core.md")
ROOT_DROPS = "."  # ``plan_install``'s ``sparse`` key: the root files a sparse stage removes
OPENPROGRAM_BACKUP_SUFFIX = "-block-backup"

_crash_counter = 0


def _crash_point(label: str) -> None:
    """Die here (without cleanup) when the crash-injection hook says so."""
    at = switches().crash_at  # the test switch MEMORY_TUI_TEST_CRASH_AT
    if at is None:
        return
    global _crash_counter
    _crash_counter += 1
    if _crash_counter == at:
        os._exit(86)


# ---------------------------------------------------------------------------------- hashing


def file_hash(path: Path) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return "dir"


def topic_owned(rel: str) -> bool:
    """Files under ``topics/`` that memory-tui owns: ``**/*.md``. Anything else there (a ``notes.txt``, an
    ``attachments/plan.pdf``, a symlink) belongs to the user and is carried over untouched."""
    return rel.endswith(".md")  # what the topic reader reads (topics.read_topic_texts)


def _owned_filter(target: str):
    return topic_owned if target == "topics" else None


def _tree_files(root: Path, owned=None) -> dict[str, Path]:
    out: dict[str, Path] = {}
    if not root.is_dir() or root.is_symlink():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for name in filenames:
            full = Path(dirpath) / name
            if full.is_symlink() or not full.is_file():
                continue
            rel = full.relative_to(root).as_posix()
            if owned is not None and not owned(rel):
                continue
            out[rel] = full
    return out


def _carry_unowned(committed: Path, dst: Path, owned) -> None:
    """Put every entry of ``committed`` that memory-tui does not own into the new tree ``dst``
    as itself: regular files as hard links (same inode, bytes and mode), symlinks as the same
    link. The directory exchange then leaves them exactly as they were."""
    if not committed.is_dir() or committed.is_symlink():
        return
    for dirpath, dirnames, filenames in os.walk(committed):
        base = Path(dirpath)
        keep_dirs = []
        for name in dirnames:
            full = base / name
            if full.is_symlink():
                filenames.append(name)  # a linked folder is one entry, never descended
            else:
                keep_dirs.append(name)
        dirnames[:] = keep_dirs
        for name in filenames:
            full = base / name
            rel = full.relative_to(committed).as_posix()
            is_link = full.is_symlink()
            if not is_link and owned(rel):
                continue
            target = dst / rel
            if target.exists() or target.is_symlink():
                continue  # never happens for owned-only stages; keep the staged entry if it does
            _makedirs(target.parent)
            if is_link:
                os.symlink(os.readlink(full), target)
            elif full.is_file():
                try:
                    os.link(full, target)
                except OSError:
                    shutil.copy2(full, target)


_HASHES: dict[tuple[int, int, int, int, int], str] = keeps({})  # (dev, ino, size, mtime_ns, ctime_ns) -> sha256
_HASHES_MAX = 200_000


def _stat_hash(path: Path) -> str | None:
    """``file_hash`` remembered by stat stamp (ctime included, which no tool can set): a file
    unchanged since it was last hashed -- or a hard link to it -- is not read again."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return file_hash(path)
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if is_racy(st.st_mtime_ns, st.st_ctime_ns):
        return file_hash(path)  # too fresh for its stamps to prove it unchanged later
    hit = _HASHES.get(key)
    if hit is not None:
        return hit
    value = file_hash(path)
    if value is not None and value != "dir":
        try:
            if os.stat(path).st_ctime_ns != st.st_ctime_ns:  # changed while reading
                return value
        except OSError:
            return value
        if len(_HASHES) >= _HASHES_MAX:
            _HASHES.clear()
        _HASHES[key] = value
    return value


def tree_digest(root: Path, owned=None) -> tuple[str | None, dict[str, str]]:
    """(tree hash, {relative path: file sha256}); tree hash is None when ``root`` is absent.
    ``owned`` limits both to the files memory-tui owns."""
    if not root.is_dir():
        return None, {}
    files = _tree_files(root, owned)
    hashes = {rel: _stat_hash(p) or "" for rel, p in files.items()}
    return _digest_of(hashes), hashes


def _target_hash(path: Path, kind: str, target: str = "") -> str | None:
    if kind == "tree":
        return tree_digest(path, _owned_filter(target))[0]
    if not path.exists():
        return None
    return file_hash(path)


# ------------------------------------------------------------------------------- fs helpers


def _makedirs(path: Path) -> None:
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        os.chmod(d, 0o700)


def _secure_dirs(root: Path, folder: Path) -> None:
    """0700 on every folder from ``root`` (exclusive) down to ``folder``: what a directory
    exchange would have installed, for a one-file install into a tree."""
    rel = folder.relative_to(root).parts
    path = root
    for part in rel:
        path = path / part
        st = os.lstat(path)
        if stat_mod.S_ISDIR(st.st_mode) and stat_mod.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)


def _copy_file(src: Path, dst: Path) -> None:
    with named_errors(dst):
        _makedirs(dst.parent)
        data = src.read_bytes()
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(dst, 0o600)


def _copy_tree(src: Path, dst: Path, reuse: Path | None = None, owned=None) -> None:
    """Copy ``src`` to ``dst`` durably. Files whose bytes equal the committed file under
    ``reuse`` are hard-linked instead (already durable; no copy, no fsync): an install of a
    one-topic edit writes one file, not the whole tree (pitfall 4). With ``owned``, only owned
    files come from ``src``; everything else comes unchanged from ``reuse``."""
    _makedirs(dst)
    dirs = {dst}
    for rel, full in _tree_files(src, owned).items():
        target = dst / rel
        if target.parent not in dirs:
            _makedirs(target.parent)
            dirs.add(target.parent)
        if reuse is not None and _same_file(reuse / rel, full):
            try:
                os.link(reuse / rel, target)
                os.chmod(target, 0o600)
                continue
            except OSError:
                pass
        _copy_file(full, target)
    if owned is not None and reuse is not None:
        # after the staged files, so a carried symlinked folder is never written through
        _carry_unowned(reuse, dst, owned)
        for dirpath, _dirnames, _files in os.walk(dst):
            dirs.add(Path(dirpath))  # the carried links must survive a crash after the exchange
    for d in dirs:
        fsync_dir(d)


def _overlay_tree(committed: Path, staged: Path, dst: Path, drops: frozenset[str], owned) -> None:
    """Build the full new tree of a sparse stage at ``dst``, durably: the committed tree's
    files (hard links, already durable) except ``drops``, with the staged files (copied and
    fsynced) in place of or beside them; unowned entries are carried as themselves."""
    _makedirs(dst)
    dirs = {dst}
    staged_files = _tree_files(staged, owned)
    for rel, full in _tree_files(committed, owned).items():
        if rel in drops or rel in staged_files:
            continue
        target = dst / rel
        if target.parent not in dirs:
            _makedirs(target.parent)
            dirs.add(target.parent)
        try:
            os.link(full, target)
            os.chmod(target, 0o600)
        except OSError:
            _copy_file(full, target)
    for rel, full in staged_files.items():
        target = dst / rel
        if target.parent not in dirs:
            _makedirs(target.parent)
            dirs.add(target.parent)
        _copy_file(full, target)
    if owned is not None:
        _carry_unowned(committed, dst, owned)
        for dirpath, _dirnames, _files in os.walk(dst):
            dirs.add(Path(dirpath))
    for d in dirs:
        fsync_dir(d)


def _same_file(committed: Path, staged: Path) -> bool:
    try:
        if committed.is_symlink() or not committed.is_file():
            return False
        a, b = committed.stat(), staged.stat()
        if os.path.samestat(a, b):
            return True  # a hard link of the committed file
        if a.st_size != b.st_size:
            return False
        return committed.read_bytes() == staged.read_bytes()
    except OSError:
        return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for dirpath, dirnames, filenames in os.walk(path):  # staged sources may be 0444
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o700)
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_renameat2 = None


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2``); False when unsupported."""
    global _renameat2
    import ctypes  # imported on first use: ctypes is a measurable share of a fresh edit's start-up
    import ctypes.util

    if _renameat2 is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fn = libc.renameat2
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            fn.restype = ctypes.c_int
            _renameat2 = fn
        except (OSError, AttributeError):
            _renameat2 = False
    if not _renameat2:
        return False
    rc = _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a))


# ------------------------------------------------------------------------------- stages



def stage_area(layout: Layout) -> Path:
    return layout.root / f"{layout.runtime_name}{STAGE_DIR_SUFFIX}"


@dataclass
class StageDir:
    """A private stage directory and the flock that says its owner is alive.

    The lock file ``<token>.lock`` is created and locked *before* the directory exists, so a
    recovering process that can take the lock knows the owner died (``kill -9`` releases a
    flock) and removes both; a live stage is never touched.
    """

    path: Path
    lock_fd: int | None = None
    lock_file: Path | None = None

    def release(self) -> None:
        if self.lock_file is not None:
            self.lock_file.unlink(missing_ok=True)
            self.lock_file = None
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def make_stage_dir(layout: Layout, prefix: str = "stage-", *, outside: bool = False) -> StageDir:
    """A new 0700 stage directory in the workspace's own scratch area (same filesystem as the
    workspace, so hard links and renames work; never in a shared temp folder). In the system
    temp dir when the workspace cannot be written, or with ``outside``: a stage that is only
    checked, never installed, writes nothing into the workspace (not even a scratch folder a
    writer command's own watch would see appear beside its stage)."""
    area = stage_area(layout)
    try:
        if outside:
            raise PermissionError("a check-only stage lives outside the workspace")
        if not layout.root.is_dir():
            raise FileNotFoundError(str(layout.root))
        while True:
            refuse_symlink(area)
            try:
                os.mkdir(area, 0o700)
            except FileExistsError:
                pass
            refuse_symlink(area)
            token = prefix + os.urandom(8).hex()  # 16 hex digits, as uuid4().hex[:16] gave (without importing uuid)
            lock_file = area / f"{token}.lock"
            try:
                fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
            except FileNotFoundError:
                continue  # another process removed the empty area just now
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                same = os.path.samestat(os.fstat(fd), os.lstat(lock_file))
            except FileNotFoundError:
                same = False  # a recovering process removed it between our create and lock
            if same:
                break
            os.close(fd)
        path = area / token
        try:
            os.mkdir(path, 0o700)
        except BaseException:
            lock_file.unlink(missing_ok=True)
            os.close(fd)
            raise
        return StageDir(path, fd, lock_file)
    except (PermissionError, FileNotFoundError):
        import tempfile  # only for this fallback: tempfile (and random) cost every fresh start-up

        return StageDir(Path(tempfile.mkdtemp(prefix="memory-tui-stage-")))


def remove_stage_dir(stage: StageDir) -> None:
    if stage.path.exists():
        _remove(stage.path)
    owned = stage.lock_file is not None
    stage.release()
    if owned:
        _drop_empty_area(stage.path.parent)


def _drop_empty_area(area: Path) -> None:
    try:
        os.rmdir(area)  # the workspace looks as it did when no stage is open
    except OSError:
        pass


def clean_stale_stages(layout: Layout) -> tuple[str, ...]:
    """Remove every stage whose owner is gone (call under the write lock)."""
    area = stage_area(layout)
    if area.is_symlink() or not area.is_dir():
        return ()
    removed: list[str] = []
    try:
        names = os.listdir(area)
    except OSError:
        return ()
    locks = {n[: -len(".lock")] for n in names if n.endswith(".lock")}
    for name in sorted(locks):
        lock_file = area / f"{name}.lock"
        try:
            fd = os.open(lock_file, os.O_RDWR | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    continue  # its owner is alive
                raise
            target = area / name
            if target.exists() or target.is_symlink():
                _remove(target)
            lock_file.unlink(missing_ok=True)
            removed.append(name)
        finally:
            os.close(fd)
    for name in names:
        if name.endswith(".lock") or name in locks:
            continue
        _remove(area / name)  # no lock file at all: left by a crash during removal
        removed.append(name)
    _drop_empty_area(area)
    return tuple(removed)


# -------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Target:
    kind: str  # "file" | "tree"
    path: str  # workspace-relative posix path
    old: str | None  # content hash before (None = absent)
    new: str | None  # content hash after (None = absent)

    def to_json(self) -> dict:
        return {"kind": self.kind, "path": self.path, "old": self.old, "new": self.new}


@dataclass(frozen=True)
class InstallPlan:
    targets: tuple[Target, ...]
    changed_files: tuple[str, ...]  # workspace-relative files whose bytes change (all kinds)
    # tree name -> files it drops, for trees the stage holds *sparsely* (only the files it
    # adds or replaces; every other committed file stays): ``install`` builds the new tree
    # from the committed one plus the stage's files
    sparse: tuple[tuple[str, frozenset[str]], ...] = ()

    @property
    def empty(self) -> bool:
        return not self.targets


def _scratch(layout: Layout) -> Path:
    return layout.root / f"{layout.runtime_name}-txn"


def _journal(layout: Layout) -> Path:
    return layout.runtime_dir / JOURNAL_NAME


def plan_install(memory_root: Path, stage_root: Path, *, compare_sources: bool = True,
                 sparse: Mapping[str, Iterable[str]] | None = None) -> InstallPlan:
    """Compare the stage with the committed workspace; list what an install must change.

    ``stage_root`` mirrors ``<M>``: ``topics/``, ``timeline/``, ``sources/`` (absent for a
    restricted stage, then sources are left alone), the derived files and
    ``<rt>/runtime.json``. Sources are append-only: a staged source file replaces its
    committed copy; a missing staged file never deletes one.

    ``sparse`` names trees the stage holds sparsely, each with the files it removes: the
    stage's tree then holds only the files it adds or replaces, and the new tree is the
    committed one with those applied. Only the staged files are compared (the cost grows with
    the change, not the workspace). A change of exactly one file (added or replaced) becomes a
    ``file`` target: one atomic rename is as atomic as the directory exchange and leaves
    every other file's inode (and so its stat stamp) alone. A sparse stage also holds only
    the root files (``FILE_TARGETS``, ``<rt>/runtime.json``) it writes: one it lacks is
    unchanged, unless ``sparse[ROOT_DROPS]`` names it (removed).
    """
    layout = Layout(Path(memory_root))
    root = layout.root
    stage = Path(stage_root)
    targets: list[Target] = []
    changed: list[str] = []
    if compare_sources and (stage / "sources").is_dir():
        committed = _tree_files(root / "sources")
        for rel, full in sorted(_tree_files(stage / "sources").items(), key=lambda kv: kv[0].split("/")):
            old_path = committed.get(rel)
            if old_path is not None and old_path.stat().st_size == full.stat().st_size:
                if old_path.read_bytes() == full.read_bytes():
                    continue
            old = file_hash(old_path) if old_path is not None else None
            new = file_hash(full)
            if old != new:
                targets.append(Target("file", f"sources/{rel}", old, new))
                changed.append(f"sources/{rel}")
    sparse_trees = {name: frozenset(drops) for name, drops in (sparse or {}).items()}
    kept_sparse: list[tuple[str, frozenset[str]]] = []
    for name in TREE_TARGETS:
        owned = _owned_filter(name)
        if name in sparse_trees:
            planned = _plan_sparse(root, stage, name, sparse_trees[name], owned)
            if planned is not None:
                target, files, drops = planned
                targets.append(target)
                changed.extend(files)
                if target.kind == "tree":
                    kept_sparse.append((name, drops))
            continue
        old_hash, old_files = tree_digest(root / name, owned)
        new_hash, new_files = tree_digest(stage / name, owned)
        if old_hash == new_hash:
            continue
        targets.append(Target("tree", name, old_hash, new_hash))
        for rel in sorted(set(old_files) | set(new_files), key=lambda r: r.split("/")):
            if old_files.get(rel) != new_files.get(rel):
                changed.append(f"{name}/{rel}")
    rt = layout.runtime_name
    for name in (*FILE_TARGETS, f"{rt}/runtime.json"):
        if sparse is not None and name not in sparse_trees.get(ROOT_DROPS, ()) and not os.path.lexists(stage / name):
            continue  # a sparse stage holds only the root files it writes (``Stage.root_file``)
        if _same_bytes(root / name, stage / name):
            continue  # what the hashes below would find equal, at the cost of one compare
        old = _target_hash(root / name, "file")
        new = _target_hash(stage / name, "file")
        if old == new:
            continue
        if name == "commitments.jsonl" and new is None:
            continue  # legacy, read-only: a stage never deletes it
        targets.append(Target("file", name, old, new))
        if not name.startswith(rt + "/"):
            changed.append(name)
    # The last word before anything moves, whatever staged it: no target and no changed file
    # may be (or lie below) a committed link -- the rename would replace the link (and drop
    # what the linked file holds) or the write would land outside the workspace.
    refuse_linked_paths(root, [*(t.path for t in targets), *changed])
    return InstallPlan(tuple(targets), tuple(changed), tuple(kept_sparse))


def _same_bytes(a: Path, b: Path) -> bool:
    """Both are regular files holding the same bytes (a stage's untouched copy of a derived
    file: ``relations.json`` and ``runtime.json`` grow with the workspace, and hashing both
    sides of each cost more than reading and comparing them)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    if not (stat_mod.S_ISREG(sa.st_mode) and stat_mod.S_ISREG(sb.st_mode)) or sa.st_size != sb.st_size:
        return False
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            return fa.read() == fb.read()
    except OSError:
        return False


def _plain_file(root: Path, rel: str) -> bool:
    """``root/rel`` is a regular file or absent, reached through no symbolic link (so one
    rename replaces exactly it)."""
    path = root
    for part in rel.split("/")[:-1]:
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return True  # created by the install, with 0700 folders
        if not stat_mod.S_ISDIR(st.st_mode):
            return False
    try:
        st = os.lstat(root / rel)
    except FileNotFoundError:
        return True
    return stat_mod.S_ISREG(st.st_mode)


def _plan_sparse(root: Path, stage: Path, name: str, drops: frozenset[str], owned) -> tuple[Target, list[str], frozenset[str]] | None:
    """The target for a sparsely staged tree: ``None`` when nothing changes, a ``file``
    target when exactly one file is added or replaced, else the ``tree`` target (with the
    whole new tree's digest, computed from the committed files' remembered hashes)."""
    committed_dir = root / name
    puts: dict[str, tuple[str | None, str]] = {}
    for rel, full in _tree_files(stage / name, owned).items():
        if rel in drops:
            raise ValueError(f"sparse stage both replaces and drops {name}/{rel}")
        new = file_hash(full)
        old = _stat_hash(committed_dir / rel)
        if old != new and new is not None:
            puts[rel] = (old, new)
    gone = frozenset(rel for rel in drops if os.path.lexists(committed_dir / rel))
    if not puts and not gone:
        return None
    if not gone and len(puts) == 1:
        rel, (old, new) = next(iter(puts.items()))
        if old != "dir" and _plain_file(root, f"{name}/{rel}"):
            return Target("file", f"{name}/{rel}", old, new), [f"{name}/{rel}"], gone
    old_hash, old_files = tree_digest(committed_dir, owned)
    new_files = {rel: h for rel, h in old_files.items() if rel not in gone}
    new_files.update({rel: new for rel, (_old, new) in puts.items()})
    changed = [f"{name}/{rel}" for rel in sorted(set(old_files) | set(new_files), key=lambda r: r.split("/"))
               if old_files.get(rel) != new_files.get(rel)]
    return Target("tree", name, old_hash, _digest_of(new_files)), changed, gone


def _digest_of(hashes: Mapping[str, str]) -> str:
    h = hashlib.sha256()
    for rel in sorted(hashes, key=lambda r: r.split("/")):
        h.update(rel.encode("utf-8") + b"\x00" + hashes[rel].encode() + b"\x00")
    return h.hexdigest()


# ------------------------------------------------------------------------------- install


def install(memory_root: Path, stage_root: Path, plan: InstallPlan) -> None:
    """Install ``plan`` from ``stage_root`` into ``memory_root``. Call under the write lock.

    Either returns with the workspace at the NEW state, or raises/dies leaving a state that
    :func:`recover` turns into exactly the OLD (no journal yet) or the NEW state.
    """
    if plan.empty:
        return
    layout = Layout(Path(memory_root))
    root = layout.root
    stage = Path(stage_root)
    scratch = _scratch(layout)
    journal = _journal(layout)
    if journal.exists():
        recover(root)
    if scratch.exists():
        _remove(scratch)
    _makedirs(scratch / "new")
    _makedirs(scratch / "old")
    sparse = dict(plan.sparse)

    # 1. every new byte, durable, inside the workspace's filesystem
    try:
        for t in plan.targets:
            if t.new is None:
                continue
            if t.kind == "tree" and t.path in sparse:
                _overlay_tree(root / t.path, stage / t.path, scratch / "new" / t.path, sparse[t.path],
                              _owned_filter(t.path))
            elif t.kind == "tree":
                _copy_tree(stage / t.path, scratch / "new" / t.path, reuse=root / t.path, owned=_owned_filter(t.path))
            else:
                _copy_file(stage / t.path, scratch / "new" / t.path)
        fsync_dir(scratch / "new")
        _crash_point("prepared")
        # 2. the intent record: the commit point
        _makedirs(layout.runtime_dir)
        body = {
            "version": JOURNAL_VERSION,
            "scratch": scratch.name,
            "targets": [t.to_json() for t in plan.targets],
        }
        tmp = journal.with_name(journal.name + ".tmp")
        with named_errors(journal):
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, (json.dumps(body, indent=1) + "\n").encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
        _crash_point("journal-written")
        os.replace(tmp, journal)
        fsync_dir(layout.runtime_dir)
    except BaseException:
        # Nothing under <M> has changed yet: the old revision stands.
        _discard_intent(layout)
        raise
    _crash_point("journal-committed")
    # 3. roll forward (the same code recovery runs)
    _roll_forward(layout, plan.targets, verify=False)
    _finish(layout)


def _discard_intent(layout: Layout) -> None:
    for p in (_journal(layout).with_name(JOURNAL_NAME + ".tmp"),):
        try:
            p.unlink()
        except FileNotFoundError:
            pass
    _remove(_scratch(layout))


def _finish(layout: Layout) -> None:
    _journal(layout).unlink(missing_ok=True)
    fsync_dir(layout.runtime_dir)
    _crash_point("journal-removed")
    _remove(_scratch(layout))


def _state_of(layout: Layout, t: Target) -> str:
    """'new' (done), 'old' (new copy is waiting), or 'stale'."""
    root = layout.root
    cur = _target_hash(root / t.path, t.kind, t.path)
    if cur == t.new:
        return "new"
    staged = _scratch(layout) / "new" / t.path
    if t.new is not None and _target_hash(staged, t.kind, t.path) != t.new:
        return "stale"
    if cur == t.old:
        return "old"
    if cur is None and t.kind == "tree" and t.old is not None:
        # between the two renames of the fallback path: the old tree sits in scratch/old
        if _target_hash(_scratch(layout) / "old" / t.path, "tree", t.path) == t.old:
            return "old"
    return "stale"


def _apply(layout: Layout, t: Target) -> None:
    root = layout.root
    scratch = _scratch(layout)
    dest = root / t.path
    staged = scratch / "new" / t.path
    if t.kind == "file":
        if t.new is None:
            dest.unlink(missing_ok=True)
        else:
            _makedirs(dest.parent)
            if "/" in t.path and t.path.split("/", 1)[0] in TREE_TARGETS:
                _secure_dirs(root, dest.parent)
            os.replace(staged, dest)
        fsync_dir(dest.parent)
        return
    if t.new is None:
        if dest.exists():
            aside = scratch / "old" / t.path
            _makedirs(aside.parent)
            if aside.exists():
                _remove(aside)
            os.rename(dest, aside)
        fsync_dir(root)
        return
    if dest.exists():
        if _exchange(staged, dest):
            fsync_dir(root)
            return
        aside = scratch / "old" / t.path
        _makedirs(aside.parent)
        if aside.exists():
            _remove(aside)
        os.rename(dest, aside)
        _crash_point(f"tree-aside:{t.path}")
    os.rename(staged, dest)
    fsync_dir(root)


def _roll_forward(layout: Layout, targets: Iterable[Target], *, verify: bool = True) -> None:
    for t in targets:
        if verify and _state_of(layout, t) == "new":
            continue
        _apply(layout, t)
        _crash_point(f"target:{t.path}")


# ------------------------------------------------------------------------------ recovery


@dataclass(frozen=True)
class RecoveryReport:
    action: str  # "none" | "discarded" | "rolled-forward" | "stale-journal" | "unreadable-journal"
    targets: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return self.action == "rolled-forward"


def needs_recovery(memory_root: Path) -> bool:
    layout = Layout(Path(memory_root))
    return _journal(layout).exists() or _scratch(layout).exists()


def _outermost(layout: Layout) -> bool:
    # A nested open inside a running transaction (a writer's stage, an organize inside a write)
    # must not finish its own job's intents or commit its pending change: they are in progress.
    return hold_depth(layout.root) <= 1


def _remove_dead_temps(layout: Layout) -> None:
    from ..fsutil import user_cache_dir
    from .leftovers import remove_dead_temps, remove_retired_caches

    # The user cache dir too: the session index, token memo, outline and layout tables are
    # replaced there through the same pid-named temps, and a kill leaves them just the same.
    remove_dead_temps([(layout.runtime_dir, True), (user_cache_dir(), True)])
    # and the files of caches an earlier version kept under names nothing reads now
    remove_retired_caches({"runtime": layout.runtime_dir, "outline": user_cache_dir("outline")})


def _run_open_steps(layout: Layout) -> None:
    if not _outermost(layout):
        return
    from . import openhooks

    for step in openhooks.steps():  # a killed job's marks intent, a killed migration
        step(layout.root)


def recover(memory_root: Path) -> RecoveryReport:
    """Finish or forget an interrupted install, then what a killed job left (its marks
    intent, its temp files, its git step). Idempotent; call under the write lock."""
    layout = Layout(Path(memory_root))
    journal = _journal(layout)
    scratch = _scratch(layout)
    problems: list[Problem] = []
    problems.extend(_openprogram_backup(layout))
    clean_stale_stages(layout)
    if _outermost(layout):
        _remove_dead_temps(layout)
    if not journal.exists():
        tmp = journal.with_name(JOURNAL_NAME + ".tmp")
        if scratch.exists() or tmp.exists():
            _discard_intent(layout)
            _run_open_steps(layout)
            _finish_git(layout)
            return RecoveryReport("discarded", problems=tuple(problems))
        _run_open_steps(layout)
        _finish_git(layout)
        return RecoveryReport("none", problems=tuple(problems))
    try:
        body = json.loads(journal.read_text(encoding="utf-8"))
        targets = tuple(
            Target(str(t["kind"]), str(t["path"]), t.get("old"), t.get("new")) for t in body["targets"]
        )
        for t in targets:
            if t.kind not in ("file", "tree") or ".." in t.path.split("/") or t.path.startswith("/"):
                raise ValueError(f"bad target {t.path!r}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        # Unreachable by a crash (the journal is renamed into place whole); keep it for a human.
        problems.append(
            Problem(
                "TRANSACTION_FAILURE_UNKNOWN",
                f"unreadable install journal, left in place: {exc}",
                path=f"{layout.runtime_name}/{JOURNAL_NAME}",
            )
        )
        return RecoveryReport("unreadable-journal", problems=tuple(problems))
    states = {t.path: _state_of(layout, t) for t in targets}
    stale = [p for p, s in states.items() if s == "stale"]
    if stale:
        problems.append(
            Problem(
                "TRANSACTION_FAILURE_UNKNOWN",
                "an interrupted install was superseded by later changes; it was dropped: " + ", ".join(stale[:5]),
                path=f"{layout.runtime_name}/{JOURNAL_NAME}",
            )
        )
        journal.unlink(missing_ok=True)
        _discard_intent(layout)
        return RecoveryReport("stale-journal", tuple(stale), tuple(problems))
    _roll_forward(layout, targets)
    _finish(layout)
    _run_open_steps(layout)
    _finish_git(layout)
    return RecoveryReport("rolled-forward", tuple(t.path for t in targets), tuple(problems))


def _finish_git(layout: Layout) -> None:
    """The git step of a transaction that was killed (or refused) after its install: commit
    what is installed, so git matches the revision again (a no-op when nothing is pending)."""
    if not _outermost(layout):
        return  # a nested open inside a running transaction: the pending commit is its own
    gitlog.finish_pending(layout.root)


def health_problems(memory_root: Path) -> list[Problem]:
    """Read-only findings for the read verbs: a half-finished install, leftovers of a kill, and
    git trouble. Nothing is repaired here (the next locked open does that)."""
    layout = Layout(Path(memory_root))
    out: list[Problem] = []
    rel_journal = f"{layout.runtime_name}/{JOURNAL_NAME}"
    if _journal(layout).exists():
        out.append(Problem("TRANSACTION_FAILURE_UNKNOWN", "an install was interrupted and is half-finished; what you see "
                           "may mix old and new files until the next write finishes it", path=rel_journal))
    for message in gitlog.git_problems(layout.root):
        out.append(Problem("GIT_COMMIT_FAILED", message, path=".git"))
    return out


def _openprogram_backup(layout: Layout) -> list[Problem]:
    """OpenProgram's own interrupted install leaves ``<rt>-block-backup``.

    Only the unambiguous case is repaired: ``topics/`` or ``sources/`` missing from the
    workspace while the backup holds it (killed between OpenProgram's two renames). Anything
    else is reported, not guessed at.
    """
    backup = layout.root / f"{layout.runtime_name}{OPENPROGRAM_BACKUP_SUFFIX}"
    if not backup.is_dir():
        return []
    out = []
    for name in ("sources", "topics"):
        if not (layout.root / name).exists() and (backup / name).is_dir():
            os.rename(backup / name, layout.root / name)
            fsync_dir(layout.root)
            out.append(
                Problem(
                    "TRANSACTION_FAILURE_UNKNOWN",
                    f"restored {name}/ from OpenProgram's interrupted install backup",
                    path=backup.name,
                )
            )
    out.append(
        Problem(
            "TRANSACTION_FAILURE_UNKNOWN",
            "OpenProgram left an install backup (an install of its own was interrupted)",
            path=backup.name,
        )
    )
    return out
