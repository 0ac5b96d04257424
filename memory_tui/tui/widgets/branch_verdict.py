"""Branch verdict: is the selected tip's branch written, partly written or unwritten, every
reason with its evidence and code, and what writing it now would do (the pipeline's dry run).

Public API::

    panel = BranchVerdict(id="branch-verdict")
    panel.show(vm: BranchVerdictVM | None)   # SessionsModel.branch_verdict(sid, tip, plan=dry_run(...))
    BranchVerdict.WriteRequested(panel, verdict: BranchVerdictVM)   # ``w``: the screen confirms and runs the job
"""

from __future__ import annotations

import math
from datetime import datetime

from rich.console import Group
from rich.padding import Padding
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from memory_tui.tui.model.sessions import BranchVerdictVM, EvidenceVM

# Evidence fields that hold a Unix time (meta.json and the registry's updated_at, a node's
# created_at); session-end.json maps a session id to the updated_at the watcher handled.
TIME_FIELDS = frozenset({"updated_at", "created_at"})

# One word and one glyph per verdict (never colour alone).
VERDICT_GLYPHS = {
    False: {"written": "●", "partly written": "◑", "unwritten": "○", "nothing to write": "·"},
    True: {"written": "*", "partly written": "+", "unwritten": "o", "nothing to write": "."},
}
VERDICT_STYLE = {"written": "bold green", "partly written": "bold yellow", "unwritten": "bold red", "nothing to write": "bold"}


def analysing_text(ascii: bool = False) -> Text:
    """What the verdict panel and node detail say while a big session's reasons are computed."""
    return Text(f"analysing the session's branches{'...' if ascii else '…'} (the verdict and its reasons follow)", "dim")


def evidence_epoch(ev: EvidenceVM) -> float | None:
    """The Unix time an evidence line shows, or None when its value is not one."""
    if ev.field.rsplit(".", 1)[-1] not in TIME_FIELDS and not ev.file.endswith("session-end.json"):
        return None
    try:
        value = float(ev.value)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def local_time(ts: float) -> str | None:
    """``ts`` as the owner's local date and time, with the zone's name."""
    try:
        return datetime.fromtimestamp(ts).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()
    except (OverflowError, OSError, ValueError):
        return None


def evidence_line(ev: EvidenceVM) -> str:
    """``ev.line`` with a Unix time shown as a local date and time (a raw epoch reads as noise;
    the exact value is in ``raw_times`` and the CLI's JSON)."""
    ts = evidence_epoch(ev)
    shown = local_time(ts) if ts is not None else None
    if shown is None:
        return ev.line
    where = ev.file or "(no file)"
    return f"{where} {ev.field} = {shown}" if ev.field else f"{where} = {shown}"


def raw_times(reasons) -> str | None:
    """The exact values behind the dates shown (a tooltip): the idle watcher compares them to
    the digit, which a date to the second does not show."""
    seen: dict[str, None] = {}
    for r in reasons:
        for ev in r.evidence:
            if evidence_epoch(ev) is not None:
                seen.setdefault(f"{ev.file} {ev.field} = {ev.value}".strip(), None)
    return "exact values:\n" + "\n".join(seen) if seen else None


def countdown(at: float | None, now: float | None) -> str:
    """Time left to ``at`` (the idle pass), moving with ``now``."""
    if at is None or now is None:
        return ""
    left = int(at - now)
    if left <= 0:
        return "due now"
    h, rest = divmod(left, 3600)
    m = (rest + 59) // 60
    return f"in {h} h {m} min" if h else f"in {m} min"


def verdict_lines(vm: BranchVerdictVM, *, ascii: bool = False, now: float | None = None) -> list[tuple[int, Text]]:
    """The panel as ``(indent, line)`` pairs: a line wider than the panel wraps under its own
    first character (a reason's continuation hangs under the reason, not at the margin)."""
    lines: list[tuple[int, Text]] = []

    def add(indent: int, *parts: tuple[str, str]) -> None:
        lines.append((indent, Text.assemble(*parts)))

    glyph = VERDICT_GLYPHS[ascii].get(vm.verdict, "?")
    tags = [t for t, on in (("head", vm.is_head), ("archived", vm.archived), ("unlisted", not vm.listed)) if on]
    add(0, (f"{glyph} {vm.verdict}", VERDICT_STYLE.get(vm.verdict, "bold")),
        (f"  tip {vm.tip}" + (f" [{', '.join(tags)}]" if tags else ""), "dim"))
    add(0, (vm.summary, ""))
    if vm.stranded_ids:
        add(0, (f"stranded: {', '.join(vm.stranded_ids)}", ""))
    if vm.foreign_ids:
        add(0, (f"marked by another workspace: {', '.join(vm.foreign_ids)}", ""))
    if vm.next_write:
        left = countdown(vm.next_at, now)
        add(0, ("next write: ", "bold"), (vm.next_write, ""), (f" ({left})" if left else "", "bold"))
        for ev in vm.next_evidence:
            add(4, (evidence_line(ev), "dim"))
    add(0)
    add(0, ("why", "bold underline"))
    if not vm.reasons:
        add(2, ("nothing holds this branch back", ""))
    for r in vm.reasons:
        add(2, (r.message, ""), (f"  [{r.code}]", "dim"))
        for ev in r.evidence:
            add(4, (evidence_line(ev), "dim"))
    add(0)
    add(0, ("what would happen now", "bold underline"))
    plan = vm.plan
    if plan is None and vm.planning:
        add(2, (f"computing the dry run{'...' if ascii else '…'}", "dim"))
    elif plan is None:
        add(2, ("(dry run not computed)", ""))
    elif plan.reason_code:
        add(2, (f"the write would fail: {plan.reason_code} {plan.message}", ""))
    elif not plan.batches:
        add(2, ("writing this branch now: nothing to write", ""))
    else:
        n = len(plan.batches)
        add(2, (f"writing this branch now (w): {plan.turns} turns, {plan.tokens} tokens, {n} batch{'es' if n != 1 else ''}", ""))
        for i, b in enumerate(plan.batches, 1):
            add(4, (f"batch {i}: {len(b.ids)} turns, {b.tokens} tokens ({b.ids[0]} {'..' if ascii else '…'} {b.ids[-1]})", "dim"))
    for w in plan.warnings if plan is not None else ():
        add(2, (f"! {w}", ""))
    if plan is not None and plan.batches and plan.files:
        add(2, (f"files it would change: {len(plan.files)} (confirm shows them)", "dim"))
    return lines


def verdict_text(vm: BranchVerdictVM, *, ascii: bool = False, now: float | None = None) -> Text:
    """The panel as one text (the indents as spaces): what a test or a plain dump reads."""
    out = Text()
    for indent, line in verdict_lines(vm, ascii=ascii, now=now):
        out.append(" " * indent)
        out.append_text(line)
        out.append("\n")
    return out


def verdict_renderable(vm: BranchVerdictVM, *, ascii: bool = False, now: float | None = None) -> Group:
    """What the panel draws: each line padded by its indent, so its wrapped part keeps it."""
    parts = [Padding(line, (0, 0, 0, indent)) if indent else line
             for indent, line in verdict_lines(vm, ascii=ascii, now=now)]
    return Group(*parts, Text(""))  # the blank line that parts it from the node detail below


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
        self.plain = ""  # what the panel shows, as plain text (its lines at their indents)
        self.analysing = False  # the placeholder is up (no vm yet): redrawn when the glyphs switch

    def on_mount(self) -> None:
        # the countdown to the idle pass moves while the panel is up (the app's clock)
        self.set_interval(30, self._tick)

    def _now(self) -> float | None:
        now = getattr(self.app, "now", None)
        try:
            return now().timestamp() if now is not None else None
        except Exception:  # noqa: BLE001 - a panel outside the app: no countdown
            return None

    def _tick(self) -> None:
        if self.vm is not None and self.vm.next_at is not None:
            self.show(self.vm)

    def show(self, vm: BranchVerdictVM | None) -> None:
        self.vm = vm
        self.analysing = False
        now = self._now() if self.is_attached else None
        self.plain = verdict_text(vm, ascii=self.ascii_mode, now=now).plain if vm is not None else "no branch selected"
        self.update(verdict_renderable(vm, ascii=self.ascii_mode, now=now) if vm is not None else "no branch selected")
        self.tooltip = raw_times(vm.reasons) if vm is not None else None

    def show_analysing(self) -> None:
        """The verdict is not known yet: the session's reasons are being computed."""
        self.vm = None
        self.analysing = True
        text = analysing_text(self.ascii_mode)
        self.tooltip = None
        self.plain = text.plain
        self.update(text)

    def watch_ascii_mode(self) -> None:
        if self.vm is not None:
            self.show(self.vm)
        elif self.analysing:
            self.show_analysing()  # the placeholder follows the glyphs too

    def action_write(self) -> None:
        if self.vm is not None:
            self.post_message(self.WriteRequested(self, self.vm))


__all__ = ["BranchVerdict", "analysing_text", "evidence_line", "raw_times", "verdict_lines", "verdict_renderable",
           "verdict_text"]
