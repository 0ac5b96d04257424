"""apply_memory_changes: the record ops of memory spec §6.1 over staged topic texts."""

from __future__ import annotations

import re

import pytest

from memory_tui.core.changes.records import apply_memory_changes
from memory_tui.core.changes.request import validate_request
from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.topics import parse_topic, parse_tree

REV = "770a6d9353e3913cc767d8c393d504d2"
SRC = "../../sources/openprogram/_v2/sess-7f2a.md"

# §3.10 example, committed form.
DAVE = f"""# Dave

## Preferences

Dave prefers tea over coffee.[^e-5bf6e713a0] ^97de5549

[^e-5bf6e713a0]: Time: `2026-08-09`; Sources: [tea preference]({SRC}#source-9047c1917b2f0777)

Dave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e-48bac47c87] ^ae99a3a8

[^e-48bac47c87]: Time: `2026-08`; Sources: [daily tea]({SRC}#source-3980e4aaa25977a6)
"""

TREE = {"people/dave.md": DAVE}


def fake_link(source_id: str, from_dir: str) -> str:
    return f"L[{from_dir}]/{source_id}"


def ops_of(*ops):
    return validate_request({"base_revision": REV, "memory_changes": list(ops)}).memory_changes


def run(texts, *ops, tree=None, link_for=fake_link):
    return apply_memory_changes(texts, tree, ops_of(*ops), link_for=link_for)


def fails(texts, *ops, tree=None) -> MemoryError:
    with pytest.raises(MemoryError) as info:
        run(texts, *ops, tree=tree)
    return info.value


def _expand_handles(m: re.Match) -> str:
    values = [v.strip() for v in m.group(2).split(",")]
    return m.group(1) + ", ".join(f"[{v}]({v})" for v in values)


def settle(text: str) -> str:
    """Stand-in for normalisation in these tests: give new paragraphs a block id, and turn
    the bare source handles a record op writes (§6.1: handles as given, expanded later by
    §3.8 step 6) into links."""
    text = re.sub(r"^(\[\^[^\]]+\]: Time: `[^`]*`; Sources: )([^\[\n]+)$", _expand_handles, text, flags=re.M)
    return re.sub(r"(\[\^new-evidence-record-(\d+)\])$", r"\1 ^new\2", text, flags=re.M)


def units(path, text):
    topic = parse_topic(path, settle(text))
    assert not topic.errors, topic.errors
    return {u.memory_id: u for u in topic.units}


def create(content="Dave likes green tea.", headings=("Dave", "Preferences"), position="end", anchor=None, topic="topics/people/dave.md", **over):
    dest = {"topic_path": topic, "headings": list(headings), "position": position}
    if anchor is not None:
        dest["anchor_memory_id"] = anchor
    op = {"op": "create_record", "content": content, "time": "2026-09", "source_refs": ["openprogram/s/m1"], "destination": dest}
    op.update(over)
    return op


def update(mid, content="Changed.", **over):
    op = {"op": "update_record", "memory_id": mid, "content": content, "time": None, "source_refs": ["openprogram/s/m2"]}
    op.update(over)
    return op


def delete(mid):
    return {"op": "delete_record", "memory_id": mid}


def move(ids, headings=("Dave", "Preferences"), position="end", anchor=None, topic="topics/people/dave.md"):
    dest = {"topic_path": topic, "headings": list(headings), "position": position}
    if anchor is not None:
        dest["anchor_memory_id"] = anchor
    return {"op": "move_records", "memory_ids": list(ids), "destination": dest}


# --- §6.4 example -----------------------------------------------------------------------------------


def test_spec_example_update_against_spec_example_topic():
    out = run(
        TREE,
        {
            "op": "update_record",
            "memory_id": "97de5549",
            "content": "Dave now prefers coffee.",
            "time": "2026-09",
            "sources": [{"source": "openprogram/sess-7f2a/msg_2fa0", "label": "switched"}],
        },
        link_for=lambda sid, d: "../../sources/openprogram/_v2/sess-7f2a.md#source-3980e4aaa25977a6" if d == "topics/people" else None,
    )
    assert out.texts["people/dave.md"] == (
        "# Dave\n\n## Preferences\n\n"
        "Dave now prefers coffee.[^new-evidence-record-1] ^97de5549\n\n"
        "[^new-evidence-record-1]: Time: `2026-09`; Sources: [switched](openprogram/sess-7f2a/msg_2fa0)\n\n\n"
        "Dave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e-48bac47c87] ^ae99a3a8\n\n"
        f"[^e-48bac47c87]: Time: `2026-08`; Sources: [daily tea]({SRC}#source-3980e4aaa25977a6)\n"
    )
    assert out.changed_paths == ("people/dave.md",)
    assert out.allowed_refs == {"openprogram/sess-7f2a/msg_2fa0"}
    assert out.removable_ids == frozenset()
    assert out.new_evidence_labels == {0: "new-evidence-record-1"}
    assert out.changed_files == ("topics/people/dave.md",)
    assert TREE["people/dave.md"] == DAVE  # input untouched


# --- create -------------------------------------------------------------------------------------------


def test_create_end_of_section_renders_ref_as_label():
    out = run(TREE, create())
    text = out.texts["people/dave.md"]
    assert text.endswith(
        "Dave likes green tea.[^new-evidence-record-1]\n\n"
        "[^new-evidence-record-1]: Time: `2026-09`; Sources: openprogram/s/m1\n"
    )
    u = units("people/dave.md", text)
    assert u["new1"].headings == ("Dave", "Preferences")


def test_create_without_link_for_writes_plain_handle():
    out = run(TREE, create(), link_for=None)
    assert "Sources: openprogram/s/m1\n" in out.texts["people/dave.md"]


def test_create_at_start_of_section():
    text = run(TREE, create(position="start")).texts["people/dave.md"]
    assert text.startswith("# Dave\n\n## Preferences\n\nDave likes green tea.[^new-evidence-record-1]\n\n[^new-evidence-record-1]: ")
    assert "\n\n\n" not in text
    ids = list(units("people/dave.md", text))
    assert ids[:2] == ["new1", "97de5549"]


def test_end_is_before_next_heading_of_any_level():
    text = DAVE + "\n### Drinks\n\nSub.[^e-1111111111] ^11111111\n\n[^e-1111111111]: Time: `2026`; Sources: [x](p/t/m)\n"
    out = run({"people/dave.md": text}, create())
    new = out.texts["people/dave.md"]
    assert new.index("Dave likes green tea.") < new.index("### Drinks")
    u = units("people/dave.md", new)
    assert u["new1"].headings == ("Dave", "Preferences")
    assert u["11111111"].headings == ("Dave", "Preferences", "Drinks")


def test_create_in_preamble():
    text = "Intro.[^e-1111111111] ^11111111\n\n[^e-1111111111]: Time: `2026`; Sources: [x](p/t/m)\n\n# Dave\n"
    end = run({"a.md": text}, create(topic="topics/a.md", headings=())).texts["a.md"]
    assert end.index("Dave likes") < end.index("# Dave")
    assert units("a.md", end)["new1"].headings == ()
    start = run({"a.md": text}, create(topic="topics/a.md", headings=(), position="start")).texts["a.md"]
    assert start.startswith("Dave likes green tea.[^new-evidence-record-1]\n\n[^new")


def test_create_before_and_after_anchor():
    before = run(TREE, create(position="before", anchor="ae99a3a8")).texts["people/dave.md"]
    assert list(units("people/dave.md", before)) == ["97de5549", "new1", "ae99a3a8"]
    # after = right after the anchor paragraph, before its own definitions (OpenProgram's
    # placement, corpus cases 185, 186, 190)
    after = run(TREE, create(position="after", anchor="97de5549")).texts["people/dave.md"]
    assert list(units("people/dave.md", after)) == ["97de5549", "new1", "ae99a3a8"]
    assert after.index("Dave likes green tea.") < after.index("[^e-5bf6e713a0]: ")
    assert "\n\n\n" not in after


def test_anchor_must_exist():
    e = fails(TREE, create(position="after", anchor="nope0000"))
    assert e.code == "MEMORY_NOT_FOUND" and e.details["field"] == "destination.anchor_memory_id"


def test_anchor_must_sit_under_that_heading_chain_in_that_topic():
    e = fails(TREE, create(position="after", anchor="97de5549", headings=("Dave",)))
    assert e.code == "INVALID_ARGUMENT" and e.details["field"] == "destination.anchor_memory_id"
    e = fails({**TREE, "b.md": "# Dave\n\n## Preferences\n"}, create(position="after", anchor="97de5549", topic="topics/b.md"))
    assert e.code == "INVALID_ARGUMENT" and "not in topics/b.md" in e.message


def test_anchor_deleted_earlier_is_not_found():
    e = fails(TREE, delete("ae99a3a8"), create(position="before", anchor="ae99a3a8"))
    assert e.code == "MEMORY_NOT_FOUND" and e.details["op_index"] == 1


def test_missing_heading_levels_created_at_deepest_matching_prefix():
    text = DAVE + "\n# Other\n\nO.[^e-1111111111] ^11111111\n\n[^e-1111111111]: Time: `2026`; Sources: [x](p/t/m)\n"
    out = run({"people/dave.md": text}, create(headings=("Dave", "Hobbies", "Chess")))
    new = out.texts["people/dave.md"]
    assert "## Hobbies\n\n### Chess\n\nDave likes green tea." in new
    assert new.index("### Chess") < new.index("# Other")  # inside the Dave section
    u = units("people/dave.md", new)
    assert u["new1"].headings == ("Dave", "Hobbies", "Chess")
    assert u["ae99a3a8"].headings == ("Dave", "Preferences")
    assert u["11111111"].headings == ("Other",)


def test_create_new_file_with_headings():
    out = run(TREE, create(topic="topics/places/kyoto.md", headings=("Kyoto", "Food")))
    assert out.texts["places/kyoto.md"] == (
        "# Kyoto\n\n## Food\n\nDave likes green tea.[^new-evidence-record-1]\n\n"
        "[^new-evidence-record-1]: Time: `2026-09`; Sources: openprogram/s/m1\n"
    )
    assert out.changed_paths == ("places/kyoto.md",)


def test_create_six_missing_levels():
    out = run(TREE, create(topic="topics/deep.md", headings=("a", "b", "c", "d", "e", "f")))
    text = out.texts["deep.md"]
    assert text.startswith("# a\n\n## b\n\n### c\n\n#### d\n\n##### e\n\n###### f\n\nDave likes")
    assert units("deep.md", text)["new1"].headings == ("a", "b", "c", "d", "e", "f")


def test_irregular_heading_levels_fall_back_to_end_of_file():
    # "### Y" after "### X" has the chain [X, Y]; a new "## Z" between them would change it.
    text = "### X\n\nrx.[^e-1111111111] ^11111111\n\n### Y\n\nry.[^e-1111111111] ^22222222\n\n[^e-1111111111]: Time: `2026`; Sources: [x](p/t/m)\n"
    assert units("a.md", text)["22222222"].headings == ("X", "Y")
    out = run({"a.md": text}, create(topic="topics/a.md", headings=("X", "Z")))
    u = units("a.md", out.texts["a.md"])
    assert u["new1"].headings == ("X", "Z") and u["22222222"].headings == ("X", "Y")


def test_irregular_heading_levels_refused_instead_of_moving_other_records():
    text = "### X\n\nrx.[^e-1111111111] ^11111111\n\n### Y\n\nry.[^e-1111111111] ^22222222\n\n# W\n\nrw.[^e-1111111111] ^33333333\n\n[^e-1111111111]: Time: `2026`; Sources: [x](p/t/m)\n"
    e = fails({"a.md": text}, create(topic="topics/a.md", headings=("X", "Z")))
    assert e.code == "INVALID_ARGUMENT" and "without changing the sections of other records" in e.message


def test_create_multiline_content():
    text = run(TREE, create(content="Line one\nline two.")).texts["people/dave.md"]
    assert "Line one\nline two.[^new-evidence-record-1]\n" in text
    assert units("people/dave.md", text)["new1"].content == "Line one\nline two."


# --- evidence labels ---------------------------------------------------------------------------------


def test_labels_follow_execution_order_and_bump_when_taken():
    text = DAVE + "\nOld.[^new-evidence-record-2] ^22222222\n\n[^new-evidence-record-2]: Time: `2026`; Sources: [x](p/t/m)\n"
    out = run(
        {"people/dave.md": text},
        move(["ae99a3a8"], position="start"),  # moves run last: position 3
        create(content="A."),  # position 1
        update("97de5549"),  # position 2 -> taken -> 3
    )
    assert out.new_evidence_labels == {1: "new-evidence-record-1", 2: "new-evidence-record-3"}


def test_labels_unique_across_topics():
    other = "X.[^new-evidence-record-1] ^33333333\n\n[^new-evidence-record-1]: Time: `2026`; Sources: [x](p/t/m)\n"
    out = run({**TREE, "other.md": other}, create())
    assert out.new_evidence_labels == {0: "new-evidence-record-2"}


# --- update ------------------------------------------------------------------------------------------


MERGED = """# Dave

Tea and coffee.[^e-aaaaaaaaaa][^e-bbbbbbbbbb] ^11111111 ^22222222

Also tea.[^e-bbbbbbbbbb] ^33333333

[^e-aaaaaaaaaa]: Time: `2026`; Sources: [a](p/t/a)
[^e-bbbbbbbbbb]: Time: `2026`; Sources: [b](p/t/b)
"""


def test_update_keeps_every_alias_and_drops_unused_old_definitions():
    out = run({"m.md": MERGED}, update("11111111", content="Only coffee now."))
    text = out.texts["m.md"]
    assert "Only coffee now.[^new-evidence-record-1] ^11111111 ^22222222\n" in text
    assert "[^e-aaaaaaaaaa]:" not in text  # cited nowhere else
    assert "[^e-bbbbbbbbbb]:" in text  # still cited by 33333333
    u = units("m.md", text)
    assert u["22222222"].content == "Only coffee now." and u["11111111"].aliases == ("11111111", "22222222")
    assert "\n\n\n" not in text


def test_two_updates_on_one_merged_block_rejected():
    e = fails({"m.md": MERGED}, update("11111111"), update("22222222"))
    assert e.code == "INVALID_ARGUMENT" and e.details["op_index"] == 1 and "same block" in e.message


def test_update_missing_id():
    e = fails(TREE, update("deadbeef"))
    assert e.code == "MEMORY_NOT_FOUND" and e.message.endswith("memory_id does not exist: deadbeef")
    assert e.details == {"op_index": 0, "field": "memory_id", "memory_id": "deadbeef"}


def test_committed_tree_must_know_the_id():
    staged = {"people/dave.md": DAVE + "\nNew.[^e-1111111111] ^99999999\n\n[^e-1111111111]: Time: `2026`; Sources: [x](p/t/m)\n"}
    committed = parse_tree(TREE)
    e = fails(staged, delete("99999999"), tree=committed)
    assert e.code == "MEMORY_NOT_FOUND"
    assert run(staged, delete("97de5549"), tree=committed).removable_ids == {"97de5549"}


# --- delete ------------------------------------------------------------------------------------------


def test_delete_removes_paragraph_and_unused_definitions():
    out = run(TREE, delete("97de5549"))
    text = out.texts["people/dave.md"]
    assert "97de5549\n" not in text and "[^e-5bf6e713a0]" not in text
    # only the paragraph and definition lines go; the blank lines around them stay, as
    # OpenProgram leaves them (corpus case 286)
    assert text == (
        "# Dave\n\n## Preferences\n\n\n\n"
        "Dave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e-48bac47c87] ^ae99a3a8\n\n"
        f"[^e-48bac47c87]: Time: `2026-08`; Sources: [daily tea]({SRC}#source-3980e4aaa25977a6)\n"
    )
    assert out.removable_ids == {"97de5549"}


def test_delete_keeps_definition_cited_elsewhere():
    text = run({"m.md": MERGED}, delete("33333333")).texts["m.md"]
    assert "Also tea" not in text and "[^e-bbbbbbbbbb]:" in text


def test_delete_on_merged_block_removes_only_that_alias():
    text = run({"m.md": MERGED}, delete("11111111")).texts["m.md"]
    assert "Tea and coffee.[^e-aaaaaaaaaa][^e-bbbbbbbbbb] ^22222222\n" in text
    assert "[^e-aaaaaaaaaa]:" in text
    text = run({"m.md": MERGED}, delete("22222222")).texts["m.md"]
    assert "Tea and coffee.[^e-aaaaaaaaaa][^e-bbbbbbbbbb] ^11111111\n" in text


def test_delete_last_record_leaves_prunable_text():
    out = run(TREE, delete("97de5549"), delete("ae99a3a8"))
    assert out.texts["people/dave.md"] == "# Dave\n\n## Preferences\n"


def test_update_and_delete_of_other_alias_same_block():
    text = run({"m.md": MERGED}, update("11111111", content="New."), delete("22222222")).texts["m.md"]
    assert "New.[^new-evidence-record-1] ^11111111\n" in text


# --- move --------------------------------------------------------------------------------------------


def test_move_within_file_to_new_heading():
    out = run(TREE, move(["97de5549"], headings=("Dave", "Old")))
    text = out.texts["people/dave.md"]
    u = units("people/dave.md", text)
    assert u["97de5549"].headings == ("Dave", "Old")
    assert u["ae99a3a8"].headings == ("Dave", "Preferences")
    assert text.count("[^e-5bf6e713a0]: ") == 1
    assert out.new_evidence_labels == {}


def test_move_to_other_topic_rerelativises_links():
    out = run(TREE, move(["ae99a3a8"], topic="topics/misc.md", headings=("Misc",)))
    moved = out.texts["misc.md"]
    assert moved == (
        "# Misc\n\n"
        "Dave links to [his tea](people/dave.md#^97de5549) and drinks it daily.[^e-48bac47c87] ^ae99a3a8\n\n"
        "[^e-48bac47c87]: Time: `2026-08`; Sources: [daily tea](../sources/openprogram/_v2/sess-7f2a.md#source-3980e4aaa25977a6)\n"
    )
    assert "ae99a3a8" not in out.texts["people/dave.md"] and "e-48bac47c87" not in out.texts["people/dave.md"]
    assert out.changed_paths == ("misc.md", "people/dave.md")
    assert out.removable_ids == frozenset()
    units("misc.md", moved)


def test_move_several_records_keeps_list_order():
    text = run(TREE, move(["ae99a3a8", "97de5549"], headings=("Dave", "Moved"))).texts["people/dave.md"]
    assert list(units("people/dave.md", text)) == ["ae99a3a8", "97de5549"]


def test_move_merged_block_needs_every_surviving_alias_in_order():
    e = fails({"m.md": MERGED}, move(["11111111"], headings=("Dave", "X"), topic="topics/m.md"))
    assert e.code == "INVALID_ARGUMENT" and "must also move 22222222" in e.message
    e = fails({"m.md": MERGED}, move(["22222222", "11111111"], headings=("Dave", "X"), topic="topics/m.md"))
    assert "in their order" in e.message
    # a deleted alias no longer needs to move
    out = run({"m.md": MERGED}, delete("11111111"), move(["22222222"], headings=("Dave", "X"), topic="topics/m.md"))
    assert units("m.md", out.texts["m.md"])["22222222"].headings == ("Dave", "X")
    out = run({"m.md": MERGED}, move(["11111111", "22222222"], topic="topics/n.md", headings=()))
    n = out.texts["n.md"]
    assert "[^e-aaaaaaaaaa]: " in n and "[^e-bbbbbbbbbb]: " in n
    assert "[^e-bbbbbbbbbb]: " in out.texts["m.md"] and "[^e-aaaaaaaaaa]: " not in out.texts["m.md"]


def test_move_missing_id():
    e = fails(TREE, move(["nope"]))
    assert e.code == "MEMORY_NOT_FOUND" and e.details["field"] == "memory_ids"


def test_move_with_conflicting_evidence_definition_in_destination():
    dest = "# D\n\nOther.[^e-48bac47c87] ^44444444\n\n[^e-48bac47c87]: Time: `2020`; Sources: [x](p/t/x)\n"
    e = fails({**TREE, "d.md": dest}, move(["ae99a3a8"], topic="topics/d.md", headings=("D",)))
    assert e.code == "INVALID_ARGUMENT" and "conflicting evidence definitions" in e.message


def test_move_reuses_identical_definition_in_destination():
    dest = "# D\n\nOther.[^e-48bac47c87] ^44444444\n\n[^e-48bac47c87]: Time: `2026-08`; Sources: [daily tea](../sources/openprogram/_v2/sess-7f2a.md#source-3980e4aaa25977a6)\n"
    out = run({**TREE, "d.md": dest}, move(["ae99a3a8"], topic="topics/d.md", headings=("D",)))
    assert out.texts["d.md"].count("[^e-48bac47c87]: ") == 1
    units("d.md", out.texts["d.md"])


def test_move_conflicting_definitions_across_sources():
    a = "# A\n\nA.[^e-cccccccccc] ^aaaaaaa1\n\n[^e-cccccccccc]: Time: `2026`; Sources: [x](p/t/a)\n"
    b = "# B\n\nB.[^e-cccccccccc] ^bbbbbbb1\n\n[^e-cccccccccc]: Time: `2025`; Sources: [y](p/t/b)\n"
    e = fails({"a.md": a, "b.md": b}, move(["aaaaaaa1", "bbbbbbb1"], topic="topics/c.md", headings=("C",)))
    assert "conflicting evidence definitions for [^e-cccccccccc]" in e.message


def test_moves_run_after_other_ops():
    out = run(TREE, move(["97de5549"], headings=("Dave", "Prefs2")), create(headings=("Dave", "Prefs2"), content="Created."))
    text = out.texts["people/dave.md"]
    assert text.index("Created.") < text.index("Dave prefers tea")
    assert out.new_evidence_labels == {1: "new-evidence-record-1"}


def test_anchor_before_moved_record_in_destination():
    out = run(TREE, move(["ae99a3a8"], position="before", anchor="97de5549"))
    assert list(units("people/dave.md", out.texts["people/dave.md"])) == ["ae99a3a8", "97de5549"]


# --- legacy mem_ units ---------------------------------------------------------------------------------

LEGACY = """# Notes

Ada likes tea.[^mem_a] She hikes.[^mem_b]

[^mem_a]: 2026-01 · Sources: [a](p/t/a)
[^mem_b]: 2026-02 · Sources: [b](p/t/b)
"""


def test_legacy_update_inline():
    out = run({"n.md": LEGACY}, update("mem_b", content="She climbs."))
    text = out.texts["n.md"]
    assert "Ada likes tea.[^mem_a] She climbs.[^mem_b]\n" in text
    assert "[^mem_b]: Time: `undated`; Sources: openprogram/s/m2" in text
    assert "[^mem_a]: 2026-01 · Sources: [a](p/t/a)" in text
    assert out.new_evidence_labels == {}
    u = units("n.md", text)
    assert u["mem_b"].content == "She climbs." and u["mem_a"].content == "Ada likes tea."


def test_legacy_delete_inline():
    text = run({"n.md": LEGACY}, delete("mem_a")).texts["n.md"]
    assert "She hikes.[^mem_b]\n" in text and "Ada likes" not in text and "[^mem_a]" not in text
    text = run({"n.md": LEGACY}, delete("mem_a"), delete("mem_b")).texts["n.md"]
    assert text == "# Notes\n"


def test_legacy_move():
    out = run({"n.md": LEGACY}, move(["mem_b"], topic="topics/x/y.md", headings=("Y",)))
    assert out.texts["x/y.md"] == "# Y\n\nShe hikes.[^mem_b]\n\n[^mem_b]: 2026-02 · Sources: [b](p/t/b)\n"
    assert "mem_b" not in out.texts["n.md"]
    assert units("x/y.md", out.texts["x/y.md"])["mem_b"].legacy


# --- raw dict input, outcome fields -----------------------------------------------------------------------


def test_raw_ops_are_validated():
    with pytest.raises(MemoryError) as info:
        apply_memory_changes(TREE, None, [{"op": "nope"}])
    assert info.value.code == "INVALID_ARGUMENT"
    out = apply_memory_changes(TREE, None, [delete("97de5549")])
    assert out.removable_ids == {"97de5549"}


def test_allowed_refs_are_every_ref_declared():
    out = run(TREE, create(source_refs=["a/b/c", "d/e/f"]), update("ae99a3a8"))
    assert out.allowed_refs == {"a/b/c", "d/e/f", "openprogram/s/m2"}


def test_fixture_topics_round_trip(fixture_state_ro):
    topics = fixture_state_ro / "memory" / "topics"
    texts = {p.relative_to(topics).as_posix(): p.read_text() for p in topics.rglob("*.md")}
    tree = parse_tree(texts)
    first = tree.topic("projects/kyoto-trip.md").units[0].memory_id
    out = apply_memory_changes(texts, tree, ops_of(move([first], topic="topics/people/ada.md", headings=("Ada", "Trips"))))
    assert set(out.changed_paths) == {"projects/kyoto-trip.md", "people/ada.md"}
    moved = units("people/ada.md", out.texts["people/ada.md"])[first]
    assert moved.headings == ("Ada", "Trips")
    assert "](../../sources/openprogram/_v2/" in out.texts["people/ada.md"]
