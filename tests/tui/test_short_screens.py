"""What a demanding user saw wrong at 120x40, 80x24 and 40x12: dialogs whose text ran below
the screen with no way to reach it, a raw epoch in the Sessions verdict, the Recent badge
lost behind a long topic name, the Topics path cut mid-word."""

from __future__ import annotations

from functools import partial

import pytest
from action_harness import DialogHarness, sample_summary
from action_harness import until as until_held
from tui_helpers import screen_text

from memory_tui.tui.dialogs.conflict import ConflictDialog
from memory_tui.tui.dialogs.delete_topic import DeleteTopicDialog
from memory_tui.tui.dialogs.job_result import JobResultDialog
from memory_tui.tui.dialogs.record_change import ConfirmRecordDelete, RecordOutcomeDialog, RecordTextDialog
from memory_tui.tui.model.records import ActionOutcome, LinkLine

pytestmark = pytest.mark.anyio
until = partial(until_held, tries=2000)

LAST = "zz-last"


def _many_files() -> tuple[str, ...]:
    return tuple(f"topics/t{i}.md" for i in range(15))


def _links() -> tuple[LinkLine, ...]:
    return tuple(LinkLine(f"{i:08x}", "topics/other.md", i, f"link {i}") for i in range(14)) + (
        LinkLine("ffffffff", "topics/other.md", 99, LAST),)


def _outcome() -> ActionOutcome:
    """A delete refused because fifteen records link to it (the list ends the dialog)."""
    return ActionOutcome("delete", "ab12cd34", False, code="INVALID_TOPIC_FORMAT",
                         meaning="the change would leave the workspace invalid; nothing was changed",
                         linked_by=_links())


def _conflict() -> ConflictDialog:
    theirs = "".join(f"line {i}\n" for i in range(40))
    mine = theirs.replace("line 1\n", "line one\n") + f"{LAST}\n"
    return ConflictDialog("topics/people/ada.md", mine, theirs)


class _Check:
    """A topic delete check with many dangling links (the delete dialog's body)."""

    def __init__(self) -> None:
        self.allowed = True
        self.path = "topics/people/ada.md"
        self.records = 3
        self.reason = ""
        self.dangling = _links()


DIALOGS = {
    "job-result": (lambda: JobResultDialog(sample_summary(changed_files=_many_files(), warnings=(LAST,))), None),
    "record-outcome": (lambda: RecordOutcomeDialog(_outcome()), None),
    "record-delete": (lambda: ConfirmRecordDelete("ab12cd34", " ".join(["word"] * 300)), None, "it."),  # the note that ends it
    "topic-delete": (lambda: DeleteTopicDialog(_Check()), None),
    "conflict-diff": (_conflict, "d"),
    "record-text": (lambda: RecordTextDialog("ab12cd34", "".join(f"line {i}\n" for i in range(30)) + LAST,
                                             save=lambda *_: None, base_revision=None, fresh_revision=lambda: None), None),
}


def _body(screen):
    """The dialog's scrolling text: the diff, the text being edited, or the body pane."""
    from textual.widgets import TextArea

    from memory_tui.tui.widgets.diff_view import DiffView

    for kind in (DiffView, TextArea, ".dialog-body"):
        found = list(screen.query(kind))
        if found:
            return found[0]
    raise AssertionError("no scrolling pane in the dialog")


@pytest.mark.parametrize("size", [(40, 12), (80, 24)])
@pytest.mark.parametrize("name", list(DIALOGS))
async def test_a_dialog_body_scrolls_to_its_last_line_above_buttons_that_stay_on_screen(name, size):
    """The job-result, record-change and conflict dialogs kept their buttons docked but drew
    their text past the box's foot: at 80x24 a result listing fifteen files showed some of
    them and the rest were clipped with no scrollbar; at 40x12 nearly all. The text pane gets
    the room the screen leaves and scrolls; its last line is reachable and the buttons stay."""
    make, key, *end = DIALOGS[name]
    last = end[0] if end else LAST
    app = DialogHarness(make)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: len(app.screen_stack) > 1 and bool(app.screen.query("Button")))
        if key:
            await pilot.press(key)
        await pilot.pause()
        await pilot.pause()
        screen = app.screen
        body = _body(screen)
        buttons = list(screen.query("Button"))
        top = min(b.region.y for b in buttons)
        for b in buttons:
            r = b.region
            assert r.height == 3 and r.y + r.height <= size[1] and r.x + r.width <= size[0], (b.label, r)
        box = screen.query_one("Vertical")
        # the pane ends above the buttons and inside the dialog's border: nothing it holds is
        # drawn under them or cut off by the box
        assert body.region.height >= 1 and body.region.bottom <= top, (body.region, top)
        assert body.region.bottom <= box.region.bottom - 1, (body.region, box.region)
        assert body.max_scroll_y > 0, (body.region, body.virtual_size)
        assert last not in screen_text(app)
        body.scroll_end(animate=False)
        await pilot.pause()
        await pilot.pause()
        drawn = screen_text(app)
        assert last in drawn, drawn
        assert all(str(b.label) in drawn for b in buttons), drawn


# ---------------------------------------------------------------------- Sessions: a date, not an epoch
EPOCH = "1796162387.922104"  # meta.json updated_at as OpenProgram writes it


@pytest.fixture
def tokyo(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _reasons():
    from memory_tui.tui.model.sessions import EvidenceVM, ReasonVM

    return (
        ReasonVM("awaiting_idle_pass", "the idle watcher will write this at its next poll (every 300 s)",
                 (EvidenceVM("sessions/local_d3a0000001/meta.json", "updated_at", EPOCH),)),
        ReasonVM("below_threshold_per_turn", "25 pending tokens < 8000",
                 (EvidenceVM("config.json", "memory.writer.trigger_tokens", "8000"),)),
    )


def _verdict_vm():
    from memory_tui.tui.model.sessions import BranchVerdictVM

    return BranchVerdictVM("local_d3a0000001", "0ca1d20d86b1_reply", True, True, False, "partly written", 14, 12,
                           ("0ca1d20d86b1",), (), (), (), 25, 8000, _reasons())


async def test_the_verdict_shows_updated_at_as_a_local_date_and_keeps_the_exact_value_in_its_tooltip(tokyo):
    """The verdict read "sessions/…/meta.json updated_at = 1796162387.922104": a number no one
    reads as a time. It shows the owner's local date and time now (2026-12-01 21:59:47 UTC is
    06:59:47 the next day in Tokyo); the exact value, which the idle watcher compares to the
    digit, is in the panel's tooltip; a number that is not a time (the threshold) stays."""
    from textual.app import App

    from memory_tui.tui.widgets.branch_verdict import BranchVerdict
    from memory_tui.tui.widgets.node_detail import NodeDetail

    class Host(App):
        def compose(self):
            yield BranchVerdict(id="verdict")
            yield NodeDetail(id="detail")

    app = Host()
    async with app.run_test(size=(120, 30)) as pilot:
        panel = app.query_one(BranchVerdict)
        panel.show(_verdict_vm())
        await pilot.pause()
        assert "meta.json updated_at = 2026-12-02 06:59:47 JST" in panel.plain, panel.plain
        assert EPOCH not in panel.plain and "trigger_tokens = 8000" in panel.plain
        assert EPOCH in str(panel.tooltip) and "8000" not in str(panel.tooltip)
        assert "2026-12-02 06:59:47 JST" in screen_text(app)

        from memory_tui.tui.model.sessions import NodeDetailVM

        detail = app.query_one(NodeDetail)
        detail.show(NodeDetailVM("local_d3a0000001", "0ca1d20d86b1", "user", "user", "2026-12-01 21:59:40 UTC", "hi",
                                 "hi", "sessions/local_d3a0000001/history/0011-u-0ca1d20d86b1.json", "pending",
                                 "pending", "0ca1d20d86b1_reply", _reasons()))
        await pilot.pause()
        body = app.query_one("#node-detail-body")
        assert "updated_at = 2026-12-02 06:59:47 JST" in str(body.render()) and EPOCH not in str(body.render())
        assert EPOCH in str(body.tooltip)


# ---------------------------------------------------------------------- Recent: the badge stays
async def _demo_app(tmp_path, **kw):
    from tui_helpers import FROZEN, make_app

    from memory_tui.demo import build_demo

    return make_app(build_demo(tmp_path / ".openprogram", clock=lambda: FROZEN), **kw)


async def test_recent_cuts_a_long_topic_name_and_keeps_the_date_and_the_evidence_badge(tmp_path):
    """At 120x40 the Recent list read "2026-11-29  kyoto-trip-in-spring…": the badge came
    after the topic on one cut line and went with it. The name gives way now; every row
    keeps its date and its badge whole."""
    from textual.widgets import OptionList

    app = await _demo_app(tmp_path, insights=True)
    async with app.run_test(size=(120, 40)) as pilot:
        from tui_helpers import settle

        await settle(pilot, app)
        workers = [w for w in app.workers if w.group == "insights"]
        if workers:
            await app.workers.wait_for_complete(workers)
        await pilot.press("3")
        await pilot.pause()
        await pilot.pause()
        lst = app.screen.query_one("#recent-list", OptionList)
        width = lst.scrollable_content_region.width
        rows = [lst.get_option_at_index(i) for i in range(lst.option_count)]
        badges = {r.record.memory_id: app.screen.evidence_badge(r.record) for r in rows}
        assert all(b is not None for b in badges.values())
        long_names = [r for r in rows if len(r.record.topic_path) > width]
        assert long_names, width  # the demo has names the list cannot show whole
        drawn = screen_text(app).splitlines()
        heads = [line for line in drawn if line.startswith("2026-")]
        assert len(heads) >= 10, drawn
        for line in heads:
            pane = line.split("▎")[0]
            assert pane.rstrip().endswith("○1s·1d·1b"), pane
        assert any("…" in line.split("▎")[0] for line in heads)  # a name was cut, not the badge


# ---------------------------------------------------------------------- Topics: the path is never cut mid-word
def test_fit_path_drops_whole_folders_then_cuts_the_name_in_its_middle():
    from memory_tui.tui.screens.base import fit_path

    path = "topics/conversations/kyoto-trip-in-spring.md"
    assert fit_path(path, 80) == path
    assert fit_path(path, 38) == "topics/…/kyoto-trip-in-spring.md"
    assert fit_path("topics/a/b/c/kyoto-trip-in-spring.md", 34) == "topics/…/c/kyoto-trip-in-spring.md"
    assert fit_path(path, 25) == "…/kyoto-trip-in-spring.md"
    cut = fit_path(path, 16)
    assert len(cut) == 16 and cut.startswith("kyoto-t") and cut.endswith("ring.md") and "…" in cut
    assert fit_path(path, 35, "...") == "topics/.../kyoto-trip-in-spring.md"  # the ASCII glyph
    for width in range(4, 60):
        assert len(fit_path(path, width)) <= max(width, 3), width


@pytest.mark.parametrize("size", [(40, 12), (80, 24), (120, 40)])
async def test_the_topic_path_in_the_detail_title_is_whole_or_cut_at_a_folder(tmp_path, size):
    """At 40 columns the Topics detail read "topics/conversations/kyoto-trip-in-spr" over
    "ing.md", in its title and in the record's location under the list: the path wrapped
    mid-word. It takes a line of its own when it does not fit beside the title, whole folders
    give way in the middle, and the full path is the title's tooltip."""
    from textual.widgets import Static

    app = await _demo_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        from tui_helpers import settle

        await settle(pilot, app)
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        title = app.screen.query_one("#detail-title", Static)
        shown = app.screen.current_topic().path
        assert shown == "topics/conversations/kyoto-trip-in-spring.md"
        # the detail pane only (at 120 columns the topic tree is drawn left of it)
        drawn = [line.split("▎")[-1].strip() for line in screen_text(app).splitlines()]
        paths = [line for line in drawn if "topics/" in line or ".md" in line]
        head = next(line for line in paths if "trip-in-spring.md" in line or "trip-in-spr" in line)
        assert head.endswith("kyoto-trip-in-spring.md") and ("topics/" in head), (head, drawn)
        assert len(head) <= size[0] - 2
        if shown in head:
            assert title.tooltip is None
        else:
            assert "…" in head and title.tooltip == shown
        if app.screen.has_class("-short"):
            # 12 rows: the records keep the source pane's rows off a chip; 24 rows show the pane
            assert not any("kyoto-trip-in-spring.md:" in line for line in drawn), drawn
            await pilot.resize_terminal(size[0], 24)
            await pilot.pause()
            await pilot.pause()
            drawn = [line.split("▎")[-1].strip() for line in screen_text(app).splitlines()]
        # the record's location under the list (the source pane) is cut the same way
        assert all("kyoto-trip-in-spring.md" in line for line in drawn if "trip-in-spr" in line), drawn
        assert any("kyoto-trip-in-spring.md:" in line for line in drawn), drawn
