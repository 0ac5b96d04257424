"""The benchmark generator's output is strictly valid (a tiny scale; no timing)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from memory_tui.core.store import revmemo

from memory_tui.core.store import viewcache
from memory_tui.core.store.workspace import check_views
from memory_tui.core.store.workspace import open_state
from memory_tui.sessions.store import load_sessions

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "make_state.py"


def _make_state():
    spec = importlib.util.spec_from_file_location("bench_make_state", _PATH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_tiny_state_is_strictly_valid(tmp_path: Path) -> None:
    mod = _make_state()
    out = tmp_path / "state"
    counts = mod.build(out, 0.01)
    assert counts["sessions"] == 2 and counts["topic_files"] == 3

    view = open_state(out)
    assert view.problems == ()
    assert view.workspace_id == mod.WORKSPACE_ID
    assert len(view.tree.units) == 2 * mod.CITED_PER_SESSION + 1
    assert check_views(out / "memory", state_dir=out) == []
    # cross-topic links exist, so the relations view is not trivially empty
    relations = json.loads(view.views.relations)
    assert any(targets for rel in relations.values() for targets in rel.values())

    snap = load_sessions(out)
    assert snap.all_problems() == ()
    assert len(snap.sessions) == 2
    for session in snap.sessions.values():
        assert 280 <= len(session.nodes) <= 320


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    mod = _make_state()
    a, b = tmp_path / "a", tmp_path / "b"
    mod.build(a, 0.01)
    mod.build(b, 0.01)

    def files(root: Path) -> dict[str, object]:
        out: dict[str, object] = {}
        for p in sorted(root.rglob("*")):
            rel = p.relative_to(root)
            if not p.is_file() or ".git" in rel.parts or p.name == revmemo.NAME:
                continue  # the kept revision names this copy's inodes and times (a cache)
            data = p.read_bytes()
            # The derived-views snapshot is marshal data, and marshal writes whether each
            # string happened to be interned in the writing process, which depends on what
            # that process did before: compare what the entries decode to, never nothing.
            if "memory-tui-views" in rel.parts:
                value = viewcache._unseal(data)
                assert value is not None, f"{rel}: not an intact snapshot entry"
                out[rel.as_posix()] = ("sealed", value)
            else:
                out[rel.as_posix()] = data
        return out

    assert files(a) == files(b)
