"""Derived views (§8) from small hand-built units: timeline, recent, relations, core."""

from __future__ import annotations

import json

from memory_tui.core.format.tokens import CharCounter, O200kCounter
from memory_tui.core.format.topics import Annotation, Evidence, SourceLink, Unit, parse_tree
from memory_tui.core.format.views import (
    build_views,
    core_injection,
    core_root_text,
    promote_legacy_core,
    rebase_target,
    relpath,
    render_core,
    render_recent,
    render_relations,
    render_timeline,
    source_location,
    split_core_chunks,
    timeline_path,
)

SRC = "../../sources/openprogram/_v2/sess-7f2a.md"


def ev(eid, when, links, topic="people/dave.md"):
    return Evidence(
        id=eid,
        raw_when=when or "undated",
        when=when,
        links=tuple(SourceLink(label, target, sid) for label, target, sid in links),
        topic_path=topic,
        line=1,
        legacy=False,
    )


def unit(mid, content, anns, *, topic="people/dave.md", headings=("Dave",), rel=(), legacy=False):
    refs = []
    for a in anns:
        for e in a.evidence:
            for link in e.links:
                if link.source_id and link.source_id not in refs:
                    refs.append(link.source_id)
    whens = [e.when for a in anns for e in a.evidence if e.when]
    return Unit(
        memory_id=mid, topic_path=topic, headings=tuple(headings), content=content, body=content,
        annotations=tuple(anns), source_refs=tuple(refs), relation_targets=tuple(rel),
        when=whens[0] if whens else None, line=1, end_line=1, aliases=(mid,), legacy=legacy,
    )


TEA = ev("e-5bf6e713a0", "2026-08-09", [("tea preference", f"{SRC}#source-9047c1917b2f0777", "openprogram/sess-7f2a/msg_2f9b")])
DAILY = ev("e-48bac47c87", "2026-08", [("daily tea", f"{SRC}#source-3980e4aaa25977a6", "openprogram/sess-7f2a/msg_2fa0")])
U1 = unit("97de5549", "Dave prefers tea over coffee.", [Annotation("Dave prefers tea over coffee.", (TEA,))], headings=("Dave", "Preferences"))
U2 = unit(
    "ae99a3a8",
    "Dave links to [his tea](dave.md#^97de5549) and drinks it daily.",
    [Annotation("Dave links to [his tea](dave.md#^97de5549) and drinks it daily.", (DAILY,))],
    headings=("Dave", "Preferences"),
    rel=("97de5549",),
)


# ---------------------------------------------------------------- helpers


def test_relpath_and_rebase():
    assert relpath("topics/people/dave.md", "timeline/2026/08") == "../../../topics/people/dave.md"
    assert relpath("core.md", "") == "core.md"
    assert rebase_target("../sources/a.md#x", "topics", "") == "sources/a.md#x"
    assert rebase_target("sources/a.md#x", "", "topics") == "../sources/a.md#x"
    for untouched in ("https://x.org/a", "http://x", "mailto:a@b", "/abs/p.md", "#^abc", "D18:11"):
        assert rebase_target(untouched, "topics", "") == untouched


def test_timeline_path():
    assert timeline_path("2026-08-09") == "timeline/2026/08/09.md"
    assert timeline_path("2026-08") == "timeline/2026/08.md"
    assert timeline_path("2026") == "timeline/2026.md"


def test_source_location():
    assert source_location("D18:11") == "sources/D18.md#d18-11"
    assert source_location("openprogram/sess-7f2a/msg_2f9b") == "sources/openprogram/_v2/sess-7f2a.md#source-9047c1917b2f0777"
    assert source_location("encoded id/a b/c") .startswith("sources/encoded%20id/_v2/a%20b.md#source-")


# ---------------------------------------------------------------- timeline


def test_timeline_spec_example():
    files = render_timeline([U1, U2])
    assert files["timeline/2026/08/09.md"] == (
        "# 2026-08-09\n\nDave prefers tea over coffee. [Topic](../../../topics/people/dave.md#^97de5549) "
        "[tea preference](../../../sources/openprogram/_v2/sess-7f2a.md#source-9047c1917b2f0777)\n"
    )
    # links inside the quote are not re-relativised
    assert files["timeline/2026/08.md"] == (
        "# 2026-08\n\nDave links to [his tea](dave.md#^97de5549) and drinks it daily. "
        "[Topic](../../topics/people/dave.md#^ae99a3a8) "
        "[daily tea](../../sources/openprogram/_v2/sess-7f2a.md#source-3980e4aaa25977a6)\n"
    )
    assert list(files) == sorted(files)


def test_timeline_rows_sorted_by_first_ref_then_id_and_undated_skipped():
    a = ev("e-a", "2026", [("x", f"{SRC}#source-1", "p/t/b")])
    b = ev("e-b", "2026", [("y", f"{SRC}#source-2", "p/t/a")])
    undated = ev("e-u", None, [("z", f"{SRC}#source-3", "p/t/c")])
    u_b = unit("bbbb", "B.", [Annotation("B.", (a,))])
    u_a = unit("aaaa", "A.", [Annotation("A.", (a,))])
    u_c = unit("cccc", "C.", [Annotation("C.", (b,)), Annotation("C2.", (undated,))])
    text = render_timeline([u_b, u_a, u_c])["timeline/2026.md"]
    rows = text.split("\n\n")[1:]
    assert [r.split(" ")[0] for r in rows] == ["C.", "A.", "B."]
    assert "C2." not in text
    assert render_timeline([unit("dddd", "D.", [Annotation("D.", (undated,))])]) == {}


def test_timeline_one_row_per_dated_evidence_and_legacy_anchor():
    e1 = ev("e-1", "2026-01", [("one", f"{SRC}#source-1", "p/t/1")])
    e2 = ev("e-2", "2026-02", [("two", f"{SRC}#source-2", "p/t/2")])
    u = unit("abcd1234", "First. Second.", [Annotation("First.", (e1,)), Annotation("Second.", (e2,))])
    files = render_timeline([u])
    assert set(files) == {"timeline/2026/01.md", "timeline/2026/02.md"}
    assert files["timeline/2026/01.md"].startswith("# 2026-01\n\nFirst. [Topic]")
    assert files["timeline/2026/02.md"].startswith("# 2026-02\n\nSecond. [Topic]")
    mem = unit("mem_old", "Old fact.", [Annotation("Old fact.", (e1,))], legacy=True)
    assert "dave.md#mem_old)" in render_timeline([mem])["timeline/2026/01.md"]


def test_timeline_plain_handle_uses_canonical_location():
    e = ev("e-d", "2026", [("dialog", "D18:11", "D18:11")])
    text = render_timeline([unit("abcd", "Fact.", [Annotation("Fact.", (e,))])])["timeline/2026.md"]
    assert text.endswith("[dialog](../sources/D18.md#d18-11)\n")


# ---------------------------------------------------------------- recent


def test_recent_spec_example_line():
    line = render_recent([U1], {"97de5549": 0}, 50)
    assert line == (
        '{"memory_id": "97de5549", "when": "2026-08-09", "whens": ["2026-08-09"], "content": "Dave prefers tea over coffee.", '
        '"refs": ["openprogram/sess-7f2a/msg_2f9b"], "source_refs": ["openprogram/sess-7f2a/msg_2f9b"], '
        '"topic_path": "topics/people/dave.md", "headings": ["Dave", "Preferences"], "created_order": 0}\n'
    )


def test_recent_order_limit_and_unknown_ids():
    units = [unit(f"id{i}", f"é {i}", [Annotation(f"é {i}", (TEA,))]) for i in range(5)]
    order = {"id3": 0, "id1": 1, "id0": 2}
    lines = [json.loads(x) for x in render_recent(units, order, 3).splitlines()]
    # unknown ids get max+1 in occurrence order: id2 -> 3, id4 -> 4
    assert [(x["memory_id"], x["created_order"]) for x in lines] == [("id0", 2), ("id2", 3), ("id4", 4)]
    assert "é" in render_recent(units, order, 1)  # non-ASCII kept
    assert render_recent(units, order, 0) == ""


# ---------------------------------------------------------------- relations


def test_relations_spec_example():
    assert render_relations([U1, U2]) == (
        '{"backlinks": {"97de5549": ["ae99a3a8"]}, "outbound": {"97de5549": [], "ae99a3a8": ["97de5549"]}}\n'
    )
    assert render_relations([]) == '{"backlinks": {}, "outbound": {}}\n'


def test_relations_are_json_dumps_of_the_merged_maps():
    # a raw unit list may repeat an id (a tree never does): its targets merge, as a dict would
    a1 = unit("aaaa0001", "A.", [], rel=("cccc0003", "bbbb0002"))
    a2 = unit("aaaa0001", "A again.", [], rel=("dddd0004", "bbbb0002"))
    b = unit("bbbb0002", "B \u00e9.", [], rel=("aaaa0001",))
    want = {
        "backlinks": {"aaaa0001": ["bbbb0002"], "bbbb0002": ["aaaa0001"], "cccc0003": ["aaaa0001"],
                      "dddd0004": ["aaaa0001"]},
        "outbound": {"aaaa0001": ["bbbb0002", "cccc0003", "dddd0004"], "bbbb0002": ["aaaa0001"]},
    }
    assert render_relations([b, a1, a2]) == json.dumps(want, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- core


MASTER = """# Core

The owner prefers tea.[^e-1] ^aaaa0001

[^e-1]: Time: `2026-11`; Sources: [pref](../sources/openprogram/_v2/s.md#source-0000000000000001)

Pending fact.[^e-2] ^bbbb0002

[^e-2]: Time: `2026-11`; Sources: [chat](../sources/channel-x/_v2/t.md#source-0000000000000002)



See [site](https://example.org) and [Dave](people/dave.md#^97de5549).[^e-3] ^cccc0003

[^e-3]: Time: `2026-11`; Sources: [more](../sources/openprogram/_v2/s.md#source-0000000000000003)
"""


def test_core_chunks_glue_definitions_and_find_ids():
    chunks = split_core_chunks(core_root_text(MASTER))
    assert [cid for _t, cid in chunks] == [None, "aaaa0001", "bbbb0002", "cccc0003"]
    assert chunks[1][0] == (
        "The owner prefers tea.[^e-1] ^aaaa0001\n\n"
        "[^e-1]: Time: `2026-11`; Sources: [pref](sources/openprogram/_v2/s.md#source-0000000000000001)"
    )
    assert "[site](https://example.org)" in chunks[3][0]
    assert "[Dave](topics/people/dave.md#^97de5549)" in chunks[3][0]


def test_core_render_budget_and_pending():
    counter = CharCounter(1)  # one token per character: easy arithmetic
    chunks = split_core_chunks(core_root_text(MASTER))
    sizes = [len(t) for t, _ in chunks]
    full = render_core(MASTER, None, counter, budget=10_000, pending_ids={"bbbb0002"})
    assert full.kept_ids == ("aaaa0001", "cccc0003") and full.pending_skipped_ids == ("bbbb0002",)
    assert full.rendered_tokens == sizes[0] + sizes[1] + sizes[3]
    assert full.text == chunks[0][0] + "\n\n" + chunks[1][0] + "\n\n" + chunks[3][0] + "\n"
    # a budget that fits only the heading + first record: the rest counts as omitted
    clipped = render_core(MASTER, None, counter, budget=sizes[0] + sizes[1] + 1)
    assert clipped.kept_ids == ("aaaa0001",)
    assert clipped.omitted_ids == ("bbbb0002", "cccc0003")
    assert clipped.rendered_tokens == sizes[0] + sizes[1]
    # nothing fits -> just LF
    assert render_core(MASTER, None, counter, budget=1).text == "\n"


def test_core_pending_from_units_and_trusted_set():
    u_ok = unit("aaaa0001", "x", [Annotation("x", (ev("e-1", "2026", [("p", "t#a", "openprogram/s/1")]),))])
    u_pending = unit("bbbb0002", "y", [Annotation("y", (ev("e-2", "2026", [("p", "t#b", "channel-x/t/2")]),))])
    r = render_core(MASTER, {"openprogram/s/1"}, CharCounter(), units=[u_ok, u_pending])
    assert r.pending_skipped_ids == ("bbbb0002",)


def test_core_counts_special_token_text_as_ordinary_text():
    master = "# Core\n\nSay <|endoftext|> literally.[^e-1] ^aaaa0001\n\n[^e-1]: Time: `2026`; Sources: [x](../sources/a.md#source-1)\n"
    r = render_core(master, None, O200kCounter())
    assert r.kept_ids == ("aaaa0001",) and r.rendered_tokens > 0
    assert r.special_tokens == ("<|endoftext|>",)


def test_legacy_core_promotion_rebases_into_topics():
    root = "# Core\n\nFact [x](sources/openprogram/_v2/s.md#source-1) [w](https://w.org)\n"
    promoted = promote_legacy_core(root)
    assert "[x](../sources/openprogram/_v2/s.md#source-1)" in promoted and "[w](https://w.org)" in promoted
    assert core_root_text(promoted) == root


def test_core_injection_preview():
    assert core_injection("# Core\n\n# Other\n").injected is False
    assert core_injection(None).reason == "no core.md"
    off = core_injection("# Core\n\nfact\n", inject=False)
    assert not off.enabled and not off.injected
    on = core_injection("\n# Core\n\nfact\n\n", counter=CharCounter(1))
    assert on.injected and on.text == "# Core\n\nfact" and on.tokens == len("# Core\n\nfact")
    assert core_injection("## Sub\n").injected  # only "# " headings are empty


# ---------------------------------------------------------------- all together, from parsed text


def test_build_views_from_parsed_spec_example():
    dave = (
        "# Dave\n\n## Preferences\n\n"
        "Dave prefers tea over coffee.[^e-5bf6e713a0] ^97de5549\n\n"
        "[^e-5bf6e713a0]: Time: `2026-08-09`; Sources: [tea preference](../../sources/openprogram/_v2/sess-7f2a.md#source-9047c1917b2f0777)\n\n"
        "Dave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e-48bac47c87] ^ae99a3a8\n\n"
        "[^e-48bac47c87]: Time: `2026-08`; Sources: [daily tea](../../sources/openprogram/_v2/sess-7f2a.md#source-3980e4aaa25977a6)\n"
    )
    ids = {"source-9047c1917b2f0777": "openprogram/sess-7f2a/msg_2f9b", "source-3980e4aaa25977a6": "openprogram/sess-7f2a/msg_2fa0"}
    tree = parse_tree({"people/dave.md": dave}, resolve=lambda _p, t: ids.get(t.partition("#")[2]))
    assert not tree.problems
    views = build_views(tree, creation_order={"97de5549": 0, "ae99a3a8": 1})
    assert views.core is None and "core.md" not in views.files
    assert views.files["relations.json"] == render_relations([U1, U2])
    assert views.files["timeline/2026/08/09.md"] == render_timeline([U1, U2])["timeline/2026/08/09.md"]
    assert views.files["recent_events.jsonl"].splitlines()[0] == render_recent([U1], {"97de5549": 0}, 50).strip()


def test_source_location_uses_the_archive_id_rules():
    assert source_location("D\u0661:1") is None  # Arabic-Indic digit: not a D ref
    assert source_location("../x/y") is None  # ".." is not a provider
    assert source_location("openprogram/s") is None
