"""``why SESSION --json`` reads that session alone: the same answer as the full path (every
session explained) for that session, with no other session's folder listed or its files read
(the global pending count, which needs them all, is ``null`` there: it is ``status``'s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aging import age
from memory_tui.cli import main
from memory_tui.sessions import store


def _json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _session_ids(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "sessions").iterdir() if (p / "history").is_dir())


def _expected(full: dict, sid: str) -> dict:
    return {**full, "status_pending_turns": None, "sessions": {k: v for k, v in full["sessions"].items() if k == sid}}


@pytest.mark.parametrize("damage", ["none", "corrupt_other_node", "no_workspace_id", "mark_other"])
def test_why_session_json_equals_the_full_path(fixture_state, capsys, damage):
    sids = _session_ids(fixture_state)
    age(fixture_state / "sessions")
    # a first run leaves the readers' caches warm; then the workspace changes: they must follow
    _json(capsys, "--state", str(fixture_state), "--json", "why", sids[0], "--now", "1790000000")
    other = fixture_state / "sessions" / sids[-1] / "history"
    nodes = sorted(other.glob("*.json"))
    if damage == "corrupt_other_node":
        nodes[len(nodes) // 2].write_text('{"id": "x", ', encoding="utf-8")
    elif damage == "no_workspace_id":
        (fixture_state / "memory" / ".scriptorium" / "workspace-id").unlink()
    elif damage == "mark_other":
        from memory_tui.sessions.marks import mark_nodes

        wid = (fixture_state / "memory" / ".scriptorium" / "workspace-id").read_text().strip()
        ids = [json.loads(p.read_text())["id"] for p in nodes[1:]]
        mark_nodes(other.parent, ids, wid)
    age(fixture_state / "sessions")
    full = _json(capsys, "--state", str(fixture_state), "--json", "why", "--now", "1790000000")
    for sid in sids:
        got = _json(capsys, "--state", str(fixture_state), "--json", "why", sid, "--now", "1790000000")
        assert got == _expected(full, sid), sid


@pytest.mark.parametrize("warm", [False, True])
def test_why_session_json_reads_only_that_session(fixture_state, capsys, monkeypatch, warm):
    sids = _session_ids(fixture_state)
    assert len(sids) > 1
    age(fixture_state / "sessions")
    if warm:
        _json(capsys, "--state", str(fixture_state), "--json", "why", sids[0])
    read: list[str] = []
    listed: list[str] = []
    real, real_stamps = store.load_session_dir, store._folder_stamps

    def spy(sid, *a, **kw):
        read.append(sid)
        return real(sid, *a, **kw)

    def spy_stamps(where, *a, **kw):
        listed.append(Path(where).parent.name)
        return real_stamps(where, *a, **kw)

    monkeypatch.setattr(store, "load_session_dir", spy)
    monkeypatch.setattr(store, "_folder_stamps", spy_stamps)
    got = _json(capsys, "--state", str(fixture_state), "--json", "why", sids[-1])
    # besides the session itself, only sub-agent sessions are read: a cross-session spawn's
    # other half is named from either side (their meta.json says so)
    spawned = {sid for sid in sids
               if json.loads((fixture_state / "sessions" / sid / "meta.json").read_text()).get("source") == "agent_spawn"}
    unrelated = set(sids) - spawned - {sids[-1]}
    assert sids[-1] in read and unrelated and not unrelated & set(read)
    assert not unrelated & set(listed)  # not even stat-ed for the summary index
    assert list(got["sessions"]) == [sids[-1]] and got["status_pending_turns"] is None
    assert got["sessions"][sids[-1]]["tips"]


def test_why_session_starts_from_the_last_readers_parse_of_the_topics(fixture_state, capsys, monkeypatch):
    """The records' citations ``why SESSION`` needs come from the topics' parse the last
    reading process kept in the user cache (the state dir's own parse cache is the
    transactions'): a fresh process parses no topic again, and answers the same."""
    import memory_tui.core.format.topics as topics
    from memory_tui.core.cache.registry import forget
    from memory_tui.core.store import parsecache

    age(fixture_state)
    sid = _session_ids(fixture_state)[0]
    first = _json(capsys, "--state", str(fixture_state), "--json", "why", sid)
    forget()  # a fresh process: only what is on disk is left
    parsed: list[str] = []
    real = topics.parse_topic
    monkeypatch.setattr(topics, "parse_topic", lambda path, *a, **k: parsed.append(path) or real(path, *a, **k))
    monkeypatch.setattr(parsecache, "parse_topic", lambda path, *a, **k: parsed.append(path) or real(path, *a, **k))
    assert _json(capsys, "--state", str(fixture_state), "--json", "why", sid) == first
    assert parsed == []
    assert not (fixture_state / "memory" / ".scriptorium" / parsecache.DIR_NAME).exists()
