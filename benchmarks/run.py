"""The issue-12 benchmark: one table over generated workspaces (never part of the tests).

Usage: python benchmarks/run.py [--scale 1,2,4] [--runs 5] [--json] [--rows a,b] [--states DIR]
                                [--cold] [--cold-runs 3] [--variant]

For each scale it builds (once, then reuses) ``<states>/scale-<N>`` with ``make_state.py``
and times every row ``--runs`` times (default 5), printing median and min-max per row; with
two or more scales it prints the growth ratio of each row (largest / smallest scale). With
``--json`` it prints one object ``{row: {scale: {median, min, max, runs, unit}}}`` instead.

"fresh process" rows time a new ``python`` process end to end (interpreter, imports, work),
as the owner waits for it; other rows time the call inside one process. Rows that change
the workspace alternate between two equally valid texts, so the state stays the same shape.
Times are wall-clock seconds; RSS is MiB. Asserts nothing about time.

``--cold`` adds a cold column beside every warm one, as an owner meets the tool the first
time (after an upgrade, on a new machine, on a synced workspace, after deleting the caches):
each scale's state is first copied to a new path no process has seen (``cp -a``: new inodes
and ctimes), and before every cold run memory-tui's user cache (``$MEMORY_TUI_CACHE_DIR``,
``$XDG_CACHE_HOME`` and every per-cache override) is an empty folder and the state's
``memory/.scriptorium/memory-tui-*`` caches are deleted; the run is a fresh process.
``--variant`` measures the states of ``make_state.py --variant`` instead (``variant-<N>``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable
TARGETS = {
    "parse_cold": "<= 0.6 s",
    "parse_cached": "<= 0.1 s",
    "pending_cold": "<= 2.0 s",
    "pending_warm": "<= 0.2 s",
    "why_session_fresh": "<= 1 s",
    "drift_session_fresh": "<= 1 s",
    "drift_all_fresh": "<= 5 s",
    "edit_noop_fresh": "<= 0.5 s",
    "edit_reword_inproc": "<= 0.3 s",
    "apply_update_fresh": "<= 0.5 s",
    "app_first_paint": "<= 1 s",
    "app_reload_one_file": "<= 0.15 s",
    "app_peak_rss": "<= 400 MiB",
    "sessions_open_10k": "<= 0.5 s",
    "status_fresh": "<= 1 s",
    "why_session_json_fresh": "<= 0.5 s",
    "app_model": "<= 1.5 s",
    "app_loaded": "<= 3 s",
    "app_key_latency": "<= 0.1 s",
}
ROWS = (
    ("parse_cold", "strict parse of the topic tree, cold (no cache)"),
    ("parse_cached", "strict parse, from the persistent cache"),
    # the cached tree builds a topic's units when first read: this is the same load with
    # every unit (and its evidence and annotations) built, what a reader of all units pays
    ("parse_cached_full", "strict parse, from the persistent cache, every unit built"),
    # parse-cold: what a reader (open_state, the app's first load) pays cold; readers never
    # write the cache (the next transaction does), so this is parse_cold without the flush.
    ("parse_cold_read", "strict parse, cold, without writing the cache"),
    # a cold load builds a topic's units and an archive's frames when first read (as a load
    # from the cache does): this is parse_cold with every unit and frame built
    ("parse_cold_full", "strict parse, cold, every unit and frame built"),
    ("revision", "workspace revision"),
    ("pending_cold", "pending, all sessions, cold"),
    ("pending_nocache", "pending, all sessions, cold, empty session cache"),
    ("pending_warm", "pending, all sessions, warm (unchanged)"),
    ("why_session_fresh", "`why SESSION`, fresh process"),
    # written vs kept: the mark-based and the citation-based pending sets of one session / of
    # every session (the topic tree from the parse cache; nothing of the drift itself is kept)
    ("drift_session_fresh", "`why --drift SESSION`, fresh process"),
    ("drift_all_fresh", "`why --drift`, every session, fresh process"),
    ("why_session_json_fresh", "`why SESSION --json`, fresh process"),
    ("status_fresh", "`status`, fresh process"),
    ("edit_noop_fresh", "`edit` no-op, fresh process"),
    ("edit_reword_fresh", "`edit` one-record reword, fresh process"),
    ("edit_noop_inproc", "staged_edit no-op, in process, repeated"),
    ("edit_reword_inproc", "staged_edit one-record reword, in process"),
    ("apply_update_fresh", "`apply` update_record, fresh process"),
    ("app_first_paint", "app start to first full paint of Topics"),
    # app-side round 8: the first paint reads the topic outline from a persistent table when the
    # files' stats are unchanged; this is the start that has to build it (a new or changed workspace).
    ("app_first_paint_nocache", "app first paint, empty outline cache"),
    ("app_model", "app start to the whole model (records, Recent, Core)"),
    ("app_loaded", "app start to everything loaded (sessions, pending, insights)"),
    ("app_reload_one_file", "app reload after a one-file change"),
    # a view key (1-5) pressed every 0.2 s from the first paint until everything is loaded:
    # the worst time until that view is the current one, per run
    ("app_key_latency", "app: a view key pressed while loading, worst answer"),
    ("app_peak_rss", "peak RSS of the app (MiB)"),
    ("sessions_open_10k", "open a 10 000-node session in Sessions"),
    # the layout of a big session is kept between processes (exact key: the layout's input);
    # this is the open that has to compute it (a new or changed session)
    ("sessions_open_10k_nocache", "open a 10 000-node session, empty layout and overview tables"),
)
NOT_YET: dict[str, str] = {}


# ----------------------------------------------------------------------------- children
# Each child prints one JSON list of measurements on its last stdout line.

CHILD_PARSE = r"""
import json, sys, time
from pathlib import Path
mem = Path(sys.argv[1]) / "memory"
cold = sys.argv[2] in ("cold", "coldread", "coldfull")
persist = sys.argv[2] != "coldread"
full = sys.argv[2] in ("warmfull", "coldfull")
n = int(sys.argv[3])
try:
    from memory_tui.core.store import parsecache
except ImportError:  # before the persistent cache existed: what open_state did
    parsecache = None
    from memory_tui.core.format.sources import SourceIndex
    from memory_tui.core.format.topics import parse_tree
out = []
for _ in range(n):
    if parsecache is not None:
        if cold:
            parsecache.drop(mem)
        parsecache.forget_in_process()
    t0 = _T()
    if parsecache is None:
        index = SourceIndex.load(mem)
        tree = parse_tree(mem / "topics", resolve=index.resolve_target, strict=True)
    else:
        index, tree = parsecache.load_tree(mem, persist=persist)
    if full:
        tree.units
        if sys.argv[2] == "coldfull":
            for entry in index.files.values():
                entry.frames
    out.append(_T() - t0)
    assert not tree.problems and len(tree.units) > 0, tree.problems[:3]
print(json.dumps(out))
"""

CHILD_REVISION = r"""
import json, sys, time
from pathlib import Path
from memory_tui.core.store.workspace import workspace_revision
mem = Path(sys.argv[1]) / "memory"
out = []
for _ in range(int(sys.argv[2])):
    t0 = _T(); workspace_revision(mem); out.append(_T() - t0)
print(json.dumps(out))
"""

# cold: the first load of a new process; warm: the same, then a reload with nothing changed.
CHILD_PENDING = r"""
import json, sys, time
from pathlib import Path
from memory_tui.core.format.config import load_memory_config
from memory_tui.core.format.tokens import O200kCounter
from memory_tui.core.store.workspace import read_workspace_id
from memory_tui.sessions.records import analyze_session, status_pending_count
from memory_tui.sessions.store import load_sessions
state = Path(sys.argv[1]); mode = sys.argv[2]; n = int(sys.argv[3])
import inspect
TRUST = {"trust_dir_stamps": True} if "trust_dir_stamps" in inspect.signature(load_sessions).parameters else {}
counter = O200kCounter(); counter.count("warm the tokenizer up")
wid = read_workspace_id(state / "memory"); threshold = load_memory_config(state).trigger_tokens

def pending(prev, prev_an):
    snap = load_sessions(state, previous=prev, **TRUST)
    an = {}
    for sid, s in snap.sessions.items():
        p = prev_an.get(sid)
        an[sid] = p[1] if p is not None and p[0] is s else analyze_session(s, wid, threshold, counter)
    total = status_pending_count(snap, wid, an)
    return snap, {sid: (snap.sessions[sid], a) for sid, a in an.items()}, total.value

try:  # perf-app: a fresh process counts from the persistent per-session summary cache
    from memory_tui.sessions.cache import load_summaries
except ImportError:  # code from before it
    load_summaries = None
out = []
if mode in ("cold", "nocache") and load_summaries is not None:
    # cold: a fresh process with the cache as the previous run left it; nocache: an empty one
    t0 = _T(); result = load_summaries(state, wid or "", threshold, counter); out.append(_T() - t0)
    assert result.pending.value and result.pending.value > 0, result.pending
    print(json.dumps(out)); sys.exit(0)
t0 = _T(); snap, an, value = pending(None, {}); first = _T() - t0
assert value and value > 0, value
if mode in ("cold", "nocache"):
    out.append(first)
else:
    for _ in range(n):
        t0 = _T(); snap, an, v2 = pending(snap, an); out.append(_T() - t0)
        assert v2 == value
print(json.dumps(out))
"""

CHILD_EDIT_INPROC = r"""
import json, sys, time
from pathlib import Path
from memory_tui.core.tx import api as tx
state = Path(sys.argv[1]); rel = sys.argv[2]; mode = sys.argv[3]; n = int(sys.argv[4])
path = state / "memory" / rel
base = path.read_text()
a, b = base, base.replace("(fact ", "(Fact ", 1)
assert a != b
r = tx.staged_edit(state, rel, a, git_commit="off"); assert r.ok, (r.code, r.message)  # warm-up
out = []
for i in range(n):
    text = a if mode == "noop" else (b if i % 2 == 0 else a)
    t0 = _T()
    r = tx.staged_edit(state, rel, text, git_commit="off")
    out.append(_T() - t0)
    assert r.ok, (r.code, r.message, r.path, r.line)
if path.read_text() != a:
    r = tx.staged_edit(state, rel, a, git_commit="off"); assert r.ok
print(json.dumps(out))
"""

CHILD_APP = r"""
import asyncio, json, os, resource, sys, time
t_start = _T()
os.environ["TEXTUAL_ANIMATIONS"] = "none"
from pathlib import Path
state = Path(sys.argv[1]); rel = sys.argv[2]; reloads = int(sys.argv[3])
keys = len(sys.argv) > 4 and sys.argv[4] == "keys"
from memory_tui.tui.app import create_app

def topic_rows(app):
    try:
        tree = app.query_one("#topics-list")
    except Exception:
        return 0
    root = getattr(tree, "root", None)
    return len(root.children) if root is not None else 0

KEY_VIEWS = {"1": "topics", "2": "timeline", "3": "recent", "4": "core", "5": "sessions"}

async def press_views(app, stop, lat):
    # A key as the terminal sends it (the driver's queue, not the pilot, which waits for the
    # app to go idle), then the clock runs until the view it names is the current one: the
    # latency an owner meets while the app loads. One full cycle at least, so a warm start
    # that has loaded before the first press still times every view once.
    from textual import events
    cycle = ("2", "1", "3", "1", "4", "1", "5", "1")
    i = 0
    while not stop.is_set() or i < len(cycle):
        await asyncio.sleep(0.2)
        key = cycle[i % len(cycle)]
        i += 1
        want = KEY_VIEWS[key]
        if app.current_mode == want:
            continue
        loading = not stop.is_set()
        event = events.Key(key, key)
        event.set_sender(app)
        t0 = time.perf_counter()
        app._driver.send_message(event)
        while app.current_mode != want and time.perf_counter() - t0 < 30:
            await asyncio.sleep(0.001)
        lat.append([key, time.perf_counter() - t0, loading])

async def main():
    app = create_app(state, watch=False)
    out = {"paint": None, "reload": []}
    async with app.run_test(size=(160, 50)) as pilot:
        while topic_rows(app) == 0:
            await pilot.pause(0.005)
        out["paint"] = _T() - t_start
        if keys:
            stop, out["keys"] = asyncio.Event(), []
            prober = asyncio.create_task(press_views(app, stop, out["keys"]))
        # the engine's model (every record, Recent, Core) replaces the outline
        while app.model is None or getattr(app.model, "outline", False):
            await pilot.pause(0.005)
        out["model"] = _T() - t_start
        # The app streams sessions in after the first paint: time reloads (and read the peak
        # RSS) only once everything is loaded, as an owner's later edits would meet it.
        while getattr(app, "loading", None):
            await pilot.pause(0.01)
        # everything: sessions with their pending counts, and the header's insights
        while getattr(app, "insights", None) is None and getattr(app, "insights_enabled", False):
            await pilot.pause(0.01)
        out["loaded"] = _T() - t_start
        if keys:
            stop.set()
            await prober
            return out

        async def quiet():
            # The insight figures are recomputed in a worker after every model (started one
            # refresh after it is applied); a reload timed while they run would time both
            # (this is a process CPU clock).
            await pilot.pause(0.05)
            busy = [w for w in app.workers if w.group == "insights" and not w.is_finished]
            if busy:
                await app.workers.wait_for_complete(busy)
            await pilot.pause(0.05)
        path = state / "memory" / rel
        base = path.read_text()
        texts = (base.replace("(fact ", "(Fact ", 1), base)
        for i in range(reloads):
            await quiet()
            before = app.model  # replaced the moment the reloaded model is applied
            path.write_text(texts[i % 2])
            t0 = _T()
            app.load_in_background({"memory/" + rel})
            while app.model is before:
                await pilot.pause(0.002)
            out["reload"].append(_T() - t0)
        if path.read_text() != base:
            path.write_text(base)
    out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out

print(json.dumps(asyncio.run(main())))
"""


# Every child times with _T: ``_T() - t0`` is ``[wall seconds, CPU seconds of this process]``.
# The machine is shared: CPU time shows the work, wall time what the owner would wait.
PRELUDE = r"""
import time as _time, resource as _resource
def _cpu():
    # this process and the workers it waited for (a cold index build reads in worker processes)
    ru = _resource.getrusage(_resource.RUSAGE_CHILDREN)
    return _time.process_time() + ru.ru_utime + ru.ru_stime
class _T:
    def __init__(self):
        self.w, self.c = _time.perf_counter(), _cpu()
    def __sub__(self, other):
        return [self.w - other.w, self.c - other.c]
"""


def _child(code: str, *args: object, timeout: float = 900) -> object:
    env = dict(os.environ, TEXTUAL_ANIMATIONS="none")
    done = subprocess.run([PY, "-c", PRELUDE + code, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"child failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _worst_key(result: dict) -> float:
    """The slowest answer to a view key of one app run (printed per key on stderr)."""
    presses = result["keys"]
    print("  keys: " + ", ".join(f"{k}{'*' if busy else ''} {t * 1000:.0f} ms" for k, t, busy in presses)
          + "  (* pressed while loading)", file=sys.stderr)
    return max(t for _k, t, _busy in presses)


def _user_cache() -> Path:
    """The cache root the benchmark children would use without a row's own folders."""
    base = os.environ.get("MEMORY_TUI_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "memory-tui")
    return Path(base)


def _app_caches(state: Path) -> dict[str, str]:
    """The user-cache folders an app start reads and the next start finds as this one left
    them (kept next to the state): the sessions' index, the outline, the readers' parse copy,
    the session shapes and the insight figures."""
    return {name: str(state.parent / f"{prefix}-cache-{state.name}")
            for name, prefix in (("sessions", "session"), ("outline", "outline"), ("parse", "parse"),
                                 ("session-shapes", "shapes"), ("insights", "insights"))}


@contextlib.contextmanager
def _cache_root(**folders: str | None):
    """``MEMORY_TUI_CACHE_DIR`` for the children started inside: a temporary root holding, per
    named cache (``sessions``, ``outline``, ``layouts``, ``overviews``), the folder given (a
    kept one next to the states, moved in for the row and back after it) or an empty one for
    ``None``; the token counts are the user's own (copied in), as every row had them."""
    with tempfile.TemporaryDirectory() as root:
        tokens = _user_cache() / "o200k-counts"
        if tokens.is_dir():
            shutil.copytree(tokens, Path(root) / "o200k-counts")
        moved = []
        for name, kept in folders.items():
            if kept is None:
                continue
            Path(kept).mkdir(parents=True, exist_ok=True)
            os.replace(kept, Path(root) / name)
            moved.append((Path(root) / name, kept))
        try:
            with _env(MEMORY_TUI_CACHE_DIR=root):
                yield
        finally:
            for inside, kept in moved:
                os.replace(inside, kept)


@contextlib.contextmanager
def _env(**values: str):
    """Environment variables for the children started inside (perf-app: cache locations)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _wall(argv: list[str], stdin: str | None = None, prep=None) -> list[float]:
    """``[wall, CPU]`` seconds of one fresh process, end to end (``prep`` runs just before)."""
    if prep is not None:
        prep()
    env = dict(os.environ, TEXTUAL_ANIMATIONS="none")
    c0 = _children_cpu()
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, input=stdin, timeout=900)
    took = [time.perf_counter() - t0, _children_cpu() - c0]
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}… failed ({done.returncode}): {(done.stdout + done.stderr).strip()[-2000:]}")
    return took


# ------------------------------------------------------------------------------- rows


def _cli(state: Path, *args: str) -> list[str]:
    return [PY, "-m", "memory_tui", "--state", str(state), *args]


def _revision(state: Path) -> str:
    out = subprocess.run(_cli(state, "--json", "status"), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["revision"]


def _first_session(state: Path) -> str:
    index = json.loads((state / "sessions" / "index.json").read_text())
    return sorted(index)[len(index) // 2]


def _topic(state: Path) -> str:
    """The middle topic file holding a generated record (the variant's sizes vary widely)."""
    files = sorted(p.relative_to(state / "memory").as_posix() for p in (state / "memory" / "topics").rglob("*.md")
                   if p.name != "core.md" and "(fact " in p.read_text(encoding="utf-8"))
    return files[len(files) // 2]


def measure(row: str, state: Path, runs: int, app_cache: dict, prep=None) -> tuple[list[float], str]:
    """``prep`` (the --cold column's cache emptying) runs right before every timed process."""
    warm = prep is None
    prep = prep or (lambda: None)
    TOPIC = _topic(state)
    if row == "parse_cold":
        return _child(CHILD_PARSE, state, "cold", runs), "s"
    if row == "parse_cold_read":
        return _child(CHILD_PARSE, state, "coldread", runs), "s"
    if row == "parse_cold_full":
        return _child(CHILD_PARSE, state, "coldfull", runs), "s"
    if row == "parse_cached":
        _child(CHILD_PARSE, state, "warm", 1)  # make sure the cache exists
        return _child(CHILD_PARSE, state, "warm", runs), "s"
    if row == "parse_cached_full":
        _child(CHILD_PARSE, state, "warm", 1)
        return _child(CHILD_PARSE, state, "warmfull", runs), "s"
    if row == "revision":
        return _child(CHILD_REVISION, state, runs), "s"
    if row == "pending_cold":
        # perf-app: the session-summary cache of these runs sits next to the workspace; the
        # first run of a new copy fills it (that run's cost is the pending_nocache row).
        cache = state.parent / f"session-cache-{state.name}"
        with _cache_root(sessions=str(cache)):
            _child(CHILD_PENDING, state, "cold", 1)
            return [_child(CHILD_PENDING, state, "cold", 1)[0] for _ in range(runs)], "s"
    if row == "pending_nocache":
        out = []
        for _ in range(runs):
            with _cache_root(sessions=None):
                out.append(_child(CHILD_PENDING, state, "nocache", 1)[0])
        return out, "s"
    if row == "pending_warm":
        return _child(CHILD_PENDING, state, "warm", runs), "s"
    if warm and row in ("why_session_fresh", "why_session_json_fresh", "status_fresh", "drift_session_fresh",
                        "drift_all_fresh"):
        # warm: what the previous run left in the caches (the first run of a new copy fills
        # them; the parse cache is written by writers only, so it is written here as a
        # transaction would have)
        _child(CHILD_PARSE, state, "warm", 1)
        _wall(_cli(state, *{"why_session_fresh": ("why", _first_session(state)), "status_fresh": ("status",),
                           "why_session_json_fresh": ("--json", "why", _first_session(state)),
                           "drift_session_fresh": ("why", "--drift", _first_session(state)),
                           "drift_all_fresh": ("why", "--drift")}[row]))
    if row == "why_session_fresh":
        sid = _first_session(state)
        return [_wall(_cli(state, "why", sid), prep=prep) for _ in range(runs)], "s"
    if row == "why_session_json_fresh":
        sid = _first_session(state)
        return [_wall(_cli(state, "--json", "why", sid), prep=prep) for _ in range(runs)], "s"
    if row == "status_fresh":
        return [_wall(_cli(state, "status"), prep=prep) for _ in range(runs)], "s"
    if row == "drift_session_fresh":
        sid = _first_session(state)
        return [_wall(_cli(state, "why", "--drift", sid), prep=prep) for _ in range(runs)], "s"
    if row == "drift_all_fresh":
        return [_wall(_cli(state, "why", "--drift"), prep=prep) for _ in range(runs)], "s"
    if row in ("edit_noop_fresh", "edit_reword_fresh"):
        path = state / "memory" / TOPIC
        base = path.read_text()
        other = base.replace("(fact ", "(Fact ", 1)
        out = []
        try:
            for i in range(runs):
                text = base if row == "edit_noop_fresh" or i % 2 else other
                out.append(_wall(_cli(state, "edit", "--git-commit", "off", "--from", "-", TOPIC), stdin=text, prep=prep))
        finally:  # leave the workspace as it was, even when a run failed
            if path.read_text() != base:
                _wall(_cli(state, "edit", "--git-commit", "off", "--from", "-", TOPIC), stdin=base)
        return out, "s"
    if row in ("edit_noop_inproc", "edit_reword_inproc"):
        return _child(CHILD_EDIT_INPROC, state, TOPIC, "noop" if row == "edit_noop_inproc" else "reword", runs), "s"
    if row == "apply_update_fresh":
        return _apply_update(state, TOPIC, runs, prep=prep), "s"
    if row == "sessions_open_10k":
        return sessions_open_10k(state.parent, runs), "s"
    if row == "sessions_open_10k_nocache":
        return sessions_open_10k(state.parent, runs, fresh_table=True), "s"
    if row == "app_first_paint_nocache":
        out = []
        for _ in range(runs):
            with _cache_root(sessions=str(state.parent / f"session-cache-{state.name}"), outline=None):
                out.append(_child(CHILD_APP, state, TOPIC, 0)["paint"])
        return out, "s"
    if row == "app_key_latency":
        with _cache_root(**_app_caches(state)):
            return [_worst_key(_child(CHILD_APP, state, TOPIC, 0, "keys")) for _ in range(runs)], "s"
    if row in ("app_first_paint", "app_model", "app_loaded", "app_reload_one_file", "app_peak_rss"):
        if "results" not in app_cache:
            with _cache_root(**_app_caches(state)):
                # warm: what the previous run left in the caches; a run first fills them
                # (a new copy's first run is the cold column's, not this one's)
                _child(CHILD_APP, state, TOPIC, 0)
                app_cache["results"] = [_child(CHILD_APP, state, TOPIC, runs) for _ in range(runs)]
        results = app_cache["results"]
        if row == "app_first_paint":
            return [r["paint"] for r in results], "s"
        if row in ("app_model", "app_loaded"):
            return [r[row[4:]] for r in results], "s"
        if row == "app_peak_rss":
            return [r["rss_mib"] for r in results], "MiB"
        return [t for r in results for t in r["reload"]], "s"
    raise KeyError(row)


# --- sessions-done: the Sessions view on one 10 000-node session ---------------------------
# Its own small state dir (the bench_graph.py session: a trunk with tool rows, 325 tips from
# retries, spawns and merges, half of it marked) next to the scale dirs, so the row times the
# view and not the workspace around it. One fresh app process per run: the app loads, then
# the clock runs from pressing 5 until the graph has painted its rows.

CHILD_SESSIONS = r"""
import asyncio, json, os, sys
os.environ["TEXTUAL_ANIMATIONS"] = "none"
from pathlib import Path
state = Path(sys.argv[1]); sid = sys.argv[2]
from textual import events
from memory_tui.tui.app import create_app

async def main():
    app = create_app(state, watch=False)
    async with app.run_test(size=(120, 40)) as pilot:
        while app.model is None or app.loading:
            await pilot.pause(0.01)
        await pilot.pause()
        t0 = _T()
        # The key goes in as the terminal driver sends it: Pilot.press would then wait until the
        # process is idle (up to 1 s, twice), which times the work that follows the paint too.
        app.post_message(events.Key("5", "5"))
        while True:
            graph = app.screen.query("#sessions-graph")
            g = graph.first() if graph else None
            if g is not None and g.session_id == sid and g.layout_data is not None and g.rendered_rows > 0:
                break
            await asyncio.sleep(0.002)
        took = _T() - t0
        rows = len(g.layout_data.rows)
        # What arrives after the paint: the verdict panel (the session's reasons), then its dry run.
        panel = app.screen.query_one("#sessions-verdict")
        while panel.vm is None:
            await asyncio.sleep(0.005)
        verdict = _T() - t0
        while panel.vm.plan is None:
            await asyncio.sleep(0.005)
        plan = _T() - t0
    return {"open": took, "rows": rows, "verdict": verdict, "dry_run": plan}

print(json.dumps(asyncio.run(main())))
"""


def _sessions_state(states: Path) -> tuple[Path, str]:
    """``<states>/sessions-10k/.openprogram``, built once: the bench_graph session in an
    otherwise empty workspace whose id is the one that session's marks name."""
    sys.path.insert(0, str(HERE))
    from bench_graph import WS, build

    state = states / "sessions-10k" / ".openprogram"
    if not (state / "sessions" / "index.json").is_file():
        scriptorium = state / "memory" / ".scriptorium"
        scriptorium.mkdir(parents=True, exist_ok=True)
        (state / "memory" / "topics").mkdir(exist_ok=True)
        (state / "memory" / "sources").mkdir(exist_ok=True)
        (scriptorium / "workspace-id").write_text(WS + "\n")
        build(state, 10_000)
    return state, "big"


def sessions_open_10k(states: Path, runs: int, fresh_table: bool = False) -> list[list[float]]:
    state, sid = _sessions_state(states)
    out = []
    for _ in range(runs):
        # The layout and overview tables next to the states (like the other caches): the first
        # run fills them.
        with _cache_root(layouts=None if fresh_table else str(states / "layout-cache-sessions-10k"),
                         overviews=None if fresh_table else str(states / "overview-cache-sessions-10k")):
            got = _child(CHILD_SESSIONS, state, sid)
        # Not the row's figure (that is the graph's paint); what still follows it, printed aside.
        print(f"    sessions_open_10k: graph painted {got['open'][0]:.3f} s [{got['open'][1]:.2f}], verdict panel "
              f"{got['verdict'][0]:.3f} s [{got['verdict'][1]:.2f}], dry run {got['dry_run'][0]:.3f} s "
              f"[{got['dry_run'][1]:.2f}] after the key", file=sys.stderr)
        out.append(got["open"])
    return out


def _apply_update(state: Path, TOPIC: str, runs: int, prep=None) -> list[float]:
    from memory_tui.core.format.sources import SourceIndex
    from memory_tui.core.format.topics import parse_tree

    index = SourceIndex.load(state / "memory")
    tree = parse_tree(state / "memory" / "topics", resolve=index.resolve_target)
    topic = tree.topic(TOPIC[len("topics/"):])
    assert topic is not None and topic.units
    unit = topic.units[1]
    mid = unit.memory_id
    out = []

    def request(content: str, where: Path) -> Path:
        req = {"memory_changes": [{"op": "update_record", "memory_id": mid, "content": content, "time": unit.when,
                                    "source_refs": list(unit.source_refs)}], "git_commit": "off"}
        where.write_text(json.dumps(req))
        return where

    with tempfile.TemporaryDirectory() as tmp:
        try:
            for i in range(runs):  # every run is a real change: never the text already there
                f = request(f"Reworded by the benchmark, round {i % 2}.", Path(tmp) / "req.json")
                rev = _revision(state)
                out.append(_wall(_cli(state, "apply", "--base-revision", rev, str(f)), prep=prep))
        finally:
            f = request(unit.content, Path(tmp) / "undo.json")
            _wall(_cli(state, "apply", "--base-revision", "current", str(f)))
    return out


# -------------------------------------------------------------------------------- cold
# What the owner meets first: a state at a path no process has seen, memory-tui's caches
# empty, a fresh process. The copy is made once per scale (a scale-4 state is ~1.5 GB of
# small files); before every cold run every cache is emptied again.

COLD_ROWS = (
    "app_first_paint", "app_model", "app_loaded", "app_peak_rss", "status_fresh", "why_session_json_fresh",
    "why_session_fresh", "pending_cold", "edit_reword_fresh", "edit_noop_fresh", "apply_update_fresh",
    "drift_session_fresh", "drift_all_fresh", "app_key_latency",
)


class Cold:
    """A never-seen copy of ``state`` and an empty user cache, emptied again by :meth:`prep`."""

    def __init__(self, state: Path, copy: Path | None = None) -> None:
        self.keep = copy is not None
        if copy is not None:  # --cold-copy: a copy made before (a scale-16 copy takes long), kept
            self.root = copy
            self.state = copy / "state"
            if not (self.state / "memory").is_dir():
                raise SystemExit(f"--cold-copy {copy}: no state/ copy in it")
        else:
            self.root = Path(tempfile.mkdtemp(prefix=f"cold-{state.name}-", dir=state.parent))
            self.state = self.root / "state"
            print(f"copying {state} to {self.state} (a path never seen) …", file=sys.stderr)
            subprocess.run(["cp", "-a", str(state), str(self.state)], check=True)
        self.cache = self.root / "cache"

    def prep(self) -> None:
        import shutil

        shutil.rmtree(self.cache, ignore_errors=True)
        self.cache.mkdir()
        runtime = self.state / "memory" / ".scriptorium"
        for p in runtime.glob("memory-tui-*"):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()

    @contextlib.contextmanager
    def env(self):
        with _env(MEMORY_TUI_CACHE_DIR=str(self.cache), XDG_CACHE_HOME=str(self.cache)):
            yield

    def close(self) -> None:
        import shutil

        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)


def measure_cold(row: str, cold: Cold, runs: int, app_cache: dict) -> tuple[list[float], str]:
    state, prep = cold.state, cold.prep
    with cold.env():
        if row in ("status_fresh", "why_session_fresh", "why_session_json_fresh", "drift_session_fresh",
                   "drift_all_fresh"):
            return measure(row, state, runs, {}, prep=prep)
        if row == "pending_cold":
            out = []
            for _ in range(runs):
                prep()
                out.append(_child(CHILD_PENDING, state, "nocache", 1)[0])
            return out, "s"
        if row in ("edit_noop_fresh", "edit_reword_fresh"):
            return [measure(row, state, 1, {}, prep=prep)[0][0] for _ in range(runs)], "s"
        if row == "apply_update_fresh":
            return _apply_update(state, _topic(state), runs, prep=prep), "s"
        if row == "app_key_latency":
            out = []
            for _ in range(runs):
                prep()
                out.append(_worst_key(_child(CHILD_APP, state, _topic(state), 0, "keys")))
            return out, "s"
        if row.startswith("app_"):
            if "cold" not in app_cache:
                got = []
                for _ in range(runs):
                    prep()
                    got.append(_child(CHILD_APP, state, _topic(state), 0))
                app_cache["cold"] = got
            results = app_cache["cold"]
            if row == "app_peak_rss":
                return [r["rss_mib"] for r in results], "MiB"
            return [r[{"app_first_paint": "paint", "app_model": "model", "app_loaded": "loaded"}[row]] for r in results], "s"
    raise KeyError(row)


# ------------------------------------------------------------------------------ output


def ensure_state(states: Path, scale: float, variant: bool = False) -> Path:
    out = states / f"{'variant' if variant else 'scale'}-{scale:g}"
    if (out / "memory").is_dir() and (out / "sessions" / "index.json").is_file():
        return out
    if out.exists():
        raise SystemExit(f"{out} exists but is not a finished state; remove it")
    print(f"building scale {scale:g} workspace in {out} …", file=sys.stderr)
    subprocess.run([PY, str(HERE / "make_state.py"), "--scale", f"{scale:g}", "--out", str(out),
                    *(["--variant"] if variant else [])], check=True)
    return out


def summary(values: list, unit: str) -> dict:
    """Wall-clock median/min/max (``[wall, cpu]`` pairs also give the CPU median)."""
    walls = [v[0] if isinstance(v, list) else v for v in values]
    out = {"median": statistics.median(walls), "min": min(walls), "max": max(walls), "runs": len(walls), "unit": unit}
    cpus = [v[1] for v in values if isinstance(v, list)]
    if cpus:
        out["cpu_median"] = statistics.median(cpus)
    return out


def fmt(s: dict | None) -> str:
    if s is None:
        return "n/a"
    if s["unit"] == "MiB":
        return f"{s['median']:.0f} ({s['min']:.0f}–{s['max']:.0f})"
    cpu = f" [{s['cpu_median']:.2f}]" if "cpu_median" in s else ""
    return f"{s['median']:.3f} ({s['min']:.3f}–{s['max']:.3f}){cpu}"


def compile_package() -> None:
    """Write the bytecode of the memory_tui the children import, as an install would.

    The fresh-process rows time what an owner waits for, and an installed package carries
    its ``.pyc`` files; a checkout run with ``PYTHONDONTWRITEBYTECODE`` set (as some
    sandboxes do) never writes them, so every child would recompile ~18 000 lines of source
    first (~0.25 s of CPU on a slow core) and the rows would time the compiler."""
    code = ("import compileall, os, memory_tui; "
            "compileall.compile_dir(os.path.dirname(memory_tui.__file__), quiet=1)")
    subprocess.run([PY, "-c", code], check=True, env=dict(os.environ))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", default="1", help="comma-separated scales, e.g. 1,2,4 (default 1)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--states", type=Path, default=Path(tempfile.gettempdir()) / "memory-tui-bench")
    ap.add_argument("--cold", action="store_true", help="a cold column beside the warm one (see the module doc)")
    ap.add_argument("--cold-only", action="store_true", help="only the cold column (implies --cold)")
    ap.add_argument("--cold-runs", type=int, default=3, help="runs of every cold cell (default 3)")
    ap.add_argument("--variant", action="store_true", help="the states of make_state.py --variant")
    ap.add_argument("--cold-copy", type=Path, default=None,
                    help="DIR holding state/, a copy made before (one scale only); kept afterwards")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.cold_runs < 1:
        ap.error("--runs and --cold-runs must be >= 1")
    args.cold = args.cold or args.cold_only
    scales = [float(s) for s in args.scale.split(",") if s.strip()]
    known = dict(ROWS)
    wanted = [r for r in args.rows.split(",") if r in known] if args.rows else list(known)
    args.states.mkdir(parents=True, exist_ok=True)
    compile_package()
    columns = ([] if args.cold_only else ["warm"]) + (["cold"] if args.cold else [])
    results: dict[str, dict[str, dict[str, dict | None]]] = {c: {r: {} for r in wanted} for c in columns}
    for scale in scales:
        state = ensure_state(args.states, scale, args.variant)
        key = f"{scale:g}"
        if "warm" in columns:
            app_cache: dict = {}
            for row in wanted:
                if row in NOT_YET:
                    results["warm"][row][key] = None
                    continue
                values, unit = measure(row, state, args.runs, app_cache)
                results["warm"][row][key] = summary(values, unit)
                if not args.json:
                    print(f"  scale {key} warm: {row} {fmt(results['warm'][row][key])}", file=sys.stderr)
        if "cold" in columns:
            cold = Cold(state, args.cold_copy)
            try:
                app_cache = {}
                for row in wanted:
                    if row not in COLD_ROWS:
                        results["cold"][row][key] = None
                        continue
                    values, unit = measure_cold(row, cold, args.cold_runs, app_cache)
                    results["cold"][row][key] = summary(values, unit)
                    if not args.json:
                        print(f"  scale {key} cold: {row} {fmt(results['cold'][row][key])}", file=sys.stderr)
            finally:
                cold.close()

    def growth(col: str, row: str) -> float | None:
        a, b = results[col][row].get(f"{min(scales):g}"), results[col][row].get(f"{max(scales):g}")
        return (b["median"] / a["median"]) if a and b and len(scales) > 1 and a["median"] else None

    if args.json:
        obj = {}
        for row in wanted:
            obj[row] = {c: {"scales": results[c][row], "growth": growth(c, row)} for c in columns}
            obj[row]["target"] = TARGETS.get(row)
            if row in NOT_YET:
                obj[row]["note"] = NOT_YET[row]
        print(json.dumps(obj, indent=2))
        return 0
    names = dict(ROWS)
    heads = [f"{c} s{s:g}" for s in scales for c in columns]
    print(f"\n{'row':45} " + " ".join(f"{h:>34}" for h in heads)
          + "".join(f" {c + ' ×':>8}" for c in columns if len(scales) > 1) + f"  {'target':>11}")
    for row in wanted:
        cells = [fmt(results[c][row].get(f"{s:g}")) for s in scales for c in columns]
        line = f"{names[row]:45} " + " ".join(f"{c:>34}" for c in cells)
        if len(scales) > 1:
            for c in columns:
                g = growth(c, row)
                line += f" {'—' if g is None else f'{g:.2f}x':>8}"
        line += f"  {TARGETS.get(row, ''):>11}"
        if row in NOT_YET:
            line += f"  ({NOT_YET[row]})"
        print(line)
    print("\nwall-clock median (min–max) of the runs [CPU median]; seconds unless noted; growth = largest / smallest"
          " scale; on a shared machine read the spread and the CPU column")
    return 0


if __name__ == "__main__":
    sys.exit(main())
