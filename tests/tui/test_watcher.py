"""The watcher's filter: which changed paths reach the app, and what filtering them costs.

A job's batch writes thousands of files (git objects, archive frames, marks); each reaches
the filter on the UI thread, so the filter must not resolve each path on disk (a system
call per component)."""

from __future__ import annotations

import asyncio
import os
import posixpath
from pathlib import Path

import pytest

from memory_tui.tui import watcher


def _state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    for d in ("memory/.git/objects/ab", "memory/topics", "memory/.scriptorium", "sessions/s1/history"):
        (state / d).mkdir(parents=True)
    return state


def _raw_changes(root: str, n: int) -> set[tuple[int, str]]:
    changes = set()
    for i in range(n):
        changes.add((1, f"{root}/memory/.git/objects/ab/{i:038x}"))
        changes.add((2, f"{root}/sessions/s1/history/{i:04d}.json"))
    changes.add((2, f"{root}/memory/topics/a.md"))
    changes.add((2, f"{root}/memory/topics/a.md.tmp"))
    changes.add((2, f"{root}/memory/.scriptorium/runtime.json"))
    changes.add((2, f"{root}/memory/.scriptorium/archive.jsonl"))
    changes.add((2, f"{root}/config.json"))
    changes.add((2, f"{root}/owner.json"))
    return changes


def _watch_once(monkeypatch: pytest.MonkeyPatch, state: Path, raw: set[tuple[int, str]]) -> list[frozenset[str]]:
    import watchfiles

    async def fake_awatch(path, *, watch_filter, **_kw):  # what watchfiles does with the filter
        yield {c for c in raw if watch_filter(c[0], c[1])}

    monkeypatch.setattr(watchfiles, "awatch", fake_awatch)

    async def collect() -> list[frozenset[str]]:
        return [paths async for paths in watcher.watch_changes(state)]

    return asyncio.run(collect())


def test_a_batch_of_changes_is_filtered_without_resolving_each_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = _state(tmp_path)
    raw = _raw_changes(str(state), 500)
    calls = []
    real = posixpath.realpath

    def counting(path, *a, **kw):
        calls.append(path)
        return real(path, *a, **kw)

    monkeypatch.setattr(posixpath, "realpath", counting)
    monkeypatch.setattr(os.path, "realpath", counting)
    batches = _watch_once(monkeypatch, state, raw)
    expected = {f"sessions/s1/history/{i:04d}.json" for i in range(500)} | {
        "memory/topics/a.md", "memory/.scriptorium/runtime.json", "config.json"}
    assert batches == [frozenset(expected)]
    # the state folder's own spelling, once per watcher: never once (or twice) per changed file
    assert len(calls) <= 1, f"{len(calls)} realpath calls for {len(raw)} changes"


def test_paths_under_either_spelling_of_a_linked_state_folder(tmp_path: Path) -> None:
    state = _state(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(state, target_is_directory=True)
    check = watcher.relevance(link)
    assert check(f"{link}/memory/topics/a.md") == "memory/topics/a.md"
    assert check(f"{state}/memory/topics/a.md") == "memory/topics/a.md"
    # a third spelling (another link to the same folder) is resolved
    other = tmp_path / "other"
    other.symlink_to(state, target_is_directory=True)
    assert check(f"{other}/sessions/s1/history/0001.json") == "sessions/s1/history/0001.json"
    assert check(f"{state}/memory/.git/HEAD") is None
    assert check(f"{tmp_path}/elsewhere/memory/topics/a.md") is None
    assert check(f"{state}x/memory/topics/a.md") is None  # a sibling whose name starts alike
    assert check(str(state)) is None
    assert watcher.relevant(state, f"{state}/memory/topics/a.md") == "memory/topics/a.md"
