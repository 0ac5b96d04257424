"""When will this branch be written (sessions.schedule), on sessions built with the node writer."""

from __future__ import annotations

from test_sessions_helpers import make_session, node

from memory_tui.core.format.config import load_memory_config
from memory_tui.sessions.reasons import load_context
from memory_tui.sessions.records import analyze_session
from memory_tui.sessions.schedule import IDLE_PASS, NEVER, PER_TURN, next_write
from memory_tui.sessions.store import load_sessions
from memory_tui.tui.widgets.branch_verdict import countdown

WS = "w-00000001"


def _state(tmp_path, *, updated_at: float):
    (tmp_path / "memory" / ".scriptorium").mkdir(parents=True)
    (tmp_path / "memory" / ".scriptorium" / "workspace-id").write_text(WS)
    (tmp_path / "config.json").write_text('{"memory": {"writer": {"trigger_tokens": 8000}}}')
    nodes = [node("u1", 1, output="hello there", created_at=updated_at - 10),
             node("u1_reply", 2, role="llm", output="hi", pred="u1", created_at=updated_at - 5),
             node("u2", 3, output="a fork", pred="u1_reply", created_at=updated_at - 4),
             node("u3", 4, output="the head", pred="u1_reply", created_at=updated_at - 2)]
    make_session(tmp_path, "s1", nodes, {"head_id": "u3", "updated_at": updated_at})
    snap = load_sessions(tmp_path)
    return snap.sessions["s1"]


def test_head_waits_for_tokens_or_the_idle_pass_and_a_short_fork_never(tmp_path):
    updated = 1_800_000_000.0
    session = _state(tmp_path, updated_at=updated)
    ctx = load_context(tmp_path, now=updated + 60, config=load_memory_config(tmp_path))
    sa = analyze_session(session, WS, ctx.config.trigger_tokens)
    head = next_write(sa, sa.tips["u3"], ctx)
    assert head.rule == IDLE_PASS and head.at == updated + 30 * 60
    to_go = 8000 - sa.tips["u3"].pending_tokens
    assert head.tokens_to_go == to_go and f"after ~{to_go} more tokens on the head" in head.text
    assert "at the idle pass, ~" in head.text and "30 min after the last turn" in head.text
    assert ("config.json", "memory.writer.trigger_tokens", 8000) in head.evidence
    assert ("sessions/index.json", "s1.updated_at", updated) in head.evidence
    fork = next_write(sa, sa.tips["u2"], ctx)
    assert fork.rule == NEVER and "below threshold" in fork.text and fork.command == "memory-tui write s1 --branch u2 --force"
    # the countdown moves with the clock
    assert countdown(head.at, updated + 60) == "in 29 min"
    assert countdown(head.at, updated + 25 * 60) == "in 5 min"
    assert countdown(head.at, updated + 31 * 60) == "due now"


def test_an_old_pending_turn_on_the_head_is_written_at_the_next_turn(tmp_path):
    updated = 1_800_000_000.0
    session = _state(tmp_path, updated_at=updated)
    ctx = load_context(tmp_path, now=updated + 2 * 3600, config=load_memory_config(tmp_path))
    sa = analyze_session(session, WS, ctx.config.trigger_tokens)
    head = next_write(sa, sa.tips["u3"], ctx)
    assert head.rule == PER_TURN and "at the next turn on the head" in head.text and "over an hour old" in head.text
