"""The sessions' summary index: what ``status``, pending and the sessions list need of every
session, kept across processes.

Counting what is pending, or printing ``status``, means reading and analysing every session's
node files (60 000 at the benchmark's scale 1), although between two runs almost every session
is unchanged. This module keeps, per session, the figures and the clock-independent facts of
its analysis (:class:`SessionSummary`: the list's pending figure, its share of the status
count, the reasons that follow from its files, the kept states' and the drift's domains) in
the user's cache directory, keyed by :func:`store.session_content_key` -- the session stamp of
spec §1.8 plus every node and commit file's stat stamp (mtime, size, inode, ctime; the kit's
racy rule) -- and by the workspace id, the trigger threshold, the token counter and a digest
of this package's code. What depends on the clock, the idle watcher or the records is composed
from those facts when asked (:func:`status_row`). A session whose key is the one an entry was
made from is not read at all; every other session is loaded and analysed for real (in worker
processes when there are many) and its entry rewritten.

Where it lives: ``$MEMORY_TUI_CACHE_DIR`` (else ``$XDG_CACHE_HOME/memory-tui``, else
``~/.cache/memory-tui``), next to the token-count memo: reading a state directory never
writes into it (``tests/unit/test_readonly.py``). One compact index per state dir (every
session's entry in one envelope of the cache kit: one read, not one file per session),
rewritten whole when any entry changed. A damaged index (the envelope's crc), one of another
format or state, or an entry of another key or of the wrong shape is a miss, and the next load
rewrites it; losing the directory only costs time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from memory_tui.core.cache import envelope
from memory_tui.core.format.errors import Problem
from memory_tui.core.fsutil import cache_name_of, user_cache_dir

from .kept import live_turns
from .records import MARK_KEY, PendingCount, SessionAnalysis, analyze_session, status_pending_count
from .store import Session, SessionSnapshot, discover, load_sessions, registry_rel, session_content_key

FORMAT = "memory-tui/session-summary/4"  # 4: the live turns alone (no separate id lists)


@dataclass(frozen=True)
class SessionSummary:
    """What ``status``, pending and the sessions list need of one session: the figures and
    every clock-independent fact of its analysis. What depends on the clock, the idle
    watcher's state or the records (the kept counts, the drift) is composed from these
    facts when asked (:func:`status_row`), so one entry serves every run."""

    session_id: str
    title: str  # unsanitised, as Session.title
    nodes: int
    updated_at: float | None
    pending: int  # distinct unmarked records over the session's forced-order tips (the list's figure)
    status_ids: int  # this session's share of ``status_pending_count`` (distinct record ids)
    status_problems: tuple[Problem, ...]  # what made OpenProgram's count raise for this session
    rel: str = ""  # the session folder, state-relative (the reasons' evidence names files in it)
    head_id: str | None = None
    in_registry: bool = False
    archived: bool = False
    tips: int = 0  # rows of list_branches
    head_pending_tokens: int = 0
    reasons: tuple[dict, ...] = ()  # JSON of reasons.session_file_reasons
    problems: tuple[dict, ...] = ()  # JSON of the session's load problems
    node_ids: tuple[str, ...] = ()  # every node but the graph root (the kept states' domain)
    mine: tuple[str, ...] = ()  # of those, the ones marked by this workspace
    # the turns a live tip reaches (``kept.live_turns``: id, tips, file, mark, pending by the
    # marks), the drift's one source: ``status`` counts it and ``why --drift`` lists it by
    # comparing them with the records' citations, without reading the session again
    live: tuple = ()


@dataclass(frozen=True)
class SummaryResult:
    summaries: Mapping[str, SessionSummary]  # in load_sessions' order (newest first)
    pending: PendingCount  # equal to status_pending_count over a full load
    read: tuple[str, ...]  # the sessions that were loaded for real (the others came from the cache)
    problems: tuple[Problem, ...] = ()  # discovery's (the registry, locations.json): a full load's snapshot.problems
    keys: Mapping[str, str | None] | None = None  # every session's content key, taken before anything was read


def cache_dir() -> Path:
    """``sessions/`` in memory-tui's cache dir (``$MEMORY_TUI_CACHE_DIR``)."""
    return user_cache_dir("sessions")


def _code_tag() -> str:
    """A digest of the code a summary is computed by (this whole package: the analysis, the
    reasons, the branch rules) and of the problem codes: entries of other code are misses."""
    global _CODE_TAG
    if _CODE_TAG is None:
        import memory_tui.sessions as package
        from memory_tui.core.cache.codetag import code_tag, package_tag
        from memory_tui.core.format import errors, tokens

        _CODE_TAG = package_tag(package, salt=FORMAT) + code_tag(errors, tokens, salt=FORMAT, length=16)
    return _CODE_TAG


_CODE_TAG: str | None = None


def counter_tag(counter: Any) -> str | None:
    """What token counts the analysis used; ``None`` for a counter this cache cannot name
    (then nothing is cached)."""
    from memory_tui.core.format.tokens import COUNT_MEMO, CharCounter, O200kCounter

    if counter is None or type(counter) is O200kCounter:
        return "o200k/" + COUNT_MEMO.tag()
    if type(counter) is CharCounter:
        return repr(counter)
    return None


def summarize_session(session: Session, analysis: SessionAnalysis, workspace_id: str) -> SessionSummary:
    from .reasons import session_file_reasons

    ids: set[str] = set()
    for tip in analysis.forced_order:
        ta = analysis.tips.get(tip)
        if ta is not None:
            ids.update(r.id for r in ta.recordset.records if r.id not in ta.marked)
    one = SessionSnapshot(state_dir=session.dir, root=None, sessions={session.id: session}, registry={}, registry_ok=True)
    share = status_pending_count(one, workspace_id, {session.id: analysis})
    head = analysis.tips.get(session.head_id or "")
    node_ids = tuple(nid for nid, node in session.nodes.items() if not node.is_root)
    mine = tuple(nid for nid in node_ids if workspace_id and session.nodes[nid].metadata.get(MARK_KEY) == workspace_id)
    return SessionSummary(
        session.id, session.title, len(session.nodes), session.updated_at, len(ids), share.lenient, share.problems,
        rel=session.rel, head_id=session.head_id, in_registry=session.in_registry, archived=session.archived,
        tips=len(analysis.rows), head_pending_tokens=head.pending_tokens if head is not None else 0,
        reasons=tuple(r.to_json() for r in session_file_reasons(session, analysis)),
        problems=tuple(p.to_json() for p in session.problems),
        node_ids=node_ids, mine=mine, live=live_turns(analysis),
    )


def kept_counts_of(summary: SessionSummary, citations: Any) -> dict[str, int]:
    """``kept.kept_counts(kept_states(session, citations, workspace_id))`` from the summary:
    a turn marked by this workspace is kept when a record cites it, else dropped; a cited
    turn without this workspace's mark is kept without a mark."""
    kept = dropped = unmarked = 0
    if getattr(citations, "known", False):
        cited = citations.cited_nodes(summary.session_id)
        mine = frozenset(summary.mine)
        for nid in summary.node_ids:
            if nid in mine:
                if nid in cited:
                    kept += 1
                else:
                    dropped += 1
            elif nid in cited:
                unmarked += 1
    return {"kept": kept, "dropped": dropped, "unmarked_kept": unmarked}


def drift_count_of(summary: SessionSummary, citations: Any) -> int:
    """``kept.session_drift(analysis, citations).count`` from the summary: the live records
    where the marks and the citations disagree (pending yet cited, or done yet cited by none)."""
    if not getattr(citations, "known", False):
        return 0
    cited = citations.cited_nodes(summary.session_id)
    return sum(1 for nid, _tips, _file, _mark, pending in summary.live if pending == (nid in cited))


def status_row(summary: SessionSummary, ctx: Any, citations: Any) -> dict[str, Any]:
    """One session's row of ``memory-tui status`` (``--json``): the stored facts, with the
    reasons that depend on the clock and the idle watcher's state worded now."""
    from .reasons import session_clock_reasons

    clock = session_clock_reasons(summary.session_id, summary.rel, summary.in_registry, summary.updated_at, ctx)
    return {
        "id": summary.session_id,
        "title": summary.title,
        "head_id": summary.head_id,
        "in_registry": summary.in_registry,
        "updated_at": summary.updated_at,
        "archived": summary.archived,
        "tips": summary.tips,
        "pending_turns": summary.pending,
        "head_pending_tokens": summary.head_pending_tokens,
        "trigger_tokens": ctx.config.trigger_tokens,
        "kept": kept_counts_of(summary, citations),
        "drift": drift_count_of(summary, citations),
        "reasons": [*summary.reasons, *(r.to_json() for r in clock)],
        "problems": list(summary.problems),
    }


def combine(summaries: Iterable[SessionSummary]) -> PendingCount:
    """``status_pending_count`` from per-session shares: ids are per session, so the distinct
    total is the sum; problems keep the first-seen order of the full count."""
    total = 0
    problems: list[Problem] = []
    for s in summaries:
        total += s.status_ids
        problems.extend(p for p in s.status_problems if p not in problems)
    return PendingCount(None if problems else total, total, tuple(problems))


def _order(summaries: Mapping[str, SessionSummary]) -> dict[str, SessionSummary]:
    return dict(sorted(summaries.items(), key=lambda kv: (-(kv[1].updated_at or 0.0), kv[0])))


def load_summaries(
    state_dir: str | os.PathLike[str],
    workspace_id: str,
    threshold: int,
    counter: Any = None,
    *,
    directory: Path | None = None,
    analyzed: Callable[[Session, SessionAnalysis], None] | None = None,
    keys: Mapping[str, str | None] | None = None,
    snapshot: SessionSnapshot | None = None,
    workers: int | None = None,
) -> SummaryResult:
    """Every session's summary and the status pending count, reading only sessions that
    changed since their entry was written. ``analyzed(session, analysis)`` sees each session
    that was loaded for real. ``keys``: :func:`content_keys` taken by the caller a moment
    ago (one stat walk, not two); ``snapshot``: a full load the caller made after taking
    them (its sessions are analysed instead of read again). ``workers``: processes for a
    cold build (default: ``os.cpu_count()``; 1 reads in this process)."""
    state = Path(state_dir)
    where = directory if directory is not None else cache_dir()
    ctag = counter_tag(counter)
    found, registry, registry_ok, problems = discover(state)
    index = _Index.load(where, state)
    out: dict[str, SessionSummary] = {}
    if keys is None or ctag is None:
        keys = _keys_of(found, state, registry, registry_ok) if ctag is not None else {sid: None for sid, _ in found}
    for sid, _sdir in found:
        key = keys.get(sid)
        if key is None:
            continue
        hit = index.get(sid, _full_key(key, workspace_id, threshold, ctag))
        if hit is not None:
            out[sid] = hit
    misses = [sid for sid, _ in found if sid not in out]
    fresh: dict[str, SessionSummary] = {}
    if misses and snapshot is not None and Path(snapshot.state_dir) == state:
        for sid in misses:
            session = snapshot.sessions.get(sid)
            if session is not None:
                fresh[sid] = _summary(session, workspace_id, threshold, counter, analyzed)
    rest = [sid for sid in misses if sid not in fresh]
    if rest:
        many = analyzed is None and ctag is not None and _worth_parallel(len(rest), workers)
        # each session read for its summary leaves its shape too, under the same key
        shape_keys = {sid: keys.get(sid) for sid in rest}
        fresh.update(_read_parallel(state, rest, workspace_id, threshold, counter, workers, shape_keys) if many else
                     _read_serial(state, rest, workspace_id, threshold, counter, analyzed, shape_keys))
    for sid, summary in fresh.items():
        out[sid] = summary
        key = keys.get(sid)
        # Stored under the key taken before the read: that key is asked for again only while
        # every file still has the stamp it had then, and a write in between moves a ctime
        # (and a racy stamp gave no key at all), so what was read is what the key stands for.
        if key is not None:
            index.put(sid, _full_key(key, workspace_id, threshold, ctag), summary)
    index.keep_only(sid for sid, _ in found)
    index.save()
    ordered = _order(out)
    return SummaryResult(ordered, combine(ordered.values()), tuple(misses), tuple(problems), dict(keys))


def _summary(session: Session, workspace_id: str, threshold: int, counter: Any,
             analyzed: Callable[[Session, SessionAnalysis], None] | None = None) -> SessionSummary:
    analysis = analyze_session(session, workspace_id, threshold, counter)
    if analyzed is not None:
        analyzed(session, analysis)
    return summarize_session(session, analysis, workspace_id)


def _read_serial(state: Path, sids: list[str], workspace_id: str, threshold: int, counter: Any,
                 analyzed: Callable[[Session, SessionAnalysis], None] | None = None,
                 shape_keys: Mapping[str, str | None] | None = None) -> dict[str, SessionSummary]:
    snap = load_sessions(state, only=sids)
    if shape_keys:
        _keep_shapes(state, snap, shape_keys)
    return {sid: _summary(session, workspace_id, threshold, counter, analyzed) for sid, session in snap.sessions.items()}


def _keep_shapes(state: Path, snap: SessionSnapshot, keys: Mapping[str, str | None]) -> None:
    """The insights' shape table (``sessions.shapes``) of each session just read, under the key
    taken before the read, as its summary is stored: a cold start read every node file twice,
    once here and once more for the insights' lineages."""
    from . import shapes

    for sid in snap.sessions:
        key, files = keys.get(sid), snap._cache.get(sid)
        if key is not None and files:
            shapes.keep(state, sid, files, key)


# A cold build reads every node file of every session: spread over the machine's cores when
# there are enough sessions to pay for the workers (each one starts, and ships its summaries
# back); below that, or where processes cannot be started, the same work runs here.
PARALLEL_MIN_SESSIONS = 24


def _worth_parallel(count: int, workers: int | None) -> bool:
    n = workers if workers is not None else (os.cpu_count() or 1)
    return n > 1 and count >= PARALLEL_MIN_SESSIONS


def _read_chunk(state: str, sids: list[str], workspace_id: str, threshold: int, counter: Any,
                shape_keys: Mapping[str, str | None] | None = None) -> list[tuple[str, SessionSummary]]:
    """A worker's share of a cold build (module level: it is pickled by name)."""
    from memory_tui.core.format.tokens import COUNT_MEMO

    out = list(_read_serial(Path(state), sids, workspace_id, threshold, counter, shape_keys=shape_keys).items())
    # A pool's worker leaves without running exit hooks: the token counts it made are saved
    # here, or the next process would count every pending text again.
    COUNT_MEMO.save()
    return out


def _share_the_encoding(counter: Any) -> None:
    """Load the o200k ranks once here, before the workers fork, when the count memo is empty
    (a cold build counts every pending text): each worker would otherwise load its own copy."""
    from memory_tui.core.format.tokens import COUNT_MEMO, O200kCounter, o200k_encoding

    if counter is not None and type(counter) is not O200kCounter:
        return
    try:
        folder = COUNT_MEMO.path()
        empty = not folder.is_dir() or next(folder.iterdir(), None) is None
    except OSError:
        empty = True
    if empty:
        o200k_encoding()


def _start_the_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with a real stderr.

    A spawned pool starts the tracker on first use and hands it ``sys.stderr.fileno()``. In
    the app, Textual has replaced ``sys.stderr`` with a capture whose ``fileno()`` is -1, and
    the start fails (``ValueError: bad value(s) in fds_to_keep``): the app's cold build of
    the sessions' index lost every session. Started here once, with the process's own stderr
    (or /dev/null) for the moment it takes, every later pool finds it running."""
    from multiprocessing import resource_tracker

    stream = sys.stderr
    try:
        if stream is not None and stream.fileno() >= 0:
            resource_tracker.ensure_running()
            return
    except (AttributeError, OSError, ValueError):
        pass
    real = sys.__stderr__
    with open(os.devnull, "w") if real is None else contextlib.nullcontext(real) as usable:
        sys.stderr = usable
        try:
            resource_tracker.ensure_running()
        finally:
            sys.stderr = stream


def _die_with_parent(parent: int) -> None:
    """A pool worker's first step: end when the process that made it ends. A worker waits
    for work on a pipe whose write end it holds itself, so a parent killed outright (``kill -9``,
    a timeout) would leave it asleep for good. Linux only (``PR_SET_PDEATHSIG``); elsewhere
    the worker leaves when its next read fails, as before."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
    if os.getppid() != parent:  # the parent ended before the request above
        os._exit(1)


def worker_pool(n: int, method: str) -> Any:
    """A process pool of ``n`` workers started by ``method`` whose workers end with this
    process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(n, mp_context=multiprocessing.get_context(method), initializer=_die_with_parent,
                               initargs=(os.getpid(),))


def _read_parallel(state: Path, sids: list[str], workspace_id: str, threshold: int, counter: Any,
                   workers: int | None, shape_keys: Mapping[str, str | None] | None = None) -> dict[str, SessionSummary]:
    import multiprocessing
    import threading

    n = min(workers if workers is not None else (os.cpu_count() or 1), len(sids))
    # Round-robin chunks, a few per worker: sessions differ in size, and a worker that drew
    # the long ones should not leave the others idle at the end.
    parts = max(1, min(len(sids), n * 4))
    chunks = [sids[i::parts] for i in range(parts)]
    # fork shares this process's imports for free, but is unsafe with other threads running
    method = "fork" if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods() else "spawn"
    if method == "fork":
        _share_the_encoding(counter)
    out: dict[str, SessionSummary] = {}
    try:
        if method == "spawn":
            _start_the_resource_tracker()
        with worker_pool(n, method) as pool:
            keys = shape_keys or {}
            futures = [pool.submit(_read_chunk, str(state), chunk, workspace_id, threshold, counter,
                                   {sid: keys.get(sid) for sid in chunk}) for chunk in chunks]
            for future in futures:
                out.update(future.result())
    # (what is shipped is picklable: session ids, plain figures, and a counter of a kind
    # ``counter_tag`` names; a worker's own error is raised here as the serial read would)
    except (OSError, ImportError, RuntimeError, NotImplementedError, EOFError, ValueError):
        # no processes here (a sandbox, a broken pool, an unusable stdio): the same reads, in
        # this process
        return _read_serial(state, sids, workspace_id, threshold, counter, shape_keys=shape_keys)
    # in load_sessions' discovery order, as the serial read returns them
    return {sid: out[sid] for sid in sids if sid in out}


def cached_summaries(
    state_dir: str | os.PathLike[str], workspace_id: str, threshold: int, counter: Any = None, *,
    directory: Path | None = None,
) -> SummaryResult | None:
    """Every session's summary from the cache alone, or ``None`` when any session would have
    to be read (the app's quick "sessions list" stage: it never does the slow part twice)."""
    state = Path(state_dir)
    where = directory if directory is not None else cache_dir()
    ctag = counter_tag(counter)
    if ctag is None:
        return None
    found, registry, registry_ok, problems = discover(state)
    index = _Index.load(where, state)
    out: dict[str, SessionSummary] = {}
    keys: dict[str, str | None] = {}
    reg_rel = registry_rel(state)
    for sid, sdir in found:
        key = keys[sid] = session_content_key(sid, sdir, state, registry, registry_ok, reg_rel=reg_rel)
        hit = index.get(sid, _full_key(key, workspace_id, threshold, ctag)) if key is not None else None
        if hit is None:
            return None
        out[sid] = hit
    ordered = _order(out)
    return SummaryResult(ordered, combine(ordered.values()), (), tuple(problems), keys)


def content_keys(state_dir: str | os.PathLike[str]) -> dict[str, str | None]:
    """Every session's :func:`store.session_content_key` now (take it before a load, hand it
    to :func:`remember` after: an entry is written only for what did not move in between)."""
    state = Path(state_dir)
    found, registry, registry_ok, _problems = discover(state)
    return _keys_of(found, state, registry, registry_ok)


# The keys' walk is one stat per node file, serial: two threads were tried (the stat calls
# release the interpreter lock) and on a quiet machine cost more of both CPU and wall than one
# (scale 4: 1.6 CPU s / 1.3 s wall against 0.85 / 0.85), the C-level passes around the calls
# leaving too little to overlap.
def _keys_of(found: list[tuple[str, Path]], state: Path, registry: Any, registry_ok: bool) -> dict[str, str | None]:
    reg_rel = registry_rel(state)
    return {sid: session_content_key(sid, sdir, state, registry, registry_ok, reg_rel=reg_rel) for sid, sdir in found}


def remember(
    snapshot: SessionSnapshot, analyses: Mapping[str, SessionAnalysis], workspace_id: str, threshold: int,
    counter: Any, keys_before: Mapping[str, str | None], *, directory: Path | None = None,
    summaries: Mapping[str, SessionSummary] | None = None,
) -> int:
    """Write the entries of a load made elsewhere (the app's full session load); returns how
    many were written. A session whose key moved since ``keys_before`` is skipped.
    ``summaries`` (by session id) stand for analyses the caller did not keep."""
    ctag = counter_tag(counter)
    if ctag is None:
        return 0
    where = directory if directory is not None else cache_dir()
    state = Path(snapshot.state_dir)
    now = content_keys(state)
    index = _Index.load(where, state)
    written = 0
    for sid, session in snapshot.sessions.items():
        key = keys_before.get(sid)
        known = summaries.get(sid) if summaries is not None else None
        if key is None or now.get(sid) != key or (known is None and sid not in analyses):
            continue
        full = _full_key(key, workspace_id, threshold, ctag)
        if index.get(sid, full) is not None:
            continue
        index.put(sid, full, known if known is not None else summarize_session(session, analyses[sid], workspace_id))
        written += 1
    index.keep_only(now)
    index.save()
    return written


def summaries_of(snapshot: SessionSnapshot, analyses: Mapping[str, SessionAnalysis], workspace_id: str) -> SummaryResult:
    """The same result from a snapshot already loaded (no cache involved)."""
    out = {sid: summarize_session(s, analyses[sid], workspace_id) for sid, s in snapshot.sessions.items()}
    ordered = _order(out)
    return SummaryResult(ordered, combine(ordered.values()), tuple(ordered))


# ------------------------------------------------------------------------------ entries


def _full_key(content: str, workspace_id: str, threshold: int, ctag: str | None) -> str:
    return hashlib.sha256(json.dumps([FORMAT, _code_tag(), content, workspace_id, threshold, ctag]).encode()).hexdigest()


# The index is one envelope of the cache kit (magic, kind, version, crc), replaced whole. Its
# version moves with the row's shape (2: the live turns are the drift's only source), so an
# index an older version wrote is a miss, not a row read the wrong way.
INDEX_KIND = "session-index"
INDEX_VERSION = 2


def _read_envelope(path: Path) -> Any:
    return envelope.read(path, INDEX_KIND, INDEX_VERSION)


def _write_envelope(path: Path, value: Any) -> None:
    envelope.write(path, INDEX_KIND, value, INDEX_VERSION)


class _Index:
    """Every session's entry for one state dir: ``{sid: row}`` (``_row_of``: the full key,
    then the summary's fields, the live turns last), read once, written once (only when it changed)."""

    def __init__(self, path: Path, state: str, entries: dict[str, tuple]) -> None:
        self.path, self.state, self.entries, self.dirty = path, state, entries, False

    @classmethod
    def load(cls, where: Path, state: Path) -> "_Index":
        path = where / f"{cache_name_of(state)}.index"
        name = str(state.absolute())
        value = _read_envelope(path)
        ok = (isinstance(value, dict) and value.get("format") == FORMAT and value.get("state") == name
              and isinstance(value.get("entries"), dict))
        index = cls(path, name, dict(value["entries"]) if ok else {})
        index.dirty = not ok and value is not None  # a damaged or foreign index is rewritten
        return index

    def get(self, sid: str, key: str) -> SessionSummary | None:
        return _summary_of(sid, key, self.entries.get(sid))

    def put(self, sid: str, key: str, s: SessionSummary) -> None:
        row = _row_of(key, s)
        if row is not None and _summary_of(sid, key, row) == s:  # only what reads back equal
            self.entries[sid] = row
            self.dirty = True

    def keep_only(self, sids: Iterable[str]) -> None:
        keep = set(sids)
        gone = [sid for sid in self.entries if sid not in keep]  # a deleted session's entry
        for sid in gone:
            del self.entries[sid]
        self.dirty = self.dirty or bool(gone)

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:  # a cache that cannot be written only costs time
            return
        _write_envelope(self.path, {"format": FORMAT, "state": self.state, "entries": self.entries})
        self.dirty = False
        legacy = self.path.with_suffix("")  # the one-file-per-session folder of format 1
        if legacy.is_dir() and not legacy.is_symlink():
            shutil.rmtree(legacy, ignore_errors=True)


def _problem_row(p: Problem) -> tuple:
    return (p.code, p.message, p.path, p.line, p.column, dict(p.details))


def _problem_of(data: Any) -> Problem | None:
    if not isinstance(data, tuple) or len(data) != 6:
        return None
    code, message, path, line, column, details = data
    if not (isinstance(code, str) and isinstance(message, str) and (path is None or isinstance(path, str))):
        return None
    if not all(v is None or type(v) is int for v in (line, column)) or not isinstance(details, dict):
        return None
    if not all(isinstance(k, str) and (v is None or type(v) in (str, int, bool)) for k, v in details.items()):
        return None
    return Problem(code, message, path, line, column, details)


def _row_of(key: str, s: SessionSummary) -> tuple | None:
    try:
        return (key, s.title, s.nodes, s.updated_at, s.pending, s.status_ids,
                tuple(_problem_row(p) for p in s.status_problems), s.rel, s.head_id, s.in_registry, s.archived,
                s.tips, s.head_pending_tokens, s.reasons, s.problems, s.node_ids, s.mine, s.live)
    except (TypeError, ValueError):
        return None


def _strs(value: Any) -> bool:
    # set(map(type, ...)): one C-level pass over 300 ids a session, not a generator of checks
    return type(value) is tuple and set(map(type, value)) <= _STR


def _dicts(value: Any) -> bool:
    return type(value) is tuple and set(map(type, value)) <= _DICT


_STR, _DICT = frozenset({str}), frozenset({dict})


def _summary_of(sid: str, key: str, row: Any) -> SessionSummary | None:
    """The entry's summary when it is intact and made from ``key``; anything else is a miss."""
    if not isinstance(row, tuple) or len(row) != 18 or row[0] != key:
        return None
    (_key, title, nodes, updated, pending, status_ids, problems, rel, head_id, in_registry, archived, tips,
     head_tokens, reasons, load_problems, node_ids, mine, live) = row
    if not _live_ok(live):
        return None
    if not isinstance(title, str) or not isinstance(problems, tuple) or not isinstance(rel, str):
        return None
    if not all(type(v) is int and v >= 0 for v in (nodes, pending, status_ids, tips)) or type(head_tokens) is not int:
        return None
    if updated is not None and type(updated) not in (int, float):
        return None
    if not (head_id is None or type(head_id) is str) or type(in_registry) is not bool or type(archived) is not bool:
        return None
    if not (_dicts(reasons) and _dicts(load_problems) and _strs(node_ids) and _strs(mine)):
        return None
    parsed = [_problem_of(p) for p in problems]
    if any(p is None for p in parsed):
        return None
    return SessionSummary(sid, title, nodes, None if updated is None else float(updated), pending, status_ids,
                          tuple(parsed), rel=rel, head_id=head_id, in_registry=in_registry,  # type: ignore[arg-type]
                          archived=archived, tips=tips, head_pending_tokens=head_tokens, reasons=reasons,
                          problems=load_problems, node_ids=node_ids, mine=mine, live=live)


def _live_ok(live: Any) -> bool:
    """``live`` has the shape of ``kept.live_turns`` (a mark is any plain JSON value). Checked
    column by column in C-level passes (every entry of every session is checked on each load,
    tens of thousands of turns), not turn by turn."""
    if type(live) is not tuple:
        return False
    if not live:
        return True
    if set(map(type, live)) != _TUPLE or set(map(len, live)) != _FIVE:
        return False
    ids, tips, files, _marks, pending = zip(*live)
    return (_strs(ids) and _strs(files) and set(map(type, pending)) == _BOOL and set(map(type, tips)) == _TUPLE
            and _strs(tuple(chain.from_iterable(tips))))


_TUPLE, _FIVE, _BOOL = frozenset({tuple}), frozenset({5}), frozenset({bool})
