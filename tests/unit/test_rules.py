"""``core.rules.rule_of``: the rule an edit error broke, as the editor shows it."""

from __future__ import annotations

from memory_tui.core.tx import api as tx
from memory_tui.core.tx.context import RULE_HAND, RULE_ORGANIZE, RULE_WRITER
from memory_tui.core.format.rules import rule_of


def test_a_citation_error_names_the_citation_rule_that_applied():
    ref = "openprogram/_v2/s.md#source-0123456789abcdef"
    hand = f"source reference is not trusted; promote it first: {ref} ({RULE_HAND})"
    writer = f"source reference is not evidence of this transaction: {ref} ({RULE_WRITER})"
    assert rule_of(hand) == RULE_HAND
    assert rule_of(writer) == RULE_WRITER
    assert rule_of(f"missing source reference: {ref} ({RULE_ORGANIZE})") == RULE_ORGANIZE


def test_format_errors_name_their_spec_rule_and_unknown_messages_none():
    assert rule_of("block ID must not be removed: ab12cd34").startswith("§5.4 contract")
    assert rule_of("memory block ID required: people/ada.md").startswith("§3.3 uncited prose")
    assert rule_of("undefined footnote: e-1").startswith("§3.2 record")
    assert rule_of("memory block ID required: a.md (section '# X' holds no cited record and would be dropped)"
                   ).startswith("pitfall 13")
    assert rule_of("citation [^e1] in a heading is not a record: its definition would be dropped: topics/a.md"
                   ).startswith("pitfall 13: a footnote cited only by a heading")
    assert rule_of("something else entirely") is None
