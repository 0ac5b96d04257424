"""One module per view; each screen handles its own events. ``SCREENS`` maps view → screen."""

from __future__ import annotations

from .base import ViewScreen
from .core import CoreScreen
from .help import HelpScreen
from .problems import ProblemsScreen
from .recent import RecentScreen
from .sessions import SessionsScreen
from .timeline import TimelineScreen
from .topics import TopicsScreen

SCREENS: dict[str, type[ViewScreen]] = {
    "topics": TopicsScreen,
    "timeline": TimelineScreen,
    "recent": RecentScreen,
    "core": CoreScreen,
    "sessions": SessionsScreen,
}

__all__ = [
    "SCREENS",
    "CoreScreen",
    "HelpScreen",
    "ProblemsScreen",
    "RecentScreen",
    "SessionsScreen",
    "TimelineScreen",
    "TopicsScreen",
    "ViewScreen",
]
