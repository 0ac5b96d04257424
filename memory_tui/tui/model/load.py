"""Loading the workspace model: every call into ``memory_tui.core`` / ``memory_tui.sessions``
that builds what the app shows lives here, so when an engine API moves only this module
changes. Nothing here reads a workspace file itself.

Live reload: ``load_model(..., previous=model)`` hands the previous snapshots to the engine
(``workspace.refresh`` / ``load_sessions(previous=...)``), which re-parses only the files whose
stamp changed; view models of unchanged topics are reused as the very same objects.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Mapping

from memory_tui.core.cache.registry import keeps
from memory_tui.core.format.config import MemoryConfig
from memory_tui.core.format.errors import MemoryError, Problem
from memory_tui.core.format.paths import display_path
from memory_tui.core.format.text import sanitize
from memory_tui.core.format.tokens import O200kCounter, TokenCounter

from .data import (
    CORE_TOPIC, CoreVM, EvidenceVM, RecordVM, SessionVM, SourceLinkVM, StatusVM, TimelineRowVM, TopicVM,
    WorkspaceModel, _fingerprints,
)

# ---------------------------------------------------------------------------------------
# Loading


@dataclass
class _Cache:
    """Reused across reloads: per-topic view models and token counts by paragraph text."""

    tokens: dict[str, int] = field(default_factory=dict)
    topics: dict[str, tuple[Any, Any, TopicVM]] = field(default_factory=dict)  # path -> (Topic, key, VM)
    backlinks_text: str | None = None
    backlinks: dict[str, list[str]] = field(default_factory=dict)
    rows: dict[int, tuple[Any, "TimelineRowVM"]] = field(default_factory=dict)  # id(engine row) -> (row, VM)
    # the last timeline built from the engine's per-topic parts: topic path -> its rows (the
    # part's own tuple), and the rows in display order with their sort keys and view models
    tl_parts: dict[str, tuple] | None = None
    tl_rows: list[Any] = field(default_factory=list)
    tl_keys: list[tuple[str, str, str]] = field(default_factory=list)
    tl_vms: list["TimelineRowVM"] = field(default_factory=list)
    # the backlinks mapping the last ``_topics`` keyed its view models with (see there)
    topics_links: Any = None
    # id(TopicVM) -> (the VM, its records by block id, first id winning): see ``_record_index``
    by_topic: dict[int, tuple["TopicVM", dict[str, "RecordVM"]]] = field(default_factory=dict)
    # the last ``_record_index``'s per-topic indexes and its merge, kept when no id was in two
    index_parts: list[dict[str, "RecordVM"]] = field(default_factory=list)
    index: dict[str, "RecordVM"] | None = None

    def count(self, counter: TokenCounter, text: str) -> int:
        if type(counter) is O200kCounter:
            # it memoizes by digest process-wide already; keyed by text here, every
            # record's paragraph text stayed alive a second time (~3.5 MB at scale 1).
            return counter.count(text)
        n = self.tokens.get(text)
        if n is None:
            n = self.tokens[text] = counter.count(text)
        return n


def outline_model(state_dir: Path, *, home: Path | None = None) -> WorkspaceModel | None:
    """The Topics list before the workspace is parsed — every topic file
    with its title and record count from ``core.outline`` (~0.1 s where the strict parse,
    archive scan and views take seconds). ``None`` when there is no memory to outline (the
    full load then says why). Nothing in it is validated: it is painted, never acted on."""
    from memory_tui.core.format.config import load_memory_config
    from memory_tui.core.store.outline import OutlineCache, topic_outline
    from memory_tui.core.format.paths import read_workspace_id

    state_dir = Path(state_dir)
    memory = state_dir / "memory"
    if not memory.is_dir():
        return None
    shown = display_path(state_dir, home=home) if home is not None else display_path(state_dir)
    config = load_memory_config(state_dir)  # never raises: problems ride on the config
    topics = []
    # a start on unchanged files reads no topic file here: the outline of each is remembered
    # by its stat key outside the state dir (``core.outline.OutlineCache``)
    cache = OutlineCache(memory)
    outlines = topic_outline(memory, cache=cache)
    cache.save()
    for t in outlines:
        wpath = "topics/" + t.path
        if wpath == CORE_TOPIC:
            continue
        topics.append(TopicVM(sanitize(wpath), sanitize(t.title), (), outline_records=t.records))
    topics.sort(key=lambda t: tuple(t.path.split("/")))
    return WorkspaceModel(
        state_dir, shown, True, True, config, sanitize(read_workspace_id(memory) or ""), "",
        topics=tuple(topics), sessions_loaded=False, outline=True,
    )


def load_model(
    state_dir: Path,
    *,
    counter: TokenCounter | None = None,
    home: Path | None = None,
    previous: WorkspaceModel | None = None,
    touched: Iterable[str] | None = None,
    sessions: bool = True,
    session_loader: Callable[..., Any] | None = None,
) -> WorkspaceModel:
    """The whole state directory as a ``WorkspaceModel``. Never raises for bad data.

    ``previous`` makes this an incremental refresh (only changed files are re-parsed).
    ``touched`` (state-relative paths a watcher saw change) lets a part nobody touched be
    reused as is; ``None`` means "check everything".

    ``sessions=False`` (the app's first stage) skips reading sessions unless ``previous``
    already has them and nothing under ``sessions/`` (nor config.json) was touched, in which
    case they are carried over as is; otherwise the model comes back with
    ``sessions_loaded=False`` and ``with_sessions`` fills them in. ``session_loader`` replaces
    ``sessions.store.load_sessions`` (tests slow it down or count its calls).
    """
    counter = counter or O200kCounter()
    state_dir = Path(state_dir)
    shown = display_path(state_dir, home=home) if home is not None else display_path(state_dir)
    paths = None if touched is None else set(touched)
    prev_state = previous.state if previous is not None else None
    prev_sessions = previous.session_snapshot if previous is not None else None
    cache = previous._cache if previous is not None and previous._cache is not None else _Cache()

    state, error = _open_state(state_dir, counter, prev_state, paths)
    if state is None:
        problem = error or Problem("STATE_NOT_FOUND", f"no OpenProgram state directory at {shown}")
        return WorkspaceModel(
            state_dir, shown, False, False, MemoryConfig(), "", "",
            problems=(replace(problem, message=f"no OpenProgram state directory at {shown}"),),
            _cache=cache,
        )

    errors: list[str] = []
    problems = tuple(clean_problem(p) for p in state.problems if is_error(p))
    workspace_id = sanitize(state.workspace_id or "")
    config = state.config

    sessions_loaded = True
    if sessions:
        sessions_snap, sessions_vms, status_counts = _sessions(state, prev_sessions, paths, cache, counter, errors, session_loader)
    elif previous is not None and previous.sessions_loaded and prev_sessions is not None and not _touches(paths, "sessions/", "sessions-git/"):
        # A reload that touched no session: the previous sessions and counts stand as they are.
        sessions_snap, sessions_vms = prev_sessions, previous.sessions
        status_counts = (previous.status.pending_turns, previous.status.pending_lenient)
    else:
        sessions_snap, sessions_vms, status_counts, sessions_loaded = None, (), (None, None), False
    status = _status(state, status_counts)

    if state.memory_missing:
        model = WorkspaceModel(
            state_dir, shown, True, False, config, workspace_id, "",
            status=status, sessions=sessions_vms, sessions_available=sessions_snap is not None,
            sessions_loaded=sessions_loaded, problems=problems, engine_errors=tuple(errors), state=state, session_snapshot=sessions_snap, _cache=cache,
        )
        return replace(model, fingerprints=_fingerprints(model))

    backlinks = _backlinks(state, cache)
    topics, core_topic_vm = _topics(state, counter, cache, backlinks)
    core = _core(state, core_topic_vm)
    records = _record_index(topics + ((core_topic_vm,) if core_topic_vm else ()), cache)
    timeline = _timeline(state, previous, cache)
    recent = _recent(state, records)
    model = WorkspaceModel(
        state_dir=state_dir,
        display_dir=shown,
        state_exists=True,
        memory_exists=True,
        config=config,
        workspace_id=workspace_id,
        revision=state.revision,
        topics=topics,
        timeline=timeline,
        recent=recent,
        core=core,
        status=status,
        sessions=sessions_vms,
        sessions_available=sessions_snap is not None,
        sessions_loaded=sessions_loaded,
        problems=problems,
        engine_errors=tuple(errors),
        state=state,
        session_snapshot=sessions_snap,
        _records=records,
        _cache=cache,
    )
    return replace(model, fingerprints=_fingerprints(model))


def with_sessions(
    model: WorkspaceModel,
    *,
    counter: TokenCounter | None = None,
    previous: WorkspaceModel | None = None,
    touched: Iterable[str] | None = None,
    session_loader: Callable[..., Any] | None = None,
) -> WorkspaceModel:
    """``model`` (from ``load_model(..., sessions=False)``) with its sessions and pending
    counts filled in; the same model when they already are."""
    if model.sessions_loaded or model.state is None:
        return model
    counter = counter or O200kCounter()
    paths = None if touched is None else set(touched)
    prev_snap = previous.session_snapshot if previous is not None else None
    cache = model._cache if model._cache is not None else _Cache()
    errors = list(model.engine_errors)
    snap, sessions_vms, counts = _sessions(model.state, prev_snap, paths, cache, counter, errors, session_loader)
    filled = replace(
        model,
        status=_status(model.state, counts),
        sessions=sessions_vms,
        sessions_available=snap is not None,
        sessions_loaded=True,
        engine_errors=tuple(errors),
        session_snapshot=snap,
    )
    return replace(filled, fingerprints=_fingerprints(filled))


def with_session_list(model: WorkspaceModel, *, counter: TokenCounter | None = None) -> WorkspaceModel | None:
    """``model`` (sessions not loaded yet) with its sessions from the sessions' summary index
    alone (``sessions.cache``), or ``None`` when any session's entry is missing or stale (then
    ``with_sessions`` reads those sessions). What the model keeps of sessions is their
    summaries either way, so a model from here is complete: ``sessions_loaded``."""
    if model.sessions_loaded or model.state is None or model.state.memory_missing:
        return None
    from memory_tui.sessions.cache import cached_summaries
    from memory_tui.sessions.ondemand import summary_snapshot

    state = model.state
    found = cached_summaries(state.state_dir, state.workspace_id or "", state.config.trigger_tokens, counter or O200kCounter())
    if found is None:
        return None
    snap = summary_snapshot(state.state_dir, found.summaries, found.problems, found.keys)
    vms = tuple(sorted((SessionVM(sanitize(s.session_id), sanitize(s.title), s.pending, s.nodes)
                        for s in found.summaries.values()), key=lambda v: v.session_id))
    listed = replace(model, sessions=vms, status=_status(state, (found.pending.value, found.pending.lenient)),
                     sessions_available=True, sessions_loaded=True, session_snapshot=snap)
    return replace(listed, fingerprints=_fingerprints(listed))


def _touches(paths: set[str] | None, *prefixes: str) -> bool:
    if paths is None:
        return True
    return any(p == "config.json" or p.startswith(prefixes) for p in paths)


def _open_state(state_dir: Path, counter: TokenCounter, prev: Any, paths: set[str] | None) -> tuple[Any, Problem | None]:
    from memory_tui.core.store.workspace import open_state, refresh

    try:
        if prev is not None and Path(prev.state_dir) == state_dir and state_dir.is_dir():
            if not _touches(paths, "memory/"):
                return prev, None  # nothing under memory/ changed: the snapshot stands
            return refresh(prev), None
        return open_state(state_dir, counter=counter), None
    except MemoryError as exc:  # STATE_NOT_FOUND: the app shows the state screen
        return None, exc.as_problem()


def is_error(problem: Problem) -> bool:
    return problem.details.get("severity") != "warning"


def clean_problem(problem: Problem) -> Problem:
    """Problem messages quote file text: strip terminal sequences before display."""
    msg = sanitize(problem.message)
    return problem if msg == problem.message else replace(problem, message=msg)


# -- topics -------------------------------------------------------------------------------


def _record_index(topics: Iterable[TopicVM], cache: _Cache) -> dict[str, RecordVM]:
    """Every record by block id, the first in topic order winning, in that order (the
    Sessions view's citation lists follow it). Each topic's own index is kept with its view
    model, so a reload merges 300 small dicts instead of walking 20 000 records' ids; when a
    block id is in two topics the merge would let the later one win, so that case is built
    record by record, as it always was."""
    seen: dict[int, tuple[TopicVM, dict[str, RecordVM]]] = {}
    parts = []
    total = 0
    for topic in topics:
        hit = cache.by_topic.get(id(topic))
        if hit is None or hit[0] is not topic:
            own: dict[str, RecordVM] = {}
            for rec in topic.records:
                for mid in rec.ids:
                    own.setdefault(mid, rec)
            hit = (topic, own)
        seen[id(topic)] = hit
        parts.append(hit[1])
        total += len(hit[1])
    cache.by_topic = seen
    last, prior = cache.index_parts, cache.index
    cache.index_parts, cache.index = parts, None
    records = _index_patched(last, prior, parts)
    if records is None:
        records = {}
        for own in parts:
            records.update(own)
    if len(records) == total:
        cache.index = records
        return records
    records = {}
    for own in parts:
        for mid, rec in own.items():
            records.setdefault(mid, rec)
    return records


def _index_patched(last: list[dict[str, RecordVM]], prior: dict[str, RecordVM] | None,
                   parts: list[dict[str, RecordVM]]) -> dict[str, RecordVM] | None:
    """The merge of ``parts`` from ``prior`` (the duplicate-free merge of ``last``) when only a
    few topics' indexes changed and each kept its ids in their order (a reword): a copy of
    ``prior`` with their records written over, every key where the full merge puts it.
    ``None`` when that does not hold."""
    if prior is None or len(last) != len(parts):
        return None
    pairs = [(old, own) for old, own in zip(last, parts) if old is not own]
    if len(pairs) > 8 or any(list(old) != list(own) for old, own in pairs):
        return None
    records = dict(prior)
    for _old, own in pairs:
        records.update(own)
    return records


def _backlinks(state: Any, cache: _Cache) -> dict[str, list[str]]:
    text = state.views.relations if state.views is not None else ""
    if text != cache.backlinks_text:
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {}
        found = data.get("backlinks", {}) if isinstance(data, dict) else {}
        cache.backlinks = found if isinstance(found, dict) else {}
        cache.backlinks_text = text
    return cache.backlinks


def _topics(
    state: Any, counter: TokenCounter, cache: _Cache, backlinks: Mapping[str, list[str]]
) -> tuple[tuple[TopicVM, ...], TopicVM | None]:
    tree = state.tree
    by_path: dict[str, list[Problem]] = {}
    for p in state.problems:
        if p.path and p.path.startswith("topics/"):
            by_path.setdefault(p.path, []).append(p)
    chunk_tokens = {}
    if state.views is not None and state.views.core is not None:
        chunk_tokens = {c.block_id: c.tokens for c in state.views.core.chunks if c.block_id}
    out: list[TopicVM] = []
    core_vm: TopicVM | None = None
    seen: dict[str, tuple[Any, Any, TopicVM]] = {}
    listed: set[str] = set()
    # The key's backlinks part is a function of the topic's ids (the same Topic object, the
    # same ids) and of ``backlinks``, which ``_backlinks`` replaces whenever relations.json
    # changes: with the very mapping of last time it cannot differ, and building it walked
    # every record of every topic on each reload.
    same_links = backlinks is cache.topics_links
    core_key = (tuple(sorted(chunk_tokens.items())),)
    for topic in tree.topics:
        wpath = topic.workspace_path
        listed.add(wpath)
        found = tuple(by_path.get(wpath, ()))
        prior = cache.topics.get(wpath)
        if (same_links and prior is not None and prior[0] is topic and prior[1][0] == found
                and (wpath != CORE_TOPIC or prior[1][2:] == core_key)):
            key = prior[1]
        else:
            ids = tuple(u.memory_id for u in topic.units)
            key = (found, tuple(tuple(backlinks.get(i, ())) for i in ids))
            if wpath == CORE_TOPIC:
                key = key + core_key
        if prior is not None and prior[0] is topic and prior[1] == key:
            vm = prior[2]
        else:
            vm = _topic_vm(topic, found, counter, cache, backlinks, chunk_tokens if wpath == CORE_TOPIC else None)
        seen[wpath] = (topic, key, vm)
        if wpath == CORE_TOPIC:
            core_vm = vm
        else:
            out.append(vm)
    # Files the engine could not read at all (not UTF-8, unreadable) have problems, no Topic.
    for wpath, found in by_path.items():
        if wpath not in listed and wpath != CORE_TOPIC and wpath.endswith(".md"):
            errs = tuple(clean_problem(p) for p in found if is_error(p))
            if errs:
                out.append(TopicVM(sanitize(wpath), sanitize(PurePosixPath(wpath).stem), (), errs))
    cache.topics = seen
    cache.topics_links = backlinks
    out.sort(key=lambda t: tuple(t.path.split("/")))
    return tuple(out), core_vm


def _topic_vm(
    topic: Any,
    found: tuple[Problem, ...],
    counter: TokenCounter,
    cache: _Cache,
    backlinks: Mapping[str, list[str]],
    chunk_tokens: Mapping[str, int] | None,
) -> TopicVM:
    title = next((h.title for h in topic.headings if h.level == 1), None) or PurePosixPath(topic.path).stem
    lines = topic.text.split("\n")
    wpath = sanitize(topic.workspace_path)  # file names reach tree labels and the detail title
    records = []
    for unit in topic.units:
        if unit.is_alias:
            continue  # one record per paragraph; its other ids are aliases
        ids = tuple(unit.aliases) or (unit.memory_id,)
        if chunk_tokens is not None and unit.memory_id in chunk_tokens:
            tokens = chunk_tokens[unit.memory_id]  # what the block costs in the core budget
        else:
            tokens = cache.count(counter, "\n".join(lines[unit.line - 1 : unit.end_line]))
        back: list[str] = []
        for mid in ids:
            for b in backlinks.get(mid, ()):
                if isinstance(b, str) and b not in ids and b not in back:
                    back.append(b)
        records.append(
            RecordVM(
                memory_id=unit.memory_id,
                topic_path=wpath,
                headings=tuple(sanitize(h) for h in unit.headings),
                body=sanitize(unit.body),
                content=sanitize(unit.content),
                evidence=tuple(
                    EvidenceVM(
                        ev.id,
                        ev.when,
                        tuple(SourceLinkVM(sanitize(l.label), sanitize(l.target), l.source_id) for l in ev.links),
                    )
                    for ev in unit.evidence
                ),
                when=unit.when,
                line=unit.line,
                tokens=tokens,
                aliases=tuple(i for i in ids if i != unit.memory_id),
                relation_targets=tuple(unit.relation_targets),
                backlinks=tuple(back),
            )
        )
    errors = tuple(clean_problem(p) for p in found if is_error(p))
    warnings = tuple(clean_problem(p) for p in found if not is_error(p))
    return TopicVM(wpath, sanitize(title), tuple(records), errors, sanitize(topic.text) if errors else "", warnings)


# -- derived views --------------------------------------------------------------------------


def _timeline(state: Any, previous: WorkspaceModel | None, cache: _Cache) -> tuple[TimelineRowVM, ...]:
    """The engine's timeline rows (the rows of ``timeline/*.md``), in file order."""
    from memory_tui.core.format.views import timeline_rows

    views = state.views
    if previous is not None and previous.state is not None and previous.state.views is not None and views is not None:
        if previous.state.views.timeline == views.timeline and previous.state.tree is state.tree:
            return previous.timeline
    parts = getattr(state, "topic_parts", None)
    if parts:
        return _timeline_from_parts(state.topic_parts, cache)
    cache.tl_parts = None
    row_cache = dict(state.row_cache)  # a copy: the snapshot's cache stays as the engine left it
    rows = timeline_rows(state.tree, link_for=state.sources.link_for, cache=row_cache)
    rows = sorted(rows, key=_row_key)
    # Rows of unchanged units are the engine's very same objects: reuse their view models.
    seen: dict[int, tuple[Any, TimelineRowVM]] = {}
    out = []
    for r in rows:
        hit = cache.rows.get(id(r))
        if hit is not None and hit[0] is r:
            vm = hit[1]
        else:
            vm = _row_vm(r)
        seen[id(r)] = (r, vm)
        out.append(vm)
    cache.rows = seen
    return tuple(out)


def _row_key(r: Any) -> tuple[str, str, str]:
    return (r.when, r.sort_ref, r.memory_id)


def _row_vm(r: Any) -> TimelineRowVM:
    return TimelineRowVM(r.when, r.memory_id, _shown_topic(r.topic_path), sanitize(r.text))


@keeps
@lru_cache(maxsize=4096)
def _shown_topic(topic_path: str) -> str:
    """A row's topic path as shown, interned: one string per topic, not one per row (and made
    once per topic, not once per row: 80 000 rows at the benchmark's scale 4)."""
    return sys.intern(_shown("topics/" + topic_path))


def _shown(text: str) -> str:
    """A file name as a view shows it: through the one sanitiser (a C-level check first: a name
    holding nothing a terminal acts on is itself)."""
    return text if text.isprintable() else sanitize(text)


def _timeline_from_parts(parts: Mapping[str, Any], cache: _Cache) -> tuple[TimelineRowVM, ...]:
    """The timeline from the engine's per-topic parts (their rows concatenated in tree order
    are ``timeline_rows(tree)``). A reload takes the rows of changed topics out of the last
    sorted list and puts the new ones in by bisection, so only they are keyed and wrapped;
    the result is the stable sort of the whole: a new row whose key another row already has
    (whose place would depend on tree order) makes the whole list sort again."""
    import bisect

    new = {path: part.rows for path, part in parts.items()}
    old = cache.tl_parts
    if old is not None:
        gone = [rows for path, rows in old.items() if new.get(path) is not rows]
        came = [rows for path, rows in new.items() if old.get(path) is not rows]
        if len(gone) + len(came) <= max(8, len(new) // 8):
            rows, keys, vms = list(cache.tl_rows), list(cache.tl_keys), list(cache.tl_vms)
            # Each gone row is found by its key (the list is sorted by key; among equal keys,
            # by identity), not by a pass over all 20 000 rows.
            at_list = []
            for r in (r for g in gone for r in g):
                k = _row_key(r)
                at = bisect.bisect_left(keys, k)
                while at < len(rows) and rows[at] is not r and keys[at] == k:
                    at += 1
                if at >= len(rows) or rows[at] is not r:
                    at_list = None  # not where its key says: take the whole-list path below
                    break
                at_list.append(at)
            if at_list is None:
                drop = {id(r) for g in gone for r in g}
                keep = [i for i, r in enumerate(rows) if id(r) not in drop]
                rows = [rows[i] for i in keep]
                keys = [keys[i] for i in keep]
                vms = [vms[i] for i in keep]
            else:
                for at in sorted(at_list, reverse=True):
                    del rows[at], keys[at], vms[at]
            clash = False
            for r in sorted((r for c in came for r in c), key=_row_key):
                k = _row_key(r)
                at = bisect.bisect_left(keys, k)
                if at < len(keys) and keys[at] == k:
                    clash = True
                    break
                rows.insert(at, r)
                keys.insert(at, k)
                vms.insert(at, _row_vm(r))
            if not clash:
                cache.tl_parts, cache.tl_rows, cache.tl_keys, cache.tl_vms = new, rows, keys, vms
                return tuple(vms)
    # A first build (or many topics changed): sort everything, re-using the view models of
    # rows that are the very same objects as last time.
    prior = {id(r): (r, vm) for r, vm in zip(cache.tl_rows, cache.tl_vms)}
    rows = sorted((r for rs in new.values() for r in rs), key=_row_key)
    vms = []
    for r in rows:
        hit = prior.get(id(r))
        vms.append(hit[1] if hit is not None and hit[0] is r else _row_vm(r))
    cache.tl_parts, cache.tl_rows, cache.tl_keys, cache.tl_vms = new, rows, [_row_key(r) for r in rows], vms
    cache.rows = {}
    return tuple(vms)


def _recent(state: Any, records: Mapping[str, RecordVM]) -> tuple[RecordVM, ...]:
    """``recent_events.jsonl`` as the engine renders it, newest first, one row per record."""
    out: list[RecordVM] = []
    seen: set[str] = set()
    text = state.views.recent if state.views is not None else ""
    for line in reversed(text.splitlines()):
        try:
            mid = json.loads(line).get("memory_id")
        except (ValueError, AttributeError):
            continue
        rec = records.get(str(mid))
        if rec is not None and rec.memory_id not in seen:
            seen.add(rec.memory_id)
            out.append(rec)
    return tuple(out)


def _core(state: Any, topic: TopicVM | None) -> CoreVM:
    from memory_tui.core.format.views import core_injection

    config = state.config
    render = state.views.core if state.views is not None else None
    root = state.root_core_text()
    inj = core_injection(root, inject=config.core_inject, counter=state.counter)
    if render is not None:
        return CoreVM(
            inject=config.core_inject,
            text=sanitize(root or ""),
            tokens=int(render.rendered_tokens),
            budget=int(render.budget),
            kept_ids=tuple(render.kept_ids),
            omitted_ids=tuple(render.omitted_ids),
            records=topic.records if topic else (),
            exists=True,
            pending_ids=tuple(render.pending_skipped_ids),
            injected=inj.injected,
            injected_tokens=inj.tokens,
            reason=inj.reason,
            stale=root is not None and root != render.text,
            master=True,
        )
    return CoreVM(
        inject=config.core_inject,
        text=sanitize(root or ""),
        tokens=inj.tokens,
        budget=config.core_budget_tokens,
        kept_ids=(),
        omitted_ids=(),
        records=(),
        exists=root is not None,
        injected=inj.injected,
        injected_tokens=inj.tokens,
        reason=inj.reason,
    )


# -- status and sessions ------------------------------------------------------------------


def _status(state: Any, counts: tuple[int | None, int | None]) -> StatusVM:
    ws = state.writer_status
    failure = ws.last_failure
    return StatusVM(
        last_outcome=ws.last_outcome,
        last_failure_code=sanitize(failure.reason_code) if failure else None,
        last_failure_at=sanitize(failure.at) if failure and failure.at else None,
        last_success_at=sanitize(ws.last_success_at) if ws.last_success_at else None,
        pending_turns=counts[0] if not state.memory_missing else None,
        pending_lenient=counts[1] if not state.memory_missing else None,
    )


def _sessions(
    state: Any,
    prev_snap: Any,
    paths: set[str] | None,
    cache: _Cache,
    counter: TokenCounter,
    errors: list[str],
    loader: Callable[..., Any] | None = None,
) -> tuple[Any, tuple[SessionVM, ...], tuple[int | None, int | None]]:
    """Pending turns per session exactly as ``memory-tui status`` counts them, from the
    sessions' summary index (``sessions.cache``): only a session whose entry is missing or
    stale is read. What the model keeps is those summaries (a ``SummarySnapshot``), never
    every session's nodes: a reader of one session's nodes reads that session when it asks.
    ``loader`` (tests) stands for ``load_sessions`` where sessions are read."""
    try:
        from memory_tui.sessions.cache import load_summaries
        from memory_tui.sessions.ondemand import SummarySnapshot, summary_snapshot

        wid = state.workspace_id or ""
        threshold = state.config.trigger_tokens
        carried = isinstance(prev_snap, SummarySnapshot) and Path(prev_snap.state_dir) == Path(state.state_dir)
        if carried and not _touches(paths, "sessions/", "sessions-git/"):
            snap = prev_snap  # nothing under sessions/ (nor config.json) moved: the summaries stand
        else:
            keys = _session_keys(state.state_dir, prev_snap if carried else None, paths)
            full = loader(state.state_dir, previous=None) if loader is not None else None
            found = load_summaries(state.state_dir, wid, threshold, counter, keys=keys, snapshot=full)
            snap = summary_snapshot(state.state_dir, found.summaries, found.problems, found.keys)
        summaries = snap.summaries
        out = [SessionVM(sanitize(sid), sanitize(s.title), s.pending, s.nodes) for sid, s in summaries.items()]
        from memory_tui.sessions.cache import combine

        total = combine(summaries.values())
        return snap, tuple(sorted(out, key=lambda s: s.session_id)), (total.value, total.lenient)
    except Exception as exc:  # pragma: no cover - the session reader is not supposed to raise
        errors.append(f"sessions: {type(exc).__name__}: {exc}")
        return None, (), (None, None)


def _session_keys(state_dir: Path, prev: Any, paths: set[str] | None) -> dict[str, str | None] | None:
    """Every session's content key, or ``None`` to have ``load_summaries`` take them all. A
    reload whose watcher named only files inside some sessions' folders keys just those
    sessions (and any new one) afresh and carries the others' keys over: stat-ing every
    node file of every session after each of a job's batches was most of a reload."""
    if prev is None or paths is None or not prev.keys:
        return None
    from memory_tui.sessions.store import discover, rel_path, session_content_key

    found, registry, registry_ok, _problems = discover(Path(state_dir))
    rels = {sid: rel_path(sdir, Path(state_dir)) for sid, sdir in found}
    touched: set[str] = set()
    for p in paths:
        if not p.startswith(("sessions/", "sessions-git/")):
            continue
        owner = next((sid for sid, rel in rels.items() if p.startswith(rel + "/")), None)
        if owner is None:
            return None  # the registry, a session folder itself, locations.json: key them all
        touched.add(owner)
    keys: dict[str, str | None] = {}
    for sid, sdir in found:
        if sid in touched or sid not in prev.keys or prev.keys[sid] is None:
            keys[sid] = session_content_key(sid, sdir, Path(state_dir), registry, registry_ok)
        else:
            keys[sid] = prev.keys[sid]
    return keys
