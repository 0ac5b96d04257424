"""Property test: random record-op lists either raise MemoryError or produce texts that parse
without errors, keep every id not deleted exactly once, drop the deleted ones and add one
record per create."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.changes.records import apply_memory_changes
from memory_tui.core.changes.request import validate_memory_changes
from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.topics import parse_tree

DAVE = """# Dave

## Preferences

Dave prefers tea.[^e-5bf6e713a0] ^97de5549

[^e-5bf6e713a0]: Time: `2026-08-09`; Sources: [tea](../../sources/openprogram/_v2/s.md#source-9047c1917b2f0777)

Dave links to [his tea](dave.md#^97de5549) daily.[^e-48bac47c87] ^ae99a3a8

[^e-48bac47c87]: Time: `2026-08`; Sources: [daily](p/t/m)

### Deeper

Deep.[^e-48bac47c87] ^dddddddd
"""
MERGED = """# M

Tea and coffee.[^e-aaaaaaaaaa][^e-bbbbbbbbbb] ^11111111 ^22222222

Also tea.[^e-bbbbbbbbbb] ^33333333

[^e-aaaaaaaaaa]: Time: `2026`; Sources: [a](p/t/a)
[^e-bbbbbbbbbb]: Time: `2026`; Sources: [b](p/t/b)
"""
LEGACY = """# Notes

Ada likes tea.[^mem_a] She hikes.[^mem_b]

[^mem_a]: 2026-01 · Sources: [a](p/t/a)
[^mem_b]: 2026-02 · Sources: [b](p/t/b)
"""
TEXTS = {"people/dave.md": DAVE, "m.md": MERGED, "n.md": LEGACY}
IDS = ["97de5549", "ae99a3a8", "dddddddd", "11111111", "22222222", "33333333", "mem_a", "mem_b", "nope"]
TOPICS = ["topics/people/dave.md", "topics/m.md", "topics/n.md", "topics/new/x.md"]
HEADINGS = [[], ["Dave"], ["Dave", "Preferences"], ["Dave", "Preferences", "Deeper"], ["M"], ["Notes"], ["New", "Sub"]]


@st.composite
def destinations(draw):
    pos = draw(st.sampled_from(["start", "end", "before", "after"]))
    dest = {"topic_path": draw(st.sampled_from(TOPICS)), "headings": draw(st.sampled_from(HEADINGS)), "position": pos}
    if pos in ("before", "after"):
        dest["anchor_memory_id"] = draw(st.sampled_from(IDS))
    return dest


ops = st.one_of(
    st.builds(lambda d, c: {"op": "create_record", "content": c, "time": None, "source_refs": ["p/t/new"], "destination": d},
              destinations(), st.sampled_from(["New fact.", "Two\nlines."])),
    st.builds(lambda i: {"op": "update_record", "memory_id": i, "content": "Updated.", "time": "2026", "source_refs": ["p/t/u"]},
              st.sampled_from(IDS)),
    st.builds(lambda i: {"op": "delete_record", "memory_id": i}, st.sampled_from(IDS)),
    st.builds(lambda ids, d: {"op": "move_records", "memory_ids": ids, "destination": d},
              st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True), destinations()),
)


def _expand_handles(m: re.Match) -> str:
    return m.group(1) + ", ".join(f"[{v.strip()}]({v.strip()})" for v in m.group(2).split(","))


def settle(text: str) -> str:
    """Normalisation stand-in: bare handles become links (§3.8 step 6), new paragraphs get ids."""
    text = re.sub(r"^(\[\^[^\]]+\]: Time: `[^`]*`; Sources: )([^\[\n]+)$", _expand_handles, text, flags=re.M)
    return re.sub(r"(\[\^new-evidence-record-(\d+)\])$", r"\1 ^new\2", text, flags=re.M)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=5))
def test_random_record_ops(raw):
    try:
        validated = validate_memory_changes(raw)
        out = apply_memory_changes(TEXTS, None, validated)
    except MemoryError as exc:
        assert exc.code in {"INVALID_ARGUMENT", "MEMORY_NOT_FOUND"}
        return
    tree = parse_tree({p: settle(t) for p, t in out.texts.items()})
    assert tree.ok, (tree.errors, out.texts)
    ids = [u.memory_id for u in tree.units]
    assert len(ids) == len(set(ids))
    deleted = {o.memory_id for o in validated if o.op == "delete_record"}
    for mid in IDS[:-1]:
        assert (mid in ids) == (mid not in deleted), mid
    creates = sum(1 for o in validated if o.op == "create_record")
    assert sum(1 for i in ids if i.startswith("new")) == creates
    for o in validated:
        if o.op == "move_records":
            for mid in o.memory_ids:
                unit = tree.by_id(mid)
                assert unit.topic_path == o.destination.topic_path
                assert unit.headings == o.destination.headings
        if o.op == "create_record":
            label = out.new_evidence_labels[o.index]
            unit = tree.by_id("new" + label.rsplit("-", 1)[1])
            assert unit.topic_path == o.destination.topic_path and unit.headings == o.destination.headings


# The same ops from kept per-file summaries (what a fresh ``apply`` reads from the parse cache
# instead of scanning every file): the same outcome or the same refusal, whichever files are
# known only by their summary. ``dup.md`` repeats ids of other files (first one wins).
DUP = "# Dup\n\nAgain tea.[^e-5bf6e713a0] ^97de5549\n\nLegacy again.[^mem_b]\n\n[^e-5bf6e713a0]: Time: `2026`; Sources: [a](p/t/a)\n[^mem_b]: 2026 · Sources: [b](p/t/b)\n"
# z.md holds a label a create would otherwise take: the taken footnote ids come from summaries too
TAKEN = "\nTaken.[^new-evidence-record-1]\n\n[^new-evidence-record-1]: Time: `2026`; Sources: [c](p/t/c)\n"
SUMMARY_TEXTS = dict(TEXTS, **{"a/dup.md": DUP, "z.md": DUP + TAKEN})


def _outcome(raw, summaries):
    from memory_tui.core.changes.records import apply_memory_changes as apply

    try:
        return apply(SUMMARY_TEXTS, None, validate_memory_changes(raw), summaries=summaries)
    except MemoryError as exc:
        return ("refused", exc.code, exc.message, exc.path, exc.line, dict(exc.details))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=5), st.sets(st.sampled_from(sorted(SUMMARY_TEXTS))))
def test_summaries_give_the_outcome_of_full_scans(raw, summarized):
    from memory_tui.core.changes.workcopy import is_scan_summary, scan_summary

    def summaries(path, text):
        if path not in summarized:
            return None
        value = scan_summary(path, text)
        assert is_scan_summary(value)
        return value

    assert _outcome(raw, summaries) == _outcome(raw, None)
