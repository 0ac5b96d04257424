"""What a new user met trying the app at 120x40, 80x24 and 40x12 (the demo, every view, a
dialog, the editor): each test drives the app or one dialog and reads what is drawn."""

from __future__ import annotations

from functools import partial

import pytest
from action_harness import DialogHarness, sample_preview, sample_summary
from action_harness import until as until_held
from tui_helpers import screen_text

from memory_tui.tui.dialogs.confirm_job import ConfirmJobDialog
from memory_tui.tui.dialogs.job_result import JobResultDialog

pytestmark = pytest.mark.anyio
until = partial(until_held, tries=2000)


# ---------------------------------------------------------------------- dialogs on a short screen
@pytest.mark.parametrize("size", [(40, 12), (80, 24), (120, 40)])
@pytest.mark.parametrize(("make", "labels"), [
    (lambda: ConfirmJobDialog(sample_preview()), ("Cancel", "Run")),
    (lambda: JobResultDialog(sample_summary()), ("Retry", "Close")),
], ids=["confirm-job", "job-result"])
async def test_a_dialog_keeps_its_buttons_on_screen_when_its_text_does_not_fit(make, labels, size):
    """At 80x24 a write preview of two batches and five files pushed Cancel and Run below the
    screen's last row (at 40x12 any preview did): the owner saw a question and no way to
    answer it. The buttons stay at the dialog's foot; the text
    above them is what gives way."""
    app = DialogHarness(make)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: len(app.screen_stack) > 1 and bool(app.screen.query("Button")))
        await pilot.pause()
        screen = app.screen
        buttons = list(screen.query("Button"))
        assert [str(b.label) for b in buttons] == list(labels)
        for b in buttons:
            r = b.region
            assert r.height == 3 and 0 <= r.y and r.y + r.height <= size[1] and r.x + r.width <= size[0], (b.label, r)
        drawn = screen_text(app)
        assert all(label in drawn for label in labels), drawn
        title = screen.query_one(".dialog-title")
        assert title.region.y >= 0 and title.region.height > 0  # the question itself still shows


# ---------------------------------------------------------------------- history: one version
async def test_the_history_of_a_topic_with_one_commit_says_1_version_and_offers_no_revert(tmp_path):
    """Every demo topic has one commit: the line read "1 versions · v revert to the highlighted
    one", an English slip and a revert to the text as it already is."""
    from tui_helpers import FROZEN, make_app

    from memory_tui.demo import build_demo
    from memory_tui.tui.screens.history import HistoryScreen

    state = build_demo(tmp_path / ".openprogram", clock=lambda: FROZEN)
    app = make_app(state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.view_screens["topics"].focus_list()
        await pilot.press("h")
        await until(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.history is not None
                    and bool(app.screen.query("#history-commits")))
        await pilot.pause()
        screen = app.screen
        assert len(screen.history.versions) == 1
        line = str(screen.query_one("#history-outcome").render())
        assert line.endswith(": 1 version, the current one"), line
        assert "versions" not in line and "revert" not in line, line


# ---------------------------------------------------------------------- the editor's title line
@pytest.mark.parametrize("size", [(120, 40), (80, 24), (40, 12)])
async def test_the_editor_title_is_never_cut_mid_word(tmp_path, size):
    """At 80 columns the demo's title read "Edit topics/conversations/kyoto-trip-in-spring.md
    (ctrl+s save · f8/shift+f8 e": the hint goes first when it does not fit (the footer has
    the same keys), then the path's start (its name is at the end)."""
    from tui_helpers import FROZEN, make_app

    from memory_tui.demo import build_demo
    from memory_tui.tui.screens.editor import EditorScreen

    state = build_demo(tmp_path / ".openprogram", clock=lambda: FROZEN)
    app = make_app(state)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        path = app.model.topics[0].path
        assert len(path) > 40  # a folder and a long name: the case at hand
        app.view_screens["topics"].reveal_topic(path)
        await pilot.pause()
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, EditorScreen) and bool(app.screen.query("#editor-title")))
        await pilot.pause()
        drawn = screen_text(app).splitlines()[0].strip()
        hint = "(ctrl+s save · f8/shift+f8 errors · esc back)"
        expected = {120: f"Edit {path}  {hint}", 80: f"Edit {path}", 40: "Edit …" + path[-32:]}[size[0]]
        assert drawn == expected, drawn
        assert len(drawn) <= size[0] - 2


# ---------------------------------------------------------------------- the header on a narrow screen
def test_the_header_drops_whole_parts_never_cuts_one_mid_word(tmp_path):
    """At 40 columns the demo's header read "… │ ✓ 1d ag…". Whatever the width, each part after
    the state dir is one the header has at some width, whole."""
    from tui_helpers import FROZEN

    from memory_tui.demo import build_demo
    from memory_tui.tui.model.load import load_model
    from memory_tui.tui.render import UNICODE
    from memory_tui.tui.widgets.header import _header_line, header_text

    state = build_demo(tmp_path / "demo-polish", clock=lambda: FROZEN)
    model = load_model(state)

    def parts(width: int) -> list[str]:
        line = header_text(model, width, FROZEN, UNICODE, problems=0).plain
        assert len(line) <= width, (width, line)
        return line.split(" │ ")

    whole = {p for narrow in (False, True) for p in _header_line(
        model, FROZEN, UNICODE, 0, "", "", None, narrow=narrow, short_insights=narrow, ids=2).plain.split(" │ ")[1:]}
    assert any(p.endswith(" ago") for p in whole)  # the writer's health, the part that was cut
    for width in range(20, 121):
        assert all(p in whole for p in parts(width)[1:]), (width, parts(width))


async def test_a_job_preview_taller_than_the_screen_scrolls_inside_the_dialog():
    """80x24, a preview of twelve files: the dialog showed the first four and the rest were out
    of reach (clipped, no scrollbar). The preview pane scrolls to its last file now."""
    files = tuple(f"memory/topics/t{i}.md" for i in range(12))
    app = DialogHarness(lambda: ConfirmJobDialog(sample_preview(files=files)))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: len(app.screen_stack) > 1 and bool(app.screen.query(".dialog-body")))
        await pilot.pause()
        await pilot.pause()
        body = app.screen.query_one(".dialog-body")
        assert "memory/topics/t11.md" not in screen_text(app)
        assert body.max_scroll_y > 0, (body.region, body.virtual_size)
        body.scroll_end(animate=False)
        await pilot.pause()
        await pilot.pause()
        drawn = screen_text(app)
        assert "memory/topics/t11.md" in drawn and "Run" in drawn, drawn
