"""The hand-edit corpus: every case in ``cases/*.json`` runs through ``staged_edit`` on a
copy of OpenProgram's fixture. Rejections must carry the exact code and location and leave
every committed byte, the revision and the git history unchanged; accepted edits must keep
every committed block id (except a deleted topic's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memory_tui.core.store import gitlog
from memory_tui.core.tx import api as tx
from memory_tui.core.format.topics import parse_tree_strict
from memory_tui.core.store.workspace import workspace_revision

CASES = sorted((Path(__file__).parent / "cases").glob("*.json"))
ENV = gitlog.fixed_env()


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = Path(dirpath) / name
            if name == "write.lock":
                continue
            rel = full.relative_to(root).as_posix()
            if rel.startswith(".scriptorium/memory-tui"):
                # memory-tui's own caches (outside the revision): a no-op writes its verdict
                # there once the fixture copy is older than the clock tick, which on a busy
                # machine it already is, so whether the file appears is a matter of timing
                continue
            out[rel] = full.read_bytes()
    return out


def _head(root: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()


def test_corpus_is_large_enough():
    assert len(CASES) >= 100
    kinds = {json.loads(p.read_text())["expect"]["ok"] for p in CASES}
    assert kinds == {True, False}


@pytest.fixture(scope="module")
def shared_state(_fixture_master, tmp_path_factory):
    """One copy for every rejected case (they must not change it)."""
    dest = tmp_path_factory.mktemp("corpus") / "state"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    return dest


@pytest.mark.parametrize("case_file", CASES, ids=[p.stem for p in CASES])
def test_edit_case(case_file, shared_state, request):
    case = json.loads(case_file.read_text(encoding="utf-8"))
    expect = case["expect"]
    # a private copy only for a case that may change the state (the copy is most of a
    # rejected case's time, and a rejected case must leave the shared one as it was)
    state = request.getfixturevalue("fixture_state") if expect["ok"] or case.get("extra_files") else shared_state
    root = state / "memory"
    for rel, text in (case.get("extra_files") or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    before = _snapshot(root)
    before_rev = workspace_revision(root)
    before_head = _head(root)
    committed_ids = parse_tree_strict(root / "topics").ids
    text = None if case.get("delete") else case["text"]
    result = tx.staged_edit(state, case["path"], text, git_env=ENV)

    if not expect["ok"]:
        assert not result.ok, f"accepted an invalid edit: {case['name']}"
        assert result.code == expect["code"], (result.code, result.message)
        for key in ("path", "line", "column"):
            if key in expect:
                assert getattr(result, key) == expect[key], (key, getattr(result, key), result.message)
        if "message_contains" in expect:
            assert expect["message_contains"] in result.message, result.message
        assert _snapshot(root) == before
        assert workspace_revision(root) == before_rev
        assert _head(root) == before_head
        assert not list(root.glob(".scriptorium-*")), "install scratch left behind"
        return

    assert result.ok, f"{case['name']}: {result.code}: {result.message} at {result.path}:{result.line}:{result.column}"
    tree = parse_tree_strict(root / "topics")
    if case.get("delete"):
        deleted = case["path"][len("topics/"):]
        assert not (root / case["path"]).exists()
        survivors = committed_ids - {u.memory_id for u in parse_tree_strict({deleted: before[case["path"]].decode()}).units}
        assert survivors <= tree.ids
    else:
        assert committed_ids <= tree.ids
    if expect.get("revision_unchanged"):
        assert result.revision == before_rev == workspace_revision(root)
        assert list(result.changed_files) == expect["changed_files"]
        assert _snapshot(root) == before  # runtime.json untouched too
        assert _head(root) == before_head
    else:
        assert result.revision == workspace_revision(root) != before_rev
        assert case["path"] in result.changed_files
        assert result.git_committed and _head(root) != before_head
        msg = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=root, capture_output=True, text=True).stdout.strip()
        assert msg == ("memory: delete " if case.get("delete") else "memory: edit ") + case["path"]
    if "new_blocks" in expect:
        assert len(result.block_ids) == expect["new_blocks"]
        assert len(tree.ids - committed_ids) == expect["new_blocks"]
