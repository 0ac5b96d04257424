"""Keys as a new owner meets them: the focus never lands where a key types instead of acting,
every dialog has a key that confirms it, and every binding of every screen, widget and
dialog is in the help and in the command palette."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from action_harness import until as until_held
from textual.widgets import Input, RadioButton
from tui_helpers import make_app

from memory_tui.core.store.gitlog import fixed_env
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.tui.dialogs.move_picker import MovePicker
from memory_tui.tui.dialogs.record_change import ConfirmRecordDelete, RecordOutcomeDialog
from memory_tui.tui.widgets import RecordList

pytestmark = pytest.mark.anyio
until = partial(until_held, tries=2000)
CLI = "topics/projects/cli-language.md"


def _app(state: Path):
    app = make_app(state)
    app.job_context_options = {"git_env": fixed_env()}
    return app


async def test_tab_after_a_filter_never_lands_in_the_filter(fixture_state):
    app = _app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("slash", *"cli", "enter")
        screen = app.screen
        assert app.filter_text == "cli" and isinstance(app.focused, type(screen.list_widget()))
        seen = []
        for _ in range(4):
            await pilot.press("tab")
            seen.append(app.focused)
        assert not any(isinstance(w, Input) for w in seen), seen
        assert any(isinstance(w, RecordList) for w in seen)
        while not isinstance(app.focused, RecordList):
            await pilot.press("tab")
        assert app.focused.selected_record is not None
        await pilot.press("d")  # record.delete: asks, never types into the filter
        await until(pilot, lambda: isinstance(app.screen, ConfirmRecordDelete))
        assert screen.query_one("#filter", Input).value == "cli" and app.filter_text == "cli"
        await pilot.press("escape")
        await pilot.pause()
        # `/` still goes back into the filter to change it
        await pilot.press("slash", "end", "s")
        assert isinstance(app.focused, Input) and app.filter_text == "clis"


async def test_the_move_dialog_confirms_with_its_key(fixture_state):
    root = fixture_state / "memory"
    rev = workspace_revision(root)
    app = _app(fixture_state)
    async with app.run_test(size=(160, 45)) as pilot:
        await app.open_record(app.model.records["9c2b1a83"])
        await pilot.pause()
        app.view_screens["topics"].query_one("#topic-records", RecordList).focus()
        await pilot.press("m")  # record.move
        await until(pilot, lambda: isinstance(app.screen, MovePicker) and app.screen.topic_choice is not None)
        picker = app.screen
        picker.query_one("#pos-start", RadioButton).value = True
        await pilot.pause()
        picker.query_one("#new-headings", Input).focus()  # even from the text input
        await pilot.press("ctrl+s")  # move.confirm
        await until(pilot, lambda: isinstance(app.screen, RecordOutcomeDialog) and bool(app.screen.query("#outcome")))
        outcome = app.screen.outcome
        assert outcome.ok, outcome.lines()
    text = (root / CLI).read_text()
    assert text.index("^9c2b1a83") < text.index("^b1f8ed16") and workspace_revision(root) != rev


# ---------------------------------------------------------------------- Sessions side panel
SID = "local_a1b2c3d4e5"


async def _sessions(pilot, app, node: str | None = None):
    from tui_helpers import dry_runs_done, settle

    await settle(pilot, app)
    await pilot.press("5")
    await pilot.pause()
    screen = app.screen
    assert screen.focus_session(SID, node)
    await pilot.pause()
    await dry_runs_done(pilot, app)
    return screen


async def test_another_node_shows_its_verdict_from_the_first_line(fixture_state):
    app = make_app(fixture_state)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _sessions(pilot, app)
        side = screen.query_one("#sessions-side")
        graph = screen.query_one("#sessions-graph")
        assert side.max_scroll_y > 0  # verdict and node detail are taller than the panel
        side.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        assert side.scroll_y > 0
        before = graph.selected_node.id
        await pilot.press("down")
        await pilot.pause()
        assert graph.selected_node.id != before
        assert side.scroll_y == 0
        # a reload that keeps the node keeps where the owner scrolled to
        side.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        kept = side.scroll_y
        app.load_in_background(None)
        await _loads(pilot, app)
        assert graph.selected_node.id != before and side.scroll_y == kept


async def _loads(pilot, app) -> None:
    loads = [w for w in app.workers if w.group == "load"]
    if loads:
        await app.workers.wait_for_complete(loads)
    await pilot.pause()
    await pilot.pause()


async def test_the_dry_run_lands_after_a_reload_that_changed_nothing_visible(fixture_state, monkeypatch):
    """After a job the app reloads (a new Sessions model: the panel's dry run starts again),
    then the watcher reports the job's own files: that reload changes nothing visible and
    swaps the model without redrawing. The dry run started for the first must still land."""
    import threading

    import memory_tui.tui.screens.sessions_work as sessions_work
    from tui_helpers import dry_runs_done

    from memory_tui.tui.widgets.branch_verdict import BranchVerdict

    gate = threading.Event()
    gate.set()
    real = sessions_work.dry_run

    def held(*a, **kw):
        gate.wait()
        return real(*a, **kw)

    monkeypatch.setattr(sessions_work, "dry_run", held)
    app = make_app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _sessions(pilot, app)
        panel = screen.query_one(BranchVerdict)
        assert "computing the dry run" not in panel.plain
        gate.clear()
        app.load_in_background(None)  # what a finished job asks for
        await _loads(pilot, app)
        assert "computing the dry run" in panel.plain
        first = screen.sessions
        node = next(iter(fixture_state.glob(f"sessions/{SID}/history/*.json")))
        app.load_in_background({str(node.relative_to(fixture_state))})  # the watcher, nothing changed
        await _loads(pilot, app)
        assert screen.sessions is not first  # a new model, swapped in without a redraw
        gate.set()
        await dry_runs_done(pilot, app)
        await dry_runs_done(pilot, app)
        assert "computing the dry run" not in panel.plain, panel.plain
        assert screen.verdict is not None and screen.verdict.plan is not None


# ---------------------------------------------------------------------- help and palette
def _every_binding() -> list[tuple[type, object]]:
    """Every Binding with an id that any class of the app declares itself (the app, its
    screens, widgets and dialogs), found here by walking the modules, not by the registry."""
    import importlib
    import inspect
    import pkgutil

    from textual.binding import Binding

    from memory_tui.tui.app import MemoryApp

    found = [(MemoryApp, b) for b in MemoryApp.BINDINGS if isinstance(b, Binding) and b.id]
    for name in ("memory_tui.tui.screens", "memory_tui.tui.widgets", "memory_tui.tui.dialogs"):
        package = importlib.import_module(name)
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{name}.{info.name}")
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if cls.__module__ == module.__name__:
                    found += [(cls, b) for b in vars(cls).get("BINDINGS", ()) if isinstance(b, Binding) and b.id]
    return found


def _bare(cls):
    """An instance of ``cls`` as the palette sees one on screen (no compose, every action allowed)."""
    node = cls.__new__(cls)
    node.check_action = lambda *_: True
    return node


def test_every_binding_is_in_the_help_and_the_palette():
    from memory_tui.tui.commands import COMMANDS, key_label
    from memory_tui.tui.palette import palette_items
    from memory_tui.tui.screens import HelpScreen
    from memory_tui.tui.views import VIEWS

    bindings = _every_binding()
    assert len({b.id for _, b in bindings}) > 60  # the walk found the widgets' and dialogs' keys too
    commands = {c.id for c in COMMANDS}
    for view in VIEWS:
        rows = str(HelpScreen({}, view, False).key_rows()).splitlines()
        for cls, b in bindings:
            row = next((line for line in rows if line.endswith(f"[{b.id}]")), None)
            assert row is not None, (view, cls.__name__, b.id)
            assert row.split()[0] == key_label(b.key).split()[0], (b.id, row)
    offered: dict[str, set[str]] = {}
    for view in VIEWS:
        for item in palette_items(view, {}, [], lambda *_: None):
            offered.setdefault(item.id, set()).add(view)
    for cls, b in bindings:
        if b.id in commands:
            assert b.id in offered or not b.key, (cls.__name__, b.id)
            continue
        items = palette_items(None, {}, [_bare(cls)], lambda *_: None)
        assert b.id in {i.id for i in items}, (cls.__name__, b.id)
    assert all(c.id in offered for c in COMMANDS)


def test_a_keyless_command_reads_well_in_the_palette():
    from memory_tui.tui.palette import palette_items

    items = {i.id: i for i in palette_items("topics", {}, [], lambda *_: None)}
    forced = items["job.write_all_forced"]
    assert "palette" not in forced.help and forced.help.startswith("Preview, then write")
    assert items["app.reload"].help.endswith("· key ^r")


async def _palette(pilot, app, query: str):
    from textual.command import CommandList, CommandPalette

    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*query)
    await until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0)
    lst = app.screen.query_one(CommandList)
    return [str(lst.get_option_at_index(i).prompt) for i in range(lst.option_count)]


async def test_the_focused_graphs_keys_are_in_the_palette_and_the_help(fixture_state):
    from textual.widgets import Static

    from memory_tui.tui.screens import HelpScreen
    from memory_tui.tui.widgets.session_graph import SessionGraph

    app = make_app(fixture_state)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _sessions(pilot, app)
        graph = screen.query_one(SessionGraph)
        graph.focus()
        await pilot.pause()
        shown = await _palette(pilot, app, "newest")
        assert any("Newest first" in s for s in shown), shown
        reverse = graph.reverse
        await pilot.press("enter")
        await until(pilot, lambda: graph.reverse != reverse)
        shown = await _palette(pilot, app, "show more")
        assert any("node detail: Show more" in s for s in shown), shown
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = "\n".join(str(s.content) for s in app.screen.query(Static))
        here = text[text.index("Sessions graph  (here)"):]
        here = here[:here.index("\n\n")]
        for key, binding_id in (("a", "graph.ascii"), ("o", "graph.order"), ("enter space", "graph.toggle")):
            assert any(line.strip().startswith(f"{key} ") and line.endswith(f"[{binding_id}]")
                       for line in here.splitlines()[1:]), (binding_id, here)
        assert "Sessions node detail  (here)" in text and "[node_detail.more]" in text


def test_the_readme_keys_name_every_binding():
    from memory_tui.tui.commands import COMMANDS

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    keys = readme[readme.index("## Keys"):]
    keys = keys[:keys.index("\n## ", 5)]
    ids = {b.id for _, b in _every_binding()} | {c.id for c in COMMANDS}
    assert sorted(i for i in ids if f"`{i}`" not in keys) == []
    assert "in the Evidence screen\n(`i`)" in readme
