"""The persistent layout table (``sessions.layout_table``) gives exactly the layout
``graph.layout`` computes: read back from its file, for random DAGs (cycles, unknown parents,
duplicate ids, seq gaps, folds) and options; a changed input never reads an entry of another
input; a damaged entry is a miss."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.sessions import graph as G
from memory_tui.sessions import layout_table as T

from test_graph_props import dags, options  # noqa: E402  (the same random DAGs and options)

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])


@pytest.fixture
def table(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(T, "MIN_NODES", 0)  # the random DAGs are small; every one is kept
    return tmp_path / "layouts"


def _computed(calls):
    def compute(nodes, opts):
        calls.append(1)
        return G.layout(nodes, opts)
    return compute


@SETTINGS
@given(nodes=dags(), opts=options)
def test_read_back_equals_the_layout(table, nodes, opts):
    shutil.rmtree(table, ignore_errors=True)  # one folder for every example of the run
    full = G.layout(nodes, opts)
    calls: list = []
    first = T.layout(nodes, opts, _computed(calls))
    again = T.layout(nodes, opts, _computed(calls))
    assert first == full
    key = T.table_key(nodes, opts)
    if key is None:  # not written exactly: never kept
        assert len(calls) == 2
        return
    assert len(calls) == 1  # the second came from the file
    got = T.read(key, nodes, opts)
    assert again == got == full
    # what is drawn from it too (the rows carry the very node objects of this input)
    assert G.draw(got) == G.draw(full)
    assert all(r.node is None or r.node is got.nodes[r.id] for r in got.rows)
    for nid, i in full.row_of.items():
        assert got.rows[got.row_of[nid]] == full.rows[i]


@SETTINGS
@given(nodes=dags(), opts=options, which=st.integers(0, 10 ** 6), field=st.sampled_from(
    ["state", "text", "note", "seq", "parents", "markers", "tool", "role", "id"]))
def test_a_changed_input_never_reads_another_inputs_entry(table, nodes, opts, which, field):
    T.layout(nodes, opts)
    i = which % len(nodes)
    n = nodes[i]
    value = {
        "state": G.PENDING_S if n.state != G.PENDING_S else G.WRITTEN_S,
        "text": n.text + "!",
        "note": n.note + "!",
        "seq": n.seq + 1,
        "parents": n.parents[:-1] if n.parents else ("n0",),
        "markers": n.markers[:-1] if n.markers else (G.HEAD_M,),
        "tool": not n.tool,
        "role": "llm" if n.role != "llm" else "user",
        "id": n.id + "x",
    }[field]
    changed = list(nodes)
    changed[i] = replace(n, **{field: value})
    assert T.table_key(changed, opts) != T.table_key(nodes, opts)
    assert T.layout(changed, opts) == G.layout(changed, opts)


def test_options_are_part_of_the_key(table):
    nodes = [G.LayoutNode("a", seq=1), G.LayoutNode("b", ("a",), seq=2), G.LayoutNode("c", ("a",), seq=3)]
    keys = {T.table_key(nodes, o) for o in (G.LayoutOptions(), G.LayoutOptions(reverse=True),
                                            G.LayoutOptions(collapse=False), G.LayoutOptions(tool_min=3))}
    assert len(keys) == 4
    for o in (G.LayoutOptions(), G.LayoutOptions(reverse=True)):
        assert T.layout(nodes, o) == G.layout(nodes, o)


def test_what_is_not_kept(table, monkeypatch):
    nodes = [G.LayoutNode(f"n{i}", (f"n{i - 1}",) if i else (), seq=i) for i in range(40)]
    opts = G.LayoutOptions()
    expanded = G.LayoutOptions(expanded=frozenset({"run:n2"}))
    assert T.layout(nodes, expanded) == G.layout(nodes, expanded)
    assert not table.exists() or not os.listdir(table)  # an expanded group: not written
    monkeypatch.setattr(T, "MIN_NODES", 41)
    T.layout(nodes, opts)
    assert not table.exists() or not os.listdir(table)  # a small session: computed, not written
    monkeypatch.setattr(T, "MIN_NODES", 40)
    T.layout(nodes, opts)
    assert len(os.listdir(table)) == 1


def test_a_damaged_or_foreign_entry_is_a_miss(table):
    nodes = [G.LayoutNode(f"n{i}", (f"n{i - 1}",) if i else (), seq=i) for i in range(30)]
    opts = G.LayoutOptions()
    full = G.layout(nodes, opts)
    T.layout(nodes, opts)
    key = T.table_key(nodes, opts)
    path = table / f"{key}.layout"
    good = path.read_bytes()
    from memory_tui.core.cache import envelope

    value = envelope.unpack(T.KIND, good, T.VERSION)
    assert value is not None and value[0] == T.FORMAT
    mid = len(good) // 2
    for bad in (b"", b"garbage", good[: len(good) // 2], good[:-1],
                good[:mid] + bytes([good[mid] ^ 0x20]) + good[mid + 1:],  # a flipped bit
                envelope.pack(T.KIND, ("memory-tui/layout-table/0", *value[1:]), T.VERSION),  # another format
                envelope.pack(T.KIND, value, T.VERSION - 1),  # an older envelope version
                envelope.pack("overview", value, T.VERSION)):  # another kind
        path.write_bytes(bad)
        assert T.read(key, nodes, opts) is None
        assert T.layout(nodes, opts) == full  # computed again (and written back)
    # another input's entry under this name: its key inside does not match
    other = [replace(n, text="other") for n in nodes]
    T.layout(other, opts)
    path.write_bytes((table / f"{T.table_key(other, opts)}.layout").read_bytes())
    assert T.read(key, nodes, opts) is None


def test_the_table_keeps_the_most_recent_entries(table, monkeypatch):
    monkeypatch.setattr(T, "KEEP", 3)
    base = [G.LayoutNode(f"n{i}", (f"n{i - 1}",) if i else (), seq=i) for i in range(5)]
    for k in range(6):
        T.layout([replace(n, text=str(k)) for n in base], G.LayoutOptions())
    assert len([p for p in os.listdir(table) if p.endswith(".layout")]) == 3
