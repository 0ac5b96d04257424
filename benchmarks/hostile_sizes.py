"""Hostile sizes (issue 14): how memory-tui copes with inputs far beyond normal, each a clear
result (a value, or located problems), never a traceback.

Cases: a 50 MB session node; a topic of 100 000 lines (25 000 records); 5 000 nested
headings; footnote loops. Each runs in its own child process, so its wall time, CPU time and
peak memory (the child's own VmHWM) are its own; the first row is the child doing nothing
but importing memory-tui, the floor under every other row. Prints a table (and JSON lines
with ``--out``); asserts nothing, the machine is shared and the figures are what they are.

Run: python benchmarks/hostile_sizes.py [--node-mb 50] [--lines 100000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PRELUDE = textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    state = Path(sys.argv[1])
    def done(**kw):
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork and exec, so a child would
        # report the parent's size at fork; the high-water mark belongs to the new image
        hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
        kw["peak_mb"] = int(hwm[0].split()[1]) / 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print("RESULT " + json.dumps(kw))
""")

# The same status run is measured on both hostile states.
STATUS_JSON = textwrap.dedent("""
        import contextlib, io
        from memory_tui.cli import main
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["--state", str(state), "status", "--json"])
        body = json.loads(out.getvalue())
        probs = body.get("problems", [])
        first = f": {str(probs[0].get('message', probs[0]))[:50]}" if probs else ""
        done(result=f"exit {code}, {len(probs)} problems{first}")
    """)

CASES = {
    "imports only (floor)": "import memory_tui.cli, memory_tui.core.format.topics, memory_tui.sessions.store\ndone(result='ok')",
    "huge node: session reader": textwrap.dedent("""
        from memory_tui.sessions.store import load_session_dir
        s = load_session_dir("big", state / "sessions" / "big", state, {}, True)
        first = f": {s.problems[0].code} {s.problems[0].message[:60]}" if s.problems else ""
        done(result=f"{len(s.nodes)} nodes, {len(s.problems)} problems{first}")
    """),
    "huge node: memory-tui status": STATUS_JSON,
    "long topic: parse": textwrap.dedent("""
        from memory_tui.core.format.topics import parse_topic
        text = (state / "memory/topics/huge.md").read_text(encoding="utf-8")
        t = parse_topic("topics/huge.md", text)
        first = f": {t.problems[0].message[:50]} (line {t.problems[0].line})" if t.problems else ""
        done(result=f"{text.count(chr(10))} lines, {len(t.units)} records, {len(t.problems)} problems{first}")
    """),
    "long topic: memory-tui status": STATUS_JSON,
    "long topic: edit --check": textwrap.dedent("""
        import contextlib, io
        from memory_tui.cli import main
        out = io.StringIO()
        src = state / "memory/topics/huge.md"
        with contextlib.redirect_stdout(out):
            code = main(["--state", str(state), "--json", "edit", "topics/huge.md", "--from", str(src), "--check"])
        body = json.loads(out.getvalue() or "{}")
        err = body.get("error") or {}
        done(result=f"exit {code}, ok={body.get('ok')}" + (f", {err.get('code')} line {err.get('line')}: {str(err.get('message'))[:40]}" if err else ""))
    """),
    "5 000 nested headings: parse": textwrap.dedent("""
        from memory_tui.core.format.topics import parse_topic
        text = "".join(f"{'#' * (1 + i % 6)} h{i}\\n\\n" for i in range(5000)) + "Fact.[^e1]\\n\\n[^e1]: Time: `2026-11`; Sources: [s](openprogram/a/b)\\n"
        t = parse_topic("topics/deep.md", text)
        located = all(p.line is not None for p in t.problems)
        done(result=f"{len(t.units)} records, {len(t.problems)} problems, all located: {located}")
    """),
    "footnote loops: parse": textwrap.dedent("""
        from memory_tui.core.format.topics import parse_topic
        text = "# Loops\\n\\n" + "".join(f"Fact {i}.[^a{i}]\\n\\n[^a{i}]: see [^b{i}]\\n[^b{i}]: see [^a{i}]\\n\\n" for i in range(2000))
        t = parse_topic("topics/loops.md", text)
        codes = sorted({p.code for p in t.problems})
        done(result=f"{len(t.problems)} problems {codes}, first at line {t.problems[0].line if t.problems else None}")
    """),
}


def build(root: Path, node_mb: int, lines: int) -> tuple[Path, Path]:
    """Two small real workspaces: one with a session holding one huge node, one with one huge
    topic (apart, so each row measures one of them)."""
    sys.path.insert(0, str(REPO))
    from memory_tui.core.tx import api as tx
    from memory_tui.core.format.sources import SourceRecord
    from memory_tui.core.store.archives import append_records

    state = root / "node-state"
    mem = state / "memory"
    (mem / "topics").mkdir(parents=True)
    recs = [SourceRecord("openprogram", "sess-big", f"m{i:03d}", i + 1, "user", f"message {i}",
                         timestamp="2026-11-30T05:00:00+00:00") for i in range(6)]
    append_records(mem, recs)
    ids = [r.source_id for r in recs]
    r = tx.staged_edit(state, "topics/core.md", f"# Core\n\nThe user is Ada.[^e1]\n\n[^e1]: Time: `2026-11-01`; Sources: [s]({ids[0]})\n",
                       git_commit="off")
    assert r.ok, r
    hist = state / "sessions" / "big" / "history"
    hist.mkdir(parents=True)
    (state / "sessions" / "big" / "meta.json").write_text(json.dumps({"id": "big", "title": "big", "head_id": "n2"}))
    (hist / "0001-u-n1.json").write_text(json.dumps({"id": "n1", "role": "user", "seq": 1, "input": "hi",
                                                     "created_at": "2026-11-30T05:00:00+00:00"}))
    chunk = "All work and no play makes Jack a dull boy. " * 24 + "\n"
    big = chunk * (node_mb * 1024 * 1024 // len(chunk))
    with open(hist / "0002-a-n2.json", "w", encoding="utf-8") as f:
        json.dump({"id": "n2", "role": "assistant", "seq": 2, "predecessor": "n1", "output": big,
                   "created_at": "2026-11-30T05:00:01+00:00"}, f)
    from memory_tui.core.format.sources import anchor
    from memory_tui.core.format.topics import block_id

    topic_state = root / "topic-state"
    shutil.copytree(state, topic_state, symlinks=True)
    shutil.rmtree(topic_state / "sessions")
    mem = topic_state / "memory"

    # committed form (block ids, evidence ids, archive links), as the normaliser writes it
    out = ["# Huge", ""]
    n = 0
    seen: set[str] = set()
    while len(out) + 4 <= lines:
        link = f"../sources/openprogram/_v2/sess-big.md#{anchor(ids[n % 6])}"
        salt = 0
        while (bid := block_id("huge.md", f"{n}/{salt}", 0)) in seen:  # 8 hex: 25 000 ids can collide
            salt += 1
        seen.add(bid)
        out += [f"Record {n} about item {n % 97}.[^e-{n:010x}] ^{bid}", "",
                f"[^e-{n:010x}]: Time: `2026-11-01`; Sources: [s]({link})", ""]
        n += 1
    out += [""] * (lines - len(out))
    (mem / "topics" / "huge.md").write_text("\n".join(out) + "\n", encoding="utf-8")
    return state, topic_state


def run_case(name: str, body: str, state: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    import time

    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", PRELUDE + body, str(state)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=REPO)
    out, err = proc.communicate()
    wall = time.monotonic() - t0
    return {"case": name, "wall_s": round(wall, 2), "out": out.decode(), "err": err.decode(), "code": proc.returncode}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--node-mb", type=int, default=50)
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import resource

    work = Path(tempfile.mkdtemp(prefix="memory-tui-hostile-"))
    try:
        node_state, topic_state = build(work, args.node_mb, args.lines)
        node = node_state / "sessions/big/history/0002-a-n2.json"
        print(f"inputs: node {node.stat().st_size / 1e6:.1f} MB; topic {args.lines} lines "
              f"({(topic_state / 'memory/topics/huge.md').stat().st_size / 1e6:.1f} MB)")
        print(f"{'case':<40} {'wall s':>8} {'cpu s':>7} {'peak MB':>8}  result")
        rows = []
        for name, body in CASES.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            row = run_case(name, body, node_state if name.startswith("huge node") else topic_state)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            row["cpu_s"] = round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2)
            row["peak_mb"] = None
            res = [line[7:] for line in row["out"].splitlines() if line.startswith("RESULT ")]
            if row["code"] == 0 and res:
                got = json.loads(res[-1])
                row["result"], row["peak_mb"] = got["result"], round(got["peak_mb"], 1)
            else:
                tail = row["err"].strip().splitlines()[-1:] or ["(no output)"]
                row["result"] = f"FAILED exit {row['code']}: {tail[0][:120]}" + (" (traceback)" if "Traceback" in row["err"] else "")
            rows.append(row)
        return _finish(rows, args.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _finish(rows: list[dict], out: Path | None) -> int:
    bad = 0
    for row in rows:
        peak = f"{row['peak_mb']:.0f}" if row.get("peak_mb") else "-"
        print(f"{row['case']:<40} {row['wall_s']:>8.2f} {row['cpu_s']:>7.2f} {peak:>8}  {row['result']}")
        bad += row["result"].startswith("FAILED")
        if out is not None:
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps({k: v for k, v in row.items() if k not in ("out", "err")}) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
