"""Interleaved A/B of fresh processes for `status` and pending (all sessions), child CPU via rusage (user+sys).

Usage: python benchmarks/ab_status.py STATE[,STATE...] RUNS status,pending,why,why_json (trees, states and caches from AB_* below:
before = a `git archive` of main, after = this tree; each side its own MEMORY_TUI_CACHE_DIR; one warm-up run per side
fills its caches, then RUNS alternating pairs)."""
import json, os, resource, subprocess, sys, time, statistics
TREES = {"before": os.environ.get("AB_BEFORE", "/work/s17/statfast/base"),
         "after": os.environ.get("AB_AFTER", "/work/wt-statfast")}
PY = sys.executable
STATES = os.environ.get("AB_STATES", "/work/s17/statfast")  # STATE names are folders in it (copies: this writes caches)
CACHES = os.environ.get("AB_CACHES", "/work/s17/statfast")  # cache-<side> folders
PENDING = r"""
import sys, time
from pathlib import Path
from memory_tui.core.format.config import load_memory_config
from memory_tui.core.store.workspace import read_workspace_id
from memory_tui.sessions.cache import load_summaries
s = Path(sys.argv[1]); wid = read_workspace_id(s / "memory") or ""; th = load_memory_config(s).trigger_tokens
r = load_summaries(s, wid, th)
print(r.pending.value, len(r.read))
"""
def run(side, argv, state):
    env = dict(os.environ, PYTHONPATH=TREES[side], MEMORY_TUI_CACHE_DIR=f"{CACHES}/cache-{side}")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN); w0 = time.perf_counter()
    out = subprocess.run([PY, *argv], env=env, capture_output=True, cwd="/tmp")
    w = time.perf_counter() - w0; r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert out.returncode == 0, out.stderr[-2000:]
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), w, out.stdout
def main():
    states = sys.argv[1].split(","); runs = int(sys.argv[2]); rows = sys.argv[3].split(",")
    res = {}
    for st in states:
        path = f"{STATES}/{st}"
        sid = min(e.name for e in os.scandir(f"{path}/sessions") if e.is_dir())  # why: the first session by id
        for row in rows:
            argv = {"why": ["-m", "memory_tui", "--state", path, "why", sid],
                    "why_json": ["-m", "memory_tui", "--state", path, "--json", "why", sid],
                    "status": ["-m", "memory_tui", "--state", path, "status"],
                    "status_json": ["-m", "memory_tui", "--state", path, "--json", "status"],
                    "pending": ["-c", PENDING, path]}[row]
            outs = {}
            for side in TREES:  # warm-up: fills each side's own caches
                outs[side] = run(side, argv, path)[2]
            for i in range(runs):
                for side in (TREES if i % 2 == 0 else reversed(list(TREES))):
                    c, w, o = run(side, argv, path)
                    res.setdefault((st, row, side), []).append((c, w))
            for side in TREES:
                v = res[(st, row, side)]
                print(f"{st:10s} {row:8s} {side:7s} cpu {statistics.median(x[0] for x in v):6.3f} wall {statistics.median(x[1] for x in v):6.3f}  min {min(x[0] for x in v):6.3f}  runs {len(v)}  same-output {outs['before']==outs['after']}", flush=True)
    print("load", os.getloadavg())
main()
