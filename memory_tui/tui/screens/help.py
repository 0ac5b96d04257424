"""Help: the keys of every view, from the same registry as the bindings and the palette."""

from __future__ import annotations

from typing import Iterable, Mapping

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .. import commands as registry
from ..binding_ids import DeclaredBinding, declared_bindings, section_title
from ..views import VIEW_TITLES, VIEWS

VIEW_HELP = {
    "topics": (("enter", "open the topic / focus its records"), ("up/down", "records and citation chips")),
    "timeline": (("enter", "expand a year or month; on a row, open it in Topics"),),
    "recent": (("enter", "show the record"),),
    "sessions": (("enter", "show the session"),),
}


KEYS_WIDTH = 10  # the key column: a description starts after it on every line it wraps to


class KeyRows:
    """The help's lines: a key row is its keys, then its description, which wraps under
    itself (a hanging indent) rather than back under the keys at a narrow width."""

    def __init__(self) -> None:
        self.parts: list[Text | tuple[str, Text, str]] = []

    def line(self, text: Text) -> None:
        self.parts.append(text)

    def row(self, keys: str, what: Text, key_style: str = "") -> None:
        self.parts.append((keys, what, key_style))

    def __str__(self) -> str:
        """The lines unwrapped, as plain text."""
        return "\n".join(p.plain if isinstance(p, Text) else self._lead(p[0], "").plain + p[1].plain for p in self.parts)

    @staticmethod
    def _lead(keys: str, style: str) -> Text:
        return Text(f"  {keys:<{KEYS_WIDTH}} ", style)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((cell_len(line) for line in str(self).split("\n")), default=0)
        return Measurement(min(KEYS_WIDTH + 13, widest), widest)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for part in self.parts:
            if isinstance(part, Text):
                yield part
                continue
            keys, what, style = part
            lead = self._lead(keys, style)
            for i, line in enumerate(what.wrap(console, max(8, options.max_width - lead.cell_len))):
                yield Text.assemble(lead if i == 0 else " " * lead.cell_len, line)


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

    def __init__(self, keymap: Mapping[str, str], view: str, ascii_mode: bool, present: Iterable[type] = ()) -> None:
        """``present``: the classes of the screen the help was opened over and its widgets,
        whose keys come first."""
        super().__init__()
        self.keymap = keymap
        self.view = view
        self.ascii_mode = ascii_mode
        self.present = frozenset(present)

    def compose(self) -> ComposeResult:
        self.set_class(self.ascii_mode, "-ascii")
        with VerticalScroll():
            yield Static(self.key_rows())

    def key_rows(self) -> KeyRows:
        text = KeyRows()
        text.line(Text("Keys", "bold underline"))
        text.line(Text("Rebind any id in ~/.config/memory-tui/config.toml under [keymap].\n", "dim"))
        text.line(Text("Everywhere", "bold"))
        for cmd in registry.COMMANDS:
            if not cmd.views:
                self._row(text, cmd)
        text.row("^p", Text("command palette (every action)"))
        text.row("tab", Text("next pane"))
        # then every key a screen, widget or dialog declares itself, those on screen first
        sections = self._sections()
        here = [s for s in sections if s[2]]
        for title, declared, _ in here:
            self._section(text, f"\n{title}  (here)", declared)
        for view in VIEWS:
            cmds = [c for c in registry.COMMANDS if view in c.views]
            extra = VIEW_HELP.get(view, ())
            if not cmds and not extra:
                continue
            marker = "  (current)" if view == self.view else ""
            text.line(Text(f"\n{VIEW_TITLES[view]}{marker}", "bold"))
            for cmd in cmds:
                self._row(text, cmd)
            for keys, what in extra:
                text.row(keys, Text(what))
        for title, declared, shown in sections:
            if not shown:
                self._section(text, f"\n{title}", declared)
        self._dialogs(text)
        return text

    def _sections(self) -> list[tuple[str, list[DeclaredBinding], bool]]:
        """(title, bindings, on screen) per class that declares keys, dialogs apart."""
        by_owner: dict[type, list[DeclaredBinding]] = {}
        for d in declared_bindings():
            if not d.is_dialog:
                by_owner.setdefault(d.owner, []).append(d)
        return [
            (section_title(owner), found, any(issubclass(cls, owner) for cls in self.present))
            for owner, found in by_owner.items()
        ]

    def _section(self, text: KeyRows, title: str, declared: list[DeclaredBinding]) -> None:
        text.line(Text(title, "bold"))
        for d in declared:
            self._binding_row(text, d.id, d.binding.key, d.binding.description)

    def _dialogs(self, text: KeyRows) -> None:
        """One row per key id: ``dialog.cancel`` is in every dialog, under other names."""
        rows: dict[str, list[DeclaredBinding]] = {}
        for d in declared_bindings():
            if d.is_dialog:
                rows.setdefault(d.id, []).append(d)
        text.line(Text("\nDialogs", "bold"))
        for binding_id, declared in rows.items():
            names = " / ".join(dict.fromkeys(d.binding.description for d in declared))
            where = [d.section for d in declared]
            self._binding_row(text, binding_id, declared[0].binding.key, names,
                              f" ({where[0]})" if len(where) == 1 else " (every dialog)")

    def _binding_row(self, text: KeyRows, binding_id: str, default: str, what: str, where: str = "") -> None:
        keys = registry.key_label(self.keymap.get(binding_id, default))
        text.row(keys, Text.assemble(what, (where, "dim"), (f"  [{binding_id}]", "dim")), "bold")

    def _row(self, text: KeyRows, cmd: registry.Command) -> None:
        keys = registry.key_label(registry.effective_keys(cmd, self.keymap))
        text.row(keys, Text.assemble(cmd.help, (f"  [{cmd.id}]", "dim")), "bold")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
