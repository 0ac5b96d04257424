"""Help: the keys of every view, from the same registry as the bindings and the palette."""

from __future__ import annotations

from typing import Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .. import commands as registry
from ..views import VIEW_TITLES, VIEWS

VIEW_HELP = {
    "topics": (("enter", "open the topic / focus its records"), ("up/down", "records and citation chips")),
    "timeline": (("enter", "expand a year or month; on a row, open it in Topics"),),
    "recent": (("enter", "show the record"),),
    "sessions": (("enter", "show the session"),),
}


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark,f1", "dismiss_help", "Close", id="help.close"),
    ]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 96; max-width: 95%; height: auto; max-height: 90%;
        border: round $accent; background: $surface; padding: 0 1; }
    HelpScreen.-ascii > VerticalScroll { border: ascii $accent; }
    """

    def __init__(self, keymap: Mapping[str, str], view: str, ascii_mode: bool) -> None:
        super().__init__()
        self.keymap = keymap
        self.view = view
        self.ascii_mode = ascii_mode

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("Keys\n", "bold underline")
        text.append("Rebind any id in ~/.config/memory-tui/config.toml under [keymap].\n\n", "dim")
        text.append("Everywhere\n", "bold")
        for cmd in registry.COMMANDS:
            if not cmd.views:
                self._row(text, cmd)
        text.append("  ^p         command palette (every action)\n")
        text.append("  tab        next pane\n")
        for view in VIEWS:
            cmds = [c for c in registry.COMMANDS if view in c.views]
            extra = VIEW_HELP.get(view, ())
            if not cmds and not extra:
                continue
            marker = "  (current)" if view == self.view else ""
            text.append(f"\n{VIEW_TITLES[view]}{marker}\n", "bold")
            for cmd in cmds:
                self._row(text, cmd)
            for keys, what in extra:
                text.append(f"  {keys:<10} {what}\n")
        self.set_class(self.ascii_mode, "-ascii")
        with VerticalScroll():
            yield Static(text)

    def _row(self, text: Text, cmd: registry.Command) -> None:
        keys = registry.key_label(registry.effective_keys(cmd, self.keymap))
        text.append(f"  {keys:<10} ", "bold")
        text.append(f"{cmd.help}")
        text.append(f"  [{cmd.id}]\n", "dim")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
