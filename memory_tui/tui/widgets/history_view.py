"""A record's (or topic's) history: the commits on the left, on the right what the selected
commit changed in the record's text, as a diff drawn by ``diff_view``'s
row builders and renderer (the app's one diff).

Choosing a commit posts :class:`HistoryView.VersionChosen`; ``v`` on a commit posts
:class:`HistoryView.RevertRequested` — the screen confirms and calls
``memory_tui.insights.history.revert`` (this widget never writes).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ..model.insights import HistoryVM, VersionVM
from .diff_view import render_unified, unified_rows

def render_diff(old: str | None, new: str | None, *, removed: bool = False, first: bool = False,
                old_label: str = "before", new_label: str = "this commit") -> Text:
    """What a commit changed, drawn by the app's one diff renderer (``diff_view``)."""
    text = Text()
    if removed:
        text.append("the record was removed in this commit\n\n", "bold red")
    elif first:
        text.append("first version\n\n", "bold")
    rows = unified_rows(old or "", new or "", old_label=old_label, new_label=new_label)
    if rows:
        text.append_text(render_unified(rows))
    elif not removed:
        text.append("(no change to the text)", "dim")
    return text


class VersionOption(Option):
    """An option carrying its version, so handlers never decode ids from strings."""

    def __init__(self, version: VersionVM, index: int) -> None:
        label = Text()
        label.append(version.short, "bold")
        label.append(f" {version.date} ")
        label.append(f"{version.actor:<10}", "magenta")
        label.append(" " + version.subject, "dim")
        if version.removed:
            label.append(" [removed]", "red")
        super().__init__(label, id=f"v{index}")
        self.version = version
        self.index = index


class HistoryView(Horizontal):
    DEFAULT_CSS = """
    HistoryView { height: 1fr; }
    HistoryView > OptionList { width: 2fr; min-width: 40; }
    HistoryView > VerticalScroll { width: 3fr; border-left: solid $accent; padding: 0 1; }
    """
    BINDINGS = [Binding("v", "request_revert", "Revert to this", id="history.revert")]

    class VersionChosen(Message):
        def __init__(self, history: HistoryVM, version: VersionVM) -> None:
            super().__init__()
            self.history = history
            self.version = version

    class RevertRequested(Message):
        """The owner asked to restore ``history.target`` to ``version.commit``."""

        def __init__(self, history: HistoryVM, version: VersionVM) -> None:
            super().__init__()
            self.history = history
            self.version = version

    def __init__(self, history: HistoryVM, **kwargs) -> None:
        super().__init__(**kwargs)
        self.history = history

    def compose(self) -> ComposeResult:
        yield OptionList(*(VersionOption(v, i) for i, v in enumerate(self.history.versions)), id="history-commits")
        with VerticalScroll(id="history-diff-pane"):
            yield Static(id="history-title")
            yield Static(id="history-diff")

    def on_mount(self) -> None:
        commits = self.query_one("#history-commits", OptionList)
        if self.history.versions:
            commits.highlighted = 0
            self.show(0)
        else:
            why = "; ".join(self.history.problems) or "no commit touched it"
            self.query_one("#history-title", Static).update(Text(f"{self.history.target}: no history ({why})"))

    def show(self, index: int) -> None:
        v = self.history.versions[index]
        title = Text()
        title.append(f"{self.history.kind} {self.history.target}", "bold")
        title.append(f"  {v.short}  {v.date}  {v.actor}")
        if v.topic_path and self.history.kind == "record":
            title.append(f"  {v.topic_path}", "dim")
        if v.actor_detail:
            title.append(f"\n{v.actor_detail}", "dim")
        title.append("\n")
        self.query_one("#history-title", Static).update(title)
        first = index == len(self.history.versions) - 1
        old, new = self.history.texts(index)
        older = self.history.versions[index + 1].short if not first else "(none)"
        self.query_one("#history-diff", Static).update(
            render_diff(old, new, removed=v.removed, first=first, old_label=older, new_label=v.short)
        )

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if isinstance(event.option, VersionOption):
            self.show(event.option.index)
            self.post_message(self.VersionChosen(self.history, event.option.version))

    def action_request_revert(self) -> None:
        commits = self.query_one("#history-commits", OptionList)
        if commits.highlighted is None:
            return
        option = commits.get_option_at_index(commits.highlighted)
        if isinstance(option, VersionOption):
            self.post_message(self.RevertRequested(self.history, option.version))
