"""A topic FILE NAME carrying terminal sequences (title change, clear screen) is drawn inert in
every view and printed inert by every CLI verb: names go through the one sanitiser like text."""

from __future__ import annotations

import json
import re

import pytest

from memory_tui.cli import main
from tui_helpers import make_app, settle

pytestmark = pytest.mark.anyio

EVIL_NAME = "\x1b]0;TITLE\x07\x1b[2J"
EVIL = f"topics/evil/{EVIL_NAME}.md"
TEXT = ("# Evil\n\nEvil fact.[^e-1]\n\n"
        "[^e-1]: Time: `2026-11-03`; Sources: [s](openprogram/local_a1b2c3d4e5/a00000000001)\n")
# what the app itself writes between text: colours (SGR) and cursor moves; anything else is content
OWN = re.compile(r"\x1b\[[0-9;]*[mHABCDG]")


@pytest.fixture
def evil_state(fixture_state, capsys):
    path = fixture_state / "memory" / EVIL
    path.parent.mkdir()
    path.write_text(TEXT, encoding="utf-8")
    assert main(["--state", str(fixture_state), "views", "--rebuild", "--json"]) == 0, capsys.readouterr()
    capsys.readouterr()
    return fixture_state


def _terminal_bytes(app) -> str:
    """Exactly what the app would write to the terminal for a full repaint of this screen."""
    return app.screen._compositor.render_full_update().render_segments(app.console)


async def test_timeline_draws_a_hostile_topic_name_inert(evil_state):
    app = make_app(evil_state)
    seen_row = False
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        await settle(pilot, app)
        for _ in range(8):  # every year, month and day node of the timeline
            drawn = _terminal_bytes(app)
            content = OWN.sub("", drawn)
            assert "\x1b" not in content and "\x07" not in content, repr(content[:400])
            assert "TITLE" not in drawn or "]0;" not in drawn
            seen_row = seen_row or "evil/" in content
            await pilot.press("down")
            await settle(pilot, app)
        for view in "13":  # Topics and Recent name the file too
            await pilot.press(view)
            await settle(pilot, app)
            content = OWN.sub("", _terminal_bytes(app))
            assert "\x1b" not in content and "\x07" not in content, (view, repr(content[:400]))
    assert seen_row, "the hostile topic's row was never on screen"


RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("argv", [["views", "--check"], ["show", EVIL], ["topics"], ["status"],
                                  ["edit", EVIL, "--check", "--from", "-"], ["why", "local_a1b2c3d4e5"]])
def test_cli_prints_a_hostile_topic_name_inert(evil_state, capsys, monkeypatch, argv):
    import io

    for extra in ([], ["--json"]):
        monkeypatch.setattr("sys.stdin", io.StringIO("# Evil\n\nuncited prose\n"))
        main(["--state", str(evil_state), *argv, *extra])
        out, err = capsys.readouterr()
        assert RAW.search(out) is None and RAW.search(err) is None, (argv, extra, repr((out + err)[:600]))
        if extra:
            json.loads(out)  # escaped, still one valid object
