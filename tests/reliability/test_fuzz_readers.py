"""Hostile and broken input for every reader (issue 14): whatever the bytes, each reader returns
a value with located problems and never raises. Small example counts here; the slow job sets
``MEMORY_TUI_FUZZ_EXAMPLES`` (10 000 per reader)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.format.config import load_memory_config
from memory_tui.core.format.sources import index_file
from memory_tui.core.format.topics import parse_topic
from memory_tui.core.store.workspace import load_runtime_state, load_writer_status
from memory_tui.pipeline.settings import load_settings
from memory_tui.sessions.store import load_session_dir

EXAMPLES = int(os.environ.get("MEMORY_TUI_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)

# Bytes near the formats: fragments of real syntax mixed with junk, NULs, invalid UTF-8, controls.
FRAGMENTS = [b"# ", b"## ", b"[^e1]", b"[^e1]: Time: `2026-11`; Sources: [s](openprogram/a/b)\n", b"\n", b"{", b"}", b"[",
             b"]", b'"', b":", b",", b"<!-- source-id: openprogram/a/b -->", b"<!-- memory-tui-format: v2 -->", b"\x00",
             b"\xff\xfe", b"\xc3", b"\x1b[2J", b"\xe2\x80\xae", b"null", b"true", b"1e999", b"-0", b'"metadata"',
             b'"id"', b"```", b"> ", b"- ", b"|", b"\r\n", b"\t", b"\\u0000", b"\xed\xa0\x80"]
junk = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=12)), max_size=40).map(b"".join)
json_like = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20)),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=12), kids, max_size=5)),
    max_leaves=20,
)
json_bytes = st.one_of(junk, json_like.map(lambda v: json.dumps(v).encode()))


@pytest.fixture(scope="module")
def work():
    d = Path(tempfile.mkdtemp(prefix="memory-tui-fuzz-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _session(state: Path):
    return load_session_dir("s1", state / "sessions" / "s1", state, {}, True)


def _state(work: Path) -> Path:
    state = work / "state"
    (state / "memory" / ".scriptorium").mkdir(parents=True, exist_ok=True)
    (state / "sessions" / "s1" / "history").mkdir(parents=True, exist_ok=True)
    return state


@FUZZ
@given(data=junk)
def test_topic_reader(data):
    text = data.decode("utf-8", errors="surrogateescape")
    topic = parse_topic("topics/fuzz.md", text)
    for p in topic.problems:
        assert p.path and (p.line is None or p.line >= 1)


@FUZZ
@given(data=junk)
def test_v2_archive_reader(data):
    entry = index_file("sources/openprogram/_v2/fuzz.md", data)
    if not entry.complete:
        assert entry.problem is not None


@FUZZ
@given(node=json_bytes, meta=json_bytes)
def test_node_and_meta_readers(work, node, meta):
    state = _state(work)
    (state / "sessions" / "s1" / "history" / "0001-n1.json").write_bytes(node)
    (state / "sessions" / "s1" / "meta.json").write_bytes(meta)
    session = _session(state)
    for p in session.problems:
        assert p.path


@FUZZ
@given(data=json_bytes)
def test_runtime_json_reader(work, data):
    state = _state(work)
    (state / "memory" / ".scriptorium" / "runtime.json").write_bytes(data)
    _value, problems = load_runtime_state(state / "memory")
    assert all(p.path for p in problems)


@FUZZ
@given(data=json_bytes)
def test_config_json_reader(work, data):
    state = _state(work)
    (state / "config.json").write_bytes(data)
    cfg = load_memory_config(state)
    assert all(p.path == "config.json" for p in cfg.problems)


@FUZZ
@given(data=json_bytes)
def test_writer_status_reader(work, data):
    state = _state(work)
    (state / "memory" / ".scriptorium" / "writer-status.json").write_bytes(data)
    _value, problems = load_writer_status(state / "memory")
    assert all(p.path for p in problems)


TOML_FRAGMENTS = [b"[writer]\n", b"name = ", b'"command"', b"timeout = ", b"1e9", b"-1", b"[[x]]", b"=", b"\n", b"\x00",
                  b"\xff", b'"""', b"'", b"[", b"]", b"{", b"}", b"inf", b"nan", b"true"]


@FUZZ
@given(data=st.lists(st.one_of(st.sampled_from(TOML_FRAGMENTS), st.binary(max_size=8)), max_size=30).map(b"".join))
def test_config_toml_reader(work, data):
    from memory_tui.core.format.errors import MemoryError

    path = work / "config.toml"
    path.write_bytes(data)
    try:
        load_settings(path, env={})
    except MemoryError as exc:  # a refusal must say where
        assert exc.path or "config.toml" in str(exc)


# ------------------------------------------------------------------------- sized extremes


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("target", ["node", "meta", "runtime", "config", "writer-status"])
def test_json_nested_100000_deep_is_a_located_problem(tmp_path, target):
    state = _state(tmp_path)
    paths = {"node": state / "sessions/s1/history/0001-n1.json", "meta": state / "sessions/s1/meta.json",
             "runtime": state / "memory/.scriptorium/runtime.json", "config": state / "config.json",
             "writer-status": state / "memory/.scriptorium/writer-status.json"}
    paths[target].write_text(DEEP)
    if target in ("node", "meta"):
        problems = _session(state).problems
    elif target == "runtime":
        problems = load_runtime_state(state / "memory")[1]
    elif target == "config":
        problems = load_memory_config(state).problems
    else:
        problems = load_writer_status(state / "memory")[1]
    assert problems and all(p.path for p in problems)


def test_5000_nested_headings_and_footnote_loops():
    text = "".join(f"{'#' * (1 + i % 6)} h{i}\n\n" for i in range(5000))
    text += "Loop.[^a]\n\n[^a]: see [^b]\n[^b]: see [^a]\n"
    topic = parse_topic("topics/deep.md", text)
    assert topic.problems  # the loop / uncited definitions are reported, with a line
    assert all(p.line is None or 1 <= p.line <= text.count("\n") + 1 for p in topic.problems)


def test_forged_source_id_comment_inside_content_is_not_a_frame():
    from memory_tui.core.format.sources import SourceRecord, render_frame

    rec = SourceRecord("openprogram", "t", "m1", 1, "user",
                       "hello\n<!-- source-id: openprogram/t/forged -->\nstill me", timestamp="2026-11-30T05:00:00+00:00")
    data = ("<!-- memory-tui-format: v2 -->\n\n" if False else "") + render_frame(rec)
    from memory_tui.core.format.sources import MARKER

    entry = index_file("sources/openprogram/_v2/t.md", (MARKER + "\n\n" + data).encode())
    assert "openprogram/t/forged" not in set(entry.ids)
