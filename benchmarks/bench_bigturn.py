"""One huge turn (issue 30, item 13): ``write --force`` on a copy of the shared fixture with one
turn of ``--mb`` MB added as the head of ``local_0c0c0c0c0c`` (through the session node writer,
as OpenProgram writes a node).

``--text unique`` makes every line different (a pasted log or document: the embedded writer's
work grows with what it is given); ``--text repeated`` repeats one paragraph. Each run is a
fresh copy and a fresh user cache dir (cold: the token memo knows nothing), in a child process,
so its wall time, CPU time and peak RSS (the child's VmHWM) are its own. Prints one row per
run and the median; asserts nothing, the machine is shared and the figures are what they are.

Run: python benchmarks/bench_bigturn.py [--mb 52.5] [--text unique|repeated] [--runs 3] [--timeout S]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SID = "local_0c0c0c0c0c"

CHILD = """
import json, sys, time
from memory_tui.cli import main
t = time.process_time()
code = main(["--state", sys.argv[1], "--json", "write", "--force"])
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
print("RESULT " + json.dumps({"exit": code, "peak_mb": int(hwm[0].split()[1]) / 1024}), flush=True)
"""


def big_text(mb: float, kind: str) -> str:
    target = int(mb * 1e6)
    if kind == "repeated":
        chunk = "Ada said the deploy window is Tuesday. I prefer tea over coffee in the morning. " * 12 + "\n"
        return chunk * (target // len(chunk))
    parts, size, i = [], 0, 0
    while size < target:
        line = f"I prefer build {i} of the deploy window on host {i * 7919 % 100003}. Step {i} logged line {i} ok.\n"
        parts.append(line)
        size += len(line)
        i += 1
    return "".join(parts)


def build(master: Path, fixture: Path, mb: float, kind: str) -> int:
    sys.path.insert(0, str(REPO))
    from memory_tui.sessions.marks import serialize_node

    with tarfile.open(fixture) as tar:
        tar.extractall(master, filter="tar")
    state = master / ".openprogram"
    sdir = state / "sessions" / SID
    meta = {"source": "web", "speaker_id": "owner/local", "speaker_display": "Owner", "agent_id": "main",
            "speaker_kind": "owner", "principal_id": "owner/install/ef943b18af0244d0", "authority_tier": "owner",
            "interaction": "interactive", "authority_schema": 1}
    node = {"id": "c00000000005", "created_at": 1796014900.0, "seq": 10, "role": "user", "name": "", "input": None,
            "output": big_text(mb, kind), "caller": "ROOT", "predecessor": "c00000000004_reply", "reads": [], "metadata": meta}
    path = sdir / "history" / "0010-u-c00000000005.json"
    path.write_text(serialize_node(node), encoding="utf-8")
    m = json.loads((sdir / "meta.json").read_text(encoding="utf-8"))
    m["head_id"] = "c00000000005"
    (sdir / "meta.json").write_text(json.dumps(m), encoding="utf-8")
    return path.stat().st_size


def run_once(master: Path, work: Path, timeout: float | None) -> dict:
    state = work / "state"
    cache = work / "cache"
    for p in (state, cache):
        shutil.rmtree(p, ignore_errors=True)
    shutil.copytree(master / ".openprogram", state, symlinks=True)
    env = dict(os.environ, MEMORY_TUI_CACHE_DIR=str(cache),
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(state)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=REPO)
    # the child's own high-water mark, read while it runs: a run stopped by the timeout never
    # reports it (and ru_maxrss would be the parent's size at fork, which built the big text)
    hwm = 0
    finished = True
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as fh:
                hwm = max([hwm] + [int(line.split()[1]) for line in fh if line.startswith("VmHWM:")])
        except (OSError, ValueError):
            pass
        if timeout is not None and time.monotonic() - t0 > timeout:
            proc.kill()
            finished = False
            break
        time.sleep(0.5)
    out, _ = proc.communicate()
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    res = [line[7:] for line in out.decode(errors="replace").splitlines() if line.startswith("RESULT ")]
    row = {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "finished": finished}
    if res:
        got = json.loads(res[-1])
        row.update(exit=got["exit"], peak_mb=round(got["peak_mb"]))
        body = out.decode(errors="replace").split("RESULT ")[0]
        try:
            report = json.loads(body)
            row["note"] = next((b["message"] for b in report.get("batches", []) if "c00000000005" in b["ids"]), "")
        except ValueError:
            pass
    else:
        # killed by the timeout: the high-water mark was not reported; the last figure is the floor
        row.update(exit=None, peak_mb=round(hwm / 1024))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=52.5)
    ap.add_argument("--text", choices=("unique", "repeated"), default="unique")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=None, help="stop a run after S seconds (reported as not finished)")
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("MEMORY_TUI_SHARED", REPO.parent / "shared")))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="memory-tui-bigturn-"))
    try:
        size = build(work / "master", args.shared / "fixtures" / "openprogram-state.tgz", args.mb, args.text)
        print(f"state: the shared fixture + one {args.text} turn of {size / 1e6:.1f} MB (node file); write --force, cold")
        rows = []
        for i in range(args.runs):
            row = run_once(work / "master", work / "run", args.timeout)
            rows.append(row)
            print(f"run {i + 1}: wall {row['wall_s']} s, cpu {row['cpu_s']} s, peak {row['peak_mb']} MB, "
                  f"exit {row['exit']}{'' if row['finished'] else ' (NOT FINISHED: timeout)'}  {row.get('note', '')}", flush=True)
        done = [r for r in rows if r["finished"]]
        if done:
            print(f"median: wall {statistics.median(r['wall_s'] for r in done)} s, cpu {statistics.median(r['cpu_s'] for r in done)} s, "
                  f"peak {statistics.median(r['peak_mb'] for r in done)} MB ({len(done)} finished runs)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
