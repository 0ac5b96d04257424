"""The app's model over time: loading it in a worker (the Topics outline first, then the
workspace, then sessions), applying it to the views, reloading what the watcher saw change,
and computing the insight figures after each new model has painted.

Workers never touch widgets: they hand results back with ``call_from_thread`` or a message.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from textual import work

from memory_tui.core.format.fastdata import bulk, hold_heap
from memory_tui.core.store.lockprobe import LockProbe, probe_write_lock

from ..messages import InsightsReady, ModelApplied, WorkspaceChanged
from ..model.data import WorkspaceModel, changed_views, header_changed
from ..model.load import load_model, outline_model, with_session_list, with_sessions
from ..views import VIEWS
from ..watcher import watch_changes

if TYPE_CHECKING:
    from ..model.insights import InsightsVM


class ModelLoading:
    """Mixed into the app: ``load_in_background`` (one load at a time, later asks merged),
    ``apply_model``, the watcher, ``compute_insights``."""

    def _init_loading(self, insights: bool) -> None:
        self._reload_timer = None
        self._pending_paths: set[str] = set()
        self._load_seq = 0
        self._queued_loads: list[set[str] | None] = []  # asked for while the first load streams in
        self._applied_seq = 0
        # One load at a time: a thread worker cannot be stopped, so a second load started
        # while one runs would only run beside it, both holding the GIL against the UI and any job.
        self._load_running = False
        self._watch_stop = threading.Event()
        self.loading: str | None = None  # "workspace" / "sessions" while a stage is loading
        self._gc_frozen = False  # see _load
        # figures of the current model, computed in a worker after it lands.
        self.insights_enabled = insights
        self.insights: InsightsVM | None = None
        self._insights_key: tuple[Any, ...] | None = None  # insights_key() of the model they describe

    def apply_model(self, model: WorkspaceModel, changed: set[str] | None = None) -> None:
        self.model = model
        views = frozenset(VIEWS if changed is None else changed)
        for view, screen in self.view_screens.items():
            screen.model_changed(model, redraw=view in views, now=screen is self.current_view_screen)
        self._redraw_headers_over_views()
        self.post_message(ModelApplied(model.revision, views))

    def action_reload(self) -> None:
        self.load_in_background(None)
        # a screen over the views that holds a file of its own (the editor) re-reads it too
        for screen in self.screen_stack:
            hook = getattr(screen, "reload_requested", None)
            if hook is not None:
                hook()

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
        first = previous is None
        if first:
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
        # A model is ~10^6 acyclic objects (scale 4: 80 000 records' view models, their
        # timeline rows), and so is the sessions list's index: left on, the collector ran ~780
        # times during one load_model and walked them for 0.7-0.8 of its ~4.3 s, to find
        # nothing. Not around ``with_sessions``, the cold read of every session, whose peak
        # is the app's highest: garbage held back there would add to it.
        with bulk():
            model = load_model(self.state_dir, home=self.home, sessions=False, **kw)
        painted_first = False
        if not model.sessions_loaded:
            if previous is None or not previous.sessions_loaded:
                # Nothing shows sessions yet: the records, Recent and Core paint now, the
                # sessions follow. Even their quick list (the summary index: read whole, and
                # one stat per node file to check it) is 0.7 s at the benchmark's scale 1 and
                # 1.5 s at scale 4 that every view but Sessions would otherwise wait for.
                self.call_from_thread(self._loaded, seq, model, touched is None, "sessions")
                painted_first = True
            # the sessions from their summary index when every entry is fresh (no session is
            # read); else the sessions that changed are read
            with bulk():
                listed = with_session_list(model, counter=self.counter)
            model = listed if listed is not None else with_sessions(model, **kw)
        probe = probe_write_lock(self.state_dir / "memory")
        if not self._gc_frozen:
            # the first whole model is millions of long-lived objects;
            # left to the cyclic GC, every later collection walks all of them, which was most
            # of a one-file reload. Frozen objects are still freed by reference counting when
            # a reload drops them; only a cycle among them would outlive its last use.
            hold_heap()
            self._gc_frozen = True
        # after the workspace's own paint only what the sessions changed is redrawn
        self.call_from_thread(self._loaded, seq, model, touched is None and not painted_first, None, probe)
        if first and (self.state_dir / "memory").is_dir():
            # What the start parsed and derived anew, kept for the next start in the user cache,
            # as the CLI's reading commands keep theirs: a reader never writes into the state
            # dir, and without this an owner who only opens the app on a workspace OpenProgram
            # writes parsed every topic and archive on every start. Once: the copy is written
            # whole, which a reload of one changed file should not pay for.
            from memory_tui.core.store import parsecache

            parsecache.keep_for_readers(self.state_dir / "memory")

    def _loaded(self, seq: int, model: WorkspaceModel, explicit: bool, loading: str | None = None,
                probe: LockProbe | None = None) -> None:
        if seq < self._applied_seq:
            return  # an older load finished after a newer one: keep the newer
        self._applied_seq = seq
        stage_done = self.loading != loading
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
        if not changed and not header_changed(old, model) and not stage_done:
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

    def compute_insights(self) -> None:
        """Compute the insight figures of the current model in a worker (an older run is
        cancelled); the header and badges draw them when ``InsightsReady`` arrives."""
        m = self.model
        if not self.insights_enabled or m is None or not m.memory_exists or m.outline:
            return
        if self.jobs:
            return  # seconds of CPU per batch beside the job; the reload at its end computes them
        if self.loading == "sessions":
            return  # figures without the sessions would be replaced (and cost the GIL) before long
        # the insights engine is imported with its first use, after the first paint
        from ..model.insights import insights_key

        if self.insights is not None and self._insights_key == insights_key(m) and m.revision:
            return  # the same memory commit and the same sessions: the figures stand
        self._insights_worker(m)

    # reload-fast: an explicit description, or Textual builds one from repr() of the model
    # (every record's dataclass, a large share of each reload)
    @work(thread=True, exclusive=True, group="insights", exit_on_error=False, description="insights")
    def _insights_worker(self, model: WorkspaceModel) -> None:
        from ..model.insights import insights_key
        from ..model.kept_insights import load_insights

        with bulk():  # as a load: the figures are ~10^5 acyclic objects
            found = load_insights(model)
        if found is not None:
            self.post_message(InsightsReady(model.revision, found, insights_key(model)))

    def on_insights_ready(self, message: InsightsReady) -> None:
        from ..model.insights import insights_key

        if self.model is None or message.key != insights_key(self.model):
            return  # figures of a model that has since been replaced
        self.insights, self._insights_key = message.insights, message.key
        for screen in self.view_screens.values():
            screen.insights_changed(now=screen is self.current_view_screen)
        if self.screen not in self.view_screens.values() and hasattr(self.screen, "insights_changed"):
            self.screen.insights_changed(now=True)  # the Evidence screen over a view
