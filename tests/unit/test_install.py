from __future__ import annotations

import json
import os
import stat

from memory_tui.core.store import install as inst
from memory_tui.core.store.workspace import workspace_revision

from test_install_support import INTERNAL, STATE_A, STATE_B, make_stage, make_workspace, revisions, snapshot


def test_plan_lists_every_changed_file(tmp_path):
    root = make_workspace(tmp_path / "m", STATE_A)
    stage = make_stage(tmp_path / "stage", STATE_B)
    plan = inst.plan_install(root, stage)
    kinds = {t.path: t.kind for t in plan.targets}
    assert kinds == {
        "sources/openprogram/_v2/s1.md": "file",
        "sources/openprogram/_v2/s2.md": "file",
        "topics": "tree",
        "timeline": "tree",
        "recent_events.jsonl": "file",
        "relations.json": "file",
        "core.md": "file",
        ".scriptorium/runtime.json": "file",
    }
    # order: sources first, runtime.json last
    assert plan.targets[0].path.startswith("sources/") and plan.targets[-1].path == ".scriptorium/runtime.json"
    assert "topics/projects/old.md" in plan.changed_files
    assert "topics/projects/new/plan.md" in plan.changed_files
    assert "topics/people/ada.md" not in plan.changed_files
    assert not any(p.startswith(".scriptorium") for p in plan.changed_files)
    assert next(t for t in plan.targets if t.path == "relations.json").new is None


def test_install_reaches_exactly_the_new_state(tmp_path):
    ra, rb = revisions(tmp_path)
    root = make_workspace(tmp_path / "m", STATE_A)
    stage = make_stage(tmp_path / "stage", STATE_B)
    assert workspace_revision(root) == ra
    inst.install(root, stage, inst.plan_install(root, stage))
    assert workspace_revision(root) == rb
    assert snapshot(root) == {k: v.encode() for k, v in {**STATE_B, **INTERNAL}.items()}
    assert not (root / ".scriptorium-txn").exists()
    assert not (root / ".scriptorium" / inst.JOURNAL_NAME).exists()
    # installed files 0600, installed dirs 0700
    for rel in ("topics/core.md", "topics/projects/new/plan.md", "core.md", "sources/openprogram/_v2/s2.md"):
        assert stat.S_IMODE((root / rel).stat().st_mode) == 0o600, rel
    for rel in ("topics", "topics/projects/new", "timeline/2026"):
        assert stat.S_IMODE((root / rel).stat().st_mode) == 0o700, rel
    # the install of the same stage again is a no-op plan
    assert inst.plan_install(root, stage).empty


def test_restricted_stage_never_touches_sources(tmp_path):
    root = make_workspace(tmp_path / "m", STATE_A)
    state = {k: v for k, v in STATE_B.items() if not k.startswith("sources/")}
    stage = make_stage(tmp_path / "stage", state)
    plan = inst.plan_install(root, stage)
    assert not any(t.path.startswith("sources") for t in plan.targets)
    inst.install(root, stage, plan)
    assert (root / "sources/openprogram/_v2/s1.md").read_text() == STATE_A["sources/openprogram/_v2/s1.md"]


def test_recover_without_journal_discards_scratch(tmp_path):
    root = make_workspace(tmp_path / "m", STATE_A)
    before = snapshot(root)
    (root / ".scriptorium-txn" / "new" / "topics").mkdir(parents=True)
    (root / ".scriptorium-txn" / "new" / "topics" / "x.md").write_text("junk")
    report = inst.recover(root)
    assert report.action == "discarded"
    assert snapshot(root) == before
    assert inst.recover(root).action == "none"


def test_stale_journal_touches_nothing(tmp_path):
    root = make_workspace(tmp_path / "m", STATE_A)
    body = {"version": 1, "scratch": ".scriptorium-txn",
            "targets": [{"kind": "file", "path": "core.md", "old": "0" * 64, "new": "1" * 64}]}
    (root / ".scriptorium" / inst.JOURNAL_NAME).write_text(json.dumps(body))
    before = snapshot(root)
    report = inst.recover(root)
    assert report.action == "stale-journal"
    assert report.problems and "superseded" in report.problems[-1].message
    after = snapshot(root)
    assert after == {k: v for k, v in before.items() if not k.endswith(inst.JOURNAL_NAME)}


def test_openprogram_backup_restores_missing_topics(tmp_path):
    root = make_workspace(tmp_path / "m", STATE_A)
    backup = root / ".scriptorium-block-backup"
    backup.mkdir()
    os.rename(root / "topics", backup / "topics")
    report = inst.recover(root)
    assert (root / "topics" / "core.md").is_file()
    assert any("restored topics/" in p.message for p in report.problems)
