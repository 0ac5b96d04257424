"""The engine adapter on OpenProgram's own state dir."""

from __future__ import annotations

from pathlib import Path

from memory_tui.core.tokens import O200kCounter
from memory_tui.tui.data import FrameVM, load_model


def test_model_matches_openprogram_answers(fixture_state_ro, expected):
    m = load_model(fixture_state_ro, counter=O200kCounter(), home=fixture_state_ro.parent)
    assert m.display_dir == "~/.openprogram"
    assert m.workspace_id == expected["workspace_id"]
    assert m.revision == expected["revision"]
    assert list(m.core.omitted_ids) == expected["core"]["omitted_block_ids"]
    assert m.core.tokens == expected["core"]["rendered_tokens"]
    assert m.status.pending_turns == expected["status_pending_turns"]
    assert set(m.engine) == {"workspace", "core", "sessions"}, m.engine_errors
    topic_paths = {t.path for t in m.topics}
    assert "topics/core.md" not in topic_paths  # Core owns it
    for item in expected["topics"]:
        path, ids = item["path"], item["block_ids"]
        topic = m.topic(path)
        assert topic is not None, path
        assert [r.memory_id for r in topic.records] == ids


def test_citations_resolve_to_source_frames(fixture_state_ro, expected):
    m = load_model(fixture_state_ro, counter=O200kCounter())
    for mid, block in expected["blocks"].items():
        rec = m.records[mid]
        resolved = [l.source_id for l in rec.source_links]
        for ref in block["source_refs"]:
            assert ref in resolved
            assert isinstance(m.frame(ref), FrameVM)


def test_missing_state_dir_is_a_state_not_an_exception(tmp_path: Path):
    m = load_model(tmp_path / "nope", counter=O200kCounter())
    assert not m.state_exists and m.problems[0].code == "STATE_NOT_FOUND"
