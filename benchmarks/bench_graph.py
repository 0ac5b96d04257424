"""Sessions graph benchmark: prints a table (no assertions).

Generates one session of about N nodes (default 10 000): a trunk of turns with tool rows,
retry forks, a spawn branch and a merge every so often, half of it marked. Then times:
reading + explaining it (the engine, for scale), turning it into layout nodes, the layout
itself (cold, then the fingerprint cache hit), drawing all rows as text, and in a headless
Textual app the graph widget's first paint and the cost of one page of scrolling (with the
number of rows actually built, to show only the visible window is).

    python benchmarks/bench_graph.py [nodes] [pages]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from memory_tui.core.format.config import MemoryConfig  # noqa: E402
from memory_tui.core.format.tokens import O200kCounter  # noqa: E402
from memory_tui.sessions import graph as G  # noqa: E402
from memory_tui.sessions.reasons import WriterContext, explain  # noqa: E402
from memory_tui.sessions.store import load_sessions  # noqa: E402

WS = "w-0000aaaa"
OWNER = {"speaker_kind": "owner", "speaker_id": "owner/local", "speaker_display": "Owner",
         "principal_id": "owner/install/0123456789abcdef", "authority_tier": "owner", "interaction": "interactive",
         "authority_schema": 1, "source": "web"}


def build(root: Path, target: int) -> int:
    sdir = root / "sessions" / "big"
    (sdir / "history").mkdir(parents=True)
    (sdir / ".git").mkdir()
    seq = 0
    count = 0

    def put(nid, role, text, pred, caller, **meta):
        nonlocal seq, count
        node = {"id": nid, "created_at": 1000.0 + seq, "seq": seq, "role": role, "name": "bash" if role == "code" else "",
                "input": None, "output": text, "caller": caller, "predecessor": pred, "reads": [], "metadata": meta}
        (sdir / "history" / f"{seq:05d}-{role[0]}-{nid}.json").write_text(json.dumps(node))
        seq += 1
        count += 1

    put("ROOT", "user", "", None, "", display="root")
    prev = "ROOT"
    merged: list[str] = []
    i = 0
    while count < target:
        uid = f"u{i:06d}"
        mark = {"memory_written_scriptorium": WS} if count < target // 2 else {}
        put(uid, "user", f"question {i} about the plan", prev, "ROOT", **OWNER, **mark)
        put(uid + "_reply", "llm", f"answer {i} with some detail", uid, "", **OWNER, **mark)
        if i % 7 == 0:
            for t in range(3):
                put(f"{uid}_reply_t_{t}", "code", "tool output", None, uid + "_reply")
        if i % 25 == 0:  # a retry fork that stays a side tip
            put(f"r{i:06d}", "user", f"question {i} again", prev, "ROOT", **OWNER, forked_from=uid)
            put(f"r{i:06d}_reply", "llm", "another answer", f"r{i:06d}", "", **OWNER)
        if i % 90 == 0:  # a spawn branch of a few turns
            root_id = f"s{i:06d}"
            put(root_id, "user", "sub-agent task", None, uid + "_reply", **{**OWNER, "source": "agent_spawn"}, spawn_branch_root=True)
            p = root_id
            for k in range(3):
                put(f"{root_id}_{k}", "llm", "sub-agent work", p, "", **{**OWNER, "source": "agent_spawn"})
                p = f"{root_id}_{k}"
        if i % 60 == 30:  # a fork that gets merged back a few turns later
            put(f"m{i:06d}", "user", "alternative", prev, "ROOT", **OWNER)
            put(f"m{i:06d}_reply", "llm", "alternative answer", f"m{i:06d}", "", **OWNER)
            merged.append(f"m{i:06d}_reply")
        if i % 60 == 35 and merged:
            rt = {**OWNER, "source": "merge_turn", "display": "runtime"}
            put(f"mt{i:06d}", "user", "consolidate", uid + "_reply", "ROOT", **rt)
            put(f"mt{i:06d}_reply", "llm", "merged", f"mt{i:06d}", "", **rt)
            prev = f"mt{i:06d}_reply"
            seq += 2  # the deleted temporary attach pointers leave a seq gap
        else:
            prev = uid + "_reply"
        i += 1
    (sdir / "meta.json").write_text(json.dumps({"id": "big", "head_id": prev, "updated_at": 5000.0, "merged_heads": merged}))
    (root / "sessions" / "index.json").write_text(json.dumps({"big": {"id": "big", "updated_at": 5000.0}}))
    return count


def timed(fn, repeat: int = 1):
    best = None
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    return result, best


async def widget_run(se, pages: int, size=(120, 40)):
    from textual.app import App, ComposeResult

    from memory_tui.tui.widgets.session_graph import SessionGraph

    class Bench(App):
        def compose(self) -> ComposeResult:
            yield SessionGraph(id="g")

    G._CACHE.clear()  # the first paint pays for deriving nodes and the layout, as opening the view would
    G._NODES.clear()
    app = Bench()
    out = {}
    async with app.run_test(size=size) as pilot:
        graph = app.query_one(SessionGraph)
        t0 = time.perf_counter()
        graph.show("big", lambda opts: G.layout_session(se, opts))
        graph.focus()
        await pilot.pause()
        out["first_paint"] = time.perf_counter() - t0
        out["rows"] = len(graph.layout_data.rows)
        out["built_first"] = graph.rendered_rows
        costs = []
        built = []
        for _ in range(pages):
            before = graph.rendered_rows
            t0 = time.perf_counter()
            await pilot.press("pagedown")
            await pilot.pause()
            costs.append(time.perf_counter() - t0)
            built.append(graph.rendered_rows - before)
        out["page"] = sorted(costs)[len(costs) // 2]
        out["page_max"] = max(costs)
        out["built_page"] = sum(built) / len(built)
        # The widget's own share of a page: move the cursor a page and build every visible line.
        own = []
        for _ in range(pages):
            t0 = time.perf_counter()
            graph.action_page_down()
            for y in range(graph.size.height):
                graph.render_line(y)
            own.append(time.perf_counter() - t0)
        out["page_own"] = sorted(own)[len(own) // 2]
        # A no-op key through the same Pilot round trip, to read the page cost against.
        base = []
        for _ in range(pages):
            t0 = time.perf_counter()
            await pilot.press("f24")
            await pilot.pause()
            base.append(time.perf_counter() - t0)
        out["noop"] = sorted(base)[len(base) // 2]
        t0 = time.perf_counter()
        graph.select_node(graph.layout_data.rows[-1].members[-1])
        await pilot.pause()
        out["jump"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        await pilot.press("a")
        await pilot.pause()
        out["ascii"] = time.perf_counter() - t0
    return out


def main() -> None:
    target = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    pages = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    counter = O200kCounter()
    counter.count("warm up")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n = build(root, target)
        snap, t_load = timed(lambda: load_sessions(root))
        ctx = WriterContext(workspace_id=WS, config=MemoryConfig(trigger_tokens=8000), now=10_000.0, session_end={})
        ex, t_explain = timed(lambda: explain(snap, ctx, counter))
        se = ex.sessions["big"]
        nodes, t_nodes = timed(lambda: G.nodes_from_session(se), repeat=3)
        lay, t_layout = timed(lambda: G.layout(nodes), repeat=3)
        _, t_layout_full = timed(lambda: G.layout(nodes, G.LayoutOptions(collapse=False)), repeat=3)
        G.cached_layout("big", nodes)
        _, t_cached = timed(lambda: G.layout_session(se), repeat=3)
        _, t_draw = timed(lambda: G.draw(lay), repeat=3)
        w = asyncio.run(widget_run(se, pages))

    rows = [
        ("session nodes", f"{n}"),
        ("layout rows (folded / unfolded)", f"{len(lay.rows)} / {len(G.layout(nodes, G.LayoutOptions(collapse=False)).rows)}"),
        ("widest row (lanes)", f"{lay.lanes}"),
        ("tips explained (engine)", f"{len(se.tips)}"),
        ("read sessions (engine)", f"{t_load * 1000:.0f} ms"),
        ("explain session (engine)", f"{t_explain * 1000:.0f} ms"),
        ("nodes_from_session", f"{t_nodes * 1000:.1f} ms"),
        ("layout, folded (cold)", f"{t_layout * 1000:.1f} ms"),
        ("layout, nothing folded (cold)", f"{t_layout_full * 1000:.1f} ms"),
        ("layout_session, cache hit", f"{t_cached * 1000:.1f} ms"),
        ("draw every row as text", f"{t_draw * 1000:.1f} ms"),
        ("widget first paint (layout included)", f"{w['first_paint'] * 1000:.0f} ms"),
        ("rows built for first paint", f"{w['built_first']}"),
        ("page down through Pilot, median / max", f"{w['page'] * 1000:.1f} / {w['page_max'] * 1000:.1f} ms"),
        ("  a no-op key through Pilot, median", f"{w['noop'] * 1000:.1f} ms"),
        ("  widget's own cost per page (move + build lines)", f"{w['page_own'] * 1000:.1f} ms"),
        ("rows built per page", f"{w['built_page']:.0f}"),
        ("jump to last node (g)", f"{w['jump'] * 1000:.1f} ms"),
        ("ASCII toggle (repaint)", f"{w['ascii'] * 1000:.1f} ms"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  -----")
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")


if __name__ == "__main__":
    main()
