"""Every binding id the app's keymap may name.

The command registry holds the app-wide commands, but screens, widgets and dialogs declare
their own bindings (``editor.save``, ``history.revert`` ...), and Textual's keymap rebinds
any of them by id. A ``[keymap]`` entry is therefore valid when some class in the app
declares that id, wherever it lives.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import lru_cache

from textual.binding import Binding

from . import commands as registry

# The packages whose classes declare bindings; ``memory_tui.tui`` itself holds the app.
_PACKAGES = ("memory_tui.tui.screens", "memory_tui.tui.widgets", "memory_tui.tui.dialogs")


def _declared(cls: type) -> set[str]:
    ids: set[str] = set()
    for klass in cls.__mro__:
        for binding in vars(klass).get("BINDINGS", ()) or ():
            if isinstance(binding, Binding) and binding.id:
                ids.add(binding.id)
    return ids


@lru_cache(maxsize=1)
def known_binding_ids() -> frozenset[str]:
    ids = {cmd.id for cmd in registry.COMMANDS}
    for name in _PACKAGES:
        package = importlib.import_module(name)
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{name}.{info.name}")
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == module.__name__:
                    ids |= _declared(cls)
    return frozenset(ids)
