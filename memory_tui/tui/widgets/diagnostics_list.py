"""The list of an editor buffer's diagnostics; selecting one (or ``[`` / ``]``) jumps to it.

Each option carries its ``Diagnostic`` (a selection carries its object). The list posts
``DiagnosticsList.Jump(diagnostic)``; the screen moves the editor there
(``TopicEditor.goto_diagnostic``). ``]`` / ``[`` move to the next / previous entry and jump
at once, so the owner can walk the errors without leaving the list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from memory_tui.core.format.text import sanitize

from ..model.editor import Diagnostic


class DiagnosticOption(Option):
    """Where and what on the first line, the message under it, then the rule it broke: a
    narrow list wraps the message, never the line number and code.

    ``folded=(n, total)``: one line instead, its place among the others, where and the
    message, cut at the list's edge (a short screen has one row for the list)."""

    def __init__(self, diagnostic: Diagnostic, *, folded: tuple[int, int] | None = None) -> None:
        if folded is not None:
            n, total = folded
            line = Text()
            line.append(f"{n}/{total} ", style="dim")
            line.append(f"{diagnostic.where} ", style="bold red")
            if diagnostic.path:
                line.append(sanitize(diagnostic.path) + ": ", style="italic")
            line.append(sanitize(diagnostic.message))
            super().__init__(line)
            self.diagnostic = diagnostic
            return
        text = Text()
        text.append(f"{diagnostic.where:>7}  ", style="dim")
        text.append(diagnostic.code, style="bold red")
        text.append("\n")
        if diagnostic.path:
            text.append(sanitize(diagnostic.path) + ": ", style="italic")
        text.append(sanitize(diagnostic.message))
        if diagnostic.rule and diagnostic.rule not in diagnostic.message:
            text.append("\nrule: " + sanitize(diagnostic.rule), style="dim")
        super().__init__(text)
        self.diagnostic = diagnostic


class DiagnosticsList(OptionList):
    """``DiagnosticsList(diagnostics=())``; ``set_diagnostics`` replaces the entries."""

    BINDINGS = [
        Binding("right_square_bracket", "next", "Next error", id="diagnostics.next"),
        Binding("left_square_bracket", "previous", "Previous error", id="diagnostics.previous"),
    ]

    DEFAULT_CSS = """
    DiagnosticsList { height: auto; max-height: 10; border: round $error 50%; }
    /* folded: one row, one diagnostic at a time ([ and ] walk them), no border to pay for */
    DiagnosticsList.-folded { height: 1; max-height: 1; border: none; padding: 0 1;
                              scrollbar-size-vertical: 0; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    @dataclass
    class Jump(Message):
        diagnostics_list: "DiagnosticsList"
        diagnostic: Diagnostic

        @property
        def control(self) -> "DiagnosticsList":
            return self.diagnostics_list

    def __init__(self, diagnostics: Iterable[Diagnostic] = (), *, name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._diagnostics: tuple[Diagnostic, ...] = ()
        self._folded = False
        self.set_diagnostics(diagnostics)

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return self._diagnostics

    @property
    def folded(self) -> bool:
        return self._folded

    def set_folded(self, folded: bool) -> None:
        """One line per diagnostic in a one-row list (a short screen), or the full entries."""
        if folded == self._folded:
            return
        self._folded = folded
        self.set_class(folded, "-folded")
        highlighted = self.highlighted
        self.set_diagnostics(self._diagnostics)
        if highlighted is not None and highlighted < len(self._diagnostics):
            self.highlighted = highlighted

    def set_diagnostics(self, diagnostics: Iterable[Diagnostic]) -> None:
        self._diagnostics = tuple(diagnostics)
        self.clear_options()
        total = len(self._diagnostics)
        if self._folded:
            options = [DiagnosticOption(d, folded=(n, total)) for n, d in enumerate(self._diagnostics, 1)]
            # with no border, the row itself says there is nothing (not an entry to jump to)
            self.add_options(options or [Option(Text("no problems", style="dim"), disabled=True)])
        else:
            self.add_options([DiagnosticOption(d) for d in self._diagnostics])
        self.border_title = f"{total} problem(s)" if total else "no problems"

    def show_diagnostic(self, diagnostic: Diagnostic) -> bool:
        """Highlight ``diagnostic``'s entry (scrolled into view) without jumping to it: the
        editor's cursor is already there (the list follows the cursor)."""
        index = next((i for i, d in enumerate(self._diagnostics) if d == diagnostic), None)
        if index is None:
            return False
        if self.highlighted != index:
            self.highlighted = index
        return True

    def _jump_to(self, index: int) -> None:
        if not self._diagnostics:
            return
        index %= len(self._diagnostics)
        self.highlighted = index
        self.post_message(self.Jump(self, self._diagnostics[index]))

    def action_next(self) -> None:
        self._jump_to(0 if self.highlighted is None else self.highlighted + 1)

    def action_previous(self) -> None:
        self._jump_to(len(self._diagnostics) - 1 if self.highlighted is None else self.highlighted - 1)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list is self and isinstance(event.option, DiagnosticOption):
            event.stop()
            self.post_message(self.Jump(self, event.option.diagnostic))
