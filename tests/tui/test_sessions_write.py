"""The Sessions view's ``w``: write the selected branch through the app's job flow.

On a private copy of OpenProgram's fixture, with the embedded (extractive) writer: select an
unwritten branch's tip, press ``w``, confirm, and check that the branch turns written on
screen, on disk (the marks in the node files) and for ``why --json``, and that OpenProgram's
rules still hold afterwards.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from textual.widgets import OptionList
from action_harness import until as _until
from tui_helpers import make_app

from memory_tui.cli import main as cli_main
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.core.format.topics import parse_tree_strict
from memory_tui.core.format.sources import SourceIndex
from memory_tui.sessions import graph as G
from memory_tui.tui.dialogs.confirm_job import ConfirmJobDialog
from memory_tui.tui.dialogs.job_result import JobResultDialog

pytestmark = pytest.mark.anyio
NOW = 1796100000.0
SID = "local_a1b2c3d4e5"
TIP = "a00000000003_reply"  # a non-head branch below the threshold: two pending turns
WS = "w-01760fa0"


def _cli(state: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        try:
            rc = cli_main(["--state", str(state), *args])
        except SystemExit as exc:  # argparse and verbs may exit
            rc = int(exc.code or 0)
    return rc, out.getvalue()


def _why(state: Path) -> dict:
    rc, out = _cli(state, "--json", "why", SID)
    assert rc == 0, out
    return json.loads(out)


def _node_marks(state: Path) -> dict[str, str | None]:
    """node id -> the workspace its memory mark names (None: unmarked), read from the node files."""
    marks = {}
    for path in sorted((state / "sessions" / SID / "history").glob("*.json")):
        node = json.loads(path.read_text(encoding="utf-8"))
        marks[node["id"]] = (node.get("metadata") or {}).get("memory_written_scriptorium")
    return marks


def _graph_line(graph, node_id: str) -> str:
    """The text the graph paints on screen for ``node_id``'s row."""
    layout = graph.layout_data
    (index,) = [i for i, row in enumerate(layout.rows) if row.node is not None and row.node.id == node_id]
    return "".join(seg.text for seg in graph.render_line(index - graph.scroll_offset.y))


async def test_w_writes_the_selected_branch_and_it_turns_written(fixture_state):
    state = fixture_state
    before = _why(state)
    tip_before = before["sessions"][SID]["tips"][TIP]
    pending = list(tip_before["pending_ids"])
    assert pending == ["a00000000003", "a00000000003_reply"]
    assert all(_node_marks(state)[n] is None for n in pending)

    app = make_app(state)
    app.job_context_options = {"git_env": fixed_env(), "clock": lambda: NOW}
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("5")
        lst = app.screen.query_one("#sessions-list", OptionList)
        lst.highlighted = lst.get_option_index(f"session:{SID}")
        await pilot.pause()
        graph = app.screen.query_one("#sessions-graph")
        assert graph.select_node(TIP)
        await pilot.pause()
        assert app.screen.verdict is not None and app.screen.verdict.tip == TIP
        written = G.UTF8.states[G.WRITTEN_S]
        pending_glyph = G.UTF8.states[G.PENDING_S]
        for n in pending:
            assert pending_glyph in _graph_line(graph, n)

        await pilot.press("w")
        await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and bool(app.screen.query("#run")))
        preview = app.screen.preview
        assert preview.job == "write" and not preview.nothing_to_do and preview.count == len(pending)
        await pilot.press("y")
        await _until(pilot, lambda: isinstance(app.screen, JobResultDialog) and bool(app.screen.query("#close")))
        (summary,) = app.job_results
        assert summary.ok, summary.to_json()
        rev = summary.revision
        await pilot.press("escape")
        await _until(pilot, lambda: app.model.revision == rev)
        await pilot.pause()
        graph = app.screen.query_one("#sessions-graph")
        assert graph.session_id == SID
        # written: kept (a record cites it) or, where the writer folded the batch into a record
        # citing another of its turns, written with nothing kept -- the engine's kept state says which
        kept = app.screen.sessions.kept(SID)
        dropped = G.UTF8.states[G.DROPPED_S]
        for n in pending:
            line = _graph_line(graph, n)
            assert (dropped if kept.get(n) == "dropped" else written) in line and pending_glyph not in line, line
        assert any(kept.get(n) == "kept" for n in pending)
        assert app.screen.verdict is not None and app.screen.verdict.tip == TIP
        assert not app.screen.verdict.pending_ids

        # A second `w` on the same branch has nothing left to write.
        await pilot.press("w")
        await _until(pilot, lambda: isinstance(app.screen, ConfirmJobDialog) and app.screen.preview is not None)
        assert app.screen.preview.nothing_to_do
        await pilot.press("escape")
        await pilot.pause()

    marks = _node_marks(state)
    assert all(marks[n] == WS for n in pending), {n: marks[n] for n in pending}
    after = _why(state)
    tip_after = after["sessions"][SID]["tips"][TIP]
    assert tip_after["pending_ids"] == []
    assert set(pending) <= set(tip_after["marked_record_ids"])
    rc, out = _cli(state, "views", "--check")
    assert rc == 0, out
    # OpenProgram's strict parse accepts the topics, and a record now cites the written turns.
    root = state / "memory"
    tree = parse_tree_strict(root / "topics", resolve=SourceIndex.load(root).resolve_target)
    cited = {ref for unit in tree.units for ref in unit.source_refs}
    assert any(ref.startswith(f"openprogram/{SID}/a00000000003") for ref in cited), sorted(cited)
    rc, out = _cli(state, "--json", "topics")
    assert rc == 0 and all(not t["problems"] for t in json.loads(out)["topics"]), out
