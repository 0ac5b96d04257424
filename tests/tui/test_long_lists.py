"""A long selection is drawn a page at a time, so a key never waits for thousands of rows.

Textual's OptionList measures every option as it is added; a Timeline year of 20 000 rows
kept the app from answering keys for 15-37 s (benchmarks/run.py ``app_key_latency``). These
tests count what is drawn, never time it.
"""

from __future__ import annotations

import pytest
from tui_helpers import make_app, write_minimal_state

from memory_tui.tui.screens.timeline import TimelineRowOption
from memory_tui.tui.widgets import RecordList
from memory_tui.tui.widgets.paged import PagedOptionList
from memory_tui.tui.widgets.records import RecordOption

pytestmark = pytest.mark.anyio

N = 450  # records in one topic, all dated in one month: one Timeline selection


def _long_topic() -> str:
    lines = ["# Long", ""]
    notes = []
    for i in range(N):
        lines += [f"Fact number {i} about the long topic.[^e-{i}] ^{i:08x}", ""]
        notes.append(f"[^e-{i}]: Time: `2026-11-{1 + i % 28:02d}`; Sources: [x](../sources/x.md#source-{i:016x})")
    return "\n".join(lines + notes) + "\n"


@pytest.fixture
def long_state(tmp_path):
    return write_minimal_state(tmp_path, {"topics/long.md": _long_topic()})


def _records_drawn(lst) -> int:
    return sum(isinstance(lst.get_option_at_index(i), (RecordOption, TimelineRowOption)) for i in range(lst.option_count))


async def test_a_long_topic_draws_a_page_then_more_as_the_highlight_comes_near_its_end(long_state):
    app = make_app(long_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("enter")  # open the topic, focus its records
        records = app.screen.query_one("#topic-records", RecordList)
        assert len(records.items) == N
        assert _records_drawn(records) == PagedOptionList.PAGE
        assert records.undrawn == N - PagedOptionList.PAGE
        # walk down to the last drawn record: the next page is drawn before it is reached
        last = max(i for i in range(records.option_count) if isinstance(records.get_option_at_index(i), RecordOption))
        records.highlighted = last
        await pilot.pause()
        assert _records_drawn(records) == 2 * PagedOptionList.PAGE
        # what is drawn reads as one list: every record once, in file order
        drawn = [records.get_option_at_index(i).record.memory_id for i in range(records.option_count)
                 if isinstance(records.get_option_at_index(i), RecordOption)]
        assert drawn == [f"{i:08x}" for i in range(2 * PagedOptionList.PAGE)]


async def test_a_jump_to_a_record_beyond_the_drawn_page_draws_up_to_it(long_state):
    app = make_app(long_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("enter")
        records = app.screen.query_one("#topic-records", RecordList)
        target = app.model.records[f"{N - 3:08x}"]
        assert records.select_record(target)
        assert records.selected_record.memory_id == target.memory_id
        assert records.undrawn < PagedOptionList.PAGE  # drawn up to its page, not beyond


async def test_a_timeline_month_of_many_rows_draws_one_page_and_keeps_its_date_headers(long_state):
    app = make_app(long_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        rows = app.screen.query_one("#timeline-rows", PagedOptionList)
        assert len(rows.items) == N  # the year holds every row ...
        assert _records_drawn(rows) == PagedOptionList.PAGE  # ... and one page is drawn
        headers = [str(rows.get_option_at_index(i).prompt) for i in range(rows.option_count)
                   if rows.get_option_at_index(i).disabled]
        days = sorted({r.when for r in rows.items[: PagedOptionList.PAGE]})
        assert headers == days  # one header per date, none repeated across a page's edge
        rows.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert _records_drawn(rows) == 2 * PagedOptionList.PAGE
        headers = [str(rows.get_option_at_index(i).prompt) for i in range(rows.option_count)
                   if rows.get_option_at_index(i).disabled]
        assert len(headers) == len(set(headers)) == len({r.when for r in rows.items[: 2 * PagedOptionList.PAGE]})


def _session_row(i: int):
    from memory_tui.tui.model.sessions import SessionRowVM

    return SessionRowVM(f"local_{i:010d}", f"Session {i}", None, "", None, 1, 1, i, 10 * i, 8000, None, "never", 0, 0, True, ())


async def test_hundreds_of_sessions_draw_a_page_and_a_jump_draws_down_to_its_row():
    from textual.app import App

    from memory_tui.tui.screens.sessions import SessionList

    class One(App):
        def compose(self):
            yield SessionList(id="sessions-list")

    app = One()
    rows = [_session_row(i) for i in range(450)]
    async with app.run_test(size=(60, 30)) as pilot:
        lst = app.query_one(SessionList)
        lst.show_rows(rows, "-", "!")
        await pilot.pause()
        assert lst.option_count == PagedOptionList.PAGE and len(lst.items) == 450
        lst.draw_session(rows[301].session_id)
        assert lst.get_option_index(f"session:{rows[301].session_id}") == 301
        assert lst.option_count == 4 * PagedOptionList.PAGE  # drawn to the end of that row's page, no further
        assert [lst.get_option_at_index(i).session.session_id for i in range(lst.option_count)] == [
            r.session_id for r in rows[: lst.option_count]]


async def test_a_redraw_keeps_the_timeline_row_being_read_beyond_the_first_page(long_state):
    app = make_app(long_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        screen = app.screen
        rows = screen.query_one("#timeline-rows", PagedOptionList)
        wanted = rows.items[3 * PagedOptionList.PAGE // 2].memory_id
        assert rows.draw_until(lambda r: r.memory_id == wanted)
        rows.highlighted = next(i for i in range(rows.option_count)
                                if isinstance(rows.get_option_at_index(i), TimelineRowOption)
                                and rows.get_option_at_index(i).row.memory_id == wanted)
        await pilot.pause()
        screen.show_rows()  # what a reload or a new filter does
        await pilot.pause()
        assert screen.selected_row().memory_id == wanted
