"""The move picker's chosen position by glyph, the footers at every size (the record keys as
one set, the app-wide keys in every view), Topics' cursor after a delete, editor messages
where the line leaves no room, the Sessions placeholder in ASCII.

Each test drives the app (or one dialog) and reads what is drawn.
"""

from __future__ import annotations

from functools import partial

import pytest
from action_harness import DialogHarness, sample_choices
from action_harness import until as until_held
from tui_helpers import delete_highlighted_record, footer_keys, make_job_app, screen_text

from memory_tui.tui.dialogs.move_picker import MovePicker

pytestmark = pytest.mark.anyio
until = partial(until_held, tries=2000)


# ---------------------------------------------------------------------- 1. the move picker's positions
def _position_row(text: str) -> str:
    return next(row for row in text.splitlines() if "end" in row and "start" in row and "before" in row)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_chosen_position_has_its_own_glyph_not_only_a_colour(monkeypatch, size):
    """Monochrome (NO_COLOR): only the chosen radio draws ``●``, the others ``○``."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = DialogHarness(lambda: MovePicker(sample_choices(), "845c11f8", topic="topics/people/ada.md", headings=("Ada",)))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MovePicker) and app.screen.section is not None)
        await pilot.pause()
        picker = app.screen
        for p in ("end", "start", "before", "after"):
            radio = picker.query_one(f"#pos-{p}")
            assert str(radio.render()).lstrip("▐").startswith("●" if p == "end" else "○"), (p, str(radio.render()))
        if size[0] < 100:  # one line: the row as drawn shows one ● and three ○
            row = _position_row(screen_text(app))
            assert row.count("●") == 1 and row.count("○") == 3 and row.index("●") < row.index("end"), row
        picker.query_one("#pos-after").value = True  # the choice moves: so does the glyph
        await pilot.pause()
        assert picker.position == "after"
        glyphs = {p: str(picker.query_one(f"#pos-{p}").render()).lstrip("▐")[0] for p in ("end", "start", "before", "after")}
        assert glyphs == {"end": "○", "start": "○", "before": "○", "after": "●"}


# ---------------------------------------------------------------------- 2. footers at every size
def _footer_line(app) -> str:
    """The footer as drawn; every key it shows is whole, and ``? Help`` is one of them."""
    line, _ = footer_keys(app)
    assert "? Help" in line, (type(app.screen).__name__, line)
    return line


async def _walk_footers(pilot, app) -> dict[str, str]:
    """Every screen's footer: the five views, the editor, evidence, history, problems."""
    from memory_tui.tui.screens.editor import EditorScreen

    lines: dict[str, str] = {}

    async def settle(n: int = 6) -> None:
        for _ in range(n):
            await pilot.pause()

    for key, view in (("1", "topics"), ("2", "timeline"), ("3", "recent"), ("4", "core"), ("5", "sessions")):
        await pilot.press(key)
        await settle()
        lines[view] = _footer_line(app)
    await pilot.press("1")
    app.view_screens["topics"].reveal_topic("topics/people/ada.md")
    await settle()
    await pilot.press("e")
    await until(pilot, lambda: isinstance(app.screen, EditorScreen))
    await settle()
    lines["editor"] = _footer_line(app)
    await pilot.press("escape")
    await until(pilot, lambda: app.screen is app.view_screens["topics"])
    for key, name in (("i", "evidence"), ("h", "history"), ("p", "problems")):
        app.view_screens["topics"].focus_list()
        await pilot.press(key)
        await until(pilot, lambda: type(app.screen).__name__.lower().startswith(name))
        await settle()
        lines[name] = _footer_line(app)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.view_screens["topics"])
    return lines


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (40, 12)])
async def test_every_footer_keeps_help_whole_labels_and_the_record_set_and_every_view_quit_and_problems(fixture_state, size):
    app = _app(fixture_state)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        lines = await _walk_footers(pilot, app)
    assert set(lines) == {"topics", "timeline", "recent", "core", "sessions", "editor", "evidence", "history", "problems"}
    # the record keys are one set: never m without u and d (at 40 columns Recent showed "m Move" alone)
    for name, line in lines.items():
        shown = [k in line for k in ("m Move", "u Edit text", "d Delete")]
        assert all(shown) or not any(shown), (name, line)
    if size[0] >= 100:
        # every view at 120 columns: the app-wide keys, as ? and the palette list them (Core had no p)
        for view in ("topics", "timeline", "recent", "core", "sessions"):
            assert "p Problems" in lines[view] and "q Quit" in lines[view], (view, lines[view])
        # Topics at 120: the app-wide keys a new user looks for, beside the record and topic keys
        for label in ("q Quit", "p Problems", "e Edit topic", "m Move", "u Edit text", "d Delete", "D Del topic", "E $EDITOR"):
            assert label in lines["topics"], (label, lines["topics"])
        assert "q Quit" in lines["recent"] and "p Problems" in lines["recent"]
    if size[0] >= 80:
        assert "w Write branch" in lines["sessions"] and "q Quit" in lines["sessions"]
        assert "o Open in Topics" in lines["timeline"]
    # reload gives way before quit (the editor types q; in problems q closes it)
    for name, line in lines.items():
        if "q Quit" not in line and name not in ("editor", "problems"):
            assert "^r Reload" not in line, (name, line)


_app = make_job_app


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_on_a_citation_chip_the_topics_footer_shows_g(fixture_state, size):
    """g opens a chip's source node; on a chip it outranks the topic keys, elsewhere it gives way."""
    from memory_tui.tui.widgets.records import CitationOption

    app = _app(fixture_state)
    async with app.run_test(size=size) as pilot:
        topics = app.view_screens["topics"]
        topics.reveal_topic("topics/people/ada.md")
        await pilot.pause()
        if size[0] < 100:
            await pilot.press("enter")
            await pilot.pause()
        records = topics.records
        records.focus()
        records.highlighted = 0  # the first record, not a chip
        await pilot.pause()
        await pilot.pause()
        assert "g Go to node" not in _footer_line(app)
        chip = next(i for i in range(records.option_count)
                    if isinstance(records.get_option_at_index(i), CitationOption) and topics.cited_frame() is None
                    and records.get_option_at_index(i).link.source_id)
        records.highlighted = chip
        await pilot.pause()
        await pilot.pause()
        assert topics.cited_frame() is not None
        line = _footer_line(app)
        # the chip's key and the whole record set (at 80 columns d gave way to a filter whose
        # list the detail pane hides)
        for label in ("g Go to node", "m Move", "u Edit text", "d Delete", "? Help"):
            assert label in line, (label, line)
        if size[0] < 100:
            assert "esc Back" in line  # the way back to the list, where the filter is
        await pilot.press("g")
        await until(pilot, lambda: app.view == "sessions")


# ---------------------------------------------------------------------- 3. Topics after a delete
@pytest.mark.parametrize("size", [(160, 45), (80, 24)])
async def test_topics_puts_its_cursor_on_the_next_record_after_a_delete_and_on_the_previous_after_the_last(fixture_state, size):
    app = _app(fixture_state)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        topics = app.view_screens["topics"]
        m = app.model
        # a topic with 3+ records none of which another record links to (a delete is refused then)
        topic = next(t for t in m.topics if sum(1 for r in m.records.values() if r.topic_path == t.path and not r.backlinks) >= 3
                     and all(not r.backlinks for r in m.records.values() if r.topic_path == t.path))
        topics.reveal_topic(topic.path)
        await pilot.pause()
        rows = topics.row_record_ids()
        assert len(rows) >= 3 and len(set(rows)) == len(rows)
        topics.records.focus()
        topics.land_on_record([rows[1]])  # the middle one: not where a plain reload puts the cursor
        await pilot.pause()
        assert topics.records.selected_record.memory_id == rows[1]
        await delete_highlighted_record(pilot, app)
        assert rows[1] not in app.model.records and topics.row_record_ids() == [rows[0], *rows[2:]]
        assert app.screen is topics and topics.records.selected_record.memory_id == rows[2]
        # the last record: the one before it takes the cursor
        rows = topics.row_record_ids()
        topics.land_on_record([rows[-1]])
        await pilot.pause()
        await delete_highlighted_record(pilot, app)
        assert topics.row_record_ids() == rows[:-1]
        assert topics.records.selected_record.memory_id == rows[-2]
        assert app.screen.focused is topics.records


async def test_a_dialog_over_a_view_leaves_its_pane_and_focus_but_a_view_switch_starts_at_the_list(fixture_state):
    """80x24: records shown (the detail pane), ? then esc: still the records, still focused;
    the same after the move picker is cancelled. Leaving for another view and coming back
    starts at the list, as before."""
    from memory_tui.tui.dialogs.move_picker import MovePicker
    from memory_tui.tui.screens import HelpScreen

    app = _app(fixture_state)
    async with app.run_test(size=(80, 24)) as pilot:
        topics = app.view_screens["topics"]
        topics.reveal_topic("topics/people/ada.md")
        await pilot.pause()
        last = topics.records.option_count - 1
        assert last > 0
        topics.records.highlighted = last  # a chip: not where a redraw would put the cursor
        await pilot.pause()
        assert topics.pane == "detail" and app.screen.focused is topics.records
        for opener, kind in (("question_mark", HelpScreen), ("m", MovePicker)):
            await pilot.press(opener)
            await until(pilot, lambda: isinstance(app.screen, kind))
            await pilot.pause()
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is topics)
            await pilot.pause()
            assert topics.pane == "detail" and topics.has_class("-detail"), kind
            assert app.screen.focused is topics.records and topics.records.highlighted == last, kind
        await pilot.press("3")
        await until(pilot, lambda: app.view == "recent")
        await pilot.press("1")
        await until(pilot, lambda: app.screen is topics)
        await pilot.pause()
        assert topics.pane == "list" and app.screen.focused is topics.list_widget()


# ---------------------------------------------------------------------- 4. editor messages without room
def _editor_rows(app) -> list[str]:
    return [row for row in screen_text(app).splitlines() if row.strip()]


def _line_text(width: int, gutter: int, room: int, word: str) -> str:
    """A one-row line leaving ``room`` cells for a message after it (the TextArea keeps one
    cell free for the cursor at the end of a row, so a full row is ``width - gutter - 1``)."""
    length = width - gutter - 3 - room  # the message starts 2 cells after the text, ends 1 before the edge
    return (word + " ") * (length // (len(word) + 1)) + "x" * (length % (len(word) + 1))


@pytest.mark.parametrize("ascii", [False, True])
async def test_an_error_without_room_after_its_line_is_drawn_on_the_blank_line_below_or_its_start_after_the_text(ascii):
    from action_harness import EditorHarness

    from memory_tui.tui.model.editor import Diagnostic
    from memory_tui.tui.widgets.topic_editor import TopicEditor

    app = EditorHarness("# Ada\n\nplaceholder\n", diagnostics=())
    async with app.run_test(size=(70, 20)) as pilot:
        editor = app.query_one(TopicEditor)
        editor.ascii = ascii
        await pilot.pause()
        width, gutter = editor.scrollable_content_region.width, editor.gutter_width
        full = _line_text(width, gutter, -2, "walks")  # the whole row: no cell after the text
        tight = _line_text(width, gutter, 8, "tea")  # 8 cells: under the 12 a whole message wants
        editor.load_text(f"# Ada\n\n{full}\n\n{tight}\nAda visited Kyoto.\n")
        await pilot.pause()
        assert all(len(editor.wrapped_document.get_sections(r)) == 1 for r in range(editor.document.line_count))
        editor.set_diagnostics([
            Diagnostic(3, 1, "INVALID_TOPIC_FORMAT", "uncited prose: every record needs a citation"),
            Diagnostic(5, 1, "INVALID_TOPIC_FORMAT", "footnote e9 is not defined"),
        ])
        editor.move_cursor((0, 0))
        await pilot.pause()
        await pilot.pause()
        rows = _editor_rows(app)
        mark, arrow = ("!", "^") if ascii else ("●", "↑")
        i_full = next(i for i, r in enumerate(rows) if full[-20:] in r)
        assert "uncited" not in rows[i_full]  # no room on its own row …
        assert f"{arrow} uncited prose" in rows[i_full + 1], rows[i_full + 1]  # … so on the blank line below
        i_tight = next(i for i, r in enumerate(rows) if tight[-20:] in r)
        # the next line is text: the start of the message, cut, after the text
        after = rows[i_tight].split(tight[-20:], 1)[1]
        assert f"{mark} footno" in after and "…" not in after[: after.index(mark)], after
        assert "Ada visited Kyoto." in rows[i_tight + 1] and "footnote" not in rows[i_tight + 1]
        # typing on the blank line takes its room back: the message goes (it is in the list)
        editor.move_cursor((3, 0))
        editor.insert("Ada walks.")
        await pilot.pause()
        assert editor.document.get_line(3) == "Ada walks."
        rows = _editor_rows(app)
        assert not any(f"{arrow} uncited" in r for r in rows)


# ---------------------------------------------------------------------- 5. Sessions placeholder in ASCII
async def test_the_analysing_placeholder_follows_a_while_it_shows(fixture_state, monkeypatch):
    """A big session (reasons computed in a worker, held here): ``a`` switches the verdict
    panel's and the node detail's "analysing…" to ASCII and back."""
    import threading

    from tui_helpers import settle

    from memory_tui.tui.model import sessions as sessions_model

    monkeypatch.setattr(sessions_model, "INLINE_WALKS", 0)
    app = _app(fixture_state)
    gate = threading.Event()
    real = sessions_model.SessionsModel.explain_now

    def held(self):
        gate.wait(10)
        return real(self)

    monkeypatch.setattr(sessions_model.SessionsModel, "explain_now", held)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app)
            await pilot.press("5")
            await pilot.pause()
            screen = app.screen
            panel = screen.query_one("#sessions-verdict")
            assert not screen.sessions.explained and "analysing the session's branches…" in panel.plain
            for ascii in (True, False):
                await pilot.press("a")
                await pilot.pause()
                assert app.ascii_mode is ascii and not screen.sessions.explained
                dots = "..." if ascii else "…"
                drawn = screen_text(app)
                assert f"analysing the session's branches{dots} (the verdict" in drawn, drawn  # the panel as drawn
                assert f"analysing the session's branches{dots}" in panel.plain, panel.plain
                assert f"verdict: analysing the session's branches{dots}" in drawn  # the node detail
                assert all(c.isascii() for c in drawn) or not ascii
    finally:
        gate.set()


# ---------------------------------------------------------------------- walk-through: the header
@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_header_keeps_all_three_insight_counts_whole(fixture_state, size):
    """At 120 columns the long words pushed the last count off the line ("0 with a…"); the
    short words go in first, the line is cut only when even they do not fit."""
    from tui_helpers import settle

    app = _app(fixture_state, insights=True)
    async with app.run_test(size=size) as pilot:
        await settle(pilot, app)
        workers = [w for w in app.workers if w.group == "insights"]
        if workers:
            await app.workers.wait_for_complete(workers)
        await pilot.pause()
        await pilot.pause()
        c = app.insights.counts
        line = str(app.screen.query_one("#header").render())
        assert len(line) <= size[0] and "…" not in line, line
        for label in (f"{c.single_episode} 1ep", f"{c.alternatives} alt", f"{c.pending_sources} pend-src"):
            assert label in line, (label, line)
        assert "pending" in line.split("│")[-4] or "pend " in line  # the writer's pending count is still there


# ---------------------------------------------------------------------- walk-through: a narrow start
async def test_a_narrow_start_shows_the_topic_list_once_loaded_not_the_loading_pane(fixture_state):
    """80x24 with the real background load: "Loading…" takes the screen (the detail pane);
    once the workspace is in, Topics shows its list with the tree focused, not the first
    topic's records."""
    from tui_helpers import settle

    app = _app(fixture_state, background=True)
    async with app.run_test(size=(80, 24)) as pilot:
        topics = app.view_screens["topics"]
        await settle(pilot, app)
        for _ in range(200):
            if app.model is not None and topics.blocking_notice() is None and not getattr(topics, "notice_pane", False):
                break
            await pilot.pause(0.02)
        await pilot.pause()
        assert app.model is not None and topics.blocking_notice() is None
        assert topics.pane == "list" and topics.has_class("-list"), topics.classes
        assert app.screen.focused is topics.list_widget()
        assert "esc Back" not in _footer_line(app)


# ---------------------------------------------------------------------- walk-through: Recent's rows
async def test_recent_rows_name_the_topic_before_its_folder(tmp_path):
    """The demo's topics live in conversations/: at 120 columns the list cut every row to
    "conversations/rewrit…"; the name comes first now, the folder after it."""
    from tui_helpers import FROZEN

    from memory_tui.demo import build_demo

    state = build_demo(tmp_path / ".openprogram", clock=lambda: FROZEN)
    app = _app(state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        await pilot.pause()
        rows = app.view_screens["recent"].row_record_ids()
        paths = {app.model.records[mid].topic_path.removeprefix("topics/").removesuffix(".md") for mid in rows}
        names = {p.rpartition("/")[2] for p in paths if "/" in p}
        assert len(names) >= 2 and all(len(n) >= 20 for n in names)  # long names in a folder: the case at hand
        sidebar = [line.split("▎")[0] for line in screen_text(app).splitlines() if "▎" in line]
        for name in names:  # (screen_text drops the blank cells between a row's parts)
            assert any(line.replace(" ", "").startswith(f"2026-11-28{name[:18]}") for line in sidebar), (name, sidebar[:6])
        assert not any("conversations/" in line.split("…")[0][:30] for line in sidebar if line.startswith("2026"))


# ---------------------------------------------------------------------- 5. round 10: short screens, help, paths, picker
async def test_at_40x12_the_record_list_keeps_the_source_panes_rows_off_a_chip(fixture_state):
    """At 40x12 the pane under Topics' records took 4 of the 6 rows left: one row of a
    record showed (its date line, not its text). Off a chip the list has them; on a chip the
    pane shows the cited turn, in a few lines. At 80x24 nothing changed."""
    from memory_tui.tui.widgets import CitationOption, SourcePane

    for size, short in (((40, 12), True), ((80, 24), False)):
        app = _app(fixture_state)
        async with app.run_test(size=size) as pilot:
            topics = app.view_screens["topics"]
            topics.reveal_topic("topics/people/ada.md")
            await pilot.pause()
            records, pane = topics.records, topics.query_one("#source-pane", SourcePane)
            records.highlighted = 0  # a record row
            await pilot.pause()
            assert topics.has_class("-short") == short
            if short:
                assert pane.region.height == 0 and records.region.height >= 5, (pane.region, records.region)
            else:
                assert pane.region.height >= 3, pane.region
            records.highlighted = next(i for i in range(records.option_count)
                                       if isinstance(records.get_option_at_index(i), CitationOption))
            await pilot.pause()
            await pilot.pause()
            assert 2 <= pane.region.height <= (4 if short else 12) and records.region.height >= 1, (pane.region, records.region)


def test_the_help_wraps_a_description_under_itself_not_under_its_key():
    """At 40 columns a description's second line started at the margin, under the keys."""
    import io

    from rich.console import Console

    from memory_tui.tui.screens import HelpScreen

    rows = HelpScreen({}, "topics", False).key_rows()
    console = Console(width=30, file=io.StringIO(), record=True, color_system=None)
    console.print(rows)
    import re

    tagged = [line for line in console.export_text().splitlines() if re.search(r"\[\w+\.[\w.]+\]", line)]  # a command's id
    follow = [line for line in tagged if line.startswith(" " * 13)]
    assert follow, tagged  # the width makes descriptions wrap: the case at hand
    for line in tagged:  # a row's own line (its keys at column 2) or a description's next line
        assert (line.startswith("  ") and line[2] != " ") or line.startswith(" " * 13), line


def test_the_preview_folds_a_long_path_after_a_slash():
    """The job preview cut memory/sources/…/local_a1b2c|3d4e5.md mid-name at 80 columns."""
    import io

    from rich.console import Console

    from memory_tui.tui.dialogs.confirm_job import FoldedPaths

    paths = ["memory/sources/openprogram/_v2/local_a1b2c3d4e5.md", "memory/core.md",
             "sessions/local_a1b2c3d4e5/history/0003-l-a1.json"]
    console = Console(width=24, file=io.StringIO(), record=True, color_system=None)
    console.print(FoldedPaths(paths))
    lines = console.export_text().splitlines()
    assert len(lines) > len(paths)  # some fold
    joined: list[str] = []
    for line in lines:
        if line.startswith("  "):  # a fold's continuation
            assert joined[-1].endswith("/"), lines  # the fold came after a folder, not mid-name
            joined[-1] += line.strip()
        else:
            joined.append(line.strip())
    assert joined == paths


async def test_at_80x24_the_new_chain_input_is_set_apart_from_the_heading_list():
    """The picker's chain input sat on the row under the heading list, against the topic list."""
    from textual.widgets import Input, OptionList

    app = DialogHarness(lambda: MovePicker(sample_choices(), "845c11f8", topic="topics/people/ada.md", headings=("Ada",)))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MovePicker) and app.screen.section is not None)
        await pilot.pause()
        picker = app.screen
        field = picker.query_one("#new-headings", Input).region
        sections, topics = (picker.query_one(f"#{n}", OptionList).region for n in ("sections", "topics"))
        assert field.y >= sections.bottom + 1 and field.x > topics.right, (field, sections, topics)
        assert field.bottom <= topics.bottom  # the two columns still end together


async def test_a_move_picker_dismissed_before_it_was_composed_leaves_the_app_running():
    """m then esc faster than the picker composes (a busy machine): its on_mount ran with no
    lists and raised NoMatches for #topics, which stopped the app."""
    from textual.app import App
    from textual.widgets import Label

    class Host(App):
        def compose(self):
            yield Label("host")

    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        picker = MovePicker(sample_choices(), "845c11f8", topic="topics/people/ada.md", headings=("Ada",))
        app.push_screen(picker)
        app.pop_screen()  # in the same tick: before the picker's compose ran
        for _ in range(4):
            await pilot.pause()
        assert app.screen is not picker and app.is_running
    assert app.return_code in (None, 0)
