"""Which rule of the format an error of an edit broke, in words the owner can act on.

The core's messages are OpenProgram's (``undefined footnote: e1``) so that scripts comparing the
two keep working; they say what is wrong but not which rule applied. The editor and ``edit
--check`` show the rule beside each message. A citation check already names its rule in the
message (``(hand-edit rule: …)``, ``(writer rule: …)``): that one is taken as given, because the
same reference can be fine under one rule and refused under another.
"""

from __future__ import annotations

import re

# message prefix -> the rule (spec section of memory-format.md / row of openprogram-pitfalls.md)
_RULES: tuple[tuple[str, str], ...] = (
    ("block ID must not be removed", "§5.4 contract: a hand edit keeps every committed block id (^id)"),
    ("memory block ID required", "§3.3 uncited prose: every paragraph must be a cited record ending in ^id"),
    ("undefined footnote", "§3.2 record: each cited footnote [^id] is defined in the same file"),
    ("memory source footnote required", "§3.2 record: a record cites at least one footnote"),
    ("missing memory content before", "§3.2 record: text comes before each citation"),
    ("content after final evidence", "§3.2 record: only the block id may follow the last citation"),
    ("duplicate memory_id", "§3.2 record: block ids are unique across all topics"),
    ("invalid block_id", "§3.2 record: a block id is letters, digits and '-'"),
    ("unused footnote definition", "§3.4 evidence: a definition is cited by a record of its file"),
    ("duplicate footnote definition", "§3.4 evidence: each footnote is defined once"),
    ("invalid evidence definition", "§3.4 evidence: [^id]: Time: `WHEN`; Sources: [label](target)"),
    ("invalid evidence date", "§3.4 evidence: Time is YYYY[-MM[-DD]] in ASCII digits, or undated"),
    ("memory source links required", "§3.4 evidence: a definition links at least one source"),
    ("memory source labels required", "§3.4 evidence: every source link has a label"),
    ("invalid source target", "§3.5 source link: the target is a source archive location"),
    ("dangling block link", "§3.7 link: a block link points at a block that exists"),
    ("Topic-to-Topic link must target", "§3.7 link: a link to another topic targets #^block-id"),
    ("missing source reference", "§5.4 step 6: a cited source exists in the archive"),
    ("invalid source reference", "§5.4 step 6: a cited source reference is well formed"),
    ("citation [^", "pitfall 13: a footnote cited only by a heading would be dropped"),
    ("topics/core.md cannot be", "pitfall 10: topics/core.md is the core master"),
    ("special-token text", "core render: topics/core.md holds no special-token text (OpenProgram's counter raises on it)"),
    ("topic holds no cited record", "pitfall 2: a topic without a cited record would be deleted"),
    ("malformed id placement", "pitfall 14: only the runtime makes block ids, each at the end of its paragraph"),
    ("prose line starts with whitespace before a citation",
     "§3.8 step 6: the canonical form closes the gap before a citation, so the line must stay prose without it"),
)
_DROPPED = "pitfall 13: nothing the owner wrote may be dropped silently"
_NAMED = re.compile(r"\((?P<rule>[\w/ -]+ rule: [^()]*)\)\s*$")


def rule_of(message: str) -> str | None:
    """The rule an error message comes from, or None when it is not one of the format's."""
    named = _NAMED.search(message)
    if named:
        return named.group("rule")
    if "would be dropped" in message and not message.startswith("citation [^"):
        return _DROPPED
    for prefix, rule in _RULES:
        if message.startswith(prefix):
            return rule
    return None
