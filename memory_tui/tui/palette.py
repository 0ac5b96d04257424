"""The command palette: the registry's commands of the view, then every binding the screen
under the palette and its widgets declare. Its own module because it reads both the command
registry and the declared-binding walk (``binding_ids``), which itself reads the registry."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterable, Mapping

from rich.markup import escape
from textual.command import DiscoveryHit, Hit, Hits, Provider

from .binding_ids import bindings_of
from .commands import commands_for, effective_keys, key_label


class MemoryCommands(Provider):
    """The palette's source: the commands of the current view, with their keys.

    It reads ``keymap`` and ``view`` off the app (``MemoryApp`` has both); the registry does
    not import the app, so the app can import the registry.
    """

    def _items(self) -> list[PaletteItem]:
        keymap: Mapping[str, str] = getattr(self.app, "keymap", {})
        view: str | None = getattr(self.app, "view", None)
        screen = self.screen
        return palette_items(view, keymap, [screen, *screen.walk_children()], self.app.run_action)

    async def discover(self) -> Hits:
        for item in self._items():
            yield DiscoveryHit(item.title, item.run, help=item.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for item in self._items():
            score = matcher.match(item.search)
            if score > 0:
                yield Hit(score, matcher.highlight(item.title), item.run, help=item.help)


@dataclass(frozen=True)
class PaletteItem:
    id: str  # the binding id
    title: str
    help: str  # markup
    search: str  # what a query is matched against
    run: Callable[[], object]


def _with_keys(text: str, keys: str) -> str:
    # a command with no key is only in the palette: it needs no "key" part
    return escape(text) + (f" · key {escape(key_label(keys))}" if keys else "")


def palette_items(view: str | None, keymap: Mapping[str, str], nodes: Iterable[object],
                  run_action: Callable[..., object]) -> list[PaletteItem]:
    """What the palette offers: the registry's commands of ``view``, then every binding the
    screen under the palette and its widgets declare (``binding_ids.declared_bindings``:
    the graph's order, the node detail's ``m`` …), each run on the widget that declares it,
    unless that widget says the action cannot run now."""
    from textual.actions import parse


    out: list[PaletteItem] = []
    seen: set[str] = set()
    for cmd in commands_for(view):
        if not cmd.palette:
            continue
        title = cmd.title if not cmd.id.startswith("view.") else f"View: {cmd.title}"
        # A screen-scoped action runs on the view screen under the palette.
        action = cmd.action if cmd.scope == "app" else f"screen.{cmd.action}"
        out.append(PaletteItem(cmd.id, title, _with_keys(cmd.help, effective_keys(cmd, keymap)), f"{title} {cmd.help}",
                               partial(run_action, action)))
        seen.add(cmd.id)
    for node in nodes:
        for declared in bindings_of(type(node)):
            b = declared.binding
            if declared.id in seen:
                continue
            check = getattr(node, "check_action", None)
            if check is not None:
                _, name, params = parse(b.action)
                if check(name, params) is False:
                    continue
            seen.add(declared.id)
            title = f"{declared.section}: {b.description}"
            keys = escape(f"key {key_label(keymap.get(declared.id, b.key))}")
            out.append(PaletteItem(declared.id, title, keys, title, partial(run_action, b.action, node)))
    return out
