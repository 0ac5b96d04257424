"""The change forms' output survives the real transaction (normalise, validate, install) on
OpenProgram's own fixture workspace. Skips when ../shared/fixtures is absent."""

from __future__ import annotations

import re

from memory_tui.core.tx import api as tx
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.tx.stage import source_index
from memory_tui.core.format.topics import parse_tree


def _sid(root) -> str:
    arch = (root / "sources/openprogram/_v2/local_a1b2c3d4e5.md").read_text()
    return re.findall(r"source-id:(\S+) -->", arch)[0]


def test_record_ops_install_on_fixture(fixture_state):
    root = fixture_state / "memory"
    sid = _sid(root)
    ops = [
        {"op": "create_record", "content": "Ada also likes hojicha.", "time": "2026-11", "source_refs": [sid],
         "destination": {"topic_path": "topics/people/ada.md", "headings": ["Ada", "Drinks"], "position": "end"}},
        {"op": "update_record", "memory_id": "fc30e0e0", "content": "Ada is the traveller.", "time": "2026-11",
         "sources": [{"source": sid, "label": "intro"}]},
        {"op": "move_records", "memory_ids": ["c2a2c020"],
         "destination": {"topic_path": "topics/people/ada.md", "headings": ["Ada"], "position": "after", "anchor_memory_id": "fc30e0e0"}},
        {"op": "delete_record", "memory_id": "024689fd"},
    ]
    result = tx.update(fixture_state, workspace_revision(root), memory_changes=ops, git_commit="off")
    assert result.ok, result
    assert set(result.evidence_ids) == {"new-evidence-record-1", "new-evidence-record-2"}
    tree = parse_tree(root / "topics", resolve=source_index(root).resolve_target)
    assert tree.ok, tree.errors
    ada = [u.memory_id for u in tree.topic("people/ada.md").units]
    assert ada[:2] == ["fc30e0e0", "c2a2c020"]
    created = tree.by_id(result.block_ids["topics/people/ada.md#0"])
    assert created.headings == ("Ada", "Drinks") and created.source_refs == (sid,)
    assert tree.by_id("fc30e0e0").content == "Ada is the traveller."
    assert tree.by_id("024689fd") is None
    assert tree.by_id("c2a2c020").topic_path == "people/ada.md"


def test_patch_installs_on_fixture(fixture_state):
    root = fixture_state / "memory"
    lines = (root / "topics/people/ada.md").read_text().split("\n")
    patch = (
        "--- a/topics/people/ada.md\n+++ b/topics/people/ada.md\n"
        f"@@ -1,3 +1,3 @@\n # Ada\n \n-{lines[2]}\n+{lines[2].replace('wants short answers', 'wants brief answers')}\n"
    )
    result = tx.update(fixture_state, workspace_revision(root), patch=patch, git_commit="off")
    assert result.ok, result
    assert "wants brief answers" in (root / "topics/people/ada.md").read_text()


def test_patch_conflict_leaves_workspace_unchanged(fixture_state):
    root = fixture_state / "memory"
    rev = workspace_revision(root)
    result = tx.update(fixture_state, rev, patch="--- a/topics/people/ada.md\n+++ b/topics/people/ada.md\n@@ -1 +1 @@\n-# Bob\n+# Ada\n", git_commit="off")
    assert not result.ok and result.code == "PATCH_CONFLICT"
    assert workspace_revision(root) == rev
