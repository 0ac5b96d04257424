"""``revision_walk`` from remembered folder listings = the walk of every folder, after random
changes -- including changes that put a folder's mtime back (its ctime still moves) and
in-place rewrites that move no folder's stamp at all (every file is still stat-ed)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_tui.core.store import walk

OPS = st.lists(st.tuples(st.sampled_from(["create", "remove", "rewrite", "rename", "symlink", "mkdir", "rmdir",
                                          "fifo", "runtime", "age", "put_back_mtime"]),
                         st.integers(0, 1_000)), min_size=1, max_size=12)


def _age(root: Path) -> None:
    """Every folder (and file) an hour old, and their ctimes (which ``utime`` sets to now)
    older than the clock tick: their listings become reusable."""
    past = time.time() - 3600
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.utime(p, (past, past))
        os.utime(dirpath, (past, past))
    time.sleep(walk.RACY_NS / 1e9 + 0.02)


def _same(root: Path) -> None:
    a = walk._walk_listed(os.fspath(root))
    b = walk._walk_full(os.fspath(root))
    assert list(a[0].items()) == list(b[0].items()) and a[1] == b[1]


def _op(root: Path, op: str, n: int) -> None:
    folders = sorted(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink() and ".scriptorium" not in p.parts)
    folders = [root, *folders]
    files = sorted(p for p in root.rglob("*.md") if p.is_file() and not p.is_symlink())
    where = folders[n % len(folders)]
    if op == "create":
        (where / f"n{n}.md").write_text(f"new {n}\n")
    elif op == "remove" and files:
        files[n % len(files)].unlink()
    elif op == "rewrite" and files:  # in place, same size: no folder's stamp moves
        f = files[n % len(files)]
        data = f.read_bytes()
        with open(f, "r+b") as fh:
            fh.write(bytes([data[0] ^ 1]) + data[1:] if data else b"x")
    elif op == "rename" and files:
        f = files[n % len(files)]
        f.rename(where / f"r{n}.md")
    elif op == "symlink":
        target = files[n % len(files)] if files else root
        link = where / f"l{n}.md"
        if not link.exists() and not link.is_symlink():
            link.symlink_to(target)
    elif op == "mkdir":
        (where / f"d{n}").mkdir(exist_ok=True)
        (where / f"d{n}" / "x.md").write_text("x\n")
    elif op == "rmdir" and where != root:
        for p in sorted(where.rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
        where.rmdir()
    elif op == "fifo":
        p = where / f"f{n}.md"
        if not p.exists():
            os.mkfifo(p)
    elif op == "runtime":
        rt = root / ".scriptorium" / "runtime.json"
        if rt.exists():
            rt.unlink()
        else:
            rt.write_text('{"v": %d}\n' % n)
    elif op == "age":
        _age(root)
    elif op == "put_back_mtime":
        # a change, then the folder's mtime set back to what the listing saw: only its ctime moved
        st = where.stat()
        (where / f"p{n}.md").write_text("p\n")
        os.utime(where, ns=(st.st_atime_ns, st.st_mtime_ns))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
@example(ops=[("age", 0), ("put_back_mtime", 1)])
@example(ops=[("age", 0), ("rewrite", 0)])
@example(ops=[("age", 0), ("remove", 0), ("age", 0), ("create", 0)])
def test_listed_walk_equals_full_walk(tmp_path_factory, ops):
    root = tmp_path_factory.mktemp("walk") / "memory"
    for rel in ("topics/a/x.md", "topics/a/y.md", "topics/b.md", "timeline/2026/01/02.md", "sources/s/_v2/z.md",
                "core.md", ".scriptorium/runtime.json", ".scriptorium/cache.bin", ".git/HEAD"):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel + "\n")
    _age(root)
    _same(root)
    _same(root)  # the second walk reuses every listing
    assert len(walk._LISTINGS[os.fspath(root)]) >= 8
    for op, n in ops:
        _op(root, op, n)
        _same(root)
        _same(root)
