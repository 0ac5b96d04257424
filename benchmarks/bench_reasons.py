"""The reasons engine on a many-tip session (issue 9): CPU seconds to explain a generated
session of N nodes whose turns fork often, so it has hundreds of tips.

    python benchmarks/bench_reasons.py [NODES]      # default 10 000 (the bench_graph session)

Prints a table; no timed assertions anywhere.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_graph import WS, build  # noqa: E402  the same generated session as the graph benchmark

from memory_tui.core.format.tokens import O200kCounter  # noqa: E402
from memory_tui.sessions.reasons import WriterContext, explain  # noqa: E402
from memory_tui.sessions.store import load_sessions  # noqa: E402
from memory_tui.core.format.config import MemoryConfig  # noqa: E402


def main() -> None:
    target = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    counter = O200kCounter()
    counter.count("warm up")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n = build(root, target)
        snap = load_sessions(root)
        ctx = WriterContext(workspace_id=WS, config=MemoryConfig(trigger_tokens=8000), now=10_000.0, session_end={})
        explain(snap, ctx, counter)  # token counts cached, files read: what is left is the engine
        wall0, cpu0 = time.perf_counter(), time.process_time()
        ex = explain(snap, ctx, counter)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    se = ex.sessions["big"]
    rows = [
        ("session nodes", f"{n}"),
        ("tips explained", f"{len(se.tips)}"),
        ("turn verdicts (tips x branch)", f"{sum(len(t.turns) for t in se.tips.values())}"),
        ("explain, warm counter: wall [cpu]", f"{wall * 1000:.0f} ms [{cpu:.2f} s]"),
    ]
    width = max(len(k) for k, _ in rows)
    print(f"{'measure'.ljust(width)}  value")
    print(f"{'-' * width}  -----")
    for k, v in rows:
        print(f"{k.ljust(width)}  {v}")


if __name__ == "__main__":
    main()
