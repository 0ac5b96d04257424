"""Rebuilding the derived views from OpenProgram's own topics reproduces its files byte for byte."""

from __future__ import annotations

import pytest

pytest.importorskip("memory_tui.core.format.sources")

from memory_tui.core.format.sources import SourceIndex  # noqa: E402
from memory_tui.core.format.tokens import O200kCounter  # noqa: E402
from memory_tui.core.format.topics import parse_tree  # noqa: E402
from memory_tui.core.format.views import build_views, compare_views, render_core  # noqa: E402
from memory_tui.core.store.workspace import check_views  # noqa: E402
from memory_tui.core.store.workspace import load_runtime_state  # noqa: E402


@pytest.fixture(scope="module")
def rebuilt(fixture_state_ro):
    memory = fixture_state_ro / "memory"
    index = SourceIndex.load(memory)
    tree = parse_tree(memory / "topics", resolve=index.resolve_target)
    assert not tree.errors
    runtime, problems = load_runtime_state(memory)
    assert problems == ()
    views = build_views(
        tree,
        master_text=(memory / "topics" / "core.md").read_text(encoding="utf-8"),
        trusted_ids=index.trusted_ids(),
        creation_order=runtime.creation_order,
        recent_limit=50,
        counter=O200kCounter(),
        link_for=index.link_for,
    )
    return memory, tree, index, views


def _committed(memory, rel):
    return (memory / rel).read_bytes()


def test_timeline_byte_for_byte(rebuilt, expected):
    memory, _tree, _index, views = rebuilt
    on_disk = sorted(p.relative_to(memory).as_posix() for p in (memory / "timeline").rglob("*.md"))
    assert sorted(views.timeline) == on_disk
    for rel, text in views.timeline.items():
        assert text.encode("utf-8") == _committed(memory, rel), rel
    assert expected["core"]["rebuild_matches_committed"]["timeline"] is True


@pytest.mark.parametrize("rel", ["recent_events.jsonl", "relations.json", "core.md"])
def test_root_views_byte_for_byte(rebuilt, expected, rel):
    memory, _tree, _index, views = rebuilt
    assert views.files[rel].encode("utf-8") == _committed(memory, rel)
    assert expected["core"]["rebuild_matches_committed"][rel] is True


def test_core_tokens_and_omitted_ids(rebuilt, expected):
    _memory, tree, _index, views = rebuilt
    core = views.core
    assert core.rendered_tokens == expected["core"]["rendered_tokens"] == 1984
    assert list(core.omitted_ids) == expected["core"]["omitted_block_ids"]
    assert core.budget == expected["core_budget_tokens"]
    assert core.pending_skipped_ids == ()
    master_ids = [t["block_ids"] for t in expected["topics"] if t["path"] == "topics/core.md"][0]
    assert list(core.kept_ids) + list(core.omitted_ids) == master_ids


def test_core_pending_block_is_skipped_not_omitted(rebuilt):
    memory, tree, index, _views = rebuilt
    master = (memory / "topics" / "core.md").read_text(encoding="utf-8")
    first = "a058e34e"
    trusted = set(index.trusted_ids()) - set(tree.by_id(first).source_refs)
    core = render_core(master, trusted, O200kCounter(), units=tree)
    assert first in core.pending_skipped_ids and first not in core.kept_ids
    # every block citing the same (now untrusted) source is skipped too
    assert set(core.pending_skipped_ids) == {u.memory_id for u in tree.units if set(u.source_refs) - trusted and u.topic_path == "core.md"}


def test_check_views_clean_on_fixture(fixture_state_ro):
    assert check_views(fixture_state_ro / "memory") == []


def test_check_views_names_changed_and_extra_files(fixture_state, rebuilt):
    memory = fixture_state / "memory"
    (memory / "relations.json").write_text('{"backlinks": {}, "outbound": {}}\n', encoding="utf-8")
    (memory / "timeline" / "1999.md").write_text("# 1999\n", encoding="utf-8")
    (memory / "recent_events.jsonl").unlink()
    found = {(m.path, m.kind) for m in compare_views(memory, rebuilt[3])}
    assert found == {("relations.json", "differs"), ("timeline/1999.md", "extra"), ("recent_events.jsonl", "missing")}
