"""Topic Markdown grammar (memory spec §3): worked examples, every error message, positions."""

from __future__ import annotations

import pytest

from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.topics import (
    block_id,
    classify_lines,
    evidence_id,
    is_ascii_when,
    is_error,
    parse_topic,
    parse_topic_strict,
    parse_tree,
    parse_tree_strict,
    parse_when,
    resolve_plain_target,
    resolve_source_target,
    topic_sort_key,
)

DAVE = """# Dave

## Preferences

Dave prefers tea over coffee.[^e-5bf6e713a0] ^97de5549

[^e-5bf6e713a0]: Time: `2026-08-09`; Sources: [tea preference](../../sources/openprogram/_v2/sess-7f2a.md#source-9047c1917b2f0777)

Dave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e-48bac47c87] ^ae99a3a8

[^e-48bac47c87]: Time: `2026-08`; Sources: [daily tea](../../sources/openprogram/_v2/sess-7f2a.md#source-3980e4aaa25977a6)
"""

ANCHORS = {
    "source-9047c1917b2f0777": "openprogram/sess-7f2a/msg_2f9b",
    "source-3980e4aaa25977a6": "openprogram/sess-7f2a/msg_2fa0",
}


def resolver(topic_path: str, target: str):
    path, _, fragment = target.partition("#")
    if path.endswith("sources/openprogram/_v2/sess-7f2a.md"):
        return ANCHORS.get(fragment)
    return None


def messages(topic):
    return [(p.message, p.line, p.column) for p in topic.problems]


# --- derivations (§3.8, §3.10) ---------------------------------------------------------------


def test_spec_worked_example_ids():
    assert evidence_id("2026-08", "openprogram/sess-7f2a/msg_2fa0", 0) == "e-48bac47c87"
    body = "Dave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e1]"
    assert block_id("dave.md", body, 0) == "ae99a3a8"
    assert block_id("dave.md", body, 1) != "ae99a3a8"


# --- the committed example -------------------------------------------------------------------


def test_committed_example_units():
    topic = parse_topic("people/dave.md", DAVE, resolve=resolver)
    assert topic.problems == ()
    assert topic.block_ids == ("97de5549", "ae99a3a8")
    first, second = topic.units
    assert first.headings == ("Dave", "Preferences")
    assert first.content == "Dave prefers tea over coffee."
    assert first.when == "2026-08-09"
    assert first.source_refs == ("openprogram/sess-7f2a/msg_2f9b",)
    assert first.line == 5 and first.end_line == 5
    assert first.aliases == ("97de5549",) and not first.legacy
    assert second.relation_targets == ("97de5549",)
    assert second.body == "Dave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e-48bac47c87]"
    assert second.content == "Dave links to [his tea](dave.md#^97de5549) and drinks it daily."
    assert second.when == "2026-08"
    assert second.source_refs == ("openprogram/sess-7f2a/msg_2fa0",)
    ann = second.annotations[0]
    assert ann.quote == "Dave links to [his tea](dave.md#^97de5549) and drinks it daily."
    ev = ann.evidence[0]
    assert (ev.id, ev.raw_when, ev.when, ev.line, ev.legacy) == ("e-48bac47c87", "2026-08", "2026-08", 11, False)
    assert ev.links[0].label == "daily tea"
    assert ev.topic_path == "people/dave.md"
    assert [(h.level, h.title, h.line) for h in topic.headings] == [(1, "Dave", 1), (2, "Preferences", 3)]


def test_staged_form_plain_handle_resolves_without_files():
    text = (
        "Dave links to [his tea](dave.md#^97de5549) and drinks it daily.[^e1]\n\n"
        "[^e1]: Time: `2026-08`; Sources: [daily tea](openprogram/sess-7f2a/msg_2fa0)\n"
    )
    topic = parse_topic("people/dave.md", text, strict=False)
    assert topic.units == ()  # no id yet: the normaliser allocates it
    assert topic.problems == ()
    ev = topic.evidence[0]
    assert ev.links[0].source_id == "openprogram/sess-7f2a/msg_2fa0"
    assert ev.is_local


def test_unresolved_archive_link_without_resolver_is_not_an_error():
    topic = parse_topic("people/dave.md", DAVE)
    assert topic.problems == ()
    assert topic.units[0].source_refs == ()


def test_invalid_source_target_with_resolver():
    text = "A fact.[^e-0000000000] ^aaaa1111\n\n[^e-0000000000]: Time: `2026`; Sources: [x](../nowhere.md#source-1)\n"
    topic = parse_topic("a.md", text, resolve=resolver)
    assert messages(topic) == [("invalid source target: ../nowhere.md#source-1", 3, 45)]


# --- paragraphs and line classes -------------------------------------------------------------


def test_heading_chain_skips_levels_without_empty_entries():
    text = "# A\n\n### C\n\nx.[^e-1] ^a1\n\n## B\n\ny.[^e-1] ^b1\n\n[^e-1]: Time: undated; Sources: [s](D1:2)\n"
    topic = parse_topic("t.md", text)
    assert topic.problems == ()
    assert [u.headings for u in topic.units] == [("A", "C"), ("A", "B")]
    assert topic.units[0].when is None
    assert topic.units[0].source_refs == ("D1:2",)


def test_fences_html_lines_and_definitions_are_not_prose():
    text = (
        "# T\n\n```\nnot a paragraph [^x]\n```\n<!-- a comment -->\n<a id=\"x\"></a>\n\n"
        "Fact.[^e-1] ^abc\n\n[^e-1]: Time: `2026-01-31`; Sources: [s](D1:2)\n"
    )
    topic = parse_topic("t.md", text)
    assert topic.problems == ()
    assert [l.kind for l in classify_lines(text)][:7] == ["heading", "blank", "fence", "fenced", "fence", "html", "html"]


@pytest.mark.parametrize(
    "prose",
    [
        "An intro sentence.",
        "- a list item",
        "| a | table |",
        "> a quote",
        "<!-- opens\ncontinues -->",
        "#nospace heading",
    ],
)
def test_uncited_prose_is_rejected_with_its_line(prose):
    text = "# T\n\n" + prose + "\n\nFact.[^e-1] ^abc\n\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n"
    topic = parse_topic("people/t.md", text)
    errs = [(p.message, p.line) for p in topic.errors]
    want_line = 4 if prose.startswith("<!--") else 3
    assert errs == [("memory block ID required: people/t.md", want_line)]
    assert all(p.path == "topics/people/t.md" for p in topic.problems)
    # A lenient read tolerates it.
    assert parse_topic("people/t.md", text, strict=False).problems == ()


def test_aliases_yield_one_unit_each_identity_last():
    text = "Merged fact.[^e-1] ^11111111 ^22222222\n\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n"
    topic = parse_topic("t.md", text)
    assert topic.problems == ()
    assert topic.block_ids == ("11111111", "22222222")
    alias, ident = topic.units
    assert alias.aliases == ident.aliases == ("11111111", "22222222")
    assert alias.is_alias and not ident.is_alias and alias.identity == "22222222"
    assert alias.content == ident.content == "Merged fact."


def test_hand_made_ids_are_accepted_once_written():
    text = "Fact.[^note_1] ^blockid001\n\n[^note_1]: Time: `2026`; Sources: [s](D1:2)\n"
    assert parse_topic("t.md", text).block_ids == ("blockid001",)


def test_multiple_citation_groups_and_annotations():
    text = (
        "First part.[^e-1][^e-2] Second part.[^e-3] ^abcd1234\n\n"
        "[^e-1]: Time: undated; Sources: [a](D1:1)\n"
        "[^e-2]: Time: `2025-12`; Sources: [b](D1:2), [c](D1:1)\n"
        "[^e-3]: Time: `2026`; Sources: [d](D1:3)\n"
    )
    unit = parse_topic("t.md", text).units[0]
    assert [a.quote for a in unit.annotations] == ["First part.", "Second part."]
    assert [[e.id for e in a.evidence] for a in unit.annotations] == [["e-1", "e-2"], ["e-3"]]
    assert unit.source_refs == ("D1:1", "D1:2", "D1:3")
    assert unit.when == "2025-12"
    assert unit.content == "First part. Second part."


# --- error messages --------------------------------------------------------------------------


def test_record_rule_errors_with_positions():
    text = (
        "No citation here ^aaaa0001\n"  # line 1
        "\n"
        "[^e-1] leading citation ^aaaa0002\n"  # line 3: missing content before e-1, content after
        "\n"
        "Cites nothing defined.[^e-9] ^aaaa0003\n"  # line 5
        "\n"
        "Two ids.[^e-1] ^aaaa0003\n"  # line 7: duplicate
        "\n"
        "Bad id.[^e-1] ^bad_id\n"  # line 9
        "\n"
        "[^e-1]: Time: `2026`; Sources: [s](D1:2)\n"
        "[^e-2]: Time: `2026`; Sources: [s](D1:2)\n"  # line 12: unused
    )
    topic = parse_topic("t.md", text)
    assert messages(topic) == [
        ("memory source footnote required: aaaa0001", 1, 1),
        ("missing memory content before e-1", 3, 1),
        ("content after final evidence: aaaa0002", 3, 8),
        ("undefined footnote: e-9", 5, 23),
        ("duplicate memory_id: aaaa0003", 7, 1),
        ("invalid block_id: bad_id", 9, 15),
        ("unused footnote definition: e-2", 12, 1),
    ]
    assert all(p.code == "INVALID_TOPIC_FORMAT" for p in topic.problems)


def test_unreadable_definition_nobody_cites_is_named_as_such():
    text = "Fact.[^e-1] ^abc\n\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n[^e-2]: Time: ``; Sources: [s](D1:2)\n"
    assert messages(parse_topic("t.md", text))[0] == ("invalid evidence definition: e-2", 4, 1)


def test_second_ref_in_group_column():
    text = "Fact.[^e-1][^e-7] ^abc\n\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n"
    assert messages(parse_topic("t.md", text)) == [("undefined footnote: e-7", 1, 12)]


_NOT_READ = ("undefined footnote: e-1 (line 3 is not a definition OpenProgram reads: write [^e-1]: Time: "
             "`YYYY[-MM[-DD]]` or `undated`; Sources: [label](target))")


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        ("[^e-1]: Time: `2026-02-30`; Sources: [s](D1:2)", "invalid evidence date: 2026-02-30"),
        ("[^e-1]: Time: `2026-13`; Sources: [s](D1:2)", "invalid evidence date: 2026-13"),
        # Shapes OpenProgram does not read as a definition at all: its citation is undefined.
        # Reading them leniently would let normalisation rewrite the owner's line canonical.
        ("[^e-1]: Time: `26`; Sources: [s](D1:2)", _NOT_READ),
        ("[^e-1]: Time: `2026; Sources: [s](D1:2)", _NOT_READ),
        ("[^e-1]: Time: ` 2026-11 `; Sources: [s](D1:2)", _NOT_READ),
        ("[^e-1]: Time: ``; Sources: [s](D1:2)", _NOT_READ),
        ("[^e-1]: Time: `2026-11`; Sources:", _NOT_READ),
        ("[^e-1]: Time: `2026`; Sources: nothing linked", "memory source links required: e-1"),
        ("[^e-1]: Time: `2026`; Sources: [  ](D1:2)", "memory source labels required: e-1"),
        ("[^e-1]: just words", _NOT_READ),
    ],
)
def test_definition_errors(definition, message):
    text = "Fact.[^e-1] ^abc\n\n" + definition + "\n"
    assert [p.message for p in parse_topic("t.md", text).errors] == [message]
    assert all(p.line == 3 for p in parse_topic("t.md", text).errors)


def test_duplicate_definition():
    text = "Fact.[^e-1] ^abc\n\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n"
    assert messages(parse_topic("t.md", text)) == [("duplicate footnote definition: e-1", 4, 1)]


def test_definitions_must_start_in_column_zero():
    text = "Fact.[^e-1] ^abc\n\n [^e-1]: Time: `2026`; Sources: [s](D1:2)\n"
    msgs = [p.message for p in parse_topic("t.md", text).errors]
    assert "undefined footnote: e-1" in msgs and "memory block ID required: t.md" in msgs


def test_legacy_definition_and_mem_units():
    text = (
        "# Old\n\nLikes tea.[^mem_a] Dislikes rain.[^mem_b][^mem_c]\n\n"
        "[^mem_a]: 2024-05 · Sources: [s](D1:1)\n"
        "[^mem_b]: Time: undated; Sources: [s](D1:2)\n"
        "[^mem_c]: Time: `2024`; Sources: [s](D1:3)\n"
    )
    topic = parse_topic("old.md", text)
    assert topic.problems == ()
    assert topic.block_ids == ("mem_a", "mem_b", "mem_c")
    a, b, c = topic.units
    assert a.legacy and a.content == "Likes tea." and a.when == "2024-05"
    assert a.source_refs == ("D1:1",)
    assert b.content == c.content == "Dislikes rain."
    assert b.when is None and c.when == "2024"
    assert topic.evidence[0].legacy


def test_non_ascii_digits_read_but_flagged():
    text = "Fact.[^e-1] ^abc\n\n[^e-1]: Time: `٢٠٢٦-١١`; Sources: [s](D1:2)\n"
    topic = parse_topic("t.md", text)
    assert topic.errors == ()  # OpenProgram accepts it (pitfall 12)
    assert topic.units[0].when == "٢٠٢٦-١١"
    assert topic.units[0].non_ascii_time and topic.evidence[0].non_ascii_time
    assert [p.details.get("kind") for p in topic.problems] == ["non_ascii_time"]
    assert not is_ascii_when("٢٠٢٦-١١") and is_ascii_when("2026-11")
    assert parse_when("2024-02-29") == (True, "2024-02-29", False)
    assert parse_when("2023-02-29")[0] is False
    assert parse_when("undated") == (True, None, False)


# --- pitfall 14: id placement ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("Fact.[^e-1] ^aaaa1111\n^bbbb2222\n", 2, 1),
        ("Fact.[^e-1]\n^bbbb2222\n", 2, 1),
        ("Fact.[^e-1]\u2029^bbbb2222\n", 2, 1),  # U+2029 ends a line (str.splitlines, §3.1)
        ("Fact.[^e-1]\u00a0^bbbb2222\n", 1, 13),
    ],
)
def test_malformed_id_placement_is_reported_with_its_line(text, line, column):
    text += "\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n"
    topic = parse_topic("t.md", text)
    placement = [p for p in topic.problems if p.details.get("kind") == "malformed_id_placement"]
    assert [(p.line, p.column) for p in placement] == [(line, column)]
    assert "malformed id placement" in placement[0].message
    # OpenProgram reads it anyway; a strict parse of a committed file does not fail on it.
    assert not any(is_error(p) for p in placement)
    assert topic.units[-1].memory_id == "bbbb2222"


def test_id_after_a_space_that_follows_unusual_whitespace_reads_clean():
    # What OpenProgram's normaliser writes for "Fact.\u00a0^id": the id has its usual space.
    topic = parse_topic("t.md", "Fact.[^e-1]\u00a0 ^bbbb2222\n\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n")
    assert topic.problems == () and topic.units[-1].memory_id == "bbbb2222"


# --- trees -----------------------------------------------------------------------------------


def test_tree_order_duplicates_and_strict_raise():
    fact = "Fact.[^e-1] ^{id}\n\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n"
    texts = {
        "topics.md": fact.format(id="t1"),
        "a-b.md": fact.format(id="dup"),
        "a/x.md": fact.format(id="dup"),
    }
    tree = parse_tree(texts)
    assert [t.path for t in tree.topics] == ["a/x.md", "a-b.md", "topics.md"]
    assert [u.memory_id for u in tree.units] == ["dup", "t1"] and tree.unit_count == 2
    assert tree.by_id("dup").topic_path == "a/x.md"
    assert [(p.message, p.path, p.line) for p in tree.problems] == [("duplicate memory_id: dup", "topics/a-b.md", 1)]
    with pytest.raises(MemoryError) as info:
        parse_tree_strict(texts)
    assert info.value.code == "INVALID_TOPIC_FORMAT"
    assert (info.value.path, info.value.line, info.value.column) == ("topics/a-b.md", 1, 1)
    assert sorted(["topics.md", "a-b.md", "a/x.md"], key=topic_sort_key) == ["a/x.md", "a-b.md", "topics.md"]


def test_tree_from_directory_reports_bad_utf8(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "ok.md").write_text("Fact.[^e-1] ^ok1\n\n[^e-1]: Time: `2026`; Sources: [s](D1:2)\n")
    (tmp_path / "bad.md").write_bytes(b"# T\n\nabc \xff\n")
    (tmp_path / "notes.txt").write_text("ignored")
    tree = parse_tree(tmp_path)
    assert [t.path for t in tree.topics] == ["sub/ok.md"]
    assert [(p.path, p.line, p.column) for p in tree.problems] == [("topics/bad.md", 3, 5)]


def test_strict_single_topic_raises_first_error():
    with pytest.raises(MemoryError) as info:
        parse_topic_strict("people/x.md", "# X\n\nhello\n")
    assert info.value.message == "memory block ID required: people/x.md"
    assert info.value.line == 3


# --- source targets (§3.5 pure parts) --------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "want"),
    [
        ("D18:11", "D18:11"),
        ("openprogram/sess-7f2a/msg_2fa0", "openprogram/sess-7f2a/msg_2fa0"),
        ("openprogram/s/m/with/slashes", "openprogram/s/m/with/slashes"),
        ("../sources/D18.md#d18-11", "D18:11"),
        ("../sources/D18.md#D18-11", "D18:11"),
        ("../sources/openprogram/_v2/x.md#source-0123456789abcdef", None),
        ("../../x/y", None),  # provider ".." is not a source id
        ("only/two", None),
        ("a/b/c<d", None),
    ],
)
def test_resolve_plain_target(target, want):
    assert resolve_plain_target(target) == want


def test_resolve_order_plain_then_file_then_fallback():
    calls = []

    def res(topic, target):
        calls.append(target)
        return "p/t/m" if target.endswith("#d1-2") else None

    assert resolve_source_target("t.md", "D1:2", res) == "D1:2" and calls == []
    assert resolve_source_target("t.md", "x.md#d1-2", res) == "p/t/m"
    assert resolve_source_target("t.md", "x.md#d1-3", None) == "D1:3"


def test_a_topic_symlink_leading_outside_is_reported_not_read(tmp_path):
    from memory_tui.core.format.topics import parse_tree
    from memory_tui.core.store.workspace import open_state

    secret = tmp_path / "secret.md"
    secret.write_text("private key material\n")
    state = tmp_path / "state"
    topics = state / "memory" / "topics"
    topics.mkdir(parents=True)
    (topics / "leak.md").symlink_to(secret)
    for tree in (parse_tree(topics), open_state(state).tree):
        assert [t.path for t in tree.topics] == []
        (problem,) = [p for p in tree.problems if p.path == "topics/leak.md"]
        assert problem.code == "PATH_OUTSIDE_WORKSPACE"
        assert "private" not in problem.message
