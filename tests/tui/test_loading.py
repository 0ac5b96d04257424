"""The app paints before sessions are read (a visible loading state, never a frozen screen),
and a one-file reload re-reads only that file (issue 12)."""

from __future__ import annotations

import os
import threading

import pytest
from textual.widgets import Static

from memory_tui.sessions.store import load_sessions
from memory_tui.tui.model.load import load_model
from tui_helpers import COUNTER, Messages, make_app, settle

from memory_tui.tui.messages import ModelApplied

pytestmark = pytest.mark.anyio


def _topic_rows(app) -> int:
    try:
        return len(app.screen.query_one("#topics-list").root.children)
    except Exception:  # the screen is not composed yet
        return 0


async def test_first_paint_shows_topics_while_sessions_load(fixture_state_ro, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "empty-cache"))  # no list stage
    release = threading.Event()
    calls: list[bool] = []

    def slow_loader(state_dir, previous=None, **kw):
        calls.append(True)
        assert release.wait(60), "the test never released the session loader"
        return load_sessions(state_dir, previous=previous, **kw)

    app = make_app(fixture_state_ro, background=True, session_loader=slow_loader)
    assert app.model is None  # nothing is loaded before the first paint
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):
            if _topic_rows(app) and app.loading == "sessions":
                break
            await pilot.pause(0.05)
        try:
            assert _topic_rows(app) > 0
            assert app.model is not None and not app.model.sessions_loaded
            assert app.model.sessions == () and app.model.status.pending_turns is None
            assert "loading sessions" in str(app.screen.query_one("#header").render())
            await pilot.press("5")
            assert "Loading sessions" in str(app.screen.query_one("#notice-text", Static).render())
        finally:
            release.set()
        await settle(pilot, app)
        assert app.loading is None
        assert calls == [True]
        assert app.model.sessions_loaded
        full = load_model(fixture_state_ro, counter=COUNTER, home=fixture_state_ro.parent)
        assert app.model == full
        assert {s.session_id for s in app.model.sessions} == {s.session_id for s in full.sessions} != set()
        assert not app.screen.query_one("#notice-detail").display
        assert app.screen.query_one("#sessions-list").option_count == len(full.sessions)


async def test_one_file_reload_reads_only_that_file(fixture_state, monkeypatch):
    loads: list[object] = []

    def counting_loader(state_dir, previous=None, **kw):
        loads.append(previous)
        return load_sessions(state_dir, previous=previous, **kw)

    # the copy was just made: its files' stamps are inside the clock tick, and a file read
    # under such a stamp has its bytes looked at again by the next reload (racy-clean, as in
    # git); a workspace not written this instant is what this test is about
    import time

    from memory_tui.core.cache.stamp import RACY_NS

    time.sleep(RACY_NS / 1e9)
    app = make_app(fixture_state, session_loader=counting_loader)
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        await settle(pilot, app)
        assert len(loads) == 1
        rel = "topics/people/ada.md"
        path = fixture_state / "memory" / rel
        text = path.read_text(encoding="utf-8")
        assert "Ada" in text
        path.write_text(text.replace("Ada", "Adah", 1), encoding="utf-8")

        # Count what the engine reads as topic files (its one topic reader). The workspace
        # revision, a hash of every file's bytes, is not counted: it is the engine's.
        import sys

        from memory_tui.core.format.topics import files as topics_mod

        read: list[str] = []
        real = topics_mod.read_topic_file

        def counting_read(topics_dir, rel_path):
            read.append("topics/" + rel_path)
            return real(topics_dir, rel_path)

        # every module that looks the reader up by its own name
        users = [m for name, m in list(sys.modules.items())
                 if name.startswith("memory_tui.") and getattr(m, "read_topic_file", None) is real]
        assert topics_mod in users
        for mod in users:
            monkeypatch.setattr(mod, "read_topic_file", counting_read)
        before = seen.count(ModelApplied)
        app.load_in_background({"memory/" + rel})
        await settle(pilot, app)
        monkeypatch.undo()
        assert seen.count(ModelApplied) == before + 1
        assert read == [rel], read
        assert len(loads) == 1  # no session was touched: sessions are not read again
        assert "Adah" in app.model.topic(rel).title + "".join(r.content for r in app.model.topic(rel).records)
        full = load_model(fixture_state, counter=COUNTER, home=fixture_state.parent)
        assert app.model == full
        assert app.model.topic(rel) == full.topic(rel)


async def test_outline_paints_topics_before_the_workspace_is_parsed(fixture_state_ro, monkeypatch):
    """The first frame lists every topic with its record count from the
    cheap outline while the strict parse is still running; the real model then replaces it."""
    import memory_tui.tui.shell.loading as loading

    release = threading.Event()
    real_load = loading.load_model
    held: list[bool] = []

    def held_load(*args, **kw):
        held.append(True)
        assert release.wait(60), "the test never released the workspace load"
        return real_load(*args, **kw)

    monkeypatch.setattr(loading, "load_model", held_load)
    full = load_model(fixture_state_ro, counter=COUNTER, home=fixture_state_ro.parent)
    app = make_app(fixture_state_ro, background=True)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):
            if _topic_rows(app) and held:
                break
            await pilot.pause(0.05)
        try:
            m = app.model
            assert m is not None and m.outline and app.loading == "workspace"
            assert [t.path for t in m.topics] == [t.path for t in full.topics]
            clean = [t for t in full.topics if not t.problems]
            assert clean
            assert {t.path: t.record_count for t in m.topics if t.path in {c.path for c in clean}} == {
                t.path: len(t.records) for t in clean
            }
            assert all(t.records == () for t in m.topics)
            assert "loading workspace" in str(app.screen.query_one("#header").render())
            shown = app.screen.current_topic()
            assert shown is not None and shown.outline_records is not None
            title = str(app.screen.query_one("#detail-title", Static).render())
            assert f"{shown.record_count} record" in title and "tok in records" not in title
            await pilot.press("2")
            assert "Loading the workspace" in str(app.screen.query_one("#notice-text", Static).render())
        finally:
            release.set()
        await settle(pilot, app)
        assert app.loading is None and not app.model.outline
        assert app.model == full
        await pilot.press("1")
        assert _topic_rows(app) > 0


async def test_sessions_list_comes_from_the_cache_before_the_detail(fixture_state_ro, tmp_path, monkeypatch):
    """Once a load has filled the persistent session-summary cache, the
    next app shows the sessions list and the pending count before any session is read."""
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    full = load_model(fixture_state_ro, counter=COUNTER, home=fixture_state_ro.parent)  # fills the cache
    assert full.sessions and full.status.pending_turns is not None
    release = threading.Event()

    def slow_loader(state_dir, previous=None, **kw):
        assert release.wait(60), "the test never released the session loader"
        return load_sessions(state_dir, previous=previous, **kw)

    app = make_app(fixture_state_ro, background=True, session_loader=slow_loader)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):
            if app.model is not None and app.model.sessions and app.loading == "sessions":
                break
            await pilot.pause(0.05)
        try:
            m = app.model
            assert m is not None and not m.sessions_loaded and m.session_snapshot is None
            assert m.sessions == full.sessions and m.status == full.status
            await pilot.press("5")
            notice = str(app.screen.query_one("#notice-text", Static).render())
            assert "Loading session detail" in notice and f"{len(full.sessions)} session" in notice
        finally:
            release.set()
        await settle(pilot, app)
        assert app.model == full and app.model.sessions_loaded


def _option_text(option) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    console.print(option.prompt)
    return console.export_text()


def _phrase(content: str, text: str) -> str:
    """Three words of a record's text that occur once in its file (what a reword would hit)."""
    words = content.split()
    for i in range(1, max(2, len(words) - 2)):
        phrase = " ".join(words[i:i + 3])
        if text.count(phrase) == 1:
            return phrase
    raise AssertionError(f"no unique phrase of {content!r}")


async def test_reload_redraws_the_shown_topic_only_when_it_changed(fixture_state):
    # the records of the shown topic are not re-rendered by a reload that changed
    # another file, and are by one that changed this topic
    app = make_app(fixture_state)
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        await settle(pilot, app)
        screen = app.screen
        shown = screen.current_topic()
        assert shown is not None and shown.records
        records = screen.records
        first = records.get_option_at_index(0)
        leaf = screen.tree.cursor_node
        others = [t.path for t in app.model.topics if t.path != shown.path and t.records and not t.problems]
        assert others
        other = fixture_state / "memory" / others[0]
        phrase = _phrase(app.model.topic(others[0]).records[0].content, other.read_text(encoding="utf-8"))
        other.write_text(other.read_text(encoding="utf-8").replace(phrase, "Wvyk " + phrase, 1), encoding="utf-8")
        before = seen.count(ModelApplied)
        app.load_in_background({"memory/" + others[0]})
        await settle(pilot, app)
        assert seen.count(ModelApplied) == before + 1
        assert "Wvyk" in "".join(r.content for r in app.model.topic(others[0]).records)
        assert screen.current_topic() is shown  # the same view model: the parse was reused
        assert records.get_option_at_index(0) is first  # not re-rendered
        assert screen.tree.cursor_node is leaf  # every label the same: the tree was kept

        path = fixture_state / "memory" / shown.path
        phrase = _phrase(shown.records[0].content, path.read_text(encoding="utf-8"))
        path.write_text(path.read_text(encoding="utf-8").replace(phrase, "Zqxj " + phrase, 1), encoding="utf-8")
        app.load_in_background({"memory/" + shown.path})
        await settle(pilot, app)
        assert screen.current_topic() is not shown
        texts = "".join(_option_text(records.get_option_at_index(i)) for i in range(records.option_count))
        assert "Zqxj" in texts
        assert app.model == load_model(fixture_state, counter=COUNTER, home=fixture_state.parent)

        other.write_bytes(b"\xff\xfe" + other.read_bytes())  # a label changes: the tree is rebuilt
        app.load_in_background({"memory/" + others[0]})
        await settle(pilot, app)
        nodes, labels = [screen.tree.root], {}
        while nodes:
            node = nodes.pop()
            nodes.extend(node.children)
            if getattr(node.data, "path", None) == others[0]:
                labels[others[0]] = str(node.label)
        assert "error" in labels[others[0]], labels
        assert app.model.topic(others[0]).problems
