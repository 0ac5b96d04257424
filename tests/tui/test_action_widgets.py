"""The action widgets and dialogs, each driven alone in a tiny host app (Pilot + snapshots)."""

from __future__ import annotations

import pytest
from action_harness import THREE, TOPIC_TEXT, DialogHarness, EditorHarness, sample_choices, sample_preview, sample_summary, until
from textual.widgets import Button, Input, Label, OptionList, Static

from memory_tui.core.store.lockprobe import LockHolder, LockProbe
from memory_tui.core.tx.recordops import CORE_DELETE_REASON, LinkRef, TopicDeleteCheck
from memory_tui.tui.dialogs.confirm_job import ConfirmJobDialog, JobConfirmation, preview_renderable
from memory_tui.tui.dialogs.conflict import KEEP_MINE, TAKE_THEIRS, ConflictDialog, ConflictResolution
from memory_tui.tui.dialogs.delete_topic import DeleteTopicDialog, TopicDeleteDecision
from memory_tui.tui.dialogs.job_result import JobResultChoice, JobResultDialog, summary_renderable
from memory_tui.tui.dialogs.move_picker import MovePicker, MoveTarget, parse_chain
from memory_tui.tui.dialogs.unsaved import UnsavedChoice, UnsavedDialog
from memory_tui.tui.model.editor import Diagnostic
from memory_tui.tui.widgets.diagnostics_list import DiagnosticsList
from memory_tui.tui.widgets.diff_view import DiffView
from memory_tui.tui.widgets.topic_editor import MARK, TopicEditor

pytestmark = pytest.mark.anyio
SIZE = (120, 40)


def _plain(renderable, width: int = 110) -> str:
    import io

    from rich.console import Console

    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def _strip_text(editor, row: int) -> str:
    """The first screen line of document ``row`` (soft wrap may give a row several)."""
    y = editor.wrapped_document.location_to_offset((row, 0)).y - editor.scroll_offset.y
    return editor.render_line(y).text


# ------------------------------------------------------------------------ editor


async def test_the_editor_highlights_markdown():
    # The grammar ships as a dependency: a heading is drawn unlike plain prose.
    app = EditorHarness(diagnostics=())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        editor = app.query_one(TopicEditor)
        assert editor.language == "markdown"

        def styles(y: int) -> set:
            return {seg.style for seg in list(editor.render_line(y))[1:] if seg.text.strip()} - {None}

        heading, prose = styles(0), styles(6)  # "# Ada" / "Ada likes long walks ..."
        assert heading and prose and heading != prose, (heading, prose)


async def test_editor_shows_all_three_diagnostics_on_their_lines():
    app = EditorHarness()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        editor = app.query_one(TopicEditor)
        # a gutter mark on exactly the three lines (line numbers 3, 7, 9)
        marked = [y + 1 for y in range(editor.document.line_count) if MARK in _strip_text(editor, y)[: editor.gutter_width]]
        assert marked == [3, 7, 9]
        for d in THREE:
            assert editor.diagnostics_on_line(d.line) == (d,)
            # the line's text from the column on is styled as an error
            spans = editor.get_line(d.line - 1).spans
            assert any(s.start == (d.column - 1) for s in spans), (d, spans)
        assert editor.get_line(1).spans == []
        listing = app.query_one(DiagnosticsList)
        texts = [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]
        assert len(texts) == 3
        for d, text in zip(THREE, texts):
            assert d.where in text and d.code in text and d.message in text
        # the cursor's line shows its message
        editor.goto_diagnostic(THREE[1])
        await pilot.pause()
        assert editor.cursor_location == (6, 0)
        assert THREE[1].message in str(editor.border_subtitle)


async def test_f8_and_brackets_move_between_errors():
    app = EditorHarness()
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(TopicEditor)
        editor.move_cursor((0, 0))
        await pilot.press("f8")
        assert editor.cursor_location == (2, 20)
        await pilot.press("f8")
        assert editor.cursor_location == (6, 0)
        await pilot.press("shift+f8")
        assert editor.cursor_location == (2, 20)
        await pilot.press("shift+f8")  # wraps to the last
        assert editor.cursor_location == (8, 18)
        # in the list, ] and [ walk the errors and the editor follows
        listing = app.query_one(DiagnosticsList)
        listing.focus()
        listing.highlighted = 0
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert listing.highlighted == 1 and editor.cursor_location == (6, 0)
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert editor.cursor_location == (8, 18)
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert editor.cursor_location == (6, 0)
        # enter on an entry jumps too
        listing.highlighted = 0
        await pilot.press("enter")
        await pilot.pause()
        assert editor.cursor_location == (2, 20)


async def test_control_characters_from_disk_are_shown_not_sent_and_the_buffer_stays_exact():
    hostile = "a\x1b[31mred\x07\u202eb\tc"
    app = EditorHarness(text=hostile, diagnostics=(Diagnostic(1, 2, "X", "\x1b]0;pwned\x07msg"),))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        editor = app.query_one(TopicEditor)
        assert editor.text == hostile  # saved as read
        shown = editor.get_line(0).plain
        assert shown == "a\u241b[31mred\u2407\ufffdb\tc" and len(shown) == len(hostile)
        drawn = _strip_text(editor, 0)
        assert "\x1b" not in drawn and "\x07" not in drawn and "\u202e" not in drawn
        editor.move_cursor((0, 0))
        await pilot.pause()
        assert "\x1b" not in str(editor.border_subtitle) and "msg" in str(editor.border_subtitle)


async def test_ascii_mark():
    app = EditorHarness()
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(TopicEditor)
        editor.ascii = True
        editor.refresh()
        await pilot.pause()
        assert "!" in _strip_text(editor, 2)[: editor.gutter_width] and MARK not in _strip_text(editor, 2)


async def test_typing_brackets_in_the_editor_inserts_them():
    app = EditorHarness(text="x", diagnostics=())
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(TopicEditor)
        editor.move_cursor((0, 1))
        await pilot.press("left_square_bracket", "circumflex_accent", "e", "1", "right_square_bracket")
        assert editor.text == "x[^e1]"


async def test_ctrl_s_asks_to_save_and_dirty_tracks_the_base():
    app = EditorHarness(text="# A\n", diagnostics=())
    saves = app.saves
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(TopicEditor)
        assert not editor.is_dirty
        editor.move_cursor((0, 3))
        await pilot.press("b")
        assert editor.is_dirty
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert [(m.text, m.seq) for m in saves] == [("# Ab\n", editor.seq)]
        editor.mark_saved(revision="r1")
        assert not editor.is_dirty and editor.base_revision == "r1"


async def test_stale_validation_results_are_dropped():
    app = EditorHarness(diagnostics=())
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(TopicEditor)
        old = editor.seq
        editor.move_cursor((0, 5))
        await pilot.press("x")
        assert editor.seq == old + 1
        stale = (Diagnostic(1, 1, "INVALID_TOPIC_FORMAT", "stale"),)
        assert editor.apply_validation(old, stale) is False
        assert editor.diagnostics == ()
        fresh = (Diagnostic(7, 1, "INVALID_TOPIC_FORMAT", "fresh"),)
        assert editor.apply_validation(editor.seq, fresh) is True
        await pilot.pause()
        assert editor.diagnostics == fresh
        assert [d.message for d in app.query_one(DiagnosticsList).diagnostics] == ["fresh"]


async def test_debounced_validation_request_carries_the_latest_text_and_seq():
    app = EditorHarness(diagnostics=(), debounce=0.05)
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(TopicEditor)
        editor.move_cursor((0, 5))
        await pilot.press("a", "b", "c")
        await until(pilot, lambda: app.requests and app.requests[-1].seq == editor.seq)
        last = app.requests[-1]
        assert last.seq == editor.seq and last.text == editor.text and "# Adaabc" in last.text
        # a load (take theirs) is a new version too
        before = editor.seq
        editor.load_text("# New\n")
        assert editor.seq == before + 1
        await pilot.pause()
        assert editor.seq == before + 1  # the Changed that load_text posts is the same text


async def test_editor_validates_through_the_core_and_shows_its_error_on_the_line(fixture_state):
    path = "topics/people/ada.md"
    committed = (fixture_state / "memory" / path).read_text()
    app = EditorHarness(committed, diagnostics=(), debounce=0.05, state_dir=fixture_state, path=path)
    async with app.run_test(size=SIZE) as pilot:
        editor = app.query_one(TopicEditor)
        editor.move_cursor((editor.document.line_count - 1, 0))
        for ch in "Uncited words.":
            await pilot.press("space" if ch == " " else ("full_stop" if ch == "." else ch))
        editor.request_validation()
        await until(pilot, lambda: editor.seq in app.applied)
        assert editor.text.endswith("Uncited words.")
        codes = [(d.line, d.code) for d in editor.diagnostics]
        assert (editor.document.line_count, "INVALID_TOPIC_FORMAT") in codes, codes
        assert MARK in _strip_text(editor, editor.document.line_count - 1)
        assert [d.code for d in app.query_one(DiagnosticsList).diagnostics] == [d.code for d in editor.diagnostics]
        # fixed: the next answer clears it
        editor.load_text(committed)
        editor.request_validation()
        await until(pilot, lambda: editor.seq in app.applied)
        assert editor.diagnostics == ()
    assert (fixture_state / "memory" / path).read_text() == committed  # validation installs nothing


# ------------------------------------------------------------------------ diff


def test_diff_rows_unified_and_side():
    from memory_tui.tui.widgets.diff_view import side_rows, unified_rows

    old, new = "a\nb\nc\n", "a\nB\nc\nd\n"
    rows = unified_rows(old, new)
    assert [(r.kind, r.text) for r in rows if r.kind in "+-"] == [("-", "b"), ("+", "B"), ("+", "d")]
    assert rows[2].text == "@@ -1,3 +1,4 @@"
    side = side_rows(old, new)
    assert [(r.kind, r.old_text, r.new_text) for r in side] == [
        ("equal", "a", "a"), ("replace", "b", "B"), ("equal", "c", "c"), ("insert", "", "d")]
    assert unified_rows("same", "same") == []


# ------------------------------------------------------------------------ dialogs


async def test_confirm_job_returns_run_or_cancel_and_shows_the_preview():
    preview = sample_preview()
    app = DialogHarness(lambda: ConfirmJobDialog(preview))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#preview", Static)
        text = _plain(preview_renderable(preview))
        for part in ("extractive", "10", "95 tokens", "memory/core.md", "a2_reply"):
            assert part in text, part
        await pilot.click("#run")
        await pilot.pause()
    assert app.results == [JobConfirmation(True, "write", preview)]
    app = DialogHarness(lambda: ConfirmJobDialog(sample_preview(count=0, batches=(), files=())))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#run", Button).disabled
        await pilot.press("y")  # nothing to do: y does not run
        await pilot.press("escape")
        await pilot.pause()
    assert [r.run for r in app.results] == [False]


async def test_confirm_job_warns_about_a_held_lock():
    lock = LockProbe(path=None, held=True, holder=LockHolder(4242, "OpenProgram"))  # type: ignore[arg-type]
    app = DialogHarness(lambda: ConfirmJobDialog(sample_preview(), lock=lock))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "OpenProgram (pid 4242)" in str(app.screen.query_one("#lock-warning").render())


async def test_job_result_offers_retry_only_when_retryable():
    app = DialogHarness(lambda: JobResultDialog(sample_summary("CONCURRENT_UPDATE")))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#summary", Static)
        text = _plain(summary_renderable(app.screen.summary))
        assert "CONCURRENT_UPDATE" in text and "write lock" in text and "yes" in text and "0525eb9d8a82" in text
        await pilot.click("#retry")
        await pilot.pause()
    assert app.results == [JobResultChoice(True)]
    app = DialogHarness(lambda: JobResultDialog(sample_summary("INVALID_TOPIC_FORMAT")))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not app.screen.query("#retry")
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [JobResultChoice(False)]


async def test_job_result_title_marks_an_incomplete_run_apart_from_a_done_one():
    for code, mark in (("incomplete", "!"), ("ok", "✓")):
        app = DialogHarness(lambda: JobResultDialog(sample_summary(code, job="backfill", title="backfill")))
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            title = str(app.screen.query_one(".dialog-title", Label).render())
            assert title.startswith(f"{mark} backfill"), (code, title)


@pytest.mark.parametrize("key, expected", [
    ("m", ConflictResolution(KEEP_MINE, "mine\n")),
    ("t", ConflictResolution(TAKE_THEIRS, "theirs\n")),
    ("escape", None),
])
async def test_conflict_choices_return_what_they_say(key, expected):
    app = DialogHarness(lambda: ConflictDialog("topics/people/ada.md", "mine\n", "theirs\n"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(key)
        await pilot.pause()
    assert app.results == [expected]


async def test_conflict_see_diff_shows_the_diff_and_keeps_the_dialog_open():
    app = DialogHarness(lambda: ConflictDialog("topics/people/ada.md", "a\nmine\n", "a\ntheirs\n"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        dialog = app.screen
        assert not dialog.diff_shown
        await pilot.click("#diff-toggle")
        await pilot.pause()
        assert dialog.diff_shown and app.screen is dialog and app.results == []
        view = dialog.query_one(DiffView)
        assert (view.old, view.new) == ("a\ntheirs\n", "a\nmine\n")
        assert view.query_one("#diff-body").size.height >= 5  # headers, hunk, context, -theirs, +mine
        await pilot.click("#theirs")
        await pilot.pause()
    assert app.results == [ConflictResolution(TAKE_THEIRS, "a\ntheirs\n")]


@pytest.mark.parametrize("button", ["save", "discard", "cancel"])
async def test_unsaved_asks(button):
    app = DialogHarness(lambda: UnsavedDialog("topics/people/ada.md"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.click(f"#{button}")
        await pilot.pause()
    assert app.results == [UnsavedChoice(button)]


@pytest.mark.parametrize(("key", "choice"), [("s", "save"), ("d", "discard"), ("escape", "cancel")])
async def test_unsaved_answers_from_the_keyboard(key, choice):
    app = DialogHarness(lambda: UnsavedDialog("topics/people/ada.md"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press(key)
        await pilot.pause()
    assert app.results == [UnsavedChoice(choice)]


async def test_move_picker_returns_the_chosen_target():
    app = DialogHarness(lambda: MovePicker(sample_choices(), "845c11f8", topic="topics/core.md", headings=("Core",)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        picker = app.screen
        assert picker.topic_choice.path == "topics/core.md"
        await pilot.press("down")  # topics list: ada.md
        await pilot.pause()
        assert picker.topic_choice.path == "topics/people/ada.md"
        picker.query_one("#sections", OptionList).highlighted = 0
        await pilot.pause()
        await pilot.click("#pos-after")
        picker.query_one("#anchors", OptionList).highlighted = 1
        await pilot.pause()
        await pilot.click("#move")
        await pilot.pause()
    assert app.results == [MoveTarget("topics/people/ada.md", ("Ada",), "after", "c2a2c020")]


async def test_move_picker_new_heading_chain_and_missing_anchor():
    app = DialogHarness(lambda: MovePicker(sample_choices(), "fc30e0e0", topic="topics/people/ada.md", headings=("Ada",)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        picker = app.screen
        anchors = picker.query_one("#anchors", OptionList)
        assert [anchors.get_option_at_index(i).memory_id for i in range(anchors.option_count)] == ["c2a2c020"]  # not itself
        picker.query_one("#new-headings", Input).value = "Ada › Travel"
        await pilot.pause()
        await pilot.click("#pos-before")
        await pilot.click("#move")
        await pilot.pause()
        assert app.results == [] and "needs an anchor" in str(picker.query_one("#error").render())
        await pilot.click("#pos-start")
        await pilot.click("#move")
        await pilot.pause()
    assert app.results == [MoveTarget("topics/people/ada.md", ("Ada", "Travel"), "start", None)]
    assert parse_chain(" A / B > C ") == ("A", "B", "C")


async def test_delete_topic_lists_dangling_links_and_refuses_core():
    link = LinkRef("fc30e0e0", "topics/people/ada.md", 3, "Ada is behind the Kyoto plan.")
    check = TopicDeleteCheck("topics/projects/kyoto-trip.md", True, "", 4, (link,))
    app = DialogHarness(lambda: DeleteTopicDialog(check))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = str(app.screen.query_one("#links", Static).render())
        assert "fc30e0e0" in text and "topics/people/ada.md:3" in text
        await pilot.click("#delete")
        await pilot.pause()
    assert app.results == [TopicDeleteDecision(True, "topics/projects/kyoto-trip.md")]
    core = TopicDeleteCheck("topics/core.md", False, CORE_DELETE_REASON, 22, ())
    app = DialogHarness(lambda: DeleteTopicDialog(core))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not app.screen.query("#delete")
        assert "cannot be deleted" in str(app.screen.query_one("#reason").render())
        await pilot.click("#cancel")
        await pilot.pause()
    assert app.results == [TopicDeleteDecision(False, "topics/core.md")]


async def test_job_history_lists_this_run_then_the_persisted_entries(fixture_state_ro):
    from textual.app import App

    from memory_tui.pipeline.history import read_job_history
    from memory_tui.tui.widgets.job_history import JobHistoryList

    history = read_job_history(fixture_state_ro / "memory")
    picked = []

    class Host(App):
        def compose(self):
            yield JobHistoryList([sample_summary("CONCURRENT_UPDATE")], history)

        def on_job_history_list_selected(self, event):
            picked.append(event.item)

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        listing = app.query_one(JobHistoryList)
        assert listing.option_count == 1 + len(history.entries)
        first = str(listing.get_option_at_index(0).prompt)
        assert "this run" in first and "CONCURRENT_UPDATE (retryable)" in first
        assert "last success" in str(listing.get_option_at_index(1).prompt)
        listing.focus()
        listing.highlighted = 0
        await pilot.press("enter")
        await pilot.pause()
        listing.highlighted = 2
        await pilot.press("enter")
        await pilot.pause()
    assert picked[0].outcome.code == "CONCURRENT_UPDATE" and picked[1] is history.entries[1]


# ------------------------------------------------------------------------ snapshots


def _settle():
    async def run_before(pilot):
        await pilot.pause()
        await pilot.pause()

    return run_before


def test_snapshot_editor_with_inline_errors(snap_compare):
    async def run_before(pilot):
        await pilot.pause()
        pilot.app.query_one(TopicEditor).goto_diagnostic(THREE[1])
        await pilot.pause()

    assert snap_compare(EditorHarness(TOPIC_TEXT), terminal_size=SIZE, run_before=run_before)


def test_snapshot_confirm_job_preview(snap_compare):
    assert snap_compare(DialogHarness(lambda: ConfirmJobDialog(sample_preview())), terminal_size=SIZE, run_before=_settle())


def test_snapshot_job_result(snap_compare):
    assert snap_compare(DialogHarness(lambda: JobResultDialog(sample_summary("CONCURRENT_UPDATE"))), terminal_size=SIZE,
                        run_before=_settle())


def test_snapshot_conflict_dialog_with_diff(snap_compare):
    async def run_before(pilot):
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()

    mine = TOPIC_TEXT.replace("Ada drinks tea.", "Ada drinks green tea.")
    theirs = TOPIC_TEXT + "\nAda moved to Osaka.[^e2]\n"
    assert snap_compare(DialogHarness(lambda: ConflictDialog("topics/people/ada.md", mine, theirs)), terminal_size=SIZE,
                        run_before=run_before)


def test_snapshot_move_picker(snap_compare):
    assert snap_compare(DialogHarness(lambda: MovePicker(sample_choices(), "845c11f8", topic="topics/people/ada.md",
                                                         headings=("Ada",))), terminal_size=SIZE, run_before=_settle())
