"""A one-file reload (``load_model(previous=..., touched=...)``: the engine's ``refresh`` with
views from per-topic parts, the timeline merged from the changed topics' rows) equals a fresh
full load of the same directory with the views built whole (``MEMORY_TUI_TEST_DERIVE=full``), along
random sequences of changes on disk: rewording, redating, dropping and moving records, links
coming and going, a block id in two files, a topic that stops parsing, deleted and added
topic files (issue 12)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_tui.core.store import viewcache
from memory_tui.tui.messages import ModelApplied
from memory_tui.tui.model.load import load_model
from memory_tui.core import switches
from switching import set_derive


@pytest.fixture(scope="module")
def built(bench_state_small):
    return bench_state_small  # each example copies it


OPS = ["reword", "redate", "drop", "swap", "link", "unlink", "dup", "break", "delete", "add", "none"]
STEPS = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10_000)), min_size=1, max_size=7)


def _write(path: Path, data: str | bytes) -> None:
    # a new inode every time: the stamp changes even within one mtime tick
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    os.replace(tmp, path)


def _change(topics: Path, op: str, n: int, removed: list[tuple[str, bytes]]) -> set[str]:
    """Apply one change; the state-relative paths it touched."""
    rels = sorted(p.relative_to(topics).as_posix() for p in topics.rglob("*.md") if p.name != "core.md")
    rel = rels[n % len(rels)]
    path = topics / rel
    text = path.read_text(encoding="utf-8", errors="replace")
    paras = text.split("\n\n")
    touched = {f"memory/topics/{rel}"}
    if op == "reword":
        _write(path, text.replace("(fact ", f"(fact {n} ", 1))
    elif op == "redate":
        _write(path, re.sub(r"Time: `\d{4}-\d{2}-\d{2}`", f"Time: `2027-0{1 + n % 9}-1{n % 10}`", text, count=1))
    elif op == "drop" and len(paras) > 4:
        _write(path, "\n\n".join(paras[:2] + paras[4:]))
    elif op == "swap" and len(paras) > 6:
        _write(path, "\n\n".join(paras[:2] + paras[4:6] + paras[2:4] + paras[6:]))
    elif op == "link":
        other = rels[(n + 1) % len(rels)]
        ids = re.findall(r"\^([A-Za-z0-9-]+)\s*$", (topics / other).read_text(encoding="utf-8", errors="replace"), flags=re.M)
        if ids:
            _write(path, re.sub(r"\.\[\^", f", see [that](/{other}#^{ids[n % len(ids)]}).[^", text, count=1))
    elif op == "unlink":
        _write(path, re.sub(r", see \[(?:that|next)\]\([^)]*\)", "", text, count=1))
    elif op == "dup" and len(paras) > 2:  # a block id in two files: the tree drops one
        other = rels[(n + 1) % len(rels)]
        if other != rel:
            target = topics / other
            _write(target, target.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n\n" + "\n\n".join(paras[1:3]) + "\n")
            touched = {f"memory/topics/{other}"}
    elif op == "break":  # undecodable bytes: the topic becomes a problem
        _write(path, b"\xff\xfe" + text.encode("utf-8"))
    elif op == "delete" and len(rels) > 2:
        removed.append((rel, path.read_bytes()))
        path.unlink()
    elif op == "add" and removed:  # a deleted file comes back, under a new name
        old, data = removed.pop()
        new = topics / f"added-{n}" / Path(old).name
        new.parent.mkdir(exist_ok=True)
        _write(new, data)
        touched = {f"memory/topics/{new.relative_to(topics).as_posix()}"}
    else:
        return set()
    return touched


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
@example(steps=[("reword", 0), ("redate", 1), ("drop", 2), ("link", 3), ("unlink", 3)])
@example(steps=[("dup", 1), ("reword", 2), ("break", 4), ("reword", 4)])
@example(steps=[("delete", 5), ("reword", 1), ("add", 7), ("swap", 7)])
@example(steps=[("break", 0), ("dup", 1)])  # a block copied out of an undecodable file
def test_one_file_reload_equals_a_full_load(built, tmp_path_factory, monkeypatch, steps):
    state = tmp_path_factory.mktemp("run") / "state"
    shutil.copytree(built, state, symlinks=True)
    topics = state / "memory" / "topics"
    viewcache.forget_in_process()
    model = load_model(state, sessions=False)
    removed: list[tuple[str, bytes]] = []
    assert model.state.topic_parts  # the first load already built its views from parts
    for op, n in steps:
        touched = _change(topics, op, n, removed)
        model = load_model(state, previous=model, touched=touched, sessions=False)
        with monkeypatch.context() as m:
            set_derive(m, "full")
            fresh = load_model(state, sessions=False)
        switches.reload()  # the context put the environment back
        assert not fresh.state.topic_parts  # the full path really was taken
        assert model.state.views.files == fresh.state.views.files
        assert model.state.views.core == fresh.state.views.core
        assert model.timeline == fresh.timeline
        assert model.topics == fresh.topics
        # the record index in its order (the Sessions view's citation lists follow it): every
        # record of every topic by each of its ids, topics in order, core last, first one winning
        index: dict = {}
        for rec in [r for t in fresh.topics for r in t.records] + list(fresh.core.records if fresh.core else ()):
            for mid in rec.ids:
                index.setdefault(mid, rec)
        assert list(model.records.items()) == list(fresh.records.items()) == list(index.items())
        assert model.revision == fresh.revision  # the resumed revision stream of the refresh
        assert model.state.problems == fresh.state.problems
        assert model == fresh


def _topics_screen(app) -> tuple[list[str], str | None, list[str]]:
    """What the Topics screen shows: every tree label (depth first), the topic under the
    cursor and its records list, as plain text."""
    from rich.console import Console

    screen = app.screen
    labels, nodes = [], [screen.tree.root]
    while nodes:
        node = nodes.pop()
        labels.append(str(node.label))
        nodes.extend(reversed(node.children))
    shown = screen.current_topic()
    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    records = []
    for i in range(screen.records.option_count):
        console.print(screen.records.get_option_at_index(i).prompt)
        records.append(console.export_text())
    return labels, shown.path if shown is not None else None, records


async def _settled(app, pilot) -> None:
    loads = [w for w in app.workers if w.group == "load"]
    if loads:
        await app.workers.wait_for_complete(loads)
    await pilot.pause()
    await pilot.pause()


async def _fresh_screen(state: Path):
    from memory_tui.tui.app import create_app

    app = create_app(state, watch=False, background=False, insights=False, home=state.parent)
    async with app.run_test(size=(120, 40)) as pilot:
        await _settled(app, pilot)
        return _topics_screen(app)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 10_000)), min_size=1, max_size=4))
@example(steps=[("reword", 0), ("break", 0), ("drop", 3), ("delete", 2), ("add", 5)])
@example(steps=[("unlink", 1)])  # the same bytes written again (found by hypothesis in CI)
def test_app_reload_after_one_file_changes_shows_what_a_fresh_start_shows(built, tmp_path_factory, steps):
    """The app's own path (the load worker streaming in the first model, then the watcher's
    one-file reloads, the redraw that keeps what did not change): after every change the
    model is a fresh load's and the Topics screen shows what a fresh app shows."""
    import asyncio

    from memory_tui.tui.app import create_app

    state = tmp_path_factory.mktemp("app") / "state"
    shutil.copytree(built, state, symlinks=True)
    topics = state / "memory" / "topics"
    viewcache.forget_in_process()

    async def run():
        app = create_app(state, watch=False, background=True, insights=False, home=state.parent)
        removed: list[tuple[str, bytes]] = []
        applied: list[ModelApplied] = []
        hook = lambda m: applied.append(m) if isinstance(m, ModelApplied) else None  # noqa: E731
        async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
            while app.model is None or app.model.outline or app.loading:
                await pilot.pause(0.01)
            await _settled(app, pilot)
            for op, n in steps:
                held = {p: p.read_bytes() for p in topics.rglob("*.md")}
                touched = _change(topics, op, n, removed)
                if not touched:
                    continue
                # a rewrite may leave the bytes as they were (an "unlink" of a topic with no
                # link): the file is read again, but nothing is redrawn (no flicker)
                visible = held != {p: p.read_bytes() for p in topics.rglob("*.md")}
                before = len(applied)
                app.load_in_background(touched)
                await _settled(app, pilot)
                assert len(applied) == before + visible
                assert app.model.state.reparsed_topics == tuple(p[len("memory/topics/"):] for p in touched
                                                                if (state / p).is_file())
                assert app.model == load_model(state, home=state.parent)
                assert _topics_screen(app) == await _fresh_screen(state)

    asyncio.run(run())
