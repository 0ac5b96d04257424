"""The transaction cache's revision, which resumes the SHA-256 stream after the longest
unchanged prefix of files, equals ``workspace_revision`` (memory spec §2.6) after every step
of random file changes, including changes inside the clock tick."""

from __future__ import annotations

import os
import time

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_tui.core.tx.stage import revision_stamps
from memory_tui.core.store.parsecache import RACY_NS
from memory_tui.core.store.txcache import WorkspaceCache
from memory_tui.core.store.walk import revision_walk
from memory_tui.core.store.workspace import iter_revision_files, workspace_revision
from memory_tui.core.switches import current as current_switches

NAMES = ["core.md", "recent_events.jsonl", "sources/a/_v2/x.md", "timeline/2026/01.md", "topics/a.md",
         "topics/a/b.md", "topics/a-b.md", "topics.md", ".scriptorium/runtime.json", ".scriptorium/write.lock"]

STEPS = st.lists(st.tuples(st.sampled_from(["write", "replace", "append", "delete", "age", "symlink", "same_size"]),
                           st.sampled_from(NAMES), st.binary(max_size=40)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
@example(steps=[("write", "core.md", b"a"), ("write", "topics/a.md", b"b"), ("age", "core.md", b""),
                ("write", "topics/a.md", b"c"), ("age", "core.md", b""), ("replace", "core.md", b"d")])
def test_resumed_revision_equals_the_full_stream(tmp_path_factory, steps):
    _run(tmp_path_factory, steps, fresh=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
@example(steps=[("write", ".scriptorium/runtime.json", b"{}"), ("age", "core.md", b""),
                ("same_size", ".scriptorium/runtime.json", b""), ("write", "core.md", b"a")])
def test_the_revision_kept_between_processes_equals_the_full_stream(tmp_path_factory, steps):
    """Every step's revision asked of a new cache (a fresh process, no chain: the revision
    kept in the runtime dir by the previous one, when it proves the files)."""
    _run(tmp_path_factory, steps, fresh=True)


def _run(tmp_path_factory, steps, fresh: bool) -> None:
    root = tmp_path_factory.mktemp("rev") / "memory"
    root.mkdir()
    cache = WorkspaceCache(root)
    assert cache.revision(revision_stamps(root, switches=current_switches()), installed=fresh, switches=current_switches()) == workspace_revision(root)
    for step, (op, name, data) in enumerate(steps):
        if fresh:
            cache = WorkspaceCache(root)
        data = data + f" {step}".encode()  # every write changes the bytes
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if op == "write":  # in place: same inode, maybe the same size, maybe within one tick
            with open(path, "wb") as fh:
                fh.write(data)
        elif op == "replace":
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        elif op == "append":
            with open(path, "ab") as fh:
                fh.write(data)
        elif op == "delete" and path.exists():
            path.unlink()
        elif op == "age":  # let every stamp grow older than the clock tick: prefixes become reusable
            time.sleep(RACY_NS / 1e9 + 0.01)
        elif op == "symlink" and not os.path.lexists(path):  # never followed, never part of the revision
            outside = root.parent / "outside.txt"
            outside.write_bytes(data)
            os.symlink(outside, path)
        elif op == "same_size" and path.is_file() and not path.is_symlink():  # new bytes, same length
            old = path.read_bytes()
            with open(path, "r+b") as fh:
                fh.write(bytes(b ^ 1 for b in old[:1]))
        stamps, links = revision_walk(root, switches=current_switches())
        listed = [("/".join(parts), (s.st_mtime_ns, s.st_size, s.st_ino, s.st_ctime_ns)) for parts, _p, s in iter_revision_files(root)]
        assert list(stamps.items()) == listed  # the same files, stamps and order as the revision's own walk
        assert all(os.path.islink(root / rel) for rel in links)
        assert cache.revision(revision_stamps(root, switches=current_switches()), installed=fresh, switches=current_switches()) == workspace_revision(root), (op, name)
