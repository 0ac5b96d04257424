"""History — a record's or topic's commits with what each changed, and revert.

``h`` on a record (or on a topic in the Topics tree) pushes :class:`HistoryScreen`. ``v``
on a commit plans the revert (``plan_revert``), shows its diff and any blockers in
:class:`ConfirmRevert`; on yes the revert runs in a worker through the transactional core,
a refusal shows its reason, and the app reloads the model after a revert that happened.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Static

from memory_tui.core.format.errors import MemoryError

from ..model import insights
from ..model.load import load_model
from ..widgets import HeaderBar
from ..widgets.footer import FittedFooter, RankedFooter
from ..widgets.diff_view import DiffView
from ..widgets.history_view import HistoryView


def open_history(app: Any, target: str) -> None:
    """Push the history of ``target`` (a block id or a topic path); it is read in a worker
    (git log and a parse per commit: seconds on a long history), "loading…" meanwhile. When
    there is none the screen closes again and says why."""
    model = app.model
    if model is None or not model.memory_exists:
        app.notify("No memory workspace.", severity="warning")
        return
    app.push_screen(HistoryScreen(None, target=target))


class HistoryLoaded(Message):
    def __init__(self, history: Any = None, error: MemoryError | None = None) -> None:
        super().__init__()
        self.history = history
        self.error = error


def plan_text(plan: Any) -> Text:
    text = Text()
    text.append(f"Revert {plan.kind} {plan.target} to {plan.to_commit[:10]}", "bold")
    text.append(f"\n{plan.topic_path} changes; the revert is a new commit, history is kept.")
    if plan.new_text is None:
        text.append("\nThe file did not exist then: it is deleted.", "bold red")
    if plan.dropped_ids:
        text.append("\nBlock ids that go away: " + ", ".join("^" + i for i in plan.dropped_ids), "yellow")
    for b in plan.blockers:
        text.append(f"\nrefused: ^{b.dropped_id} is linked from ^{b.linker_id} ({b.linker_path}:{b.linker_line})", "bold red")
    if plan.noop:
        text.append("\nThe text is already the same: nothing to revert.", "dim")
    return text


class ConfirmRevert(ModalScreen[bool]):
    """The plan's diff and blockers; yes only when there is something to install."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Revert", id="history.confirm"),
        Binding("n,escape", "answer(False)", "Cancel", id="history.cancel"),
    ]
    DEFAULT_CSS = """
    ConfirmRevert { align: center middle; }
    ConfirmRevert > Vertical { width: 90%; height: 80%; border: thick $warning; background: $surface; padding: 0 1; }
    ConfirmRevert #revert-plan { height: auto; }
    ConfirmRevert Horizontal { height: auto; }
    """

    def __init__(self, plan: Any) -> None:
        super().__init__()
        self.plan = plan

    @property
    def allowed(self) -> bool:
        return not self.plan.blockers and not self.plan.noop

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(plan_text(self.plan), id="revert-plan")
            yield DiffView(self.plan.old_text or "", self.plan.new_text or "", old_label="now",
                           new_label=f"at {self.plan.to_commit[:10]}", id="revert-diff")
            with Horizontal():
                yield Button("Revert (y)", id="revert-yes", variant="warning", disabled=not self.allowed)
                yield Button("Cancel (n)", id="revert-no")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(bool(yes) and self.allowed)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "revert-yes" and self.allowed)


class RevertDone(Message):
    def __init__(self, result: Any, history: Any = None) -> None:
        super().__init__()
        self.result = result
        self.history = history  # the target's history after the revert (None when refused)


def result_text(result: Any) -> Text:
    if result.ok:
        return Text(f"Reverted {result.target} to {(result.to_commit or '')[:10]}: commit {(result.git_commit or '')[:10]}", "green")
    text = Text(f"Revert refused: {result.code}: {result.message}", "bold red")
    if result.path:
        text.append(f"  ({result.path}{':' + str(result.line) if result.line else ''})", "dim")
    for b in result.blockers:
        text.append(f"\n^{b.dropped_id} is linked from ^{b.linker_id} ({b.linker_path}:{b.linker_line})")
    return text


class HistoryScreen(RankedFooter, Screen[None]):
    # a footer that keeps ? Help and esc, revert first (FittedFooter)
    FOOTER_RANKS: ClassVar[dict[str, int]] = {"request_revert": 75, "toggle_side": 70}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", key_display="esc", id="history.close"),
    ]
    DEFAULT_CSS = """
    HistoryScreen #history-outcome { height: auto; padding: 0 1; }
    """

    def __init__(self, history: Any = None, *, target: str | None = None) -> None:
        super().__init__()
        self.history = history  # None until the worker has read it (``target`` given)
        self.target = target if target is not None else history.target

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield Static(id="history-outcome")
        if self.history is not None:
            yield HistoryView(self.history, id="history")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.render_header()
        if self.history is None:
            self.show_outcome(Text(f"loading the history of {self.target}…", "dim"))
            self._load(self.app.model, self.target)
            return
        self._show_loaded()

    def render_header(self) -> None:
        """The app's header (the app calls this again when what it shows changes)."""
        app = self.app
        width = self.size.width or app.size.width or 120
        self.query_one(HeaderBar).update(app.header_line(width))

    def _show_loaded(self) -> None:
        n = len(self.history.versions)
        # one version is the text as it stands: there is nothing older to revert to
        what = "1 version, the current one" if n == 1 else f"{n} versions · v revert to the highlighted one"
        self.query_one("#history-outcome", Static).update(Text(f"History of {self.history.kind} {self.history.target}: {what}", "dim"))
        self.query_one("#history-commits").focus()

    @work(thread=True, exclusive=True, group="history-load", exit_on_error=False, description="history-load")
    def _load(self, model: Any, target: str) -> None:
        try:
            self.post_message(HistoryLoaded(insights.target_history(model, target)))
        except MemoryError as exc:
            self.post_message(HistoryLoaded(error=exc))

    async def on_history_loaded(self, message: HistoryLoaded) -> None:
        if message.error is not None:
            self.app.notify(f"{message.error.code}: {message.error.message}", severity="error")
            self.dismiss()
            return
        self.history = message.history
        await self.mount(HistoryView(self.history, id="history"), after=self.query_one("#history-outcome"))
        self._show_loaded()

    def action_close(self) -> None:
        self.dismiss()

    def on_history_view_revert_requested(self, event: HistoryView.RevertRequested) -> None:
        model = self.app.model
        try:
            plan = insights.plan_target_revert(model, event.history.target, event.version.commit)
        except MemoryError as exc:
            self.show_outcome(Text(f"Cannot revert: {exc.code}: {exc.message}", "bold red"))
            return
        revision = model.revision

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_revert(event.history.target, event.version.commit, plan.base_revision or revision)

        self.app.push_screen(ConfirmRevert(plan), answered)

    @work(thread=True, exclusive=True, group="revert", exit_on_error=False, description="revert")
    def run_revert(self, target: str, commit: str, base_revision: str | None) -> None:
        model = self.app.model
        result = insights.revert_target(model, target, commit, base_revision)
        fresh = None
        if result.ok:  # the new commit belongs in the list at once (read here, off the UI thread)
            try:
                fresh = insights.target_history(load_model(model.state_dir, counter=self.app.counter, previous=model), target)
            except MemoryError:
                fresh = None
        self.post_message(RevertDone(result, fresh))

    async def on_revert_done(self, message: RevertDone) -> None:
        result = message.result
        self.show_outcome(result_text(result))
        if not result.ok:
            self.notify(result_text(result).plain, severity="error", timeout=15)
            return
        self.notify(result_text(result).plain)
        self.app.action_reload()
        if message.history is not None:
            self.history = message.history
            await self.query_one(HistoryView).remove()
            await self.mount(HistoryView(self.history, id="history"), after=self.query_one("#history-outcome"))
            self.query_one("#history-commits").focus()

    def show_outcome(self, text: Text) -> None:
        self.query_one("#history-outcome", Static).update(text)
