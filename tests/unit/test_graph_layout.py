"""Golden drawings of the Sessions graph layout (sessions.graph), UTF-8 and ASCII.

Every construct from the session spec §3 is a small synthetic session on disk (graph_cases.py),
read by the real store, explained by the real reasons engine, laid out and drawn.
"""

from __future__ import annotations

import pytest

from graph_cases import CASES, NOW, WS
from memory_tui.core.format.tokens import CharCounter
from memory_tui.sessions import graph as G
from memory_tui.sessions.reasons import explain_session, load_context
from memory_tui.sessions.store import load_sessions
from test_sessions_helpers import make_session


def explained(tmp_path, name):
    rt = tmp_path / "memory" / ".scriptorium"
    rt.mkdir(parents=True)
    (rt / "workspace-id").write_text(WS + "\n")
    nodes, meta = CASES[name]()
    for n in nodes:
        n["created_at"] = NOW - 7200
    make_session(tmp_path, "s", nodes, {"updated_at": NOW - 7200, **meta})
    return explain_session(load_sessions(tmp_path).sessions["s"], load_context(tmp_path, now=NOW, env={}), CharCounter())


GOLDEN = [
    ('retry_and_edit', dict(), {}, False, """\
◎ ROOT  ROOT
● a  Plan a trip
●─┬─╮ a_reply  Sure
○ │ │ b  Kyoto in May?
○ │ │ ◇ b_reply  Yes
○─╯ │ b2  Kyoto in May?
○ ╭─╯ ◇ b2_reply  Again
○─╯ b3  Kyoto in June?
○ ◆ b3_reply  Edited
"""),
    ('retry_and_edit', dict(), {}, True, """\
# ROOT  ROOT
* a  Plan a trip
*-+-, a_reply  Sure
o | | b  Kyoto in May?
o | | T b_reply  Yes
o-` | b2  Kyoto in May?
o ,-` T b2_reply  Again
o-` b3  Kyoto in June?
o H b3_reply  Edited
"""),
    ('rewind', dict(), {}, False, """\
◎ ROOT  ROOT
● a  Start
●─╮ a_reply  ok
↺ │ b  Book a ryokan
↺ │ ◇ b_reply  Booked
○─╯ c  Only tea instead
○ ◆ c_reply  Tea
"""),
    ('rewind', dict(), {}, True, """\
# ROOT  ROOT
* a  Start
*-, a_reply  ok
~ | b  Book a ryokan
~ | T b_reply  Booked
o-` c  Only tea instead
o H c_reply  Tea
"""),
    ('same_session_spawn', dict(), {}, False, """\
◎ ROOT  ROOT
● a  Compare tools
●─╮ a_reply  Spawning
│ ◌ ↳ s  Investigate crates
│ ◌ ◇ s_reply  clap
○ b  Which one?
○ ◆ b_reply  clap
"""),
    ('same_session_spawn', dict(), {}, True, """\
# ROOT  ROOT
* a  Compare tools
*-, a_reply  Spawning
| ! S s  Investigate crates
| ! T s_reply  clap
o b  Which one?
o H b_reply  clap
"""),
    ('cross_session_spawn', dict(), {}, False, """\
◎ ROOT  ROOT
○ ↳ c1  Summarize the decision  (spawned from zz_reply in another session)
○ c1_reply  Python now
○ c2  Thanks
○ ◆ c2_reply  Welcome
"""),
    ('cross_session_spawn', dict(), {}, True, """\
# ROOT  ROOT
o S c1  Summarize the decision  (spawned from zz_reply in another session)
o c1_reply  Python now
o c2  Thanks
o H c2_reply  Welcome
"""),
    ('merge_with_gap', dict(), {}, False, """\
◎ ROOT  ROOT
● a  Compare
●─╮ a_reply  ok
● │ b  Small team?
● │ ◇ b_reply  Python
│ ◌ c  Small team? (retry)
│ ◌ c_reply  Rust
│ │ ┆ seq 7-8 missing (deleted nodes)
·─╯ ◇⊕ m  Consolidate the branches
· ◆ m_reply  Merged
"""),
    ('merge_with_gap', dict(), {}, True, """\
# ROOT  ROOT
* a  Compare
*-, a_reply  ok
* | b  Small team?
* | T b_reply  Python
| ! c  Small team? (retry)
| ! c_reply  Rust
| | : seq 7-8 missing (deleted nodes)
.-` TM m  Consolidate the branches
. H m_reply  Merged
"""),
    ('compaction_summary', dict(), {}, False, """\
◎─╮ ROOT  ROOT
● │ a  Hi
● │ a_reply  Hello
● │ b  More
● │ ◆ b_reply  Sure
≡─╯ summary_0a1b2c3d4e  [Previous conversation summary]  (covers 2 turns)
"""),
    ('compaction_summary', dict(), {}, True, """\
#-, ROOT  ROOT
* | a  Hi
* | a_reply  Hello
* | b  More
* | H b_reply  Sure
=-` summary_0a1b2c3d4e  [Previous conversation summary]  (covers 2 turns)
"""),
    ('attach_pointer', dict(), {}, False, """\
◎ ROOT  ROOT
● a  Use the other branch
●─╮ a_reply  ok
│ · ◇ p1  (attach pointer to x_reply)
○ b  Continue
○ ◆ b_reply  Done
"""),
    ('attach_pointer', dict(), {}, True, """\
# ROOT  ROOT
* a  Use the other branch
*-, a_reply  ok
| . T p1  (attach pointer to x_reply)
o b  Continue
o H b_reply  Done
"""),
    ('tool_run', dict(), {}, False, """\
◎ ROOT  ROOT
● a  List files
●─╮ a_reply  Two files
│ ⋮ [+] 3 tool rows (bash, read)
○ b  Thanks
○ ◆ b_reply  Welcome
"""),
    ('tool_run', dict(), {}, True, """\
# ROOT  ROOT
* a  List files
*-, a_reply  Two files
| : [+] 3 tool rows (bash, read)
o b  Thanks
o H b_reply  Welcome
"""),
    ('long_linear', dict(linear_min=6), {}, False, """\
◎ ROOT  ROOT
● t00  question 0
● t00_reply  answer 0
⋮ [+] 15 turns (10 written, 5 pending)
○ t08_reply  answer 8
○ t09  question 9
○ ◆ t09_reply  answer 9
"""),
    ('long_linear', dict(linear_min=6), {}, True, """\
# ROOT  ROOT
* t00  question 0
* t00_reply  answer 0
: [+] 15 turns (10 written, 5 pending)
o t08_reply  answer 8
o t09  question 9
o H t09_reply  answer 9
"""),
    ('marks', dict(), {}, False, """\
◎ ROOT  ROOT
● a  One
● a_reply  1
⊘ b  Two
● b_reply  2
◐ c  Three
◐ ◆ c_reply  3
"""),
    ('marks', dict(), {}, True, """\
# ROOT  ROOT
* a  One
* a_reply  1
x b  Two
* b_reply  2
% c  Three
% H c_reply  3
"""),
    ('many_forks', dict(), {}, False, """\
◎ ROOT  ROOT
● a  Root question
●─┬─┬─┬─╮ a_reply  ok
○ │ │ │ │ r0  retry 0
○ │ │ │ │ ◇ r0_reply  reply 0
○─╯ │ │ │ r1  retry 1
○ ╭─╯ │ │ ◇ r1_reply  reply 1
○─╯ ╭─╯ │ r2  retry 2
○ ╭─╯ ╭─╯ ◇ r2_reply  reply 2
○─╯ ╭─╯ r3  retry 3
○ ╭─╯ ◇ r3_reply  reply 3
○─╯ r4  retry 4
○ ◆ r4_reply  reply 4
"""),
    ('many_forks', dict(), {}, True, """\
# ROOT  ROOT
* a  Root question
*-+-+-+-, a_reply  ok
o | | | | r0  retry 0
o | | | | T r0_reply  reply 0
o-` | | | r1  retry 1
o ,-` | | T r1_reply  reply 1
o-` ,-` | r2  retry 2
o ,-` ,-` T r2_reply  reply 2
o-` ,-` r3  retry 3
o ,-` T r3_reply  reply 3
o-` r4  retry 4
o H r4_reply  reply 4
"""),
    ('retry_and_edit', dict(reverse=True), {}, False, """\
○ ◆ b3_reply  Edited
○─╮ b3  Kyoto in June?
○ ╰─╮ ◇ b2_reply  Again
○─╮ │ b2  Kyoto in May?
○ │ │ ◇ b_reply  Yes
○ │ │ b  Kyoto in May?
●─┴─╯ a_reply  Sure
● a  Plan a trip
◎ ROOT  ROOT
"""),
    ('retry_and_edit', dict(reverse=True), {}, True, """\
o H b3_reply  Edited
o-, b3  Kyoto in June?
o `-, T b2_reply  Again
o-, | b2  Kyoto in May?
o | | T b_reply  Yes
o | | b  Kyoto in May?
*-+-` a_reply  Sure
* a  Plan a trip
# ROOT  ROOT
"""),
    ('merge_with_gap', dict(reverse=True), {}, False, """\
· ◆ m_reply  Merged
·─╮ ◇⊕ m  Consolidate the branches
│ │ ┆ seq 7-8 missing (deleted nodes)
│ ◌ c_reply  Rust
│ ◌ c  Small team? (retry)
● │ ◇ b_reply  Python
● │ b  Small team?
●─╯ a_reply  ok
● a  Compare
◎ ROOT  ROOT
"""),
    ('merge_with_gap', dict(reverse=True), {}, True, """\
. H m_reply  Merged
.-, TM m  Consolidate the branches
| | : seq 7-8 missing (deleted nodes)
| ! c_reply  Rust
| ! c  Small team? (retry)
* | T b_reply  Python
* | b  Small team?
*-` a_reply  ok
* a  Compare
# ROOT  ROOT
"""),
    ('tool_run', dict(expanded=frozenset({'tools:a_reply'})), {}, False, """\
◎ ROOT  ROOT
● a  List files
●─┬─┬─╮ a_reply  Two files
│ · │ │ a_reply_t_1  tool bash
│ ·─╯ │ a_reply_t_2  tool read
│ ·───╯ a_reply_t_3  tool bash
○ b  Thanks
○ ◆ b_reply  Welcome
"""),
    ('tool_run', dict(expanded=frozenset({'tools:a_reply'})), {}, True, """\
# ROOT  ROOT
* a  List files
*-+-+-, a_reply  Two files
| . | | a_reply_t_1  tool bash
| .-` | a_reply_t_2  tool read
| .---` a_reply_t_3  tool bash
o b  Thanks
o H b_reply  Welcome
"""),
    ('long_linear', dict(linear_min=6, expanded=frozenset({'run:t01'})), {}, False, """\
◎ ROOT  ROOT
● t00  question 0
● t00_reply  answer 0
● t01  question 1
● t01_reply  answer 1
● t02  question 2
● t02_reply  answer 2
● t03  question 3
● t03_reply  answer 3
● t04  question 4
● t04_reply  answer 4
● t05  question 5
● t05_reply  answer 5
○ t06  question 6
○ t06_reply  answer 6
○ t07  question 7
○ t07_reply  answer 7
○ t08  question 8
○ t08_reply  answer 8
○ t09  question 9
○ ◆ t09_reply  answer 9
"""),
    ('long_linear', dict(linear_min=6, expanded=frozenset({'run:t01'})), {}, True, """\
# ROOT  ROOT
* t00  question 0
* t00_reply  answer 0
* t01  question 1
* t01_reply  answer 1
* t02  question 2
* t02_reply  answer 2
* t03  question 3
* t03_reply  answer 3
* t04  question 4
* t04_reply  answer 4
* t05  question 5
* t05_reply  answer 5
o t06  question 6
o t06_reply  answer 6
o t07  question 7
o t07_reply  answer 7
o t08  question 8
o t08_reply  answer 8
o t09  question 9
o H t09_reply  answer 9
"""),
    ('many_forks', dict(), {'max_lanes': 3}, False, """\
◎ ROOT  ROOT
● a  Root question
●─┬─⋯ a_reply  ok
○ │ ⋯ r0  retry 0
○ │ ⋯ ◇ r0_reply  reply 0
○─╯ ⋯ r1  retry 1
○ ╭─⋯ ◇ r1_reply  reply 1
○─╯ ⋯ r2  retry 2
○ ╭─⋯ ◇ r2_reply  reply 2
○─╯ ⋯ r3  retry 3
○ ╭─╯ ◇ r3_reply  reply 3
○─╯ r4  retry 4
○ ◆ r4_reply  reply 4
"""),
    ('many_forks', dict(), {'max_lanes': 3}, True, """\
# ROOT  ROOT
* a  Root question
*-+-> a_reply  ok
o | > r0  retry 0
o | > T r0_reply  reply 0
o-` > r1  retry 1
o ,-> T r1_reply  reply 1
o-` > r2  retry 2
o ,-> T r2_reply  reply 2
o-` > r3  retry 3
o ,-` T r3_reply  reply 3
o-` r4  retry 4
o H r4_reply  reply 4
"""),
]


def _golden_id(case):
    name, opts, draw_opts, ascii_, _ = case
    extra = "-".join(f"{k}" for k in (*opts, *draw_opts))
    return f"{name}{'-' + extra if extra else ''}-{'ascii' if ascii_ else 'utf8'}"


@pytest.mark.parametrize("case", GOLDEN, ids=[_golden_id(c) for c in GOLDEN])
def test_golden(tmp_path, case):
    name, opts, draw_opts, ascii_, expected = case
    lay = G.layout_session(explained(tmp_path, name), G.LayoutOptions(**opts))
    assert "\n".join(G.draw(lay, ascii=ascii_, **draw_opts)) + "\n" == expected


def test_every_construct_has_both_golden_forms():
    for name in CASES:
        # with the default options (long_linear needs linear_min to fold its run at all)
        forms = {c[3] for c in GOLDEN if c[0] == name and not c[2] and (not c[1] or name == "long_linear")}
        assert forms == {False, True}, name


# --------------------------------------------------------------------------- pure layout rules


def N(nid, *parents, seq=0, **kw):
    return G.LayoutNode(nid, tuple(parents), seq, **kw)


def test_new_branch_takes_the_leftmost_free_lane():
    nodes = [N("r"), N("a", "r", seq=1), N("a1", "a", seq=2), N("b", "r", seq=3), N("c", "r", seq=4),
             N("b1", "b", seq=5), N("x", "b1", seq=6), N("y", "b1", seq=7)]
    lay = G.layout(nodes)
    # a1 ends lane 0; b and then c slide left into the freed lanes; b1's second child y takes
    # lane 1, the leftmost free one, not a new lane on the right.
    assert G.draw(lay) == ["○─┬─╮ r", "○ │ │ a", "○ │ │ a1", "○─╯ │ b", "│ ○─╯ c", "○─╮ b1", "○ │ x", "○─╯ y"]
    assert lay.rows[lay.row_of["b1"]].below == (("b1", "x"), ("b1", "y"))
    assert lay.lanes == 3


def test_a_fork_avoids_the_lane_its_incoming_line_used():
    nodes = [N("r"), N("a", "r", seq=1), N("b", "r", seq=2), N("c", "r", seq=3), N("a1", "a", seq=4),
             N("b1", "b", seq=5), N("x", "b1", seq=6), N("y", "b1", seq=7)]
    assert G.draw(G.layout(nodes)) == [
        "○─┬─╮ r", "○ │ │ a", "│ ○ │ b", "│ │ ○ c", "○ │ a1", "○─┴─╮ b1", "○ ╭─╯ x", "○─╯ y"]


def test_lanes_compact_when_a_branch_ends():
    nodes = [N("r", seq=0), N("a", "r", seq=1), N("b", "r", seq=2), N("c", "r", seq=3), N("c1", "c", seq=4)]
    lay = G.layout(nodes)
    by = {r.id: r for r in lay.rows}
    assert by["c"].lane == 0  # a and b ended: c's line slid from lane 2 to lane 0
    assert by["c1"].width == 1


def test_fold_marker_keeps_a_folded_node_visible():
    nodes = [N("r", seq=0)] + [N(f"k{i}", "r", seq=1 + i) for i in range(6)]
    nodes += [N(f"late{i}", f"k{i}", seq=7 + i) for i in range(6)]  # keeps every lane open past k5
    lay = G.layout(nodes)
    row = lay.rows[lay.row_of["k5"]]
    assert row.lane >= 2
    text = G.draw_graph(row, G.UTF8, max_lanes=2)
    assert len(text) <= 4 and text.endswith("○") and "⋯" in text
    ascii_text = G.draw_graph(row, G.ASCII, max_lanes=2)
    assert ascii_text.endswith("o") and ">" in ascii_text


def test_cycle_is_broken_not_fatal():
    lay = G.layout([N("a", "b", seq=1), N("b", "a", seq=2)])
    assert sorted(lay.row_of) == ["a", "b"] and lay.dropped_edges == (("b", "a"),)


def test_unknown_parents_and_duplicates_are_ignored():
    lay = G.layout([N("a", "ghost", seq=1), N("a", seq=5), N("b", "a", seq=2)])
    assert [r.id for r in lay.rows] == ["a", "b"] and lay.parents["a"] == ()


def test_lineage_reaches_root_and_every_tip(tmp_path):
    se = explained(tmp_path, "retry_and_edit")
    lay = G.layout_session(se)
    lin = G.lineage(lay, "b2")
    assert lin.ancestors == {"ROOT", "a", "a_reply"}
    assert lin.descendants == {"b2_reply"}
    assert "b" not in lin.ids and "b3_reply" not in lin.ids
    assert G.lineage(lay, "a_reply").descendants == {"b", "b_reply", "b2", "b2_reply", "b3", "b3_reply"}


def test_lineage_follows_merge_edges(tmp_path):
    lay = G.layout_session(explained(tmp_path, "merge_with_gap"))
    assert {"c", "c_reply", "b", "b_reply"} <= G.lineage(lay, "m_reply").ancestors
    assert "m" in G.lineage(lay, "c").descendants


def test_layout_is_cached_per_fingerprint(tmp_path):
    se = explained(tmp_path, "rewind")
    first = G.layout_session(se)
    assert G.layout_session(se) is first
    assert G.layout_session(se, G.LayoutOptions(reverse=True)) is not first
    nodes = list(G.nodes_from_session(se))
    nodes[-1] = G.LayoutNode(**{**nodes[-1].__dict__, "state": G.WRITTEN_S})
    assert G.cached_layout("s", nodes) is not first


def test_collapsible_groups_are_listed_even_when_expanded(tmp_path):
    se = explained(tmp_path, "tool_run")
    folded = G.layout_session(se)
    expanded = G.layout_session(se, G.LayoutOptions(expanded=frozenset({"tools:a_reply"})))
    assert folded.collapsible == expanded.collapsible == {"tools:a_reply": ("a_reply_t_1", "a_reply_t_2", "a_reply_t_3")}
    assert folded.row_of["a_reply_t_2"] == folded.row_of["a_reply_t_3"]
    assert expanded.row_of["a_reply_t_2"] != expanded.row_of["a_reply_t_3"]
    assert G.layout_session(se, G.LayoutOptions(collapse=False)).row_of == expanded.row_of


def test_one_glyph_per_meaning_with_a_legend():
    for g in (G.UTF8, G.ASCII):
        used = list(g.states.values()) + list(g.markers.values()) + [g.fold]
        assert len(used) == len(set(used)), used
        assert not set(used) & set(g.box.values()) - {" "}
    assert set(G.STATES) == {k for k, _ in G.LEGEND} and set(G.MARKERS) == {k for k, _ in G.MARKER_LEGEND}
    for ascii_ in (False, True):
        lines = G.legend_lines(ascii_)
        assert len(lines) == len(G.LEGEND) + len(G.MARKER_LEGEND)
        assert all(line.isascii() for line in lines) == ascii_


def test_ascii_drawing_is_pure_ascii(tmp_path):
    for name in CASES:
        sub = tmp_path / name
        sub.mkdir()
        lay = G.layout_session(explained(sub, name))
        assert all(line.isascii() for line in G.draw(lay, ascii=True)), name


def test_width_cut_marks_the_cut():
    lay = G.layout([N("a", text="x" * 50)])
    assert G.draw(lay, width=20) == ["○ a  " + "x" * 14 + "…"]
    assert G.draw(lay, width=20, ascii=True) == ["o a  " + "x" * 12 + "..."]


def test_first_line_is_sanitised_and_found_past_leading_blank_space():
    assert G.first_line("\x1b[31m\n  red alert\x07 now\nsecond") == "red alert now"
    assert G.first_line(" \n" * 3000 + "late text") == "late text"
    assert G.first_line([{"type": "text", "text": "block text"}]) == "block text"
    assert G.first_line(None) == "" and G.first_line("x" * 500, 10) == "x" * 10
