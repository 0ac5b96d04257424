"""The view names, shared by the command registry, the tabs and the screens.

A module of its own so that neither the registry nor any widget has to import the app.
"""

from __future__ import annotations

VIEWS = ("topics", "timeline", "recent", "core", "sessions")
VIEW_TITLES = {"topics": "Topics", "timeline": "Timeline", "recent": "Recent", "core": "Core", "sessions": "Sessions"}
VIEW_SHORT = {"topics": "Top", "timeline": "Time", "recent": "Rec", "core": "Core", "sessions": "Sess"}
