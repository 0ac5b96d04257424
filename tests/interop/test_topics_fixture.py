"""The fixture's topics parse with zero problems and reproduce OpenProgram's own answers."""

from __future__ import annotations

import re
from pathlib import Path

from memory_tui.core.topics import parse_tree, parse_tree_strict


def _resolver(memory: Path):
    """sources.SourceIndex when it exists; else a tiny reader of v2 archive anchors."""
    try:
        from memory_tui.core.sources import SourceIndex  # type: ignore[attr-defined]
    except ImportError:
        SourceIndex = None
    if SourceIndex is not None:
        try:
            return SourceIndex(memory).resolve_target
        except TypeError:
            pass
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
