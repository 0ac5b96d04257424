"""Branch walk, live tips, trunk tip, forced order, projection, records, pending, batches."""

from __future__ import annotations

from memory_tui.core.format.tokens import CharCounter
from memory_tui.sessions.dag import forced_pass_branch_order, get_branch, list_branches, to_message, trunk_tip, walk_chain
from memory_tui.sessions.records import (
    analyze_session,
    analyze_tip,
    first_batch,
    marked_ids,
    pending_records,
    records_for,
    status_pending_count,
)
from memory_tui.sessions.store import load_sessions
from test_sessions_helpers import OWNER, ROOT, make_session, node, turn

WS = "w-0000aaaa"


def load(tmp_path, nodes, meta=None, sid="s"):
    make_session(tmp_path, sid, nodes, meta if meta is not None else {})
    return load_sessions(tmp_path).sessions[sid]


def ids(nodes):
    return [n.id for n in nodes]


def test_branch_walk_filters_root_and_rewound(tmp_path):
    nodes = [ROOT, *turn("u1", 1, "ROOT"), *turn("u2", 3, "u1_reply", rewound=True)]
    s = load(tmp_path, nodes, {"head_id": "u2_reply"})
    assert ids(get_branch(s)) == ["u1", "u1_reply"]
    assert ids(walk_chain(s).nodes) == ["ROOT", "u1", "u1_reply", "u2", "u2_reply"]
    assert get_branch(s, "nope") == ()


def test_walk_stops_on_cycle_dangling_and_broken(tmp_path):
    nodes = [
        ROOT,
        node("a", 1, pred="b", caller="ROOT"),
        node("b", 2, pred="a", caller="ROOT"),
        node("c", 3, pred="ghost", caller="ROOT"),
        node("first", 4, pred=None, caller="ROOT"),
        node("second", 5, pred=None, caller="ROOT"),  # not the first ROOT-level node: broken
    ]
    s = load(tmp_path, nodes)
    ch = walk_chain(s, "a")
    assert ids(ch.nodes) == ["b", "a"] and ch.cycle == "b"
    assert walk_chain(s, "c").dangling == "c"
    assert walk_chain(s, "second").broken == "second"
    assert walk_chain(s, "a").broken is None


def test_list_branches_rules(tmp_path):
    nodes = [
        ROOT,
        *turn("u1", 1, "ROOT"),
        # tool row under the reply: a sub-call, never a tip
        node("u1_reply_t_1", 3, "code", "ls", caller="u1_reply", name="bash"),
        # a runtime child does not end u1_reply's tip status
        node("job", 4, "user", "[job finished]", pred="u1_reply", caller="ROOT", display="runtime", source="job_followup"),
        node("job_reply", 5, "llm", "ok", pred="job", source="job_followup"),
        # a fork off u1_reply that was merged away
        *turn("u2", 6, "u1"),
        # attach pointer and a compaction summary
        node("att", 8, "llm", "", pred="u2_reply", display="runtime", function="attach"),
        node("summary_0123456789", 9, "llm", "sum", pred="ROOT", name="context/summary", created_at=0.5,
             covers_ids=["u1"]),
    ]
    meta = {
        "head_id": "job_reply",
        "merged_heads": ["u2_reply"],
        "branches": {"u1_reply": {"turns": 1, "name": "main", "created_at": 1.0, "updated_at": 9.0, "archived": True}},
    }
    s = load(tmp_path, nodes, meta)
    rows = list_branches(s)
    # Rows without a branches entry use the node's created_at for both times.
    assert [r.head_msg_id for r in rows] == ["job_reply", "u1_reply"]
    assert rows[1].to_json() == {"head_msg_id": "u1_reply", "name": "main", "created_at": 1.0, "updated_at": 9.0, "archived": True}
    assert rows[0].created_at == rows[0].updated_at == 1005.0 and rows[0].name is None
    assert trunk_tip(s) == "summary_0123456789"  # earliest created ROOT-level start; then removed
    assert forced_pass_branch_order(s, rows) == ("job_reply",)


def test_trunk_tip_is_included(tmp_path):
    nodes = [ROOT, *turn("u1", 1, "ROOT"), *turn("u2", 3, "u1_reply"), *turn("u3", 5, "u1_reply")]
    s = load(tmp_path, nodes, {"head_id": "u3_reply", "merged_heads": ["u2_reply"]})
    assert trunk_tip(s) == "u2_reply"
    assert {r.head_msg_id for r in list_branches(s)} == {"u2_reply", "u3_reply"}


def test_projection(tmp_path):
    nodes = [
        ROOT,
        node("u", 1, "user", None, pred="ROOT", caller="ROOT", source="web"),
        node("s", 2, "llm", "sys", pred="u", name="m1", extra_meta={"role": "system"}, predecessor="u"),
        node("t", 3, "code", {"x": 1}, caller="s", name="fn", tool_call_id="c1"),
    ]
    s = load(tmp_path, nodes)
    u, sy, t = (to_message(s, s.nodes[i]) for i in ("u", "s", "t"))
    assert u["content"] == "" and u["role"] == "user" and u["status"] == "done" and u["source"] == "web"
    assert sy["role"] == "system" and sy["token_model"] == "m1" and sy["predecessor"] == "u"
    assert t["role"] == "tool" and t["content"] == '{"x": 1}' and t["function"] == "fn" and '"tool_call_id": "c1"' in t["extra"]


def test_record_filter_and_authority(tmp_path):
    legacy = {k: v for k, v in OWNER.items() if k != "authority_schema"}
    nodes = [
        ROOT,
        node("u1", 1, "user", "hi", pred="ROOT", caller="ROOT", **OWNER),
        node("r1", 2, "llm", "  ", pred="u1", **OWNER),  # blank text
        node("u2", 3, "user", [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}],
             pred="r1", caller="ROOT", **OWNER),
        node("u3", 4, "user", "browser", pred="u2", caller="ROOT", **{**OWNER, "authority_tier": "mcp_browser"}),
        node("u4", 5, "user", "stamped", pred="u3", caller="ROOT", authority_schema=1),
        node("u5", 6, "user", "legacy", pred="u4", caller="ROOT"),
        node("u6", 7, "user", "legacy with authority", pred="u5", caller="ROOT", **legacy),
        node("sys", 8, "llm", "system", pred="u6", extra_meta={"role": "system"}),
        node("rt", 9, "llm", "runtime", pred="sys", source="merge_turn"),
    ]
    s = load(tmp_path, nodes, {"head_id": "rt"})
    rs = records_for(s, get_branch(s))
    assert [r.id for r in rs.records] == ["u1", "u2", "u5", "u6"]
    assert rs.records[1].content == "a\nb"
    assert dict(rs.excluded) == {
        "r1": "empty_text", "u3": "authority_denied", "u4": "authority_missing", "sys": "filtered_role", "rt": "runtime_turn",
    }
    [p] = rs.problems
    assert p.code == "WRITER_PRECONDITION_FAILED" and p.path.endswith("0005-u-u4.json") and p.line == 1
    assert "u4" in p.message


def test_pending_stranded_batch(tmp_path):
    marked = {"memory_written_scriptorium": WS}
    nodes = [
        ROOT,
        *turn("a", 1, "ROOT", "x" * 40, "y" * 40, **marked),
        *turn("b", 3, "a_reply", "x" * 40, "y" * 40),
        node("c", 5, "user", "x" * 40, pred="b_reply", caller="ROOT", **OWNER, **marked),
        node("c_reply", 6, "llm", "y" * 40, pred="c", **OWNER),
        *turn("d", 7, "c_reply", "x" * 40, "y" * 40, memory_written_scriptorium="w-ffffffff"),
    ]
    s = load(tmp_path, nodes, {"head_id": "d_reply"})
    br = get_branch(s)
    rs = records_for(s, br)
    m = marked_ids(br, WS)
    pend = pending_records(rs.records, m)
    assert [r.id for r in pend] == ["c_reply", "d", "d_reply"]
    batch, tokens = first_batch(pend, 20, CharCounter())
    assert [r.id for r in batch] == ["c_reply", "d"] and tokens == 20
    batch, tokens = first_batch(pend, 1000, CharCounter())
    assert len(batch) == 3 and tokens == 30
    a = analyze_tip(s, "d_reply", WS, 20, CharCounter())
    assert a.to_json()["stranded_ids"] == ["b", "b_reply"]
    assert a.to_json()["foreign_marked_ids"] == ["d", "d_reply"]
    assert a.pending_tokens == 30 and a.is_head and a.listed


def test_status_count_dedups_and_skips_archived_branches(tmp_path):
    nodes = [ROOT, *turn("a", 1, "ROOT"), *turn("b", 3, "a_reply"), *turn("c", 5, "a_reply")]
    meta = {"head_id": "b_reply", "branches": {"c_reply": {"archived": True}}}
    make_session(tmp_path, "s", nodes, meta)
    make_session(tmp_path, "t", [ROOT, *turn("z", 1, "ROOT")], {"head_id": "z_reply", "archived": True})
    snap = load_sessions(tmp_path)
    count = status_pending_count(snap, WS)
    assert count.value == 6 and count.lenient == 6  # a, a_reply, b, b_reply; z, z_reply
    # An archived branch becomes eligible when it is the head.
    sa = analyze_session(snap.sessions["s"], WS, 100, CharCounter())
    assert sa.forced_order == ("b_reply",)
    assert sa.tips["c_reply"].archived and not sa.tips["c_reply"].is_head


def test_status_count_is_null_when_openprogram_would_raise(tmp_path):
    nodes = [ROOT, node("u", 1, "user", "hi", pred="ROOT", caller="ROOT", authority_schema=1)]
    make_session(tmp_path, "s", nodes, {"head_id": "u"})
    count = status_pending_count(load_sessions(tmp_path), WS)
    assert count.value is None and count.lenient == 0 and count.problems
