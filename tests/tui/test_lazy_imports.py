"""The app imports what its first paint needs; every other screen, the pipeline and Markdown
come when first used, and a module that fails to import still fails where it is asked for."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memory_tui.tui import screens
from memory_tui.tui.app import MemoryApp


def test_every_screen_name_resolves_and_each_mode_makes_its_screen_class():
    for name in screens.__all__:
        assert getattr(screens, name) is not None, name
    table = screens.SCREENS
    assert set(table) == set(MemoryApp.MODES) == {"topics", "timeline", "recent", "core", "sessions"}
    for view, cls in table.items():
        assert cls.VIEW == view
        assert screens.screen_class(view) is cls
    with pytest.raises(AttributeError):
        screens.NoSuchScreen  # noqa: B018


def test_a_screen_that_cannot_import_fails_where_it_is_asked_for(monkeypatch):
    monkeypatch.delitem(screens.__dict__, "TimelineScreen", raising=False)
    monkeypatch.setitem(sys.modules, "memory_tui.tui.screens.timeline", None)  # import now raises
    with pytest.raises(ImportError):
        screens.screen_class("timeline")
    with pytest.raises(ImportError):
        MemoryApp.MODES["timeline"]()


def test_starting_the_app_leaves_the_pipeline_other_screens_and_markdown_unimported():
    code = r"""
import sys
import memory_tui.tui.app
from memory_tui.tui.screens import TopicsScreen
late = ["memory_tui.pipeline.write", "memory_tui.pipeline.context", "memory_tui.tui.model.sessions",
        "memory_tui.tui.screens.sessions", "memory_tui.tui.screens.core", "memory_tui.tui.dialogs.record_change",
        "memory_tui.tui.model.records", "memory_tui.core.store.workspace", "markdown_it"]
print(" ".join(m for m in late if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []
