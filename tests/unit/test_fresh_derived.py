"""A fresh process with every persistent derived cache warm (parse cache: topic parses, view
parts, block ids, link rewrites, scan summaries; the canonical proofs; the no-op verdict)
answers and writes byte for byte what a fresh process with none of them writes in the
full-rebuild mode, including right after another tool changed one topic file behind
memory-tui's back (the case the caches' keys must catch)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from memory_tui.core.store import noopcache

from memory_tui.core.store import parsecache

from memory_tui.core.store import txcache

from memory_tui.core.tx import api as tx
from memory_tui.core.tx.result import TxResult
from memory_tui.core.format.topics import parse_tree
from memory_tui.core.format.sources import SourceIndex
from memory_tui.core.store.workspace import workspace_revision
from switching import set_derive

ADA = "topics/people/ada.md"
KYOTO = "topics/projects/kyoto-trip.md"


def _files(mem: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(mem.rglob("*")):
        rel = p.relative_to(mem).as_posix()
        if rel.startswith(".git/") or rel.startswith(".scriptorium/memory-tui") or not p.is_file():
            continue
        out[rel] = p.read_bytes()
    return out


def _summary(r: TxResult) -> tuple:
    return (r.ok, r.code, r.message, tuple(r.changed_files), dict(r.block_ids), dict(r.evidence_ids), r.core)


def _steps(state: Path, full: bool, monkeypatch) -> list[tuple]:
    """One owner session as separate processes: each step starts with nothing in memory; with
    ``full`` every persistent cache is dropped first and every view derived from every unit."""
    mem = state / "memory"
    if full:
        set_derive(monkeypatch, "full")
    else:
        set_derive(monkeypatch, None)

    def fresh() -> None:
        txcache.clear_caches()
        if full:
            parsecache.drop(mem)
            for p in (mem / ".scriptorium").glob("memory-tui-*"):
                p.unlink()
        time.sleep(0.15)  # past the clock tick: the stamps just written prove something now

    out = []
    ada = (mem / ADA).read_text(encoding="utf-8")
    fresh()
    out.append(_summary(tx.staged_edit(state, ADA, ada.replace("short answers", "brief answers", 1), git_commit="off")))
    fresh()
    out.append(_summary(tx.staged_edit(state, ADA, (mem / ADA).read_text(encoding="utf-8"), git_commit="off")))
    fresh()
    out.append(_summary(tx.staged_edit(state, ADA, (mem / ADA).read_text(encoding="utf-8"), git_commit="off")))
    # another tool rewords a record of kyoto-trip.md (its timeline row and more change)
    kyoto = (mem / KYOTO).read_text(encoding="utf-8")
    assert "Kyoto" in kyoto
    (mem / KYOTO).write_text(kyoto.replace("Kyoto", "Kioto", 1), encoding="utf-8")
    fresh()
    out.append(_summary(tx.staged_edit(state, ADA, (mem / ADA).read_text(encoding="utf-8"), git_commit="off")))
    fresh()
    index = SourceIndex.load(mem)
    unit = parse_tree(mem / "topics", resolve=index.resolve_target).topic(KYOTO[len("topics/"):]).units[0]
    op = {"op": "update_record", "memory_id": unit.memory_id, "content": "Reworded in a fresh process.",
          "time": unit.when, "source_refs": list(unit.source_refs)}
    out.append(_summary(tx.update(state, workspace_revision(mem), memory_changes=[op], git_commit="off")))
    fresh()
    out.append(_summary(tx.staged_edit(state, KYOTO, (mem / KYOTO).read_text(encoding="utf-8"), git_commit="off")))
    return out


def test_warm_fresh_processes_equal_cold_full_rebuilds(fixture_state, tmp_path, monkeypatch):
    cold = tmp_path / "cold"
    shutil.copytree(fixture_state, cold, symlinks=True)
    hits = []  # per edit: answered from the verdict (a candidate refused, or not confirmed, is a miss)
    real_candidate, real_confirm = noopcache.candidate, noopcache.confirm

    def candidate(*a, **kw):
        got = real_candidate(*a, **kw)
        if got is None:
            hits.append(False)
        return got

    def confirm(*a, **kw):
        got = real_confirm(*a, **kw)
        hits.append(got is not None)
        return got

    monkeypatch.setattr(noopcache, "candidate", candidate)
    monkeypatch.setattr(noopcache, "confirm", confirm)
    warm_results = _steps(fixture_state, False, monkeypatch)
    # only the second no-op was answered from the remembered verdict: the reword is no no-op,
    # the first no-op made the verdict, the external change keyed the third out, the last
    # follows an install
    assert hits == [False, False, True, False, False]
    cold_results = _steps(cold, True, monkeypatch)
    assert warm_results == cold_results
    # the steps did what they say: an install, two no-ops, the external change re-derived, ...
    assert [r[2] for r in warm_results] == ["installed", "no change", "no change", "installed", "installed",
                                            "no change"]
    assert _files(fixture_state / "memory") == _files(cold / "memory")
    # and the warm caches were there to be used
    assert (fixture_state / "memory" / ".scriptorium" / parsecache.DIR_NAME).is_dir()


def test_kept_line_ids_and_block_ids_of_the_wrong_types_are_recomputed(tmp_path):
    """A kept per-text value whose items are not all ``str`` (damage, another code's entry
    under the same key) is a miss: the memos compute it again."""
    from memory_tui.core.format.blocklinks import file_block_ids
    from memory_tui.core.format.normalize import line_end_ids
    from memory_tui.core.store.committed import sha

    root = tmp_path / "memory"
    (root / "topics").mkdir(parents=True)
    text = "# T\n\nOne. ^aaaa1111\n\nTwo. ^bbbb2222\n"
    store = parsecache.store_for(root)
    digest = sha(text)
    store.put_derived("lineids", "t.md", (digest,), frozenset({"aaaa1111", 7}))
    store.put_derived("ids", "t.md", (digest,), ("aaaa1111", 7))
    cache = txcache.WorkspaceCache(root)
    assert cache.memo.line_end_ids("t.md", text) == line_end_ids(text)
    assert cache.file_ids("t.md", text) == file_block_ids(text)
    store.put_derived("lineids", "u.md", (digest,), frozenset({"zzzz9999"}))  # the right types: used
    assert cache.memo.line_end_ids("u.md", text) == frozenset({"zzzz9999"})
