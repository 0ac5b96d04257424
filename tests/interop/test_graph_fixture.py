"""The Sessions graph against OpenProgram's own answers for the fixture state dir.

Every node's glyph follows from ``openprogram-state.expected.json`` (marked, pending, stranded,
foreign sets per tip); every tip's pending set in the verdict panel is OpenProgram's; and every
construct the fixture README lists shows the reason the spec's table gives it.
"""

from __future__ import annotations

import pytest

from memory_tui.core.format.tokens import O200kCounter
from memory_tui.sessions import graph as G
from memory_tui.tui.model.sessions import SessionsModel

LATER = 1796014860.0 + 86400  # a day after the fixture was made: every session is idle


@pytest.fixture(scope="module")
def model(fixture_state_ro):
    return SessionsModel.load(fixture_state_ro, now=LATER, counter=O200kCounter())


def expected_state(sid, nid, exp, session):
    tips = exp["sessions"][sid]["tips"].values()
    node = session.nodes[nid]
    if node.is_root:
        return G.ROOT_S
    if any(nid in t["marked_record_ids"] for t in tips):
        return G.WRITTEN_S
    if any(nid in t["stranded_ids"] for t in tips):
        return G.STRANDED_S
    if any(nid in t["foreign_marked_ids"] for t in tips):
        return G.FOREIGN_S
    if any(nid in t["pending_ids"] and (t["is_head"] or not t["archived"]) for t in tips):
        return G.PENDING_S
    if any(nid in t["pending_ids"] for t in tips):
        return G.HELD_S  # pending only on archived non-head tips: no pass writes it
    if any(nid in t["branch_ids"] for t in tips):
        return G.INELIGIBLE_S  # on a branch, but memory's record filter drops it
    # On no tip's branch: what the files say it is.
    if node.rewound:
        return G.REWOUND_S
    if node.covers_ids is not None:
        return G.SUMMARY_S
    if node.role == "code" or node.is_attach:
        return G.INELIGIBLE_S
    return G.HELD_S  # a real turn under a hidden (merged) tip


@pytest.mark.parametrize("ascii_", [False, True])
def test_every_node_glyph_agrees_with_openprogram(model, expected, ascii_):
    g = G.glyphs(ascii_)
    checked = 0
    for sid in expected["sessions"]:
        session = model.session(sid).session
        lay = model.layout(sid, G.LayoutOptions(collapse=False))
        # every node, plus one node per other session this one is linked to (a cross-session spawn)
        assert {n for n in lay.row_of if not n.startswith("@")} == set(session.nodes)
        assert all(lay.nodes[n].state == G.LINK_S for n in lay.row_of if n.startswith("@"))
        for nid in session.nodes:
            row = lay.rows[lay.row_of[nid]]
            want = expected_state(sid, nid, expected, session)
            assert row.node.state == want, (sid, nid)
            assert G.draw_graph(row, g)[2 * row.lane] == g.states[want], (sid, nid)
            checked += 1
    assert checked == sum(len(model.session(s).session.nodes) for s in expected["sessions"])


def test_tip_markers_and_pending_sets_agree(model, expected):
    for sid, exp in expected["sessions"].items():
        lay = model.layout(sid)
        for tip, t in exp["tips"].items():
            markers = lay.nodes[tip].markers
            assert (G.HEAD_M in markers) == t["is_head"], (sid, tip)
            assert (G.TIP_M in markers) == (t["listed"] and not t["is_head"]), (sid, tip)
            vm = model.branch_verdict(sid, tip)
            assert list(vm.pending_ids) == t["pending_ids"], (sid, tip)
            assert vm.pending_tokens == t["pending_tokens"]
            assert vm.written == len(t["marked_record_ids"]) and vm.records == len(t["record_ids"])
            assert list(vm.stranded_ids) == t["stranded_ids"] and list(vm.foreign_ids) == t["foreign_marked_ids"]


def test_archived_tip_summary_tells_the_same_story_as_its_turns(model):
    vm = model.branch_verdict("local_f6e5d4c3b2", "b00000000002_reply")
    assert vm.held_ids == vm.pending_ids == ("b00000000002", "b00000000002_reply")
    assert vm.verdict == "unwritten"
    assert "0 pending" in vm.summary and "never written" in vm.summary
    for nid in vm.held_ids:
        assert model.node_detail("local_f6e5d4c3b2", nid).verdict == "never"


# (session, node or tip, where, code): the spec §5 reason each fixture construct must show.
COVERED = [
    ("local_a1b2c3d4e5", "a00000000002_reply_t_toolu_7887319e4ca65691", "node", "filtered_role"),
    ("local_a1b2c3d4e5", "a00000000005", "node", "rewound"),
    ("local_a1b2c3d4e5", "a00000000007_reply", "node", "stranded_behind_mark"),
    ("local_a1b2c3d4e5", "a00000000008_reply", "tip", "stranded_behind_mark"),
    ("local_a1b2c3d4e5", "a00000000009", "node", "runtime_turn"),
    ("local_a1b2c3d4e5", "a00000000003_reply", "tip", "below_threshold_non_head"),
    ("local_a1b2c3d4e5", "a00000000005_reply", "tip", "below_threshold_non_head"),
    ("local_a1b2c3d4e5", "summary_601f10339a", "node", "compaction_summary"),
    ("local_f6e5d4c3b2", "b00000000002_reply", "tip", "archived_branch"),
    ("local_f6e5d4c3b2", "b00000000002", "node", "archived_branch"),
    ("local_f6e5d4c3b2", "b00000000004_reply", "node", "not_on_live_branch"),
    ("local_f6e5d4c3b2", "4a95942698cd", "node", "runtime_turn"),
    ("local_0c0c0c0c0c", "c00000000003_reply", "node", "written"),  # the [error] reply is written
    ("local_0c0c0c0c0c", "c00000000004_reply", "tip", "awaiting_idle_pass"),
    ("local_9f1e2d3c4b", "f00000000001", "node", "marked_other_workspace"),
]


@pytest.mark.parametrize("sid,target,where,code", COVERED, ids=[f"{c[3]}-{c[1]}" for c in COVERED])
def test_every_covered_reason_is_shown_with_evidence(model, sid, target, where, code):
    vm = model.branch_verdict(sid, target) if where == "tip" else model.node_detail(sid, target)
    reason = next((r for r in vm.reasons if r.code == code), None)
    assert reason is not None, [r.code for r in vm.reasons]
    assert reason.evidence and all(e.file for e in reason.evidence)


def test_structures_from_the_readme_are_drawn(model):
    f6 = model.layout("local_f6e5d4c3b2")
    assert any(r.kind == "gap" and r.text.startswith("seq 9-10") for r in f6.rows)
    merge = f6.nodes["4a95942698cd"]
    assert G.MERGE_M in merge.markers and "b00000000004_reply" in merge.parents
    assert G.SPAWN_M in f6.nodes["b00000000002"].markers
    cross = model.node_detail("local_0c0c0c0c0c", "c00000000001")
    assert cross.spawn_branch_root and cross.spawn_caller == "b00000000001_reply"
    # the other half is named: its session and node
    assert "b00000000001_reply in session local_f6e5d4c3b2" in model.layout("local_0c0c0c0c0c").nodes["c00000000001"].note
    a1 = model.layout("local_a1b2c3d4e5")
    summary_row = a1.rows[a1.row_of["summary_601f10339a"]]
    assert summary_row.node.state == G.SUMMARY_S and a1.parents["summary_601f10339a"] == ("ROOT",)
    retry = model.node_detail("local_a1b2c3d4e5", "r3a9c0de")
    assert retry.forked_from == "a00000000003"
    foreign = model.node_detail("local_9f1e2d3c4b", "f00000000001")
    assert foreign.mark_by == "another workspace" and foreign.mark != model.workspace_id


def test_citations_reach_the_node_and_back(fixture_state_ro):
    from memory_tui.tui.model.load import load_model

    wm = load_model(fixture_state_ro)
    model = SessionsModel.load(fixture_state_ro, now=LATER, records=wm.records.values())
    detail = model.node_detail("local_a1b2c3d4e5", "a00000000001")
    ids = {c.memory_id for c in detail.citations}
    assert ids and all(c.source_id == "openprogram/local_a1b2c3d4e5/a00000000001" for c in detail.citations)
    assert all(mid in wm.records for mid in ids)
    assert model.locate("openprogram/local_a1b2c3d4e5/a00000000001") == ("local_a1b2c3d4e5", "a00000000001")
    assert model.locate("openprogram/local_a1b2c3d4e5/nope") is None
    assert model.locate("elsewhere/x/y") is None


def test_off_branch_turns_name_the_merged_head_above_them(model):
    for nid in ("b00000000004", "b00000000004_reply"):
        reason = model.node_detail("local_f6e5d4c3b2", nid).reasons[0]
        assert reason.code == "not_on_live_branch"
        assert reason.message.endswith("it lies only under merged head b00000000004_reply")
        assert reason.evidence[0].field == "merged_heads"
