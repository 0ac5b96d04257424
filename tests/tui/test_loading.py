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


async def test_sessions_come_from_the_index_and_no_session_is_held(fixture_state_ro, tmp_path, monkeypatch):
    """Once a load has filled the sessions' summary index, the next app's sessions list and
    pending count come from it alone: no session is read, and the model holds summaries,
    not every session's nodes (a reader of one session reads it when it asks)."""
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    full = load_model(fixture_state_ro, counter=COUNTER, home=fixture_state_ro.parent)  # fills the cache
    assert full.sessions and full.status.pending_turns is not None
    reads: list[bool] = []

    def counting_loader(state_dir, previous=None, **kw):
        reads.append(True)
        return load_sessions(state_dir, previous=previous, **kw)

    app = make_app(fixture_state_ro, background=True, session_loader=counting_loader)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):
            if app.model is not None and app.model.sessions_loaded and not app.model.outline:
                break
            await pilot.pause(0.05)
        await settle(pilot, app)
        m = app.model
        assert reads == []
        assert m == full and m.sessions_loaded and m.sessions == full.sessions and m.status == full.status
        from memory_tui.sessions.ondemand import is_on_demand

        snap = m.session_snapshot
        assert is_on_demand(snap) and snap.sessions.held() == ()
        assert snap.all_problems() == load_sessions(fixture_state_ro).all_problems()
        # one session asked for is read then, and equals its counterpart in a full load
        sid = full.sessions[0].session_id
        assert snap.sessions.get(sid) == load_sessions(fixture_state_ro).sessions[sid]
        assert snap.sessions.held() == (sid,)


async def test_records_paint_before_the_sessions_list_and_only_sessions_redraw_after(fixture_state_ro, tmp_path,
                                                                                      monkeypatch):
    """Even the quick sessions list (the summary index read whole and checked against every
    node file) is seconds at scale: the records, Recent and Core are on screen before it starts,
    the insight figures wait for it (figures without sessions would be thrown away), and once
    it is in only the Sessions view redraws."""
    from memory_tui.tui.shell import loading

    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    full = load_model(fixture_state_ro, counter=COUNTER, home=fixture_state_ro.parent)  # fills the index
    release, listing = threading.Event(), threading.Event()
    real = loading.with_session_list

    def slow_list(model, **kw):
        listing.set()
        assert release.wait(60), "the test never released the sessions list"
        return real(model, **kw)

    monkeypatch.setattr(loading, "with_session_list", slow_list)
    seen = Messages()
    app = make_app(fixture_state_ro, background=True, insights=True)
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        try:
            for _ in range(400):
                if listing.is_set() and app.model is not None and not app.model.outline:
                    break
                await pilot.pause(0.05)
            await pilot.pause()
            m = app.model
            assert listing.is_set() and m is not None and not m.outline and not m.sessions_loaded
            assert app.loading == "sessions" and "loading sessions" in str(app.screen.query_one("#header").render())
            assert m.records.keys() == full.records.keys() and m.core == full.core and m.recent == full.recent
            assert not [w for w in app.workers if w.group == "insights"] and app.insights is None
            applied = len(seen.of(ModelApplied))
        finally:
            release.set()
        await settle(pilot, app)
        for _ in range(400):
            if app.insights is not None:
                break
            await pilot.pause(0.05)
        assert app.loading is None and app.model == full and app.insights is not None
        last = seen.of(ModelApplied)[applied:]
        assert [m.views for m in last] == [frozenset({"sessions"})]
        assert "loading" not in str(app.screen.query_one("#header").render())


async def test_keys_answer_while_the_sessions_view_reads_and_it_forgets_on_leaving(fixture_state_ro, tmp_path,
                                                                                   monkeypatch):
    """The Sessions view reads every session in a worker: held there, the view says so and a
    key still switches views; leaving the view lets go of every session it read."""
    import memory_tui.sessions.overview_table as overview_table
    from memory_tui.tui.model.sessions import SessionsModel

    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(overview_table, "MIN_NODES", 1)  # the fixture's sessions count as big
    release = threading.Event()
    held: list[bool] = []
    real = SessionsModel.load.__func__

    def held_load(cls, *args, **kw):
        held.append(True)
        # a UI thread that waited here could not take the test's keys: fail fast, not hang
        assert release.wait(10), "the Sessions view's read held the UI thread"
        return real(cls, *args, **kw)

    monkeypatch.setattr(SessionsModel, "load", classmethod(held_load))
    app = make_app(fixture_state_ro, background=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.model.sessions_loaded
        try:
            await pilot.press("5")
            for _ in range(200):
                if held:
                    break
                await pilot.pause(0.05)
            assert held and app.view == "sessions"
            assert "Analysing" in str(app.screen.query_one("#notice-text", Static).render())
            await pilot.press("1")  # answered while the read is held
            await pilot.pause()
            assert app.view == "topics" and _topic_rows(app) > 0
        finally:
            release.set()
        busy = [w for w in app.workers if w.group == "sessions-overview"]
        if busy:
            await app.workers.wait_for_complete(busy)
        await pilot.pause()
        assert app.model.sessions_view_built() is None  # it finished after the view was left
        await pilot.press("5")
        for _ in range(200):
            if app.model.sessions_view_built() is not None:
                break
            await pilot.pause(0.05)
        await pilot.pause()
        sm = app.model.sessions_view_built()
        assert sm is not None and set(sm.session_ids) == {s.session_id for s in app.model.sessions}
        assert app.screen.query_one("#sessions-list").option_count == len(app.model.sessions)
        await pilot.press("1")
        await pilot.pause()
        assert app.view == "topics"
        assert app.model.sessions_view_built() is None


def test_insights_over_summaries_equal_those_over_every_session(fixture_state_ro, tmp_path, monkeypatch):
    """The insight figures read the cited sessions when asked for (keeping their shape, not
    their words); they equal the figures over a full load."""
    from dataclasses import replace

    from memory_tui.sessions.ondemand import KEEP, is_on_demand
    from memory_tui.tui.model.insights import load_insights

    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    model = load_model(fixture_state_ro, counter=COUNTER, home=fixture_state_ro.parent)
    assert is_on_demand(model.session_snapshot)
    whole = replace(model, session_snapshot=load_sessions(fixture_state_ro))
    got, want = load_insights(model), load_insights(whole)
    assert got is not None and got.rows
    assert (got.rows, got.counts, got.lists) == (want.rows, want.counts, want.lists)
    assert any(r.sessions for r in got.rows)  # figures that needed the sessions
    assert len(model.session_snapshot.sessions.held()) <= KEEP


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


async def test_the_collector_waits_while_a_model_or_its_figures_are_built(fixture_state_ro, tmp_path, monkeypatch):
    """A model is ~10^6 acyclic objects at scale: the cyclic collector, left on, walked them
    for a sixth of a load. The load and the insight figures run with it paused, and the app
    has it back once they are done."""
    import gc

    from memory_tui.tui.model import kept_insights
    from memory_tui.tui.shell import loading

    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    seen: dict[str, list[bool]] = {"model": [], "insights": []}
    real_model, real_insights = loading.load_model, kept_insights.load_insights

    def model_spy(*a, **kw):
        seen["model"].append(gc.isenabled())
        return real_model(*a, **kw)

    def insights_spy(*a, **kw):
        seen["insights"].append(gc.isenabled())
        return real_insights(*a, **kw)

    monkeypatch.setattr(loading, "load_model", model_spy)
    monkeypatch.setattr(kept_insights, "load_insights", insights_spy)
    assert gc.isenabled()
    app = make_app(fixture_state_ro, background=True, insights=True)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(400):
            if app.insights is not None and not app.loading:
                break
            await pilot.pause(0.05)
        await settle(pilot, app)
        assert app.insights is not None
        assert seen == {"model": [False], "insights": [False]}
        assert gc.isenabled()
