"""A tiny standalone app around the Sessions widgets (graph, node detail, branch verdict),
wired the way the Sessions screen will wire them. Used by the widget Pilot and snapshot tests."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.app import App, ComposeResult
from textual.containers import Horizontal, VerticalScroll

from memory_tui.core.format.tokens import O200kCounter
from memory_tui.sessions.graph import LayoutOptions
from memory_tui.tui.model.sessions import SessionsModel, dry_run
from memory_tui.tui.widgets.branch_verdict import BranchVerdict
from memory_tui.tui.widgets.node_detail import NodeDetail
from memory_tui.tui.widgets.session_graph import SessionGraph

LATER = 1796014860.0 + 86400
COUNTER = O200kCounter()


class SessionWidgetsApp(App):
    CSS = """
    #graph { width: 3fr; }
    #side { width: 2fr; }
    """

    def __init__(self, state_dir: Path, session_id: str, *, records=None, plan: bool = True,
                 tweak: dict | None = None, ascii: bool = False, select: str | None = None) -> None:
        super().__init__()
        self.state_dir = Path(state_dir)
        self.model = SessionsModel.load(state_dir, now=LATER, counter=COUNTER, records=records)
        self.session_id = session_id
        self.plan = plan
        self.tweak = tweak or {}
        self.ascii = ascii
        self.select = select
        self.selected: list = []  # every NodeSelected message, in order
        self.jumps: list = []  # every RecordJump citation
        self.toggles: list = []
        self.write_requests: list = []

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield SessionGraph(id="graph")
            with VerticalScroll(id="side"):
                yield BranchVerdict(id="verdict")
                yield NodeDetail(id="detail")

    def layout_for(self, options: LayoutOptions):
        return self.model.layout(self.session_id, replace(options, **self.tweak))

    def on_mount(self) -> None:
        graph = self.query_one(SessionGraph)
        graph.ascii_mode = self.ascii
        self.query_one(NodeDetail).ascii_mode = self.ascii
        self.query_one(BranchVerdict).ascii_mode = self.ascii
        graph.show(self.session_id, self.layout_for, select=self.select)
        graph.focus()

    def on_session_graph_node_selected(self, message: SessionGraph.NodeSelected) -> None:
        self.selected.append(message)
        sid, nid = message.session_id, message.node.id
        self.query_one(NodeDetail).show(self.model.node_detail(sid, nid))
        tip = self.model.tip_for(sid, nid)
        plan = dry_run(self.state_dir, sid, tip, clock=lambda: LATER, counter=COUNTER) if tip and self.plan else None
        self.query_one(BranchVerdict).show(self.model.branch_verdict(sid, tip, plan=plan) if tip else None)

    def on_session_graph_group_toggled(self, message: SessionGraph.GroupToggled) -> None:
        self.toggles.append((message.group_id, message.expanded))

    def on_node_detail_record_jump(self, message: NodeDetail.RecordJump) -> None:
        self.jumps.append(message.citation)

    def on_branch_verdict_write_requested(self, message: BranchVerdict.WriteRequested) -> None:
        self.write_requests.append(message.verdict)
