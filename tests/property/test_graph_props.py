"""Property tests for the Sessions graph layout: random DAGs (with cycles, unknown parents,
duplicate ids and seq gaps thrown in) never make it raise; every node is drawn exactly once;
every edge runs, lane by lane, from one endpoint's row to the other's; the width bound holds."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.sessions import graph as G

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def dags(draw):
    n = draw(st.integers(1, 40))
    nodes = []
    seq = 0
    for i in range(n):
        seq += draw(st.sampled_from([1, 1, 1, 2, 5]))
        parents = []
        if i:
            parents = draw(st.lists(st.integers(0, i - 1), max_size=3))
            parents = [f"n{p}" for p in parents]
        if draw(st.integers(0, 19)) == 0:
            parents.append(draw(st.sampled_from(["ghost", f"n{min(n - 1, i + 1)}", f"n{i}"])))  # unknown, forward, self
        nid = f"n{i}" if draw(st.integers(0, 29)) else f"n{max(0, i - 1)}"  # now and then a duplicate id
        nodes.append(G.LayoutNode(
            nid,
            tuple(parents),
            seq if draw(st.integers(0, 9)) else draw(st.integers(0, 3 * n)),  # sometimes out of order
            state=draw(st.sampled_from(G.STATES[:-1])),
            markers=tuple(draw(st.lists(st.sampled_from(G.MARKERS), max_size=2, unique=True))),
            tool=draw(st.booleans()),
            text="x",
        ))
    return nodes


options = st.builds(
    G.LayoutOptions,
    reverse=st.booleans(),
    collapse=st.booleans(),
    linear_min=st.integers(1, 6),
    linear_keep=st.integers(0, 2),
    tool_min=st.integers(1, 3),
)


def _key(lay, nid):
    return lay.rows[lay.row_of[nid]].id


@SETTINGS
@given(dags(), options, st.integers(1, 8))
def test_layout_invariants(nodes, opts, max_lanes):
    lay = G.layout(nodes, opts)

    # Every distinct node id is drawn exactly once (alone, or inside one collapsed row).
    seen = [m for r in lay.rows for m in r.members]
    assert sorted(seen) == sorted({n.id for n in nodes})
    assert all(r.kind != "gap" or not r.members for r in lay.rows)

    rows = lay.rows
    for i, r in enumerate(rows):
        w = r.width
        assert len(r.above) == len(r.below) == len(r.hgap) == w
        # Lane continuity between neighbouring rows.
        if i + 1 < len(rows):
            nxt = rows[i + 1]
            pad = max(w, nxt.width)
            assert r.below + (None,) * (pad - w) == nxt.above + (None,) * (pad - nxt.width)
        # Every occupied lane is drawn: a line up where an edge arrives, down where one leaves.
        for lane in range(w):
            if r.above[lane] is not None:
                assert r.cells[lane] & G.U, (i, lane)
            if r.below[lane] is not None:
                assert r.cells[lane] & G.D, (i, lane)
            if r.cells[lane] & G.R:
                assert lane + 1 < w and r.hgap[lane] and r.cells[lane + 1] & G.L, (i, lane)
            if r.cells[lane] & G.L:
                assert lane > 0 and r.hgap[lane - 1] and r.cells[lane - 1] & G.R, (i, lane)
        # An edge starts or ends only at one of its own endpoints; a gap row only passes lines.
        above = {e for e in r.above if e is not None}
        below = {e for e in r.below if e is not None}
        if r.kind == "gap":
            assert above == below
            continue
        assert 0 <= r.lane < w
        for e in above ^ below:
            assert r.id in e, (i, e)
        for e in above & below:
            assert r.id not in e, (i, e)
        # Within the row, a line joins the lane an edge arrives on to the lane it leaves on (or
        # to the node, where it starts or ends).
        lane_above = {e: k for k, e in enumerate(r.above) if e is not None}
        lane_below = {e: k for k, e in enumerate(r.below) if e is not None}
        for e in above | below:
            a = lane_above.get(e, r.lane)
            b = lane_below.get(e, r.lane)
            for k in range(min(a, b), max(a, b)):
                assert r.hgap[k], (i, e, k)
        # Width bound.
        for g in (G.UTF8, G.ASCII):
            drawn = G.draw_graph(r, g, max_lanes)
            assert len(drawn) <= 2 * max(1, max_lanes)
            node_glyph = g.states[G.COLLAPSED_S] if r.kind == "collapsed" else g.states[r.node.state]
            assert node_glyph in drawn  # a folded node stays visible in the fold slot

    # Every kept edge connects its two rows through a lane (edges name display rows: a node,
    # or the collapsed row holding it; top-down or reversed, the upper row sends, the lower receives).
    dropped = set(lay.dropped_edges)
    for child, parents in lay.parents.items():
        for parent in parents:
            a, b = _key(lay, parent), _key(lay, child)
            if a == b or (a, b) in dropped:
                continue
            ra, rb = lay.row_of[parent], lay.row_of[child]
            upper, lower = min(ra, rb), max(ra, rb)
            assert (rb > ra) != opts.reverse, (a, b)  # parents above children unless reversed
            edge = (a, b)
            assert edge in rows[upper].below and edge in rows[lower].above, edge
            for k in range(upper + 1, lower):
                assert edge in rows[k].above and edge in rows[k].below, (edge, k)


# --------------------------------------------------------------------------- real sessions


import json  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from memory_tui.core.format.config import MemoryConfig  # noqa: E402
from memory_tui.core.format.tokens import CharCounter  # noqa: E402
from memory_tui.sessions.reasons import WriterContext, explain_session  # noqa: E402
from memory_tui.sessions.store import load_sessions  # noqa: E402

WS = "w-0000aaaa"
OWNER = {"speaker_kind": "owner", "speaker_id": "owner/local", "speaker_display": "Owner",
         "principal_id": "owner/install/0123456789abcdef", "authority_tier": "owner", "interaction": "interactive"}


@st.composite
def session_files(draw):
    n = draw(st.integers(1, 25))
    ids = ["ROOT"] + [f"n{i}" for i in range(1, n)]
    nodes = [{"id": "ROOT", "seq": 0, "role": "user", "output": "", "caller": "", "predecessor": None,
              "metadata": {"display": "root"}}]
    for i in range(1, n):
        role = draw(st.sampled_from(["user", "llm", "llm", "code"]))
        pred = draw(st.one_of(st.none(), st.sampled_from(ids[:i] + ["ghost"]), st.sampled_from(ids)))
        caller = draw(st.sampled_from(["", "ROOT", "elsewhere_reply", *ids[:i]]))
        meta = dict(OWNER) if draw(st.booleans()) else {}
        for key, value in (("rewound", True), ("spawn_branch_root", True), ("covers_ids", ids[:2]),
                           ("display", "runtime"), ("function", "attach"), ("source", "merge_turn"),
                           ("memory_written_scriptorium", WS), ("memory_written_scriptorium", "w-ffffffff")):
            if draw(st.integers(0, 7)) == 0:
                meta[key] = value
        nodes.append({"id": ids[i], "seq": i + draw(st.integers(0, 2)), "role": role,
                      "output": draw(st.sampled_from(["text", "", None, {"k": 1}, "line one\nline two"])),
                      "caller": caller, "predecessor": pred, "metadata": meta})
    head = draw(st.sampled_from(ids + [None]))
    merged = draw(st.lists(st.sampled_from(ids), max_size=2))
    archived = draw(st.lists(st.sampled_from(ids), max_size=2))
    meta = {"id": "s", "head_id": head, "updated_at": 1.0, "merged_heads": merged,
            "branches": {a: {"archived": True} for a in archived}}
    return nodes, meta


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session_files(), st.booleans(), st.booleans())
def test_any_session_lays_out_and_draws(files, reverse, ascii_):
    nodes, meta = files
    with tempfile.TemporaryDirectory() as tmp:
        sdir = Path(tmp) / "sessions" / "s"
        (sdir / "history").mkdir(parents=True)
        (sdir / ".git").mkdir()
        for node in nodes:
            full = {"created_at": 1.0, "name": "", "input": None, "reads": [], **node}
            (sdir / "history" / f"{node['seq']:04d}-{node['role'][0]}-{node['id']}.json").write_text(json.dumps(full))
        (sdir / "meta.json").write_text(json.dumps(meta))
        session = load_sessions(Path(tmp)).sessions["s"]
        ctx = WriterContext(workspace_id=WS, config=MemoryConfig(trigger_tokens=50), now=10.0, session_end={})
        se = explain_session(session, ctx, CharCounter())
        lay = G.layout_session(se, G.LayoutOptions(reverse=reverse))
        assert sorted(m for r in lay.rows for m in r.members) == sorted(session.nodes)
        lines = G.draw(lay, ascii=ascii_, max_lanes=4)
        assert len(lines) == len(lay.rows) and all(line.isascii() for line in lines) == ascii_
        for nid in session.nodes:
            lin = G.lineage(lay, nid)
            assert nid not in lin.ancestors and nid not in lin.descendants
