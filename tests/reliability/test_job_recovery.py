"""Jobs with real work, interrupted at a fixed point (a deterministic fault hook: a patched
step raises a ``BaseException`` the job cannot catch, as a kill would stop it there), then
the next locked open of ANY verb: it must finish what the job left, exactly as an
uninterrupted run finishes it, with git clean and no temp file of a dead process left.

The random-instant version of the same checks is ``crash_driver.py`` (``run_slow.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import memory_tui  # noqa: F401 - wires the engine's open step, as every entry point does
from memory_tui.cli import main
from memory_tui.core.store import gitlog
from memory_tui.core.store.lock import write_lock
from memory_tui.core.tx import api as tx
from memory_tui.core.tx.stage import open_locked
from memory_tui.pipeline import backfill as backfill_mod
from memory_tui.pipeline import reorganize as reorganize_mod
from memory_tui.pipeline.backfill import backfill
from memory_tui.pipeline.context import Context, JobCancelled
from memory_tui.pipeline.migrate import migrate_if_needed
from memory_tui.pipeline.reorganize import reorganize
from memory_tui.pipeline.reports import BackfillReport, ReorganizeReport
from memory_tui.pipeline.write import write
from memory_tui.sessions import marks as marks_mod

import crash_driver as cd
from rel_support import leftovers, node_marks

NOW = 1796100000.0
ENV = gitlog.fixed_env()


class Kill(BaseException):
    """Stands for the kill: nothing in the job catches it."""


def _ctx(state, **kw):
    return Context(state, git_env=ENV, clock=lambda: NOW, **kw)


def _dirty(mem) -> str:
    return cd._git_dirty(mem)


def _last_commit(mem) -> str:
    return subprocess.run(["git", "log", "-1", "--format=%s"], cwd=mem, capture_output=True, text=True).stdout.strip()


def _open(state) -> None:
    """The next locked open, as any verb does it (here: what an edit or a rebuild runs first)."""
    mem = state / "memory"
    with write_lock(mem):
        open_locked(mem)


def _runtime(state) -> dict:
    data = json.loads((state / "memory" / ".scriptorium" / "runtime.json").read_text())
    return {k: data.get(k) for k in ("write_commits_since_global", "local_batches", "local_tokens", "last_global_at", "cursors")}


@pytest.fixture
def work_state(fixture_state):
    """The fixture with its git history (every trial starts committed)."""
    assert tx.rebuild_views(fixture_state).ok
    gitlog.commit(fixture_state / "memory", "start", env=ENV)
    assert _dirty(fixture_state / "memory") == ""
    return fixture_state


# ------------------------------------------------------------------------------ reorganize


def test_reorganize_killed_inside_git_commit_is_committed_by_the_next_open_of_any_verb(work_state, monkeypatch):
    cd.give_work("reorganize", work_state)
    mem = work_state / "memory"
    assert _dirty(mem) == ""
    real = gitlog.commit

    def killed_in_commit(root, message, **kw):
        if message == reorganize_mod.REORGANIZE_MESSAGE:
            raise Kill()
        return real(root, message, **kw)

    monkeypatch.setattr(gitlog, "commit", killed_in_commit)
    with pytest.raises(Kill):
        reorganize(_ctx(work_state))
    monkeypatch.setattr(gitlog, "commit", real)
    assert _dirty(mem) != ""  # installed, not committed: what the kill leaves
    r = tx.rebuild_views(work_state)  # the next open: a different verb
    assert r.ok
    assert _dirty(mem) == "" and leftovers(mem) == []
    assert _last_commit(mem) == gitlog.MSG_RECOVER


# ------------------------------------------------------------------------------ backfill


@pytest.fixture
def backfill_state(work_state):
    cd.give_work("backfill", work_state)  # after a forced write: 7 uncited sources
    return work_state


def test_backfill_killed_in_its_second_batch_leaves_the_first_committed_and_git_clean(backfill_state, monkeypatch):
    mem = backfill_state / "memory"
    real = backfill_mod.run_writer
    calls = []

    def second_dies(ctx, task):
        calls.append(task)
        if len(calls) == 2:
            raise Kill()
        return real(ctx, task)

    monkeypatch.setattr(backfill_mod, "run_writer", second_dies)
    with pytest.raises(Kill):
        backfill(_ctx(backfill_state))
    _open(backfill_state)
    assert _dirty(mem) == "" and leftovers(mem) == []
    assert _last_commit(mem) == backfill_mod.BACKFILL_MESSAGE  # the first batch: its own committed step


def test_backfill_reports_openprograms_counts_and_a_second_run_is_a_no_op(backfill_state, capsys):
    mem = backfill_state / "memory"
    first = backfill(_ctx(backfill_state))
    # OpenProgram's rule on this state: 7 candidates, 2 cited by the passes, 5 still uncited
    assert (first.outcome.status, first.candidates, first.processed, first.remaining) == ("incomplete", 7, 2, 5)
    assert len(first.declined) == 5 and first.not_offered == 0
    assert all(d.answer == "nothing new to record" and d.writer == "extractive" for d in first.declined)
    rev, head = first.revision, _last_commit(mem)
    calls = []

    class Counting:
        name = "extractive"

        def write(self, task, port):
            calls.append(task)
            raise AssertionError("a declined source was offered again")

    second = backfill(_ctx(backfill_state, writer=Counting()))
    assert calls == [] and second.revision == rev and _last_commit(mem) == head
    assert (second.outcome.status, second.candidates, second.processed, second.remaining) == ("incomplete", 5, 0, 5)
    assert [d.source_id for d in second.declined] == [d.source_id for d in first.declined]
    body = second.to_json()
    assert list(body)[:5] == ["status", "candidates", "processed", "remaining", "revision"]
    assert len(body["declined"]) == 5
    # the CLI: never "ok" while the same work remains, the declined sources named with the answer
    assert main(["--state", str(backfill_state), "backfill"]) == 1
    out = capsys.readouterr().out
    assert not out.startswith("ok") and "5 declined by the writer, 0 not offered yet" in out
    assert out.count("declined openprogram/") == 5 and "nothing new to record" in out


def test_backfill_summary_for_the_app_names_the_declined_sources(backfill_state):
    from memory_tui.pipeline.jobresult import summarize_backfill

    report = backfill(_ctx(backfill_state))
    summary = summarize_backfill(report, memory_root=backfill_state / "memory")
    assert "5 declined by the writer" in summary.message and report.declined[0].source_id in summary.message
    assert summary.outcome.status != "ok" if hasattr(summary.outcome, "status") else True


def test_cancelled_backfill_carries_its_partial_report_and_leaves_no_uncommitted_install(backfill_state, monkeypatch):
    mem = backfill_state / "memory"
    real = backfill_mod.run_writer
    ran = []

    def counting(ctx, task):
        ran.append(task)
        return real(ctx, task)

    monkeypatch.setattr(backfill_mod, "run_writer", counting)
    with pytest.raises(JobCancelled) as info:
        backfill(_ctx(backfill_state, cancelled=lambda: len(ran) >= 1))
    report = info.value.result
    assert isinstance(report, BackfillReport)
    assert len(report.batches) == 1 and report.offered == len(ran[0].turns) and report.revision is not None
    assert _dirty(mem) == "" and leftovers(mem) == []


def test_cancelled_reorganize_carries_its_partial_report(work_state, monkeypatch):
    cd.give_work("reorganize", work_state)
    mem = work_state / "memory"
    monkeypatch.setattr(reorganize_mod, "CHUNK", 2)  # several transactions: a cancel lands between two
    asked = []

    def cancel_before_the_second_transaction():
        asked.append(1)
        return len(asked) > 2  # the job's own checkpoint, the one before chunk 0, then chunk 1

    with pytest.raises(JobCancelled) as info:
        reorganize(_ctx(work_state, cancelled=cancel_before_the_second_transaction))
    report = info.value.result
    assert isinstance(report, ReorganizeReport) and report.outcome.status == "cancelled"
    assert report.changed_files and report.revision is not None and report.revision != report.revision_before
    assert _dirty(mem) == "" and leftovers(mem) == []


def test_a_cancel_inside_a_batchs_organize_takes_effect_within_one_transaction(work_state, monkeypatch):
    # a write batch that calls for an organize pass over several transactions, cancelled
    # (`x`) as the organize begins: the organize stops after its first transaction, the
    # batch's own end (marks, counters, intent, git) still runs, and no other batch starts
    from memory_tui.pipeline.context import JobPhase
    from memory_tui.pipeline.status import LOCAL_ORGANIZE_BATCHES

    cd.give_work("reorganize", work_state)
    mem = work_state / "memory"
    rt = mem / ".scriptorium" / "runtime.json"
    data = json.loads(rt.read_text(encoding="utf-8"))
    data["local_batches"] = LOCAL_ORGANIZE_BATCHES - 1  # the next written batch calls for a local organize
    rt.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    gitlog.commit(mem, "counters", env=ENV)
    monkeypatch.setattr(reorganize_mod, "CHUNK", 2)  # its three folds are three transactions
    transactions = []
    real_update = reorganize_mod.TransactionPort.update
    monkeypatch.setattr(reorganize_mod.TransactionPort, "update",
                        lambda self, *a, **k: transactions.append(1) or real_update(self, *a, **k))
    pressed = []

    def progress(event) -> None:
        if event.phase == JobPhase.ORGANIZE:
            pressed.append(event)  # the owner presses `x` once the organize shows

    with pytest.raises(JobCancelled) as info:
        write(_ctx(work_state, progress=progress, cancelled=lambda: bool(pressed)), force=True)
    report = info.value.result
    assert len(report.written) == 1  # the batch before the cancel, whole
    (organized,) = report.organize
    assert organized.outcome.status == "cancelled" and "reorganize" in organized.outcome.message
    assert len(transactions) == 1 and organized.changed_files
    assert organized.revision is not None and organized.revision != organized.revision_before
    assert len(pressed) == 1  # no second organize step, no later batch
    marks = node_marks(work_state)
    assert all(marks.get((report.written[0].session_id, i)) for i in report.written[0].ids)
    assert not (mem / ".scriptorium" / marks_mod.INTENT_NAME).exists()
    assert _dirty(mem) == "" and leftovers(mem) == []


# ------------------------------------------------------------------------------ write


def test_write_killed_between_install_and_marks_is_finished_by_any_open_counters_included(work_state, tmp_path, monkeypatch):
    import shutil

    twin = tmp_path / "twin"
    shutil.copytree(work_state, twin, symlinks=True)
    clean = write(_ctx(twin), force=True)
    assert clean.outcome.status == "success"
    want_marks, want_runtime = node_marks(twin), _runtime(twin)

    real = marks_mod.mark_nodes

    def killed(*a, **kw):
        raise Kill()

    before = {k: v for k, v in node_marks(work_state).items() if v}
    monkeypatch.setattr(marks_mod, "mark_nodes", killed)
    with pytest.raises(Kill):
        write(_ctx(work_state), force=True)
    monkeypatch.setattr(marks_mod, "mark_nodes", real)
    mem = work_state / "memory"
    # any other open (a rebuild here) finishes the intent: marks and counters of the batch
    assert tx.rebuild_views(work_state).ok
    assert not (mem / ".scriptorium" / marks_mod.INTENT_NAME).exists()
    assert _dirty(mem) == "" and leftovers(mem) == []
    # the installed batch is marked (so `status` no longer counts it pending), as the
    # uninterrupted run marked it, and nothing else is
    now = {k: v for k, v in node_marks(work_state).items() if v}
    assert set(now) > set(before) and all(want_marks[k] == v for k, v in now.items())
    # the rerun reaches the uninterrupted run's bytes, counters included
    write(_ctx(work_state), force=True)
    assert node_marks(work_state) == want_marks
    assert _runtime(work_state) == want_runtime


# ------------------------------------------------------------------------------ migrate


def test_migrate_killed_between_two_marks_is_finished_by_the_next_open(work_state, tmp_path):
    import shutil

    cd.give_work("migrate", work_state)
    twin = tmp_path / "twin"
    shutil.copytree(work_state, twin, symlinks=True)
    assert migrate_if_needed(_ctx(twin))["marked"] > 1
    want = node_marks(twin)

    calls = []
    real = marks_mod.mark_nodes

    def second_dies(*a, **kw):
        calls.append(a)
        if len(calls) == 2:
            raise Kill()
        return real(*a, **kw)

    import memory_tui.pipeline.recovery as recovery

    orig = recovery.marks.mark_nodes
    recovery.marks.mark_nodes = second_dies
    try:
        with pytest.raises(Kill):
            migrate_if_needed(_ctx(work_state))
    finally:
        recovery.marks.mark_nodes = orig
    assert node_marks(work_state) != want
    _open(work_state)
    assert node_marks(work_state) == want
    assert "cursors" not in json.loads((work_state / "memory" / ".scriptorium" / "runtime.json").read_text())
    assert leftovers(work_state / "memory") == []


# ------------------------------------------------------------------------------ temp files


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_the_next_open_removes_temp_files_of_dead_processes_only(work_state):
    mem = work_state / "memory"
    rt = mem / ".scriptorium"
    dead, live = _dead_pid(), os.getppid()
    (rt / "memory-tui-cache").mkdir(exist_ok=True)
    (rt / "memory-tui-views").mkdir(exist_ok=True)
    gone = [
        rt / f"runtime.json.0123456789abcdef-p{dead}.tmp",
        rt / f"marks-pending.json.0123456789abcdef-p{dead}.tmp",
        rt / "memory-tui-cache" / f".x.pkl.{dead}.140.tmp",
        rt / "memory-tui-cache" / f".parse.pack.{dead}.140.tmp",
        rt / "memory-tui-views" / f".r-ab.{dead}.140.tmp",
        rt / f".memory-tui-canonical.json.{dead}.140.tmp",
    ]
    kept = [
        rt / f"runtime.json.0123456789abcdef-p{live}.tmp",  # a live writer is about to rename it
        rt / "memory-tui-cache" / f".x.pkl.{live}.140.tmp",
        rt / "writer-status.json.0123456789abcdef0123456789abcdef.tmp",  # OpenProgram's, never ours to judge
    ]
    for p in gone + kept:
        p.write_text("half")
    _open(work_state)
    assert [p.name for p in gone if p.exists()] == []
    assert [p.name for p in kept if not p.exists()] == []


def test_the_next_open_removes_dead_temps_in_the_user_cache_too(work_state, tmp_path, monkeypatch):
    """The session index, token memo, outline and layout tables live in the user cache dir,
    outside every state dir; a kill while one of them is replaced leaves its temp there."""
    from memory_tui.core.fsutil import user_cache_dir

    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "user-cache"))
    root = user_cache_dir()
    dead, live = _dead_pid(), os.getppid()
    for sub in ("sessions", "o200k-counts", "outline", "layouts", "overviews"):
        (root / sub).mkdir(parents=True)
    gone = [root / "sessions" / f".index.pack.{dead}.140.tmp", root / "o200k-counts" / f".3f.bin.{dead}.140.tmp",
            root / "outline" / f".ab.json.{dead}.140.tmp", root / "layouts" / f".cd.bin.{dead}.7.tmp",
            root / "overviews" / f".ef.bin.{dead}.7.tmp"]
    kept = [root / "sessions" / f".index.pack.{live}.140.tmp",  # a live reader is about to rename it
            root / "outline" / "notes.tmp"]  # not a name memory-tui writes
    for p in gone + kept:
        p.write_text("half")
    _open(work_state)
    assert [p.name for p in gone if p.exists()] == []
    assert [p.name for p in kept if not p.exists()] == []


def test_the_next_open_removes_dead_node_temps_of_a_killed_marking(work_state):
    sid = "local_9f1e2d3c4b"
    hist = work_state / "sessions" / sid / "history"
    name = sorted(p.name for p in hist.glob("*.json"))[0]
    dead = _dead_pid()
    mine = hist / f"{name}.0123456789abcdef-p{dead}.tmp"
    theirs = hist / f"{name}.0123456789abcdef0123456789abcdef.tmp"  # OpenProgram writes nodes without our lock
    mine.write_text("{")
    theirs.write_text("{")
    marks_mod.write_intent(work_state / "memory" / ".scriptorium", sid, ["nope"], "w-00000000", source_ids=["openprogram/x/y"])
    _open(work_state)
    assert not mine.exists() and theirs.exists()


def test_atomic_write_names_its_temp_by_process():
    from memory_tui.core.store.leftovers import temp_owner

    assert temp_owner(f"runtime.json.0123456789abcdef-p{os.getpid()}.tmp") == os.getpid()
    assert temp_owner("runtime.json.0123456789abcdef0123456789abcdef.tmp") is None


# ------------------------------------------------------------------------------ views


def test_views_rebuild_commits_what_it_installs(work_state):
    cd.give_work("views", work_state)
    mem = work_state / "memory"
    assert main(["--state", str(work_state), "views", "--rebuild"]) == 0
    assert _dirty(mem) == ""
    assert _last_commit(mem) == gitlog.MSG_REBUILD


def test_the_open_step_knows_every_intent_file_the_jobs_write():
    # the package root looks for these names before it imports the pipeline at an open
    import memory_tui.pipeline.recovery as recovery

    assert set(memory_tui._INTENTS) == {marks_mod.INTENT_NAME, recovery.MIGRATE_INTENT}
