"""Topic grammar speed: parse, normalise, link checks on a generated 20 000-record tree.

Prints a table; asserts nothing (timings belong here, not in tests).
Run: python benchmarks/bench_topics.py [records] [files]
"""

from __future__ import annotations

import sys
import time

from memory_tui.core.format.blocklinks import rewrite_block_links
from memory_tui.core.format.linkcheck import check_cross_topic_links
from memory_tui.core.format.normalize import normalize_tree
from memory_tui.core.format.topics import block_id, parse_tree


def make_tree(records: int, files: int) -> dict[str, str]:
    texts: dict[str, str] = {}
    per = max(1, records // files)
    n = 0
    for f in range(files):
        path = f"group{f % 10}/topic{f}.md"
        out = [f"# Topic {f}", ""]
        for i in range(per):
            bid = block_id(path, str(n), 0)
            link = f" See [prev](topic{f}.md#^{block_id(path, str(n - 1), 0)})." if i else ""
            out.append(f"Record {n} says something about item {i} in topic {f}.{link}[^e-{n:010x}] ^{bid}")
            out.append("")
            out.append(f"[^e-{n:010x}]: Time: `2026-11`; Sources: [note {n}](../../sources/openprogram/_v2/s{f}.md#source-{n:016x})")
            out.append("")
            n += 1
        texts[path] = "\n".join(out).rstrip() + "\n"
    return texts


def timed(label: str, fn, rows: list[tuple[str, float]]):
    start = time.perf_counter()
    out = fn()
    rows.append((label, time.perf_counter() - start))
    return out


def main() -> None:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    texts = make_tree(records, files)
    rows: list[tuple[str, float]] = []
    tree = timed("parse_tree (lenient, no resolver)", lambda: parse_tree(texts), rows)
    ids = set(tree.ids)
    result = timed("normalize_tree (no-op, whole tree)", lambda: normalize_tree(texts, committed_ids=ids), rows)
    assert result.changed == {}
    staged = dict(texts)
    first = sorted(staged)[0]
    staged[first] += "\nA new fact.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [new](openprogram/s/m)\n"
    result = timed("normalize_tree (one new record)", lambda: normalize_tree(staged, committed_ids=ids, committed=tree), rows)
    fast = timed("normalize_tree (one new record, fast path)", lambda: normalize_tree(
        staged, committed_ids=ids, committed=tree, assume_committed_normal=True), rows)
    assert fast.texts == result.texts
    timed("rewrite_block_links", lambda: rewrite_block_links(result.texts), rows)
    timed("check_cross_topic_links (changed only)", lambda: check_cross_topic_links(result.texts, committed=tree), rows)
    print(f"{records} records in {files} files ({sum(len(t) for t in texts.values()) / 1e6:.1f} MB)")
    print(f"{'step':<42} {'seconds':>8}")
    for label, seconds in rows:
        print(f"{label:<42} {seconds:>8.3f}")


if __name__ == "__main__":
    main()
