"""When will this branch be written: the rule that writes a tip's pending turns next, and when.

OpenProgram has two writers of a session (memory spec §7): the per-turn path after every turn
on the head (from ``memory.writer.trigger_tokens`` pending tokens up, or once the newest
pending turn is an hour old), and the idle watcher, which handles a session once it has been
quiet for 30 minutes (once per ``updated_at``): the head fully, every other live branch from
the threshold up. Everything here is read from the config and the session's own stamps; the
answer is a prediction that holds while nothing else happens (a new turn moves it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from memory_tui.core.format.config import IDLE_ALLOWANCE_SECONDS, IDLE_MINUTES

from .reasons import WriterContext
from .records import SessionAnalysis, TipAnalysis

PER_TURN, IDLE_PASS, NEVER, NOTHING = "per_turn", "idle_pass", "never", "nothing_pending"


@dataclass(frozen=True)
class NextWrite:
    rule: str  # per_turn | idle_pass | never | nothing_pending
    at: float | None  # when, for the idle pass (epoch seconds); None when it waits on something else
    tokens_to_go: int | None  # per turn: pending tokens still missing to the threshold
    text: str
    command: str | None  # what writes it now, on purpose
    evidence: tuple[tuple[str, str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "at": self.at, "tokens_to_go": self.tokens_to_go, "text": self.text,
                "command": self.command, "evidence": [{"file": f, "field": k, "value": v} for f, k, v in self.evidence]}

    def countdown(self, now: float) -> str:
        """The time left to ``at`` as the panel shows it, moving with ``now``."""
        if self.at is None:
            return ""
        left = int(self.at - now)
        if left <= 0:
            return "due now (the watcher polls every 300 s)"
        h, rest = divmod(left, 3600)
        m = (rest + 59) // 60
        return f"in {h} h {m} min" if h else f"in {m} min"


def hhmm(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%H:%M UTC")


def next_write(sa: SessionAnalysis, ta: TipAnalysis, ctx: WriterContext) -> NextWrite:
    nw = _next_write(sa, ta, ctx)
    return NextWrite(nw.rule, nw.at, nw.tokens_to_go, nw.text, nw.command, _unique(nw.evidence))


def _next_write(sa: SessionAnalysis, ta: TipAnalysis, ctx: WriterContext) -> NextWrite:
    session = sa.session
    sid, tip = session.id, ta.tip
    threshold = ctx.config.trigger_tokens
    command = f"memory-tui write {sid} --branch {tip} --force"
    cfg_ev = ("config.json", "memory.writer.trigger_tokens", threshold)
    head, _, _ = session.rel.partition("/")
    reg = f"{head}/index.json" if head in ("sessions", "sessions-git") else "sessions/index.json"
    upd_ev = ((reg, f"{sid}.updated_at", session.updated_at) if session.in_registry
              else (session.meta_file, "updated_at", session.updated_at))
    if not ta.pending:
        return NextWrite(NOTHING, None, None, "nothing pending on this branch", None, ())
    if not ctx.config.enabled or not ctx.config.writer_enabled:
        key = "memory.backend" if not ctx.config.enabled else "memory.writer.enabled"
        value = ctx.config.backend if not ctx.config.enabled else False
        return NextWrite(NEVER, None, None, f"never: writing is off ({key} = {value})", None, (("config.json", key, value),))
    if ta.archived and not ta.is_head:
        return NextWrite(NEVER, None, None, f"never: the branch is archived and not the head; `{command}` writes it now",
                         command, ((session.meta_file, f"branches.{tip}.archived", True),))
    idle = _idle_pass(session, ctx, upd_ev)
    if ta.is_head:
        newest = max((r.timestamp or ctx.now) for r in ta.pending)
        if ta.pending_tokens >= threshold or newest <= ctx.now - IDLE_ALLOWANCE_SECONDS:
            why = (f"{ta.pending_tokens} >= {threshold} pending tokens" if ta.pending_tokens >= threshold
                   else "its newest pending turn is over an hour old")
            return NextWrite(PER_TURN, None, 0, f"per turn, at the next turn on the head ({why})", command,
                             (cfg_ev, (ta.pending[-1].node.file, "created_at", ta.pending[-1].timestamp)))
        to_go = threshold - ta.pending_tokens
        text = f"per turn, after ~{to_go} more tokens on the head"
        if idle is not None:
            text += f"; else {idle[1]}"
        return NextWrite(PER_TURN if idle is None else IDLE_PASS, idle[0] if idle else None, to_go, text, command,
                         (cfg_ev, upd_ev, *(idle[2] if idle else ())))
    if ta.pending_tokens < threshold:
        return NextWrite(NEVER, None, threshold - ta.pending_tokens,
                         f"never: below threshold ({ta.pending_tokens} < {threshold} tokens) and not the head; "
                         f"`{command}` writes it now", command, (cfg_ev, (session.meta_file, "head_id", session.head_id)))
    if idle is None:
        return NextWrite(NEVER, None, None, "never while the idle watcher cannot handle the session "
                         "(not in the registry, or already handled at this updated_at); `" + command + "` writes it now",
                         command, (cfg_ev, upd_ev))
    return NextWrite(IDLE_PASS, idle[0], None, f"{idle[1]} ({ta.pending_tokens} >= {threshold} tokens)", command,
                     (cfg_ev, upd_ev, *idle[2]))


def _idle_pass(session: Any, ctx: WriterContext, upd_ev: tuple) -> tuple[float | None, str, tuple] | None:
    """(when, text, evidence) of the idle watcher's next pass over the session, or None when
    it will not handle it before a new turn."""
    if ctx.watcher_disabled_env or not session.in_registry or session.updated_at is None:
        return None
    end = ctx.session_end or {}
    if session.id in end and end.get(session.id) == session.updated_at:
        return None  # handled at this updated_at: it waits for a new turn
    at = session.updated_at + IDLE_MINUTES * 60
    if at <= ctx.now:
        return (ctx.now, "at the idle watcher's next poll (the session has been quiet 30 min)", (upd_ev,))
    return (at, f"at the idle pass, ~{hhmm(at)} (30 min after the last turn, if the session stays quiet)", (upd_ev,))


def _unique(evidence: tuple) -> tuple:
    seen: set[str] = set()
    out = []
    for ev in evidence:
        key = repr(ev)
        if key not in seen:
            seen.add(key)
            out.append(ev)
    return tuple(out)


def session_schedule(sa: SessionAnalysis, ctx: WriterContext) -> dict[str, NextWrite]:
    """Tip -> its next write, for every tip with pending turns."""
    return {tip: next_write(sa, ta, ctx) for tip, ta in sa.tips.items() if ta.pending}
