"""Sessions read when asked for: what a long-lived reader (the app) holds instead of every node.

A full :class:`~.store.SessionSnapshot` keeps every node of every session -- each one's
input, output and metadata -- for as long as it is held: at the benchmark's scale 4 (800
sessions, 240 000 nodes) that was about a third of the app's memory, while the app shows
one session's graph at a time and, for the rest, only what the summary index
(:mod:`.cache`) already holds. :class:`SummarySnapshot` is a snapshot whose ``sessions``
are that index's sessions, in ``load_sessions``' order, each read from disk
(``load_sessions(only=...)``, so it equals its counterpart in a full load) when a reader
asks for it and only the last few kept.
Its session problems come from the summaries, so asking for every problem reads no session.

A reader that walks every session (the Sessions view's explanation) loads a full snapshot
for the time it needs one: walking this mapping would read each session anew every time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, abc
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from memory_tui.core.format.errors import Problem

from .shapes import load_shape, problem_of_json, shape
from .store import (
    Session, SessionSnapshot, _freeze, discover, is_session_dir, load_session_dir, load_sessions, sessions_root,
)

# Sessions kept once read: the one on screen, the one a citation jumped from, and a few a
# reader asks for in turn (the insights walk the cited ones one after another).
KEEP = 4


class OnDemandSessions(abc.Mapping):
    """``{session id: Session}`` in a fixed order, each session read when first asked for;
    only the last :data:`KEEP` read are held. A session that has left the disk since the
    ids were listed is missing (``KeyError``, ``get`` gives ``None``). Safe across threads."""

    def __init__(self, state_dir: Path, ids: tuple[str, ...], keep: int = KEEP,
                 found: Mapping[str, Path] | None = None, registry: Mapping[str, Any] | None = None,
                 registry_ok: bool = True, keys: Mapping[str, str | None] | None = None) -> None:
        self._state = Path(state_dir)
        self._ids = tuple(ids)
        self._known = frozenset(self._ids)
        # discovery's answer (each session's folder, the registry) taken once: a session is
        # then read as ``load_sessions`` reads it, without listing every other session again
        self._found = dict(found) if found is not None else None
        self._registry = registry if registry is not None else {}
        self._registry_ok = registry_ok
        # each session's content key as the summaries were taken: a shape stored under the
        # same key is taken as it is (``shapes.load_shape``)
        self._keys = keys if keys is not None else {}
        self._keep = max(1, keep)
        self._held: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self.reads = 0  # sessions read from disk so far (tests count them)

    def __getitem__(self, sid: Any) -> Session:
        if sid not in self._known:
            raise KeyError(sid)
        with self._lock:
            hit = self._held.get(sid)
            if hit is not None:
                self._held.move_to_end(sid)
                return hit
        sdir = self._found.get(sid) if self._found is not None else None
        if sdir is not None and is_session_dir(sdir):
            session = load_session_dir(sid, sdir, self._state, self._registry, self._registry_ok)
        else:
            session = load_sessions(self._state, only=(sid,)).sessions.get(sid)
        if session is None:
            raise KeyError(sid)
        with self._lock:
            self.reads += 1
            self._held[sid] = session
            self._held.move_to_end(sid)
            while len(self._held) > self._keep:
                self._held.popitem(last=False)
        return session

    def shape_of(self, sid: Any) -> Session | None:
        """The :func:`shape` of session ``sid`` (``None`` when it is not one of these or has
        left the disk), from the shape table (``shapes``): its unchanged files are not read.
        Not held: a reader that keeps shapes keeps its own."""
        if sid not in self._known:
            return None
        sdir = self._found.get(sid) if self._found is not None else None
        if sdir is None or not is_session_dir(sdir):
            session = self.get(sid)
            return None if session is None else shape(session)
        return load_shape(self._state, sid, sdir, self._registry, self._registry_ok, content_key=self._keys.get(sid))

    def __contains__(self, sid: Any) -> bool:
        return sid in self._known

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def held(self) -> tuple[str, ...]:
        """The ids of the sessions held now, oldest first."""
        with self._lock:
            return tuple(self._held)


@dataclass(frozen=True)
class SummarySnapshot(SessionSnapshot):
    """A snapshot over the summary index: ``sessions`` is an :class:`OnDemandSessions`,
    ``summaries`` every session's summary (``cache.SessionSummary``) in the same order."""

    summaries: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # every session's content key when the summaries were taken (``cache.content_keys``): a
    # reload that a watcher says touched only some sessions takes the others' keys from here
    keys: Mapping[str, str | None] = field(default_factory=dict, repr=False, compare=False)

    def all_problems(self) -> tuple[Problem, ...]:
        out = list(self.problems)
        for summary in self.summaries.values():
            out.extend(problem_of_json(p) for p in summary.problems)
        return tuple(out)

    def node_counts(self) -> dict[str, int]:
        return {sid: s.nodes for sid, s in self.summaries.items()}


def summary_snapshot(state_dir: Path, summaries: Mapping[str, Any], problems: tuple[Problem, ...],
                     keys: Mapping[str, str | None] | None = None, keep: int = KEEP) -> SummarySnapshot:
    """The snapshot of ``summaries`` (``cache.SummaryResult.summaries``: load_sessions' order)."""
    state = Path(state_dir)
    found, registry, registry_ok, _problems = discover(state)
    keys = MappingProxyType(dict(keys or {}))
    return SummarySnapshot(
        state_dir=state,
        root=sessions_root(state),
        sessions=OnDemandSessions(state, tuple(summaries), keep, dict(found), registry, registry_ok, keys),
        registry=_freeze(registry) if isinstance(registry, dict) else MappingProxyType({}),
        registry_ok=registry_ok,
        problems=tuple(problems),
        summaries=MappingProxyType(dict(summaries)),
        keys=keys,
    )


def full_snapshot(snapshot: SessionSnapshot) -> SessionSnapshot:
    """``snapshot`` itself when it holds every session, else a full load of its state dir."""
    if isinstance(snapshot, SummarySnapshot):
        return load_sessions(snapshot.state_dir)
    return snapshot


def is_on_demand(snapshot: SessionSnapshot | None) -> bool:
    """Whether ``snapshot``'s sessions are read when asked for (a reader that keeps many
    of them should keep their :func:`shape`)."""
    return snapshot is not None and isinstance(snapshot.sessions, OnDemandSessions)
