"""Property: the one-pass session overview (``sessions.overview``) gives exactly what the
reasons engine gives, on random session DAGs: each node's graph state and the tip its best
verdict names, and the Sessions list row's figures (pending turns and tokens over the offered
branches, stranded, foreign, live and runtime-only tips). Where its premises fail (a
predecessor cycle, a message id shadowed by metadata) it must say so (``None``)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.format.config import MemoryConfig
from memory_tui.core.format.tokens import CharCounter
from memory_tui.sessions import graph as G
from memory_tui.sessions.marks import MARK_KEY
from memory_tui.sessions.overview import PENDING_K, STRANDED_K, ARCHIVED_K, session_overview
from memory_tui.sessions.reasons import WriterContext, explain_session
from memory_tui.sessions.records import acyclic
from session_files import load_one_session

WS = "w-0000aaaa"
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def sessions(draw):
    n = draw(st.integers(1, 45))
    nodes = [{"id": "ROOT", "created_at": 0.0, "seq": 0, "role": "user", "name": "", "input": None, "output": "",
              "caller": "", "predecessor": None, "reads": [], "metadata": {"display": "root"}}]
    for i in range(1, n + 1):
        back = draw(st.one_of(st.just(1), st.just(1), st.integers(1, i)))
        pred = nodes[max(0, len(nodes) - back)]["id"]
        role = draw(st.sampled_from(["user", "llm", "llm", "code"]))
        meta: dict = {}
        mark = draw(st.sampled_from([WS, WS, None, None, None, "w-ffffffff"]))
        if mark is not None:
            meta[MARK_KEY] = mark
        twist = draw(st.integers(0, 29))
        if twist < 2:
            meta["rewound"] = True
        elif twist < 4:
            meta["display"] = "runtime"
        elif twist == 4:
            meta["covers_ids"] = ["x"]
        elif twist == 5:
            meta["source"] = "merge_turn"
        elif twist == 6:
            meta["id"] = f"shadow{i}"  # a metadata id shadowing the node's: the overview steps aside
        text = draw(st.sampled_from(["", "hi", "a longer turn of text", "plan", "two\nlines"]))
        nodes.append({"id": f"n{i}", "created_at": float(i), "seq": i, "role": role,
                      "name": "bash" if role == "code" else "", "input": None, "output": text,
                      "caller": "" if role != "code" else "ROOT", "predecessor": pred, "reads": [], "metadata": meta})
    twist = draw(st.sampled_from(["none", "none", "none", "cycle", "dangling"]))
    if twist != "none" and n >= 3:
        victim = nodes[draw(st.integers(1, n))]
        victim["predecessor"] = nodes[draw(st.integers(max(1, n - 3), n))]["id"] if twist == "cycle" else "missing"
    ids = [x["id"] for x in nodes[1:]]
    head = draw(st.sampled_from(ids)) if ids else None
    archived = draw(st.lists(st.sampled_from(ids), max_size=4)) if ids else []
    meta = {"head_id": head, "merged_heads": [], "branches": {t: {"archived": True} for t in archived}}
    return nodes, meta


def _reference_row(se) -> dict:
    """The list row's figures as the engine derives them (the Sessions model's fallback)."""
    f = se.row_figures()
    return {"pending_turns": f.pending_turns, "pending_tokens": f.pending_tokens, "foreign": f.foreign,
            "stranded": f.stranded, "live": f.live_tips, "runtime_only": f.runtime_only_tips,
            "tips": tuple(se.analysis.tips)}


@SETTINGS
@given(shape=sessions(), threshold=st.integers(1, 60))
def test_overview_equals_the_engine(shape, threshold):
    nodes, meta = shape
    session = load_one_session(nodes, meta)
    counter = CharCounter()
    ov = session_overview(session, WS, counter)
    shadowed = any(isinstance(n["metadata"].get("id"), str) for n in nodes)
    if ov is None:
        assert shadowed or not acyclic(session)
        return
    assert acyclic(session)
    ctx = WriterContext(workspace_id=WS, config=MemoryConfig(trigger_tokens=threshold), now=100.0)
    se = explain_session(session, ctx, counter)
    assert G.nodes_from_overview(ov) == G.nodes_from_session(se)
    for nid, kind in ov.kinds.items():
        if kind in (PENDING_K, STRANDED_K, ARCHIVED_K):
            assert ov.best_tip[nid] == se.nodes[nid].tip, nid
    for nid in session.nodes:
        assert ov.tip_of.get(nid) == se.tip_for(nid), nid  # the engine's, which the app falls back on
    ref = _reference_row(se)
    got = {"pending_turns": ov.pending_turns, "pending_tokens": ov.pending_tokens, "foreign": ov.foreign,
           "stranded": ov.stranded, "live": ov.live_tips, "runtime_only": ov.runtime_only_tips, "tips": ov.tips}
    assert got == ref
    assert ov.walk_total == sum(len(ta.chain) for ta in se.analysis.tips.values())
