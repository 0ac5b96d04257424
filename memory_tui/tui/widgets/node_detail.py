"""Node detail: one session node as memory sees it (role, time, text, DAG metadata, the mark
and who wrote it, the reasons with evidence) and the topic records citing it.

Public API::

    detail = NodeDetail(id="node-detail")
    detail.show(vm: NodeDetailVM | None)      # from SessionsModel.node_detail(sid, node_id)
    detail.show_more / press ``m``            # the whole text instead of the first 600 characters
    NodeDetail.RecordJump(detail, citation: CitationVM)   # a citing record was chosen (enter)
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from memory_tui.sessions import graph as G
from memory_tui.tui.model.sessions import CitationVM, NodeDetailVM

from .branch_verdict import evidence_line, raw_times

PREVIEW_CHARS = 600


class CitationOption(Option):
    """An option that carries its citation, so the handler never decodes ids from strings."""

    def __init__(self, citation: CitationVM) -> None:
        heading = " › ".join(citation.headings)
        label = Text.assemble((citation.topic_path, "bold"), f"  {heading}  ", (f"[{citation.memory_id}]", "dim"))
        if citation.label:
            label.append(f"  “{citation.label}”", "italic")
        super().__init__(label, id=f"cite-{citation.memory_id}")
        self.citation = citation


def detail_text(vm: NodeDetailVM, *, ascii: bool = False, show_more: bool = False) -> Text:
    g = G.glyphs(ascii)
    out = Text()
    out.append(f"{g.states.get(vm.state, '?')} ", "bold")
    out.append(f"{vm.role}", "bold")
    out.append(f"  {vm.node_id}", "dim")
    if vm.time:
        out.append(f"  {vm.time}")
    out.append("\n")
    if vm.error is not None:
        out.append("unreadable node file\n", "bold red")
        out.append(f"{vm.error}\n")
    elif vm.link is not None:
        out.append(f"another session: {vm.link[0]}, node {vm.link[1]}  ", "bold")
        out.append("[g] open it\n", "bold")
    elif vm.analysing:
        out.append(f"verdict: analysing the session's branches{'...' if ascii else '…'}\n", "dim")
    else:
        verdict = vm.verdict or "graph root"
        out.append(f"verdict: {verdict}" + (f" (on tip {vm.tip})" if vm.tip else "") + "\n")
    facts: list[tuple[str, str]] = []
    for key, value in (("forked_from", vm.forked_from), ("edit_of", vm.edit_of), ("display", vm.display),
                       ("source", vm.source), ("spawned by", vm.spawn_caller)):
        if value:
            facts.append((key, value))
    if vm.rewound:
        facts.append(("rewound", "yes"))
    if vm.spawn_branch_root:
        facts.append(("spawn_branch_root", "yes"))
    if vm.covers_ids:
        facts.append(("covers_ids", ", ".join(vm.covers_ids)))
    if vm.error is None and vm.link is None:
        if vm.mark:
            facts.append(("mark", f"{vm.mark} ({vm.mark_by})"))
        else:
            facts.append(("mark", "none"))
    for key, value in facts:
        out.append(f"{key}: ", "bold")
        out.append(f"{value}\n")
    out.append(f"file: {vm.file}\n", "dim")
    kept_line = {"kept": (g.states[G.WRITTEN_S], "written and kept"), "dropped": (g.states[G.DROPPED_S], "written, nothing kept"),
                 "unmarked_kept": (g.markers[G.KEPT_M], "kept without a mark")}.get(vm.kept or "")
    if kept_line is not None and vm.kept_reason is not None:
        out.append(f"{kept_line[0]} {kept_line[1]}: ", "bold")
        out.append(f"{vm.kept_reason.message}\n")
        for ev in vm.kept_reason.evidence:
            out.append(f"  {evidence_line(ev)}\n", "dim")
    if vm.summary is not None:
        out.append(f"{g.markers[G.SUMMARY_HEAD_M]} {vm.summary.code}: ", "bold")
        out.append(f"{vm.summary.message}\n")
        for ev in vm.summary.evidence:
            out.append(f"  {evidence_line(ev)}\n", "dim")
    out.append("\n")
    body, cut = (vm.text, False) if show_more else vm.preview(PREVIEW_CHARS)
    out.append(body or "(no text)")
    if cut:
        out.append("\n[m] show more", "bold")
    elif show_more and len(vm.text) > PREVIEW_CHARS:
        out.append("\n[m] show less", "bold")
    out.append("\n")
    for r in vm.reasons:
        out.append(f"\n{r.code}", "bold")
        out.append(f": {r.message}\n")
        for ev in r.evidence:
            out.append(f"  {evidence_line(ev)}\n", "dim")
    out.append(f"\ncited by {len(vm.citations)} record(s)" if vm.citations else "\nno topic record cites this turn")
    return out


class NodeDetail(Vertical, can_focus=False):
    DEFAULT_CSS = """
    NodeDetail { height: auto; }
    NodeDetail > #node-detail-body { height: auto; }
    NodeDetail > #node-detail-citations { height: auto; max-height: 8; }
    """

    BINDINGS = [Binding("m", "toggle_more", "Show more", id="node_detail.more")]

    show_more: reactive[bool] = reactive(False)
    ascii_mode: reactive[bool] = reactive(False)

    class RecordJump(Message):
        """Jump to the topic record behind ``citation`` (its ``memory_id`` and ``topic_path``)."""

        def __init__(self, detail: "NodeDetail", citation: CitationVM) -> None:
            super().__init__()
            self.detail = detail
            self.citation = citation

        @property
        def control(self) -> "NodeDetail":
            return self.detail

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.vm: NodeDetailVM | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="node-detail-body")
        yield OptionList(id="node-detail-citations")

    def show(self, vm: NodeDetailVM | None) -> None:
        if vm is None or self.vm is None or vm.node_id != self.vm.node_id:
            self.show_more = False
        self.vm = vm
        self._render_body()
        options = self.query_one("#node-detail-citations", OptionList)
        options.clear_options()
        if vm is not None:
            options.add_options([CitationOption(c) for c in vm.citations])
        options.display = bool(vm is not None and vm.citations)

    def _render_body(self) -> None:
        body = self.query_one("#node-detail-body", Static)
        body.update(detail_text(self.vm, ascii=self.ascii_mode, show_more=self.show_more) if self.vm else "no node selected")
        body.tooltip = raw_times(self.vm.reasons) if self.vm else None

    def watch_show_more(self) -> None:
        if self.is_mounted:
            self._render_body()

    def watch_ascii_mode(self) -> None:
        if self.is_mounted:
            self._render_body()

    def action_toggle_more(self) -> None:
        self.show_more = not self.show_more

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        option = event.option
        if isinstance(option, CitationOption):
            self.post_message(self.RecordJump(self, option.citation))


__all__ = ["NodeDetail", "CitationOption", "detail_text"]
