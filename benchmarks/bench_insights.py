"""Evidence figures and the header's counts on a 20 000-record workspace with forking sessions.

Usage: python benchmarks/bench_insights.py [--records 20000] [--sessions 50] [--repeat 3]

Builds, in a temp dir, ``--sessions`` sessions of 100 turn pairs with a 50-pair retry branch
forking at the middle, their v2 archives, and ``--records`` records in 200 topic files, each
citing two random turns of one random session. Times ``evidence_for`` (every record's
figures), ``contested`` (records with an alternative, what the header counts) and
``summarize`` (both, one call), after the snapshot is open. Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_tui.core.format.sources import SourceRecord, archive_path, render_archive, render_frame  # noqa: E402
from memory_tui.core.store.workspace import open_state  # noqa: E402
from memory_tui.insights.alternatives import contested  # noqa: E402
from memory_tui.insights.evidence import evidence_for  # noqa: E402
from memory_tui.insights.summary import summarize  # noqa: E402
from memory_tui.sessions.store import load_sessions  # noqa: E402

OWNER = {"speaker_kind": "owner", "speaker_id": "owner/local", "speaker_display": "Owner",
         "principal_id": "owner/install/0123456789abcdef", "authority_tier": "owner",
         "interaction": "interactive", "authority_schema": 1}


def _node(nid: str, seq: int, role: str, pred: str | None) -> dict:
    return {"id": nid, "created_at": 1000.0 + seq, "seq": seq, "role": role, "name": "", "input": None,
            "output": "text", "caller": "ROOT" if role == "user" else "", "predecessor": pred, "reads": [],
            "metadata": dict(OWNER, source="web")}


def build(state: Path, records: int, sessions: int) -> None:
    rng = random.Random(11)
    turns = [f"n{i}" for i in range(100)] + [f"f{i}" for i in range(50)]
    registry = {}
    for s in range(sessions):
        sid = f"s{s:03d}"
        sdir = state / "sessions" / sid / "history"
        sdir.mkdir(parents=True)
        (sdir.parent / ".git").mkdir()  # a session dir is one with .git and history/ (session spec §1.2)
        nodes, frames, pred, seq = [], [], None, 0
        for name in turns:
            if name == "f0":
                pred = "n49_reply"
            seq += 1
            nodes.append(_node(name, seq, "user", pred))
            seq += 1
            nodes.append(_node(name + "_reply", seq, "llm", name))
            pred = name + "_reply"
        for i, n in enumerate(nodes, 1):
            (sdir / f"{n['seq']:04d}-{n['role'][0]}-{n['id']}.json").write_text(json.dumps(n))
            owner = n["role"] == "user"
            frames.append(render_frame(SourceRecord(
                "openprogram", sid, n["id"], i, "user" if owner else "assistant", "text",
                f"2026-11-{1 + i % 28:02d}T00:00:00+00:00", OWNER["speaker_id"] if owner else "agent/main",
                "Owner" if owner else "agent/main", "owner" if owner else "runtime", OWNER["principal_id"], "owner")))
        (state / "sessions" / sid / "meta.json").write_text(json.dumps({"id": sid, "head_id": "n99_reply", "updated_at": 2000.0}))
        registry[sid] = {"id": sid, "updated_at": 2000.0}
        path = state / "memory" / archive_path(f"openprogram/{sid}/x")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_archive(frames))
    (state / "sessions" / "index.json").write_text(json.dumps(registry))
    per = records // 200
    for f in range(200):
        out = [f"# Topic {f}\n"]
        for r in range(per):
            n = f * per + r
            sid = f"s{rng.randrange(sessions):03d}"
            links = ", ".join(f"[t](openprogram/{sid}/{rng.choice(turns)}{rng.choice(['', '_reply'])})" for _ in range(2))
            out.append(f"Fact {n}.[^e-{n:010d}] ^b{n:07d}\n\n[^e-{n:010d}]: Time: `2026-11`; Sources: {links}\n")
        path = state / "memory" / "topics" / f"t{f:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(out))


def timed(fn, repeat: int):
    out = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-insights-") as tmp:
        state = Path(tmp) / "state"
        build(state, args.records, args.sessions)
        t0 = time.perf_counter()
        view, snap = open_state(state), load_sessions(state)
        opened = time.perf_counter() - t0
        print(f"workspace: {len(view.tree.units)} records, {args.sessions} sessions x 300 nodes "
              f"(snapshot + sessions opened in {opened:.1f} s)")
        rows = []
        b, m, ev = timed(lambda: evidence_for(view, snap), args.repeat)
        rows.append(("evidence_for (every record)", b, m, f"{sum(r.single_episode for r in ev)} single-episode"))
        b, m, c = timed(lambda: contested(view, snap), args.repeat)
        rows.append(("contested (records with an alternative)", b, m, f"{len(c.records)} records, {c.forks} forks"))
        b, m, s = timed(lambda: summarize(view, snap), args.repeat)
        rows.append(("summarize (the header's counts)", b, m, f"{len(s.pending_sources)} citing pending"))
        width = max(len(r[0]) for r in rows)
        print(f"{'operation':<{width}}  {'best s':>7}  {'median s':>8}  result")
        for name, b, m, note in rows:
            print(f"{name:<{width}}  {b:>7.2f}  {m:>8.2f}  {note}")


if __name__ == "__main__":
    main()
