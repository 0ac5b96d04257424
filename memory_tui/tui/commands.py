"""One command registry: it feeds the key bindings, the command palette and the help screen.

Every command has a stable id (also the ``Binding.id``), so a keymap file can rebind it:

    # ~/.config/memory-tui/config.toml
    [keymap]
    "view.topics" = "f2"
    "app.reload" = "ctrl+r,f5"
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from rich.markup import escape
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:  # pragma: no cover
    from .app import MemoryApp

VIEWS = ("topics", "timeline", "recent", "core", "sessions")
VIEW_TITLES = {"topics": "Topics", "timeline": "Timeline", "recent": "Recent", "core": "Core", "sessions": "Sessions"}
VIEW_SHORT = {"topics": "Top", "timeline": "Time", "recent": "Rec", "core": "Core", "sessions": "Sess"}


@dataclass(frozen=True)
class Command:
    id: str  # binding id, used by the keymap file
    key: str  # default key(s), comma separated
    action: str  # Textual action string, run on the app
    title: str  # palette / help title
    help: str
    views: tuple[str, ...] = ()  # empty: everywhere
    footer: bool = True  # shown in the footer
    key_display: str | None = None
    priority: bool = False
    palette: bool = True

    def binding(self) -> Binding:
        return Binding(
            self.key,
            self.action,
            self.title,
            show=self.footer,
            key_display=self.key_display,
            priority=self.priority,
            id=self.id,
        )


COMMANDS: tuple[Command, ...] = (
    Command("view.topics", "1", "switch_view('topics')", "Topics", "Show the Topics view", footer=False),
    Command("view.timeline", "2", "switch_view('timeline')", "Timeline", "Show the Timeline view", footer=False),
    Command("view.recent", "3", "switch_view('recent')", "Recent", "Show the Recent view", footer=False),
    Command("view.core", "4", "switch_view('core')", "Core", "Show the Core view", footer=False),
    Command("view.sessions", "5", "switch_view('sessions')", "Sessions", "Show the Sessions view", footer=False),
    Command("app.filter", "slash", "filter", "Filter", "Filter the list (all topics and records)", key_display="/"),
    Command("app.back", "escape", "back", "Back", "Close the filter or go back to the list", key_display="esc"),
    Command(
        "topics.source", "g", "goto_session", "Go to node",
        "Open the cited source node in the Sessions view", views=("topics", "recent", "core"),
    ),
    Command(
        "record.open", "o", "open_record", "Open in Topics",
        "Show the selected record in its topic", views=("timeline", "recent", "core"),
    ),
    Command("core.sources", "s", "toggle_core_sources", "Source records", "Toggle the topics/core.md records", views=("core",)),
    Command("app.reload", "ctrl+r", "reload", "Reload", "Re-read the state directory now"),
    Command("app.ascii", "a", "toggle_ascii", "ASCII", "Toggle ASCII glyphs", footer=False),
    Command("app.help", "question_mark,f1", "help", "Help", "Show the keys of every view", key_display="?"),
    Command("app.quit", "q", "quit", "Quit", "Quit memory-tui"),
)


def bindings() -> list[Binding]:
    return [cmd.binding() for cmd in COMMANDS]


def by_action_name() -> dict[str, Command]:
    return {cmd.action.split("(")[0]: cmd for cmd in COMMANDS}


def effective_keys(cmd: Command, keymap: dict[str, str]) -> str:
    return keymap.get(cmd.id, cmd.key)


def key_label(keys: str) -> str:
    names = {"slash": "/", "question_mark": "?", "escape": "esc", "ctrl+r": "^r", "ctrl+p": "^p"}
    return " ".join(names.get(k.strip(), k.strip()) for k in keys.split(","))


class MemoryCommands(Provider):
    """The palette's source: every registered command, with its key."""

    def _items(self) -> list[tuple[str, str, Command]]:
        app: MemoryApp = self.app  # type: ignore[assignment]
        keymap = getattr(app, "keymap", {})
        out = []
        for cmd in COMMANDS:
            if not cmd.palette:
                continue
            title = cmd.title if not cmd.id.startswith("view.") else f"View: {cmd.title}"
            keys = escape(key_label(effective_keys(cmd, keymap)))
            out.append((title, f"{escape(cmd.help)} · key {keys}", cmd))
        return out

    async def discover(self) -> Hits:
        for title, help_text, cmd in self._items():
            yield DiscoveryHit(title, partial(self.app.run_action, cmd.action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, cmd in self._items():
            score = matcher.match(f"{title} {cmd.help}")
            if score > 0:
                yield Hit(score, matcher.highlight(title), partial(self.app.run_action, cmd.action), help=help_text)
