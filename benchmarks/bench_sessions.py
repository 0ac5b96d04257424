"""Session reader benchmark: prints a table (no assertions).

Builds a synthetic state dir with one large session (N turns on a trunk plus F forks every
few turns) and times discovery+parse, incremental reload, full analysis, and the reasons engine.

    python benchmarks/bench_sessions.py [turns] [forks]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from memory_tui.core.format.config import MemoryConfig
from memory_tui.core.format.tokens import O200kCounter
from memory_tui.sessions.reasons import WriterContext, explain
from memory_tui.sessions.records import analyze_session
from memory_tui.sessions.store import load_sessions

OWNER = {"speaker_kind": "owner", "speaker_id": "owner/local", "speaker_display": "Owner",
         "principal_id": "owner/install/0123456789abcdef", "authority_tier": "owner", "interaction": "interactive",
         "authority_schema": 1, "source": "web"}


def build(root: Path, turns: int, forks: int) -> None:
    sdir = root / "sessions" / "big"
    (sdir / "history").mkdir(parents=True)
    (sdir / ".git").mkdir()
    seq = 0

    def put(nid, role, text, pred, caller, **meta):
        nonlocal seq
        node = {"id": nid, "created_at": 1000.0 + seq, "seq": seq, "role": role, "name": "", "input": None, "output": text,
                "caller": caller, "predecessor": pred, "reads": [], "metadata": meta}
        (sdir / "history" / f"{seq:04d}-{role[0]}-{nid}.json").write_text(json.dumps(node))
        seq += 1

    put("ROOT", "user", "", None, "", display="root")
    prev = "ROOT"
    every = max(1, turns // max(1, forks))
    for i in range(turns):
        uid = f"u{i:06d}"
        mark = {"memory_written_scriptorium": "w-0000aaaa"} if i < turns // 2 else {}
        put(uid, "user", f"question {i} " * 20, prev, "ROOT", **OWNER, **mark)
        put(uid + "_reply", "llm", f"answer {i} " * 40, uid, "", **OWNER, **mark)
        if forks and i % every == 0:
            put(f"f{i:06d}", "user", "fork " * 10, prev, "ROOT", **OWNER)
            put(f"f{i:06d}_reply", "llm", "fork reply " * 10, f"f{i:06d}", "", **OWNER)
        prev = uid + "_reply"
    (sdir / "meta.json").write_text(json.dumps({"id": "big", "head_id": prev, "updated_at": 5000.0}))


def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    forks = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    counter = O200kCounter()
    counter.count("warm up")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root, turns, forks)
        t = time.perf_counter(); snap = load_sessions(root); rows.append(("load_sessions (cold)", time.perf_counter() - t))
        t = time.perf_counter(); snap2 = load_sessions(root, previous=snap); rows.append(("load_sessions (unchanged, incremental)", time.perf_counter() - t))
        s = snap2.sessions["big"]
        t = time.perf_counter(); sa = analyze_session(s, "w-0000aaaa", 16000, counter); rows.append((f"analyze_session ({len(sa.tips)} tips)", time.perf_counter() - t))
        ctx = WriterContext(workspace_id="w-0000aaaa", config=MemoryConfig(), now=10_000.0)
        t = time.perf_counter(); explain(snap2, ctx, counter); rows.append(("explain (all reasons)", time.perf_counter() - t))
        nodes = len(s.nodes)
    print(f"session with {nodes} nodes")
    print(f"{'step':<45} {'seconds':>10}")
    for name, secs in rows:
        print(f"{name:<45} {secs:>10.3f}")


if __name__ == "__main__":
    main()
