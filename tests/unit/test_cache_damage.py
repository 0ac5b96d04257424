"""Every cache memory-tui keeps in a workspace's runtime dir, damaged on disk, gives the answer
of the cache-free path: a flipped byte, a file cut short, or an intact envelope of another
kind is a miss, never an error and never a different answer.

Each case primes every cache on one state (a reword, a record op, then a no-op edit, with
the stamps aged past the racy window so the no-op verdict and the kept revision are written),
copies that state with its caches deleted, damages every file of every cache of the
original the same way, and runs the same three transactions on both (each as a fresh process
would: nothing in memory; the no-op first, so the verdict is read before anything else
changes). The answers and every file of ``memory/`` must be equal. (Each cache's own tests
damage it alone as well: test_parsecache, test_noopcache, test_revmemo, test_recordindex.)
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from memory_tui.core.cache import registry
from memory_tui.core.format.paths import RUNTIME_DIR
from memory_tui.core.store import noopcache, parsecache, proofs, recordindex, revmemo, viewcache
from memory_tui.core.store.txcache import WorkspaceCache
from memory_tui.core.store.walk import revision_walk
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.tx import api as tx
from memory_tui.core.switches import current as current_switches

ADA = "topics/people/ada.md"
KYOTO = "topics/projects/kyoto-trip.md"
CACHES = {  # each cache: its files under the runtime dir
    "parse": (parsecache.DIR_NAME + "/**/*",),
    "views": (viewcache.SNAPSHOT_DIR + "/*",),
    "noop": (noopcache.NAME,),
    "revision": (revmemo.NAME,),
    "records": (recordindex.NAME,),
    "proofs": (proofs.CACHE_NAME, proofs.LOG_NAME),
}


def _settle() -> None:
    time.sleep(0.15)  # past the racy window: stamps prove something, so entries are written and used


def _fresh() -> None:
    registry.forget()


def _record_op(mem: Path) -> list[dict]:
    from memory_tui.core.format.sources import SourceIndex
    from memory_tui.core.format.topics import parse_tree

    index = SourceIndex.load(mem)
    unit = parse_tree(mem / "topics", resolve=index.resolve_target).topic(KYOTO[len("topics/"):]).units[0]
    return [{"op": "update_record", "memory_id": unit.memory_id, "content": f"Reworded at {time.time_ns()}.",
             "time": unit.when, "source_refs": list(unit.source_refs)}]


def _work(state: Path, ops: list[dict]) -> list[tuple]:
    mem = state / "memory"
    out = []
    text = (mem / ADA).read_text(encoding="utf-8")
    _fresh()
    r = tx.staged_edit(state, ADA, text, git_commit="off")
    out.append((r.ok, r.message, r.revision, tuple(r.changed_files)))
    _fresh()
    r = tx.staged_edit(state, ADA, text.replace("short answers", "brief answers", 1), git_commit="off")
    out.append((r.ok, r.message, r.revision, tuple(r.changed_files)))
    _fresh()
    r = tx.update(state, workspace_revision(mem), memory_changes=ops, git_commit="off")
    out.append((r.ok, r.message, r.revision, tuple(r.changed_files)))
    return out


def _files(mem: Path) -> dict[str, bytes]:
    return {p.relative_to(mem).as_posix(): p.read_bytes() for p in sorted(mem.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(mem).parts
            and not p.relative_to(mem).as_posix().startswith(f"{RUNTIME_DIR}/memory-tui")}


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "flip":
        mid = len(data) * 2 // 3
        path.write_bytes(data[:mid] + bytes([data[mid] ^ 0x40]) + data[mid + 1:])
    elif how == "truncate":
        path.write_bytes(data[:-3])
    else:  # every record an intact envelope, of another kind
        path.write_bytes(re.sub(rb"(memory-tui-cache\0)([a-z-]+)\0", rb"\1x\2\0", data))


@pytest.mark.parametrize("how", ["flip", "truncate", "wrong_kind"])
def test_damaged_caches_answer_as_the_cache_free_path(fixture_state, tmp_path, how):
    state, mem = fixture_state, fixture_state / "memory"
    runtime = mem / RUNTIME_DIR
    _settle()
    _fresh()
    text = (mem / ADA).read_text(encoding="utf-8")
    assert tx.staged_edit(state, ADA, text.replace("short answers", "terse answers", 1), git_commit="off").ok
    assert tx.update(state, workspace_revision(mem), memory_changes=_record_op(mem), git_commit="off").ok
    _settle()
    _fresh()
    assert tx.staged_edit(state, ADA, (mem / ADA).read_text(encoding="utf-8"), git_commit="off").ok
    # an install keeps the revision only once its files are past the racy window: as the next
    # install over these aged files would
    WorkspaceCache(mem).revision(revision_walk(mem, switches=current_switches())[0], installed=True, switches=current_switches())
    _settle()
    files = []
    for cache, patterns in CACHES.items():
        found = sorted(p for pattern in patterns for p in runtime.glob(pattern) if p.is_file())
        assert found, f"the priming wrote no {cache} cache"
        files += found
    bare = tmp_path / "bare"
    shutil.copytree(state, bare, symlinks=True)
    for p in (bare / "memory" / RUNTIME_DIR).glob("memory-tui*"):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    ops = _record_op(mem)
    for p in files:
        _damage(p, how)
    _settle()
    got = _work(state, ops)
    want = _work(bare, ops)
    assert got == want
    assert _files(mem) == _files(bare / "memory")
