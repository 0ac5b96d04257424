"""The memory workspace's git history, kept the way OpenProgram keeps it (memory spec §2.3).

* ``ensure_history`` initialises a missing repository exactly as OpenProgram does: local
  identity ``OpenProgram Memory <memory@openprogram.local>`` (only if unset), the exclude
  lines ``/.scriptorium*`` and ``/.nativemem*``, a ``memory: initialize history`` commit
  (``--allow-empty`` when there is no HEAD and nothing to add) and the marker
  ``.git/openprogram-memory-ready``.
* ``commit`` stages the tracked subset (never the runtime dir) and commits it; it never
  raises for git's own refusals: a ``GitOutcome`` says whether a commit was made, and if
  not, git's reason (pitfall 6) or that there was nothing to commit (pitfall 7).

Environment (dates, identity) is injectable through ``env`` so tests are deterministic.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..format.errors import MemoryError
from ..format.paths import GIT_TRACKED, Layout

IDENTITY_NAME = "OpenProgram Memory"
IDENTITY_EMAIL = "memory@openprogram.local"
INIT_MESSAGE = "memory: initialize history"
READY_MARKER = "openprogram-memory-ready"
EXCLUDE_LINES = ("/.scriptorium*", "/.nativemem*")

MSG_INCREMENTAL = "memory: incremental transaction"
MSG_REORGANIZE = "memory: reorganize topics"
MSG_EDIT_DEFAULT = "memory: edit topics"

NOTHING_TO_COMMIT = "nothing to commit"
MSG_RECOVER = "memory: finish interrupted transaction"
MSG_REBUILD = "memory: rebuild derived views"

# ``<M>/<rt>/git-pending``: written before a change that will be committed, removed once git
# holds it. Present at the next open means a kill (or a git refusal) came in between.
PENDING_NAME = "git-pending"
INDEX_LOCK = "index.lock"


@dataclass(frozen=True)
class GitOutcome:
    committed: bool
    commit: str | None = None  # HEAD after the commit
    error: str | None = None  # git's own reason, or "nothing to commit"
    nothing_to_commit: bool = False
    not_a_repo: bool = False


def git_executable() -> str | None:
    return shutil.which("git")


def edit_message(rel_path: str | None, *, deleted: bool = False) -> str:
    """OpenProgram's staged hand-edit messages (``rel_path`` is workspace-relative)."""
    if not rel_path:
        return MSG_EDIT_DEFAULT
    return f"memory: {'delete' if deleted else 'edit'} {rel_path}"


def _git(root: Path, args: list[str], env: Mapping[str, str] | None) -> tuple[int, str, str]:
    import git  # gitpython; imported lazily so reading never pays for it

    exe = git.Git(str(root))
    full_env = {"GIT_TERMINAL_PROMPT": "0"}
    if env:
        full_env.update(env)
    try:
        status, out, err = exe.execute(
            ["git", *args],
            with_extended_output=True,
            with_exceptions=False,
            env=full_env,
            strip_newline_in_stdout=True,
        )
    except (OSError, git.GitCommandNotFound) as exc:  # pragma: no cover - no git binary
        return 127, "", str(exc)
    return int(status or 0), out or "", err or ""


def _reason(out: str, err: str, fallback: str) -> str:
    text = (err or out or "").strip()
    return " ".join(text.split()) or fallback


def _is_own_repo(root: Path, env: Mapping[str, str] | None) -> tuple[bool, str | None]:
    """True when ``root`` is the top of its own work tree (never a parent's repository)."""
    if not (root / ".git").exists():
        return False, None
    status, out, err = _git(root, ["rev-parse", "--show-toplevel"], env)
    if status != 0:
        return False, _reason(out, err, "git rev-parse failed")
    try:
        same = Path(out.strip()).resolve() == root.resolve()
    except OSError:
        same = False
    return same, None


def _tracked_existing(root: Path) -> list[str]:
    return [name for name in GIT_TRACKED if (root / name).exists()]


def ensure_history(memory_root: Path, *, env: Mapping[str, str] | None = None) -> str | None:
    """Make sure the workspace has OpenProgram's git history (call under the write lock).

    Raises ``GIT_UNAVAILABLE`` when there is no git executable. Returns git's reason when
    git refused (e.g. dubious ownership), else None.
    """
    root = Path(memory_root)
    if git_executable() is None:
        raise MemoryError(
            "GIT_UNAVAILABLE",
            "git executable not found",
            details={"memory_committed": False, "git_committed": False},
        )
    ready = root / ".git" / READY_MARKER
    if ready.is_file():
        return None
    if not (root / ".git").exists():
        status, out, err = _git(root, ["init", "-q"], env)
        if status != 0:
            return _reason(out, err, "git init failed")
    own, reason = _is_own_repo(root, env)
    if not own:
        return reason or "not a git repository"
    for key, value in (("user.name", IDENTITY_NAME), ("user.email", IDENTITY_EMAIL)):
        status, out, _ = _git(root, ["config", "--local", "--get", key], env)
        if status != 0 or not out.strip():
            status, out, err = _git(root, ["config", "--local", key, value], env)
            if status != 0:
                return _reason(out, err, f"git config {key} failed")
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    existing = exclude.read_text(encoding="utf-8", errors="replace") if exclude.exists() else ""
    present = set(existing.splitlines())
    missing = [line for line in EXCLUDE_LINES if line not in present]
    if missing:
        prefix = "" if not existing or existing.endswith("\n") else "\n"
        with open(exclude, "a", encoding="utf-8") as fh:
            fh.write(prefix + "".join(line + "\n" for line in missing))
    has_head = _git(root, ["rev-parse", "--verify", "-q", "HEAD"], env)[0] == 0
    paths = _tracked_existing(root)
    if paths:
        status, out, err = _git(root, ["add", "-A", "--", *paths], env)
        if status != 0:
            return _reason(out, err, "git add failed")
    staged = _git(root, ["diff", "--cached", "--quiet"], env)[0] != 0
    if staged:
        status, out, err = _git(root, ["commit", "-q", "-m", INIT_MESSAGE], env)
        if status != 0:
            return _reason(out, err, "git commit failed")
    elif not has_head:
        status, out, err = _git(root, ["commit", "-q", "--allow-empty", "-m", INIT_MESSAGE], env)
        if status != 0:
            return _reason(out, err, "git commit failed")
    ready.write_text("ready\n", encoding="utf-8")
    return None


def commit(memory_root: Path, message: str, *, env: Mapping[str, str] | None = None) -> GitOutcome:
    """``git add -A`` the tracked subset and commit it with ``message``; never raises for git."""
    root = Path(memory_root)
    if git_executable() is None:
        return GitOutcome(False, error="git executable not found", not_a_repo=True)
    own, reason = _is_own_repo(root, env)
    if not own:
        return GitOutcome(False, error=reason or "not a git repository", not_a_repo=reason is None)
    paths = _tracked_existing(root)
    if paths:
        status, out, err = _git(root, ["add", "-A", "--", *paths], env)
        if status != 0:
            return GitOutcome(False, error=_reason(out, err, "git add failed"))
    status, out, err = _git(root, ["diff", "--cached", "--quiet"], env)
    if status == 0:
        clear_pending(root)
        return GitOutcome(False, error=NOTHING_TO_COMMIT, nothing_to_commit=True)
    if status != 1:
        return GitOutcome(False, error=_reason(out, err, "git diff failed"))
    status, out, err = _git(root, ["commit", "-q", "-m", message], env)
    if status != 0:
        return GitOutcome(False, error=_reason(out, err, "git commit failed"))
    clear_pending(root)
    status, out, err = _git(root, ["rev-parse", "HEAD"], env)
    if status != 0:
        return GitOutcome(True, error=_reason(out, err, "git rev-parse failed"))
    return GitOutcome(True, commit=out.strip())


def _pending_file(root: Path) -> Path:
    return Layout(root).runtime_dir / PENDING_NAME


def mark_pending(memory_root: Path) -> None:
    """Say that tracked files are about to change and a commit will follow (call under the
    write lock, before the change). Only where the workspace has its own repository."""
    root = Path(memory_root)
    if not (root / ".git").exists():
        return
    path = _pending_file(root)
    if path.exists() or not path.parent.is_dir() or path.parent.is_symlink():
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def clear_pending(memory_root: Path) -> None:
    path = _pending_file(Path(memory_root))
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def git_problems(memory_root: Path) -> list[str]:
    """Read-only: what a kill or a git refusal left in the repository (for ``status``)."""
    root = Path(memory_root)
    out = []
    for lock in stale_locks(root):
        rel = lock.relative_to(root).as_posix()
        out.append(f"{rel} is present: an interrupted git command; the next write removes it and commits")
    if _pending_file(root).exists():
        out.append("memory changes are installed but not yet committed to git; the next write commits them")
    return out


def finish_pending(memory_root: Path, *, env: Mapping[str, str] | None = None) -> GitOutcome | None:
    """Finish the git step of an interrupted transaction (call under the write lock).

    A ``.git/index.lock`` left by a killed git is stale here: every git command memory-tui (and
    OpenProgram) runs in this repository runs under the workspace write lock, which we hold.
    Returns None when there was nothing to finish."""
    root = Path(memory_root)
    locks = stale_locks(root)
    pending = _pending_file(root).exists()
    if not locks and not pending:
        return None
    for lock in locks:
        lock.unlink(missing_ok=True)
    return commit(root, MSG_RECOVER, env=env)


def stale_locks(memory_root: Path) -> list[Path]:
    """The lock files a git killed mid-commit can leave: the index's, and the ref locks
    (``HEAD.lock``, ``refs/heads/<branch>.lock``, ``packed-refs.lock``) that ``git commit``
    holds while it moves the branch. Any one of them left makes every later commit fail
    ("cannot lock ref"), so the installed change would never reach git."""
    git_dir = Path(memory_root) / ".git"
    if not git_dir.is_dir() or git_dir.is_symlink():
        return []
    found = [git_dir / name for name in (INDEX_LOCK, "HEAD.lock", "packed-refs.lock")]
    heads = git_dir / "refs" / "heads"
    if heads.is_dir() and not heads.is_symlink():
        found += sorted(heads.rglob("*.lock"))
    return [p for p in found if p.is_file() and not p.is_symlink()]


def head(memory_root: Path, *, env: Mapping[str, str] | None = None) -> str | None:
    status, out, _ = _git(Path(memory_root), ["rev-parse", "--verify", "-q", "HEAD"], env)
    return out.strip() if status == 0 else None


def fixed_env(when: str = "2026-01-01T00:00:00+00:00") -> dict[str, str]:
    """A deterministic identity and date for tests and reproducible runs."""
    return {
        "GIT_AUTHOR_NAME": IDENTITY_NAME,
        "GIT_AUTHOR_EMAIL": IDENTITY_EMAIL,
        "GIT_COMMITTER_NAME": IDENTITY_NAME,
        "GIT_COMMITTER_EMAIL": IDENTITY_EMAIL,
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
        "GIT_CONFIG_NOSYSTEM": "1",
    }

