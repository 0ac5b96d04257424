"""Dry-run previews of every job agree with the job's own --dry-run and change no byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_tui.core.tx import api as tx
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.tx.stage import source_index
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.pipeline.preview import ANY_TOPIC, DERIVED, JOBS, preview_job
from memory_tui.pipeline.write import Context, write

NOW = 1796100000.0


def ctx_for(state: Path, **kw) -> Context:
    kw.setdefault("clock", lambda: NOW)
    return Context(state, git_env=fixed_env(), **kw)


def snapshot(state: Path) -> dict:
    return {p: p.read_bytes() for p in sorted(state.rglob("*")) if p.is_file() and ".git" not in p.parts}


def test_no_preview_changes_a_byte(fixture_state):
    before = snapshot(fixture_state)
    for job in JOBS:
        preview_job(ctx_for(fixture_state), job)
    assert snapshot(fixture_state) == before


def test_forced_write_preview_is_the_dry_run_plan(fixture_state, expected):
    ctx = ctx_for(fixture_state)
    report = write(ctx, force=True, dry_run=True)
    p = preview_job(ctx, "write-all-forced")
    planned = [b for b in report.batches if b.result == "planned"]
    assert p.job == "write-all-forced" and p.writer == "extractive" and p.unit == "turns"
    assert [b.ids for b in p.batches] == [tuple(b.ids) for b in report.batches]
    assert p.count == sum(len(b.ids) for b in planned) > 0
    assert p.tokens == sum(b.tokens for b in planned)
    assert p.revision == expected["revision"]
    for b in planned:
        assert f"memory/sources/openprogram/_v2/{b.session_id}.md" in p.files
        # every planned turn's node file is listed: it gets the mark
        for node in b.ids:
            assert any(f.startswith(f"sessions/{b.session_id}/history/") and f.endswith(f"-{node}.json") for f in p.files), node
    assert any(f.startswith("memory/topics/conversations/") for f in p.files)
    assert set(DERIVED) <= set(p.files)
    assert not p.nothing_to_do


def test_write_preview_of_one_branch_and_other_writers(fixture_state, expected):
    sid = "local_a1b2c3d4e5"
    tips = expected["sessions"][sid]["tips"]
    short = next(t for t, v in tips.items() if not v["is_head"] and v["pending_ids"] and not v["archived"])
    ctx = ctx_for(fixture_state)
    p = preview_job(ctx, "write", session_id=sid, branch=short, force=True)
    assert p.title == f"write {sid} branch {short} (forced)"
    assert p.batches and all(b.tip == short for b in p.batches)
    assert [i for b in p.batches for i in b.ids] == tips[short]["pending_ids"]
    per_turn = preview_job(ctx, "write", session_id=sid, branch=short)  # its newest turn is old: due
    assert per_turn.count == len(tips[short]["first_batch_ids"]) and per_turn.title.endswith("(per-turn)")
    # a clock just before the turns: under an hour old and below the threshold, so nothing is due
    early = preview_job(ctx_for(fixture_state, clock=lambda: 0.0), "write", session_id=sid, branch=short)
    assert early.count == 0 and early.nothing_to_do
    assert [b.result for b in early.batches] == ["below-threshold"]
    assert any("of 8000 tokens" in n for n in early.notes)  # says why
    other = preview_job(ctx_for(fixture_state, settings=ctx.settings.with_overrides(name="command", command=["true"])),
                        "write", session_id=sid, branch=short, force=True)
    assert ANY_TOPIC in other.files and other.writer == "command"


def test_reorganize_preview_lists_the_duplicate_and_its_topic(fixture_state):
    from memory_tui.core.format.topics import parse_tree

    root = fixture_state / "memory"
    tree = parse_tree(root / "topics", resolve=source_index(root).resolve_target)
    unit = next(u for u in tree.units if u.topic_path == "people/ada.md")
    res = tx.update(root, workspace_revision(root), memory_changes=[{
        "op": "create_record", "content": unit.content, "time": unit.when, "source_refs": [unit.source_refs[0]],
        "destination": {"topic_path": "topics/people/ada-copy.md", "headings": ["Ada"], "position": "end"},
    }], git_commit="off")
    assert res.ok
    p = preview_job(ctx_for(fixture_state), "reorganize")
    assert p.count == 2 and [b.note for b in p.batches] == ["update_record", "delete_record"]
    assert p.batches[0].ids == (unit.memory_id,)
    assert {"memory/topics/people/ada.md", "memory/topics/people/ada-copy.md"} <= set(p.files)
    assert "folds 1 duplicate record(s) into 1" in p.notes


def test_reorganize_preview_when_the_lock_is_busy(fixture_state):
    import threading

    from memory_tui.core.store.lock import write_lock

    ctx = ctx_for(fixture_state)
    held, done = threading.Event(), threading.Event()

    def hold():
        with write_lock(ctx.memory_root, timeout=1):
            held.set()
            done.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    try:
        held.wait(5)
        import memory_tui.pipeline.reorganize as w  # its lock wait is core.lock.TIMEOUT_EDIT

        old = w.TIMEOUT_EDIT
        w.TIMEOUT_EDIT = 0.1
        try:
            p = preview_job(ctx, "reorganize")
        finally:
            w.TIMEOUT_EDIT = old
    finally:
        done.set()
        t.join()
    # the plan is read without the lock (issue 14: a dry run never takes it); the lock is named
    assert p.busy and "write lock" in p.notes[0]
    assert p.count == preview_job(ctx, "reorganize").count  # the same plan as with the lock free


def test_backfill_preview_is_the_dry_run_plan(fixture_state):
    from memory_tui.pipeline.backfill import backfill
    from memory_tui.pipeline.writers.base import WriterOutcome

    class DoesNothing:
        name = "nothing"
        history: list = []

        def write(self, task, port):
            return WriterOutcome(changed_topics=(), summary="nothing")

    write(ctx_for(fixture_state, writer=DoesNothing()), "local_9f1e2d3c4b", force=True)
    ctx = ctx_for(fixture_state)
    dry = backfill(ctx, dry_run=True)
    p = preview_job(ctx, "backfill")
    assert p.unit == "sources" and p.count == dry.candidates > 0
    assert [b.ids for b in p.batches] == [b.ids for b in dry.batches]
    assert p.tokens == sum(b.tokens for b in dry.batches)
    assert "memory/topics/conversations/help-me-plan-backups-for-my-home-nas.md" in p.files


def test_migrate_preview_names_the_marks_it_would_set(fixture_state, expected):
    from memory_tui.pipeline.migrate import migrate_if_needed

    ctx = ctx_for(fixture_state)
    assert preview_job(ctx, "migrate").nothing_to_do
    sid, wid = "local_a1b2c3d4e5", expected["workspace_id"]
    for f in (fixture_state / "sessions" / sid / "history").glob("*.json"):
        node = json.loads(f.read_text(encoding="utf-8"))
        if (node.get("metadata") or {}).get("memory_written_scriptorium") == wid:
            from memory_tui.sessions.marks import serialize_node

            del node["metadata"]["memory_written_scriptorium"]
            f.write_text(serialize_node(node), encoding="utf-8")
    rt = fixture_state / "memory/.scriptorium/runtime.json"
    data = json.loads(rt.read_text())
    data["cursors"] = {sid: {"message_id": "x", "ordinal": 1}}
    rt.write_text(json.dumps(data, indent=2) + "\n")
    before = snapshot(fixture_state)
    p = preview_job(ctx, "migrate")
    assert snapshot(fixture_state) == before
    assert p.count > 0 and sid in {b.session_id for b in p.batches}
    assert "memory/.scriptorium/runtime.json" in p.files
    result = migrate_if_needed(ctx)
    assert {b.session_id: set(b.ids) for b in p.batches} == {k: set(v) for k, v in result["sessions"].items()}
    assert p.count == result["marked"]


def test_unknown_job_is_refused(fixture_state):
    with pytest.raises(ValueError, match="unknown job"):
        preview_job(ctx_for(fixture_state), "explode")


def test_preview_verb_prints_the_same_preview(fixture_state, capsys):
    from memory_tui.cli import main

    before = snapshot(fixture_state)
    assert main(["--state", str(fixture_state), "preview", "write-all-forced", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    p = preview_job(ctx_for(fixture_state), "write-all-forced")
    assert data["count"] == p.count > 0 and data["files"] == list(p.files) and data["tokens"] == p.tokens
    assert main(["--state", str(fixture_state), "preview", "write-all-forced"]) == 0
    out = capsys.readouterr().out
    assert f"{p.count} turns, {p.tokens} tokens" in out and "files likely to change:" in out
    assert p.files[0] in out
    assert main(["--state", str(fixture_state), "preview", "backfill", "--force"]) == 2
    assert snapshot(fixture_state) == before


def test_preview_verb_runs_in_the_job_verbs_context(fixture_state, tmp_path, monkeypatch, capsys):
    # One Context builder: the settings file and --writer/--topic reach `preview` as they reach `write`.
    from memory_tui.cli import main

    cfg = tmp_path / "config.toml"
    cfg.write_text('[writer]\ntopic = "topics/notes/from-settings.md"\n')
    monkeypatch.setenv("MEMORY_TUI_CONFIG", str(cfg))
    base = ["--state", str(fixture_state), "preview", "write-all-forced", "--json"]
    assert main(base) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    assert "memory/topics/notes/from-settings.md" in files
    assert not any(f.startswith("memory/topics/conversations/") for f in files)
    assert main(base + ["--topic", "topics/notes/picked.md"]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    assert "memory/topics/notes/picked.md" in files and "memory/topics/notes/from-settings.md" not in files
    assert main(base + ["--writer", "command"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["writer"] == "command" and ANY_TOPIC in data["files"]
    # a bad settings file stops the preview as it stops the job, naming file and line
    cfg.write_text('[writer]\nname = "telepathy"\n')
    assert main(["--state", str(fixture_state), "preview", "write-all-forced"]) == 1
    assert f"{cfg}:2" in capsys.readouterr().err
    assert main(["--state", str(fixture_state), "write", "--dry-run"]) == 1
    assert f"{cfg}:2" in capsys.readouterr().err
