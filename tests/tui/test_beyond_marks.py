"""The Sessions view beyond the marks: unreadable node files, Problems naming every problem
`status` names (and opening each at its line), kept states, drift and cross-session links.
States are the fixture, changed the way a user or the writer would change it."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys

import pytest
from tui_helpers import make_app, settle

from memory_tui.cli import main
from memory_tui.sessions import graph as G
from memory_tui.tui.screens import ProblemsScreen
from memory_tui.tui.screens.problems import ProblemOption

pytestmark = pytest.mark.anyio
SID = "local_a1b2c3d4e5"
CUT = "a00000000001_reply"


@pytest.fixture
def cut_state(_fixture_master, tmp_path):
    """The fixture with one node file cut in half (a crash mid-copy, a full disk)."""
    dest = tmp_path / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    path = next((dest / "sessions" / SID / "history").glob(f"*-{CUT}.json"))
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    return dest


def _status(capsys, state) -> dict:
    assert main(["--state", str(state), "status", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _rows(app) -> list[ProblemOption]:
    lst = app.screen.query_one("#problems-list")
    return [o for o in (lst.get_option_at_index(i) for i in range(lst.option_count)) if isinstance(o, ProblemOption)]


async def test_a_cut_node_file_is_drawn_unreadable_and_the_tip_count_holds(cut_state, _fixture_master, capsys):
    before = {s["id"]: s["tips"] for s in _status(capsys, _fixture_master)["sessions"]}
    status = _status(capsys, cut_state)
    assert {s["id"]: s["tips"] for s in status["sessions"]} == before  # no phantom tip
    app = make_app(cut_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        sm = app.model.sessions_view(app.now().timestamp())
        row = sm.row(SID)
        assert row.tips == before[SID] and row.unreadable == 1
        lay = sm.layout(SID)
        node = lay.nodes[CUT]
        assert node.state == G.UNREADABLE_S and "CORRUPT_FILE" in node.note
        assert not any(r.kind == "gap" for r in lay.rows)  # no "seq 2 missing (deleted nodes)"
        # its child keeps it as its parent
        assert CUT in lay.parents["a00000000002"]
        detail = sm.node_detail(SID, CUT)
        assert detail.error and "CORRUPT_FILE" in detail.error and detail.file.endswith(f"-{CUT}.json")
        # Problems lists every problem status lists, and enter on the node file's shows the node
        await pilot.press("p")
        assert isinstance(app.screen, ProblemsScreen)
        listed = {(r.problem.path, r.problem.code) for r in _rows(app)}
        wanted = {(p["path"], p["code"]) for p in status["problems"]}
        wanted |= {(p["path"], p["code"]) for s in status["sessions"] for p in s["problems"]}
        assert wanted <= listed, wanted - listed
        rows = _rows(app)
        lst = app.screen.query_one("#problems-list")
        lst.highlighted = next(i for i, r in enumerate(rows) if r.problem.path.endswith(f"-{CUT}.json"))
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        graph = app.screen.query_one("#sessions-graph")
        assert graph.selected_node is not None and graph.selected_node.id == CUT


async def test_enter_on_a_problem_in_a_plain_file_opens_editor_at_its_line(_fixture_master, tmp_path, monkeypatch):
    dest = tmp_path / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    (dest / "config.json").write_text('{"memory": {\n  "backend": }\n')
    seen = tmp_path / "argv.json"
    script = tmp_path / "ed.py"
    script.write_text(f"import json, sys\nopen({str(seen)!r}, 'w').write(json.dumps(sys.argv[1:]))\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    app = make_app(dest)
    app.editor_suspend = contextlib.nullcontext  # a headless driver cannot hand the terminal over
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("p")
        rows = _rows(app)
        lst = app.screen.query_one("#problems-list")
        lst.highlighted = next(i for i, r in enumerate(rows) if r.problem.path == "config.json")
        await pilot.press("enter")
        await pilot.pause()
    assert json.loads(seen.read_text()) == ["+2", str(dest / "config.json")]


async def test_g_crosses_a_cross_session_spawn_both_ways(_fixture_master, tmp_path):
    dest = tmp_path / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    child, root, parent, spawner = "local_0c0c0c0c0c", "c00000000001", "local_f6e5d4c3b2", "b00000000001_reply"
    app = make_app(dest)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        sm = app.model.sessions_view(app.now().timestamp())
        # both graphs hold a node naming the other half
        assert G.link_id(parent, spawner) in sm.layout(child).nodes
        assert G.link_id(child, root) in sm.layout(parent).nodes
        assert sm.layout(child).nodes[root].parents[0] == G.link_id(parent, spawner)
        screen = app.screen
        assert screen.focus_session(child, root)
        await pilot.pause()
        await pilot.press("g")
        await pilot.pause()
        graph = screen.query_one("#sessions-graph")
        assert screen.selected_session().session_id == parent and graph.selected_node.id == spawner
        await pilot.press("g")
        await pilot.pause()
        assert screen.selected_session().session_id == child and graph.selected_node.id == root
        link = sm.node_detail(child, G.link_id(parent, spawner))
        assert link.link == (parent, spawner) and any(parent in r.message for r in link.reasons)


async def test_kept_states_and_drift_reach_the_sessions_list(_fixture_master, tmp_path, capsys):
    dest = tmp_path / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    # the owner deletes the record that alone kept one written turn (c00000000001 of the sub-agent session)
    assert main(["--state", str(dest), "why", "local_0c0c0c0c0c", "--json"]) == 0
    kept = json.loads(capsys.readouterr().out)["sessions"]["local_0c0c0c0c0c"]["kept"]["turns"]
    sole = next(t for t in kept if t["state"] == "kept" and len(t["records"]) == 1)
    assert main(["--state", str(dest), "record", "delete", sole["records"][0]["memory_id"]]) == 0
    capsys.readouterr()
    app = make_app(dest)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        sm = app.model.sessions_view(app.now().timestamp())
        lost = [t["id"] for t in kept if t["records"] == sole["records"]]
        row = sm.row("local_0c0c0c0c0c")
        assert row.dropped == len(lost) and row.drift == len(lost)
        assert any("written, nothing kept" in w for w in row.warnings)
        assert sm.layout("local_0c0c0c0c0c").nodes[lost[0]].state == G.DROPPED_S
        a = sm.row(SID)
        assert a.unmarked_kept == 1 and G.KEPT_M in sm.layout(SID).nodes["a00000000007_reply"].markers
        detail = sm.node_detail("local_0c0c0c0c0c", lost[0])
        assert detail.kept == "dropped" and "no record cites it" in detail.kept_reason.message
        # the list sorts by drift: s once from pending
        await pilot.press("s")
        await pilot.pause()
        assert app.screen.sort_key == "drift"
        first = app.screen.query_one("#sessions-list").get_option_at_index(0)
        assert first.session.session_id == "local_0c0c0c0c0c"


async def test_a_new_turn_redraws_its_session_live_keeping_the_selection(_fixture_master, tmp_path):
    """The Sessions view watches sessions/: a new turn written by OpenProgram (here the session
    node writer), moving the head, shows up without a key press, the same session and node
    still selected, and the branch's next write follows the new head."""
    import asyncio

    from memory_tui.sessions.marks import serialize_node

    dest = tmp_path / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    sid = "local_0c0c0c0c0c"
    app = make_app(dest, watch=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        screen = app.screen
        assert screen.focus_session(sid, "c00000000002")
        await pilot.pause()
        await asyncio.sleep(0.5)  # the watcher is up
        sdir = dest / "sessions" / sid
        node = {"id": "c00000000005", "created_at": 1796014900.0, "seq": 10, "role": "user", "name": "", "input": None,
                "output": "A new question, live.", "caller": "", "predecessor": "c00000000004_reply", "reads": [],
                "metadata": {"source": "web"}}
        (sdir / "history" / "0010-u-c00000000005.json").write_text(serialize_node(node))
        meta = json.loads((sdir / "meta.json").read_text())
        meta["head_id"] = "c00000000005"
        (sdir / "meta.json").write_text(json.dumps(meta))
        graph = screen.query_one("#sessions-graph")
        for _ in range(100):
            await pilot.pause(0.05)
            sm = screen.sessions
            if sm is not None and "c00000000005" in sm.session_data(sid).nodes and graph.layout_data is not None \
                    and "c00000000005" in graph.layout_data.nodes:
                break
        assert "c00000000005" in graph.layout_data.nodes
        assert screen.selected_session().session_id == sid
        assert graph.selected_node is not None and graph.selected_node.id == "c00000000002"
        assert G.HEAD_M in graph.layout_data.nodes["c00000000005"].markers
        vm = screen.sessions.branch_verdict(sid, "c00000000005")
        assert vm.next_write and "c00000000005" in vm.pending_ids


async def test_problems_lists_every_code_status_reports_warnings_included(cut_state, capsys):
    # status reports a warning for special-token text in topics/core.md (OpenProgram's counter
    # raises on it) beside the errors; the Problems list must name each of them, warnings too
    core = cut_state / "memory" / "topics" / "core.md"
    text = core.read_text(encoding="utf-8")
    core.write_text(text.replace("drinks tea.", "drinks tea <|endoftext|>.", 1), encoding="utf-8")
    status = _status(capsys, cut_state)
    wanted = {(p["path"], p["code"], p.get("line")) for p in status["problems"]}
    wanted |= {(p["path"], p["code"], p.get("line")) for s in status["sessions"] for p in s["problems"]}
    assert {"SPECIAL_TOKEN_TEXT", "CORRUPT_FILE"} <= {code for _path, code, _line in wanted}
    app = make_app(cut_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        assert app.problem_count() >= len(wanted)
        await pilot.press("p")
        assert isinstance(app.screen, ProblemsScreen)
        listed = {(r.problem.path, r.problem.code, r.problem.line) for r in _rows(app)}
        assert wanted <= listed, wanted - listed
