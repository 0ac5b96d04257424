"""The Sessions screen's work off the UI thread and the side panels it fills.

A big snapshot's Sessions model, a big session's layout, its explanation (every tip's
reasons) and each branch's dry run take from a fraction of a second to seconds: each runs in
a worker while the screen paints and answers its keys, and its result is drawn only if the
screen still shows what it was computed for (a reload or another selection may have replaced
it). The node detail and the branch verdict panels are filled from those results.
"""

from __future__ import annotations

import time
from functools import partial

from textual import work
from textual.containers import VerticalScroll

from memory_tui.core.format.fastdata import bulk

from ..model.data import WorkspaceModel
from ..model.sessions import BranchVerdictVM, DryRunVM, SessionsModel, dry_run
from ..widgets.branch_verdict import BranchVerdict
from ..widgets.node_detail import NodeDetail
from ..widgets.session_graph import SessionGraph


class SessionsWork:
    """Mixed into ``SessionsScreen``."""

    def _init_work(self) -> None:
        self.verdict: BranchVerdictVM | None = None  # the verdict panel's branch (what `w` writes)
        self._verdict_sm: SessionsModel | None = None  # the Sessions model ``verdict`` was drawn from
        self._node_shown: tuple[str, str] | None = None  # (session, node) the side panels show
        self._plans: dict[tuple[int, str, str], DryRunVM] = {}
        self._explaining: SessionsModel | None = None  # the model whose explanation a worker builds
        self._building: WorkspaceModel | None = None  # the model whose Sessions model a worker builds
        self._pending_focus: tuple[str, str | None] | None = None  # a `g` arrival while analysing

    # The overviews of a big session (every node classified, its DAG swept twice: seconds on
    # 10 000 nodes when the overview table misses) are built in a worker: the screen says
    # "analysing…" meanwhile and answers its keys, then draws what the UI thread would have.
    def _analysing(self, m: WorkspaceModel) -> bool:
        """True while the Sessions model of ``m`` is being built in a worker (starting it)."""
        if m.sessions_view_built() is not None or not m.state_exists or not m.sessions_view_heavy():
            return False
        if self._building is not m:
            self._building = m
            self._build_sessions(m, self.shell.now().timestamp(), getattr(self.app, "counter", None))
        return True

    # An error here is a bug, as it was on the UI thread: it ends the app with its traceback.
    @work(thread=True, exclusive=True, group="sessions-overview", description="sessions-overview")
    def _build_sessions(self, m: WorkspaceModel, now: float, counter) -> None:
        with bulk():  # every node of every session: ~10^5 acyclic objects the collector would walk
            m.sessions_view(now, counter)
        self.app.call_from_thread(self._sessions_built, m)

    def _sessions_built(self, m: WorkspaceModel) -> None:
        if self.model is not m:
            return  # a reload replaced the model; its own build follows
        if self not in self.app.screen_stack:
            m.drop_sessions_view()  # the view was left while it was built
            self._building = None
            return
        self.refresh_view(force=True)
        pending, self._pending_focus = self._pending_focus, None
        if pending is not None:
            self.focus_session(*pending)

    # A big session's layout that neither this process nor the layout table holds is a sweep
    # over every row (~0.5 s for 10 000 nodes): computed in a worker, so the list, the header
    # and the rest of the screen paint and answer at once, the graph saying what it waits for.
    # An error here is a bug, as it was on the UI thread: it ends the app with its traceback.
    @work(thread=True, exclusive=True, group="sessions-layout", description="sessions-layout")
    def _compute_layout(self, sm: SessionsModel, sid: str, select: str | None) -> None:
        with bulk():
            sm.layout(sid)
        self.app.call_from_thread(self._layout_done, sm, sid, select)

    def _layout_done(self, sm: SessionsModel, sid: str, select: str | None) -> None:
        graph = self.query_one("#sessions-graph", SessionGraph)
        if self.sessions is not sm or graph.session_id != sid or graph.layout_data is not None:
            return  # a reload or another session took its place
        graph.show(sid, partial(sm.layout, sid), select=select)

    # The dry run re-reads the session and plans its batches: seconds on a big session, so it
    # runs in a worker after the panel has painted with a "computing" line. A result is kept
    # per (model, session, tip) and shown only if the panel still shows that branch.
    def _plan_key(self, sm: SessionsModel, sid: str, tip: str) -> tuple[int, str, str]:
        return (id(sm), sid, tip)

    def _show_verdict(self, sm: SessionsModel, sid: str, tip: str | None) -> None:
        self._verdict_sm = sm
        if tip is None:
            self.verdict = None
        else:
            plan = self._plans.get(self._plan_key(sm, sid, tip))
            self.verdict = sm.branch_verdict(sid, tip, plan=plan, planning=plan is None)
            if plan is None:
                self.call_after_refresh(self._start_plan, sm, sid, tip)
        self.query_one(BranchVerdict).show(self.verdict)

    def _start_plan(self, sm: SessionsModel, sid: str, tip: str) -> None:
        if not self._still_shown(sm, sid, tip) or self.model is None:
            return
        stamp = self.shell.now().timestamp()
        self._compute_plan(sm, sid, tip, self.model.state_dir, stamp, getattr(self.app, "counter", None))

    def _still_shown(self, sm: SessionsModel, sid: str, tip: str) -> bool:
        # The panel's own model, not the app's latest: a reload that changed nothing visible
        # (the watcher seeing a job's own files) swaps the model without redrawing the panel,
        # and a dry run checked against the new model would be dropped, leaving "computing
        # the dry run…" up until the selection moved.
        vm = self.verdict
        return vm is not None and self._verdict_sm is sm and (vm.session_id, vm.tip) == (sid, tip)

    # An error here is a bug, as it was on the UI thread: it ends the app with its traceback.
    @work(thread=True, exclusive=True, group="sessions-dry-run", description="sessions-dry-run")
    def _compute_plan(self, sm: SessionsModel, sid: str, tip: str, state_dir, stamp: float, counter) -> None:
        with bulk():
            plan = dry_run(state_dir, sid, tip, clock=lambda: stamp, counter=counter, sessions_read=sm.snapshot)
        self.app.call_from_thread(self._plan_ready, sm, sid, tip, plan)

    def _plan_ready(self, sm: SessionsModel, sid: str, tip: str, plan: DryRunVM) -> None:
        live = {id(m) for m in (self._verdict_sm, self.sessions) if m is not None}
        if id(sm) not in live:
            return  # a model since replaced by one that redrew the panel: its own plan follows
        # plans of replaced models go; an answer that arrives late never drops a newer one
        self._plans = {k: v for k, v in self._plans.items() if k[0] in live}
        self._plans[self._plan_key(sm, sid, tip)] = plan
        if self._still_shown(sm, sid, tip):  # else a stale answer: the selection moved on
            self._show_verdict(sm, sid, tip)

    def _show_node(self, sid: str, nid: str) -> None:
        sm = self.sessions
        if sm is None:
            return
        known = nid in sm.session_data(sid).nodes or sm.is_special_node(sid, nid)
        if self._node_shown != (sid, nid):
            self._node_shown = (sid, nid)
            self._side_to_top()
        if not sm.explained:
            # A big session: the list and graph painted from the overview; the reasons follow.
            self.verdict = None
            self.query_one(NodeDetail).show(sm.node_detail(sid, nid) if known else None)
            self.query_one(BranchVerdict).show_analysing()
            if self._explaining is not sm:
                self._explaining = sm
                self._start_explain(sm, time.monotonic())
            return
        self.query_one(NodeDetail).show(sm.node_detail(sid, nid) if known else None)
        self._show_verdict(sm, sid, sm.tip_for(sid, nid))

    # The explanation of a big session (every tip's reasons: about a second for 325 tips over
    # 10 000 nodes) is built in a worker started after the graph's first paint, so it never
    # delays that paint; the node detail and verdict panel say "analysing…" until it is in.
    def _start_explain(self, sm: SessionsModel, since: float, painted: bool = False) -> None:
        if self.sessions is not sm:
            return
        graph = self.query_one("#sessions-graph", SessionGraph)
        # The worker shares the interpreter (the GIL) with the UI: it starts once the graph's
        # rows are drawn and the screen has had a moment to finish its first frame (unless the
        # graph is not drawn at all: hidden or no room, then after 1 s).
        if not painted and time.monotonic() - since < 1.0:
            self.set_timer(0.02 if not graph.painted else 0.1, partial(self._start_explain, sm, since, graph.painted))
            return
        self._compute_explanation(sm)

    # An error here is a bug, as it was on the UI thread: it ends the app with its traceback.
    @work(thread=True, exclusive=True, group="sessions-explain", description="sessions-explain")
    def _compute_explanation(self, sm: SessionsModel) -> None:
        with bulk():
            sm.explain_now()
        self.app.call_from_thread(self._explained, sm)

    def _explained(self, sm: SessionsModel) -> None:
        if self.sessions is not sm:
            return  # a reload replaced the model; its own explanation follows
        graph = self.query_one("#sessions-graph", SessionGraph)
        node = graph.selected_node
        if graph.session_id is not None and node is not None:
            self._show_node(graph.session_id, node.id)

    def _side_to_top(self) -> None:
        """Another node: its panels are read from their first line (the verdict, or in the
        short layout's node view the node detail), not from where the last node's were left."""
        side = self.query_one("#sessions-side", VerticalScroll)
        if self.has_class("-node"):
            self.call_after_refresh(side.scroll_to_widget, self.query_one(NodeDetail), top=True, animate=False)
        else:
            side.scroll_home(animate=False, immediate=True)
