"""One-topic staged edit on a 20 000-record workspace (pitfall 4: target <= 0.5 s).

Usage: python benchmarks/bench_transaction.py [--scenario topics|sources|both]
       [--records 20000] [--topic-files 400] [--repeat 5] [--cold]

Two synthetic workspaces, built in a temp dir:

* ``topics``  (pitfall 4's case): 20 000 topic records in 400 topic files x 50 records,
  each record citing its own real v2 frame (20 000 source records in 100 threads), a few
  cross-topic block links, committed through the real transaction.
* ``sources``: 20 000 source records but only 500 topic records in 50 topics.

Times (best and median of N, after one warm-up run that fills the in-process caches) a
no-op one-topic edit, an edit adding one record, the same with a git commit, a validate-only
editor check, and ``views --rebuild`` (no-op); ``--cold`` also times the first edit of a new
process (caches empty, the on-disk canonical cache reused). Prints a table; asserts nothing
about time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memory_tui.core.store import gitlog
from memory_tui.core.tx import api as tx
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records

ENV = gitlog.fixed_env()


def _records(records: int, threads: int) -> list[SourceRecord]:
    per = records // threads
    return [
        SourceRecord("openprogram", f"sess{t:03d}", f"m{i:06d}", i + 1, "user" if i % 2 else "assistant",
                     f"message {i} of thread {t}: some remembered detail number {i}",
                     timestamp="2026-11-30T05:00:00+00:00")
        for t in range(threads) for i in range(per)
    ]


def build_sources(root: Path, records: int, topics: int, per_topic: int) -> list[str]:
    """Many source records, few topic records (each topic committed by its own edit)."""
    mem = root / "memory"
    (mem / "topics").mkdir(parents=True)
    recs = _records(records, 50)
    append_records(mem, recs)
    ids = [r.source_id for r in recs]
    k = 0
    for t in range(topics):
        parts = [f"# Topic {t}\n"]
        for j in range(per_topic):
            ref = ids[(k * 37) % len(ids)]
            parts.append(f"Fact {t}-{j} worth keeping.[^e{j}]\n\n[^e{j}]: Time: `2026-11`; Sources: [n]({ref})\n")
            k += 1
        r = tx.staged_edit(root, f"topics/t{t:03d}.md", "\n".join(parts), git_commit="off")
        assert r.ok, (r.code, r.message, r.path, r.line)
    return ids


def build_topics(root: Path, records: int, files: int) -> list[str]:
    """``records`` topic records in ``files`` topic files, each citing its own v2 frame,
    installed by one writer-style transaction (the whole tree normalised once)."""
    mem = root / "memory"
    (mem / "topics").mkdir(parents=True)
    recs = _records(records, 100)
    append_records(mem, recs)
    ids = [r.source_id for r in recs]
    per = records // files
    with tx.open_stage(root) as stage:
        k = 0
        for f in range(files):
            group = f"area{f % 8}"
            parts = [f"# Area {f % 8} topic {f}\n", "## Facts\n"]
            for j in range(per):
                parts.append(
                    f"Fact {f}-{j}: the user mentioned remembered detail number {k} in passing.[^e{k}]\n\n"
                    f"[^e{k}]: Time: `2026-11-{1 + k % 28:02d}`; Sources: [said]({ids[k]})\n"
                )
                k += 1
            stage.write_topic(f"topics/{group}/t{f:03d}.md", "\n".join(parts))
        stage.write_topic("topics/core.md", f"# Core\n\nThe user is called Bench.[^e{k}]\n\n"
                          f"[^e{k}]: Time: `2026-11`; Sources: [name]({ids[0]})\n")
        r = tx.commit_edits(stage, git_commit="off", timeout=60)
        assert r.ok, (r.code, r.message, r.path, r.line)
    # cross-topic links: every 10th topic links the first record of the next topic
    from memory_tui.core.format.topics import parse_tree

    tree = parse_tree(mem / "topics")
    for f in range(0, files - 1, 10):
        here = tree.topic(f"area{f % 8}/t{f:03d}.md")
        there = tree.topic(f"area{(f + 1) % 8}/t{f + 1:03d}.md")
        assert here is not None and there is not None
        target = there.units[0].memory_id
        text = here.text.replace("in passing.[^", f"in passing, see [next](../area{(f + 1) % 8}/t{f + 1:03d}.md#^{target}).[^", 1)
        r = tx.staged_edit(root, here.workspace_path, text, git_commit="off", timeout=60)
        assert r.ok, (r.code, r.message, r.path, r.line)
    return ids


def timed(fn, n: int) -> tuple[float, float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = fn()
        out.append(time.perf_counter() - t0)
        assert r.ok, (r.code, r.message, r.path, r.line)
    return min(out), statistics.median(out)


_COLD = r"""
import sys, time
from memory_tui.core.tx import api as tx
root, rel = sys.argv[1], sys.argv[2]
from pathlib import Path
text = (Path(root) / 'memory' / rel).read_text()
t0 = time.perf_counter()
r = tx.staged_edit(root, rel, text, git_commit='off')
assert r.ok, (r.code, r.message)
print(f'{time.perf_counter() - t0:.3f}')
"""


def run(scenario: str, args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-tx-")) / "state"
    t0 = time.perf_counter()
    if scenario == "topics":
        ids = build_topics(root, args.records, args.topic_files)
        rel = "topics/area7/t007.md"
        desc = (f"{args.records} topic records in {args.topic_files} topic files, "
                f"each citing its own v2 frame ({args.records} source records)")
    else:
        ids = build_sources(root, args.records, 50, 10)
        rel = "topics/t007.md"
        desc = f"{args.records} source records, 500 topic records in 50 topics"
    build_s = time.perf_counter() - t0
    topic = root / "memory" / rel
    counter = [0]

    def new_text() -> str:
        counter[0] += 1
        ref = ids[(counter[0] * 7919) % len(ids)]
        return topic.read_text() + f"\nBench fact {counter[0]}.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [n]({ref})\n"

    rows = [
        ("no-op edit (one topic)", lambda: tx.staged_edit(root, rel, topic.read_text(), git_commit="off"), True),
        ("edit: add one record", lambda: tx.staged_edit(root, rel, new_text(), git_commit="off"), True),
        ("edit: add one record + git commit", lambda: tx.staged_edit(root, rel, new_text(), git_env=ENV), False),
        ("validate only (editor check)", lambda: tx.validate_edit(
            root, rel, topic.read_text() + "\nX.[^e1]\n\n[^e1]: Time: `2026`; Sources: [n](" + ids[1] + ")\n"), True),
        ("views --rebuild (no-op)", lambda: tx.rebuild_views(root), False),
    ]
    print(f"\n[{scenario}] {desc} (built in {build_s:.1f} s)")
    print(f"{'operation':40} {'best s':>8} {'median s':>9} {'target':>8}")
    if args.cold:
        out = subprocess.run([sys.executable, "-c", _COLD, str(root), rel], capture_output=True, text=True, check=True)
        print(f"{'first no-op edit of a new process':40} {float(out.stdout):8.3f} {'':>9} {'':>8}")
    for name, fn, target in rows:
        fn()  # warm the caches (source index, canonical-file cache, committed tree, tokenizer)
        best, med = timed(fn, args.repeat)
        print(f"{name:40} {best:8.3f} {med:9.3f} {'<= 0.5' if target else '':>8}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", choices=("topics", "sources", "both"), default="both")
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--topic-files", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args()
    for scenario in (("topics", "sources") if args.scenario == "both" else (args.scenario,)):
        run(scenario, args)


if __name__ == "__main__":
    main()
