"""The "why not written" reasons engine."""

from __future__ import annotations

import fcntl
import json
import os

from memory_tui.core.format.config import MemoryConfig
from memory_tui.core.format.tokens import CharCounter, O200kCounter
from memory_tui.sessions.reasons import CODES, explain, explain_session, load_context, probe_lock
from memory_tui.sessions.store import load_sessions
from test_sessions_helpers import OWNER, ROOT, make_session, node, turn

WS = "w-0000aaaa"
NOW = 1_000_000.0
M = {"memory_written_scriptorium": WS}


def state_with_memory(tmp_path, *, status=None, session_end=None, config=None):
    rt = tmp_path / "memory" / ".scriptorium"
    rt.mkdir(parents=True)
    (rt / "workspace-id").write_text(WS + "\n")
    (rt / "write.lock").write_text("")
    if status is not None:
        (rt / "writer-status.json").write_text(json.dumps(status))
    if session_end is not None:
        (rt / "session-end.json").write_text(session_end if isinstance(session_end, str) else json.dumps(session_end))
    if config is not None:
        (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def codes(reasons):
    return [r.code for r in reasons]


def test_context_reads_without_writing(tmp_path):
    state = state_with_memory(tmp_path, config={"memory": {"backend": "none", "writer": {"enabled": False}}},
                              status={"version": 1, "last_outcome": "failure", "last_success_at": None,
                                      "last_failure": {"at": "x", "reason_code": "MODEL_TIMEOUT", "retryable": True}},
                              session_end='{"s": ')
    before = sorted(p.name for p in (state / "memory" / ".scriptorium").iterdir())
    ctx = load_context(state, now=NOW, env={"OPENPROGRAM_NO_SESSION_END": "yes"})
    assert sorted(p.name for p in (state / "memory" / ".scriptorium").iterdir()) == before
    ex = explain(load_sessions(state), ctx)
    got = codes(ex.reasons)
    assert got == ["memory_disabled", "writer_disabled", "watcher_disabled", "watcher_state_unreadable", "last_writer_failure"]
    bad = ex.reasons[3]
    assert bad.evidence[0].file == "memory/.scriptorium/session-end.json"
    assert all(c in CODES for c in got)


def test_lock_probe_sees_a_held_lock_and_never_creates_one(tmp_path):
    state = state_with_memory(tmp_path)
    lock = state / "memory" / ".scriptorium" / "write.lock"
    assert probe_lock(lock) is False
    assert probe_lock(state / "nope.lock") is False and not (state / "nope.lock").exists()
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # flock is per open file description: a second open in this process conflicts too.
        assert probe_lock(lock) is True
        ctx = load_context(state, now=NOW, env={})
        assert "lock_busy" in codes(explain(load_sessions(state), ctx).reasons)
    finally:
        os.close(fd)


def test_session_turn_and_branch_reasons(tmp_path):
    state = state_with_memory(tmp_path, session_end={"s": NOW - 7200})
    nodes = [
        ROOT,
        *turn("a", 1, "ROOT", "x" * 40, "y" * 40, **M),
        # head branch: pending, one foreign mark, one special token
        *turn("b", 3, "a_reply", "hello <|endoftext|>", "ok", memory_written_scriptorium="w-ffffffff"),
        # non-head branch partly written off the head: remainder below threshold
        *turn("c", 5, "a_reply", "x" * 40, "y" * 40, **M),
        *turn("d", 7, "c_reply", "short", "reply"),
        # archived branch
        *turn("e", 9, "a_reply", "arch", "ived"),
        node("t", 11, "code", "out", caller="a_reply", name="bash"),
    ]
    meta = {"head_id": "b_reply", "updated_at": NOW - 7200, "branches": {"e_reply": {"archived": True}}}
    for n in nodes:
        n["created_at"] = NOW - 7200
    make_session(state, "s", nodes, meta)
    ctx = load_context(state, now=NOW, env={})
    assert ctx.workspace_id == WS
    se = explain_session(load_sessions(state).sessions["s"], ctx, O200kCounter())
    assert codes(se.reasons) == ["special_token_blocks_writer", "already_processed"]
    assert se.reasons[0].evidence[0].file == "sessions/s/history/0003-u-b.json"
    assert "below_threshold_per_turn" not in codes(se.tips["b_reply"].reasons)  # older than 1 h
    assert codes(se.tips["d_reply"].reasons)[0] == "remainder_below_threshold"
    assert codes(se.tips["e_reply"].reasons)[0] == "archived_branch"
    v = se.nodes
    assert v["a"].verdict == "written" and v["a"].reasons[0].code == "written"
    assert v["b"].verdict == "pending"
    assert {"marked_other_workspace", "special_token_blocks_writer", "already_processed"} <= set(codes(v["b"].reasons))
    assert v["e"].verdict == "never" and v["e"].reasons[0].code == "archived_branch"
    assert v["t"].verdict == "never" and v["t"].reasons[0].code == "filtered_role"
    assert v["d"].verdict == "pending" and v["d"].reasons[0].code == "remainder_below_threshold"
    js = se.to_json()
    assert js["tips"]["b_reply"]["turns"][0] == {
        "id": "a", "role": "user", "verdict": "written",
        "reasons": [{"code": "written", "evidence": [{"file": "sessions/s/history/0001-u-a.json",
                                                      "field": "metadata.memory_written_scriptorium", "value": WS}],
                     "message": js["tips"]["b_reply"]["turns"][0]["reasons"][0]["message"]}],
    }


def test_not_in_registry_not_idle_precondition_and_runtime_only(tmp_path):
    state = state_with_memory(tmp_path)
    nodes = [
        ROOT,
        node("u", 1, "user", "stamped", pred="ROOT", caller="ROOT", created_at=NOW - 10, authority_schema=1),
        node("u_reply", 2, "llm", "fine", pred="u", created_at=NOW - 5, **OWNER),
        node("j", 3, "user", "[job]", pred="u_reply", caller="ROOT", display="runtime"),
        node("j_reply", 4, "llm", "ack", pred="j", source="job_followup"),
        node("k", 5, "user", "[job]", pred="u_reply", caller="ROOT", display="runtime"),
        node("k_reply", 6, "llm", "ack", pred="k", source="job_followup"),
    ]
    make_session(state, "copied", nodes, {"head_id": "u_reply", "updated_at": NOW - 5}, register=False)
    make_session(state, "rt", [ROOT, node("j", 1, "user", "[job]", pred="ROOT", caller="ROOT", display="runtime"),
                               node("j_reply", 2, "llm", "ack", pred="j", source="job_followup")],
                 {"head_id": "j_reply", "updated_at": 1.0})
    ctx = load_context(state, now=NOW, env={})
    ex = explain(load_sessions(state), ctx, CharCounter())
    se = ex.sessions["copied"]
    assert codes(se.reasons) == ["not_in_registry", "authority_missing", "session_not_idle"]
    assert se.reasons[1].evidence[0].file == "sessions/copied/history/0001-u-u.json"
    assert se.nodes["u"].verdict == "never" and se.nodes["u"].reasons[0].code == "authority_missing"
    assert ex.pending.value is None and ex.pending.lenient == 1
    assert ex.sessions["rt"].runtime_only_tips == ("j_reply",)
    assert codes(ex.sessions["rt"].tips["j_reply"].reasons) == ["runtime_turns_only"]


def test_fixture_explanation_matches_expected_and_is_json(fixture_state_ro, expected):
    ctx = load_context(fixture_state_ro, now=1796014861.2 + 7200, env={}, config=None)
    ex = explain(load_sessions(fixture_state_ro), ctx)
    js = json.loads(json.dumps(ex.to_json()))
    assert js["status_pending_turns"] == expected["status_pending_turns"]
    nodes = ex.sessions["local_a1b2c3d4e5"].nodes
    assert nodes["a00000000007_reply"].reasons[0].code == "stranded_behind_mark"
    assert nodes["summary_601f10339a"].reasons[0].code == "compaction_summary"
    assert nodes["a00000000005"].reasons[0].code == "rewound"
    assert nodes["a00000000003"].reasons[0].code == "below_threshold_non_head"
    f6 = ex.sessions["local_f6e5d4c3b2"].nodes
    assert f6["b00000000004"].reasons[0].code == "not_on_live_branch"
    assert f6["b00000000002"].reasons[0].code == "archived_branch"
    assert f6["4a95942698cd"].reasons[0].code == "runtime_turn"
    foreign = ex.sessions["local_9f1e2d3c4b"].nodes["f00000000001"]
    assert foreign.verdict == "pending" and foreign.reasons[0].code == "marked_other_workspace"
    assert MemoryConfig().trigger_tokens == 16000 and ctx.config.trigger_tokens == 8000
