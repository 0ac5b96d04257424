"""The Problems screen: every problem with its place, Enter opens the place."""

from __future__ import annotations

import pytest
from tui_helpers import make_app, write_minimal_state

from memory_tui.tui.screens import ProblemsScreen, TopicsScreen
from memory_tui.tui.screens.problems import ProblemOption
from memory_tui.tui.screens.topics import TopicNode
from memory_tui.tui.app import load_app_settings as load_settings

pytestmark = pytest.mark.anyio

GOOD = "# Good\n\nA fact.[^e-1] ^aaaa1111\n\n[^e-1]: Time: `2026-11`; Sources: [x](../sources/x.md#source-0000000000000000)\n"


def _rows(app) -> list[ProblemOption]:
    lst = app.screen.query_one("#problems-list")
    return [o for o in (lst.get_option_at_index(i) for i in range(lst.option_count)) if isinstance(o, ProblemOption)]


async def test_malformed_topic_is_listed_and_enter_opens_it(tmp_path):
    state = write_minimal_state(tmp_path / "bad", {"topics/a-good.md": GOOD, "topics/notes.md": "# Notes\n\nUncited prose here.\n"})
    app = make_app(state)
    async with app.run_test(size=(120, 40)) as pilot:
        assert "problem" in str(app.screen.query_one("#header").render())
        await pilot.press("p")
        assert isinstance(app.screen, ProblemsScreen)
        rows = _rows(app)
        notes = [r for r in rows if r.problem.path == "topics/notes.md"]
        assert notes and notes[0].problem.line == 3 and notes[0].problem.code == "INVALID_TOPIC_FORMAT"
        assert "topics/notes.md:3:1" in str(notes[0].prompt)
        lst = app.screen.query_one("#problems-list")
        lst.highlighted = rows.index(notes[0])
        await pilot.press("enter")
        await pilot.pause()
        # the file opens at its line: the editor on the topic, the cursor on line 3
        from memory_tui.tui.screens.editor import EditorScreen

        assert isinstance(app.screen, EditorScreen) and app.screen.path == "topics/notes.md"
        assert app.screen.editor.cursor_location[0] == 2
        await pilot.press("escape")  # back to the list of problems, the next one to fix
        await pilot.pause()
        assert isinstance(app.screen, ProblemsScreen)


async def test_corrupt_config_json_is_a_problem_not_a_silent_default(tmp_path, monkeypatch):
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    state = write_minimal_state(tmp_path / "cfg", {"topics/a-good.md": GOOD})
    (state / "config.json").write_text('{"memory": {\n  "backend": }\n')
    app = make_app(state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("p")
        rows = [r for r in _rows(app) if r.problem.path == "config.json"]
        assert rows and rows[0].problem.line == 2, [r.problem for r in _rows(app)]
        await pilot.press("enter")  # shown in no view and no $EDITOR to open it in: the screen stays, says so
        assert isinstance(app.screen, ProblemsScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, ProblemsScreen)


async def test_a_bad_settings_file_is_listed_with_its_file(tmp_path):
    state = write_minimal_state(tmp_path / "s", {"topics/a-good.md": GOOD})
    cfg = tmp_path / "config.toml"
    cfg.write_text('theme = "nord"\n[keymap\n')
    settings = load_settings(cfg)
    app = make_app(state, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("p")
        rows = [r for r in _rows(app) if r.problem.code == "INVALID_SETTINGS"]
        assert rows and rows[0].problem.path == str(cfg)
        assert "line 2" in rows[0].problem.message


async def test_a_bad_config_toml_key_is_a_problem_naming_file_and_key(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[keymap]\n"view.nope" = "f9"\n"view.core" = "f4"\n\n[writer]\nname = "telepathy"\n')
    settings = load_settings(cfg)
    assert settings.keymap == {"view.core": "f4"}  # the good key still applies
    assert str(cfg) in settings.problem and "'view.nope'" in settings.problem and "telepathy" in settings.problem
    state = write_minimal_state(tmp_path / "k", {"topics/a-good.md": GOOD})
    app = make_app(state, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        assert "Settings:" in str(app.screen.query_one("#banner").render())
        await pilot.press("p")
        rows = {r.problem.details["key"]: r.problem for r in _rows(app) if r.problem.code == "INVALID_SETTINGS"}
        assert set(rows) == {"keymap.view.nope", "writer.name"}
        # file, key and line of each bad value (tomllib gives no lines: the loader finds them)
        assert (rows["keymap.view.nope"].path, rows["keymap.view.nope"].line) == (str(cfg), 2)
        assert (rows["writer.name"].path, rows["writer.name"].line) == (str(cfg), 6)
        assert "view.nope" in rows["keymap.view.nope"].message


async def test_an_invalid_config_json_value_is_shown_not_silently_defaulted(tmp_path):
    state = write_minimal_state(tmp_path / "s", {"topics/a-good.md": GOOD})
    (state / "config.json").write_text('{"memory": {"writer": {\n  "trigger_tokens": "lots"}}}\n')
    app = make_app(state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("p")
        (row,) = [r for r in _rows(app) if r.problem.code == "INVALID_CONFIG"]
        assert (row.problem.path, row.problem.line) == ("config.json", 2)
        assert "memory.writer.trigger_tokens" in row.problem.message
