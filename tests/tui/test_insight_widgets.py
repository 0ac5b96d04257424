"""The insight widgets in a tiny standalone app: the Evidence list, a record's history with a
diff, an alternatives pair (snapshots), plus their keys and messages (Pilot)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))  # the crafted-world builders

from insights_world import forked_world  # noqa: E402

from memory_tui.core.store import gitlog  # noqa: E402
from memory_tui.core.tx import api as tx  # noqa: E402
from memory_tui.core.store.workspace import open_state  # noqa: E402
from memory_tui.insights.history import history  # noqa: E402
from memory_tui.insights.summary import summarize  # noqa: E402
from memory_tui.sessions.store import load_sessions  # noqa: E402
from memory_tui.insights.alternatives import alternatives  # noqa: E402
from memory_tui.tui.model.insights import HistoryVM, InsightCountsVM, alternative_pairs, diff_lines, view_models  # noqa: E402
from memory_tui.tui.widgets.alternatives_pair import AlternativesPair  # noqa: E402
from memory_tui.tui.widgets.evidence_badge import EvidenceBadge, badge_text  # noqa: E402
from memory_tui.tui.widgets.evidence_list import EvidenceList  # noqa: E402
from memory_tui.tui.widgets.history_view import HistoryView  # noqa: E402

WEB = "topics/projects/web.md"


def env(day: int) -> dict[str, str]:
    return gitlog.fixed_env(f"2026-11-{day:02d}T00:00:00+00:00")


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    state = forked_world(tmp_path_factory.mktemp("insights") / "state", lost=False)
    root = state / "memory"
    assert gitlog.ensure_history(root, env=env(1)) is None
    for i, new in enumerate(("The app uses Flask 3.", "The app uses Flask 3 with Jinja.", "The app used Flask.")):
        text = (root / WEB).read_text()
        old = ["The app uses Flask.", "The app uses Flask 3.", "The app uses Flask 3 with Jinja."][i]
        assert tx.staged_edit(state, WEB, text.replace(old, new), git_env=env(i + 2)).ok
    return state


@pytest.fixture(scope="module")
def models(world):
    rows, counts = view_models(summarize(open_state(world), load_sessions(world)))
    return rows, alternative_pairs(alternatives(open_state(world), load_sessions(world))), counts


class One(App):
    """Hosts one widget, nothing else."""

    def __init__(self, widget) -> None:
        super().__init__()
        self._widget = widget

    def compose(self) -> ComposeResult:
        yield self._widget


def test_evidence_list_snapshot(snap_compare, models):
    rows, _pairs, _counts = models
    assert snap_compare(One(EvidenceList(rows, id="evidence")), terminal_size=(120, 20))


def test_history_with_diff_snapshot(snap_compare, world):
    vm = HistoryVM.of(history(open_state(world), "flask001"))
    assert [v.actor for v in vm.versions] == ["hand-edit"] * 3 + ["init"]

    async def run_before(pilot):
        await pilot.pause()
        await pilot.press("down")  # the second-newest edit: "Flask 3." -> "Flask 3 with Jinja."
        await pilot.pause()

    assert snap_compare(One(HistoryView(vm)), terminal_size=(120, 24), run_before=run_before)


def test_alternatives_pair_snapshot(snap_compare, models):
    _rows, pairs, _counts = models
    pair = next(p for p in pairs if p.a.memory_id == "flask001")
    assert snap_compare(One(AlternativesPair(pair)), terminal_size=(100, 14))


# ------------------------------------------------------------------------------- behaviour


@pytest.mark.anyio
async def test_evidence_list_sorts_and_posts_the_chosen_row(models):
    rows, _pairs, _counts = models
    chosen = []

    class Host(One):
        def on_evidence_list_record_chosen(self, event: EvidenceList.RecordChosen) -> None:
            chosen.append(event.row)

    app = Host(EvidenceList(rows, id="evidence"))
    async with app.run_test() as pilot:
        table = app.query_one(EvidenceList)
        assert table.sort_key == "weakest"
        assert table.shown[-1].memory_id == "multi001"  # strongest last
        under = table.shown[table.cursor_row].memory_id
        await pilot.press("s")  # -> sessions
        assert table.sort_key == "sessions"
        await pilot.press("r")
        assert table.sort_reverse and table.shown[0].memory_id == "multi001"
        assert table.shown[table.cursor_row].memory_id == under  # the cursor stays on its record
        table.move_cursor(row=0)
        await pilot.press("enter")
        await pilot.pause()
        assert chosen and chosen[0].memory_id == "multi001"


@pytest.mark.anyio
async def test_history_view_requests_a_revert_with_the_version(world):
    vm = HistoryVM.of(history(open_state(world), "flask001"))
    asked = []

    class Host(One):
        def on_history_view_revert_requested(self, event: HistoryView.RevertRequested) -> None:
            asked.append(event.version)

    app = Host(HistoryView(vm))
    async with app.run_test() as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "v")
        await pilot.pause()
        assert [v.commit for v in asked] == [vm.versions[2].commit]


def test_badge_text_and_ascii(models):
    rows, _pairs, counts = models
    by_id = {r.memory_id: r for r in rows}
    assert badge_text(by_id["multi001"]).plain == "\u25cf2s\u00b72d\u00b72b owner"
    assert badge_text(by_id["multi001"], ascii=True).plain == "*2s 2d 2b owner"
    assert badge_text(by_id["asst0001"], ascii=True).plain == "o1s 1d 1b agent-only"
    assert badge_text(by_id["pend0001"], ascii=True).plain == "o1s 1d 1b !1 pending"
    assert all(ord(c) < 128 for r in rows for c in badge_text(r, ascii=True).plain)
    assert counts == InsightCountsVM(records=7, single_episode=5, alternatives=3, pending_sources=1)
    assert [t for _, t in counts.phrases()] == ["single", "alternatives", "pending"]
    assert counts.phrases()[0][0] == "5 single-episode records"


@pytest.mark.anyio
async def test_badge_widget_redraws(models):
    rows, _pairs, _counts = models
    app = One(EvidenceBadge(rows[0], ascii=True))
    async with app.run_test() as pilot:
        badge = app.query_one(EvidenceBadge)
        assert str(badge.render()) == badge_text(rows[0], ascii=True).plain
        badge.ascii = False
        await pilot.pause()
        assert str(badge.render()) == badge_text(rows[0]).plain


def test_diff_lines_and_sanitising():
    lines = diff_lines("a\nb\nc", "a\nB\x1b[31m\nc")
    assert [(l.kind, l.text) for l in lines if l.kind != "hunk"] == [("context", "a"), ("remove", "b"), ("add", "B"), ("context", "c")]
    assert [l.kind for l in diff_lines(None, "x")] == ["hunk", "add"]
