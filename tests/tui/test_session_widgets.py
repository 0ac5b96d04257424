"""The Sessions widgets in a tiny standalone app: the line-API graph (cursor, selection message
carrying the node, lineage highlight, collapse/expand, ASCII, the ``g`` jump), node detail
(citations jump to their record) and the branch verdict (reasons, dry run, ``w``); snapshots."""

from __future__ import annotations

import shutil

import pytest
from session_widgets_app import SessionWidgetsApp

from memory_tui.sessions import graph as G
from memory_tui.tui.model.load import load_model
from memory_tui.tui.widgets.branch_verdict import BranchVerdict
from memory_tui.tui.widgets.node_detail import CitationOption, NodeDetail
from memory_tui.tui.widgets.session_graph import SessionGraph

A1 = "local_a1b2c3d4e5"
F6 = "local_f6e5d4c3b2"


@pytest.fixture(scope="module")
def state(_fixture_master, tmp_path_factory):
    dest = tmp_path_factory.mktemp("widgets") / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    return dest


def lines(graph: SessionGraph) -> list[str]:
    return [graph.render_line(y).text.rstrip() for y in range(graph.size.height)]


@pytest.mark.anyio
async def test_cursor_moves_and_selection_carries_the_node(state):
    app = SessionWidgetsApp(state, A1, plan=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        graph = app.query_one(SessionGraph)
        lay = graph.layout_data
        assert graph.cursor_row == 0 and app.selected[-1].node is lay.nodes["ROOT"]
        await pilot.press("down", "down")
        await pilot.pause()
        msg = app.selected[-1]
        assert msg.node is lay.rows[2].node and msg.node.id == "a00000000001_reply"
        assert isinstance(msg.node, G.LayoutNode) and msg.row is lay.rows[2] and msg.session_id == A1
        assert app.query_one(NodeDetail).vm.node_id == "a00000000001_reply"
        await pilot.press("end")
        await pilot.pause()
        assert graph.selected_node.id == "summary_601f10339a"
        await pilot.press("up")
        await pilot.pause()
        assert graph.selected_node.id == "a00000000009_reply"


@pytest.mark.anyio
async def test_lineage_is_highlighted_with_a_glyph_not_only_colour(state):
    app = SessionWidgetsApp(state, A1, plan=False, select="a00000000004")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        graph = app.query_one(SessionGraph)
        lay = graph.layout_data
        assert graph.lineage_ids == G.lineage(lay, "a00000000004").ids
        assert "a00000000005_reply" in graph.lineage_ids and "a00000000003" not in graph.lineage_ids
        top = int(graph.scroll_y)
        drawn = {lay.rows[top + y].id: text for y, text in enumerate(lines(graph)) if top + y < len(lay.rows)}
        assert drawn["a00000000004"].startswith("▶")
        assert drawn["r3a9c0de"].startswith("┃") and drawn["a00000000005_reply"].startswith("┃")
        assert drawn["a00000000003"].startswith(" ") and drawn["a00000000007"].startswith(" ")


@pytest.mark.anyio
async def test_collapse_and_expand_by_enter(state):
    app = SessionWidgetsApp(state, A1, plan=False, tweak={"linear_min": 2, "linear_keep": 0})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        graph = app.query_one(SessionGraph)
        folded = graph.layout_data
        group = next(r for r in folded.rows if r.kind == "collapsed")
        graph.cursor_row = folded.rows.index(group)
        await pilot.press("enter")
        await pilot.pause()
        assert app.toggles == [(group.id, True)]
        expanded = graph.layout_data
        assert len(expanded.rows) > len(folded.rows)
        assert graph.selected_node.id == group.members[0]  # the cursor stays on the run
        await pilot.press("enter")  # on a member of an expanded run: fold it again
        await pilot.pause()
        assert app.toggles[-1] == (group.id, False) and len(graph.layout_data.rows) == len(folded.rows)


@pytest.mark.anyio
async def test_ascii_toggle_and_order(state):
    app = SessionWidgetsApp(state, F6, plan=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        graph = app.query_one(SessionGraph)
        assert not all(t.isascii() for t in lines(graph))
        await pilot.press("a")
        await pilot.pause()
        assert all(t.isascii() for t in lines(graph))
        await pilot.press("o")
        await pilot.pause()
        assert graph.reverse and graph.layout_data.rows[-1].id == "ROOT"
        assert graph.selected_node.id == "ROOT"  # the selection survives the re-layout


@pytest.mark.anyio
async def test_select_node_scrolls_to_it_the_g_jump(tmp_path, state):
    app = SessionWidgetsApp(state, A1, plan=False)
    async with app.run_test(size=(80, 8)) as pilot:
        await pilot.pause()
        graph = app.query_one(SessionGraph)
        assert graph.select_node("a00000000008_reply")
        await pilot.pause()
        row = graph.layout_data.row_of["a00000000008_reply"]
        assert graph.cursor_row == row and graph.scroll_y <= row < graph.scroll_y + graph.size.height
        assert app.selected[-1].node.id == "a00000000008_reply"
        assert not graph.select_node("no-such-node")


@pytest.mark.anyio
async def test_node_detail_citation_posts_a_record_jump(state):
    wm = load_model(state)
    app = SessionWidgetsApp(state, A1, plan=False, records=wm.records.values(), select="a00000000001")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        detail = app.query_one(NodeDetail)
        assert detail.vm.node_id == "a00000000001" and detail.vm.citations
        options = detail.query_one("#node-detail-citations")
        first = options.get_option_at_index(0)
        assert isinstance(first, CitationOption)
        options.focus()
        options.highlighted = 0
        await pilot.press("enter")
        await pilot.pause()
        assert app.jumps == [first.citation] and app.jumps[0].memory_id in wm.records


@pytest.mark.anyio
async def test_verdict_shows_reasons_evidence_and_dry_run(state):
    app = SessionWidgetsApp(state, F6, select="b00000000002")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        panel = app.query_one(BranchVerdict)
        vm = panel.vm
        assert vm.tip == "b00000000002_reply" and vm.verdict == "unwritten"
        text = panel.plain
        assert "archived_branch" in text and "branches.b00000000002_reply.archived = true" in text
        assert vm.plan is not None and vm.plan.turns == 2 and vm.plan.tokens == 20
        assert "2 turns, 20 tokens, 1 batch" in text
        from memory_tui.pipeline.preview import preview_write
        from memory_tui.pipeline.write import Context
        from session_widgets_app import COUNTER, LATER

        dialog = preview_write(Context(state, clock=lambda: LATER, counter=COUNTER), F6, branch=vm.tip, force=True)
        assert (vm.plan.turns, vm.plan.tokens, vm.plan.files) == (dialog.count, dialog.tokens, dialog.files)
        assert "sessions/local_f6e5d4c3b2/history/0003-u-b00000000002.json" in vm.plan.files
        panel.action_write()
        await pilot.pause()
        assert app.write_requests == [vm]


@pytest.mark.anyio
async def test_show_more_for_long_text(state):
    app = SessionWidgetsApp(state, A1, plan=False, select="a00000000007")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        detail = app.query_one(NodeDetail)
        body = detail.query_one("#node-detail-body")
        assert len(detail.vm.text) > 600
        assert "[m] show more" in str(body.render()) and detail.vm.text not in str(body.render())
        detail.action_toggle_more()
        await pilot.pause()
        assert detail.vm.text in str(body.render()) and "[m] show less" in str(body.render())


def test_graph_snapshot_wide(snap_compare, state):
    assert snap_compare(SessionWidgetsApp(state, A1, select="a00000000004"), terminal_size=(120, 40))


def test_graph_snapshot_ascii(snap_compare, state):
    assert snap_compare(SessionWidgetsApp(state, F6, ascii=True, select="b00000000002"), terminal_size=(120, 40))


def test_legend_names_every_glyph_the_graph_draws():
    from memory_tui.tui.widgets.session_graph import legend_text

    for ascii_ in (False, True):
        text = legend_text(ascii_).plain
        g = G.glyphs(ascii_)
        for key, words in G.LEGEND:
            assert f"{g.states[key]} {words}" in text
        for key, words in G.MARKER_LEGEND:
            assert f"{g.markers[key]} {words}" in text
        assert text.isascii() == ascii_


@pytest.mark.anyio
async def test_click_moves_the_cursor_and_reload_keeps_the_selection(state):
    from functools import partial

    from memory_tui.tui.model.sessions import SessionsModel
    from session_widgets_app import COUNTER, LATER

    app = SessionWidgetsApp(state, F6, plan=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        graph = app.query_one(SessionGraph)
        await pilot.click(SessionGraph, offset=(4, 3))
        await pilot.pause()
        assert graph.cursor_row == 3 and app.selected[-1].node.id == graph.layout_data.rows[3].node.id
        chosen = graph.selected_node.id
        fresh = SessionsModel.load(state, now=LATER, counter=COUNTER)  # what a WorkspaceChanged reload builds
        graph.show(F6, partial(fresh.layout, F6))
        await pilot.pause()
        assert graph.selected_node.id == chosen and graph.layout_data is fresh.layout(F6)
        graph.show(A1, partial(fresh.layout, A1))  # another session starts at its top
        await pilot.pause()
        assert graph.cursor_row == 0 and graph.selected_node.id == "ROOT"
