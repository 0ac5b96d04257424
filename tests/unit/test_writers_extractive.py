"""The embedded extractive writer's rules and file edits (no transaction involved)."""

from __future__ import annotations

from memory_tui.pipeline.writers import extractive as X
from memory_tui.pipeline.writers.base import Rejected, Turn, WriteTask, run_with_repair, WriterOutcome
from memory_tui.core.format.errors import MemoryError

import pytest


def T(sid: str, role: str, text: str, ts: str = "2026-11-30T05:00:00+00:00", title: str = "Kyoto trip") -> Turn:
    return Turn(f"openprogram/s1/{sid}", role, "Owner" if role == "user" else "agent/main", text, ts, session_id="s1", session_title=title)


def task(*turns: Turn, topic: str = "") -> WriteTask:
    return WriteTask("write", tuple(turns), "s1", "Kyoto trip", topic)


def test_keeps_preferences_decisions_facts_and_drops_chitchat_and_questions():
    t = task(
        T("a", "user", "Hi there! I'm Ada. I prefer small ryokans over big hotels. What time is it?"),
        T("a_r", "assistant", "Noted: small ryokans. Anything else?"),
        T("b", "user", "Thanks! Let's book the Gion ryokan for three nights. My sister Mei lives in Osaka."),
    )
    got = [(c.kind, c.content) for c in X.extract(t)]
    assert ("preference", "Ada said: “I prefer small ryokans over big hotels.”") in got
    assert ("decision", "Ada said: “Let's book the Gion ryokan for three nights.”") in got
    assert ("fact", "Ada said: “My sister Mei lives in Osaka.”") in got
    assert ("decision", "The assistant confirmed: “Noted: small ryokans.”") in got
    assert not any("What time" in c or "Hi there" in c or "Anything else" in c for _, c in got)
    assert not any("Batch" in c for _, c in got)


def test_assistant_confirmation_cites_the_request_and_the_reply():
    t = task(T("a", "user", "I prefer tea over coffee."), T("a_r", "assistant", "Noted, tea it is."))
    conf = [c for c in X.extract(t) if c.speaker == "The assistant"][0]
    assert [x.source_id for x in conf.turns] == ["openprogram/s1/a", "openprogram/s1/a_r"]


def test_fallback_keeps_the_most_substantive_statement():
    t = task(T("a", "user", "What files are in my project folder?"), T("a_r", "assistant", "There are two files."))
    (only,) = X.extract(t)
    assert only.kind == "asked" and only.content == "The owner asked: “What files are in my project folder?”"


def test_topic_rule_and_file_layout():
    t = task(T("a", "user", "I prefer tea over coffee.", ts="2026-11-30T09:00:00+09:00"))
    edits, n = X.plan_edits(t, X.extract(t), lambda rel: None, safe=False, anchor_of=X.source_anchor)
    assert list(edits) == ["topics/conversations/kyoto-trip.md"]
    text = "\n".join(edits["topics/conversations/kyoto-trip.md"].lines)
    assert text == (
        "# Kyoto trip\n\n## Preferences\n\nThe owner said: “I prefer tea over coffee.”[^e1]\n\n"
        "[^e1]: Time: `2026-11-30`; Sources: [I prefer tea over coffee](openprogram/s1/a)"
    )
    t2 = task(T("a", "user", "I prefer tea over coffee."), topic="topics/inbox.md")
    edits2, _ = X.plan_edits(t2, X.extract(t2), lambda rel: None, safe=False, anchor_of=X.source_anchor)
    assert list(edits2) == ["topics/inbox.md"] and edits2["topics/inbox.md"].lines[0] == "# Inbox"


def test_repeat_adds_evidence_or_nothing():
    committed = (
        "# Kyoto trip\n\n## Preferences\n\nAda said: “I prefer tea over coffee.”[^e-1234567890] ^abcd1234\n\n"
        "[^e-1234567890]: Time: `2026-11-29`; Sources: [tea](../../sources/openprogram/_v2/s1.md#" + X.source_anchor("openprogram/s1/old") + ")\n"
    )
    again = task(T("new", "user", "I prefer tea over coffee."))
    edits, _ = X.plan_edits(again, X.extract(again), lambda rel: committed, safe=False, anchor_of=X.source_anchor)
    lines = edits["topics/conversations/kyoto-trip.md"].lines
    assert lines[4] == "Ada said: “I prefer tea over coffee.”[^e-1234567890][^e1] ^abcd1234"
    assert any(line.startswith("[^e1]: Time: `2026-11-30`") for line in lines)
    same = WriteTask("write", (T("old", "user", "I prefer tea over coffee."),), "s1", "Kyoto trip")
    edits, _ = X.plan_edits(same, X.extract(same), lambda rel: committed, safe=False, anchor_of=X.source_anchor)
    assert not edits["topics/conversations/kyoto-trip.md"].changed


def test_text_is_made_safe_for_the_grammar():
    t = task(T("a", "user", "I prefer [links](other.md) and ^ids and [^e9] notes over `code`, always."))
    (c,) = X.extract(t)
    assert "[^" not in c.content and "](" not in c.content and " ^" not in c.content


def test_run_with_repair_gives_one_repair_then_commit_rejected():
    calls = []

    def attempt(rejection):
        calls.append(rejection)
        raise Rejected("bad paragraph")

    with pytest.raises(MemoryError) as exc:
        run_with_repair(attempt)
    assert exc.value.code == "COMMIT_REJECTED" and calls == [None, "bad paragraph"]

    def ok_second(rejection):
        if rejection is None:
            raise MemoryError("INVALID_TOPIC_FORMAT", "nope")
        return WriterOutcome(("topics/a.md",))

    assert run_with_repair(ok_second).changed


def test_an_explicit_decision_outranks_preference_words():
    t = task(T("a", "user", "We decided to take the Haruka express from Kansai airport instead of a taxi."))
    assert [(c.kind, c.content) for c in X.extract(t)] == [
        ("decision", "The owner said: “We decided to take the Haruka express from Kansai airport instead of a taxi.”")
    ]
    assert X.classify_user("I prefer tea instead of coffee in the morning.") == "preference"
