"""Every binding the app declares: the one registry the help screen, the command palette
and the keymap check read.

The command registry (``commands.COMMANDS``) holds the app-wide and per-view commands, but
screens, widgets and dialogs declare their own bindings (``editor.save``, ``graph.order``,
``history.revert`` ...). ``declared_bindings()`` finds them all by walking the classes of the
screen, widget and dialog packages, so a binding added to any class is in the help and the
palette without being listed twice, and a ``[keymap]`` entry is valid when some class in the
app declares its id, wherever it lives.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass
from functools import lru_cache

from textual.binding import Binding

from . import commands as registry

# The packages whose classes declare bindings; ``memory_tui.tui`` itself holds the app.
_PACKAGES = ("memory_tui.tui.screens", "memory_tui.tui.widgets", "memory_tui.tui.dialogs")

# What the help calls a class's section, where its name alone says too little.
SECTION_TITLES = {
    "SessionGraph": "Sessions graph",
    "NodeDetail": "Sessions node detail",
    "BranchVerdict": "Sessions verdict panel",
    "EvidenceList": "Evidence list",
    "HistoryView": "History list",
    "DiffView": "History diff",
    "ConfirmRevert": "History: confirm a revert",
    "TopicEditor": "Editor text area",
    "DiagnosticsList": "Editor diagnostics",
    "EditorScreen": "Editor",
    "HelpScreen": "Help",
    "ProblemsScreen": "Problems",
}


@dataclass(frozen=True)
class DeclaredBinding:
    """One binding a screen, widget or dialog class declares itself."""

    owner: type
    binding: Binding

    @property
    def id(self) -> str:
        return self.binding.id or ""

    @property
    def section(self) -> str:
        return section_title(self.owner)

    @property
    def is_dialog(self) -> bool:
        from textual.screen import ModalScreen

        return issubclass(self.owner, ModalScreen)


def section_title(cls: type) -> str:
    name = cls.__name__
    if name in SECTION_TITLES:
        return SECTION_TITLES[name]
    words = re.sub(r"(?<!^)(?=[A-Z])", " ", name.removesuffix("Screen")).split()
    return " ".join([words[0], *(w.lower() for w in words[1:])]) if words else name


def _own(cls: type) -> list[Binding]:
    return [b for b in vars(cls).get("BINDINGS", ()) or () if isinstance(b, Binding) and b.id]


@lru_cache(maxsize=1)
def _classes() -> tuple[type, ...]:
    found: list[type] = []
    for name in _PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{name}.{info.name}")
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == module.__name__:
                    found.append(cls)
    return tuple(found)


@lru_cache(maxsize=1)
def declared_bindings() -> tuple[DeclaredBinding, ...]:
    """Every binding a class declares itself, except the registry's commands (a view screen's
    bindings are made from ``COMMANDS``, which the help and palette list already)."""
    commands = {cmd.id for cmd in registry.COMMANDS}
    return tuple(
        DeclaredBinding(cls, b) for cls in _classes() for b in _own(cls) if b.id not in commands
    )


def bindings_of(cls: type) -> tuple[DeclaredBinding, ...]:
    """The declared bindings an instance of ``cls`` answers (its own and its bases')."""
    mro = set(cls.__mro__)
    return tuple(d for d in declared_bindings() if d.owner in mro)


@lru_cache(maxsize=1)
def known_binding_ids() -> frozenset[str]:
    ids = {cmd.id for cmd in registry.COMMANDS}
    for cls in _classes():
        ids |= {b.id for klass in cls.__mro__ for b in _own(klass)}
    return frozenset(ids)
