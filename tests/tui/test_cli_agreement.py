"""The TUI and the CLI are two faces of one engine: what the app shows on OpenProgram's own
state dir equals what ``memory-tui topics/show/status --json`` print for it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import OptionList, Static, Tree
from tui_helpers import make_app, make_source_pending, settle

from memory_tui.tui.screens.topics import TopicNode
from memory_tui.tui.widgets import CitationOption, RecordList, RecordOption

pytestmark = pytest.mark.anyio


def _cli(state: Path, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "memory_tui", *args, "--json", "--state", str(state)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.fixture
def state(fixture_state_ro, tmp_path):
    """The fixture with one cited source turned pending, so Core shows kept, omitted and
    pending blocks at once."""
    dest = tmp_path / ".openprogram"
    shutil.copytree(fixture_state_ro, dest, symlinks=True)
    make_source_pending(dest, "openprogram/local_a1b2c3d4e5/a00000000001")
    return dest


def _walk(node):
    for child in node.children:
        yield child
        yield from _walk(child)


async def test_topics_records_core_and_pending_agree_with_the_cli(state, expected):
    topics = _cli(state, "topics")
    status = _cli(state, "status")
    shown = {row["path"]: _cli(state, "show", row["path"]) for row in topics["topics"]}

    app = make_app(state)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        header = str(app.screen.query_one("#header").render())
        assert topics["workspace_id"] in header
        assert topics["revision"][:8] in header
        assert f"{status['status_pending_turns']} pending" in header

        # Topics: every topic file in the tree, with the CLI's block ids in the CLI's order.
        tree = app.screen.query_one("#topics-list", Tree)
        leaves = {n.data.path: n for n in _walk(tree.root) if isinstance(n.data, TopicNode)}
        assert set(leaves) | {"topics/core.md"} == {row["path"] for row in topics["topics"]}
        for path, node in leaves.items():
            tree.put_cursor(node)
            await pilot.pause()
            records = app.screen.query_one("#topic-records", RecordList)
            on_screen = [records.get_option_at_index(i) for i in range(records.option_count)]
            record_ids = [o.record.memory_id for o in on_screen if isinstance(o, RecordOption)]
            model_topic = app.model.topic(path)
            cli_records = shown[path]["records"]
            assert list(model_topic.block_ids) == [r["memory_id"] for r in cli_records], path
            identities = [r["memory_id"] for r in cli_records if r["memory_id"] not in {a for x in cli_records for a in x["aliases"]}]
            assert record_ids == identities, path
            n_cites = sum(1 for o in on_screen if isinstance(o, CitationOption))
            assert n_cites == sum(len({(c["label"], c["target"]) for c in r["citations"]}) for r in cli_records if r["memory_id"] in identities)

        # Core: each block's mark in the list is the CLI's kept / omitted / pending.
        await pilot.press("4")
        core_list = app.screen.query_one("#core-list", OptionList)
        glyph = {"✓": "kept", "✗": "omitted", "○": "pending"}
        marks = {}
        for i in range(core_list.option_count):
            opt = core_list.get_option_at_index(i)
            marks[opt.record.memory_id] = glyph[str(opt.prompt)[0]]
        cli_core = {r["memory_id"]: r["core"] for r in shown["topics/core.md"]["records"]}
        assert marks == cli_core
        assert set(marks.values()) == {"kept", "omitted", "pending"}
        title = str(app.screen.query_one("#detail-title", Static).render())
        kept = sum(1 for v in cli_core.values() if v == "kept")
        omitted = sum(1 for v in cli_core.values() if v == "omitted")
        pending = sum(1 for v in cli_core.values() if v == "pending")
        assert f"{kept} injected · {omitted} omitted · {pending} pending" in title

        # Sessions: pending turns per session as `status` counts them.
        await pilot.press("5")
        sessions = app.screen.query_one("#sessions-list", OptionList)
        rows = [sessions.get_option_at_index(i) for i in range(sessions.option_count)]
        texts = {o.session.session_id: str(o.prompt) for o in rows}
        assert set(texts) == {s["id"] for s in status["sessions"]}
        for s in status["sessions"]:
            assert f"{s['pending_turns']} pending" in texts[s["id"]], s["id"]


async def test_unmodified_fixture_core_tokens_match_openprogram(fixture_state_ro, expected):
    app = make_app(fixture_state_ro)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("4")
        title = str(app.screen.query_one("#detail-title", Static).render())
        assert f"{expected['core']['rendered_tokens']:,} / {expected['core_budget_tokens']:,} tokens" in title
        assert f"{len(expected['core']['omitted_block_ids'])} omitted" in title
        assert f"{expected['status_pending_turns']} pending" in str(app.screen.query_one("#header").render())
