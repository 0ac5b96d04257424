"""Footers of the record views and the editor, the Topics list title, the view following a
moved or deleted record, every editor error on its line.

Each test drives the app on a private copy of the fixture and reads what is on screen.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import partial

import pytest
from action_harness import until as until_held
from textual.widgets import Static
from tui_helpers import close_record_outcome, delete_highlighted_record, fake_editor, footer_keys, make_job_app, screen_text

from memory_tui.tui.screens.editor import EditorScreen
from memory_tui.tui.widgets.footer import FittedFooter, choose_shown, item_width, palette_width

pytestmark = pytest.mark.anyio
until = partial(until_held, tries=2000)


def _footer(app) -> tuple[str, list]:
    """The footer's line as drawn, and its shown keys (the palette key apart)."""
    return footer_keys(app)


_app = make_job_app


async def test_topics_list_title_says_where_the_core_records_are(fixture_state):
    app = _app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        m = app.model
        screen = app.view_screens["topics"]
        title = str(screen.query_one("#list-title", Static).render()).splitlines()
        n_core = len(m.core.records)
        assert n_core > 1 and not any(t.path == "topics/core.md" for t in m.topics)  # the tree leaves it out
        # the first line counts the tree's topics only; the second says what is left out and where it is
        assert title[0].startswith(f"{len(m.topics)} topics · {sum(t.record_count for t in m.topics)} records")
        assert title[1] == f"+ {n_core} core records, in view 4 Core"
        assert len(title[1]) <= 34  # one line in the 36-column sidebar


# ---------------------------------------------------------------------- footers
def test_choose_shown_drops_the_lowest_ranked_first_and_keeps_the_row_order():
    widths = [10, 8, 8, 10, 11, 8]
    # no ranks: the row is cut at the first key that does not fit
    assert choose_shown(widths, None, 30) == [True, True, True, False, False, False]
    # ranked: the app-wide keys (10, 20) go first; a key that fits again comes back
    ranks = [80, 75, 74, 20, 10, 100]
    assert choose_shown(widths, ranks, 34) == [True, True, True, False, False, True]
    assert choose_shown(widths, ranks, 45) == [True, True, True, True, False, True]
    # a key ranked below the default shows only when everything above it fits
    assert choose_shown([10, 20, 5], [80, 70, 40], 20) == [True, False, False]
    # a set shows whole or not at all: it goes when its lowest-ranked key would, and comes
    # back only whole (without sets two of the three showed)
    widths, ranks, sets = [10, 8, 13, 10, 8], [80, 75, 74, 73, 68], [None, "r", "r", "r", None]
    assert choose_shown(widths, ranks, 28) == [True, True, False, True, False]
    assert choose_shown(widths, ranks, 28, sets) == [True, False, False, False, True]
    assert choose_shown(widths, ranks, 41, sets) == [True, True, True, True, False]
    assert choose_shown(widths, ranks, 49, sets) == [True] * 5


async def test_footer_widths_are_what_textual_draws(fixture_state):
    app = _app(fixture_state)
    async with app.run_test(size=(200, 45)) as pilot:
        await pilot.pause()
        for view in ("topics", "recent", "core"):
            await pilot.press({"topics": "1", "recent": "3", "core": "4"}[view])
            await pilot.pause()
            keys = [k for k in app.screen.query_one(FittedFooter).children if hasattr(k, "key_display")]
            assert len(keys) > 8 and all(k.display for k in keys)  # 200 columns hold them all
            for k in keys:
                measure = palette_width if k.has_class("-command-palette") else item_width
                assert k.region.width == measure(k.key_display, k.description), (k.key_display, k.region)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_record_keys_are_in_the_footers_of_topics_recent_and_core(fixture_state, size):
    app = _app(fixture_state)
    record_keys = ("m Move", "u Edit text", "d Delete")
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        narrow = size[0] < 100
        # Topics: the tree first (narrow: only the tree shows, so its topic keys do)
        line, shown = _footer(app)
        assert "? Help" in line and "e Edit topic" in line
        if narrow:
            assert "D Del topic" in line and "E $EDITOR" in line
            assert not any(k in line for k in record_keys)  # they act on records out of sight
            await pilot.press("enter")  # the topic's records
            await pilot.pause()
            line, shown = _footer(app)
        assert all(k in line for k in record_keys) and "? Help" in line, line
        if not narrow:
            assert "D Del topic" in line and "E $EDITOR" in line
        for key in ("3", "4"):  # Recent, Core
            await pilot.press("escape", key) if narrow else await pilot.press(key)
            await pilot.pause()
            line, shown = _footer(app)
            assert all(k in line for k in record_keys) and "? Help" in line, (key, line)
            assert len({k.key_display for k in shown}) == len(shown)


async def test_editor_footer_shows_EDITOR_and_ctrl_o_works_while_typing(fixture_state, tmp_path, monkeypatch):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", fake_editor(tmp_path, "p.write_text(t.replace('short answers', 'brief answers'))"))
    app = _app(fixture_state)
    app.editor_suspend = nullcontext  # headless drivers cannot suspend; the editor process itself is real
    async with app.run_test(size=(80, 24)) as pilot:
        topics = app.view_screens["topics"]
        topics.reveal_topic("topics/people/ada.md")
        await pilot.pause()
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditorScreen))
        await pilot.pause()
        line, _ = _footer(app)
        for label in ("^s Save", "esc Back", "^o $EDITOR", "f8 Next error", "? Help"):
            assert label in line, line
        editor = app.screen.editor
        assert app.screen.focused is editor  # typing: E would be a letter here, ctrl+o is not
        await pilot.press("ctrl+o")
        await until(pilot, lambda: "brief answers" in editor.text)
        assert editor.is_dirty and not editor.text.startswith("E")


# ---------------------------------------------------------------------- the view follows a move
async def _move_to(pilot, app, topic: str) -> None:
    """m on the highlighted record, the end of ``topic``'s first heading, Move; the result closed."""
    from textual.widgets import OptionList

    from memory_tui.tui.dialogs.move_picker import MovePicker

    await pilot.press("m")
    await until(pilot, lambda: isinstance(app.screen, MovePicker) and app.screen.topic_choice is not None)
    picker = app.screen
    picker.query_one("#topics", OptionList).highlighted = next(i for i, c in enumerate(picker.choices) if c.path == topic)
    await pilot.pause()
    await pilot.click("#move")
    await close_record_outcome(pilot, app)


async def test_recent_keeps_its_cursor_on_the_moved_record_and_on_a_neighbour_after_a_delete(fixture_state):
    from textual.widgets import OptionList

    app = _app(fixture_state)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        recent = app.view_screens["recent"]
        lst = recent.query_one("#recent-list", OptionList)
        assert lst.option_count > 3
        lst.highlighted = lst.option_count - 2  # not the first row: a plain reload lands there
        await pilot.pause()
        rec = recent.selected_record()
        topic = next(t.path for t in app.model.topics if t.path != rec.topic_path and t.records)
        await _move_to(pilot, app, topic)
        assert app.screen is recent
        moved = recent.selected_record()
        assert moved is not None and moved.memory_id == rec.memory_id and moved.topic_path == topic
        # a delete: the record leaves the list, the row after it takes the cursor
        rows = recent.row_record_ids()
        i = next(i for i, mid in enumerate(rows) if i > 0 and i < len(rows) - 1 and not app.model.records[mid].backlinks)
        lst.highlighted = i
        await pilot.pause()
        gone = recent.selected_record().memory_id
        await delete_highlighted_record(pilot, app)
        assert gone not in recent.row_record_ids() and gone not in app.model.records
        assert recent.selected_record().memory_id == rows[i + 1]


async def test_core_puts_its_cursor_on_the_neighbour_when_the_record_leaves(fixture_state):
    from textual.widgets import OptionList

    app = _app(fixture_state)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("4")
        await pilot.pause()
        core = app.view_screens["core"]
        lst = core.query_one("#core-list", OptionList)
        rows = core.row_record_ids()
        assert len(rows) >= 3
        lst.highlighted = 1
        await pilot.pause()
        rec = core.selected_record()
        assert rec.memory_id == rows[1]
        topic = next(t.path for t in app.model.topics if t.records)  # out of topics/core.md
        await _move_to(pilot, app, topic)
        assert rec.memory_id not in core.row_record_ids()  # it left Core's list
        assert core.selected_record().memory_id == rows[2]  # the row after it took its place
        assert app.model.records[rec.memory_id].topic_path == topic


# ---------------------------------------------------------------------- editor: every message on its line
def _three_errors(committed: str) -> str:
    """A dropped block id (line 3), uncited prose, an undefined footnote."""
    first = committed.split("\n")[2]
    return (committed.replace(first, first[: -len(" ^fc30e0e0")]).rstrip("\n")
            + "\n\nAda walks every day.\n\nAda likes green tea.[^e-nowhere] ^ab12cd34\n")


async def test_editor_shows_every_error_message_on_its_line_and_f8_highlights_it_in_the_list(fixture_state):
    app = _app(fixture_state)
    async with app.run_test(size=(160, 45)) as pilot:
        app.view_screens["topics"].reveal_topic("topics/people/ada.md")
        await pilot.pause()
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditorScreen) and bool(app.screen.query("#topic-editor")))
        screen = app.screen
        editor = screen.editor
        editor.text = _three_errors(editor.text)
        await until(pilot, lambda: len(editor.diagnostics) == 3)
        editor.move_cursor((0, 0))  # on no error: the border names none of them
        await pilot.pause()
        await pilot.pause()
        rows = screen_text(app).splitlines()
        wrapped = editor.wrapped_document
        lines = {d.line for d in editor.diagnostics}
        assert len(lines) == 3  # three errors on three lines
        for d in editor.diagnostics:
            tail = wrapped.get_sections(d.line - 1)[-1].strip()
            row = next(r for r in rows if tail and tail in r and "│" in r)
            # the message after the line's text, on the same row (not only in the border or the list)
            assert f"● {d.message[:20]}" in row.split(tail, 1)[1], (d, row)
        # f8 goes to the next error and the list highlights it there (its whole message wraps)
        for expected in editor.diagnostics:
            await pilot.press("f8")
            await pilot.pause()
            assert editor.cursor_location[0] == expected.line - 1
            assert screen.diagnostics_list.highlighted_option.diagnostic == expected
        assert editor.border_subtitle and expected.code in editor.border_subtitle
