"""Per-session pending results kept across processes (cold pending).

Counting what is pending means reading and analysing every session's node files (60 000 at
the benchmark's scale 1), although between two runs almost every session is unchanged. This
module keeps, per session, the few figures the pending count and the sessions list need
(:class:`SessionSummary`) in the user's cache directory, keyed by
:func:`store.session_content_key` — the session stamp of spec §1.8 plus every node and commit
file's ``(mtime_ns, size, inode)`` — and by the workspace id, the trigger threshold, the token
counter and a digest of this package's code. A session whose key is the one an entry was made
from is not read at all; every other session is loaded and analysed for real and its entry
rewritten.

Where it lives: ``$MEMORY_TUI_CACHE_DIR`` (else ``$XDG_CACHE_HOME/memory-tui``, else
``~/.cache/memory-tui``), next to the token-count memo: reading a state directory never
writes into it (``tests/unit/test_readonly.py``). One compact index per state dir (every
session's entry in one sealed file: one read, not one file per session), rewritten whole
when any entry changed. A damaged index (the seal's crc), one of another format or state, or
an entry of another key or of the wrong shape is a miss, and the next load rewrites it;
losing the directory only costs time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from memory_tui.core.cache import envelope
from memory_tui.core.format.errors import Problem
from memory_tui.core.fsutil import user_cache_dir

from .kept import live_turns
from .records import PendingCount, SessionAnalysis, analyze_session, status_pending_count
from .store import Session, SessionSnapshot, discover, load_sessions, session_content_key

FORMAT = "memory-tui/session-summary/2"


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    title: str  # unsanitised, as Session.title
    nodes: int
    updated_at: float | None
    pending: int  # distinct unmarked records over the session's forced-order tips (the list's figure)
    status_ids: int  # this session's share of ``status_pending_count`` (distinct record ids)
    status_problems: tuple[Problem, ...]  # what made OpenProgram's count raise for this session
    # the turns a live tip reaches (``kept.live_turns``): ``why --drift`` compares them with the
    # records' citations without reading the session again
    live: tuple = ()


@dataclass(frozen=True)
class SummaryResult:
    summaries: Mapping[str, SessionSummary]  # in load_sessions' order (newest first)
    pending: PendingCount  # equal to status_pending_count over a full load
    read: tuple[str, ...]  # the sessions that were loaded for real (the others came from the cache)


def cache_dir() -> Path:
    """``sessions/`` in memory-tui's cache dir (``$MEMORY_TUI_CACHE_DIR``)."""
    return user_cache_dir("sessions")


def _code_tag() -> str:
    """A digest of the modules a summary is computed by: entries of other code are misses."""
    global _CODE_TAG
    if _CODE_TAG is None:
        from memory_tui.core.cache.codetag import code_tag
        from memory_tui.core.format import errors

        from . import cache, dag, kept, marks, records, store

        _CODE_TAG = code_tag(cache, store, records, dag, marks, kept, errors, salt=FORMAT)
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
    ids: set[str] = set()
    for tip in analysis.forced_order:
        ta = analysis.tips.get(tip)
        if ta is not None:
            ids.update(r.id for r in ta.recordset.records if r.id not in ta.marked)
    one = SessionSnapshot(state_dir=session.dir, root=None, sessions={session.id: session}, registry={}, registry_ok=True)
    share = status_pending_count(one, workspace_id, {session.id: analysis})
    return SessionSummary(
        session.id, session.title, len(session.nodes), session.updated_at, len(ids), share.lenient, share.problems,
        live_turns(analysis),
    )


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
) -> SummaryResult:
    """Every session's summary and the status pending count, reading only sessions that
    changed since their entry was written. ``analyzed(session, analysis)`` sees each session
    that was loaded for real."""
    state = Path(state_dir)
    where = directory if directory is not None else cache_dir()
    ctag = counter_tag(counter)
    found, registry, registry_ok, _problems = discover(state)
    index = _Index.load(where, state)
    out: dict[str, SessionSummary] = {}
    keys: dict[str, str | None] = {}
    for sid, sdir in found:
        key = session_content_key(sid, sdir, state, registry, registry_ok) if ctag is not None else None
        keys[sid] = key
        if key is None:
            continue
        hit = index.get(sid, _full_key(key, workspace_id, threshold, ctag))
        if hit is not None:
            out[sid] = hit
    misses = [sid for sid, _ in found if sid not in out]
    if misses:
        snap = load_sessions(state, only=misses)
        dirs = dict(found)
        for sid, session in snap.sessions.items():
            analysis = analyze_session(session, workspace_id, threshold, counter)
            if analyzed is not None:
                analyzed(session, analysis)
            summary = summarize_session(session, analysis, workspace_id)
            out[sid] = summary
            key = keys.get(sid)
            # Store only when nothing moved while the session was read.
            if key is not None and session_content_key(sid, dirs[sid], state, registry, registry_ok) == key:
                index.put(sid, _full_key(key, workspace_id, threshold, ctag), summary)
    index.keep_only(sid for sid, _ in found)
    index.save()
    ordered = _order(out)
    return SummaryResult(ordered, combine(ordered.values()), tuple(misses))


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
    found, registry, registry_ok, _problems = discover(state)
    index = _Index.load(where, state)
    out: dict[str, SessionSummary] = {}
    for sid, sdir in found:
        key = session_content_key(sid, sdir, state, registry, registry_ok)
        hit = index.get(sid, _full_key(key, workspace_id, threshold, ctag)) if key is not None else None
        if hit is None:
            return None
        out[sid] = hit
    ordered = _order(out)
    return SummaryResult(ordered, combine(ordered.values()), ())


def content_keys(state_dir: str | os.PathLike[str]) -> dict[str, str | None]:
    """Every session's :func:`store.session_content_key` now (take it before a load, hand it
    to :func:`remember` after: an entry is written only for what did not move in between)."""
    state = Path(state_dir)
    found, registry, registry_ok, _problems = discover(state)
    return {sid: session_content_key(sid, sdir, state, registry, registry_ok) for sid, sdir in found}


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


def _state_name(state: Path) -> str:
    return hashlib.sha256(str(state.absolute()).encode()).hexdigest()[:32]


# The index is one envelope of the cache kit (magic, kind, version, crc), replaced whole.
INDEX_KIND = "session-index"


def _read_envelope(path: Path) -> Any:
    return envelope.read(path, INDEX_KIND)


def _write_envelope(path: Path, value: Any) -> None:
    envelope.write(path, INDEX_KIND, value)


class _Index:
    """Every session's entry for one state dir: ``{sid: (full key, title, nodes, updated_at,
    pending, status_ids, problems, live turns)}``, read once, written once (only when it changed)."""

    def __init__(self, path: Path, state: str, entries: dict[str, tuple]) -> None:
        self.path, self.state, self.entries, self.dirty = path, state, entries, False

    @classmethod
    def load(cls, where: Path, state: Path) -> "_Index":
        path = where / f"{_state_name(state)}.index"
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
                tuple(_problem_row(p) for p in s.status_problems), s.live)
    except (TypeError, ValueError):
        return None


def _summary_of(sid: str, key: str, row: Any) -> SessionSummary | None:
    """The entry's summary when it is intact and made from ``key``; anything else is a miss."""
    if not isinstance(row, tuple) or len(row) != 8 or row[0] != key:
        return None
    _key, title, nodes, updated, pending, status_ids, problems, live = row
    if not _live_ok(live):
        return None
    if not isinstance(title, str) or not isinstance(problems, tuple):
        return None
    if not all(type(v) is int and v >= 0 for v in (nodes, pending, status_ids)):
        return None
    if updated is not None and type(updated) not in (int, float):
        return None
    parsed = [_problem_of(p) for p in problems]
    if any(p is None for p in parsed):
        return None
    return SessionSummary(sid, title, nodes, None if updated is None else float(updated), pending, status_ids,
                          tuple(parsed), live)  # type: ignore[arg-type]


def _live_ok(live: Any) -> bool:
    """``live`` has the shape of ``kept.live_turns`` (a mark is any plain JSON value)."""
    return isinstance(live, tuple) and all(
        isinstance(t, tuple) and len(t) == 5 and isinstance(t[0], str) and isinstance(t[1], tuple)
        and all(isinstance(x, str) for x in t[1]) and isinstance(t[2], str) and type(t[4]) is bool
        for t in live)
