"""The persistent overview table (``sessions.overview_table``) gives exactly the overview
``overview.session_overview`` computes: read back from its file, on the random sessions of
``test_overview_props`` (forks, marks of both workspaces, rewinds, runtime turns, shadowed ids,
cycles, dangling links); any change to any field of any node or of the session, to the
workspace id or to the counter is another key; a damaged entry is a miss."""

from __future__ import annotations

import shutil
from dataclasses import replace
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.format.tokens import CharCounter
from memory_tui.sessions import overview_table as T
from memory_tui.sessions.overview import session_overview
from session_files import load_one_session
from test_overview_props import WS, sessions  # noqa: E402  (the same random sessions)

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])
COUNTER = CharCounter()


@pytest.fixture
def table(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(T, "MIN_NODES", 0)  # the random sessions are small; every one is kept
    return tmp_path / "overviews"


@pytest.fixture
def computed(monkeypatch):
    calls: list = []

    def counting(*args):
        calls.append(1)
        return session_overview(*args)

    monkeypatch.setattr(T, "session_overview", counting)
    return calls


@SETTINGS
@given(shape=sessions())
def test_read_back_equals_the_overview(table, computed, shape):
    shutil.rmtree(table, ignore_errors=True)  # one folder and one count for every example of the run
    computed.clear()
    session = load_one_session(*shape)
    want = session_overview(session, WS, COUNTER)
    first = T.cached_overview(session, WS, COUNTER)
    again = T.cached_overview(session, WS, COUNTER)
    assert first == want and again == want
    if want is None:  # the engine's path: nothing kept, computed each time
        assert len(computed) == 2 and not table.exists()
        return
    assert T.table_key(session, WS, COUNTER) is not None
    assert len(computed) == 1  # the second came from the file
    assert again.session is session


def _variants(node):
    """The node with each of its fields changed in turn (a value of another type where a
    type change alone must count: ``True`` for ``1``)."""
    meta = dict(node.metadata)
    yield replace(node, id=node.id + "x")
    yield replace(node, seq=node.seq + 1)
    yield replace(node, role=node.role + "x")
    yield replace(node, name=node.name + "x")
    yield replace(node, input=("changed",))
    yield replace(node, output=(node.output, "changed"))
    yield replace(node, caller=node.caller + "x")
    yield replace(node, predecessor=None if node.predecessor else "x")
    yield replace(node, reads=node.reads + ("x",))
    yield replace(node, metadata=MappingProxyType({**meta, "extra": 1}))
    yield replace(node, metadata=MappingProxyType({**meta, "extra": True}))
    yield replace(node, created_at=node.created_at + 1.0)
    yield replace(node, file=node.file + "x")


@settings(SETTINGS, max_examples=50)
@given(shape=sessions(), pick=st.integers(0, 10_000))
def test_a_changed_session_never_reads_another_sessions_entry(table, shape, pick):
    session = load_one_session(*shape)
    key = T.table_key(session, WS, COUNTER)
    T.cached_overview(session, WS, COUNTER)  # the entry of the session as it was
    nid = list(session.nodes)[pick % len(session.nodes)]
    changed = [replace(session, nodes={**session.nodes, nid: v}) for v in _variants(session.nodes[nid])]
    changed += [replace(session, head_id=(session.head_id or "") + "x"),
                replace(session, branches_meta=MappingProxyType({"x": MappingProxyType({"archived": True})})),
                replace(session, merged_heads=session.merged_heads + ("x",)),
                replace(session, order=session.order[::-1] + ("x",))]
    keys = {key}
    for other in changed:
        got = T.table_key(other, WS, COUNTER)
        assert got not in keys
        keys.add(got)
        try:
            want = session_overview(other, WS, COUNTER)
        except KeyError:  # a variant naming a node the session does not hold: read the same way
            with pytest.raises(KeyError):
                T.cached_overview(other, WS, COUNTER)
            continue
        assert T.cached_overview(other, WS, COUNTER) == want
    assert T.table_key(session, WS + "x", COUNTER) not in keys  # the workspace decides the marks
    assert T.table_key(session, WS, CharCounter(3)) not in keys  # and the counter the tokens
    assert T.table_key(session, WS, COUNTER) == key  # the same session, the same key


def test_damaged_entries_are_misses(table, computed):
    session = load_one_session(*_linear(4))
    key = T.table_key(session, WS, COUNTER)
    want = session_overview(session, WS, COUNTER)
    assert T.cached_overview(session, WS, COUNTER) == want
    path = table / f"{key}.overview"
    good = path.read_bytes()
    from memory_tui.core.cache import envelope

    other = T._encode("0" * 64, want)
    value = envelope.unpack(T.KIND, good, T.VERSION)
    assert value is not None
    mid = len(good) // 2
    for damaged in (b"", b"garbage", good[: len(good) // 2], good[:-1], other,
                    good[:mid] + bytes([good[mid] ^ 0x20]) + good[mid + 1:],  # a flipped bit
                    envelope.pack(T.KIND, value, T.VERSION - 1),  # an older envelope version
                    envelope.pack("layout", value, T.VERSION)):  # another kind
        path.write_bytes(damaged)
        before = len(computed)
        assert T.cached_overview(session, WS, COUNTER) == want
        assert len(computed) == before + 1
        assert path.read_bytes() == good  # written again
    class Unnamed(CharCounter):  # a counter the table cannot name: never kept
        pass

    assert T.table_key(session, WS, Unnamed()) is None
    assert T.cached_overview(session, WS, Unnamed()) == want


def _linear(n):
    nodes = [{"id": "ROOT", "created_at": 0.0, "seq": 0, "role": "user", "name": "", "input": None, "output": "",
              "caller": "", "predecessor": None, "reads": [], "metadata": {"display": "root"}}]
    for i in range(1, n + 1):
        nodes.append({"id": f"n{i}", "created_at": float(i), "seq": i, "role": "user" if i % 2 else "llm",
                      "name": "", "input": None, "output": f"turn {i}", "caller": "", "predecessor": nodes[-1]["id"],
                      "reads": [], "metadata": {}})
    return nodes, {"head_id": f"n{n}", "merged_heads": [], "branches": {}}
