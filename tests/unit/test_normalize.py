"""Normalisation (memory spec §3.8), pruning (§3.9), block links (§3.7)."""

from __future__ import annotations

import pytest

from memory_tui.core.format.blocklinks import rewrite_block_links
from memory_tui.core.format.linkcheck import check_cross_topic_links
from memory_tui.core.format.normalize import (
    allocate_evidence_ids,
    default_link_for,
    definition_seed,
    normalize_tree,
    prune_topic,
)
from memory_tui.core.format.topics import block_id, evidence_id, parse_topic, parse_tree

FIRST = (
    "# Dave\n\n## Preferences\n\n"
    "Dave prefers tea over coffee.[^e-5bf6e713a0] ^97de5549\n\n"
    "[^e-5bf6e713a0]: Time: `2026-08-09`; Sources: [tea preference](../../sources/openprogram/_v2/sess-7f2a.md#source-9047c1917b2f0777)\n"
)
STAGED_PARAGRAPH = (
    "\nDave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e1]\n\n"
    "[^e1]: Time: `2026-08`; Sources: [daily tea](openprogram/sess-7f2a/msg_2fa0)\n"
)
COMMITTED_DAVE = FIRST + (
    "\nDave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e-48bac47c87] ^ae99a3a8\n\n"
    "[^e-48bac47c87]: Time: `2026-08`; Sources: [daily tea](../../sources/openprogram/_v2/sess-7f2a.md#source-3980e4aaa25977a6)\n"
)
FACT = "Fact {n}.[^e-{n:0>10}] ^{id}\n\n[^e-{n:0>10}]: Time: `2026`; Sources: [s](../sources/openprogram/_v2/t.md#source-0000000000000000)\n"


def test_spec_example_staged_paragraph_normalises_to_committed_form():
    result = normalize_tree(
        {"people/dave.md": FIRST + STAGED_PARAGRAPH},
        committed={"people/dave.md": FIRST},
    )
    assert result.ok, result.errors
    assert result.texts["people/dave.md"] == COMMITTED_DAVE
    assert result.block_ids == {"topics/people/dave.md#0": "ae99a3a8"}
    assert result.evidence_ids == {"e1": "e-48bac47c87"}
    assert parse_topic("people/dave.md", result.texts["people/dave.md"]).problems == ()


def test_normalising_committed_form_changes_nothing():
    result = normalize_tree({"people/dave.md": COMMITTED_DAVE}, committed_ids={"97de5549", "ae99a3a8"})
    assert result.changed == {} and result.block_ids == {} and result.evidence_ids == {}
    assert result.texts == {"people/dave.md": COMMITTED_DAVE}


def test_evidence_seed_and_allocation_rules():
    assert definition_seed("[a](x/y/z), [b]( p/q/r )") == "x/y/z|p/q/r"
    assert definition_seed("x/y/z, p/q/r · D1:2") == "x/y/z|p/q/r|D1:2"
    texts = {
        "b.md": "B.[^e1] ^bbbbbbbb\n\n[^e1]: Time: `2020`; Sources: [s](p/t/other)\n",
        "a.md": "A.[^e1] ^aaaaaaaa\n\n[^e1]: Time: undated; Sources: [s](p/t/m)\n",
    }
    # "e1" in two files gets one id, derived from the first file in sorted order.
    assert allocate_evidence_ids(texts) == {"e1": evidence_id("undated", "p/t/m", 0)}
    # k advances past ids already used by non-local definitions anywhere in the stage.
    taken = evidence_id("undated", "p/t/m", 0)
    texts["c.md"] = f"C.[^{taken}] ^cccccccc\n\n[^{taken}]: Time: `2020`; Sources: [s](p/t/x)\n"
    assert allocate_evidence_ids(texts) == {"e1": evidence_id("undated", "p/t/m", 1)}


def test_new_evidence_labels_and_bare_sources_get_labels_from_handles():
    staged = {"t.md": "# T\n\nA fact.[^new-evidence-x]\n\n[^new-evidence-x]: Time: `2026-01`; Sources: p/t/m1, D3:4\n"}
    result = normalize_tree(staged)
    eid = evidence_id("2026-01", "p/t/m1|D3:4", 0)
    bid = block_id("t.md", "A fact.[^new-evidence-x]", 0)
    assert result.texts["t.md"] == (
        f"# T\n\nA fact.[^{eid}] ^{bid}\n\n"
        f"[^{eid}]: Time: `2026-01`; Sources: [p/t/m1]({default_link_for('p/t/m1', 'topics')}), "
        "[D3:4](../sources/D3.md#d3-4)\n"
    )
    assert default_link_for("p/t/m1", "topics") == "../sources/p/_v2/t.md#source-" + __import__("hashlib").sha256(b"p/t/m1").hexdigest()[:16]
    assert default_link_for("channel-x/a%3Ab/m", "topics/x") == "../../sources/channel-x/_v2/a%253Ab.md#source-" + __import__("hashlib").sha256(b"channel-x/a%3Ab/m").hexdigest()[:16]


def test_orphan_citation_is_rebound_to_next_unused_definition():
    staged = {"t.md": "One.[^e5]\n\nTwo.[^e9]\n\n[^e1]: Time: `2026`; Sources: [a](p/t/1)\n[^e2]: Time: `2026`; Sources: [b](p/t/2)\n"}
    result = normalize_tree(staged)
    topic = parse_topic("t.md", result.texts["t.md"])
    assert topic.problems == ()
    assert [[link.label for ev in u.evidence for link in ev.links] for u in topic.units] == [["a"], ["b"]]
    # The block id body is taken after rebinding, still with the local label.
    assert topic.units[0].memory_id == block_id("t.md", "One.[^e1]", 0)


def test_block_id_collisions_advance_k_and_skip_line_end_ids():
    body = "Same.[^e1]"
    first = block_id("t.md", body, 0)
    staged = {
        "t.md": "Same.[^e1]\n\nSame.[^e1]\n\n[^e1]: Time: `2026`; Sources: [a](p/t/1)\n",
        "u.md": f"Other.[^e-0000000001] ^{block_id('t.md', body, 1)}\n\n[^e-0000000001]: Time: `2026`; Sources: [a](p/t/1)\n",
    }
    result = normalize_tree(staged, committed_ids={block_id("t.md", body, 1)})
    assert list(result.block_ids.values()) == [first, block_id("t.md", body, 2)]
    assert list(result.block_ids) == ["topics/t.md#0", "topics/t.md#1"]


def test_mem_only_paragraphs_get_no_block_id():
    text = "Old.[^mem_a]\n\n[^mem_a]: Time: `2024`; Sources: [s](D1:1)\n"
    result = normalize_tree({"old.md": text})
    assert result.block_ids == {}
    assert parse_topic("old.md", result.texts["old.md"]).block_ids == ("mem_a",)


def test_invented_ids_are_stripped_and_reallocated():
    staged = {"t.md": "Fact.[^e1]   ^myownid ^another\n\n[^e1]: Time: `2026`; Sources: [a](p/t/1)\n"}
    result = normalize_tree(staged)
    assert result.ok
    assert result.texts["t.md"].startswith(f"Fact.[^{evidence_id('2026', 'p/t/1')}] ^{block_id('t.md', 'Fact.[^e1]', 0)}\n")


def test_canonical_rewrite_whitespace_and_suffix():
    staged = {"t.md": "Fact  [^e-0000000001]\t\t^abcd1234   \n\n[^e-0000000001]:Time:2026 ;Sources:[a](p/t/1)\n\n\n"}
    result = normalize_tree(staged, committed_ids={"abcd1234"})
    assert result.texts["t.md"] == (
        "Fact[^e-0000000001] ^abcd1234\n\n"
        f"[^e-0000000001]: Time: `2026`; Sources: [a]({default_link_for('p/t/1', 'topics')})\n"
    )


# --- pitfall 14 ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("paragraph", "line", "column"),
    [
        ("Fact.[^e1]\n^bbbb2222", 2, 1),
        ("Fact.[^e-0000000001] ^aaaa1111\n^bbbb2222", 2, 1),
        ("Fact.[^e1]\u2029^bbbb2222", 2, 1),  # U+2029 ends a line (§3.1)
        ("Fact.[^e1] ^alias-1 ^aaaa1111", 1, 12),
    ],
)
def test_malformed_id_placement_is_refused_not_invented(paragraph, line, column):
    text = paragraph + "\n\n[^e1]: Time: `2026`; Sources: [a](p/t/1)\n[^e-0000000001]: Time: `2026`; Sources: [a](p/t/1)\n"
    result = normalize_tree({"t.md": text}, committed_ids={"aaaa1111"})
    placement = [p for p in result.errors if p.details.get("kind") == "malformed_id_placement"]
    assert [(p.line, p.column, p.path) for p in placement] == [(line, column, "topics/t.md")]
    assert not result.ok


def test_committed_alias_layout_is_accepted():
    text = "Merged.[^e-0000000001] ^aaaa1111 ^bbbb2222\n\n[^e-0000000001]: Time: `2026`; Sources: [a](x.md#source-1)\n"
    result = normalize_tree({"t.md": text}, committed_ids={"aaaa1111", "bbbb2222"})
    assert result.ok and result.changed == {}


# --- pruning (§3.9, pitfalls 2 and 13) -------------------------------------------------------


def test_new_topic_of_uncited_prose_is_an_error_with_its_line():
    result = normalize_tree({"notes.md": "# Notes\n\nJust some prose.\nMore.\n"})
    assert result.texts["notes.md"] is None
    assert [(p.message, p.line, p.path) for p in result.errors] == [
        ("memory block ID required: notes.md", 3, "topics/notes.md")
    ]
    assert result.errors[0].details["kind"] == "dropped"


@pytest.mark.parametrize(
    "text",
    [
        "# Only a heading\n",
        "# T\n\n```\ncode\n```\n",
        "## Likes tea[^e1]\n\n[^e1]: Time: `2026`; Sources: [a](p/t/1)\n",
    ],
)
def test_new_topics_without_records_are_reported(text):
    result = normalize_tree({"x.md": text})
    assert result.texts["x.md"] is None
    assert len(result.errors) == 1 and result.errors[0].details["kind"] == "dropped"
    assert result.errors[0].line == 1


def test_empty_section_pruned_and_reported():
    text = (
        "Preamble comment kept?\n"
        "# Top\n\nFact.[^e-0000000001] ^aaaa1111\n\n"
        "## Empty\n\n<!-- nothing here -->\n\n"
        "### Deeper\n\n[^e-0000000001]: Time: `2026`; Sources: [a](p/t/1)\n"
        "## Kept\n\n"
        "# Top\n\n## Has\n\nOther.[^e-0000000002] ^bbbb2222\n\n[^e-0000000002]: Time: `2026`; Sources: [a](p/t/1)\n"
    )
    pruned, notes = prune_topic("x.md", text, committed_text=None)
    assert pruned == (
        "Preamble comment kept?\n"
        "# Top\n\nFact.[^e-0000000001] ^aaaa1111\n\n"
        "[^e-0000000001]: Time: `2026`; Sources: [a](p/t/1)\n"
        "# Top\n\n## Has\n\nOther.[^e-0000000002] ^bbbb2222\n\n[^e-0000000002]: Time: `2026`; Sources: [a](p/t/1)\n"
    )
    assert [(n.line, n.details["lines"]) for n in notes] == [(6, [6, 8]), (10, [10, 10]), (13, [13, 13])]
    assert all(n.details["new"] for n in notes)
    # The same drop of committed content is only a warning.
    _, old = prune_topic("x.md", text, committed_text=text)
    assert old and all(n.details["severity"] == "warning" for n in old)


def test_deleted_staged_file_stays_deleted():
    result = normalize_tree({"gone.md": None, "a.md": FACT.format(n=1, id="aaaa1111")}, committed_ids={"aaaa1111"})
    assert result.texts["gone.md"] is None
    assert result.changed == {}


# --- step 1: relocated evidence --------------------------------------------------------------


def test_moved_paragraph_keeps_its_sources():
    committed = {"people/dave.md": COMMITTED_DAVE}
    moved = COMMITTED_DAVE.replace("# Dave\n\n## Preferences\n\n", "# Dave\n\n")
    anchors = {
        "source-9047c1917b2f0777": "openprogram/sess-7f2a/msg_2f9b",
        "source-3980e4aaa25977a6": "openprogram/sess-7f2a/msg_2fa0",
    }

    def resolve(topic_path, target):
        import posixpath

        path, _, frag = target.partition("#")
        full = posixpath.normpath(posixpath.join("topics", posixpath.dirname(topic_path), path))
        return anchors.get(frag) if full == "sources/openprogram/_v2/sess-7f2a.md" else None

    result = normalize_tree(
        {"people/dave.md": None, "dave.md": moved.replace("dave.md#^", "people/dave.md#^")},
        committed=parse_tree(committed, resolve=resolve),
        resolve=resolve,
    )
    new = result.texts["dave.md"]
    assert "(../sources/openprogram/_v2/sess-7f2a.md#source-9047c1917b2f0777)" in new
    assert "(../sources/openprogram/_v2/sess-7f2a.md#source-3980e4aaa25977a6)" in new
    topic = parse_topic("dave.md", new, resolve=resolve)
    assert [u.source_refs for u in topic.units] == [("openprogram/sess-7f2a/msg_2f9b",), ("openprogram/sess-7f2a/msg_2fa0",)]
    # And the block link follows the move.
    relinked = rewrite_block_links(result.texts)
    assert "[his tea](dave.md#^97de5549)" in relinked["dave.md"]


# --- §3.7 ------------------------------------------------------------------------------------


def test_rewrite_block_links_relative_and_percent_encoded():
    texts = {
        "a/x.md": "See [y](wrong/place.md#^bbbb2222) and [me](../a/x.md#^aaaa1111).[^e-0000000001] ^aaaa1111\n\n"
        "[^e-0000000001]: Time: `2026`; Sources: [a](p/t/1)\n",
        "b c/y~é.md": FACT.format(n=2, id="bbbb2222"),
    }
    out = rewrite_block_links(texts)
    assert out["a/x.md"].startswith("See [y](../b%20c/y~%C3%A9.md#^bbbb2222) and [me](x.md#^aaaa1111).")
    assert out["b c/y~é.md"] == texts["b c/y~é.md"]
    assert rewrite_block_links(out) == out


def test_cross_topic_link_rules():
    texts = {
        "a.md": (
            "Links [bad](b.md) and [ok](b.md#^bbbb2222) and [out](../sources/x.md) "
            "and [web](https://e.com/b.md) and [gone](b.md#^dead0000).[^e-0000000001] ^aaaa1111\n\n"
            "[^e-0000000001]: Time: `2026`; Sources: [a](p/t/1)\n"
        ),
        "b.md": FACT.format(n=2, id="bbbb2222"),
    }
    problems = check_cross_topic_links(texts)
    assert [(p.message, p.line, p.column) for p in problems] == [
        ("Topic-to-Topic link must target #^block-id: a.md -> b.md", 1, 7),
        ("dangling block link: dead0000", 1, texts["a.md"].index("[gone]") + 1),
    ]
    # Unchanged committed content is not re-judged by the link-shape rule; dangling still is.
    committed = parse_tree(texts)
    problems = check_cross_topic_links(texts, committed=committed)
    assert [p.message for p in problems] == ["dangling block link: dead0000"]


def test_new_non_ascii_time_is_refused_but_committed_one_is_kept():
    line = "[^e-0000000001]: Time: `٢٠٢٦-١١`; Sources: [a](x.md#source-1)"
    text = "Fact.[^e-0000000001] ^aaaa1111\n\n" + line + "\n"
    result = normalize_tree({"t.md": text}, committed_ids={"aaaa1111"})
    assert [(p.details["kind"], p.line, p.column) for p in result.errors] == [("non_ascii_time", 3, 25)]
    result = normalize_tree({"t.md": text}, committed={"t.md": text})
    assert result.ok and result.changed == {}


def test_block_id_that_would_turn_the_last_line_into_a_heading_is_refused():
    result = normalize_tree({"t.md": "# T\n\nFact.[^e1]\n#\n\n[^e1]: Time: `2026`; Sources: [a](p/t/1)\n"})
    assert any(p.details.get("kind") == "malformed_id_placement" and p.line == 4 for p in result.errors)


@pytest.mark.parametrize("heading", ["## ^alias-1  ^alias-1Walks", "## Walks ^a1 ^b2", "## ^alias-1"])
def test_heading_left_with_another_invented_id_is_refused(heading):
    # Stripping one trailing ^word (as OpenProgram does) would leave a heading the next
    # normalisation strips again, or no heading: the written file would not be a fixed point.
    text = FIRST.replace("## Preferences", heading)
    result = normalize_tree({"people/dave.md": text}, committed={"people/dave.md": FIRST})
    placement = [p for p in result.errors if p.details.get("kind") == "malformed_id_placement"]
    assert [p.line for p in placement] == [3], result.problems


@pytest.mark.parametrize(("heading", "written"), [("## Walks ^abc12345", "## Walks"), ("## Walks^a1", "## Walks")])
def test_heading_with_one_invented_id_loses_it(heading, written):
    text = FIRST.replace("## Preferences", heading)
    result = normalize_tree({"people/dave.md": text}, committed={"people/dave.md": FIRST})
    assert result.ok, result.errors
    assert result.texts["people/dave.md"].split("\n")[2] == written


@pytest.mark.parametrize("gap", ["\t", "  "])
def test_indented_line_that_closing_the_citation_gap_makes_a_definition_is_refused(gap):
    # The canonical form removes the gap before "[^": the prose line would be written as a
    # definition, and the block id the edit gives it would be gone on the next edit.
    text = FIRST.replace("\n[^e-5bf6e713a0]:", f"\n{gap}[^e-5bf6e713a0]:")
    result = normalize_tree({"people/dave.md": text}, committed={"people/dave.md": FIRST})
    assert [(p.details.get("kind"), p.line) for p in result.errors] == [("line_changes_class", 7)], result.errors
    assert "evidence definition" in result.errors[0].message


@pytest.mark.parametrize("lone", ["^deadbeef\nmore", "^deadbeef", "^97de5549\nmore"])
def test_a_lone_id_line_opening_a_paragraph_of_several_lines_is_refused(lone):
    text = FIRST.replace("Dave prefers", lone + "\nDave prefers")
    result = normalize_tree({"people/dave.md": text}, committed={"people/dave.md": FIRST})
    assert [(p.details.get("kind"), p.line) for p in result.errors] == [("malformed_id_placement", 5)], result.errors


def test_no_break_space_before_the_id_gap_is_kept_and_strictly_clean():
    # OpenProgram keeps a no-break space before the one space it puts before the id; the
    # written text reads without even a warning, and normalising it again changes nothing.
    text = FIRST.replace("coffee.[^e-5bf6e713a0] ^97de5549", "coffee.[^e-5bf6e713a0]\u00a0^97de5549")
    result = normalize_tree({"people/dave.md": text}, committed={"people/dave.md": FIRST})
    assert result.ok, result.errors
    written = result.texts["people/dave.md"]
    assert "coffee.[^e-5bf6e713a0]\u00a0 ^97de5549" in written
    assert parse_topic("people/dave.md", written).problems == ()
    again = normalize_tree({"people/dave.md": written}, committed={"people/dave.md": written})
    assert again.ok and again.texts["people/dave.md"] == written


def test_fast_path_for_unchanged_committed_files_gives_the_same_result():
    committed = {
        "a.md": FACT.format(n=1, id="aaaa1111"),
        "b/c.md": FACT.format(n=2, id="bbbb2222"),
        "z.md": "Old [^e-0000000003] ^cccc3333\n\n[^e-0000000003]:Time: 2026; Sources: [a](x.md#source-1)\n",
    }
    staged = dict(committed, **{"b/new.md": "New.[^e1]\n\n[^e1]: Time: `2026`; Sources: [a](p/t/1)\n"})
    full = normalize_tree(staged, committed=committed)
    fast = normalize_tree(staged, committed=committed, assume_committed_normal=True)
    assert fast.block_ids == full.block_ids and fast.evidence_ids == full.evidence_ids
    # z.md is not normal: the full pass rewrites it, the fast path trusts it as committed.
    assert {p: t for p, t in fast.texts.items() if p != "z.md"} == {p: t for p, t in full.texts.items() if p != "z.md"}
    assert fast.texts["z.md"] == committed["z.md"] != full.texts["z.md"]
    assert list(fast.texts) == list(full.texts) == ["a.md", "b/c.md", "b/new.md", "z.md"]
