"""A running app sees another process's change live (issue 14, contention): the app is started
headless with watching on, a separate memory-tui process installs a new topic under the write
lock, and the new topic must appear on the screen without any key press.

Written against the public ``create_app`` factory and the visible screen text only (the SVG
export of what the terminal shows), so it does not depend on how the app is built inside."""

from __future__ import annotations

import asyncio
import html
import os
import re
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from memory_tui.tui.app import create_app  # noqa: E402
from memory_tui.pipeline.settings import Settings  # noqa: E402

from rel_support import ids, make_state, topic  # noqa: E402

HERE = Path(__file__).resolve().parent
NAME = "zanzibar"  # a word nothing else on the screen contains


def screen_text(app) -> str:
    svg = app.export_screenshot()
    runs = re.findall(r"<text[^>]*>(.*?)</text>", svg, flags=re.S)
    return html.unescape("".join(re.sub(r"<[^>]+>", "", r) for r in runs)).replace("\xa0", " ")


def test_running_app_shows_another_processes_change_live(tmp_path):
    state = make_state(tmp_path, git="off")
    src = tmp_path / "new.md"
    src.write_text(topic("Zanzibar", [("The user plans a trip to Zanzibar.", ids()[4])]), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1]) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    async def scenario() -> tuple[str, str, int]:
        app = create_app(state, watch=True, home=tmp_path, settings=Settings())
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):  # first load
                await pilot.pause(0.05)
                if "people/ada.md" in screen_text(app):
                    break
            before = screen_text(app)
            await asyncio.sleep(0.5)  # the watcher is up
            proc = await asyncio.to_thread(
                subprocess.run, [sys.executable, "-m", "memory_tui", "--state", str(state), "--json", "edit",
                                 f"topics/{NAME}.md", "--from", str(src), "--create"], capture_output=True, text=True, env=env)
            assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
            deadline = time.monotonic() + 60  # a bound for a loaded machine, not a timing assertion
            after = screen_text(app)
            while NAME not in after.lower() and time.monotonic() < deadline:
                await pilot.pause(0.1)
                after = screen_text(app)
            return before, after, proc.returncode

    before, after, code = asyncio.run(scenario())
    assert code == 0
    assert "people/ada.md" in before and NAME not in before.lower(), before[:2000]
    assert NAME in after.lower(), after[:3000]
