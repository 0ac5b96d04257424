"""The owner's job flow in the app: preview → confirm → run (progress, cancel) → result → reload.

Runs on a private copy of OpenProgram's fixture with the embedded (extractive) writer and
checks what landed on disk: topics, derived views, the revision and the git log.
"""

from __future__ import annotations

import io
import subprocess
import threading
from pathlib import Path

import pytest
from action_harness import until as _until
from tui_helpers import Messages, make_app

from memory_tui.core.store import gitlog

from memory_tui.core.tx import api
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.pipeline.context import Context, revision, topic_tree
from memory_tui.pipeline.history import read_job_history
from memory_tui.pipeline.write import write
from memory_tui.pipeline.writers.base import WriterOutcome
from memory_tui.tui.dialogs.confirm_job import ConfirmJobDialog
from memory_tui.tui.messages import JobFinished
from memory_tui.tui.dialogs.job_history import JobHistoryDialog
from memory_tui.tui.dialogs.job_result import JobResultDialog
from memory_tui.tui.jobs import JobRequest
from memory_tui.tui.widgets.job_history import JobHistoryList

pytestmark = pytest.mark.anyio
NOW = 1796100000.0


def _disk(state: Path) -> dict[str, bytes]:
    return {str(p.relative_to(state)): p.read_bytes() for p in sorted(state.rglob("*")) if p.is_file()}


def _git_log(root: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(root), "log", "--format=%s"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def _app(state: Path):
    app = make_app(state)
    app.job_context_options = {"git_env": fixed_env(), "clock": lambda: NOW}
    return app


def _duplicate_ada(state: Path) -> None:
    root = state / "memory"
    unit = next(u for u in topic_tree(root).units if u.topic_path == "people/ada.md")
    res = api.update(root, revision(root), memory_changes=[{
        "op": "create_record", "content": unit.content, "time": unit.when, "source_refs": [unit.source_refs[0]],
        "destination": {"topic_path": "topics/people/ada-copy.md", "headings": ["Ada"], "position": "end"},
    }], git_commit="off")
    assert res.ok, res.to_json()
    # committed, so the fold is a change git can record
    assert gitlog.commit(root, "test: duplicate a record", env=fixed_env()).committed


async def test_reorganize_end_to_end_from_the_key(fixture_state):
    _duplicate_ada(fixture_state)
    root = fixture_state / "memory"
    n_units = len(topic_tree(root).units)
    rev = revision(root)
    app = _app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("R")  # job.reorganize
        await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
        dialog = app.screen
        assert dialog.preview.job == "reorganize" and not dialog.preview.nothing_to_do
        assert "memory/topics/people/ada-copy.md" in dialog.preview.files or any("ada-copy" in f for f in dialog.preview.files)
        await pilot.press("y")
        await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))
        (summary,) = app.job_results
        assert summary.ok and "topics/people/ada-copy.md" in summary.changed_files
        assert summary.revision_before == rev and summary.revision != rev
        await pilot.press("escape")
        await _until(pilot, lambda: app.model.revision != rev)
    assert not (root / "topics/people/ada-copy.md").exists()
    assert len(topic_tree(root).units) == n_units - 1
    assert _git_log(root)[0] == "memory: reorganize topics"
    assert revision(root) == summary.revision


class _Idle:
    name = "idle"
    history: list = []

    def write(self, task, tx):
        return WriterOutcome()


async def test_backfill_end_to_end_from_the_key(fixture_state):
    # A writer that records nothing leaves its batch archived but uncited: backfill's job.
    write(Context(fixture_state, git_env=fixed_env(), clock=lambda: NOW, writer=_Idle()), "local_9f1e2d3c4b", force=True)
    root = fixture_state / "memory"
    rev = revision(root)
    timeline_before = {p: p.read_bytes() for p in (root / "timeline").rglob("*.md")} if (root / "timeline").is_dir() else {}
    app = _app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("B")  # job.backfill
        await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
        assert app.screen.preview.count > 0
        await pilot.press("y")
        await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))
        (summary,) = app.job_results
        assert summary.ok, summary.to_json()
        assert summary.revision != rev
        assert summary.git_commit and _git_log(root)[0].startswith("memory: backfill")  # the commit it made
        # the files it changed are listed, the same topic files its commit holds
        committed = subprocess.run(["git", "-C", str(root), "show", "--name-only", "--format=", summary.git_commit],
                                   capture_output=True, text=True, check=True).stdout.split()
        assert summary.changed_files and set(summary.changed_files) == {f for f in committed if f.startswith("topics/")}
        from rich.console import Console

        from memory_tui.tui.dialogs.job_result import summary_renderable

        console = Console(width=200, record=True, file=io.StringIO())
        console.print(summary_renderable(app.screen.summary))  # what the dialog's #summary draws
        shown = console.export_text()
        assert all(f in shown for f in summary.changed_files) and "none" not in shown.split("changed files")[1].split("\n")[0]
        await pilot.press("escape")
        await _until(pilot, lambda: app.model.revision == summary.revision)
        # the job-history panel: this run's job first, then what the state dir remembers
        await pilot.press("J")  # job.history
        # the persisted part is read in a worker: its status line says when it is in
        await _until(pilot, lambda: isinstance(app.screen, JobHistoryDialog)
                     and "persisted run" in str(app.screen.query_one("#history-status").render()))
        panel = app.screen
        lst = panel.query_one(JobHistoryList)
        persisted = read_job_history(root)  # what the state dir remembers, read on its own
        assert persisted.entries and lst.option_count == 1 + len(persisted.entries)
        shown = [lst.get_option_at_index(i).item for i in range(1, lst.option_count)]
        first = str(lst.get_option_at_index(0).prompt)
        # backfill's files count here as the other jobs' do
        assert first == f"✓ this run  {summary.title}: {summary.outcome.code} · {len(summary.changed_files)} file(s)"
        assert any(e.stage == "backfill" or "backfill" in e.summary for e in shown), shown
        await pilot.press("enter")  # this run's job: its result again
        await _until(pilot, lambda: isinstance(app.screen, JobResultDialog))
        assert app.screen.summary is summary
    assert revision(root) == summary.revision
    conv = (root / "topics/conversations/help-me-plan-backups-for-my-home-nas.md")
    assert conv.is_file() and "[^" in conv.read_text()  # records cite their sources now
    timeline_after = {p: p.read_bytes() for p in (root / "timeline").rglob("*.md")}
    assert timeline_after and timeline_after != timeline_before  # derived views rebuilt


async def test_a_cancelled_job_leaves_the_workspace_byte_identical(fixture_state, monkeypatch):
    import memory_tui.tui.shell.job_flow as job_flow
    from memory_tui.tui import jobs as jobs_mod

    before = _disk(fixture_state)
    gate = threading.Event()  # holds the job at its first batch so the cancel lands before any transaction

    def gated(request, settings, opts=None):
        spec = jobs_mod.spec_for(request, settings, opts)
        inner = spec.run

        def run(ctx):
            report = ctx.progress

            def progress(event):
                report(event)
                if event.phase == "batch":
                    gate.wait()

            ctx.progress = progress
            return inner(ctx)

        spec.run = run
        return spec

    monkeypatch.setattr(job_flow, "spec_for", gated)
    app = _app(fixture_state)
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        await app.run_action("run_job('write-all-forced')")  # the palette's job.write_all_forced
        await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
        await pilot.press("y")
        await _until(pilot, lambda: app.jobs.get("write-all-forced") is not None and app.jobs["write-all-forced"].phase == "batch")
        assert "write-all-forced" in str(app.screen.query_one("#header").render())
        await pilot.press("x")  # job.cancel
        gate.set()
        await _until(pilot, lambda: not app.jobs and bool(seen.of(JobFinished)))
        (finished,) = seen.of(JobFinished)
        assert finished.cancelled
        # the cancel ends in the result, which says nothing was written
        await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))
        (summary,) = app.job_results
        assert summary.outcome.code == "cancelled" and not app.screen.can_retry
        assert summary.changed_files == () and summary.marks_added == 0 and summary.revision == summary.revision_before
        assert summary.message.startswith("0 of 2 batch(es) written, 0 of 10 turn(s) marked"), summary.message
    assert _disk(fixture_state) == before


async def test_a_job_cancelled_after_its_first_batch_says_what_it_wrote(fixture_state, monkeypatch):
    """Write all sessions (forced) plans 2 batches on the fixture; cancelled while the second
    waits, the result dialog names the batch, turns, files and revision the first one wrote,
    and the job history lists the job."""
    import memory_tui.tui.shell.job_flow as job_flow
    from rich.console import Console

    from memory_tui.tui import jobs as jobs_mod
    from memory_tui.tui.dialogs.job_result import summary_renderable

    root = fixture_state / "memory"
    rev = revision(root)
    second = threading.Event()  # the second batch is about to start
    gate = threading.Event()

    def gated(request, settings, opts=None):
        spec = jobs_mod.spec_for(request, settings, opts)
        inner = spec.run

        def run(ctx):
            report = ctx.progress

            def progress(event):
                report(event)
                if event.phase == "batch" and event.done == 1:
                    second.set()
                    gate.wait()

            ctx.progress = progress
            return inner(ctx)

        spec.run = run
        return spec

    monkeypatch.setattr(job_flow, "spec_for", gated)
    app = _app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.run_action("run_job('write-all-forced')")
        await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
        assert len(app.screen.preview.batches) == 2
        await pilot.press("y")
        await _until(pilot, second.is_set)
        await pilot.press("x")  # job.cancel
        gate.set()
        await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))
        (summary,) = app.job_results
        assert summary.outcome.code == "cancelled" and not app.screen.can_retry
        assert summary.revision_before == rev and summary.revision == revision(root) != rev
        assert summary.changed_files == ("topics/conversations/help-me-plan-backups-for-my-home-nas.md",)
        assert summary.marks_added == 8 and summary.git_commit
        assert summary.message.startswith("1 of 2 batch(es) written, 8 of 10 turn(s) marked"), summary.message
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(summary_renderable(summary))
        shown = console.export_text()
        assert "cancelled" in shown and "1 of 2 batch(es)" in shown and summary.changed_files[0] in shown
        assert f"{rev} → {summary.revision}" in shown and "retryable" not in shown
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("J")  # job.history
        await _until(pilot, lambda: isinstance(app.screen, JobHistoryDialog)
                     and "persisted run" in str(app.screen.query_one("#history-status").render()))
        first = str(app.screen.query_one(JobHistoryList).get_option_at_index(0).prompt)
        assert first == "– this run  write all sessions (forced): cancelled · 1 file(s)"


async def test_a_second_job_while_one_runs_starts_nothing(fixture_state):
    app = _app(fixture_state)
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        app.start_job(JobRequest("write-all-forced"))
        await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
        first = app.screen
        app.start_job(JobRequest("reorganize"))
        await pilot.pause()
        assert app.screen is first  # no second dialog
        assert any("was not started" in n.message for n in app._notifications)
        await pilot.press("escape")
        await pilot.pause()
        assert seen.of(JobFinished) == [] and app.jobs == {}


def test_job_request_names_a_known_kind():
    with pytest.raises(ValueError, match="unknown job"):
        JobRequest("explode")


HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


async def test_a_lock_held_elsewhere_shows_in_the_header_and_a_write_offers_retry(fixture_state):
    import sys

    from memory_tui.core.store.lock import lock_path

    root = fixture_state / "memory"
    before = _disk(fixture_state)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_path(root))], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = {k: v for k, v in _disk(fixture_state).items() if not k.endswith("write.lock")}
        app = _app(fixture_state)
        app.job_context_options["lock_seconds"] = 0.2  # give up quickly: the holder never lets go
        async with app.run_test(size=(140, 40)) as pilot:
            header = str(app.screen.query_one("#header").render())
            assert f"locked: another program (pid {holder.pid})" in header or f"(pid {holder.pid})" in header, header
            await app.run_action("run_job('write-all-forced')")
            await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
            assert app.screen.query("#lock-warning")  # the confirm says the job would wait
            await pilot.press("y")
            await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))
            (summary,) = app.job_results
            assert summary.outcome.code == "CONCURRENT_UPDATE" and summary.retryable
            assert app.screen.can_retry and app.screen.query("#retry")
            assert "WRITER" not in summary.outcome.code
            await pilot.press("escape")
            await settle_jobs(pilot, app)
            header = str(app.screen.query_one("#header").render())
            # the header takes its short words rather than cut the lock holder off the end
            assert f"locked: another program (pid {holder.pid})" in header and "…" not in header, header
            assert "writer ✗" not in header and "✗ CONCURRENT" not in header, header  # a lost race is no writer failure
            assert "lock busy: retry" in header
            race = [p for p in app.all_problems() if p.code == "CONCURRENT_UPDATE"]
            assert race and "lost the write-lock race" in race[0].message and "failed" not in race[0].message
    finally:
        holder.stdin.close()
        holder.wait()
    after = {k: v for k, v in _disk(fixture_state).items() if not k.endswith("write.lock")}
    archive = {k for k in before if "/sources/" in k}
    assert archive and all(after.get(k) == before[k] for k in archive)
    assert set(after) >= archive


async def settle_jobs(pilot, app) -> None:
    loads = [w for w in app.workers if w.group == "load"]
    if loads:
        await app.workers.wait_for_complete(loads)
    await pilot.pause()


async def test_the_preview_is_built_off_the_ui_thread_and_one_job_at_a_time_holds(fixture_state, monkeypatch):
    """While the preview is prepared (held here on an Event) the UI answers: the header says
    "preparing preview…", a second request starts nothing, and the confirm opens once the
    worker is done."""
    import memory_tui.pipeline.preview as preview_mod

    gate = threading.Event()
    threads: list[str] = []
    real = preview_mod.preview_job

    def held(*a, **kw):
        threads.append(threading.current_thread().name)
        gate.wait()
        return real(*a, **kw)

    monkeypatch.setattr(preview_mod, "preview_job", held)
    app = _app(fixture_state)
    seen = Messages()
    async with app.run_test(size=(140, 40), message_hook=seen) as pilot:
        await pilot.press("B")  # job.backfill
        await _until(pilot, lambda: bool(threads))
        assert threads[0] != threading.main_thread().name
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmJobDialog)
        assert "backfill: preparing preview…" in str(app.screen.query_one("#header").render())
        await pilot.press("R")  # a second job while the first is being prepared
        await pilot.pause()
        assert any("backfill (preparing its preview) is still running" in n.message and "reorganize was not started"
                   in n.message for n in app._notifications)
        assert len(threads) == 1
        gate.set()
        await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
        assert app.screen.preview.job == "backfill" and app.preparing_job is None
        assert "preparing" not in app.job_label()
        await pilot.press("escape")
        await pilot.pause()
        assert seen.of(JobFinished) == [] and not app._job_pending


async def test_a_preview_that_fails_says_why_and_frees_the_flow(fixture_state, monkeypatch):
    import memory_tui.pipeline.preview as preview_mod
    from memory_tui.core.format.errors import MemoryError

    def broken(*a, **kw):
        raise MemoryError("SESSION_NODES_UNAVAILABLE", "sessions/x.json: unreadable")

    monkeypatch.setattr(preview_mod, "preview_job", broken)
    app = _app(fixture_state)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.press("R")
        await _until(pilot, lambda: any("no preview" in n.message for n in app._notifications))
        note = next(n.message for n in app._notifications if "no preview" in n.message)
        assert note == "reorganize: no preview: SESSION_NODES_UNAVAILABLE: sessions/x.json: unreadable"
        assert not isinstance(app.screen, ConfirmJobDialog) and not app._job_pending and app.preparing_job is None
