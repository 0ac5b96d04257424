"""The app shell. ``create_app`` is the one factory used by the CLI, the tests and the
screenshot script.

``MemoryApp`` owns the state: the model (a frozen ``WorkspaceModel`` from ``tui/model/data.py``),
the settings, the watcher and the job runner. Each view is a screen of its own
(``tui/screens/``), one Textual mode per view; the app switches modes and hands every screen
the new model. Workers load, watch and run jobs; they never touch widgets, they hand results
back as messages (harlequin's rule).
"""

from __future__ import annotations

import asyncio
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from rich.text import Text
from textual import work
from textual.app import App
from textual.binding import BindingType
from textual.worker import Worker, WorkerState

from memory_tui.core.format.errors import Problem
from memory_tui.core.format.fastdata import hold_heap
from memory_tui.core.store.lockprobe import LockProbe, probe_write_lock
from memory_tui.core.format.tokens import O200kCounter, TokenCounter

from . import commands as registry
from .palette import MemoryCommands
from .jobs import JobPreviewReady, JobRequest, JobRunner, JobSpec, progress_bar, spec_for, summarize
from .model.data import CORE_TOPIC, RecordVM, WorkspaceModel, changed_views, header_changed
from .model.load import load_model, outline_model, with_session_list, with_sessions
from .messages import JobFinished, JobProgress, WorkspaceChanged
from .messages import InsightsReady
from .render import Glyphs, glyphs_for
from .screens import MODES as SCREEN_MODES, ViewScreen
from .views import VIEWS
from .watcher import watch_changes
from .widgets import header_text

if TYPE_CHECKING:
    from memory_tui.pipeline.context import JobEvent

    from .model.insights import InsightsVM

# the one loader is the engine's; the app adds the binding ids it knows.
from memory_tui.pipeline.settings import Settings, load_config


class _KnownBindingIds:
    """The ids a ``[keymap]`` entry may name, found only when one is checked: finding them
    imports every screen, widget and dialog module (~0.05-0.1 s before the first frame), and
    a config without a keymap never asks."""

    def __contains__(self, binding_id: object) -> bool:
        from .binding_ids import known_binding_ids

        return binding_id in known_binding_ids()


def load_app_settings(path: Path | None = None) -> Settings:
    return load_config(path, binding_ids=_KnownBindingIds())  # type: ignore[arg-type]


# ASCII mode filters every drawn line; Screenshot saves under the cwd.
from .ascii import AsciiFilter
from .safe_filter import SanitizeFilter

_ASCII_FILTER = AsciiFilter()
_SANITIZE_FILTER = SanitizeFilter()

Clock = Callable[[], datetime]
Arrival = Callable[[ViewScreen], None]


class MemoryApp(JobRunner, App[None]):
    TITLE = "memory-tui"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {MemoryCommands}
    BINDINGS: ClassVar[list[BindingType]] = registry.app_bindings()
    MODES: ClassVar = dict(SCREEN_MODES)
    DEFAULT_MODE: ClassVar[str] = "topics"

    def __init__(
        self,
        state_dir: Path,
        *,
        clock: Clock | None = None,
        tokens: TokenCounter | None = None,
        watch: bool = True,
        ascii: bool = False,
        home: Path | None = None,
        settings: Settings | None = None,
        background: bool = True,
        session_loader: Callable[..., object] | None = None,
        insights: bool = True,
    ) -> None:
        super().__init__()
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.counter = tokens or O200kCounter()
        self.watch_enabled = watch
        self.ascii_mode = ascii
        self.home = home
        self.settings = settings if settings is not None else load_app_settings()
        self.keymap: dict[str, str] = dict(self.settings.keymap)
        self.filter_text = ""
        self.reloads = 0  # how many times a new model was applied (tests read it)
        self.last_rendered: set[str] = set()  # which views the last model redrew (tests read it)
        self.jobs: dict[str, JobEvent] = {}  # the running job's last progress step
        self.finished_jobs: list[JobFinished] = []  # every job outcome this session (tests read it)
        self.view_screens: dict[str, ViewScreen] = {}  # the view screens that exist so far
        self._arrivals: dict[str, Arrival] = {}
        self._reload_timer = None
        self._pending_paths: set[str] = set()
        self._load_seq = 0
        self._queued_loads: list[set[str] | None] = []  # asked for while the first load streams in
        self._applied_seq = 0
        # One load at a time: a thread worker cannot be stopped, so a second load started
        # while one runs would only run beside it, both holding the GIL against the UI and any job.
        self._load_running = False
        self._job_paths: set[str] = set()  # what the watcher saw change while a job runs
        self._job_batches = 0  # batches the running job has finished (its last progress said)
        self._job_reload_due = False  # a batch finished before the watcher named its files
        self._watch_stop = threading.Event()
        # figures of the current model, computed in a worker after it lands.
        self.insights_enabled = insights
        self.insights: InsightsVM | None = None
        self._insights_key: tuple[Any, ...] | None = None  # insights_key() of the model they describe
        # actions-ui: the job flow's state (the request running, what it started from)
        self.job_context_options: dict = {}  # extra Context fields for jobs (tests: git_env, clock)
        self.job_results: list = []  # every JobSummary shown this session (tests read it)
        self._job_request: JobRequest | None = None
        self._job_revision_before: str | None = None
        self._job_preview = None  # the confirmed JobPreview of the running job (what it planned)
        self._job_pending = False  # a preview/confirm is open: a second request waits for it
        self.preparing_job: JobRequest | None = None  # its preview is being built in a worker
        self._job_planned: int | None = None  # batches the running job's preview planned
        self.lock_probe = probe_write_lock(self.state_dir / "memory")  # refreshed with every load
        # with ``background`` the app paints at once with no model and a
        # worker streams it in (topics first, then sessions); without it (tests, snapshots)
        # the whole model is loaded before the first screen mounts.
        self.background = background
        self.session_loader = session_loader
        self.loading: str | None = None  # "workspace" / "sessions" while a stage is loading
        self._gc_frozen = False  # see _load_worker
        self.model: WorkspaceModel | None = None
        if not background:
            self.model = load_model(self.state_dir, counter=self.counter, home=self.home, session_loader=session_loader)
        if self.settings.theme:
            self.theme = self.settings.theme

    def on_mount(self) -> None:
        self.set_class(self.ascii_mode, "-ascii")
        if self.keymap:
            self.set_keymap(self.keymap)
        if self.model is None:
            self.loading = "workspace"
            self.load_in_background(None)
        if self.watch_enabled:
            self._watch_worker()
        self.compute_insights()  # after the first paint, never before

    # ------------------------------------------------------------------ what screens read
    @property
    def view(self) -> str:
        return self.current_mode

    @property
    def glyphs(self) -> Glyphs:
        return glyphs_for(self.ascii_mode)

    def now(self) -> datetime:
        return self.clock() if self.clock else datetime.now(timezone.utc)

    def all_problems(self) -> list[Problem]:
        """Every problem: settings, config.json, topics and sources, sessions, writer status."""
        out: list[Problem] = []
        out.extend(self.settings.problems)
        m = self.model
        if m is None:
            return out
        for p in (*m.config.problems, *m.problems, *self._session_problems()):
            if p not in out:
                out.append(p)
        st = m.status
        if st.last_outcome == "failure":
            out.append(Problem(
                st.last_failure_code or "WRITER_FAILURE_UNKNOWN",
                (f"the last writer run lost the write-lock race{' at ' + st.last_failure_at if st.last_failure_at else ''}"
                 " (another writer held write.lock): nothing was written; retry"
                 if st.last_failure_code == "CONCURRENT_UPDATE" else
                 f"the last writer run failed{' at ' + st.last_failure_at if st.last_failure_at else ''}"),
                "memory/.scriptorium/writer-status.json",
            ))
        return out

    def _session_problems(self) -> list[Problem]:
        """What `status` lists beside the workspace's problems: the session store's (a corrupt
        node file, meta.json or registry) and the writer context's files (writer-status.json,
        session-end.json), read by the same engine functions."""
        m = self.model
        memo = getattr(self, "_session_problems_memo", None)
        if memo is not None and memo[0] is m:
            return memo[1]  # one read per loaded model: the header asks on every redraw
        snap = getattr(m, "session_snapshot", None) if m is not None else None
        out: list[Problem] = list(snap.all_problems()) if snap is not None else []
        try:
            from memory_tui.sessions.reasons import load_context

            out.extend(load_context(self.state_dir, now=0.0, probe=lambda _p: False).problems)
        except OSError:
            pass
        self._session_problems_memo = (m, out)
        return out

    def problem_count(self) -> int:
        m = self.model
        if m is not None and not m.memory_exists:
            return 1 if self.settings.problem else 0  # the notice already says what is missing
        return len(self.all_problems())

    def job_label(self) -> str:
        if not self.jobs and self.preparing_job is not None:
            return f"{self.preparing_job.kind}: preparing preview…"
        if not self.jobs:
            return f"loading {self.loading}…" if self.loading else ""
        job, event = next(iter(self.jobs.items()))
        # ``x`` is answered at once, although the job stops only before its next transaction
        stopping = " cancelling…" if self._job_cancel is not None and self._job_cancel.is_set() else ""
        if event.total:
            phase = "" if event.phase in (job, "batch", "writer", "organize", "backfill") else f" {event.phase}"
            return (f"{job} {progress_bar(event.done, event.total, ascii=self.ascii_mode)} {event.done}/{event.total}"
                    f"{phase}{stopping}")
        return f"{job} {event.phase} {event.done}{stopping}"

    def lock_label(self) -> str:
        """The header's lock item: who else holds ``write.lock`` ("" when free or ours)."""
        probe = self.lock_probe
        if probe is None or not probe.held or (probe.holder is not None and probe.holder.this_process):
            return ""
        who = probe.holder.describe() if probe.holder else "another program"
        return f"{self.glyphs.bad} locked: {who}"

    def header_line(self, width: int, *, insights: Any = None) -> Text:
        """The header every screen draws: one place, so none forgets an item (the lock)."""
        return header_text(
            self.model, width, self.now(), self.glyphs, problems=self.problem_count(), job=self.job_label(),
            lock=self.lock_label(), insights=self.insights if insights is None else insights,
        )

    def banner_lines(self) -> list[Text]:
        m = self.model
        lines: list[Text] = []
        if m and m.memory_exists:
            if not m.enabled:
                lines.append(Text.assemble(
                    ("Memory is disabled", "bold"),
                    ' (memory.backend = "none" in config.json): OpenProgram neither recalls nor writes memory. Showing the files read-only.',
                ))
            elif not m.writer_enabled:
                lines.append(Text.assemble(("Writing is off", "bold"), " (memory.writer.enabled = false): new turns are not written to memory."))
            if self.settings.problem:
                lines.append(Text(f"Settings: {self.settings.problem}"))
        return lines

    @property
    def current_view_screen(self) -> ViewScreen | None:
        return self.view_screens.get(self.view)

    # ------------------------------------------------------------------ screens
    def register_view(self, screen: ViewScreen) -> None:
        self.view_screens[screen.VIEW] = screen

    def take_arrival(self, view: str) -> Arrival | None:
        return self._arrivals.pop(view, None)

    def get_line_filters(self):
        # the sanitiser first, on every line of every widget: nothing from disk reaches the
        # terminal raw, whichever view or library drew it
        filters = [_SANITIZE_FILTER, *super().get_line_filters()]
        return [*filters, _ASCII_FILTER] if self.ascii_mode else filters

    # sessions-done: ASCII footer. Textual shows some keys as symbols (enter as U+23CE) that
    # the one-cell line filter cannot spell; in ASCII mode the footer names the key instead.
    def get_key_display(self, binding):
        shown = super().get_key_display(binding)
        if self.ascii_mode and not shown.isascii():
            return binding.key.split(",")[0].strip()
        return shown

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        # Textual's default saves to ~/Downloads (or serves it); the owner expects the cwd.
        saved = self.save_screenshot(filename, path or os.getcwd())
        self.notify(f"Screenshot saved to {saved}", title="Screenshot")

    def get_system_commands(self, screen):
        for cmd in super().get_system_commands(screen):
            if cmd.title in ("Quit", "Keys"):
                continue  # ours are in the registry
            yield cmd

    def _init_mode(self, mode: str):  # type: ignore[override]
        # Textual (pinned 8.2.8) re-parses and re-applies the whole stylesheet when a mode's
        # screen is first made, then again in switch_mode because that pass did not stamp the
        # new screen; nothing changes in between (the screen's widgets bring their CSS when
        # they mount, later), so the second pass is skipped: ~0.03 s of opening each view.
        new = mode not in self._screen_stacks
        await_mount = super()._init_mode(mode)
        stack = self._screen_stacks.get(mode) if new else None
        if stack:
            stack[0]._css_update_count = self._css_update_count
        return await_mount

    def action_switch_view(self, view: str) -> None:
        if view in VIEWS and view != self.view:
            self.switch_mode(view)

    def go_to(self, view: str, then: Arrival) -> None:
        """Show ``view`` and run ``then`` on its screen once it is the current one.

        A jump from a screen pushed over a view (Evidence, Alternatives, History …) leaves
        those screens: left on the view's stack they would cover it again the next time the
        view is chosen (``1`` bringing back an old Evidence list instead of Topics)."""
        while len(self.screen_stack) > 1 and not isinstance(self.screen, ViewScreen):
            self.pop_screen()
        screen = self.view_screens.get(view)
        if view == self.view and screen is not None:
            then(screen)
            return
        self._arrivals[view] = then
        self.switch_mode(view)

    async def open_record(self, record: RecordVM) -> None:
        view = "core" if record.topic_path == CORE_TOPIC else "topics"
        self.go_to(view, lambda screen: screen.reveal(record))  # type: ignore[attr-defined]

    async def open_session(self, session_id: str, node_id: str | None) -> None:
        def arrive(screen: ViewScreen) -> None:
            if not screen.focus_session(session_id, node_id):  # type: ignore[attr-defined]
                self.notify(f"Session {session_id} is not in sessions/.", severity="warning")

        self.go_to("sessions", arrive)

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        screen = self.current_view_screen
        if screen is not None:
            screen.refresh_view()

    # ------------------------------------------------------------------ model
    def apply_model(self, model: WorkspaceModel, changed: set[str] | None = None) -> None:
        self.model = model
        self.reloads += 1
        views = set(VIEWS) if changed is None else changed
        self.last_rendered = set(views)
        for view, screen in self.view_screens.items():
            screen.model_changed(model, redraw=view in views, now=screen is self.current_view_screen)
        self._redraw_headers_over_views()

    # ------------------------------------------------------------------ actions
    def action_toggle_ascii(self) -> None:
        self.ascii_mode = not self.ascii_mode
        self.set_class(self.ascii_mode, "-ascii")
        self.refresh_bindings()  # sessions-done: the footer's key names follow the mode
        screen = self.current_view_screen
        if screen is not None:
            screen.refresh_view()

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        screen = self.screen
        present = {type(node) for node in (screen, *screen.walk_children())}
        self.push_screen(HelpScreen(self.keymap, self.view, self.ascii_mode, present))

    def action_problems(self) -> None:
        from .screens.problems import ProblemsScreen

        if isinstance(self.screen, ProblemsScreen):
            return
        self.push_screen(ProblemsScreen(self.all_problems(), self.open_problem))

    def open_problem(self, problem: Problem) -> bool:
        """Open ``problem``'s file at its line: a topic in the editor (cursor on the line), a
        session node file as its node in Sessions (its error in the node detail), any other
        file in ``$EDITOR`` at the line. False when nothing could be opened."""
        path = problem.path or ""
        if path.startswith("memory/"):
            path = path[len("memory/"):]
        m = self.model
        if path.startswith("topics/") and m is not None and m.topic(path) is not None:
            if problem.line:
                from .screens.editor import open_editor

                open_editor(self, path, at=(problem.line, problem.column or 1))
                return True
            view = "core" if path == CORE_TOPIC else "topics"
            self.go_to(view, lambda screen: screen.reveal_topic(path))  # type: ignore[attr-defined]
            return True
        parts = (problem.path or "").split("/")
        if len(parts) == 4 and parts[0] in ("sessions", "sessions-git") and parts[2] == "history":
            sid, name = parts[1], parts[3]
            stem = name[:-5] if name.endswith(".json") else name
            bits = stem.split("-", 2)
            node = bits[2] if len(bits) == 3 else None
            self.go_to("sessions", lambda screen: screen.focus_session(sid, node))  # type: ignore[attr-defined]
            return True
        return self._open_file_in_editor(problem)

    def _open_file_in_editor(self, problem: Problem) -> bool:
        """Any other file with a problem (config.json, meta.json, writer-status.json …):
        ``$EDITOR +LINE FILE`` with the terminal handed over."""
        import subprocess

        from .model import records as ra
        from .screens.external_editor import editor_suspend

        target = self.state_dir / (problem.path or "")
        if not problem.path or not target.is_file():
            return False
        try:
            argv = ra.editor_command()
        except ra.EditorUnavailable as exc:
            self.notify(f"{problem.path}:{problem.line or 1}: {exc}", severity="information", timeout=10)
            return False
        argv = [*argv, f"+{problem.line or 1}", str(target)]
        try:
            with editor_suspend(self):
                subprocess.call(argv)
        except Exception as exc:  # noqa: BLE001 - no terminal to hand over: say where it is instead
            self.notify(f"{problem.path}:{problem.line or 1}: cannot start the editor ({exc})", severity="warning")
        self.action_reload()
        return True

    def action_reload(self) -> None:
        self.load_in_background(None)
        # a screen over the views that holds a file of its own (the editor) re-reads it too
        for screen in self.screen_stack:
            hook = getattr(screen, "reload_requested", None)
            if hook is not None:
                hook()

    # ------------------------------------------------------------------ loading & watching
    def load_in_background(self, touched: set[str] | None) -> None:
        """Reload from the engine. ``touched`` (paths a watcher saw) lets untouched parts be
        reused; ``None`` is an explicit reload, which checks everything and redraws every view."""
        if self._load_running or (self.loading is not None and self.model is not None):
            # a load is running (the first one may still be reading sessions): a second reader
            # of the same files would only double the work. Run once it is in, merged.
            self._queued_loads.append(None if touched is None else set(touched))
            return
        self._load_running = True
        self._load_seq += 1
        self._load_worker(self._load_seq, touched)

    def _load_finished(self) -> None:
        self._load_running = False
        if self._queued_loads:
            queued, self._queued_loads = self._queued_loads, []
            merged = None if any(q is None for q in queued) else set().union(*queued)
            self.load_in_background(merged)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False, description="load")
    def _load_worker(self, seq: int, touched: set[str] | None) -> None:
        try:
            self._load(seq, touched)
        finally:
            try:
                self.call_from_thread(self._load_finished)
            except RuntimeError:  # the app is closing: nothing is waiting for the queue
                pass

    def _load(self, seq: int, touched: set[str] | None) -> None:
        # topics first, sessions second. A reload that touched no
        # session carries the previous sessions over and needs no second stage.
        previous = self.model
        if previous is None:
            # the Topics list first, from the cheap outline, while the
            # workspace is parsed; the outline is never handed to the engine as ``previous``.
            outline = outline_model(self.state_dir, home=self.home)
            if outline is not None:
                self.call_from_thread(self._loaded, seq, outline, True, "workspace")
                # Let the list reach the screen before the engine's modules are imported
                # here: compiling a module holds the GIL, and a start that imports them while
                # the UI thread paints paints no sooner than one that imported them first.
                painted = threading.Event()
                self.call_from_thread(self.call_after_refresh, painted.set)
                painted.wait(2.0)
        elif previous.outline:
            previous = None
        kw = dict(counter=self.counter, previous=previous, touched=touched, session_loader=self.session_loader)
        model = load_model(self.state_dir, home=self.home, sessions=False, **kw)
        if not model.sessions_loaded:
            if previous is None or not previous.sessions_loaded:
                # Nothing shows sessions yet: paint the workspace now, sessions follow.
                self.call_from_thread(self._loaded, seq, model, True, "sessions")
                # the sessions list and pending counts from the persistent cache
                # (when every session is in it), then the per-session detail.
                listed = with_session_list(model, counter=self.counter)
                if listed is not None:
                    self.call_from_thread(self._loaded, seq, listed, True, "sessions")
            model = with_sessions(model, **kw)
        probe = probe_write_lock(self.state_dir / "memory")
        if not self._gc_frozen:
            # the first whole model is millions of long-lived objects;
            # left to the cyclic GC, every later collection walks all of them, which was most
            # of a one-file reload. Frozen objects are still freed by reference counting when
            # a reload drops them; only a cycle among them would outlive its last use.
            hold_heap()
            self._gc_frozen = True
        self.call_from_thread(self._loaded, seq, model, touched is None, None, probe)

    def _loaded(self, seq: int, model: WorkspaceModel, explicit: bool, loading: str | None = None,
                probe: LockProbe | None = None) -> None:
        if seq < self._applied_seq:
            return  # an older load finished after a newer one: keep the newer
        self._applied_seq = seq
        self.loading = loading
        if probe is not None and probe.held != (self.lock_probe.held if self.lock_probe else False):
            self.lock_probe = probe
            self._redraw_header()
        elif probe is not None:
            self.lock_probe = probe
        old = self.model
        if explicit:
            self.apply_model(model)
            self._insights_after_paint()
            return
        changed = changed_views(old, model)
        if not changed and not header_changed(old, model):
            # Nothing visible changed (e.g. our own write already shown): keep the snapshot for
            # the next incremental refresh, redraw nothing (no flicker).
            self.model = model
            for screen in self.view_screens.values():
                screen.model_changed(model, redraw=False, now=False)
            self._insights_after_paint()
            return
        self.apply_model(model, changed)
        self._insights_after_paint()

    def _insights_after_paint(self) -> None:
        # The insights worker holds the GIL for 1-2 s of CPU in bursts; started at once, it
        # halves the UI thread's share while the new model is being drawn. One refresh later
        # the screen already shows the model.
        self.call_after_refresh(self.compute_insights)

    @work(exclusive=True, group="watch", exit_on_error=False, description="watch")
    async def _watch_worker(self) -> None:
        while not self.state_dir.is_dir():  # wait for OpenProgram to create it
            await asyncio.sleep(1.0)
            if self.state_dir.is_dir():
                self.load_in_background(None)
        async for paths in watch_changes(self.state_dir, self._watch_stop):
            self.post_message(WorkspaceChanged(paths))

    def on_unmount(self) -> None:
        self._watch_stop.set()

    def on_workspace_changed(self, message: WorkspaceChanged) -> None:
        # actions-ui: an open editor checks its file against the buffer (conflict handling)
        for screen in self.screen_stack:
            hook = getattr(screen, "workspace_changed", None)
            if hook is not None:
                hook(message.paths)
        if self.jobs:
            # A job's every step writes files (archives, topics, marks, git): reloading on
            # each wave ran reload after reload beside the job. The job's own progress reloads
            # once per finished batch (on_job_progress) and once at its end.
            self._job_paths.update(message.paths)
            if self._job_reload_due:
                self._reload_job_paths()
            return
        self._pending_paths.update(message.paths)
        if self._reload_timer is not None:
            self._reload_timer.stop()
        self._reload_timer = self.set_timer(0.1, self._reload_pending)

    def _reload_pending(self) -> None:
        paths, self._pending_paths = set(self._pending_paths), set()
        self._reload_timer = None
        if paths or not (self.model and self.model.state_exists):
            self.load_in_background(paths if self.model and self.model.state_exists else None)

    # ------------------------------------------------------------------ insights
    def compute_insights(self) -> None:
        """Compute the insight figures of the current model in a worker (an older run is
        cancelled); the header and badges draw them when ``InsightsReady`` arrives."""
        m = self.model
        if not self.insights_enabled or m is None or not m.memory_exists or m.outline:
            return
        if self.jobs:
            return  # seconds of CPU per batch beside the job; the reload at its end computes them
        # the insights engine is imported with its first use, after the first paint
        from .model.insights import insights_key

        if self.insights is not None and self._insights_key == insights_key(m) and m.revision:
            return  # the same memory commit and the same sessions: the figures stand
        self._insights_worker(m)

    # reload-fast: an explicit description, or Textual builds one from repr() of the model
    # (every record's dataclass: ~0.2 s of each reload at scale 1)
    @work(thread=True, exclusive=True, group="insights", exit_on_error=False, description="insights")
    def _insights_worker(self, model: WorkspaceModel) -> None:
        from .model.insights import insights_key, load_insights

        found = load_insights(model)
        if found is not None:
            self.post_message(InsightsReady(model.revision, found, insights_key(model)))

    def on_insights_ready(self, message: InsightsReady) -> None:
        from .model.insights import insights_key

        if self.model is None or message.key != insights_key(self.model):
            return  # figures of a model that has since been replaced
        self.insights, self._insights_key = message.insights, message.key
        for screen in self.view_screens.values():
            screen.insights_changed(now=screen is self.current_view_screen)
        if self.screen not in self.view_screens.values() and hasattr(self.screen, "insights_changed"):
            self.screen.insights_changed(now=True)  # the Evidence screen over a view

    def action_open_evidence(self, which: str = "") -> None:
        from .screens.evidence import EvidenceScreen

        if isinstance(self.screen, EvidenceScreen):
            self.screen.show_list(which or None)
            return
        self.push_screen(EvidenceScreen(which or None))

    # ------------------------------------------------------------------ jobs (actions-ui)
    def action_run_job(self, kind: str) -> None:
        self.start_job(JobRequest(kind))

    def start_job(self, request: JobRequest) -> None:
        """Preview ``request`` (in a worker: "preparing preview…" meanwhile), ask, run it with
        progress in the header, report, reload.

        One job at a time: while one runs (or its preview is prepared, or waits for its
        confirmation) this says so and starts nothing."""
        if self.jobs or self._job_pending:
            running = next(iter(self.jobs), None) or (
                f"{self.preparing_job.kind} (preparing its preview)" if self.preparing_job else "another job")
            self.notify(f"{running} is still running (x cancels it); {request.kind} was not started.", severity="warning")
            return
        self._job_pending = True
        self.preparing_job = request
        self._redraw_header()
        self.prepare_preview(request, self.settings.writer, dict(self.job_context_options))

    def on_job_preview_ready(self, message: JobPreviewReady) -> None:
        from .dialogs.confirm_job import ConfirmJobDialog

        request, preview = message.request, message.preview
        self.preparing_job = None
        self._redraw_header()
        if message.error is not None:
            self._job_pending = False
            self.notify(f"{request.kind}: no preview: {message.error.code}: {message.error.message}", severity="error")
            return

        def confirmed(answer) -> None:
            self._job_pending = False
            if answer is not None and answer.run:
                self._job_request = request
                self._job_revision_before = preview.revision
                self._job_preview = preview
                # a write reports batches without a total; the preview planned them
                self._job_planned = sum(1 for b in preview.batches if b.result == "planned") or None
                self.launch_job(spec_for(request, self.settings.writer, self.job_context_options))

        self.push_screen(ConfirmJobDialog(preview, lock=message.lock), confirmed)

    def launch_job(self, spec: JobSpec) -> None:
        """Start ``spec`` in the job worker (one job at a time); the app keeps its progress."""
        from memory_tui.pipeline.context import JobEvent

        self.jobs[spec.name] = JobEvent("starting")
        self._job_batches = 0
        self._job_paths = set()
        self.run_spec(spec)
        self._redraw_header()

    def _show_job_result(self, message: JobFinished) -> None:
        request, self._job_request = self._job_request, None
        if request is None or request.kind != message.job:
            return  # a job started without the flow (tests' launch_job): notifications only
        from .dialogs.job_result import JobResultDialog

        summary = summarize(request, message, memory_root=self.state_dir / "memory", revision_before=self._job_revision_before,
                            preview=self._job_preview)
        self.job_results.append(summary)

        def chosen(choice) -> None:
            if choice is not None and choice.retry:
                self.start_job(request)

        self.push_screen(JobResultDialog(summary), chosen)

    def action_job_history(self) -> None:
        from .dialogs.job_history import JobHistoryDialog

        self.push_screen(JobHistoryDialog(reversed(self.job_results), self.state_dir / "memory", ascii=self.ascii_mode))

    def action_cancel_job(self) -> None:
        if self.cancel_job():
            self._redraw_header()
            self.notify("Cancelling: the job stops before its next transaction.")
        else:
            self.notify("No job is running.", severity="information")

    def _redraw_header(self) -> None:
        screen = self.current_view_screen
        if screen is not None:
            screen.render_header()
        self._redraw_headers_over_views()

    def _redraw_headers_over_views(self) -> None:
        # The screens pushed over a view (History, Evidence, Alternatives) draw the same
        # header; a new model (a revert they ran), a job's progress or the lock changes it
        # under them as much as under the view.
        for screen in self.screen_stack:
            if screen.is_mounted and screen not in self.view_screens.values():
                redraw = getattr(screen, "render_header", None)
                if redraw is not None:
                    redraw()

    def on_job_progress(self, message: JobProgress) -> None:
        if message.event.phase == "warning":
            self.notify(f"{message.job}: {message.event.message}", severity="warning")
            return
        from memory_tui.pipeline.context import JobEvent

        event = message.event
        request = self._job_request
        if (event.total is None and event.phase in ("batch", "writer") and self._job_planned
                and request is not None and request.kind == message.job):
            event = JobEvent(event.phase, event.done, max(self._job_planned, event.done), event.message)
        self.jobs[message.job] = event
        self._redraw_header()
        if event.phase == "batch" and event.done > self._job_batches:
            # a batch was written (its marks, topics and commit are in): the header's pending
            # count and the views follow it, from the files the batch touched
            self._job_batches = event.done
            self._reload_job_paths()

    def _reload_job_paths(self) -> None:
        if self.watch_enabled and not self._job_paths:
            self._job_reload_due = True  # the watcher has not reported the batch's files yet
            return
        self._job_reload_due = False
        paths, self._job_paths = set(self._job_paths), set()
        # without a watcher nothing says which files the batch touched: check everything
        self.load_in_background(paths if self.watch_enabled else None)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # A job that raised something no job handler expects: say so, never hide it.
        if event.worker.group == "job-preview" and event.state == WorkerState.ERROR:
            self._job_pending = False
            self.preparing_job = None
            self._redraw_header()
            self.notify(f"job preview crashed: {event.worker.error!r}", severity="error", timeout=30)
        if event.worker.group == "job" and event.state == WorkerState.ERROR:
            self.jobs.clear()
            self._redraw_header()
            self.notify(f"job crashed: {event.worker.error!r}", severity="error", timeout=30)

    def on_job_finished(self, message: JobFinished) -> None:
        self.jobs.pop(message.job, None)
        self._job_paths, self._job_reload_due = set(), False  # the reload below checks everything
        self.finished_jobs.append(message)
        self._redraw_header()
        if self._job_request is not None:
            # a cancelled job too: the result says what it wrote before it stopped
            self._show_job_result(message)
        elif message.cancelled:
            self.notify(f"{message.job} cancelled: nothing was written after its last whole step")
            self._show_job_result(message)
        elif message.ok:
            self.notify(f"{message.job} finished")
        else:
            self.notify(f"{message.job} failed: {message.error}", severity="error")
        self.load_in_background(None)


def create_app(
    state_dir: Path | str,
    *,
    clock: Clock | None = None,
    tokens: TokenCounter | None = None,
    watch: bool = True,
    ascii: bool = False,
    home: Path | None = None,
    settings: Settings | None = None,
    background: bool = True,
    session_loader: Callable[..., object] | None = None,
    insights: bool = True,
) -> MemoryApp:
    """The one factory (CLI, tests, screenshots).

    ``home`` is the folder shown as ``~`` (tests inject one so no absolute path is on screen);
    ``settings`` defaults to the user's config file (tests pass ``Settings()``);
    ``background=False`` loads the whole model before the first paint (deterministic tests);
    ``session_loader`` stands in for ``sessions.store.load_sessions``.
    """
    return MemoryApp(
        Path(state_dir), clock=clock, tokens=tokens, watch=watch, ascii=ascii, home=home, settings=settings,
        background=background, session_loader=session_loader,
        insights=insights,
    )
