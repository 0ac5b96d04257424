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


def _explain(args: argparse.Namespace):
    from memory_tui.sessions.reasons import explain, load_context
    from memory_tui.sessions.store import load_sessions

    state = _state_dir(args)
    now = args.now if getattr(args, "now", None) is not None else time.time()
    try:
        snap = load_sessions(state)
        ctx = load_context(state, now=now)
        return state, snap, ctx, explain(snap, ctx)
    except OSError as exc:
        raise CliError(f"cannot read {state}: {exc.strerror or exc}") from exc


def _memory_summary(state: Path, sessions: Any = None) -> dict[str, Any]:
    """Revision, counts, writer health and the insight counts from the workspace snapshot."""
    out: dict[str, Any] = {"revision": None, "topics": None, "records": None, "sources": None, "writer": None,
                           "problems": [], "insights": None}
    try:
        from memory_tui.core.store.workspace import open_state
    except ImportError:  # pragma: no cover - core.workspace always ships with the package
        return out
    try:
        view = open_state(state)
    except Exception as exc:  # noqa: BLE001 - status must still report the sessions
        out["problems"].append({"code": getattr(exc, "code", "CORRUPT_FILE"), "message": str(exc), "path": "memory"})
        return out
    out["revision"] = view.revision
    out["memory_missing"] = view.memory_missing
    if view.tree is not None:
        out["topics"] = len(view.tree.topics)
        out["records"] = len(view.tree.units)
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
    if view.tree is not None and not view.memory_missing:
        from memory_tui.insights.summary import summarize

        out["insights"] = summarize(view, sessions).to_json()
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


def cmd_status(args: argparse.Namespace) -> int:
    state, snap, ctx, ex = _explain(args)
    mem = _memory_summary(state, snap)
    threshold = ctx.config.trigger_tokens
    sessions = []
    for sid, se in ex.sessions.items():
        pending_turns, head_tokens = _session_pending(se)
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
            "reasons": [r.to_json() for r in se.reasons],
            "problems": [p.to_json() for p in se.session.problems],
        })
    data = {
        "state_dir": str(state),
        "workspace_id": ctx.workspace_id or None,
        "revision": mem["revision"],
        "config": ctx.config.to_json(),
        "topics": mem["topics"],
        "records": mem["records"],
        "sources": mem["sources"],
        "writer": {"status": mem["writer"], "lock_busy": ctx.lock_busy},
        "status_pending_turns": ex.pending.value,
        "pending_turns_lenient": ex.pending.lenient,
        "reasons": [r.to_json() for r in ex.reasons],
        "sessions": sessions,
        "problems": [p.to_json() for p in (*snap.problems, *ctx.problems, *_settings_problems())] + mem["problems"],
        "insights": mem["insights"],
    }
    if getattr(args, "json", False):
        emit_json(data)
        return 0
    cfg = ctx.config
    print(f"state      {sanitize(str(state))}")
    print(f"workspace  {ctx.workspace_id or '(none)'}  revision {mem['revision'] or '?'}")
    print(f"config     backend={cfg.backend} writer={'on' if cfg.writer_enabled else 'off'} "
          f"trigger_tokens={cfg.trigger_tokens} model={cfg.writer_model or '(default)'}")
    src = mem["sources"] or {}
    print(f"memory     {mem['topics']} topics, {mem['records']} records, {src.get('files')} source files, {src.get('frames')} source frames")
    writer = mem["writer"] or {}
    fail = writer.get("last_failure") or {}
    health = writer.get("last_outcome") or "never ran"
    if fail:
        health += f" (last failure {fail.get('reason_code')} at {fail.get('at')})"
    print(f"writer     {health}; write lock {'HELD' if ctx.lock_busy else 'free'}")
    ins = mem["insights"]
    if ins is not None:
        print(f"evidence   {ins['single_episode']} single-episode records, {ins['alternatives']} records with an "
              f"alternative (at {ins['alternative_forks']} forks), {ins['pending_sources']} citing pending sources")
    pend = ex.pending.value if ex.pending.value is not None else f"null (OpenProgram cannot count; {ex.pending.lenient} countable)"
    print(f"pending    {pend} turns")
    for r in ex.reasons:
        print(f"  ! {r.code}: {sanitize(r.message)}")
    for row in sessions:
        flag = "" if row["in_registry"] else "  [not in registry]"
        print(f"session {sanitize(row['id'])}  head {sanitize(str(row['head_id']))}  tips {row['tips']}  "
              f"pending {row['pending_turns']} turns, head {row['head_pending_tokens']}/{threshold} tokens{flag}")
        for p in row["problems"]:  # a corrupt meta.json or node file of this session
            print(f"  problem  {_problem_line(p)}")
    for line in dict.fromkeys(_problem_line(p) for p in data["problems"]):  # same finding, two readers
        print(f"problem  {line}")
    return 0


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


def _pending_from_index(args: argparse.Namespace, ctx):
    """The global pending count ``why SESSION --json`` prints, from the sessions' summary index
    (``sessions.cache``): every other session is only stat'ed, unless it changed since its
    entry was made (then it alone is read). Equal to the count of a full load."""
    from memory_tui.sessions.cache import load_summaries

    state = _state_dir(args)
    try:
        return load_summaries(state, ctx.workspace_id or "", ctx.config.trigger_tokens).pending
    except OSError as exc:
        raise CliError(f"cannot read {state}: {exc.strerror or exc}") from exc


def _explain_one(args: argparse.Namespace, sid: str):
    """``(context, global reasons, {sid: explanation})`` reading just that session: a session's
    explanation depends on its own files, its registry entry and the writer context only. The
    global pending count (which needs every session) is not computed here: ``--json`` takes
    it from the summary index (:func:`_pending_from_index`)."""
    from memory_tui.sessions.reasons import explain_session, global_reasons, load_context
    from memory_tui.sessions.store import load_sessions

    state = _state_dir(args)
    now = args.now if getattr(args, "now", None) is not None else time.time()
    try:
        snap = load_sessions(state, only=(sid,))
        ctx = load_context(state, now=now)
        return ctx, global_reasons(ctx), {s: explain_session(sess, ctx) for s, sess in snap.sessions.items()}
    except OSError as exc:
        raise CliError(f"cannot read {state}: {exc.strerror or exc}") from exc


def cmd_why(args: argparse.Namespace) -> int:
    wanted = args.session
    pending = None
    if wanted is not None:
        ctx, reasons, sessions = _explain_one(args, wanted)
        if getattr(args, "json", False) and wanted in sessions:
            pending = _pending_from_index(args, ctx)
    else:
        _state, _snap, ctx, ex = _explain(args)
        reasons, sessions, pending = ex.reasons, ex.sessions, ex.pending
    if wanted is not None and wanted not in sessions:
        raise CliError(f"no such session: {wanted}")
    selected = {sid: se for sid, se in sessions.items() if wanted is None or sid == wanted}
    if args.tip is not None and not any(args.tip in se.tips for se in selected.values()):
        raise CliError(f"no such tip: {args.tip}")
    out_sessions: dict[str, Any] = {}
    for sid, se in selected.items():
        js = se.to_json()
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
        return _print_graphs(args, selected)
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
        for tip, t in js["tips"].items():
            tags = [x for x, on in (("head", t["is_head"]), ("archived", t["archived"]), ("unlisted", not t["listed"])) if on]
            summary = tip_summary(selected[sid].tips[tip], ctx.config.trigger_tokens)
            print(f"  tip {sanitize(tip)}{' [' + ', '.join(tags) + ']' if tags else ''}: {summary}")
            for r in t["reasons"]:
                print(f"    ! {r['code']}: {sanitize(r['message'])}")
                _print_evidence(r, "        ")
            for turn in t["turns"]:
                node = session.get(turn["id"])
                text = _turn_text(node)
                print(f"    {_GLYPH[turn['verdict']]} {turn['verdict']:<7} {sanitize(turn['id'])}  {text}")
                for r in turn["reasons"]:
                    print(f"        {r['code']}: {sanitize(r['message'])}")
                    _print_evidence(r, "          ")
    return 0


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


def _print_graphs(args: argparse.Namespace, selected: dict[str, Any]) -> int:
    import shutil

    from memory_tui.sessions.graph import LayoutOptions, draw, layout_session, legend_lines

    width = args.width if args.width is not None else shutil.get_terminal_size((120, 40)).columns
    opts = LayoutOptions(reverse=args.newest_first, collapse=not args.no_collapse)
    for sid, se in selected.items():
        lay = layout_session(se, opts)
        print(f"session {sanitize(sid)}  head {sanitize(str(se.session.head_id))}  {len(se.session.nodes)} nodes")
        for line in draw(lay, ascii=args.ascii, max_lanes=max(2, min(16, width // 4)), width=width):
            print(line)
        print()
    print("legend")
    for line in legend_lines(args.ascii):
        print(f"  {line}")
    return 0
