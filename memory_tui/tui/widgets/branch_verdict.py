"""Branch verdict: is the selected tip's branch written, partly written or unwritten, every
reason with its evidence and code, and what writing it now would do (the pipeline's dry run).

Public API::

    panel = BranchVerdict(id="branch-verdict")
    panel.show(vm: BranchVerdictVM | None)   # SessionsModel.branch_verdict(sid, tip, plan=dry_run(...))
    BranchVerdict.WriteRequested(panel, verdict: BranchVerdictVM)   # ``w``: the screen confirms and runs the job
"""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from memory_tui.tui.sessions_model import BranchVerdictVM

# One word and one glyph per verdict (never colour alone).
VERDICT_GLYPHS = {
    False: {"written": "●", "partly written": "◑", "unwritten": "○", "nothing to write": "·"},
    True: {"written": "*", "partly written": "+", "unwritten": "o", "nothing to write": "."},
}
VERDICT_STYLE = {"written": "bold green", "partly written": "bold yellow", "unwritten": "bold red", "nothing to write": "bold"}


def analysing_text(ascii: bool = False) -> Text:
    """What the verdict panel and node detail say while a big session's reasons are computed."""
    return Text(f"analysing the session's branches{'...' if ascii else '…'} (the verdict and its reasons follow)", "dim")


def verdict_text(vm: BranchVerdictVM, *, ascii: bool = False) -> Text:
    out = Text()
    glyph = VERDICT_GLYPHS[ascii].get(vm.verdict, "?")
    out.append(f"{glyph} {vm.verdict}", VERDICT_STYLE.get(vm.verdict, "bold"))
    tags = [t for t, on in (("head", vm.is_head), ("archived", vm.archived), ("unlisted", not vm.listed)) if on]
    out.append(f"  tip {vm.tip}" + (f" [{', '.join(tags)}]" if tags else ""), "dim")
    out.append(f"\n{vm.summary}\n")
    if vm.stranded_ids:
        out.append(f"stranded: {', '.join(vm.stranded_ids)}\n")
    if vm.foreign_ids:
        out.append(f"marked by another workspace: {', '.join(vm.foreign_ids)}\n")
    out.append("\nwhy\n", "bold underline")
    if not vm.reasons:
        out.append("  nothing holds this branch back\n")
    for r in vm.reasons:
        out.append(f"  {r.message}", "")
        out.append(f"  [{r.code}]\n", "dim")
        for ev in r.evidence:
            out.append(f"    {ev.line}\n", "dim")
    out.append("\nwhat would happen now\n", "bold underline")
    plan = vm.plan
    if plan is None and vm.planning:
        out.append(f"  computing the dry run{'...' if ascii else '…'}\n", "dim")
    elif plan is None:
        out.append("  (dry run not computed)\n")
    elif plan.reason_code:
        out.append(f"  the write would fail: {plan.reason_code} {plan.message}\n")
    elif not plan.batches:
        out.append("  writing this branch now: nothing to write\n")
    else:
        n = len(plan.batches)
        out.append(f"  writing this branch now (w): {plan.turns} turns, {plan.tokens} tokens, {n} batch{'es' if n != 1 else ''}\n")
        for i, b in enumerate(plan.batches, 1):
            out.append(f"    batch {i}: {len(b.ids)} turns, {b.tokens} tokens ({b.ids[0]} {'..' if ascii else '…'} {b.ids[-1]})\n", "dim")
    for w in plan.warnings if plan is not None else ():
        out.append(f"  ! {w}\n")
    if plan is not None and plan.batches and plan.files:
        out.append(f"  files it would change: {len(plan.files)} (confirm shows them)\n", "dim")
    return out


class BranchVerdict(Static, can_focus=False):
    DEFAULT_CSS = """
    BranchVerdict { height: auto; }
    """

    BINDINGS = [Binding("w", "write", "Write this branch", id="branch_verdict.write")]

    ascii_mode: reactive[bool] = reactive(False)

    class WriteRequested(Message):
        def __init__(self, panel: "BranchVerdict", verdict: BranchVerdictVM) -> None:
            super().__init__()
            self.panel = panel
            self.verdict = verdict

        @property
        def control(self) -> "BranchVerdict":
            return self.panel

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("", name=name, id=id, classes=classes)
        self.vm: BranchVerdictVM | None = None

    def show(self, vm: BranchVerdictVM | None) -> None:
        self.vm = vm
        self.update(verdict_text(vm, ascii=self.ascii_mode) if vm is not None else "no branch selected")

    def show_analysing(self) -> None:
        """The verdict is not known yet: the session's reasons are being computed."""
        self.vm = None
        self.update(analysing_text(self.ascii_mode))

    def watch_ascii_mode(self) -> None:
        if self.vm is not None:
            self.update(verdict_text(self.vm, ascii=self.ascii_mode))

    def action_write(self) -> None:
        if self.vm is not None:
            self.post_message(self.WriteRequested(self, self.vm))


__all__ = ["BranchVerdict", "analysing_text", "verdict_text"]
