"""One module per view; each screen handles its own events. ``SCREENS`` maps view → screen.

A screen's module is imported when the screen is first made (``MODES`` holds factories), not
when the app starts: the first paint shows Topics only, and importing every view (the
Sessions model and graph, the record dialogs, Markdown) was a large part of the start.
Every name below still imports as before (``from memory_tui.tui.screens import CoreScreen``),
and an import error in any screen still raises where the screen is first asked for
(``tests/tui/test_imports.py`` imports each one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from .base import ViewScreen

if TYPE_CHECKING:
    from textual.screen import Screen

    from .core import CoreScreen
    from .help import HelpScreen
    from .problems import ProblemsScreen
    from .recent import RecentScreen
    from .sessions import SessionsScreen
    from .timeline import TimelineScreen
    from .topics import TopicsScreen

# view -> the name of its screen class
VIEW_SCREENS: dict[str, str] = {
    "topics": "TopicsScreen",
    "timeline": "TimelineScreen",
    "recent": "RecentScreen",
    "core": "CoreScreen",
    "sessions": "SessionsScreen",
}


def screen_class(view: str) -> type[ViewScreen]:
    """The screen class of ``view`` (its module imported now if it was not)."""
    return __getattr__(VIEW_SCREENS[view])


def _factory(view: str) -> Callable[[], Screen[Any]]:
    def make() -> Screen[Any]:
        return screen_class(view)()

    make.__name__ = make.__qualname__ = f"make_{view}_screen"
    return make


# Textual's MODES: a callable is called when its mode's screen is first needed.
MODES: dict[str, Callable[[], Screen[Any]]] = {view: _factory(view) for view in VIEW_SCREENS}


def __getattr__(name: str) -> Any:
    if name == "SCREENS":
        return {view: screen_class(view) for view in VIEW_SCREENS}
    value = _load(name)
    globals()[name] = value
    return value


def _load(name: str) -> Any:
    # Plain import statements (not importlib) so the import contracts still see each edge.
    if name == "TopicsScreen":
        from .topics import TopicsScreen as found
    elif name == "TimelineScreen":
        from .timeline import TimelineScreen as found
    elif name == "RecentScreen":
        from .recent import RecentScreen as found
    elif name == "CoreScreen":
        from .core import CoreScreen as found
    elif name == "SessionsScreen":
        from .sessions import SessionsScreen as found
    elif name == "HelpScreen":
        from .help import HelpScreen as found
    elif name == "ProblemsScreen":
        from .problems import ProblemsScreen as found
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return found


__all__ = [
    "MODES",
    "SCREENS",
    "CoreScreen",
    "HelpScreen",
    "ProblemsScreen",
    "RecentScreen",
    "SessionsScreen",
    "TimelineScreen",
    "TopicsScreen",
    "ViewScreen",
    "VIEW_SCREENS",
    "screen_class",
]
