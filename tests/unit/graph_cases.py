"""Small synthetic sessions, one per DAG construct the Sessions graph must draw."""

from __future__ import annotations

from test_sessions_helpers import OWNER, ROOT, node, turn

WS = "w-0000aaaa"
NOW = 1_000_000.0
M = {"memory_written_scriptorium": WS}


def retry_and_edit():
    nodes = [ROOT, *turn("a", 1, "ROOT", "Plan a trip", "Sure", **M),
             *turn("b", 3, "a_reply", "Kyoto in May?", "Yes"),
             *turn("b2", 5, "a_reply", "Kyoto in May?", "Again", forked_from="b"),
             *turn("b3", 7, "a_reply", "Kyoto in June?", "Edited", forked_from="b", edit_of="b")]
    return nodes, {"head_id": "b3_reply"}


def rewind():
    nodes = [ROOT, *turn("a", 1, "ROOT", "Start", "ok", **M),
             *turn("b", 3, "a_reply", "Book a ryokan", "Booked", rewound=True, rewound_at=NOW - 10),
             *turn("c", 5, "a_reply", "Only tea instead", "Tea")]
    return nodes, {"head_id": "c_reply"}


def same_session_spawn():
    m = {**OWNER, "source": "agent_spawn"}
    nodes = [ROOT, *turn("a", 1, "ROOT", "Compare tools", "Spawning", **M),
             node("s", 3, "user", "Investigate crates", pred=None, caller="a_reply", spawn_branch_root=True, **m),
             node("s_reply", 4, "llm", "clap", pred="s", **m),
             *turn("b", 5, "a_reply", "Which one?", "clap")]
    return nodes, {"head_id": "b_reply", "branches": {"s_reply": {"archived": True}}}


def cross_session_spawn():
    m = {**OWNER, "source": "agent_spawn"}
    nodes = [ROOT,
             node("c1", 1, "user", "Summarize the decision", pred=None, caller="zz_reply", spawn_branch_root=True, **m),
             node("c1_reply", 2, "llm", "Python now", pred="c1", **m),
             *turn("c2", 3, "c1_reply", "Thanks", "Welcome")]
    return nodes, {"head_id": "c2_reply"}


def merge_with_gap():
    rt = {**OWNER, "source": "merge_turn", "display": "runtime"}
    nodes = [ROOT, *turn("a", 1, "ROOT", "Compare", "ok", **M),
             *turn("b", 3, "a_reply", "Small team?", "Python", **M),
             *turn("c", 5, "a_reply", "Small team? (retry)", "Rust"),
             # seq 7-8 were the merge's temporary attach pointers, deleted afterwards
             node("m", 9, "user", "Consolidate the branches", pred="b_reply", caller="ROOT", **rt),
             node("m_reply", 10, "llm", "Merged", pred="m", **rt)]
    return nodes, {"head_id": "m_reply", "merged_heads": ["c_reply"]}


def compaction_summary():
    nodes = [ROOT, *turn("a", 1, "ROOT", "Hi", "Hello", **M), *turn("b", 3, "a_reply", "More", "Sure", **M),
             node("summary_0a1b2c3d4e", 5, "llm", "[Previous conversation summary]\n## Goal", pred="ROOT",
                  name="context/summary", type="compactionSummary", source="compaction", compaction=True,
                  covers_ids=["a", "a_reply"])]
    return nodes, {"head_id": "b_reply"}


def attach_pointer():
    nodes = [ROOT, *turn("a", 1, "ROOT", "Use the other branch", "ok", **M),
             node("p1", 3, "llm", "", pred="a_reply", caller="a_reply", display="runtime", function="attach",
                  attach={"session_id": "s", "head_id": "x_reply", "label": "x"}),
             *turn("b", 4, "a_reply", "Continue", "Done")]
    return nodes, {"head_id": "b_reply"}


def tool_run():
    nodes = [ROOT, *turn("a", 1, "ROOT", "List files", "Two files", **M),
             node("a_reply_t_1", 3, "code", "a.py", caller="a_reply", name="bash"),
             node("a_reply_t_2", 4, "code", "b.md", caller="a_reply", name="read"),
             node("a_reply_t_3", 5, "code", "ok", caller="a_reply", name="bash"),
             *turn("b", 6, "a_reply", "Thanks", "Welcome")]
    return nodes, {"head_id": "b_reply"}


def long_linear():
    nodes = [ROOT]
    pred = "ROOT"
    for i in range(10):
        nodes += turn(f"t{i:02d}", 1 + 2 * i, pred, f"question {i}", f"answer {i}", **(M if i < 6 else {}))
        pred = f"t{i:02d}_reply"
    return nodes, {"head_id": pred}


def marks():
    nodes = [ROOT, *turn("a", 1, "ROOT", "One", "1", **M),
             node("b", 3, "user", "Two", pred="a_reply", caller="ROOT", **OWNER, source="web"),
             node("b_reply", 4, "llm", "2", pred="b", **OWNER, source="web", **M),
             *turn("c", 5, "b_reply", "Three", "3", memory_written_scriptorium="w-ffffffff")]
    return nodes, {"head_id": "c_reply"}


def many_forks():
    nodes = [ROOT, *turn("a", 1, "ROOT", "Root question", "ok", **M)]
    for i in range(5):
        nodes += turn(f"r{i}", 3 + 2 * i, "a_reply", f"retry {i}", f"reply {i}", forked_from="r0")
    return nodes, {"head_id": "r4_reply"}


CASES = {
    "retry_and_edit": retry_and_edit,
    "rewind": rewind,
    "same_session_spawn": same_session_spawn,
    "cross_session_spawn": cross_session_spawn,
    "merge_with_gap": merge_with_gap,
    "compaction_summary": compaction_summary,
    "attach_pointer": attach_pointer,
    "tool_run": tool_run,
    "long_linear": long_linear,
    "marks": marks,
    "many_forks": many_forks,
}
