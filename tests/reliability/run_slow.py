"""The slow reliability job: ``python tests/reliability/run_slow.py [--trials N] [--fuzz N]``.

Runs the crash driver (``--trials`` kills per operation, default 500) and the hostile-input
fuzzers (``--fuzz`` hypothesis examples per reader, default 10 000), prints one table of
figures and exits non-zero if any invariant failed. The README's guarantees table quotes
its output."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import crash_driver as cd  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--fuzz", type=int, default=10_000)
    ap.add_argument("--ops", default=",".join(cd.OPS))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    shared = Path(os.environ.get("MEMORY_TUI_SHARED", cd.REPO.parent / "shared"))
    failed = 0
    print(f"crash consistency: {args.trials} kill -9 trials per operation (seed {args.seed})")
    for op in args.ops.split(","):
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"memory-tui-crash-{op}-") as work:
            fig = cd.run(op, args.trials, seed=args.seed, work=Path(work), shared=shared)
        failed += len(fig.failures)
        print(f"  {fig.line()}  ({time.monotonic() - t0:.0f} s)", flush=True)
        for line in fig.failures[:10]:
            print(f"      {line}")
    if args.fuzz:
        print(f"hostile input: {args.fuzz} hypothesis examples per reader")
        env = dict(os.environ, MEMORY_TUI_FUZZ_EXAMPLES=str(args.fuzz))
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE / "test_fuzz_readers.py")],
                              cwd=cd.REPO, env=env)
        failed += proc.returncode != 0
        print(f"  fuzzers: {'all passed' if proc.returncode == 0 else 'FAILURES (see above)'}")
    print(f"failures remaining: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
