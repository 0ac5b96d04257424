"""Problems: every problem the app knows (config, settings, topics, sources, sessions,
writer status), one row each with ``path:line:col``, code and message. Enter opens the
location in the view that shows it (a topic file in Topics)."""

from __future__ import annotations

from typing import Callable, Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from memory_tui.core.format.errors import Problem

from ..widgets.footer import FittedFooter, RankedFooter


class ProblemOption(Option):
    def __init__(self, problem: Problem) -> None:
        where = problem.path or "(no file)"
        if problem.line:
            where += f":{problem.line}" + (f":{problem.column}" if problem.column else "")
        prompt = Text.assemble((where, "bold"), "  ", (problem.code, "yellow"), "\n", problem.message)
        super().__init__(prompt)
        self.problem = problem


class ProblemsScreen(RankedFooter, Screen[None]):
    BINDINGS = [Binding("escape,q,p", "close", "Close", id="problems.close")]
    DEFAULT_CSS = """
    ProblemsScreen #problems-title { height: auto; padding: 0 1; background: $boost; }
    ProblemsScreen #problems-list { height: 1fr; border: none; }
    """

    def __init__(self, problems: Sequence[Problem], open_location: Callable[[Problem], bool]) -> None:
        super().__init__()
        self.problems = tuple(problems)
        self.open_location = open_location

    def compose(self) -> ComposeResult:
        n = len(self.problems)
        title = Text.assemble(("Problems", "bold"), f"  {n} problem" + ("" if n == 1 else "s"))
        title.append("  enter opens the location, esc closes", "dim")
        yield Static(title, id="problems-title")
        options: list[Option | None] = []
        for p in self.problems:
            options.append(ProblemOption(p))
        if not options:
            options.append(Option(Text("No problems: every file reads cleanly.", "dim"), disabled=True))
        yield OptionList(*options, id="problems-list")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.query_one("#problems-list").focus()

    @on(OptionList.OptionSelected, "#problems-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        if not isinstance(event.option, ProblemOption):
            return
        if self.open_location(event.option.problem):
            # the jump (app.go_to) already leaves the screens pushed over the view, this one included
            if self.app.screen is self:
                self.dismiss(None)
        else:
            self.notify(f"{event.option.problem.path}: not shown in a view; open it in your editor.", severity="information")

    def action_close(self) -> None:
        self.dismiss(None)
