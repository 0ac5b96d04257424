"""Property: the reasons engine's shared path (per-node facts computed once per session,
tips reusing the walks and verdicts of earlier tips, verdicts computed when looked up) gives
exactly what computing every tip on its own gives (the reference engine,
``tests/reference/reasons_plain.py``), on random session DAGs: forks off shared trunks,
scattered marks (written, stranded, pending, foreign), rewound and tool rows, archived tips,
and now and then a predecessor cycle or a dangling link (where the shared walk must step
aside)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.format.config import MemoryConfig
from memory_tui.core.format.tokens import CharCounter
from memory_tui.sessions.marks import MARK_KEY
from memory_tui.sessions.reasons import WriterContext, explain_session
from memory_tui.sessions.records import analyze_session
from session_files import load_one_session

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))  # the per-tip reference engine
from reasons_plain import analyze_session_plain, explain_session_plain  # noqa: E402

WS = "w-0000aaaa"
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def forked_sessions(draw):
    n = draw(st.integers(1, 40))
    nodes = [{"id": "ROOT", "created_at": 0.0, "seq": 0, "role": "user", "name": "", "input": None, "output": "",
              "caller": "", "predecessor": None, "reads": [], "metadata": {"display": "root"}}]
    for i in range(1, n + 1):
        # Mostly extend a recent node (long shared trunks), sometimes fork further back.
        back = draw(st.one_of(st.just(1), st.integers(1, i)))
        pred = nodes[max(0, len(nodes) - back)]["id"]
        role = draw(st.sampled_from(["user", "llm", "llm", "code"]))
        meta: dict = {}
        mark = draw(st.sampled_from([WS, WS, None, None, "w-ffffffff"]))
        if mark is not None:
            meta[MARK_KEY] = mark
        if draw(st.integers(0, 9)) == 0:
            meta["rewound"] = True
        if draw(st.integers(0, 11)) == 0:
            meta["display"] = "runtime"
        text = draw(st.sampled_from(["", "hi", "a longer turn of text", "<|endoftext|>", "plan"]))
        nodes.append({"id": f"n{i}", "created_at": float(i), "seq": i, "role": role,
                      "name": "bash" if role == "code" else "", "input": None, "output": text,
                      "caller": "" if role != "code" else "ROOT", "predecessor": pred, "reads": [], "metadata": meta})
    twist = draw(st.sampled_from(["none", "cycle", "cycle", "dangling"]))
    if twist != "none" and n >= 3:
        # A cycle through the trunk: the newest node becomes an ancestor of an older one,
        # so tips inside the loop stop their walks at different places.
        victim = nodes[draw(st.integers(1, n))]
        victim["predecessor"] = nodes[draw(st.integers(max(1, n - 3), n))]["id"] if twist == "cycle" else "missing"
    ids = [x["id"] for x in nodes[1:]]
    head = draw(st.sampled_from(ids)) if ids else None
    archived = draw(st.lists(st.sampled_from(ids), max_size=3)) if ids else []
    meta = {"head_id": head, "merged_heads": [], "branches": {t: {"archived": True} for t in archived}}
    return nodes, meta


def _turns(se):
    return {t: [(tv.id, tv.verdict, tv.tip, [r.to_json() for r in tv.reasons]) for tv in te.turns]
            for t, te in se.tips.items()}


@SETTINGS
@given(shape=forked_sessions(), threshold=st.integers(1, 60))
def test_shared_path_equals_every_tip_on_its_own(shape, threshold):
    nodes, meta = shape
    session = load_one_session(nodes, meta)
    counter = CharCounter()
    fast = analyze_session(session, WS, threshold, counter)
    plain = analyze_session_plain(session, WS, threshold, counter)
    assert list(fast.tips) == list(plain.tips)
    for tip in plain.tips:
        assert fast.tips[tip] == plain.tips[tip], tip
    ctx = WriterContext(workspace_id=WS, config=MemoryConfig(trigger_tokens=threshold), now=100.0)
    a = explain_session(session, ctx, counter)
    b = explain_session_plain(session, ctx, counter)
    assert json.dumps(a.to_json(), sort_keys=True) == json.dumps(b.to_json(), sort_keys=True)
    assert _turns(a) == _turns(b)
    assert {k: (v.verdict, v.tip, v.reasons) for k, v in a.nodes.items()} == \
           {k: (v.verdict, v.tip, v.reasons) for k, v in b.nodes.items()}
    # The lazy form (the Sessions view's): nodes looked up before any tip, then the tips in
    # reverse order, and still every verdict names the tip the eager ranking chose.
    lazy = explain_session(session, ctx, counter, lazy=True)
    assert list(lazy.nodes) == list(a.nodes)
    assert {k: lazy.nodes[k] for k in reversed(list(a.nodes))} == dict(a.nodes)
    assert list(lazy.tips) == list(a.tips)
    for tip in reversed(list(a.tips)):
        assert lazy.tips[tip] == a.tips[tip], tip
    again = explain_session(session, ctx, counter, lazy=True)
    for tip in a.tips:  # tips first, then the nodes: the same verdicts either way
        assert again.tips[tip] == a.tips[tip], tip
    assert dict(again.nodes) == dict(a.nodes)
    assert json.dumps(again.to_json(), sort_keys=True) == json.dumps(a.to_json(), sort_keys=True)
