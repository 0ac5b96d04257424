"""Where the repeated in-process one-record reword spends the calling thread's CPU.

    python benchmarks/edit_parts.py STATE [N]     # STATE: a make_state.py output (has memory/)

Wraps the edit path's functions and prints, per part, the calling thread's CPU and wall ms
per edit (median edit for the whole; nested parts are inside their parents), over N rewords
of the middle topic file with ``git_commit="off"`` (as ``run.py``'s ``edit_reword_inproc``).
Run it with ``PYTHONPATH`` at another checkout to profile that code on the same state."""
import sys, time, statistics, functools
from pathlib import Path
from memory_tui.core.tx import api as tx
from memory_tui.core.tx import checks, derived, finish, normal, optimistic, prepare, stage
from memory_tui.core.tx.stage import Stage
from memory_tui.core.store import revision, txcache
from memory_tui.core.format import blocklinks, linkcheck
from memory_tui.core.store import viewcache
from memory_tui.core.store import parsecache
state = Path(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
files = sorted(p.relative_to(state / "memory").as_posix() for p in (state / "memory" / "topics").rglob("t*.md"))
rel = files[len(files) // 2]
path = state / "memory" / rel
base = path.read_text(); a, b = base, base.replace("(fact ", "(Fact ", 1)
acc = {}; depth = {}
tt = time.thread_time
def wrap(owner, name, label):
    f = getattr(owner, name)
    @functools.wraps(f)
    def w(*args, **kw):
        t0 = tt(); w0 = time.perf_counter()
        try:
            return f(*args, **kw)
        finally:
            d = acc.setdefault(label, [0.0, 0.0, 0]); d[0] += tt() - t0; d[1] += time.perf_counter() - w0; d[2] += 1
    setattr(owner, name, w)
C = txcache.WorkspaceCache
# (the module whose globals the callers look the name up in, the name, the label)
parts = [
 (normal, "_normalize", "normalisation (_normalize)"),
 (blocklinks, "rewrite_block_links", "rewrite_block_links"),
 (optimistic, "unchanged", "walk under the lock (unchanged)"),
 (stage, "revision_walk", "revision_walk (stage)"),
 (C, "tree", "cache.tree"),
 (C, "read_topics", "read_topics"),
 (stage, "source_index", "source_index"),
 (C, "take_walk", "take_walk"),
 (Stage, "__init__", "Stage.__init__ (stage)"),
 (derived, "_write_views", "views (_write_views)"),
 (derived, "_write_runtime", "_write_runtime"),
 (Stage, "write_texts", "Stage.write_texts"),
 (checks, "_check_units", "_check_units"),
 (stage, "plan_install", "plan_install"),
 (finish, "install", "install"),
 (C, "retain", "retain"),
 (C, "save_disk", "parse-cache flush (save_disk)"),
 (C, "prove", "prove"),
 (C, "block_locations", "block_locations"),
 (finish, "installed_stamps", "installed_stamps"),
 (revision.RevisionJob, "result", "revision wait (job.result)"),
 (optimistic, "start_revision", "start_revision"),
 (finish, "start_revision", "start_revision"),
 (prepare, "prepare", "prepare"),
 (optimistic, "finish", "finish"),
 (optimistic, "write_lock", "write_lock enter"),
 (linkcheck, "check_cross_topic_links_incremental", "link check"),
 (viewcache.ViewCache, "_keys", "  views: _keys"),
 (viewcache.ViewCache, "_from_snapshot", "  views: _from_snapshot"),
 (viewcache.ViewCache, "recent", "  views: recent"),
 (viewcache, "build_views", "  views: views.build_views"),
 (viewcache, "_core_pending", "  views: _core_pending"),
 (viewcache.Snapshot, "save", "  flush: viewcache Snapshot.save"),
 (parsecache.ParseStore, "flush", "  flush: ParseStore.flush"),
 (checks, "_missing_ids", "_missing_ids"),
 (checks, "_non_ascii_times", "_non_ascii_times"),
 (checks, "_precheck", "_precheck"),
 (checks, "_missing_sources", "_missing_sources"),
 (C, "observe_index", "observe_index"),
 (C, "load_disk", "load_disk"),
 (stage, "check_write_confinement", "check_write_confinement"),
 (stage, "make_stage_dir", "make_stage_dir"),
 (Stage, "discard", "Stage.discard"),
 (stage, "_copy_entry", "_copy_entry"),
 (normal, "_guard_core_master", "_guard_core_master"),
 (normal, "_promote_legacy_core", "_promote_legacy_core"),
 (optimistic, "needs_recovery", "needs_recovery"),
 (optimistic, "open_locked", "open_locked"),
 (tx, "known_noop", "known_noop"),
]
for o, nm, lb in parts:
    if hasattr(o, nm): wrap(o, nm, lb)
r = tx.staged_edit(state, rel, a, git_commit="off"); assert r.ok
for i in range(3):
    r = tx.staged_edit(state, rel, b if i % 2 == 0 else a, git_commit="off")
acc.clear()
tot = []; wall = []; proc = []
for i in range(n):
    t0 = tt(); w0 = time.perf_counter(); p0 = time.process_time()
    r = tx.staged_edit(state, rel, b if i % 2 == 0 else a, git_commit="off")
    tot.append(tt() - t0); wall.append(time.perf_counter() - w0); proc.append(time.process_time() - p0)
    assert r.ok, (r.code, r.message)
snap = dict(acc)
if path.read_text() != a:
    tx.staged_edit(state, rel, a, git_commit="off")
acc = snap
print(f"whole edit: caller {statistics.median(tot)*1e3:.1f} ms, process {statistics.median(proc)*1e3:.1f}, wall {statistics.median(wall)*1e3:.1f}")
for lb, (c, w, k) in sorted(acc.items(), key=lambda kv: -kv[1][0]):
    print(f"  {lb:40s} {c/n*1e3:7.2f} cpu  {w/n*1e3:7.2f} wall  x{k/n:.1f}")
