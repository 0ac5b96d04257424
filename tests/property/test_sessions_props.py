"""Property tests: arbitrary node files, meta.json and DAG shapes never crash the reader, the
analysis or the reasons engine; every parse problem names its file and line."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.format.config import MemoryConfig
from memory_tui.core.format.tokens import CharCounter
from memory_tui.sessions.dag import get_branch, list_branches
from memory_tui.sessions.marks import MARK_KEY, mark_nodes
from memory_tui.sessions.reasons import WriterContext, explain
from memory_tui.sessions.records import analyze_session
from memory_tui.sessions.store import load_sessions

WS = "w-0000aaaa"
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=8))
json_value = st.recursive(json_scalar, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=5), c, max_size=3)), max_leaves=8)


def _session(root: Path, sid: str = "s") -> Path:
    sdir = root / "sessions" / sid
    (sdir / "history").mkdir(parents=True)
    (sdir / ".git").mkdir()
    return sdir


def _check_problems(snap):
    for p in snap.all_problems():
        if p.code in ("CORRUPT_FILE", "DUPLICATE_NODE", "WRITER_PRECONDITION_FAILED"):
            assert p.path, p
            assert p.line is not None and p.line >= 1, p


@SETTINGS
@given(raw=st.one_of(st.binary(max_size=200), json_value.map(lambda v: json.dumps(v).encode()),
                     st.dictionaries(st.sampled_from(["id", "seq", "role", "metadata", "predecessor", "caller", "output", "reads", "name"]),
                                     json_value, max_size=9).map(lambda d: json.dumps(d).encode())),
       meta=st.one_of(st.binary(max_size=80), json_value.map(lambda v: json.dumps(v).encode())))
def test_arbitrary_node_and_meta_files_never_raise(raw, meta):
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        sdir = _session(state)
        (sdir / "history" / "0001-u-x.json").write_bytes(raw)
        (sdir / "meta.json").write_bytes(meta)
        (state / "sessions" / "index.json").write_bytes(meta)
        snap = load_sessions(state)
        _check_problems(snap)
        session = snap.sessions["s"]
        analysis = analyze_session(session, WS, 100, CharCounter())
        ctx = WriterContext(workspace_id=WS, config=MemoryConfig(), now=0.0)
        explain(snap, ctx, CharCounter()).to_json()
        json.dumps(analysis.to_json())


ids = st.sampled_from(["ROOT", "a", "b", "c", "d", "e", "f", "g", "summary_1"])


@st.composite
def dag(draw):
    n = draw(st.integers(1, 9))
    nodes = []
    for seq in range(n):
        nid = draw(ids)
        meta = {}
        for key, strat in (
            ("display", st.sampled_from(["root", "runtime", None])),
            ("rewound", st.booleans()),
            ("source", st.sampled_from(["web", "job_followup", "agent_spawn", None])),
            ("authority_schema", st.sampled_from([1, None])),
            ("authority_tier", st.sampled_from(["owner", "mcp_browser", None])),
            (MARK_KEY, st.sampled_from([WS, "w-ffffffff", None])),
            ("function", st.sampled_from(["attach", None])),
            ("spawn_branch_root", st.booleans()),
        ):
            if draw(st.booleans()):
                value = draw(strat)
                if value is not None:
                    meta[key] = value
        nodes.append({
            "id": nid,
            "created_at": draw(st.floats(0, 10)),
            "seq": draw(st.integers(0, 12000)),
            "role": draw(st.sampled_from(["user", "llm", "code", "other"])),
            "name": draw(st.sampled_from(["", "context/summary", "bash"])),
            "input": None,
            "output": draw(st.one_of(st.text(max_size=12), st.none(), st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=5)}), max_size=2))),
            "caller": draw(st.sampled_from(["", "ROOT", "a", "b"])),
            "predecessor": draw(st.one_of(st.none(), ids)),
            "reads": [],
            "metadata": meta,
        })
    head = draw(st.one_of(st.none(), ids))
    merged = draw(st.lists(ids, max_size=2))
    branches = draw(st.dictionaries(ids, st.fixed_dictionaries({"archived": st.booleans()}), max_size=3))
    return nodes, {"head_id": head, "merged_heads": merged, "branches": branches}


@SETTINGS
@given(shape=dag(), threshold=st.integers(1, 30))
def test_random_dags_keep_the_invariants(shape, threshold):
    nodes, meta = shape
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        sdir = _session(state)
        for i, node in enumerate(nodes):
            (sdir / "history" / f"{i:04d}-{node['role'][0]}-{node['id']}.json").write_text(json.dumps(node))
        (sdir / "meta.json").write_text(json.dumps(meta))
        snap = load_sessions(state)
        _check_problems(snap)
        session = snap.sessions["s"]
        rows = list_branches(session)
        assert len({r.head_msg_id for r in rows}) == len(rows)
        assert not any(r.head_msg_id.startswith("summary_") for r in rows)
        sa = analyze_session(session, WS, threshold, CharCounter())
        for ta in sa.tips.values():
            branch = get_branch(session, ta.tip)
            assert [n.id for n in branch] == [n.id for n in ta.branch]
            assert not any(n.rewound or n.is_root for n in branch)
            rec = ta.record_ids
            pend = [r.id for r in ta.pending]
            assert rec[len(rec) - len(pend):] == pend  # a suffix
            assert not set(pend) & ta.marked
            assert not {r.id for r in ta.stranded} & set(pend)
            assert [r.id for r in ta.batch] == pend[: len(ta.batch)]
            assert ta.batch_tokens <= ta.pending_tokens
        ctx = WriterContext(workspace_id=WS, config=MemoryConfig(trigger_tokens=16000), now=5.0)
        ex = explain(snap, ctx, CharCounter())
        verdicts = ex.sessions["s"].nodes
        assert all(v.verdict in ("written", "pending", "never") and v.reasons for v in verdicts.values())
        json.dumps(ex.to_json())


@SETTINGS
@given(meta=st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda k: k != MARK_KEY), json_value, max_size=4),
       output=st.text(max_size=30), created=st.floats(allow_nan=False, allow_infinity=False))
def test_marking_changes_only_the_mark(meta, output, created):
    with tempfile.TemporaryDirectory() as tmp:
        sdir = _session(Path(tmp))
        node = {"id": "n", "created_at": created, "seq": 1, "role": "user", "name": "", "input": None, "output": output,
                "caller": "", "predecessor": None, "reads": [], "metadata": meta}
        path = sdir / "history" / "0001-u-n.json"
        path.write_text(json.dumps(node, ensure_ascii=False), encoding="utf-8")
        assert mark_nodes(sdir, ["n"], WS).marked == ("n",)
        after = json.loads(path.read_text(encoding="utf-8"))
        assert after["metadata"].pop(MARK_KEY) == WS
        assert after == node
        expected = dict(node, metadata={**meta, MARK_KEY: WS})
        assert path.read_text(encoding="utf-8") == json.dumps(expected, ensure_ascii=False)
