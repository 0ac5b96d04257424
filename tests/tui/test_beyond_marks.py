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


class _Seen:
    """The app's own messages as they are handled (``run_test(message_hook=...)``): a test
    waits for the one it needs instead of for a stretch of wall-clock time."""

    def __init__(self) -> None:
        import asyncio

        self.messages: list = []
        self._changed = asyncio.Event()

    def __call__(self, message) -> None:
        self.messages.append(message)
        self._changed.set()

    async def until(self, pilot, found, poke=None):
        """Wait until ``found(message)`` holds for a message handled from now on; ``poke`` is
        called again whenever the app went quiet without one (a watcher that was not up yet
        when the file changed sees the next change)."""
        import asyncio

        start = len(self.messages)
        give_up = asyncio.get_running_loop().time() + 120  # a guard against a hang, not a speed check
        while True:
            hit = next((m for m in self.messages[start:] if found(m)), None)
            if hit is not None:
                await pilot.pause()
                return hit
            assert asyncio.get_running_loop().time() < give_up, "the awaited message never came"
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), 1.0)
            except TimeoutError:
                if poke is not None:
                    poke()


async def test_a_new_turn_a_moved_head_and_a_new_mark_redraw_the_session_live(_fixture_master, tmp_path):
    """The Sessions view watches sessions/: a new turn written by OpenProgram (here the session
    node writer) moving the head, then a new mark, each reach the graph through the app's own
    watcher and reload (waited for as the messages they post, never as a stretch of time),
    the same session and node still selected."""
    from memory_tui.sessions.marks import mark_nodes, serialize_node
    from memory_tui.tui.messages import WorkspaceChanged
    from memory_tui.tui.widgets.session_graph import SessionGraph

    dest = tmp_path / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    sid, new = "local_0c0c0c0c0c", "c00000000005"
    seen = _Seen()
    app = make_app(dest, watch=True)
    async with app.run_test(size=(120, 40), message_hook=seen) as pilot:
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        screen = app.screen
        assert screen.focus_session(sid, "c00000000002")
        await pilot.pause()
        graph = screen.query_one("#sessions-graph")
        sdir = dest / "sessions" / sid
        node = {"id": new, "created_at": 1796014900.0, "seq": 10, "role": "user", "name": "", "input": None,
                "output": "A new question, live.", "caller": "", "predecessor": "c00000000004_reply", "reads": [],
                "metadata": {"source": "web"}}
        meta = json.loads((sdir / "meta.json").read_text())
        meta["head_id"] = new

        def write_turn() -> None:
            (sdir / "history" / f"0010-u-{new}.json").write_text(serialize_node(node))
            (sdir / "meta.json").write_text(json.dumps(meta))

        def drawn(test) -> "callable":
            # the graph's own report of a relayout (it posts the kept selection after each)
            return lambda m: (isinstance(m, SessionGraph.NodeSelected) and m.session_id == sid
                              and graph.layout_data is not None and test(graph.layout_data))

        write_turn()
        await seen.until(pilot, lambda m: isinstance(m, WorkspaceChanged) and f"sessions/{sid}/meta.json" in m.paths,
                         poke=write_turn)
        await seen.until(pilot, drawn(lambda lay: new in lay.nodes))
        assert screen.selected_session().session_id == sid
        assert graph.selected_node is not None and graph.selected_node.id == "c00000000002"
        assert G.HEAD_M in graph.layout_data.nodes[new].markers
        vm = screen.sessions.branch_verdict(sid, new)
        assert vm.next_write and new in vm.pending_ids
        # a new mark: OpenProgram's writer marks the new turn written
        wid = (dest / "memory" / ".scriptorium" / "workspace-id").read_text().strip()
        before = graph.layout_data.nodes[new].state

        def mark() -> None:
            if mark_nodes(sdir, [new], wid).already:  # marked before the watcher was looking
                path = sdir / "history" / f"0010-u-{new}.json"
                path.write_bytes(path.read_bytes())

        mark()
        await seen.until(pilot, lambda m: isinstance(m, WorkspaceChanged)
                         and any(p.startswith(f"sessions/{sid}/history/") for p in m.paths), poke=mark)
        await seen.until(pilot, drawn(lambda lay: lay.nodes[new].state != before))
        assert screen.selected_session().session_id == sid
        assert graph.selected_node is not None and graph.selected_node.id == "c00000000002"
        assert new not in screen.sessions.branch_verdict(sid, new).pending_ids


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
