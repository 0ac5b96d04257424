"""Property: ``dag.MessageView`` (a node's message read one key at a time, what the record
filter uses) answers every key as the whole projection ``dag.to_message`` does, and the
record filter decides the same on it as on the projected dict; on random nodes of every role
whose metadata shadows the projection's own keys (id, role, content, caller, predecessor,
timestamp, status, ...) with values of every JSON type."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_tui.sessions.dag import MessageView, to_message
from memory_tui.sessions.records import AUTHORITY_FIELDS, _classify
from memory_tui.sessions.store import Session, parse_node

SHADOWS = ("id", "role", "content", "caller", "predecessor", "timestamp", "status", "session_id", "token_model",
           "function", "extra", "display", "source", "authority_schema", *AUTHORITY_FIELDS)
PROBES = (*SHADOWS, "rewound", "absent_key")
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["", " ", "x", "user", "assistant",
                    "runtime", "job_followup", "owner", "paired", "guest"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.lists(st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": inner}), max_size=2),
    st.dictionaries(st.sampled_from(["a", "text", "type"]), inner, max_size=2)), max_leaves=6)
SESSION = Session(id="s", dir=Path("/nowhere"), rel="sessions/s", meta={}, nodes={}, order=(), head_id=None,
                  branches_meta={}, merged_heads=(), in_registry=True, registry_entry=None, updated_at=None)


@st.composite
def nodes(draw):
    data = {
        "id": draw(st.sampled_from(["n1", "node-2"])),
        "seq": draw(st.integers(0, 5)),
        "role": draw(st.sampled_from(["user", "llm", "code", "system", ""])),
        "name": draw(st.sampled_from(["", "gpt", "bash"])),
        "input": draw(values),
        "output": draw(values),
        "caller": draw(st.sampled_from(["", "ROOT", "n0"])),
        "predecessor": draw(st.sampled_from([None, "n0"])),
        "created_at": draw(st.sampled_from([None, 0.0, 12.5])),
        "metadata": draw(st.dictionaries(st.sampled_from(SHADOWS), values, max_size=8)),
    }
    node, _ = parse_node(data, Path("/nowhere/history/1.json"), "history/1.json")
    return node


@settings(max_examples=400, deadline=None)
@given(nodes())
def test_the_view_reads_what_the_projection_holds(node):
    msg = to_message(SESSION, node)
    view = MessageView(SESSION, node)
    for key in (*PROBES, *msg):
        assert view.get(key) == msg.get(key), key
        assert view.get(key, "default") == msg.get(key, "default"), key
    assert _classify(view) == _classify(msg)
