"""Layout at 40x12 and in ASCII mode (issue 8 item 6): snapshots plus checks on the drawn text."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from tui_helpers import make_app, settle, write_minimal_state

from memory_tui.demo import build_demo
from memory_tui.tui.ascii import to_ascii

pytestmark = pytest.mark.anyio

GOOD = "# Good\n\nAda drinks green tea every morning before work.[^e-1] ^ab12cd34\n\n[^e-1]: Time: `2026-11`; Sources: [x](openprogram/s/m1)\n"
# what ASCII mode promises never to draw: box drawing, block elements, middle dot, ellipsis
FORBIDDEN = re.compile("[\u2500-\u259f\u00b7\u2026\U0001f50e]")  # \U0001f50e: the palette's search icon


def _screen_text(app) -> str:
    svg = app.export_screenshot()
    rows: dict[float, list[str]] = {}
    for y, t in re.findall(r'<text[^>]*y="([0-9.]+)"[^>]*>([^<]*)</text>', svg):
        rows.setdefault(float(y), []).append(html.unescape(t).replace("\xa0", " "))
    return "\n".join("".join(rows[y]) for y in sorted(rows))


def _keys(*keys):
    async def run_before(pilot):
        await settle(pilot, pilot.app)
        for key in keys:
            await pilot.press(key)
        await settle(pilot, pilot.app)

    return run_before


def test_to_ascii_keeps_width_and_replaces_every_forbidden_glyph():
    from rich.cells import cell_len

    sample = "─│┌┐└┘├┤┬┴┼═║▁▂▃▄▅▆▇█▉▊▋▌▍▎▏▐▕· … ✓ \U0001f50e"
    out = to_ascii(sample)
    assert cell_len(out) == cell_len(sample) and out.isascii()
    assert to_ascii("Ada's café 東京") == "Ada's café 東京"  # owner's text that is not a glyph stays


@pytest.mark.parametrize("keys", [(), ("enter",), ("2",), ("4",), ("p",), ("question_mark",), ("ctrl+p",)],
                         ids=["topics", "opened", "timeline", "core", "problems", "help", "palette"])
async def test_ascii_mode_draws_no_box_block_dot_or_ellipsis(tmp_path, keys):
    state = build_demo(tmp_path / "demo")
    app = make_app(state, ascii=True)
    async with app.run_test(size=(40, 12)) as pilot:
        await _keys(*keys)(pilot)
        text = _screen_text(app)
        assert text.strip(), "nothing drawn"
        assert not FORBIDDEN.findall(text), (FORBIDDEN.findall(text), text)


async def test_without_ascii_mode_the_glyphs_are_drawn(tmp_path):
    # the check above can fail: the same screen in Unicode mode has them
    app = make_app(build_demo(tmp_path / "demo"))
    async with app.run_test(size=(40, 12)) as pilot:
        await settle(pilot, app)
        assert FORBIDDEN.findall(_screen_text(app))


async def test_screenshot_command_writes_an_svg_under_the_cwd_and_says_where(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    state = write_minimal_state(tmp_path / "s", {"topics/good.md": GOOD})
    app = make_app(state)
    said: list[str] = []
    monkeypatch.setattr(app, "notify", lambda message, **_kw: said.append(message))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        app.action_screenshot()
        await pilot.pause()
        shots = list(Path(tmp_path).glob("*.svg"))
        assert len(shots) == 1 and shots[0].read_text().startswith("<svg")
        assert any(str(shots[0]) in m for m in said), said


def test_small_terminal_ascii_snapshot(snap_compare, tmp_path):
    state = write_minimal_state(tmp_path, {"topics/good.md": GOOD})
    assert snap_compare(make_app(state, ascii=True), terminal_size=(40, 12), run_before=_keys("enter"))


def test_ascii_mode_snapshot(snap_compare, tmp_path):
    state = write_minimal_state(tmp_path, {"topics/good.md": GOOD})
    assert snap_compare(make_app(state, ascii=True), terminal_size=(80, 24), run_before=_keys("enter"))


async def test_at_40x12_the_footer_shows_whole_labels_only(tmp_path):
    state = write_minimal_state(tmp_path / "s", {"topics/good.md": GOOD})
    app = make_app(state, ascii=True)
    async with app.run_test(size=(40, 12)) as pilot:
        await _keys("enter")(pilot)
        footer_line = _screen_text(app).splitlines()[-1]
        keys = [k for k in app.screen.query("FooterKey") if not k.has_class("-command-palette")]
        shown = [k for k in keys if k.display]
        assert shown and len(shown) < len(keys)  # some fit, some had to go
        for k in shown:
            assert f"{k.key_display} {k.description}" in footer_line, (k.description, footer_line)
        assert footer_line.rstrip().endswith("^p palette")
