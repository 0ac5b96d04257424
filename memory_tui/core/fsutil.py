"""Durable file replacement, shared by every writer of OpenProgram files.

One protocol everywhere (OpenProgram's own): write a unique temp file, fsync it, set the
mode, rename it over the target, fsync the directory. Readers of OpenProgram's folders
ignore ``*.tmp``, so a crash leaves at most a stray temp file, never a torn target.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat as stat_mod
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def refuse_link(path: Path) -> None:
    """Raise ``ELOOP`` (the errno ``O_NOFOLLOW`` gives) when ``path`` is a symbolic link: a
    replace would destroy the link, a write would follow it. The layers above name it
    ``PATH_OUTSIDE_WORKSPACE``."""
    if os.path.islink(path):
        raise OSError(errno.ELOOP, "is a symbolic link; memory-tui never writes through or replaces one", str(path))


@contextmanager
def named_errors(path: Path | str) -> Iterator[None]:
    """An ``OSError`` raised inside names ``path`` when it named no file (a full disk surfaces
    from ``write``/``close``, which know no name): every report can then say which file."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = os.fspath(path)
        raise


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable; quietly skipped where directories can't be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def _temp_removed_on_failure(tmp: Path) -> Iterator[None]:
    """If the block fails (a crash of ours, a full disk, ^C), the temp file goes and the error
    is raised: a failed replace leaves the target as it was and no stray temp file."""
    try:
        yield
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write(
    path: Path,
    data: bytes | str,
    *,
    mode: int = 0o600,
    tmp_dir: Path | None = None,
    tmp_prefix: str | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically.

    The temp file is ``<name>.<16 hex>-p<pid>.tmp`` beside the target unless ``tmp_dir`` (which
    must be on the same filesystem) and ``tmp_prefix`` say otherwise. The pid tells the next
    locked open that a temp file whose writer is gone is a leftover of a kill (and the ``-p``
    tells ours from OpenProgram's ``<name>.<32 hex>.tmp``, which it writes without our lock).
    """
    path = Path(path)
    refuse_link(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    where = Path(tmp_dir) if tmp_dir is not None else path.parent
    # random hex without importing uuid (and platform) at start-up
    name = f"{tmp_prefix or path.name + '.'}{os.urandom(8).hex()}-p{os.getpid()}.tmp"
    tmp = where / name
    with named_errors(path):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        _write_replace(fd, tmp, path, data, mode)
    fsync_dir(path.parent)


def _write_replace(fd: int, tmp: Path, path: Path, data: bytes, mode: int) -> None:
    with _temp_removed_on_failure(tmp):
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)


def replace_cache_file(path: Path, data: bytes | tuple[bytes, ...]) -> None:
    """Replace one of memory-tui's own cache files with ``data`` (bytes, or parts written in order).

    A temp file beside it (named by process and thread, so concurrent writers never share one)
    renamed over it: a reader sees the old bytes or the new, never a torn file. No fsync: a
    cache entry lost to a crash only costs time, and every reader checks what it reads. On
    failure the temp file is removed and the ``OSError`` raised; callers that treat the cache
    as best effort catch it.
    """
    path = Path(path)
    refuse_link(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with _temp_removed_on_failure(tmp):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            for part in (data,) if isinstance(data, bytes) else data:
                view = memoryview(part)
                while view:  # a write may take less than it was given
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)


_IGNORED_ERRNOS = frozenset((errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP))  # pathlib's _ignore_error


def md_file_stats(top: Path, prefix: str = "") -> dict[str, os.stat_result]:
    """``prefix`` + ``top``-relative path -> ``stat`` (symlinks followed) of each regular file
    ``top.rglob("*.md")`` lists, by the same walk (every real directory, a symlinked one
    neither entered; every entry whose name ends in ``.md``) with ``os.scandir`` and strings
    instead of a dozen pathlib objects per file; errors as ``rglob``'s (a folder it may not
    list is skipped, anything else raised). In walk order, not ``sorted`` order. The topic
    files, and the archives' stamps that the citations index is keyed by, are listed by it."""
    out: dict[str, os.stat_result] = {}
    stack = [(os.fspath(top), prefix)]
    while stack:
        directory, rel = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except PermissionError:
            continue
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir()
            except OSError as e:
                if e.errno not in _IGNORED_ERRNOS:
                    raise
                is_dir = False
            if is_dir and not entry.is_symlink():
                stack.append((entry.path, rel + name + "/"))
            if name.endswith(".md"):
                try:
                    st = os.stat(entry.path)
                except OSError:
                    continue
                if stat_mod.S_ISREG(st.st_mode):
                    out[rel + name] = st
    return out


def cache_name_of(path: Path | str) -> str:
    """The name a user-cache entry about ``path`` (a state dir, a memory root) goes by: 32 hex
    digits of the SHA-256 of its absolute form, a name that is not valid UTF-8 by its escapes."""
    return hashlib.sha256(str(Path(path).absolute()).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def user_cache_dir(sub: str = "") -> Path:
    """memory-tui's cache folder outside any state dir: ``sub`` under the one cache root,
    ``$MEMORY_TUI_CACHE_DIR``, else ``$XDG_CACHE_HOME/memory-tui``, else ``~/.cache/memory-tui``."""
    base = os.environ.get("MEMORY_TUI_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "memory-tui")
    return Path(base) / sub if sub else Path(base)
