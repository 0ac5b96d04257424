"""Benchmark: the read side on a generated 20 000-record workspace.

Prints a table: source index + topic parse, view build, revision, full snapshot, snapshot refresh
after a one-topic change, and peak Python memory of one full snapshot.

    python benchmarks/bench_views.py [--records 20000] [--per-topic 50] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from memory_tui.core.format.sources import SourceIndex, SourceRecord, anchor, render_archive, render_frame
from memory_tui.core.format.tokens import O200kCounter
from memory_tui.core.format.topics import parse_tree
from memory_tui.core.format.views import build_views
from memory_tui.core.store.workspace import check_views
from memory_tui.core.store.workspace import dump_runtime_json, RuntimeState, open_state, refresh, workspace_revision

WORDS = "tea rail pass ryokan bento matcha umbrella charger itinerary shinkansen temple garden".split()


def generate(root: Path, records: int, per_topic: int, per_session: int = 200) -> Path:
    state = root / ".openprogram"
    memory = state / "memory"
    (memory / "topics").mkdir(parents=True)
    (memory / ".scriptorium").mkdir()
    (state / "config.json").write_text(json.dumps({"memory": {"writer": {"trigger_tokens": 8000}}}))
    (memory / ".scriptorium" / "workspace-id").write_text("w-0badc0de\n")
    # sources: one v2 archive per session
    sessions: dict[str, list[str]] = {}
    refs = []
    for i in range(records):
        sess = f"local_{i // per_session:010d}"
        rec = SourceRecord(
            "openprogram", sess, f"m{i:08d}", i, "user" if i % 2 == 0 else "assistant",
            f"Message {i}: " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(12)),
            timestamp=f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T10:00:00+00:00", speaker_id="owner/local",
            speaker_display="Owner", speaker_kind="owner", principal_id="owner/install/0123", authority_tier="owner",
        )
        sessions.setdefault(sess, []).append(render_frame(rec))
        refs.append(rec.source_id)
    v2 = memory / "sources" / "openprogram" / "_v2"
    v2.mkdir(parents=True)
    for sess, frames in sessions.items():
        (v2 / f"{sess}.md").write_text(render_archive(frames), encoding="utf-8")
    # topics
    order = {}
    n_topics = (records + per_topic - 1) // per_topic
    for t in range(n_topics):
        rel = "core.md" if t == 0 else f"area{t % 20:02d}/topic{t:04d}.md"
        path = memory / "topics" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        depth = rel.count("/")
        up = "../" * (depth + 1)
        lines = [f"# Topic {t}", ""]
        for j in range(per_topic):
            i = t * per_topic + j
            if i >= records:
                break
            sid = refs[i]
            sess = sid.split("/")[1]
            bid = hashlib.sha256(f"b{i}".encode()).hexdigest()[:8]
            eid = "e-" + hashlib.sha256(f"e{i}".encode()).hexdigest()[:10]
            when = f"2026-{1 + i % 12:02d}" if i % 3 else f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}"
            text = f"Fact {i} about " + " and ".join(WORDS[(i + k) % len(WORDS)] for k in range(6)) + "."
            lines += [f"{text}[^{eid}] ^{bid}", "",
                      f"[^{eid}]: Time: `{when}`; Sources: [note {i}]({up}sources/openprogram/_v2/{sess}.md#{anchor(sid)})", ""]
            order[bid] = i
        path.write_text("\n".join(lines).rstrip("\n") + "\n", encoding="utf-8")
    (memory / ".scriptorium" / "runtime.json").write_text(dump_runtime_json(RuntimeState(creation_order=order)))
    return state


def timed(fn, repeat: int = 1):
    best = float("inf")
    result = None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--per-topic", type=int, default=50)
    ap.add_argument("--keep", metavar="DIR", help="generate into DIR and keep it")
    args = ap.parse_args()

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-views-"))
    try:
        t_gen, state = timed(lambda: generate(base, args.records, args.per_topic))
        memory = state / "memory"
        counter = O200kCounter()
        counter.count("warm up")
        rows = [("generate workspace", t_gen)]

        t_idx, index = timed(lambda: SourceIndex.load(memory))
        rows.append(("source index (all archives)", t_idx))
        t_tree, tree = timed(lambda: parse_tree(memory / "topics", resolve=index.resolve_target))
        rows.append((f"parse tree ({len(tree.units)} records)", t_tree))
        assert not tree.errors, tree.errors[:3]
        master = (memory / "topics" / "core.md").read_text(encoding="utf-8")
        runtime = json.loads((memory / ".scriptorium" / "runtime.json").read_text())
        t_views, views = timed(lambda: build_views(
            tree, master_text=master, trusted_ids=index.trusted_ids(), creation_order=runtime["creation_order"],
            counter=counter, link_for=index.link_for), repeat=3)
        rows.append((f"build views ({len(views.files)} files)", t_views))
        for rel, text in views.files.items():  # commit them, as OpenProgram's install would
            (memory / rel).parent.mkdir(parents=True, exist_ok=True)
            (memory / rel).write_text(text, encoding="utf-8")
        t_rev, _ = timed(lambda: workspace_revision(memory), repeat=3)
        rows.append(("revision", t_rev))
        t_open, snap = timed(lambda: open_state(state, counter=counter))
        rows.append(("open_state (full snapshot)", t_open))
        t_noop, _ = timed(lambda: refresh(snap), repeat=3)
        rows.append(("refresh, nothing changed", t_noop))
        t_check, mism = timed(lambda: check_views(memory, counter=counter))
        rows.append((f"views --check ({len(mism)} differ)", t_check))
        target = memory / "topics" / "area01" / "topic0001.md"
        target.write_text(target.read_text(encoding="utf-8").replace("Fact 50 about", "Fact fifty about"), encoding="utf-8")
        t_one, snap2 = timed(lambda: refresh(snap))
        assert snap2.reparsed_topics == ("area01/topic0001.md",), snap2.reparsed_topics
        rows.append(("refresh after one-topic change", t_one))

        gc.collect()
        tracemalloc.start()
        snap3 = open_state(state, counter=counter)
        _cur, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del snap3

        width = max(len(name) for name, _ in rows)
        print(f"{'step':<{width}}  {'seconds':>9}")
        print("-" * (width + 11))
        for name, secs in rows:
            print(f"{name:<{width}}  {secs:9.3f}")
        print(f"{'peak Python memory, open_state':<{width}}  {peak / 2**20:7.1f} MiB")
        size = sum(p.stat().st_size for p in memory.rglob('*') if p.is_file())
        print(f"\nworkspace: {args.records} records, {len(tree.topics)} topic files, {size / 2**20:.1f} MiB on disk; python {sys.version.split()[0]}")
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
