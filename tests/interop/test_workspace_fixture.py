"""Snapshot and revision against OpenProgram's own state directory."""

from __future__ import annotations

import time

import os

import pytest

pytest.importorskip("memory_tui.core.format.sources")

from memory_tui.core.format.errors import MemoryError  # noqa: E402
from memory_tui.core.store.workspace import (  # noqa: E402
    Workspace,
    dump_runtime_json,
    load_runtime_state,
    open_state,
    refresh,
    workspace_revision,
)


def test_revision_and_workspace_id_match_openprogram(fixture_state_ro, expected):
    assert workspace_revision(fixture_state_ro / "memory") == expected["revision"]
    snap = open_state(fixture_state_ro)
    assert snap.revision == expected["revision"]
    assert snap.workspace_id == expected["workspace_id"]


def test_snapshot_contents(fixture_state_ro, expected):
    snap = open_state(fixture_state_ro)
    assert not snap.memory_missing and not snap.memory_disabled and not snap.writer_disabled and not snap.empty_workspace
    assert snap.config.trigger_tokens == expected["trigger_tokens"]
    assert [(t.workspace_path, list(t.block_ids)) for t in snap.tree.topics] == [
        (t["path"], t["block_ids"]) for t in expected["topics"]
    ]
    assert snap.problems == ()
    assert snap.core.rendered_tokens == expected["core"]["rendered_tokens"]
    assert list(snap.core.omitted_ids) == expected["core"]["omitted_block_ids"]
    assert snap.writer_status.last_outcome == "success"
    assert set(snap.session_end.handled) == {"local_0c0c0c0c0c", "local_f6e5d4c3b2", "local_a1b2c3d4e5"}
    assert len(snap.agent_history) >= 1 and {r.stage for r in snap.agent_history} <= {"write", "organize", "write-repair", "organize-repair", "backfill", "promote"}
    assert snap.core_injection().injected


def test_runtime_json_round_trips_byte_for_byte(fixture_state_ro):
    memory = fixture_state_ro / "memory"
    state, problems = load_runtime_state(memory)
    assert problems == ()
    assert dump_runtime_json(state).encode() == (memory / ".scriptorium" / "runtime.json").read_bytes()


def _bump(path):
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_refresh_reparses_only_changed_topic(fixture_state):
    time.sleep(0.15)  # the copy just made is racy (ctime within a clock tick): reuse starts after it
    snap = open_state(fixture_state)
    same = refresh(snap)
    assert same.reparsed_topics == () and same.tree is snap.tree and same.views is snap.views
    assert same.revision == snap.revision
    ada = fixture_state / "memory" / "topics" / "people" / "ada.md"
    ada.write_text(ada.read_text(encoding="utf-8").replace("short answers.", "very short answers."), encoding="utf-8")
    _bump(ada)
    nxt = refresh(snap)
    assert nxt.reparsed_topics == ("people/ada.md",)
    assert "very short answers." in nxt.tree.by_id("fc30e0e0").content
    assert nxt.revision != snap.revision == same.revision
    # untouched topics are the same parsed objects
    assert nxt.tree.topic("core.md") is snap.tree.topic("core.md")
    assert nxt.revision == workspace_revision(fixture_state / "memory")
    # incremental views (cached timeline rows) equal a from-scratch rebuild
    fresh = open_state(fixture_state)
    assert nxt.views.files == fresh.views.files
    assert "very short answers." in nxt.views.files["timeline/2026/11.md"]


def test_refresh_sees_runtime_and_status_changes(fixture_state):
    ws = Workspace(fixture_state)
    first = ws.snapshot
    rt = fixture_state / "memory" / ".scriptorium" / "runtime.json"
    rt.write_text("{not json", encoding="utf-8")
    _bump(rt)
    second = ws.refresh()
    assert second.runtime.creation_order == {}
    assert [p.path for p in second.problems] == [".scriptorium/runtime.json"]
    assert second.revision != first.revision


def test_missing_memory_and_missing_state(tmp_path):
    with pytest.raises(MemoryError) as err:
        open_state(tmp_path / "absent")
    assert err.value.code == "STATE_NOT_FOUND"
    snap = open_state(tmp_path)
    assert snap.memory_missing and snap.tree.units == () and snap.revision == "e3b0c44298fc1c149afbf4c8996fb924"
    assert list(tmp_path.iterdir()) == []  # reading never creates anything


def test_disabled_flags(tmp_path):
    (tmp_path / "config.json").write_text('{"memory": {"backend": "none", "writer": {"enabled": false}}}', encoding="utf-8")
    (tmp_path / "memory" / "topics").mkdir(parents=True)
    snap = open_state(tmp_path)
    assert snap.memory_disabled and snap.writer_disabled and snap.empty_workspace and not snap.memory_missing


def test_refresh_without_config_reuses_everything(fixture_state):
    time.sleep(0.15)  # the copy just made is racy (ctime within a clock tick): reuse starts after it
    (fixture_state / "config.json").unlink()
    snap = open_state(fixture_state)
    again = refresh(snap)
    assert again.config is snap.config and again.views is snap.views and again.tree is snap.tree
    (fixture_state / "config.json").write_text('{"memory": {"recent": {"limit": 2}}}', encoding="utf-8")
    third = refresh(again)
    assert third.config.recent_limit == 2 and len(third.views.recent.splitlines()) == 2
