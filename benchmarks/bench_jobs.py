"""Benchmark: one write job through the app (headless, the owner's flow) and through the CLI,
on the same generated state (``make_state.py``), stopped the same way after the same batch.

    python benchmarks/bench_jobs.py [--scale 0.25] [--batches 3] [--runs 1] [--state DIR]

The CLI row runs ``memory-tui write --force`` in a subprocess and sends it SIGINT (the
owner's Ctrl-C) when its progress names the N-th batch's writer; the app row opens the app
headless at 120x40 (live reload on, as an owner runs it), asks for "Write all sessions
(forced)" from the palette's job, confirms it and presses ``x`` at the same point. Both
stop at the checkpoint before batch N+1, so both wrote N batches. Wall and CPU seconds
(the app's process time includes its UI thread, shown apart; the CLI's is the child's rusage)
and their ratios, medians per column over interleaved runs. The machine may be shared: read
the CPU column beside the wall.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build_state(scale: float, out: Path) -> Path:
    if not (out / "memory").is_dir():
        subprocess.run([sys.executable, str(HERE / "make_state.py"), "--scale", str(scale), "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
    return out


def fresh_copy(state: Path, work: Path) -> Path:
    dst = work / "state"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(state, dst, symlinks=True)
    return dst


def run_cli(state: Path, batches: int) -> tuple[float, float, int, float | None]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, COLUMNS="120")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "memory_tui", "write", "--force", "--state", str(state)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    writers = 0
    assert proc.stderr is not None
    for line in proc.stderr:
        if ": writer " in line:
            writers += 1
            if writers == batches:
                proc.send_signal(signal.SIGINT)
    proc.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, writers, None


async def _app_job(state: Path, batches: int) -> tuple[float, float, int, float]:
    from memory_tui.tui.app import create_app
    from memory_tui.tui.dialogs.confirm_job import ConfirmJobDialog
    from memory_tui.tui.dialogs.job_result import JobResultDialog
    from memory_tui.tui.jobs import JobRequest
    from memory_tui.pipeline.settings import Settings

    from memory_tui.tui.messages import JobFinished, JobProgress

    # The app is told nothing the owner would not do, and the measuring costs it nothing: the
    # job's own messages wake this loop (the message hook runs as the app handles each one).
    # ``pilot.pause()`` would not do: every call first has each widget of the screen run a
    # callback (Pilot's wait for the screen), and polling it every 20 ms during a job of
    # minutes was ~60 000 callbacks, a third of the app row's CPU, none of it the app's.
    wake = asyncio.Event()
    writers: list = []
    finished: list = []

    def hook(message) -> None:
        if isinstance(message, JobFinished):
            finished.append(message)
        elif isinstance(message, JobProgress) and message.event.phase == "writer":
            writers.append(message.event)
        else:
            return
        wake.set()

    app = create_app(state, settings=Settings(), insights=True)
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        while app.loading is not None or app.model is None:
            await pilot.pause(0.1)
        app.start_job(JobRequest("write-all-forced"))
        while not (isinstance(app.screen, ConfirmJobDialog) and app.screen.query("#run")):
            await pilot.pause(0.05)
        c0, t0, ui0 = time.process_time(), time.perf_counter(), time.thread_time()
        await pilot.press("y")
        cancelled = False
        while not finished:
            await wake.wait()
            wake.clear()
            if len(writers) >= batches and not cancelled and not finished:
                await pilot.press("x")
                cancelled = True
        wall, cpu, ui = time.perf_counter() - t0, time.process_time() - c0, time.thread_time() - ui0
        while not (isinstance(app.screen, JobResultDialog) and app.screen.query("#close")):
            await asyncio.sleep(0.05)
        return wall, cpu, len(writers), ui


def run_app(state: Path, batches: int) -> tuple[float, float, int, float]:
    return asyncio.run(_app_job(state, batches))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--state", type=Path, default=None, help="a state built by make_state.py (else one is built)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as tmp:
        work = Path(tmp)
        state = args.state or build_state(args.scale, work / "source")
        rows: dict[str, list[tuple[float, float, int, float | None]]] = {"cli": [], "app": []}
        for _ in range(args.runs):  # interleaved, so a change in the machine's load hits both rows
            rows["cli"].append(run_cli(fresh_copy(state, work), args.batches))
            print("cli", rows["cli"][-1], file=sys.stderr, flush=True)
            rows["app"].append(run_app(fresh_copy(state, work), args.batches))
            print("app", rows["app"][-1], file=sys.stderr, flush=True)

    def median(values: list) -> float | None:
        values = sorted(v for v in values if v is not None)
        return values[len(values) // 2] if values else None

    med = {k: tuple(median([r[i] for r in v]) for i in range(4)) for k, v in rows.items()}
    ratio_wall = med["app"][0] / med["cli"][0] if med["cli"][0] else float("nan")
    ratio_cpu = med["app"][1] / med["cli"][1] if med["cli"][1] else float("nan")
    if args.json:
        print(json.dumps({"rows": rows, "ratio_wall": ratio_wall, "ratio_cpu": ratio_cpu}))
        return 0
    print(f"write --force, stopped after batch {args.batches}, {args.runs} run(s), medians per column")
    print(f"{'row':<28} {'wall s':>8} {'cpu s':>8} {'batches':>8} {'UI thread cpu s':>16}")
    for k, label in (("cli", "CLI (memory-tui write)"), ("app", "app (headless Pilot)")):
        w, c, n, ui = med[k]
        print(f"{label:<28} {w:>8.1f} {c:>8.1f} {n:>8.0f} {'' if ui is None else f'{ui:.1f}':>16}")
    print(f"app / CLI: wall {ratio_wall:.2f}, CPU {ratio_cpu:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
