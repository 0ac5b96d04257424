"""Source archive benchmark: 20 000 archived records (pitfall 4).

Builds two workspaces in a temp dir -- 200 sessions x 100 frames, and one session holding all
20 000 frames -- and prints a table: cold index build, no-change reload, incremental re-index
after one append, append latency, resolve_target / validate_ref throughput, peak memory of a
cold build (tracemalloc). No assertions; run it and read the numbers.

    python benchmarks/bench_sources.py [--records 20000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

from memory_tui.core.format.sources import (
    SourceIndex,
    SourceRecord,
    archive_path,
    render_archive,
    render_frame,
)
from memory_tui.core.store.archives import append_records

TEXT = "Ada prefers tea over coffee and short answers; the Kyoto plan needs a rail pass. " * 3


def make_records(sessions: int, per_session: int) -> list[SourceRecord]:
    out = []
    for s in range(sessions):
        for m in range(per_session):
            user = m % 2 == 0
            out.append(
                SourceRecord(
                    "openprogram", f"local_{s:010x}", f"n{m:08d}", m, "user" if user else "assistant",
                    f"{TEXT}#{s}-{m}" + ("\nsecond line" if m % 7 == 0 else ""),
                    f"2026-11-30T05:{m % 60:02d}:00+00:00",
                    "owner/local" if user else "runtime/agent%2Fmain", "Owner" if user else "agent/main",
                    "owner" if user else "runtime", "owner/install/ef943b18af0244d0", "owner", "trusted",
                )
            )
    return out


def write_archives(root: Path, records: list[SourceRecord]) -> None:
    by_file: dict[str, list[str]] = {}
    for r in records:
        by_file.setdefault(archive_path(r.source_id), []).append(render_frame(r))
    for rel, frames in by_file.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(render_archive(frames), encoding="utf-8")


def timed(fn, repeat: int = 1):
    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def bench(label: str, sessions: int, per_session: int, rows: list[tuple[str, str, str]]) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-sources-") as tmp:
        root = Path(tmp) / "memory"
        root.mkdir()
        records = make_records(sessions, per_session)
        write_archives(root, records)
        size = sum(p.stat().st_size for p in (root / "sources").rglob("*.md"))
        rows.append((label, "archive bytes", f"{size / 1e6:.1f} MB in {sessions} file(s)"))

        tracemalloc.start()
        t_cold, idx = timed(lambda: SourceIndex.load(root))
        _cur, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(idx.all_ids()) == len(records) and not idx.problems
        rows.append((label, "cold index build", f"{t_cold * 1000:.0f} ms ({len(records)} frames)"))
        rows.append((label, "peak memory, cold build", f"{peak / 1e6:.1f} MB (tracemalloc)"))
        t_cold2, idx = timed(lambda: SourceIndex.load(root), repeat=3)
        rows.append((label, "cold index build, no tracing", f"{t_cold2 * 1000:.0f} ms (best of 3)"))

        t_same, same = timed(lambda: SourceIndex.load(root, previous=idx), repeat=3)
        rows.append((label, "reload, nothing changed", f"{t_same * 1000:.1f} ms"))

        last = records[-1]
        extra = SourceRecord(last.provider, last.thread_id, "appended", 10**6, "user", "one more turn", "")
        t_app, res = timed(lambda: append_records(root, [extra]))
        rows.append((label, "append 1 record (pre-flight scan + atomic write)", f"{t_app * 1000:.1f} ms"))
        t_again, _ = timed(lambda: append_records(root, [extra]), repeat=3)
        rows.append((label, "append same record again (no-op)", f"{t_again * 1000:.1f} ms"))
        t_inc, inc = timed(lambda: SourceIndex.load(root, previous=same))
        changed = sum(1 for rel in inc.files if inc.files[rel] is not same.files.get(rel))
        rows.append((label, "incremental re-index after the append", f"{t_inc * 1000:.1f} ms ({changed} file re-read)"))
        extra2 = SourceRecord(last.provider, last.thread_id, "appended-2", 10**6 + 1, "user", "and another", "")
        t_app2, _ = timed(lambda: append_records(root, [extra2], index=inc))
        rows.append((label, "append 1 record, index given (no re-scan)", f"{t_app2 * 1000:.1f} ms"))
        t_inc2, inc2 = timed(lambda: SourceIndex.load(root, previous=inc))
        assert inc2.is_trusted(extra2.source_id)
        t_again2, _ = timed(lambda: append_records(root, [extra2], index=inc2), repeat=3)
        rows.append((label, "append same record again, index given", f"{t_again2 * 1000:.1f} ms"))

        targets = [(f"people/p{i}.md", idx.link_for(r.source_id, "topics/people")) for i, r in enumerate(records)]
        t_res, resolved = timed(lambda: [idx.resolve_target(t, x) for t, x in targets])
        assert resolved == [r.source_id for r in records]
        rows.append((label, "resolve_target", f"{len(targets) / t_res:,.0f} /s"))
        ids = [r.source_id for r in records]
        t_val, probs = timed(lambda: [idx.validate_ref(i, new=True) for i in ids])
        assert not any(probs)
        rows.append((label, "validate_ref(new=True)", f"{len(ids) / t_val:,.0f} /s"))
        t_link, _ = timed(lambda: [idx.link_for(i, "topics/people") for i in ids])
        rows.append((label, "link_for", f"{len(ids) / t_link:,.0f} /s"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    args = ap.parse_args()
    n = args.records
    rows: list[tuple[str, str, str]] = []
    bench("200 sessions", 200, max(1, n // 200), rows)
    bench("1 session", 1, n, rows)
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    print(f"{'layout':<{w0}}  {'measure':<{w1}}  value")
    print(f"{'-' * w0}  {'-' * w1}  {'-' * 30}")
    for a, b, c in rows:
        print(f"{a:<{w0}}  {b:<{w1}}  {c}")


if __name__ == "__main__":
    main()
