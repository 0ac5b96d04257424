"""The session reader against OpenProgram's own answers for the fixture state dir."""

from __future__ import annotations

import time

import pytest

from memory_tui.core.format.config import load_memory_config
from memory_tui.core.format.tokens import O200kCounter
from memory_tui.sessions.records import analyze_session, status_pending_count
from memory_tui.sessions.store import load_sessions


def _workspace_id(state):
    return (state / "memory" / ".scriptorium" / "workspace-id").read_text(encoding="utf-8").strip()


@pytest.fixture(scope="module")
def analysed(fixture_state_ro):
    state = fixture_state_ro
    snap = load_sessions(state)
    ws = _workspace_id(state)
    threshold = load_memory_config(state).trigger_tokens
    counter = O200kCounter()
    analyses = {sid: analyze_session(s, ws, threshold, counter) for sid, s in snap.sessions.items()}
    return snap, ws, threshold, analyses


def test_config_and_workspace_match(analysed, expected):
    _snap, ws, threshold, _ = analysed
    assert ws == expected["workspace_id"]
    assert threshold == expected["trigger_tokens"]


def test_same_sessions_and_no_problems(analysed, expected):
    snap, _, _, _ = analysed
    assert set(snap.sessions) == set(expected["sessions"])
    assert snap.all_problems() == ()


@pytest.mark.parametrize(
    "key", ["head_id", "in_registry", "updated_at", "list_branches", "forced_pass_branch_order"]
)
def test_session_level_values(analysed, expected, key):
    _, _, _, analyses = analysed
    for sid, exp in expected["sessions"].items():
        assert analyses[sid].to_json()[key] == exp[key], (sid, key)


def test_every_tip_value(analysed, expected):
    _, _, _, analyses = analysed
    for sid, exp in expected["sessions"].items():
        got = analyses[sid].to_json()["tips"]
        assert set(got) == set(exp["tips"]), sid
        for tip, values in exp["tips"].items():
            for key, value in values.items():
                assert got[tip][key] == value, (sid, tip, key)


def test_status_pending_turns(analysed, expected):
    snap, ws, _, analyses = analysed
    assert status_pending_count(snap, ws, analyses).value == expected["status_pending_turns"]
    # Also without precomputed analyses.
    assert status_pending_count(snap, ws).value == expected["status_pending_turns"]


def test_incremental_reload_reuses_unchanged_nodes(fixture_state):
    time.sleep(0.15)  # the copy just made is racy (ctime within a clock tick): reuse starts after it
    snap = load_sessions(fixture_state)
    again = load_sessions(fixture_state, previous=snap)
    sid = "local_a1b2c3d4e5"
    for nid, node in snap.sessions[sid].nodes.items():
        assert again.sessions[sid].nodes[nid] is node
    # Rewrite one node file: only that node is re-parsed.
    path = fixture_state / "sessions" / sid / "history" / "0006-u-a00000000003.json"
    path.write_text(path.read_text(encoding="utf-8").replace("Plan a 3-day", "Plan a 4-day-long"), encoding="utf-8")
    third = load_sessions(fixture_state, previous=again)
    assert third.sessions[sid].nodes["a00000000003"] is not again.sessions[sid].nodes["a00000000003"]
    assert "4-day" in third.sessions[sid].nodes["a00000000003"].output
    assert third.sessions[sid].nodes["a00000000001"] is again.sessions[sid].nodes["a00000000001"]
