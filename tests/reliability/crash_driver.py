"""Kill a child at random instants during each operation, then check what the next open sees.

After every kill the driver does what the next locked open does (``recover`` + the marks
intent, under the write lock) and checks:

* the workspace is valid: every topic parses, no archive has a partial frame;
* every record committed before the operation is still there (by memory id);
* no node got a mark unless its turn is archived and the revision moved (its batch installed);
* no stage, install scratch, journal, marks intent or ``index.lock`` is left;
* git holds the installed revision (no uncommitted change of a tracked path, no pending marker);
* the recovered state is exactly one of the operation's committed states: the tracked memory
  (topics, views, archives) and every node's mark are compared byte for byte with the state
  before the trial ("old"), the state an uninterrupted run of the same input leaves ("new"),
  and, for operations made of several transactions (``write`` runs one per batch), the state
  at each release of the write lock in between ("step"). ``write`` and ``backfill`` append
  the archive first (spec §7.4), so "that step's archive appended, nothing else" is the one
  further state they may stop in ("archive-only"). A trial the kill did not interrupt must
  end in exactly the new state.

A kill counts as landing mid-run only when the child had not yet said that the operation
returned (``crash_child.DONE``); the kill instant is drawn over the operation's own duration,
re-estimated as the run goes (:class:`KillClock`).

``run(op, trials, seed, kills=N)`` returns a :class:`Figures`; ``run_slow.py`` prints them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OPS = ("edit", "append", "write", "migrate", "views", "reorganize", "backfill")
FIXTURE_OPS = ("write", "migrate", "reorganize", "backfill", "views")  # need OpenProgram's sessions
MARK = "memory_written_scriptorium"


ARCHIVE_FIRST = ("write",)  # the archive append is its own durable step before the install
VARIANTS = 4  # distinct inputs for edit/append; the new state of each is computed once


@dataclass
class Figures:
    """Every trial is counted and checked; ``killed`` counts only the trials whose kill landed
    while the operation was running (the child had not said ``DONE``), the figure a target of
    kills is met on. ``late``: the kill came after the operation returned (only the interpreter's
    exit was left); ``timing``: trials run without a kill to measure the duration the kill instant
    is drawn over (they are checked like every other and must end in "new")."""

    op: str
    trials: int = 0
    killed: int = 0  # trials where the kill landed before the operation returned
    late: int = 0  # a kill was sent, but after the operation had returned
    timing: int = 0  # run to the end on purpose, for the duration estimate
    failures: list[str] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=lambda: {"old": 0, "new": 0, "step": 0, "archive-only": 0})
    killed_outcomes: dict[str, int] = field(default_factory=lambda: {"old": 0, "new": 0, "step": 0, "archive-only": 0})
    changes: bool = True  # False when the operation's new state equals its old one (a no-op input)
    ceiling: float = 0.0  # the current upper end of the kill instant, seconds after ``go``
    last: dict = field(default_factory=dict)  # the latest trial, for a caller that logs each one

    def line(self) -> str:
        seen = " ".join(f"{k} {v}" for k, v in self.killed_outcomes.items())
        noop = "" if self.changes else "  (no-op on this input: old = new)"
        return (f"{self.op:<11} trials {self.trials:>5}  killed mid-run {self.killed:>5} (recovered to: {seen})  "
                f"late kills {self.late}  timing runs {self.timing}  failures {len(self.failures)}{noop}")


class KillClock:
    """Where in the run the kill lands: uniformly in ``[0, m]`` seconds after ``go``, ``m`` the
    median of the latest uninterrupted durations (``go`` to the operation's return, not to the
    process's exit: a kill in the interpreter's exit would not be a kill mid-run). A delay
    fixed once at the start (the busiest or the calmest moment of a shared machine) let half
    the kills of a later, faster stretch land after the operation had returned; re-estimated
    from timing runs spread through the whole run, the bound follows the load. Only timing
    runs (uninterrupted on purpose) feed the median: a trial that escaped its kill ran short
    of its draw, so it would bias it down."""

    WINDOW = 9  # timing runs the median is taken over
    EVERY = 10  # one trial in EVERY is a timing run (after the first WARMUP)
    WARMUP = 3

    def __init__(self, seed_durations: list[float]):
        self.samples: list[float] = list(seed_durations)[-self.WINDOW:]

    def timing_trial(self, n: int) -> bool:
        return n < self.WARMUP or n % self.EVERY == self.EVERY - 1

    def observe(self, secs: float) -> None:
        self.samples = (self.samples + [secs])[-self.WINDOW:]

    @property
    def ceiling(self) -> float:
        ordered = sorted(self.samples)
        k = len(ordered)
        return ordered[k // 2] if k % 2 else (ordered[k // 2 - 1] + ordered[k // 2]) / 2

    def draw(self, rng: random.Random) -> float:
        return rng.uniform(0.0, self.ceiling)


@dataclass(frozen=True)
class Snapshot:
    """What a trial may end in, compared exactly: the git-tracked memory split into the archives
    and everything else, and every node's mark."""

    sources: str
    rest: str
    marks: str
    runtime: str = ""  # runtime.json's counters and whether legacy cursors are left


def snapshot(state: Path) -> Snapshot:
    import hashlib

    from memory_tui.core.format.paths import GIT_TRACKED

    mem = state / "memory"
    src, rest = hashlib.sha256(), hashlib.sha256()
    for top in GIT_TRACKED:
        base = mem / top
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else []
        for f in files:
            h = src if top == "sources" else rest
            h.update(f.relative_to(mem).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    marks = json.dumps(sorted((list(k), v) for k, v in _marks(state).items()), default=str) if (state / "sessions").is_dir() else ""
    return Snapshot(src.hexdigest()[:16], rest.hexdigest()[:16], hashlib.sha256(marks.encode()).hexdigest()[:16],
                    _runtime_key(mem))


def _runtime_key(mem: Path) -> str:
    """The counters a write leaves (``last_global_at`` is the clock, not compared) and the
    legacy cursors a migration removes."""
    try:
        data = json.loads((mem / ".scriptorium" / "runtime.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "none"
    keys = ("write_commits_since_global", "local_batches", "local_tokens")
    return json.dumps([data.get(k) for k in keys] + ["cursors" in data])


def classify(op: str, got: Snapshot, old: Snapshot, steps: list[Snapshot]) -> str | None:
    """``steps``: the states at each lock release of an uninterrupted run, the last one new."""
    new = steps[-1]
    if got == new:
        return "new"
    if got == old:
        return "old"
    if got in steps:
        return "step"
    if op in ARCHIVE_FIRST:
        for before, after in zip([old, *steps], steps):
            if got == Snapshot(after.sources, before.rest, before.marks, before.runtime):
                return "archive-only"
    return None


# ------------------------------------------------------------------------------- workspaces


def _small_state(dest: Path) -> Path:
    sys.path.insert(0, str(HERE))
    from rel_support import make_state

    return make_state(dest, git="auto")


def fixture_master(shared: Path, dest: Path, op: str = "write") -> Path | None:
    tgz = shared / "fixtures" / "openprogram-state.tgz"
    if not tgz.is_file():
        return None
    with tarfile.open(tgz) as tar:
        tar.extractall(dest, filter="tar")
    state = dest / ".openprogram"
    # give the fixture its git history first, so every trial starts committed
    _child(["views", str(state)])
    give_work(op, state)
    return state


def _child(argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, str(HERE / "crash_child.py"), *argv], cwd=REPO, capture_output=True, env=_env())
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"preparing the state failed: {argv} {proc.stderr[-1500:]!r}")


def _commit(state: Path, message: str) -> None:
    from memory_tui.core.store import gitlog

    out = gitlog.commit(state / "memory", message, env=_env())
    if not (out.committed or out.nothing_to_commit):
        raise RuntimeError(f"preparing the state: git refused: {out.error}")


def give_work(op: str, state: Path) -> None:
    """Make the fixture a state on which ``op`` has real work (the bare fixture needs no
    migration, backfill or reorganize, and its views are current), committed to git so every
    trial starts clean:

    * ``backfill``: after ``write --force``, whose writer leaves 7 archived sources uncited;
    * ``migrate``: after ``write --force``, every mark removed again and legacy ``cursors``
      put into ``runtime.json``, so the migration re-marks what the archive proves;
    * ``reorganize``: three records that repeat another record's words (citing another
      source) added through ``update``, so the organizer folds three pairs;
    * ``views``: ``relations.json`` and one timeline day replaced by stale text and committed.
    """
    mem = state / "memory"
    if op in ("backfill", "migrate"):
        _child(["write", str(state)])
    if op == "migrate":
        from memory_tui.sessions.marks import MARK_KEY, serialize_node

        for f in sorted((state / "sessions").glob("*/history/*.json")):
            node = json.loads(f.read_text(encoding="utf-8"))
            meta = node.get("metadata") or {}
            if MARK_KEY in meta:
                del meta[MARK_KEY]
                node["metadata"] = meta
                f.write_text(serialize_node(node), encoding="utf-8")
        rt = mem / ".scriptorium" / "runtime.json"
        data = json.loads(rt.read_text(encoding="utf-8"))
        data["cursors"] = {"legacy": {"message_id": "m", "ordinal": 1}}
        rt.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    elif op == "reorganize":
        from memory_tui.core.tx import api as tx
        from memory_tui.core.store.workspace import workspace_revision
        from memory_tui.pipeline.context import topic_tree

        tree = topic_tree(mem)
        units = [u for u in tree.units if u.source_refs and not u.legacy]
        ops = []
        for keep, other in list(zip(units, units[1:]))[:3]:
            ops.append({"op": "create_record", "content": keep.content, "time": keep.when,
                        "source_refs": [other.source_refs[0]],
                        "destination": {"topic_path": f"topics/{keep.topic_path}", "headings": list(keep.headings),
                                        "position": "end"}})
        res = tx.update(state, workspace_revision(mem), memory_changes=ops, git_commit="off")
        if not res.ok:
            raise RuntimeError(f"preparing the reorganize state: {res}")
    elif op == "views":
        (mem / "relations.json").write_text("{}\n", encoding="utf-8")
        days = sorted((mem / "timeline").rglob("*.md"))
        if days:
            days[0].write_text("# stale\n", encoding="utf-8")
    _commit(state, f"crash driver: give {op} work")


_PYCACHE: list[str] = []


def _bytecode_prefix() -> str | None:
    """Where PYTHONDONTWRITEBYTECODE is set and no prefix is given, every child compiled all
    it imported again (a quarter of a child's CPU, most of it after ``go``, so many kills
    landed in the compiler). The children write their bytecode into a folder of this run's
    own instead and the next child reads it. Not the package alone: with a prefix set Python
    looks for every module's bytecode there, the standard library's too."""
    if os.environ.get("PYTHONPYCACHEPREFIX") or not (sys.flags.dont_write_bytecode or os.environ.get("PYTHONDONTWRITEBYTECODE")):
        return None
    if not _PYCACHE:
        import atexit
        import tempfile

        prefix = tempfile.mkdtemp(prefix="memory-tui-crash-pycache-")
        atexit.register(shutil.rmtree, prefix, ignore_errors=True)
        _PYCACHE.append(prefix)
    return _PYCACHE[0]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    prefix = _bytecode_prefix()
    if prefix:
        env["PYTHONPYCACHEPREFIX"] = prefix
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update({"GIT_AUTHOR_DATE": "2026-01-01T00:00:00+00:00", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+00:00"})
    return env


# ------------------------------------------------------------------------------- observing


def _memory_ids(mem: Path) -> set[str]:
    from memory_tui.core.store.workspace import open_state

    view = open_state(mem.parent)
    if view.tree is None:
        return set()
    out = set()
    for u in view.tree.units:
        out.add(u.memory_id)
        out.update(getattr(u, "aliases", ()) or ())
    return out


def _marks(state: Path) -> dict[tuple[str, str], object]:
    out = {}
    for f in sorted((state / "sessions").glob("*/history/*.json")):
        try:
            node = json.loads(f.read_text(encoding="utf-8"))
        except ValueError:
            continue
        out[(f.parts[-3], node.get("id"))] = (node.get("metadata") or {}).get(MARK)
    return out


def _leftovers(mem: Path) -> list[str]:
    out = []
    for rt in (".scriptorium", ".nativemem"):
        for name in (f"{rt}-txn", f"{rt}-stage"):
            if (mem / name).exists():
                out.append(name)
        for name in ("install-journal.json", "install-journal.json.tmp", "marks-pending.json", "migrate-pending.json",
                     "git-pending"):
            if (mem / rt / name).exists():
                out.append(f"{rt}/{name}")
    from memory_tui.core.store.gitlog import stale_locks

    out += [p.relative_to(mem).as_posix() for p in stale_locks(mem)]
    return out


def _git_dirty(mem: Path) -> str:
    if not (mem / ".git").is_dir():
        return ""
    from memory_tui.core.format.paths import GIT_TRACKED

    paths = [p for p in GIT_TRACKED if (mem / p).exists()]
    proc = subprocess.run(["git", "status", "--porcelain", "--", *paths], cwd=mem, capture_output=True, text=True)
    return proc.stdout.strip()


def recover_open(state: Path) -> None:
    """What the next locked open does before anything else (every verb that takes the lock:
    an edit, a rebuild, a job), nothing more."""
    import memory_tui  # noqa: F401 - wires the engine's open step, as every entry point does
    from memory_tui.core.store.lock import write_lock
    from memory_tui.core.tx.stage import open_locked

    mem = state / "memory"
    with write_lock(mem, 10.0):
        open_locked(mem)


def temp_files(state: Path) -> set[str]:
    """Every ``*.tmp`` file under ``state`` (a state directory, or the user cache dir; git's own
    objects aside)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(state):
        if ".git" in dirnames:
            dirnames.remove(".git")
        for n in filenames:
            if n.endswith(".tmp"):
                out.add(os.path.relpath(os.path.join(dirpath, n), state))
    return out


def check(state: Path, before_ids: set[str], before_marks: dict, before_rev: str, before_temps: set[str] = frozenset(),
          cache_dir: Path | None = None, before_cache_temps: set[str] = frozenset()) -> list[str]:
    from memory_tui.core.format.sources import SourceIndex
    from memory_tui.core.store.workspace import open_state, workspace_revision

    mem = state / "memory"
    bad: list[str] = []
    view = open_state(state)
    errors = [p for p in view.problems if p.code in ("INVALID_TOPIC_FORMAT",) and p.details.get("severity") != "warning"]
    index = SourceIndex.load(mem)
    for rel, f in index.files.items():
        if not f.complete:
            bad.append(f"partial archive frame in {rel}")
    lost = before_ids - _memory_ids(mem)
    if lost:
        bad.append(f"lost committed records: {sorted(lost)[:5]}")
    rev = workspace_revision(mem)
    if (state / "sessions").is_dir():
        archived = index.all_ids()
        from memory_tui.pipeline.write import source_record  # noqa: F401 - same id rule as the writer

        for key, wid in _marks(state).items():
            if wid and before_marks.get(key) != wid:
                sid = f"openprogram/{key[0]}/{key[1]}"
                if rev == before_rev or sid not in archived:
                    bad.append(f"mark without an installed batch: {key}")
    left = _leftovers(mem)
    if left:
        bad.append(f"left behind: {left}")
    temps = temp_files(state) - set(before_temps)
    if temps:
        bad.append(f"temp files left: {sorted(temps)[:5]}")
    if cache_dir is not None:
        cache_temps = temp_files(cache_dir) - set(before_cache_temps)
        if cache_temps:
            bad.append(f"temp files left in the user cache dir: {sorted(cache_temps)[:5]}")
    dirty = _git_dirty(mem)
    if dirty:
        bad.append(f"git differs from the installed revision: {dirty.splitlines()[:3]}")
    del errors
    return bad


# ------------------------------------------------------------------------------- running


def _child_argv(op: str, state: Path, n: int, scratch: Path) -> list[str]:
    extra: list[str] = []
    if op == "edit":
        sys.path.insert(0, str(HERE))
        from rel_support import ids, topic

        v = n % VARIANTS
        src = scratch / f"edit-{v}.md"
        src.write_text(topic(f"Crash {v}", [(f"Fact {v} one.", ids()[v % 6]), (f"Fact {v} two.", ids()[(v + 1) % 6])]))
        extra = [f"topics/crash/t{v}.md", "--from", str(src), "--create"]
    elif op == "append":
        extra = [str(n % VARIANTS)]
    return [sys.executable, str(HERE / "crash_child.py"), op, str(state), *extra]


def _run_child(argv: list[str], delay: float | None, trace: Path | None = None) -> tuple[str, float]:
    """Run one child and kill its process group ``delay`` seconds after ``go`` unless it exited
    by then. Returns how it ended and the seconds from ``go`` to the operation's return (as the
    child's ``DONE`` says; to its exit when it never said it): ``"mid-run"`` (killed before the
    operation returned: no ``DONE``), ``"late"`` (killed after it returned, in the interpreter's
    exit) or ``"finished"`` (exited on its own)."""
    import crash_child

    env = _env()
    if trace is not None:
        env["MEMORY_TUI_CRASH_TRACE"] = str(trace)
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    t0 = time.monotonic()
    words = line.split()
    if not words or words[0] != b"go":
        proc.wait()
        raise RuntimeError(f"child did not start: {line!r} {proc.stderr.read()[-2000:]!r}")
    if len(words) > 1:
        # the child's own instant: under load the driver reads ``go`` late, and a short
        # operation may be over by then (``time.monotonic()`` is one clock for the machine)
        t0 = min(t0, float(words[1]))
    killed = False
    if delay is not None:
        try:
            proc.wait(timeout=max(0.0, t0 + delay - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the child and any git it started
            killed = True
    proc.wait()
    secs = time.monotonic() - t0
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    if delay is None and proc.returncode != 0 and not _incomplete_backfill(argv, proc.returncode, out):
        # an uninterrupted run that fails would make "new" equal "old" and every trial pass
        raise RuntimeError(f"uninterrupted run failed (exit {proc.returncode}): {argv[2:]} "
                           f"{out[-1500:]!r} {err[-1500:]!r}")
    done = _done_at(err, crash_child.DONE)
    if done is not None:
        secs = done - t0
    if not killed:
        return "finished", secs
    return ("late" if done is not None else "mid-run"), secs


def _done_at(err: bytes, marker: bytes) -> float | None:
    at = err.rfind(marker)
    if at < 0:
        return None
    try:
        return float(err[at + len(marker):].split(b"\n", 1)[0])
    except ValueError:
        return None


def _incomplete_backfill(argv: list[str], returncode: int, out: bytes) -> bool:
    """``backfill`` exits 1 while trusted sources stay uncited (OpenProgram's rule), also when
    every batch ran: that is its finished run, not a failure (``error`` would say one)."""
    if argv[2:3] != ["backfill"] or returncode != 1:
        return False
    try:
        body = json.loads(out)
    except ValueError:
        return False
    return body.get("status") == "incomplete" and "error" not in body


def run(op: str, trials: int, *, seed: int = 0, work: Path, shared: Path | None = None,
        stop_at: float | None = None, progress=None, kills: int = 0) -> Figures:
    """Trials of ``op`` until ``trials`` of them ran or, with ``kills``, until that many kills
    landed mid-run (``trials`` 0: no cap on trials); stops early (fewer, reported) once
    ``time.monotonic()`` passes ``stop_at``, and calls ``progress(figures)`` after every trial
    (``figures.last`` describes it) so a caller can keep partial figures that survive the run
    being stopped.

    The children and the checks use a user cache dir of the run's own (kept warm across its
    trials, as a user's is), so a temp file a kill leaves there is seen and nobody else's is."""
    if trials <= 0 and kills <= 0:
        raise ValueError("give a number of trials or of kills")
    cache_dir = work / "user-cache"
    cache_dir.mkdir(parents=True, exist_ok=True)
    saved = os.environ.get("MEMORY_TUI_CACHE_DIR")
    os.environ["MEMORY_TUI_CACHE_DIR"] = str(cache_dir)
    try:
        return _run(op, trials, kills, seed=seed, work=work, shared=shared, stop_at=stop_at, progress=progress,
                    cache_dir=cache_dir)
    finally:
        if saved is None:
            os.environ.pop("MEMORY_TUI_CACHE_DIR", None)
        else:
            os.environ["MEMORY_TUI_CACHE_DIR"] = saved


def _run(op: str, trials: int, kills: int, *, seed: int, work: Path, shared: Path | None, stop_at: float | None,
         progress, cache_dir: Path) -> Figures:
    rng = random.Random(f"{op}-{seed}")
    figures = Figures(op)
    work.mkdir(parents=True, exist_ok=True)
    master: Path | None
    if op in FIXTURE_OPS:
        if shared is None:
            raise RuntimeError("fixture ops need the shared fixtures")
        master = fixture_master(shared, work / "master", op)
        if master is None:
            raise RuntimeError("fixture not found")
    else:
        master = _small_state(work / "master-small")
    # The exact new state of every input variant (each run twice: an operation whose result is
    # not a function of its input could not be checked exactly, and is reported as such instead
    # of being waved through). These runs trace a snapshot at every lock release, which slows
    # them: their durations do not seed the kill clock.
    variants = VARIANTS if op in ("edit", "append") else 1
    expected: dict[int, list[Snapshot]] = {}
    for v in range(variants):
        got = []
        for k in range(2):
            calib = work / "calib"
            trace = work / f"trace-{v}-{k}.jsonl"
            shutil.copytree(master, calib, symlinks=True)
            _run_child(_child_argv(op, calib, v, work), None, trace)
            recover_open(calib)
            lines = trace.read_text(encoding="utf-8").splitlines() if trace.exists() else []
            steps = [Snapshot(**json.loads(line)) for line in lines]
            final = snapshot(calib)
            if not steps or steps[-1] != final:
                steps.append(final)
            got.append(steps)
            shutil.rmtree(calib)
        if got[0] != got[1]:
            raise RuntimeError(f"{op}: two uninterrupted runs of the same input differ ({got[0]} / {got[1]})")
        expected[v] = got[0]
    old = snapshot(master)
    figures.changes = any(e[-1] != old for e in expected.values())
    # records the operation removes by design (reorganize folds duplicates into one)
    calib = work / "calib"
    shutil.copytree(master, calib, symlinks=True)
    _, secs = _run_child(_child_argv(op, calib, 0, work), None)
    recover_open(calib)
    folded = _memory_ids(master / "memory") - _memory_ids(calib / "memory")
    shutil.rmtree(calib)
    clock = KillClock([secs])
    state = work / "trial"
    n = 0
    while True:
        if stop_at is not None and time.monotonic() >= stop_at:
            break
        if trials > 0 and n >= trials:
            break
        if kills > 0 and figures.killed >= kills:
            break
        if state.exists():
            shutil.rmtree(state)
        shutil.copytree(master, state, symlinks=True)
        mem = state / "memory"
        before_ids = _memory_ids(mem)
        before_marks = _marks(state) if (state / "sessions").is_dir() else {}
        from memory_tui.core.store.workspace import workspace_revision

        before_rev = workspace_revision(mem)
        before_temps = temp_files(state)
        before_cache_temps = temp_files(cache_dir)
        timing = clock.timing_trial(n)
        ceiling = clock.ceiling
        # a timing run still has a bound, so a hang is killed (and reported) rather than waited on
        delay = max(60.0, 20 * ceiling) if timing else clock.draw(rng)
        ended, secs = _run_child(_child_argv(op, state, n, work), delay)
        if timing and ended == "finished":
            clock.observe(secs)
        figures.trials += 1
        figures.timing += timing
        figures.killed += ended == "mid-run"
        figures.late += ended == "late"
        figures.ceiling = clock.ceiling
        kind = None
        try:
            recover_open(state)
            bad = check(state, before_ids - folded, before_marks, before_rev, before_temps, cache_dir, before_cache_temps)
            steps = expected[n % variants]
            got = snapshot(state)
            kind = classify(op, got, old, steps)
            if kind is None:
                bad.append(f"recovered to none of the committed states: {got} (old {old}, new {steps[-1]}, "
                           f"{len(steps) - 1} steps between)")
            elif ended != "mid-run" and kind != "new":
                bad.append(f"the operation returned before any kill but the state is {kind}, not new")
            else:
                figures.outcomes[kind] += 1
                if ended == "mid-run":
                    figures.killed_outcomes[kind] += 1
        except Exception as exc:  # noqa: BLE001 - a crash of the check is a finding, reported with its trial
            bad = [f"recovery raised {type(exc).__name__}: {exc}"]
        figures.failures += [f"trial {n}: {b}" for b in bad]
        figures.last = {"n": n, "ended": ended, "timing": timing, "delay": None if timing else round(delay, 4),
                        "ceiling": round(ceiling, 4), "seconds": round(secs, 4), "state": kind, "failures": len(bad)}
        n += 1
        if progress is not None:
            progress(figures)
    return figures
