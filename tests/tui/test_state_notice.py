"""``memory-tui --state FILE``: the app says what the CLI's verbs say, not "Nothing at"."""

from __future__ import annotations

import pytest
from textual.widgets import Static

from tui_helpers import make_app

from memory_tui.cli import main

pytestmark = pytest.mark.anyio


async def test_a_file_as_the_state_dir_is_called_not_a_folder(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("not a state directory\n")
    assert main(["--state", str(target), "status"]) != 0
    cli_words = "not a state directory (not a folder)"
    assert cli_words in capsys.readouterr().err
    app = make_app(target)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        text = str(app.screen.query_one("#notice-text", Static).render())
        assert cli_words in text and "Nothing at" not in text
