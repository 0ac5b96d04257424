"""Benchmark: the TUI's model (tui.model.load.load_model) on a generated 20 000-record workspace.

Prints a table: first load, refresh with nothing changed, refresh after a one-topic edit
(watcher hint and full check), and which views that edit redraws.

    python benchmarks/bench_tui_model.py [--records 20000] [--per-topic 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_views import generate  # noqa: E402

from memory_tui.core.format.tokens import O200kCounter  # noqa: E402
from memory_tui.tui.model.data import changed_views  # noqa: E402
from memory_tui.tui.model.load import load_model  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--per-topic", type=int, default=50)
    args = ap.parse_args()
    counter = O200kCounter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        state = generate(Path(tmp), args.records, args.per_topic)

        def timed(label, fn):
            t = time.perf_counter()
            out = fn()
            rows.append((label, time.perf_counter() - t))
            return out

        first = timed("first load", lambda: load_model(state, counter=counter))
        same = timed("refresh, nothing changed (full check)", lambda: load_model(state, counter=counter, previous=first))
        topic = next(p for p in sorted((state / "memory" / "topics").rglob("*.md")) if p.name != "core.md")
        text = topic.read_text(encoding="utf-8")
        topic.write_text(text.replace("Fact ", "Known fact ", 1), encoding="utf-8")
        st = topic.stat()
        os.utime(topic, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        rel = "memory/" + topic.relative_to(state / "memory").as_posix()
        edited = timed("refresh after a one-topic edit (watcher hint)", lambda: load_model(state, counter=counter, previous=same, touched={rel}))
        again = timed("refresh, nothing changed (watcher hint)", lambda: load_model(state, counter=counter, previous=edited, touched={rel}))
        print(f"{args.records} records, {len(first.topics)} topics")
        print(f"{'step':<48} {'seconds':>8}")
        for label, secs in rows:
            print(f"{label:<48} {secs:>8.3f}")
        print(f"views redrawn after the edit: {sorted(changed_views(same, edited))}")
        print(f"views redrawn when nothing changed: {sorted(changed_views(edited, again))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
