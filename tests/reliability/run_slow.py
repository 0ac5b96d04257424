"""The slow reliability job: ``python tests/reliability/run_slow.py [--kills N] [--trials N] [--fuzz N]``.

Runs the crash driver on every operation until ``--kills`` kills (default 300) landed while
the operation was running (a kill after it returned, and the timing runs the kill instant
is calibrated from, are run and checked too but do not count; ``--trials`` caps the trials
whatever the kills, 0 for no cap) and the hostile-input fuzzers (``--fuzz`` hypothesis
examples per reader, default 10 000), prints one table of figures and exits non-zero if any
invariant failed. The README's guarantees table quotes its output.

``--out FILE`` appends JSON lines as the run goes (a ``trial`` line per trial, a ``progress``
line every 25 trials, an ``op`` line when an operation finishes, a ``fuzz`` line per reader),
so a run that is stopped still leaves the figures of everything it finished. ``--until HH:MM`` (local wall clock) is a
hard end: the remaining time is shared evenly between the operations still to run (the
fuzzers get ``--fuzz-minutes`` of it), and an operation out of time stops early with the
number of trials it did run recorded as such."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import crash_driver as cd  # noqa: E402

FUZZ_TESTS = ("test_topic_reader", "test_v2_archive_reader", "test_node_and_meta_readers", "test_runtime_json_reader",
              "test_config_json_reader", "test_writer_status_reader", "test_config_toml_reader")


class Log:
    def __init__(self, path: Path | None):
        self.path = path

    def __call__(self, **rec) -> None:
        if self.path is None:
            return
        rec["at"] = dt.datetime.now().isoformat(timespec="seconds")
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")


def _deadline(until: str | None) -> float | None:
    """``HH:MM`` today (local time) as a ``time.monotonic()`` instant."""
    if not until:
        return None
    hh, mm = (int(x) for x in until.split(":"))
    now = dt.datetime.now()
    end = now.replace(hour=hh, minute=mm, second=0, microsecond=0)
    if end <= now:  # a run started before midnight that is to end after it
        end += dt.timedelta(days=1)
    return time.monotonic() + (end - now).total_seconds()


def _parallel(args: argparse.Namespace, ops: list[str]) -> int:
    """Each operation in a run_slow child of its own (its own work folder, user cache dir and
    time share: the whole of ``--until``); returns the failures they report."""
    procs = []
    for op in ops:
        argv = [sys.executable, str(Path(__file__).resolve()), "--ops", op, "--trials", str(args.trials),
                "--kills", str(args.kills), "--fuzz", "0", "--seed", str(args.seed)]
        if args.until:
            argv += ["--until", args.until]
        if args.out:
            argv += ["--out", f"{args.out}.{op}"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
    failed = 0
    for proc in procs:
        out, _ = proc.communicate()
        lines = out.splitlines()
        for line in lines[1:]:  # the first is the heading this process printed already
            if line.startswith("failures remaining: "):
                failed += int(line.split(": ", 1)[1])
            else:
                print(line, flush=True)
        if proc.returncode not in (0, 1):
            failed += 1
            print(f"  a child run stopped with exit {proc.returncode}", flush=True)
    return failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=300, help="per operation: run until this many kills landed mid-run (0: "
                    "--trials decides)")
    ap.add_argument("--trials", type=int, default=0, help="per operation: stop after this many trials whatever the kills "
                    "(0: no cap)")
    ap.add_argument("--fuzz", type=int, default=10_000)
    ap.add_argument("--ops", default=",".join(cd.OPS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="append JSON-lines figures here as the run goes")
    ap.add_argument("--until", help="HH:MM local time by which the whole run must have ended")
    ap.add_argument("--fuzz-minutes", type=float, default=10.0, help="share of --until reserved for the fuzzers")
    ap.add_argument("--contention", type=int, default=0, metavar="N",
                    help="also run the contention test with N accepted transactions per process (the issue's size: 200)")
    ap.add_argument("--parallel", action="store_true",
                    help="run the operations at once, one child process each (figures as without it; "
                         "--out FILE gets one FILE.<op> per operation)")
    args = ap.parse_args()
    shared = Path(os.environ.get("MEMORY_TUI_SHARED", cd.REPO.parent / "shared"))
    log = Log(args.out)
    end = _deadline(args.until)
    ops = args.ops.split(",")
    failed = 0
    if args.kills <= 0 and args.trials <= 0:
        ap.error("give --kills or --trials")
    log(kind="start", kills=args.kills, trials=args.trials, fuzz=args.fuzz, ops=ops, seed=args.seed, until=args.until)
    target = " ".join(x for x in (f"until {args.kills} kill -9 mid-run" if args.kills else "",
                                  f"at most {args.trials} trials" if args.trials else "") if x)
    print(f"crash consistency: {target} per operation (seed {args.seed})")
    if args.parallel and len(ops) > 1:
        failed += _parallel(args, ops)
        ops = []
    for i, op in enumerate(ops):
        t0 = time.monotonic()
        stop_at = None
        if end is not None:
            reserve = args.fuzz_minutes * 60 if args.fuzz else 0.0
            stop_at = t0 + max(0.0, (end - reserve - t0) / (len(ops) - i))

        def progress(fig: cd.Figures, op=op, t0=t0) -> None:
            log(kind="trial", op=op, **fig.last)
            if fig.trials % 25 == 0:
                log(kind="progress", op=op, trials=fig.trials, killed=fig.killed, late=fig.late, timing=fig.timing,
                    ceiling=round(fig.ceiling, 4), outcomes=fig.outcomes, killed_outcomes=fig.killed_outcomes,
                    failures=len(fig.failures), seconds=round(time.monotonic() - t0))

        with tempfile.TemporaryDirectory(prefix=f"memory-tui-crash-{op}-") as work:
            fig = cd.run(op, args.trials, kills=args.kills, seed=args.seed, work=Path(work), shared=shared, stop_at=stop_at,
                         progress=progress)
        failed += len(fig.failures)
        secs = time.monotonic() - t0
        short = (args.kills > 0 and fig.killed < args.kills) and not (args.trials > 0 and fig.trials >= args.trials)
        short = short or (args.kills <= 0 and fig.trials < args.trials)
        log(kind="op", op=op, trials=fig.trials, kills_wanted=args.kills, trials_cap=args.trials, killed=fig.killed,
            late=fig.late, timing=fig.timing, ceiling=round(fig.ceiling, 4), outcomes=fig.outcomes,
            killed_outcomes=fig.killed_outcomes, changes=fig.changes, failures=fig.failures[:50],
            failure_count=len(fig.failures), seconds=round(secs), stopped_by_deadline=short)
        print(f"  {fig.line()}  ({secs:.0f} s){'  [stopped by --until]' if short else ''}", flush=True)
        for line in fig.failures[:10]:
            print(f"      {line}")
    if args.fuzz:
        print(f"hostile input: {args.fuzz} hypothesis examples per reader")
        env = dict(os.environ, MEMORY_TUI_FUZZ_EXAMPLES=str(args.fuzz))
        for j, name in enumerate(FUZZ_TESTS):
            t0 = time.monotonic()
            timeout = None if end is None else max(1.0, (end - t0) / (len(FUZZ_TESTS) - j))
            argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{HERE / 'test_fuzz_readers.py'}::{name}"]
            try:
                proc = subprocess.run(argv, cwd=cd.REPO, env=env, capture_output=True, text=True, timeout=timeout)
                verdict = "passed" if proc.returncode == 0 else "FAILED"
                failed += proc.returncode != 0
                if proc.returncode:
                    print(proc.stdout[-3000:])
            except subprocess.TimeoutExpired:
                verdict = "not finished (out of time)"
            secs = time.monotonic() - t0
            log(kind="fuzz", reader=name, examples=args.fuzz, verdict=verdict, seconds=round(secs))
            print(f"  {name:<28} {verdict}  ({secs:.0f} s)", flush=True)
    if args.contention:
        report = Path(tempfile.mkdtemp(prefix="memory-tui-contention-")) / "figures.json"
        env = dict(os.environ, MEMORY_TUI_CONTENTION_N=str(args.contention), MEMORY_TUI_CONTENTION_REPORT=str(report))
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE / "test_contention.py")],
                              cwd=cd.REPO, env=env, capture_output=True, text=True)
        figs = json.loads(report.read_text()) if report.is_file() else {}
        failed += proc.returncode != 0
        verdict = "passed" if proc.returncode == 0 else "FAILED"
        if proc.returncode:
            print(proc.stdout[-3000:])
        log(kind="contention", verdict=verdict, wall_seconds=round(time.monotonic() - t0), **figs)
        print(f"contention: {args.contention} transactions per process: {verdict} {figs}", flush=True)
    print(f"failures remaining: {failed}")
    log(kind="end", failures=failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
