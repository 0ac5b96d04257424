"""The fixture's topics parse with zero problems and reproduce OpenProgram's own answers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory_tui.core.format.blocklinks import rewrite_block_links
from memory_tui.core.format.linkcheck import check_cross_topic_links
from memory_tui.core.format.normalize import default_link_for, normalize_tree
from memory_tui.core.format.topics import parse_tree, parse_tree_strict


def _link_for(memory: Path):
    try:
        from memory_tui.core.format.sources import SourceIndex  # type: ignore[attr-defined]
    except ImportError:
        return default_link_for
    return SourceIndex.load(memory).link_for


def _texts(memory: Path) -> dict[str, str]:
    topics = memory / "topics"
    return {p.relative_to(topics).as_posix(): p.read_text(encoding="utf-8") for p in topics.rglob("*.md")}


def _resolver(memory: Path):
    """sources.SourceIndex when it exists; else a tiny reader of v2 archive anchors."""
    try:
        from memory_tui.core.format.sources import SourceIndex  # type: ignore[attr-defined]
    except ImportError:
        SourceIndex = None
    if SourceIndex is not None and hasattr(SourceIndex, "load"):
        return SourceIndex.load(memory).resolve_target
    index: dict[tuple[Path, str], str] = {}
    for file in (memory / "sources").rglob("*.md"):
        lines = file.read_text(encoding="utf-8").split("\n")
        for i, line in enumerate(lines[:-1]):
            anchor = re.fullmatch(r'<a id="(source-[0-9a-f]{16})"></a>', line)
            sid = re.fullmatch(r"<!-- source-id:(.*) -->", lines[i + 1])
            if anchor and sid:
                index[(file.resolve(), anchor.group(1))] = sid.group(1)

    def resolve(topic_path: str, target: str):
        rel, _, fragment = target.partition("#")
        return index.get((((memory / "topics" / topic_path).parent / rel).resolve(), fragment))

    return resolve


def test_fixture_topics_match_openprogram(fixture_state_ro, expected):
    memory = fixture_state_ro / "memory"
    tree = parse_tree_strict(memory / "topics", resolve=_resolver(memory))
    assert tree.problems == ()
    got = [{"path": "topics/" + t.path, "block_ids": list(t.block_ids)} for t in tree.topics]
    assert got == expected["topics"]
    assert len(tree.units) == len(expected["blocks"])
    for block, want in expected["blocks"].items():
        unit = tree.by_id(block)
        assert unit is not None, block
        assert {
            "topic_path": unit.topic_path,
            "headings": list(unit.headings),
            "source_refs": list(unit.source_refs),
            "relation_targets": list(unit.relation_targets),
            "when": unit.when,
        } == want, block


def test_fixture_without_resolver_still_reads_units(fixture_state_ro, expected):
    tree = parse_tree(fixture_state_ro / "memory" / "topics")
    assert tree.errors == ()
    assert [u.memory_id for u in tree.units] == [b for t in expected["topics"] for b in t["block_ids"]]
    # Unresolved archive links are kept with source_id None, never guessed.
    assert all(link.source_id is None for u in tree.units for ev in u.evidence for link in ev.links)


def test_fixture_block_ids_helper(fixture_state_ro, expected):
    tree = parse_tree(fixture_state_ro / "memory" / "topics")
    for entry in expected["topics"]:
        assert list(tree.block_ids(entry["path"])) == entry["block_ids"]
        assert list(tree.block_ids(entry["path"][len("topics/"):])) == entry["block_ids"]


def test_fixture_normalises_to_itself_byte_for_byte(fixture_state_ro):
    memory = fixture_state_ro / "memory"
    texts = _texts(memory)
    resolve = _resolver(memory)
    committed = parse_tree(texts, resolve=resolve)
    for kwargs in ({}, {"resolve": resolve, "link_for": _link_for(memory)}):
        result = normalize_tree(texts, committed=committed, **kwargs)
        assert result.changed == {} and result.texts == texts
        assert result.block_ids == {} and result.evidence_ids == {}
        assert result.dropped == () and result.problems == ()
    assert rewrite_block_links(texts) == texts
    assert check_cross_topic_links(texts) == []
    assert check_cross_topic_links(committed, committed=None) == []


# (topic, block id, local label OpenProgram's writer used) -- recovered from the ids themselves.
STAGED = [
    ("projects/kyoto-trip.md", "c2a2c020", "e1"),
    ("projects/kyoto-trip.md", "024689fd", "e1"),
    ("projects/cli-language.md", "302a9bb2", "e2"),
    ("projects/cli-language.md", "9c2b1a83", "e1"),
    ("core.md", "d8b10056", "e2"),
]


@pytest.mark.parametrize(("topic", "block", "label"), STAGED)
def test_writer_form_of_a_fixture_paragraph_normalises_to_openprogram_bytes(fixture_state_ro, topic, block, label):
    """Undo the runtime's work on one paragraph (local label, plain handles, no id) and check
    that normalisation gives back exactly the bytes OpenProgram installed."""
    memory = fixture_state_ro / "memory"
    texts = _texts(memory)
    resolve = _resolver(memory)
    committed = parse_tree(texts, resolve=resolve)
    unit = committed.by_id(block)
    (ev,) = unit.evidence
    staged_def = f"[^{label}]: Time: `{ev.raw_when}`; Sources: " + ", ".join(
        f"[{link.label}]({link.source_id})" for link in ev.links
    )
    original = texts[topic]
    staged = original.replace(f"[^{ev.id}] ^{block}\n", f"[^{label}]\n").replace(ev.text + "\n", staged_def + "\n")
    assert staged != original and staged.count(f"[^{label}]") == 2
    others = set(committed.ids) - {block}
    result = normalize_tree(
        {**texts, topic: staged}, committed_ids=others, resolve=resolve, link_for=_link_for(memory)
    )
    assert result.errors == ()
    assert result.texts[topic] == original
    assert result.evidence_ids == {label: ev.id}
    assert list(result.block_ids.values()) == [block]
