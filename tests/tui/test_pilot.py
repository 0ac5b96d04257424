"""Pilot tests: the app driven by keys, the way a user drives it."""

from __future__ import annotations

import asyncio
import json

from textual.widgets import OptionList, Static, Tree

from memory_tui.tui.screens import SCREENS, CoreScreen, HelpScreen
from memory_tui.tui.screens.topics import TopicNode
from memory_tui.tui.app import load_app_settings as load_settings
from memory_tui.tui.widgets import RecordList

import pytest
from tui_helpers import Messages, make_app, settle, write_minimal_state

from memory_tui.tui.messages import ModelApplied

pytestmark = pytest.mark.anyio


def _text(app, selector: str) -> str:
    widget = app.screen.query_one(selector, Static)
    return str(widget.render())


def _tree_labels(app, selector: str) -> list[str]:
    tree = app.screen.query_one(selector, Tree)
    out = []

    def walk(node):
        for child in node.children:
            out.append(str(child.label))
            walk(child)

    walk(tree.root)
    return out


async def test_keys_1_to_5_switch_every_view(fixture_state_ro):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(120, 40)) as pilot:
        for key, view in zip("12345", ("topics", "timeline", "recent", "core", "sessions")):
            await pilot.press(key)
            assert app.view == view
            assert type(app.screen) is SCREENS[view]
            assert app.screen.query_one(f"#{view}-list").has_focus
        await pilot.press("1")
        assert "Ada" in _text(app, "#detail-title")
        assert "~/.openprogram" in str(app.screen.query_one("#header").render())
        assert "w-01760fa0" in str(app.screen.query_one("#header").render())


async def test_citation_shows_source_frame_and_jumps_to_session(fixture_state_ro):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("enter")  # open "ada", focus its records
        records = app.screen.query_one("#topic-records", RecordList)
        assert app.focused is records
        await pilot.press("down")  # the citation chip under the record
        assert records.highlighted_option.id == "cite:fc30e0e0:0"
        pane = _text(app, "#source-pane")
        assert "Owner" in pane and "I prefer tea over coffee" in pane and "trusted" in pane
        await pilot.press("g")
        assert app.view == "sessions"
        sessions = app.screen.query_one("#sessions-list", OptionList)
        assert sessions.highlighted_option.id == "session:local_a1b2c3d4e5"
        await pilot.pause()
        graph = app.screen.query_one("#sessions-graph")
        assert graph.selected_node is not None and graph.selected_node.id == "a00000000001"
        assert app.screen.query_one("#sessions-node").vm.node_id == "a00000000001"


async def test_timeline_row_opens_record_in_topics(fixture_state_ro):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        labels = _tree_labels(app, "#timeline-list")
        assert labels[0].startswith("2026") and any(l.startswith("11 Nov") for l in labels)
        rows = app.screen.query_one("#timeline-rows", OptionList)
        first = rows.highlighted_option.row
        rec = app.model.records[first.memory_id]
        await pilot.press("o")
        # The first dated row of the fixture is in an ordinary topic, so this lands in Topics.
        assert rec.topic_path != "topics/core.md"
        assert app.view == "topics"
        records = app.screen.query_one("#topic-records", RecordList)
        assert records.selected_record.memory_id == rec.memory_id
        assert records.has_focus


async def test_timeline_row_in_core_md_opens_core_sources(fixture_state_ro):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(120, 40)) as pilot:
        core_rec = next(r for r in app.model.core.records if r.when)
        await pilot.press("2")
        await app.open_record(core_rec)
        await pilot.pause()
        assert app.view == "core" and isinstance(app.screen, CoreScreen) and app.screen.show_sources
        assert app.screen.query_one("#core-records", RecordList).selected_record.memory_id == core_rec.memory_id


async def test_filter_across_topics_and_records(fixture_state_ro):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("slash")
        for ch in "rust":
            await pilot.press(ch)
        await pilot.pause()
        labels = _tree_labels(app, "#topics-list")
        assert any("cli-language" in l for l in labels)
        assert not any("kyoto-trip" in l for l in labels)
        assert not any(l.startswith("ada") for l in labels)
        await pilot.press("enter")  # back to the list
        await pilot.press("escape")  # clear the filter
        assert app.filter_text == ""
        assert any("kyoto-trip" in l for l in _tree_labels(app, "#topics-list"))


async def test_recent_and_core_views(fixture_state_ro, expected):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        assert "31 records · recent_limit 50" in _text(app, "#list-title")
        first = app.screen.query_one("#recent-list", OptionList).highlighted_option.record
        assert first.memory_id == "1525c2af"  # newest first
        await pilot.press("4")
        title = _text(app, "#detail-title")
        assert f"{expected['core']['rendered_tokens']:,} / 2,000 tokens" in title
        assert f"{len(expected['core']['omitted_block_ids'])} omitted" in title
        assert "Omitted by the 2,000 token budget" in _text(app, "#core-text")
        await pilot.press("s")
        assert app.screen.show_sources and app.screen.query_one("#core-records").display


async def test_narrow_layout_list_then_detail_then_back(fixture_state_ro):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert screen.narrow and not app.screen.query_one("#content").display
        await pilot.press("enter")
        assert screen.pane == "detail" and not app.screen.query_one("#sidebar").display
        assert app.screen.query_one("#topic-records").has_focus
        await pilot.press("escape")
        assert screen.pane == "list" and app.screen.query_one("#sidebar").display


async def test_help_lists_keys_per_view_from_the_registry(fixture_state_ro, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[keymap]\n"view.core" = "f4"\n')
    settings = load_settings(cfg)
    app = make_app(fixture_state_ro, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f4")  # rebound by id
        assert app.view == "core"
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one(Static).content)  # the rows unwrapped
        core_row = next(line for line in text.split("\n") if "[view.core]" in line)
        assert core_row.split()[0] == "f4"  # the rebound key, not the default "4"
        assert "Core  (current)" in text
        assert "Toggle the topics/core.md records  [core.sources]" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_palette_runs_registry_commands(fixture_state_ro):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        for ch in "Timeline":
            await pilot.press(ch)
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert app.view == "timeline"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
def test_settings_json_and_broken_files(tmp_path, anyio_backend):
    (tmp_path / "config.json").write_text(json.dumps({"keymap": {"app.quit": ["q", "ctrl+q"]}, "theme": "nord"}))
    s = load_settings(tmp_path / "config.toml")
    assert s.keymap == {"app.quit": "q,ctrl+q"} and s.theme == "nord"
    (tmp_path / "config.toml").write_text("[keymap\n")
    assert load_settings(tmp_path / "config.toml").problem


async def test_states_never_traceback(tmp_path):
    # No state dir.
    app = make_app(tmp_path / "missing")
    async with app.run_test(size=(100, 30)) as pilot:
        assert "No OpenProgram state directory" in _text(app, "#notice-text")
        await pilot.press("2", "3", "4", "5", "1")
    # Malformed topic.
    state = write_minimal_state(tmp_path / "bad", {"topics/notes.md": "# Notes\n\nUncited prose here.\n"})
    app = make_app(state)
    async with app.run_test(size=(100, 30)) as pilot:
        text = str(app.screen.query_one("#topic-records", RecordList).get_option_at_index(0).prompt)
        assert "topics/notes.md:3:1" in text and "Uncited prose here." in text
    # Memory disabled and writer disabled.
    state = write_minimal_state(tmp_path / "off", config={"memory": {"backend": "none"}})
    app = make_app(state)
    async with app.run_test(size=(100, 30)) as pilot:
        assert "Memory is disabled" in _text(app, "#banner")
    state = write_minimal_state(tmp_path / "nowrite", config={"memory": {"writer": {"enabled": False}}})
    app = make_app(state)
    async with app.run_test(size=(100, 30)) as pilot:
        assert "Writing is off" in _text(app, "#banner")


async def test_live_reload_keeps_selection(fixture_state):
    app = make_app(fixture_state, watch=True)
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        tree = app.screen.query_one("#topics-list", Tree)
        await pilot.press("down", "down", "down", "down")  # projects/ → cli-language → kyoto-trip
        assert tree.cursor_node.data == TopicNode("topics/projects/kyoto-trip.md")
        await pilot.press("enter", "down", "down", "down")
        records = app.screen.query_one("#topic-records", RecordList)
        kept = records.highlighted_option.id
        before = seen.count(ModelApplied)
        await asyncio.sleep(0.3)  # let the watcher start
        memory = fixture_state / "memory"
        (memory / "topics" / "people" / "bob.md").write_text(
            "# Bob\n\nBob likes trains.[^e-1111111111] ^b0b0b0b0\n\n"
            "[^e-1111111111]: Time: `2026-11-30`; Sources: [bob](../../sources/openprogram/_v2/local_a1b2c3d4e5.md#source-fc88b9162aa794be)\n"
        )
        node_dir = fixture_state / "sessions" / "local_0c0c0c0c0c" / "history"
        (node_dir / "0099-u-zz0000000001.json").write_text(json.dumps({"id": "zz0000000001", "role": "user"}))
        for _ in range(100):
            await pilot.pause(0.05)
            if seen.count(ModelApplied) > before and any("bob" in l for l in _tree_labels(app, "#topics-list")):
                break
        await settle(pilot, app)
        labels = _tree_labels(app, "#topics-list")
        assert any(l.startswith("bob") for l in labels)
        assert tree.cursor_node.data == TopicNode("topics/projects/kyoto-trip.md")
        assert records.highlighted_option.id == kept
        sessions = {s.session_id: s for s in app.model.sessions}
        assert sessions["local_0c0c0c0c0c"].nodes == 11

        # Only a session changes now: only the Sessions view is redrawn, from a refreshed
        # snapshot (the memory snapshot is reused as is).
        state_before = app.model.state
        reloads = seen.count(ModelApplied)
        (node_dir / "0100-a-zz0000000002.json").write_text(json.dumps({"id": "zz0000000002", "role": "assistant"}))
        for _ in range(100):
            await pilot.pause(0.05)
            if seen.count(ModelApplied) > reloads:
                break
        await settle(pilot, app)
        assert seen.count(ModelApplied) > reloads
        assert seen.of(ModelApplied)[-1].views == {"sessions"}
        assert app.model.state is state_before
        assert {s.session_id: s for s in app.model.sessions}["local_0c0c0c0c0c"].nodes == 12
        assert tree.cursor_node.data == TopicNode("topics/projects/kyoto-trip.md")
        assert records.highlighted_option.id == kept


async def test_reload_key_and_ascii_toggle(fixture_state_ro):
    app = make_app(fixture_state_ro)
    seen = Messages()
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        await pilot.press("ctrl+r")
        await settle(pilot, app)
        (applied,) = seen.of(ModelApplied)  # an explicit reload always re-renders
        assert applied.views == {"topics", "timeline", "recent", "core", "sessions"}
        # A watcher event whose re-read finds the same revision (our own write, already shown)
        # changes nothing on screen: no flicker.
        from memory_tui.tui.messages import WorkspaceChanged

        app.post_message(WorkspaceChanged(frozenset({"memory/topics/core.md"})))
        await pilot.pause(0.2)
        await settle(pilot, app)
        assert seen.count(ModelApplied) == 1
        await pilot.press("a")
        assert app.ascii_mode and "|" in str(app.screen.query_one("#header").render())


async def test_core_title_fits_two_lines_at_120_and_80(fixture_state_ro):
    for size in ((120, 40), (80, 24)):
        app = make_app(fixture_state_ro)
        async with app.run_test(size=size) as pilot:
            await pilot.press("4")
            if app.screen.narrow:
                await pilot.press("enter")
            title = app.screen.query_one("#detail-title", Static)
            assert title.size.height == 2, (size, str(title.render()))
            assert all(len(line) <= title.size.width for line in str(title.render()).split("\n"))


async def test_filter_works_in_core(fixture_state_ro):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        core_list = app.screen.query_one("#core-list", OptionList)
        total = core_list.option_count
        await pilot.press("slash", "h", "o", "j", "i", "c", "h", "a")
        await pilot.pause()
        assert app.filter_text == "hojicha"
        ids = [core_list.get_option_at_index(i).record.memory_id for i in range(core_list.option_count)]
        assert ids == ["de20fc40"] and total == 23
        text = _text(app, "#core-text")
        assert "1 of 11 blocks of core.md" in text and "hojicha" in text and "concise answers" not in text
        assert "1/23 blocks" in _text(app, "#list-title")
        await pilot.press("enter", "s")  # the source records follow the filter too
        records = app.screen.query_one("#core-records", RecordList)
        from memory_tui.tui.widgets import RecordOption

        shown = [records.get_option_at_index(i) for i in range(records.option_count)]
        assert [o.record.memory_id for o in shown if isinstance(o, RecordOption)] == ["de20fc40"]
        await pilot.press("escape")
        assert app.filter_text == "" and core_list.option_count == total


async def test_core_lists_blocks_skipped_for_pending_sources(fixture_state, expected):
    from tui_helpers import make_source_pending

    make_source_pending(fixture_state, "openprogram/local_a1b2c3d4e5/a00000000001")
    app = make_app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        text = _text(app, "#core-text")
        assert "Skipped: they cite a pending source (3)" in text
        skipped = text.split("Skipped: they cite a pending source (3)", 1)[1]
        for mid in ("a058e34e", "de20fc40", "1525c2af"):
            assert mid in skipped
        omitted = text.split("Omitted by the 2,000 token budget", 1)[1].split("Skipped", 1)[0]
        assert "a058e34e" not in omitted
        assert "differs from what topics/core.md renders" in text  # disk still has the old render
        assert "3 pending" in _text(app, "#detail-title")
