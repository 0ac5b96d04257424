"""The record renderer (markdown-it + footnotes → Rich Text) and the preview reader."""

from __future__ import annotations

from memory_tui.tui.render import ASCII, render_markdown, strip_block_ids


def test_named_and_inline_footnotes_become_numbered_markers_with_an_end_list():
    md = (
        "Dave drinks tea daily.[^e-48bac47c87] Also inline^[a note]. ^ae99a3a8\n\n"
        "[^e-48bac47c87]: Time: `2026-08`; Sources: [daily tea](../../sources/openprogram/_v2/s.md#source-3980e4aaa25977a6)\n"
    )
    out = render_markdown(md).plain
    assert "daily.[1]" in out and "inline[2]" in out
    assert "[1] 2026-08 · daily tea" in out
    assert "[2] a note" in out
    assert "^ae99a3a8" not in out and "e-48bac47c87" not in out
    assert "source-3980" not in out  # source targets are not shown raw


def test_block_links_stay_readable_and_headings_are_structure():
    out = render_markdown("# Dave\n\n## Prefs\n\nSee [his tea](dave.md#^97de5549) ok.[^a] ^x1\n\n[^a]: Time: 2026; Sources: [s](y.md#source-1)").plain
    assert out.startswith("Dave\n\nPrefs")
    assert "his tea (→dave#97de5549)" in out


def test_escape_sequences_from_disk_are_stripped():
    out = render_markdown("evil \x1b]52;c;ZXZpbA==\x07text \x1b[31mred\x1b[0m[^a] ^b1\n\n[^a]: Time: 2026; Sources: [s](t.md#source-1)").plain
    assert "\x1b" not in out and "evil text red[1]" in out


def test_strip_block_ids_only_removes_trailing_ids():
    assert strip_block_ids("a ^b c ^d1 ^e2") == "a ^b c"


def test_ascii_glyphs():
    out = render_markdown("- one\n- [two](x.md#^ab12)", glyphs=ASCII).plain
    assert "* one" in out and "->x#ab12" in out
