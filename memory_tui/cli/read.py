"""Verbs ``status`` (workspace + writer health + pending per session) and ``why`` (for every
session, tip and turn: written / pending / never, with the reasons and their evidence).

Both only read. The write-lock probe opens an existing lock file read-only and releases it
immediately; nothing is created.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from memory_tui.cli.common import CliError, add_common, emit_json
from memory_tui.core.format.paths import discover_state_dir
from memory_tui.core.format.text import sanitize


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("status", help="workspace, writer health and pending turns per session")
    add_common(p)
    p.add_argument("--now", type=float, default=None, help=argparse.SUPPRESS)
    # the full load and explanation of every session, not the summary index (a check of the index)
    p.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_status)

    p = subparsers.add_parser("why", help="explain, per session, tip and turn, what memory wrote and why not")
    add_common(p)
    p.add_argument("session", nargs="?", metavar="SESSION", help="one session id (default: every session)")
    p.add_argument("--tip", metavar="NODE", default=None, help="only this tip (branch head node id)")
    p.add_argument("--graph", action="store_true", help="draw the session's branch graph (the Sessions view's layout)")
    p.add_argument("--ascii", action="store_true", help="ASCII glyphs for --graph")
    p.add_argument("--newest-first", action="store_true", help="--graph: newest turn at the top")
    p.add_argument("--no-collapse", action="store_true", help="--graph: do not fold tool runs and long linear runs")
    p.add_argument("--width", type=int, default=None, help="--graph: cut lines at this width (default: the terminal's)")
    p.add_argument("--drift", action="store_true",
                   help="only where the marks and the records disagree: turns the marks call done that no record cites, "
                        "and pending turns a record already cites")
    p.add_argument("--now", type=float, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_why)


# --------------------------------------------------------------------------------------------


def _state_dir(args: argparse.Namespace) -> Path:
    state = discover_state_dir(getattr(args, "state", None))
    if not state.exists():
        raise CliError(f"state directory not found: {state}")
    if not state.is_dir():
        raise CliError(f"not a state directory (not a folder): {state}")
    if not (state / "sessions").is_dir() and not (state / "sessions-git").is_dir() and not (state / "memory").is_dir():
        raise CliError(f"not an OpenProgram state directory (no sessions/ or memory/): {state}")
    return state


def _explain(args: argparse.Namespace, *, lazy: bool = False):
    from memory_tui.sessions.reasons import explain, load_context
    from memory_tui.sessions.store import load_sessions

    state = _state_dir(args)
    now = args.now if getattr(args, "now", None) is not None else time.time()
    try:
        snap = load_sessions(state)
        ctx = load_context(state, now=now)
        return state, snap, ctx, explain(snap, ctx, lazy=lazy)
    except OSError as exc:
        raise CliError(f"cannot read {state}: {exc.strerror or exc}") from exc


def _memory_summary(state: Path, insights: Any = None) -> dict[str, Any]:
    """Revision, counts, writer health and the insight counts from the workspace snapshot
    (no derived views: ``status`` prints none). ``insights(view)`` gives the header's insight
    counts (JSON) for the view."""
    out: dict[str, Any] = {"revision": None, "topics": None, "records": None, "sources": None, "writer": None,
                           "problems": [], "insights": None}
    try:
        from memory_tui.core.store.workspace import open_state
    except ImportError:  # pragma: no cover - core.workspace always ships with the package
        return out
    try:
        view = open_state(state, views=False)
    except Exception as exc:  # noqa: BLE001 - status must still report the sessions
        out["problems"].append({"code": getattr(exc, "code", "CORRUPT_FILE"), "message": str(exc), "path": "memory"})
        return out
    out["revision"] = view.revision
    out["memory_missing"] = view.memory_missing
    if view.tree is not None:
        out["topics"] = len(view.tree.topics)
        out["records"] = view.tree.unit_count
    src = view.sources
    if src is not None:
        files = getattr(src, "files", None)
        try:
            out["sources"] = {"files": len(files) if files is not None else None, "frames": len(src.all_ids())}
        except Exception:  # noqa: BLE001
            out["sources"] = None
    ws = view.writer_status
    out["writer"] = ws.to_json() if ws is not None else None
    out["problems"] = [p.to_json() for p in view.problems]
    if view.tree is not None and not view.memory_missing and insights is not None:
        out["insights"] = insights(view)
    return out


def _session_pending(se) -> tuple[int, int]:
    """(distinct unmarked eligible records of this session, head pending tokens)."""
    sa = se.analysis
    ids: set[str] = set()
    for tip in sa.forced_order:
        ta = sa.tips.get(tip)
        if ta is None:
            continue
        ids.update(r.id for r in ta.recordset.records if r.id not in ta.marked)
    head = sa.tips.get(sa.session.head_id or "")
    return len(ids), head.pending_tokens if head is not None else 0


def _status_full(state: Path, now: float) -> tuple[Any, dict[str, Any]]:
    """``(context, the status data)`` from a full load and explanation of every session (the
    oracle the index-backed :func:`_status_indexed` is compared with)."""
    from memory_tui.insights.summary import summarize
    from memory_tui.sessions.kept import citations_for_state, kept_counts, kept_states, session_drift
    from memory_tui.sessions.reasons import explain, load_context
    from memory_tui.sessions.store import load_sessions

    try:
        snap = load_sessions(state)
        ctx = load_context(state, now=now)
        ex = explain(snap, ctx)
    except OSError as exc:
        raise CliError(f"cannot read {state}: {exc.strerror or exc}") from exc
    mem = _memory_summary(state, lambda view: summarize(view, snap).to_json())
    citations, _why_not = citations_for_state(state)
    threshold = ctx.config.trigger_tokens
    sessions = []
    for sid, se in ex.sessions.items():
        pending_turns, head_tokens = _session_pending(se)
        kept = kept_counts(kept_states(se.session, citations, ctx.workspace_id))
        drift = session_drift(se.analysis, citations)
        sessions.append({
            "id": sid,
            "title": se.session.title,
            "head_id": se.session.head_id,
            "in_registry": se.session.in_registry,
            "updated_at": se.session.updated_at,
            "archived": se.session.archived,
            "tips": len(se.analysis.rows),
            "pending_turns": pending_turns,
            "head_pending_tokens": head_tokens,
            "trigger_tokens": threshold,
            "kept": kept,
            "drift": drift.count,
            "reasons": [r.to_json() for r in se.reasons],
            "problems": [p.to_json() for p in se.session.problems],
        })
    return ctx, _status_json(state, ctx, mem, ex.pending, ex.reasons, sessions, snap.problems)


def _status_indexed(state: Path, now: float, *, directory: Path | None = None) -> tuple[Any, dict[str, Any]]:
    """The same data from the sessions' summary index (``sessions.cache``): each session's
    stored facts, the clock's reasons worded now, the kept counts and the drift from the
    records' citations; the insight counts from their own entry (keyed by the revision and
    every session's key). Sessions are read only where their entry is missing or stale
    (a cold build reads them in worker processes, which keep each session's shape); the
    insights take every session's graph from those shapes, as the app's do, not from a
    second read of every node file."""
    from memory_tui.sessions.cache import cache_dir, content_keys, load_summaries, status_row
    from memory_tui.sessions.kept import citations_for_state
    from memory_tui.sessions.reasons import global_reasons, load_context

    where = directory if directory is not None else cache_dir()
    try:
        ctx = load_context(state, now=now)
        keys = content_keys(state)
        found = load_summaries(state, ctx.workspace_id or "", ctx.config.trigger_tokens, directory=directory,
                               keys=keys)
    except OSError as exc:
        raise CliError(f"cannot read {state}: {exc.strerror or exc}") from exc

    def insights(view: Any) -> dict[str, Any]:
        key = _insights_key(view.revision, keys)
        hit = _insights_memo(where, state, key)
        if hit is not None:
            return hit
        from memory_tui.insights.summary import summarize
        from memory_tui.sessions.ondemand import summary_snapshot

        snap = summary_snapshot(state, found.summaries, found.problems, found.keys)
        value = summarize(view, snap).to_json()
        _insights_keep(where, state, key, value)
        return value

    mem = _memory_summary(state, insights)
    # from the per-session citations index while the topics are unchanged (no record built)
    citations, _why_not = citations_for_state(state)
    _keep_parses(state)
    sessions = [status_row(s, ctx, citations) for s in found.summaries.values()]
    return ctx, _status_json(state, ctx, mem, found.pending, global_reasons(ctx), sessions, found.problems)


def _keep_parses(state: Path) -> None:
    """What this process parsed of the topics and archives, kept for the next reading
    process in the user cache (a reader never writes into the state dir; the workspace's
    own parse cache is written by transactions only). Nothing when this process never
    loaded the parse cache: it parsed nothing (``why SESSION`` answered from its index)."""
    import sys

    parsecache = sys.modules.get("memory_tui.core.store.parsecache")
    if parsecache is not None and (state / "memory").is_dir():
        parsecache.keep_for_readers(state / "memory")


# The header's insight counts of ``status``, remembered per state dir in the user cache: a
# function of the memory workspace (its revision hashes every topic and archive byte) and of
# every session (their content keys), computed by this code.
INSIGHTS_KIND = "status-insights"
INSIGHTS_FORMAT = "memory-tui/status-insights/1"


def _insights_key(revision: Any, keys: dict[str, Any]) -> str | None:
    import hashlib
    import json

    import memory_tui.core.format as fmt
    import memory_tui.insights as ins
    import memory_tui.sessions as ses
    from memory_tui.core.cache.codetag import package_tag

    if not isinstance(revision, str) or any(k is None for k in keys.values()):
        return None  # a racy or unreadable session, or no revision: nothing to vouch for
    tag = "".join(package_tag(p, salt=INSIGHTS_FORMAT) for p in (ins, ses, fmt))
    return hashlib.sha256(json.dumps([INSIGHTS_FORMAT, tag, revision, sorted(keys.items())]).encode()).hexdigest()


def _insights_path(where: Path, state: Path) -> Path:
    import hashlib

    return where / f"{hashlib.sha256(str(state.absolute()).encode()).hexdigest()[:32]}.insights"


def _insights_memo(where: Path, state: Path, key: str | None) -> dict[str, Any] | None:
    from memory_tui.core.cache import envelope

    if key is None:
        return None
    value = envelope.read(_insights_path(where, state), INSIGHTS_KIND)
    if not (isinstance(value, tuple) and len(value) == 2 and value[0] == key and isinstance(value[1], dict)):
        return None
    counts = value[1]
    ok = all(type(counts.get(k)) is int for k in ("records", "single_episode", "alternatives", "alternative_forks",
                                                   "pending_sources", "assistant_only"))
    return counts if ok and len(counts) == 6 else None


def _insights_keep(where: Path, state: Path, key: str | None, value: dict[str, Any]) -> None:
    from memory_tui.core.cache import envelope

    if key is not None:
        envelope.write(_insights_path(where, state), INSIGHTS_KIND, (key, value), make_folder=True)


def _status_json(state: Path, ctx: Any, mem: dict[str, Any], pending: Any, reasons: Any, sessions: list[dict[str, Any]],
                 session_problems: Any) -> dict[str, Any]:
    return {
        "state_dir": str(state),
        "workspace_id": ctx.workspace_id or None,
        "revision": mem["revision"],
        "config": ctx.config.to_json(),
        "topics": mem["topics"],
        "records": mem["records"],
        "sources": mem["sources"],
        "writer": {"status": mem["writer"], "lock_busy": ctx.lock_busy},
        "status_pending_turns": pending.value,
        "pending_turns_lenient": pending.lenient,
        "reasons": [r.to_json() for r in reasons],
        "sessions": sessions,
        "problems": [p.to_json() for p in (*session_problems, *ctx.problems, *_settings_problems())] + mem["problems"],
        "insights": mem["insights"],
    }


def cmd_status(args: argparse.Namespace) -> int:
    state = _state_dir(args)
    now = args.now if getattr(args, "now", None) is not None else time.time()
    ctx, data = (_status_full if getattr(args, "full", False) else _status_indexed)(state, now)
    if getattr(args, "json", False):
        emit_json(data)
        return 0
    print_status(state, ctx, data)
    return 0


def print_status(state: Path, ctx: Any, data: dict[str, Any]) -> None:
    """The text form of ``status`` from its data."""
    cfg = ctx.config
    threshold = cfg.trigger_tokens
    print(f"state      {sanitize(str(state))}")
    print(f"workspace  {ctx.workspace_id or '(none)'}  revision {data['revision'] or '?'}")
    print(f"config     backend={cfg.backend} writer={'on' if cfg.writer_enabled else 'off'} "
          f"trigger_tokens={cfg.trigger_tokens} model={cfg.writer_model or '(default)'}")
    src = data["sources"] or {}
    print(f"memory     {data['topics']} topics, {data['records']} records, {src.get('files')} source files, {src.get('frames')} source frames")
    writer = data["writer"]["status"] or {}
    fail = writer.get("last_failure") or {}
    health = writer.get("last_outcome") or "never ran"
    if fail:
        health += f" (last failure {fail.get('reason_code')} at {fail.get('at')})"
    print(f"writer     {health}; write lock {'HELD' if ctx.lock_busy else 'free'}")
    ins = data["insights"]
    if ins is not None:
        print(f"evidence   {ins['single_episode']} single-episode records, {ins['alternatives']} records with an "
              f"alternative (at {ins['alternative_forks']} forks), {ins['pending_sources']} citing pending sources")
    value = data["status_pending_turns"]
    pend = value if value is not None else f"null (OpenProgram cannot count; {data['pending_turns_lenient']} countable)"
    print(f"pending    {pend} turns")
    for r in data["reasons"]:
        print(f"  ! {r['code']}: {sanitize(r['message'])}")
    for row in data["sessions"]:
        flag = "" if row["in_registry"] else "  [not in registry]"
        print(f"session {sanitize(row['id'])}  head {sanitize(str(row['head_id']))}  tips {row['tips']}  "
              f"pending {row['pending_turns']} turns, head {row['head_pending_tokens']}/{threshold} tokens{flag}")
        k = row["kept"]
        print(f"  kept     {k['kept']} written and kept, {k['dropped']} written but nothing kept, "
              f"{k['unmarked_kept']} kept without a mark; drift {row['drift']}")
        for p in row["problems"]:  # a corrupt meta.json or node file of this session
            print(f"  problem  {_problem_line(p)}")
    for line in dict.fromkeys(_problem_line(p) for p in data["problems"]):  # same finding, two readers
        print(f"problem  {line}")


def _settings_problems():
    """memory-tui's own config.toml, read by the one loader the app uses too.

    Only the app knows its binding ids, so when the file rebinds any key the app's own
    loader is asked (it imports Textual, which no other status run needs): an unknown
    ``[keymap]`` id is then reported here with the app's wording, file, key and line.
    """
    from memory_tui.pipeline.settings import load_config

    settings = load_config()
    if not settings.keymap:
        return settings.problems
    from memory_tui.cli.app import app_settings_problems

    return app_settings_problems()


_GLYPH = {"written": "+", "pending": "~", "never": "-"}


def _problem_line(p: dict[str, Any]) -> str:
    where = p.get("path") or ""
    if p.get("line"):
        where += f":{p['line']}"
    return f"{sanitize(where)}: {p.get('code')}: {sanitize(str(p.get('message')))}"


def _explain_one(args: argparse.Namespace, sid: str, *, lazy: bool = False):
    """``(context, global reasons, {sid: explanation}, snapshot)`` reading just that session: a session's
    explanation depends on its own files, its registry entry and the writer context only. The
    global pending count needs every session (a ``stat`` of each node file at least), so
    ``why SESSION --json`` leaves it ``null``: it is ``status``'s figure."""
    from memory_tui.sessions.reasons import explain_session, global_reasons, load_context
    from memory_tui.sessions.store import load_sessions

    state = _state_dir(args)
    now = args.now if getattr(args, "now", None) is not None else time.time()
    try:
        snap = load_sessions(state, only=(sid,))
        ctx = load_context(state, now=now)
        return ctx, global_reasons(ctx), {s: explain_session(sess, ctx, lazy=lazy) for s, sess in snap.sessions.items()}, snap
    except OSError as exc:
        raise CliError(f"cannot read {state}: {exc.strerror or exc}") from exc


def cmd_why(args: argparse.Namespace) -> int:
    from memory_tui.sessions.kept import citations_for_state, kept_report

    wanted = args.session
    if getattr(args, "drift", False):
        return _print_drift(args)
    pending = None
    if wanted is not None:
        ctx, reasons, sessions, snap = _explain_one(args, wanted)
    else:
        _state, _snap, ctx, ex = _explain(args)
        reasons, sessions, pending = ex.reasons, ex.sessions, ex.pending
    if wanted is not None and wanted not in sessions:
        raise CliError(f"no such session: {wanted}")
    selected = {sid: se for sid, se in sessions.items() if wanted is None or sid == wanted}
    if args.tip is not None and not any(args.tip in se.tips for se in selected.values()):
        raise CliError(f"no such tip: {args.tip}")
    from memory_tui.sessions.links import SpawnLinks, summary_facts
    from memory_tui.sessions.schedule import session_schedule

    # one session: only its citations (the index of them, while the topics are unchanged)
    citations, citations_missing = citations_for_state(_state_dir(args), sessions=None if wanted is None else (wanted,))
    _keep_parses(_state_dir(args))
    # a cross-session spawn names a node of another session: the sub-agent sessions are read
    # for it (every session's meta.json says whether it is one)
    if wanted is not None:
        links = SpawnLinks.for_session(_state_dir(args), wanted, {s: se.session for s, se in sessions.items()},
                                       snap.discovered)
    else:
        links = SpawnLinks({s: se.session for s, se in sessions.items()})
    out_sessions: dict[str, Any] = {}
    for sid, se in selected.items():
        js = se.to_json()
        js["links"] = [x.to_json() for x in links.of_session(sid)]
        js["link_reasons"] = [r.to_json() for r in links.reasons(sid)]
        js["summaries"] = [{**f.to_json(), "message": f.message()} for f in summary_facts(se.session, citations, ctx.workspace_id)]
        js["kept"] = kept_report(se.session, citations, ctx.workspace_id, se.analysis)
        for tip, nw in session_schedule(se.analysis, ctx).items():
            if tip in js["tips"]:
                js["tips"][tip]["next_write"] = nw.to_json()
        if citations_missing:
            js["kept"]["unread"] = citations_missing
        kept_of = {t["id"]: t["state"] for t in js["kept"]["turns"]}
        for t in js["tips"].values():
            for turn in t["turns"]:
                turn["kept"] = kept_of.get(turn["id"])
        if args.tip is not None:
            if args.tip not in js["tips"]:
                continue
            js["tips"] = {args.tip: js["tips"][args.tip]}
        out_sessions[sid] = js
    if getattr(args, "json", False):
        emit_json({
            "workspace_id": ctx.workspace_id or None,
            "trigger_tokens": ctx.config.trigger_tokens,
            "status_pending_turns": pending.value if pending is not None else None,
            "reasons": [r.to_json() for r in reasons],
            "sessions": out_sessions,
        })
        return 0
    if getattr(args, "graph", False):
        return _print_graphs(args, selected, ctx.workspace_id, citations, links)
    from memory_tui.sessions.summary import tip_summary

    for r in reasons:
        print(f"! {r.code}: {sanitize(r.message)}")
        _print_evidence(r.to_json(), "    ")
    for sid, js in out_sessions.items():
        session = selected[sid].session
        print(f"session {sanitize(sid)}  head {sanitize(str(js['head_id']))}"
              f"{'' if js['in_registry'] else '  [not in registry]'}")
        for p in session.problems:
            print(f"  problem  {_problem_line(p.to_json())}")
        for r in js["reasons"]:
            print(f"  ! {r['code']}: {sanitize(r['message'])}")
            _print_evidence(r, "      ")
        for r in js["link_reasons"]:
            print(f"  > {r['code']}: {sanitize(r['message'])}")
            _print_evidence(r, "      ")
        for f in js["summaries"]:
            flag = "!" if f["on_head_line"] else "="
            print(f"  {flag} compaction summary {sanitize(f['id'])}: {sanitize(f['message'])}")
            for ev in f["evidence"]:
                _print_evidence({"evidence": [ev]}, "      ")
        printed: dict[str, list[dict[str, Any]]] = {}  # tip -> the turns printed under it
        for tip, t in js["tips"].items():
            tags = [x for x, on in (("head", t["is_head"]), ("archived", t["archived"]), ("unlisted", not t["listed"])) if on]
            summary = tip_summary(selected[sid].tips[tip], ctx.config.trigger_tokens)
            print(f"  tip {sanitize(tip)}{' [' + ', '.join(tags) + ']' if tags else ''}: {summary}")
            nw = t.get("next_write")
            if nw is not None:
                print(f"    next write: {sanitize(nw['text'])}")
                for ev in nw["evidence"]:
                    _print_evidence({"evidence": [ev]}, "        ")
            for r in t["reasons"]:
                print(f"    ! {r['code']}: {sanitize(r['message'])}")
                _print_evidence(r, "        ")
            turns = t["turns"]
            printed[tip] = turns
            shared, other = _shared_prefix(turns, {k: v for k, v in printed.items() if k != tip})
            if shared:
                print(f"    = {shared} turn(s) shared with tip {sanitize(other)}, the same verdicts: "
                      f"{sanitize(turns[0]['id'])} … {sanitize(turns[shared - 1]['id'])}")
            for turn in turns[shared:]:
                node = session.get(turn["id"])
                text = _turn_text(node)
                print(f"    {_GLYPH[turn['verdict']]} {turn['verdict']:<7} {sanitize(turn['id'])}  {text}")
                for r in turn["reasons"]:
                    print(f"        {r['code']}: {sanitize(r['message'])}")
                    _print_evidence(r, "          ")
        _print_kept(js["kept"], citations_missing)
    return 0


_KEPT_GLYPH = {"kept": "+", "dropped": "@", "unmarked_kept": "K"}


def _print_kept(kept: dict[str, Any], missing: str | None) -> None:
    """The session's kept section: what the records hold of the turns the marks say were written."""
    c = kept["counts"]
    print(f"  kept: {c['kept']} written and kept, {c['dropped']} written but nothing kept, "
          f"{c['unmarked_kept']} kept without a mark")
    if missing:
        print(f"    ! {sanitize(missing)}: every turn reads as cited by nothing")
    for turn in kept["turns"]:
        print(f"    {_KEPT_GLYPH[turn['state']]} {turn['state']:<13} {sanitize(turn['id'])}  {sanitize(turn['message'])}")
        if turn["state"] != "kept":  # a kept turn's proof is the records it names; the others show theirs
            for ev in turn["evidence"]:
                _print_evidence({"evidence": [ev]}, "        ")
    drift = kept.get("drift")
    if drift is not None:
        n = len(drift["marks_done_not_cited"]) + len(drift["cited_but_pending"])
        print(f"  drift: {n} (pending by the marks {len(drift['mark_pending_ids'])}, "
              f"by the records {len(drift['cite_pending_ids'])}; `why --drift` lists them)")


def _print_drift(args: argparse.Namespace) -> int:
    """``why --drift [SESSION]``: per session, where the mark-based and the citation-based
    pending sets disagree, each turn with the file and field that prove it."""
    from memory_tui.sessions.cache import load_summaries
    from memory_tui.sessions.kept import MARKED_NOT_CITED, citations_for_state, drift_of, session_drift
    from memory_tui.sessions.reasons import load_context
    from memory_tui.sessions.records import analyze_session
    from memory_tui.sessions.store import load_sessions

    wanted = args.session
    state = _state_dir(args)
    now = args.now if getattr(args, "now", None) is not None else time.time()
    try:
        ctx = load_context(state, now=now)
        wid, threshold = ctx.workspace_id or "", ctx.config.trigger_tokens
        if wanted is not None:
            # one session: read it alone (the index would stat every other session's files)
            snap = load_sessions(state, only=(wanted,))
            if wanted not in snap.sessions:
                raise CliError(f"no such session: {wanted}")
            citations, missing = citations_for_state(state, sessions=(wanted,))
            _keep_parses(state)
            report = {sid: session_drift(analyze_session(s, wid, threshold), citations)
                      for sid, s in snap.sessions.items()}
        else:
            # every session: the turns a live tip reaches come from the session summary index
            # (a session whose files changed is read again there); only the comparison with
            # the records, which are read now, is done here
            summaries = load_summaries(state, wid, threshold).summaries
            citations, missing = citations_for_state(state)
            _keep_parses(state)
            report = {sid: drift_of(sid, s.live, citations) for sid, s in summaries.items()}
    except OSError as exc:
        raise CliError(f"cannot read {state}: {exc.strerror or exc}") from exc
    if getattr(args, "json", False):
        emit_json({"workspace_id": ctx.workspace_id or None, "unread": missing,
                   "sessions": {sid: {"drift": d.count, **d.to_json()} for sid, d in report.items()}})
        return 0
    if missing:
        print(f"! {sanitize(missing)}: every turn reads as cited by nothing")
    total = 0
    for sid, d in sorted(report.items(), key=lambda kv: (-kv[1].count, kv[0])):
        total += d.count
        print(f"session {sanitize(sid)}  drift {d.count}  pending by the marks {len(d.mark_pending)}, "
              f"by the records {len(d.cite_pending)}")
        for item in d.items:
            if item.kind == MARKED_NOT_CITED:
                what = "the marks call it done, no record cites it"
            else:
                what = "pending by the marks, but cited by " + ", ".join(
                    f"^{r.memory_id} ({r.topic_path}:{r.line})" for r in item.records)
            print(f"  {'@' if item.kind == MARKED_NOT_CITED else 'K'} {sanitize(item.node_id)}  {sanitize(what)}")
            print(f"      evidence {sanitize(item.file)} metadata.memory_written_scriptorium = {_value(item.mark)}")
            for r in item.records:
                print(f"      evidence memory/{sanitize(r.topic_path)} line {r.line} ^{sanitize(r.memory_id)} = {_value(r.source_id)}")
    print(f"drift {total} turn(s) in {sum(1 for d in report.values() if d.count)} session(s)")
    return 0


def _shared_prefix(turns: list[dict[str, Any]], earlier: dict[str, list[dict[str, Any]]]) -> tuple[int, str]:
    """How many leading ``turns`` an already printed tip showed the same way (same turn, same
    verdict and reasons), and which tip: branches share their history up to the fork, and
    repeating it once per tip buried what differs. A turn whose verdict differs here (a
    pending turn that counts against another tip's threshold) ends the shared part."""
    best, name = 0, ""
    for tip, seen in earlier.items():
        n = 0
        for a, b in zip(turns, seen):
            if a != b:
                break
            n += 1
        if n > best:
            best, name = n, tip
    return best, name


def _turn_text(node) -> str:
    from memory_tui.sessions.graph import first_line

    if node is None:
        return ""
    if node.role == "code":
        return f"[tool {sanitize(node.name)}]"
    line = first_line(node.output, 100)
    return f"\"{line}\"" if line else "(no text)"


def _value(value: Any) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return sanitize(text if len(text) <= 100 else text[:97] + "...")


def _print_evidence(reason: dict[str, Any], indent: str) -> None:
    for ev in reason.get("evidence", ()):
        where = sanitize(ev["file"]) or "(no file)"
        field_ = f" {sanitize(ev['field'])}" if ev.get("field") else ""
        print(f"{indent}evidence {where}{field_} = {_value(ev['value'])}")


def _print_graphs(args: argparse.Namespace, selected: dict[str, Any], workspace_id: str, citations: Any,
                  links: Any) -> int:
    import shutil

    from memory_tui.sessions.graph import LayoutOptions, draw, layout_session, legend_lines
    from memory_tui.sessions.links import session_decorations

    width = args.width if args.width is not None else shutil.get_terminal_size((120, 40)).columns
    opts = LayoutOptions(reverse=args.newest_first, collapse=not args.no_collapse)
    for sid, se in selected.items():
        deco = session_decorations(se.session, citations, workspace_id, links)
        lay = layout_session(se, opts, None, deco)
        print(f"session {sanitize(sid)}  head {sanitize(str(se.session.head_id))}  {len(se.session.nodes)} nodes")
        for line in draw(lay, ascii=args.ascii, max_lanes=max(2, min(16, width // 4)), width=width):
            print(line)
        print()
    print("legend")
    for line in legend_lines(args.ascii):
        print(f"  {line}")
    return 0
