"""The write pipeline against OpenProgram's own state directory."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from memory_tui.core.store.gitlog import fixed_env
from memory_tui.pipeline.write import Context, revision, write
from memory_tui.pipeline.writers.base import WriterOutcome

MARK = "memory_written_scriptorium"
NOW = 1796100000.0


def ctx_for(state: Path, **kw) -> Context:
    return Context(state, git_env=fixed_env(), clock=lambda: NOW, **kw)


def marks(state: Path) -> dict[tuple[str, str], str | None]:
    out = {}
    for f in sorted((state / "sessions").glob("*/history/*.json")):
        node = json.loads(f.read_text(encoding="utf-8"))
        out[(f.parts[-3], node["id"])] = (node.get("metadata") or {}).get(MARK)
    return out


def newly_marked(before, after, wid):
    return {k for k, v in after.items() if v == wid and before.get(k) != wid}


def test_forced_write_marks_only_written_batches_and_second_run_is_a_no_op(fixture_state, expected):
    wid = expected["workspace_id"]
    before = marks(fixture_state)
    report = write(ctx_for(fixture_state), force=True)
    assert report.outcome.status == "success", report.to_json()
    after = marks(fixture_state)
    written = {(b.session_id, i) for b in report.written for i in b.ids}
    assert newly_marked(before, after, wid) == written
    # nothing else changed in any node's mark
    assert {k: v for k, v in after.items() if k not in written} == {k: v for k, v in before.items() if k not in written}

    # Every pending id of expected.json is written or explained.
    trigger = expected["trigger_tokens"]
    for sid, sess in expected["sessions"].items():
        order = sess["forced_pass_branch_order"]
        for tip, info in sess["tips"].items():
            for nid in info["pending_ids"]:
                if (sid, nid) in written:
                    continue
                explained = (
                    tip not in order  # archived or not listed: never visited by a forced pass
                    or (tip != order[0] and info["pending_tokens"] < trigger)  # non-head tip below threshold
                    or any((sid, nid) in written for _ in [0])
                )
                assert explained, (sid, tip, nid)
    # each written batch lies inside one expected pending list and starts at its front
    for b in report.written:
        tip_info = expected["sessions"][b.session_id]["tips"][b.tip]
        assert b.ids == tip_info["first_batch_ids"]

    rev = revision(fixture_state / "memory")
    again = write(ctx_for(fixture_state), force=True)
    assert again.batches == [] and again.outcome.status == "none"
    assert revision(fixture_state / "memory") == rev
    assert marks(fixture_state) == after
    status = json.loads((fixture_state / "memory/.scriptorium/writer-status.json").read_text())
    assert status["last_outcome"] == "success"
    arch = fixture_state / "memory/sources/openprogram/_v2/local_9f1e2d3c4b.md"
    assert stat.S_IMODE(os.stat(arch).st_mode) == 0o600


def test_dry_run_changes_no_byte(fixture_state):
    def snapshot():
        return {p: p.read_bytes() for p in sorted(fixture_state.rglob("*")) if p.is_file() and ".git" not in p.parts}

    before = snapshot()
    report = write(ctx_for(fixture_state), force=True, dry_run=True)
    assert [b.result for b in report.batches] == ["planned", "planned"]
    assert snapshot() == before


def test_crash_between_install_and_marking_is_marked_by_the_next_open(fixture_state, monkeypatch, expected):
    """Killed after the install, before the first mark: the marks intent (written before the
    writer ran) names the batch, and the next locked open marks it because the topics now cite
    it, so the state is exactly the new one and the batch is never offered to the writer again."""
    import memory_tui.sessions.marks as marks_mod

    class Crash(BaseException):
        pass

    def boom(*a, **k):
        raise Crash()

    sid, wid = "local_9f1e2d3c4b", expected["workspace_id"]
    first = expected["sessions"][sid]["tips"]["f00000000004_reply"]["first_batch_ids"]
    real = marks_mod.mark_nodes
    monkeypatch.setattr(marks_mod, "mark_nodes", lambda *a, **k: boom() if a[1] == first else real(*a, **k))
    before = marks(fixture_state)
    with pytest.raises(Crash):
        write(ctx_for(fixture_state), sid, force=True)
    assert marks(fixture_state) == before  # installed, not marked
    assert (fixture_state / "memory/.scriptorium" / marks_mod.INTENT_NAME).exists()
    monkeypatch.undo()
    report = write(ctx_for(fixture_state), sid, force=True)
    assert report.outcome.code != "WRITER_NO_PROGRESS", report.to_json()
    # no failure: the open marked the batch, and nothing else of the session was due
    assert report.outcome.status == "none" and report.batches == [], report.to_json()
    assert not any(b.ids == first for b in report.batches)  # finished by the open, not re-offered
    after = marks(fixture_state)
    assert all(after[(sid, i)] == wid for i in first)
    assert not (fixture_state / "memory/.scriptorium" / marks_mod.INTENT_NAME).exists()


def test_crash_after_the_marks_intent_is_finished_without_the_writer(fixture_state, monkeypatch, expected):
    """Killed after the marks intent, before the first mark: the next write marks the batch
    from the intent before reading the sessions, so the writer never sees it again."""
    import memory_tui.sessions.marks as marks_mod

    class Crash(BaseException):
        pass

    def boom(*a, **k):
        raise Crash()

    monkeypatch.setattr(marks_mod, "mark_nodes", boom)
    before = marks(fixture_state)
    with pytest.raises(Crash):
        write(ctx_for(fixture_state), "local_9f1e2d3c4b", force=True)
    assert marks(fixture_state) == before
    monkeypatch.undo()
    report = write(ctx_for(fixture_state), "local_9f1e2d3c4b", force=True)
    ids = expected["sessions"]["local_9f1e2d3c4b"]["tips"]["f00000000004_reply"]["first_batch_ids"]
    assert all(b.ids != ids for b in report.batches) and report.outcome.status in ("success", "none")
    after = marks(fixture_state)
    assert all(after[("local_9f1e2d3c4b", i)] == expected["workspace_id"] for i in ids)


class SameRejectedEdit:
    """A writer that keeps writing uncited prose: every commit is refused."""

    name = "stubborn"
    history: list = []

    def write(self, task, tx):
        from memory_tui.pipeline.writers.base import run_with_repair

        def attempt(rejection):
            stage = tx.open_stage(task.allowed_refs)
            (stage.path / "topics" / "notes.md").write_text("# Notes\n\nJust some prose without a citation.\n")
            info = tx.commit_edits(stage)
            return WriterOutcome(info.changed_topics, info.revision)

        return run_with_repair(attempt)


class DoesNothing:
    name = "idle"
    history: list = []

    def write(self, task, tx):
        return WriterOutcome()


@pytest.mark.parametrize("writer,code", [(SameRejectedEdit(), "COMMIT_REJECTED"), (DoesNothing(), "WRITER_NO_PROGRESS")])
def test_silent_failure_guard(fixture_state, writer, code):
    before = marks(fixture_state)
    report = write(ctx_for(fixture_state, writer=writer), force=True)
    assert report.outcome.status == "non-retryable" and report.outcome.code == code
    assert marks(fixture_state) == before
    status = json.loads((fixture_state / "memory/.scriptorium/writer-status.json").read_text())
    assert status["last_outcome"] == "failure" and status["last_failure"]["reason_code"] == code
    assert status["last_failure"]["retryable"] is False
    assert not (fixture_state / "memory/topics/notes.md").exists()


def test_lock_busy_is_retryable(fixture_state):
    import fcntl

    lock = fixture_state / "memory/.scriptorium/write.lock"
    fd = os.open(lock, os.O_RDWR)
    import subprocess

    # hold the lock from another process (flock is per open file description)
    holder = subprocess.Popen([sys.executable, "-c", f"import fcntl,os,time;fd=os.open({str(lock)!r},os.O_RDWR);fcntl.flock(fd,fcntl.LOCK_EX);print('x',flush=True);time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()
        report = write(ctx_for(fixture_state), "local_9f1e2d3c4b", force=True)
        assert report.outcome.status == "retryable" and report.outcome.code == "CONCURRENT_UPDATE"
    finally:
        holder.kill()
        holder.wait()
        os.close(fd)
    del fcntl


def test_command_writer_with_a_fake_agent(fixture_state, tmp_path):
    from memory_tui.pipeline.writers.command import CommandWriter

    agent = tmp_path / "agent.py"
    agent.write_text(
        "import os, sys\n"
        "prompt = sys.stdin.read()\n"
        "assert 'Turns (observed' in prompt\n"
        "ref = os.environ['MEMORY_TUI_ALLOWED_REFS'].splitlines()[0]\n"
        "os.makedirs('topics/people', exist_ok=True)\n"
        "open('topics/people/nas.md', 'w').write('# NAS\\n\\nThe owner backs up the home NAS.[^e1]\\n\\n'\n"
        "    '[^e1]: Time: `2026-11-30`; Sources: [backup plan](' + ref + ')\\n')\n"
        "print('done')\n"
    )
    w = CommandWriter((sys.executable, str(agent)), timeout=60)
    report = write(ctx_for(fixture_state, writer=w), "local_9f1e2d3c4b", force=True)
    assert report.outcome.status == "success", report.to_json()
    assert report.batches[0].changed_topics == ["topics/people/nas.md"]
    text = (fixture_state / "memory/topics/people/nas.md").read_text()
    assert "^" in text and "[^e-" in text  # runtime ids assigned
    hist = (fixture_state / "memory/.scriptorium/agent-history.jsonl").read_text().splitlines()
    assert json.loads(hist[-1])["reply"].strip() == "done"


def test_command_writer_failure_codes(fixture_state, tmp_path):
    from memory_tui.pipeline.writers.command import CommandWriter

    bad = tmp_path / "bad.py"
    bad.write_text("import sys; sys.stderr.write('model exploded\\n'); sys.exit(3)\n")
    report = write(ctx_for(fixture_state, writer=CommandWriter((sys.executable, str(bad)))), "local_9f1e2d3c4b", force=True)
    assert report.outcome.code == "MODEL_FAILURE_UNKNOWN" and "model exploded" in report.outcome.message
    missing = write(ctx_for(fixture_state, writer=CommandWriter(("/nonexistent/agent",))), "local_9f1e2d3c4b", force=True)
    assert missing.outcome.code == "MEMORY_PROVIDER_RESOLUTION_FAILED" and missing.outcome.status == "non-retryable"
    slow = tmp_path / "slow.py"
    slow.write_text("import time; time.sleep(10)\n")
    timeout = write(ctx_for(fixture_state, writer=CommandWriter((sys.executable, str(slow)), timeout=0.5)), "local_9f1e2d3c4b", force=True)
    assert timeout.outcome.code == "MODEL_TIMEOUT" and timeout.outcome.status == "retryable"


def test_reorganize_and_backfill_shapes(fixture_state):
    from memory_tui.pipeline.backfill import backfill
    from memory_tui.pipeline.reorganize import reorganize

    # A writer that records nothing leaves its batch archived but uncited: backfill's job.
    write(ctx_for(fixture_state, writer=DoesNothing()), "local_9f1e2d3c4b", force=True)
    ctx = ctx_for(fixture_state)
    dry = backfill(ctx, dry_run=True)
    assert dry.candidates == dry.remaining and dry.batches
    before = marks(fixture_state)
    out = backfill(ctx)
    # the spec's keys, plus the declined sources listed apart
    assert set(out.to_json()) == {"status", "candidates", "processed", "remaining", "revision", "declined"}
    # OpenProgram's counts: processed = the candidates a topic cites after the run
    assert out.candidates == dry.candidates and out.processed == out.candidates - out.remaining > 0
    assert marks(fixture_state) == before  # backfill adds/removes no marks
    res = reorganize(ctx)
    assert res.outcome.status == "ok" and isinstance(res.to_json()["changed_files"], list)


def test_reorganize_folds_duplicates_keeping_ids(fixture_state):
    from memory_tui.core.tx import api
    from memory_tui.pipeline.context import topic_tree as _tree
    from memory_tui.pipeline.reorganize import reorganize

    root = fixture_state / "memory"
    tree = _tree(root)
    unit = next(u for u in tree.units if u.topic_path == "people/ada.md")
    ref = unit.source_refs[0]
    res = api.update(root, revision(root), memory_changes=[{
        "op": "create_record", "content": unit.content, "time": unit.when, "source_refs": [ref],
        "destination": {"topic_path": "topics/people/ada-copy.md", "headings": ["Ada"], "position": "end"},
    }], git_commit="off")
    assert res.ok, res.to_json()
    n_before = len(_tree(root).units)
    out = reorganize(ctx_for(fixture_state))
    assert out.outcome.status == "ok" and "topics/people/ada-copy.md" in out.changed_files, out
    after = _tree(root)
    assert len(after.units) == n_before - 1
    assert unit.memory_id in after.ids
    assert not (root / "topics/people/ada-copy.md").exists()  # pruned


def test_cli_verbs_exit_codes_and_json(fixture_state, capsys, monkeypatch, tmp_path):
    from memory_tui.cli import main

    monkeypatch.setenv("MEMORY_TUI_CONFIG", str(tmp_path / "none.toml"))
    capsys.readouterr()
    assert main(["--state", str(fixture_state), "write", "--force", "--dry-run", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dry_run"] and [b["result"] for b in data["batches"]] == ["planned", "planned"]
    assert main(["--state", str(fixture_state), "write", "local_9f1e2d3c4b", "--force", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["outcome"] == "success" and data["marked_turns"] == 8
    assert main(["--state", str(fixture_state), "reorganize", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "ok"
    assert main(["--state", str(fixture_state), "migrate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cursors_removed"] is False
    code = main(["--state", str(fixture_state), "backfill", "--dry-run", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "ok"  # a plan never fails (issue 13: was exit 1 "incomplete")


def test_backfill_dry_run_is_ok_and_a_run_leaving_sources_uncited_is_incomplete(fixture_state, capsys):
    """A plan never fails. A run reports OpenProgram's rule (spec §7.6): ``ok`` only when no
    trusted source is left uncited, else ``incomplete`` (exit 1) -- with no ``error`` when no
    batch failed, and the sources the writer declined listed apart."""
    import json as _json

    from memory_tui.cli import main as cli_main
    from memory_tui.pipeline.backfill import backfill

    write(ctx_for(fixture_state, writer=DoesNothing()), "local_9f1e2d3c4b", force=True)
    dry = backfill(ctx_for(fixture_state), dry_run=True)
    assert dry.outcome.status == "ok" and dry.remaining == dry.candidates > 0
    capsys.readouterr()
    assert cli_main(["--state", str(fixture_state), "--json", "backfill", "--dry-run"]) == 0
    assert _json.loads(capsys.readouterr().out)["status"] == "ok"
    out = backfill(ctx_for(fixture_state, writer=DoesNothing()))
    assert out.outcome.status == "incomplete" and not out.outcome.failed and "error" not in out.to_json()
    assert out.remaining == out.candidates and out.processed == 0 and len(out.declined) == out.remaining


def test_reorganize_keeps_near_identical_records_that_say_different_things(fixture_state):
    """Two rules worded alike (word overlap well above 0.85) are different claims: folding one
    into the other would delete a rule and move its evidence onto a record that says something
    else. Both stay, and the pair is reported as a candidate."""
    from memory_tui.core.tx import api
    from memory_tui.pipeline.context import topic_tree as _tree
    from memory_tui.pipeline.reorganize import look_alike, reorganize, same_thing

    root = fixture_state / "memory"
    ref = next(u for u in _tree(root).units if u.topic_path == "people/ada.md").source_refs[0]
    rules = [
        "Migration rule 5 of the archive plan: copy the legacy notebooks into the shared folder before the team "
        "renames any tag, checks every link, and reports the result to the owner in the weekly review.",
        "Migration rule 6 of the archive plan: copy the legacy notebooks into the shared folder before the team "
        "renames any tag, checks every link, and reports the result to the owner in the weekly review.",
    ]
    assert look_alike(*rules) and not same_thing(*rules)
    res = api.update(root, revision(root), memory_changes=[{
        "op": "create_record", "content": text, "time": "2026-11", "source_refs": [ref],
        "destination": {"topic_path": "topics/projects/migration.md", "headings": ["Migration"], "position": "end"},
    } for text in rules], git_commit="off")
    assert res.ok, res.to_json()
    ids = sorted(res.block_ids.values())
    before = (root / "topics/projects/migration.md").read_bytes()
    out = reorganize(ctx_for(fixture_state))
    assert out.outcome.status == "ok", out
    after = _tree(root)
    assert all(after.has_id(i) for i in ids)
    assert sorted(u.content for u in after.units if u.topic_path == "projects/migration.md") == sorted(rules)
    assert (root / "topics/projects/migration.md").read_bytes() == before
    assert [sorted(c["memory_ids"]) for c in out.to_json()["candidates"]] == [ids]


_FOLD_JUDGE = r'''
import json, os, sys
if os.environ.get("MEMORY_TUI_STAGE_KIND") != "fold" or os.listdir("."):
    sys.exit(3)  # asked for anything but a verdict, or not in an empty scratch folder
same = []
for line in sys.stdin:
    if line.startswith("{"):
        pair = json.loads(line)
        if all("ryokan" in r["text"] for r in pair["records"]):
            same.append(pair["pair"])
print("judged the pairs")
print(json.dumps({"same": same}))
'''


def test_reorganize_folds_only_the_candidates_the_command_writer_confirms(fixture_state, tmp_path):
    """The configured command writer is asked about the look-alike candidates: the pair it
    confirms (two wordings of one booking) folds into the older record with both records'
    sources; the pair it refuses (two different migration rules) stays as it is."""
    from memory_tui.core.tx import api
    from memory_tui.pipeline.context import topic_tree as _tree
    from memory_tui.pipeline.reorganize import look_alike, reorganize, same_thing
    from memory_tui.pipeline.writers.command import CommandWriter

    root = fixture_state / "memory"
    units = _tree(root).units
    ref_a = next(u for u in units if u.topic_path == "people/ada.md").source_refs[0]
    ref_b = next(r for u in units for r in u.source_refs if r != ref_a)
    rules = [
        "Migration rule 5 of the archive plan: copy the legacy notebooks into the shared folder before the team "
        "renames any tag, checks every link, and reports the result to the owner in the weekly review.",
        "Migration rule 6 of the archive plan: copy the legacy notebooks into the shared folder before the team "
        "renames any tag, checks every link, and reports the result to the owner in the weekly review.",
    ]
    stays = ["Ada books the ryokan in Gion for three nights and pays at check-in with her travel card.",
             "Ada books the ryokan in Gion for three nights and pays at check-in with her travel card, as usual."]
    for a, b in (rules, stays):
        assert look_alike(a, b) and not same_thing(a, b)

    def create(texts, topic, refs):
        res = api.update(root, revision(root), memory_changes=[{
            "op": "create_record", "content": text, "time": "2026-11", "source_refs": [ref],
            "destination": {"topic_path": topic, "headings": ["Plan"], "position": "end"},
        } for text, ref in zip(texts, refs)], git_commit="off")
        assert res.ok, res.to_json()
        return [res.block_ids[k] for k in sorted(res.block_ids)]

    rule_ids = create(rules, "topics/projects/migration.md", [ref_a, ref_a])
    stay_ids = create(stays, "topics/projects/stay.md", [ref_a, ref_b])
    migration = (root / "topics/projects/migration.md").read_bytes()
    judge = tmp_path / "judge.py"
    judge.write_text(_FOLD_JUDGE, encoding="utf-8")

    out = reorganize(ctx_for(fixture_state, writer=CommandWriter((sys.executable, str(judge)), timeout=60)))
    assert out.outcome.status == "ok", out
    after = _tree(root)
    # refused: both rules, byte for byte, still a candidate
    assert all(after.has_id(i) for i in rule_ids)
    assert (root / "topics/projects/migration.md").read_bytes() == migration
    assert [sorted(c["memory_ids"]) for c in out.to_json()["candidates"]] == [sorted(rule_ids)]
    assert "the command writer did not confirm" in out.to_json()["candidates"][0]["reason"]
    # confirmed: one record left, the older id, citing both sources
    kept = [u for u in after.units if u.topic_path == "projects/stay.md"]
    assert [u.memory_id for u in kept] == [stay_ids[0]] and not after.has_id(stay_ids[1])
    assert set(kept[0].source_refs) == {ref_a, ref_b}
    assert "topics/projects/stay.md" in out.changed_files
    history = [json.loads(line) for line in (root / ".scriptorium" / "agent-history.jsonl").read_text().splitlines()]
    fold = [h for h in history if h.get("stage") == "fold"]
    assert fold and '{"same": [' in fold[-1]["reply"] and "Migration rule 6" in fold[-1]["prompt"]


@pytest.mark.parametrize("script", ["import sys; sys.exit(1)", "print('they are all the same')",
                                    "open({memory!r} + '/notes.txt', 'w').write('x'); print('{{\"same\": [1]}}')"])
def test_a_fold_judge_that_fails_or_answers_unreadably_folds_nothing(fixture_state, tmp_path, script):
    from memory_tui.core.tx import api
    from memory_tui.pipeline.context import topic_tree as _tree
    from memory_tui.pipeline.reorganize import reorganize
    from memory_tui.pipeline.writers.command import CommandWriter

    root = fixture_state / "memory"
    ref = next(u for u in _tree(root).units if u.topic_path == "people/ada.md").source_refs[0]
    stays = ["Ada books the ryokan in Gion for three nights and pays at check-in with her travel card.",
             "Ada books the ryokan in Gion for three nights and pays at check-in with her travel card, as usual."]
    res = api.update(root, revision(root), memory_changes=[{
        "op": "create_record", "content": text, "time": "2026-11", "source_refs": [ref],
        "destination": {"topic_path": "topics/projects/stay.md", "headings": ["Plan"], "position": "end"}} for text in stays],
        git_commit="off")
    assert res.ok, res.to_json()
    before = (root / "topics/projects/stay.md").read_bytes()
    judge = tmp_path / "judge.py"
    judge.write_text(script.format(memory=str(root)), encoding="utf-8")
    out = reorganize(ctx_for(fixture_state, writer=CommandWriter((sys.executable, str(judge)), timeout=60)))
    assert out.outcome.status == "ok", out
    assert (root / "topics/projects/stay.md").read_bytes() == before
    assert len(out.to_json()["candidates"]) == 1
    history = [json.loads(line) for line in (root / ".scriptorium" / "agent-history.jsonl").read_text().splitlines()]
    fold = [h for h in history if h.get("stage") == "fold"]
    if "notes.txt" in script:  # it answered, but it wrote into the workspace: its answer is not taken
        assert "PATH_OUTSIDE_WORKSPACE" in fold[-1]["error"]
