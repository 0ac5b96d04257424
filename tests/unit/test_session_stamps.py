"""Reusing whole sessions by their stamps (OpenProgram's freshness rule, session spec §1.8):
an unchanged session is the same object; every kind of change a writer makes is seen."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from memory_tui.sessions.marks import mark_nodes
from memory_tui.sessions.records import status_pending_count
from memory_tui.sessions.store import load_sessions

SID = "local_a1b2c3d4e5"


def _age(state: Path) -> None:
    """Let the last change leave the racy window (stamps younger than a tick are not trusted)."""
    time.sleep(0.15)


def _same_content(a, b) -> bool:
    return a.nodes == b.nodes and a.meta == b.meta and a.head_id == b.head_id and a.problems == b.problems


def test_unchanged_sessions_are_reused_and_changes_are_seen(fixture_state):
    _age(fixture_state)
    first = load_sessions(fixture_state, trust_dir_stamps=True)
    again = load_sessions(fixture_state, previous=first, trust_dir_stamps=True)
    assert all(again.sessions[s] is first.sessions[s] for s in first.sessions)

    # a mark (a node file replaced by rename) is seen, and only that session is re-read
    node = next(n for n in first.sessions[SID].nodes.values() if n.role == "user" and n.id != "ROOT")
    assert mark_nodes(fixture_state / "sessions" / SID, [node.id], "w-00000001").marked
    _age(fixture_state)
    third = load_sessions(fixture_state, previous=again, trust_dir_stamps=True)
    assert third.sessions[SID] is not again.sessions[SID]
    assert third.sessions[SID].nodes[node.id].metadata.get("memory_written_scriptorium") == "w-00000001"
    assert all(third.sessions[s] is again.sessions[s] for s in again.sessions if s != SID)
    assert _same_content(third.sessions[SID], load_sessions(fixture_state).sessions[SID])

    # meta.json and the registry entry are part of the stamp
    meta = fixture_state / "sessions" / SID / "meta.json"
    data = json.loads(meta.read_text())
    data["title"] = "Renamed by the test"
    meta.write_text(json.dumps(data, ensure_ascii=False))
    _age(fixture_state)
    fourth = load_sessions(fixture_state, previous=third, trust_dir_stamps=True)
    assert fourth.sessions[SID] is not third.sessions[SID]
    reg = fixture_state / "sessions" / "index.json"
    index = json.loads(reg.read_text())
    index[SID]["updated_at"] = 1.0
    reg.write_text(json.dumps(index, indent=2))
    _age(fixture_state)
    fifth = load_sessions(fixture_state, previous=fourth, trust_dir_stamps=True)
    assert fifth.sessions[SID].updated_at == 1.0

    wid = "w-00000001"
    fresh = load_sessions(fixture_state)
    assert status_pending_count(fifth, wid).value == status_pending_count(fresh, wid).value
    assert all(_same_content(fifth.sessions[s], fresh.sessions[s]) for s in fresh.sessions)


def test_young_stamps_are_not_trusted(fixture_state):
    first = load_sessions(fixture_state, trust_dir_stamps=True)
    hist = fixture_state / "sessions" / SID / "history"
    os.utime(hist)  # "now": inside the racy window
    again = load_sessions(fixture_state, previous=first, trust_dir_stamps=True)
    assert again.sessions[SID] is not first.sessions[SID]
    assert again.sessions[SID].nodes == first.sessions[SID].nodes
