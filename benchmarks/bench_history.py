"""History of one record on a 20 000-record workspace with 1 000 commits (issue 11: <= 1 s).

Usage: python benchmarks/bench_history.py [--records 20000] [--topic-files 200]
       [--commits 1000] [--repeat 5]

Builds, in a temp dir, a memory git repository with ``--records`` canonical records spread
over ``--topic-files`` topic files, then ``--commits`` - 1 further commits, each rewording one
record of one file (the measured record every tenth commit, so it has ~100 versions; the
rest spread over every file). The repository is written with ``git fast-import`` so building
it takes seconds, not minutes; what is read back is an ordinary repository.

Times (best and median of N, after one warm-up) ``history()`` of the measured record, of a
record edited only once, of the measured record's topic file, and ``plan_revert`` of the
record to its oldest version. Prints a table; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_tui.insights.history import plan_revert, record_history, topic_history  # noqa: E402


def _hex(text: str, n: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _record(i: int, version: int) -> str:
    bid, eid = _hex(f"b{i}", 8), _hex(f"e{i}", 10)
    words = f"Record {i} says the owner prefers option {version} for task {i % 97}."
    return f"{words}[^e-{eid}] ^{bid}\n\n[^e-{eid}]: Time: `2026-01-{1 + i % 28:02d}`; Sources: [turn {i}](D1:{i})\n"


def _file_text(f: int, ids: range, versions: dict[int, int]) -> str:
    return f"# Topic {f}\n\n" + "\n".join(_record(i, versions.get(i, 0)) for i in ids)


class _View:
    """What ``plan_revert`` reads from a snapshot, for a workspace without sources: the tree
    is not needed to find versions, only to check links; a stub tree keeps the timing honest
    about git and not about parsing 20 000 records."""

    def __init__(self, root: Path, rel: str, text: str, bid: str) -> None:
        from memory_tui.core.format.topics import parse_topic

        self.memory_root = root
        self.revision = "bench"
        topic = parse_topic(rel[len("topics/"):], text)
        self.tree = _Tree(topic, bid)


class _Tree:
    def __init__(self, topic, bid: str) -> None:
        self._topic = topic
        self.units = topic.units
        self._bid = bid

    def by_id(self, bid: str):
        return next((u for u in self.units if u.memory_id == bid), None)

    def topic(self, rel: str):
        return self._topic if rel == self._topic.path else None


def build(root: Path, records: int, files: int, commits: int) -> tuple[str, str, str]:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    per = records // files
    ranges = [range(f * per, (f + 1) * per) for f in range(files)]
    versions: dict[int, int] = {}
    target = ranges[files // 2][per // 2]  # the measured record
    once = ranges[1][3]  # a record edited exactly once
    rng = random.Random(11)
    stream: list[bytes] = []
    ts = 1_790_000_000

    def blob(path: str, text: str) -> None:
        data = text.encode()
        stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    def commit(n: int, message: str) -> None:
        msg = message.encode()
        stream.append(
            f"commit refs/heads/main\ncommitter OpenProgram Memory <memory@openprogram.local> {ts + n} +0000\n"
            f"data {len(msg)}\n".encode() + msg + b"\n"  # later commits of the branch chain on by themselves
        )

    commit(0, "memory: initialize history")
    for f, ids in enumerate(ranges):
        blob(f"topics/t{f:03d}.md", _file_text(f, ids, versions))
    for n in range(1, commits):
        if n == 500:
            i = once
        elif n % 10 == 0:
            i = target
        else:
            i = rng.choice(ranges[rng.randrange(files)])
        versions[i] = versions.get(i, 0) + 1
        f = i // per
        commit(n, "memory: incremental transaction" if n % 3 else "memory: edit topics/t%03d.md" % f)
        blob(f"topics/t{f:03d}.md", _file_text(f, ranges[f], versions))
    subprocess.run(["git", "-C", str(root), "fast-import", "--quiet"], input=b"".join(stream), check=True)
    subprocess.run(["git", "-C", str(root), "checkout", "-q", "main"], check=True)
    return _hex(f"b{target}", 8), _hex(f"b{once}", 8), f"topics/t{target // per:03d}.md"


def timed(fn, repeat: int) -> tuple[float, float, object]:
    out = fn()  # warm-up (page cache, git's pack index)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--topic-files", type=int, default=200)
    ap.add_argument("--commits", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        root = Path(tmp) / "memory"
        t0 = time.perf_counter()
        target, once, rel = build(root, args.records, args.topic_files, args.commits)
        built = time.perf_counter() - t0
        count = subprocess.run(["git", "-C", str(root), "rev-list", "--count", "HEAD"], capture_output=True, text=True,
                               check=True).stdout.strip()
        print(f"workspace: {args.records} records in {args.topic_files} topic files, {count} commits "
              f"(built in {built:.1f} s)")
        rows = []
        best, med, h = timed(lambda: record_history(root, target, agent_runs=()), args.repeat)
        rows.append((f"history ^{target} (record)", best, med, len(h.versions)))
        best, med, h1 = timed(lambda: record_history(root, once, agent_runs=()), args.repeat)
        rows.append((f"history ^{once} (edited once)", best, med, len(h1.versions)))
        best, med, ht = timed(lambda: topic_history(root, rel, agent_runs=()), args.repeat)
        rows.append((f"history {rel} (topic)", best, med, len(ht.versions)))
        view = _View(root, rel, (root / rel).read_text(), target)
        oldest = h.versions[-1].commit
        best, med, plan = timed(lambda: plan_revert(view, target, oldest), args.repeat)
        rows.append((f"plan_revert ^{target} to its oldest", best, med, len(plan.dropped_ids)))
        width = max(len(r[0]) for r in rows)
        print(f"{'operation':<{width}}  {'best s':>8}  {'median s':>8}  {'count':>8}")
        for name, b, m, n in rows:
            print(f"{name:<{width}}  {b:>8.3f}  {m:>8.3f}  {n:>8}")
        print("target: history of one record <= 1 s")


if __name__ == "__main__":
    main()
