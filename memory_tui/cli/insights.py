"""Verbs ``evidence``, ``history``, ``revert`` and ``alternatives`` (memory_tui.insights).

``evidence`` and ``alternatives`` only read. ``history`` reads the memory git repository.
``revert`` changes one topic file through the transaction (compare-and-set on the revision
read at the start) and commits it; it never rewrites history.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memory_tui.cli.common import EXIT_FAILURE, EXIT_RETRYABLE, CliError, add_verb, emit_json, state_dir
from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.text import sanitize


def register(subparsers: argparse._SubParsersAction) -> None:
    from memory_tui.insights.evidence import SORT_KEYS

    p = add_verb(subparsers, "evidence", "evidence strength of every record (sessions, days, branches, owner)",
                 cmd_evidence)
    p.add_argument("--sort", choices=sorted(SORT_KEYS), default="weakest", help="row order of the text table")
    p.add_argument("--reverse", action="store_true", help="strongest / last first")

    p = add_verb(subparsers, "history", "the git history of one record (block id) or topic file", cmd_history)
    p.add_argument("target", metavar="RECORD|TOPIC", help="a block id (^abc12345 or abc12345) or a topic path")

    p = add_verb(subparsers, "revert", "restore a record or topic to its text at an earlier commit", cmd_revert)
    p.add_argument("target", metavar="RECORD|TOPIC", help="a block id or a topic path")
    p.add_argument("--to", metavar="COMMIT", required=True, help="the commit (hash or prefix) to restore from")

    add_verb(subparsers, "alternatives", "records citing sibling branches of one session", cmd_alternatives)


def _state(args: argparse.Namespace) -> Path:
    state = state_dir(args)
    if not (state / "memory").is_dir():
        raise CliError(f"no memory workspace in {state} (expected {state / 'memory'})")
    return state


def _load(args: argparse.Namespace):
    from memory_tui.core.store.workspace import open_state
    from memory_tui.sessions.store import load_sessions

    state = _state(args)
    try:
        return state, open_state(state), load_sessions(state)
    except OSError as exc:
        raise CliError(f"cannot read {state}: {exc.strerror or exc}") from exc


# --------------------------------------------------------------------------------- evidence


def _yes(flag: bool) -> str:
    return "yes" if flag else "-"


def cmd_evidence(args: argparse.Namespace) -> int:
    from memory_tui.insights.evidence import evidence_for, sort_evidence

    _state_dir, view, sessions = _load(args)
    rows = evidence_for(view, sessions)
    if getattr(args, "json", False):
        emit_json({"revision": view.revision, "records": [r.to_json() for r in rows]})
        return 0
    ordered = sort_evidence(rows, args.sort, reverse=args.reverse)
    if not ordered:
        print("no records")
        return 0
    width = max(len(sanitize(r.topic_path)) for r in ordered)
    print(f"{'RECORD':<10} {'TOPIC':<{width}}  SESS DAYS BRAN OWNER ASST-ONLY PENDING SINGLE")
    for r in ordered:
        print(f"^{sanitize(r.memory_id):<9} {sanitize(r.topic_path):<{width}}  {r.sessions:>4} {r.days:>4} "
              f"{r.branches:>4} {_yes(r.owner_backed):>5} {_yes(r.assistant_only):>9} "
              f"{r.pending_sources if r.pending_sources else '-':>7} {_yes(r.single_episode):>6}")
    single = sum(1 for r in rows if r.single_episode)
    pending = sum(1 for r in rows if r.pending_sources)
    print(f"{len(rows)} record(s): {single} single-episode, {pending} citing pending sources, "
          f"{sum(1 for r in rows if r.assistant_only)} backed only by assistant turns")
    return 0


# --------------------------------------------------------------------------------- history


def cmd_history(args: argparse.Namespace) -> int:
    from memory_tui.insights.history import history

    _state_dir, view, _sessions = _load(args)
    try:
        hist = history(view, args.target)
    except MemoryError as exc:
        raise CliError(str(exc)) from exc
    if getattr(args, "json", False):
        emit_json(hist.to_json())
        return 0 if hist.versions else EXIT_FAILURE
    if not hist.versions:
        why = "; ".join(hist.problems) or (
            f"no commit ever contained ^{hist.target}" if hist.kind == "record" else f"no commit ever touched {hist.target}")
        raise CliError(f"no history for {sanitize(hist.target)}: {sanitize(why)}")
    print(f"{hist.kind} {sanitize(hist.target)}  ({len(hist.versions)} version(s))")
    for v in hist.versions:
        where = f"  {sanitize(v.topic_path)}" if v.topic_path and hist.kind == "record" else ""
        print(f"{v.commit[:10]}  {v.date}  {v.actor:<10} {sanitize(v.subject)}{where}"
              f"{'  [removed]' if v.removed else ''}")
        if v.actor_detail:
            print(f"            {sanitize(v.actor_detail)}")
        _print_version_text(hist.kind, v)
    return 0


TOPIC_TEXT_LINES = 12  # a topic version's text is the whole file: its start, then how much more


def _print_version_text(kind: str, version) -> None:
    """The text the version left (a record's paragraph and definitions; the start of a
    topic file), indented under its commit line, as ``--json`` gives it in ``text``."""
    if version.removed or not version.text:
        return
    lines = version.text.rstrip("\n").split("\n")
    shown = lines if kind == "record" else lines[:TOPIC_TEXT_LINES]
    for line in shown:
        print(f"    {sanitize(line)}" if line.strip() else "")
    if len(shown) < len(lines):
        print(f"    … {len(lines) - len(shown)} more line(s) (--json has the whole text)")


def cmd_revert(args: argparse.Namespace) -> int:
    from memory_tui.insights.history import revert

    _state_dir, view, _sessions = _load(args)
    result = revert(view, args.target, args.to)
    if getattr(args, "json", False):
        emit_json(result.to_json())
    elif result.ok:
        print(f"reverted {result.kind} {sanitize(result.target)} to {result.to_commit[:10]}: "
              f"commit {(result.git_commit or '-')[:10]}, revision {result.revision}")
        for w in result.warnings:
            print(f"warning: {sanitize(w)}")
    else:
        where = f"{result.path}:{result.line}: " if result.path and result.line else f"{result.path}: " if result.path else ""
        print(f"memory-tui: {sanitize(where)}{result.code}: {sanitize(result.message)}", file=sys.stderr)
        from memory_tui.core.tx.refusals import explain_refusal

        refusal = explain_refusal(result.code, result.message, action="revert", target=result.target)
        if refusal.heading != result.message:
            for line in refusal.lines():
                print(f"  {sanitize(line)}", file=sys.stderr)
    if result.ok:
        return 0
    return EXIT_RETRYABLE if result.retryable else EXIT_FAILURE


# --------------------------------------------------------------------------------- alternatives


def _short(text: str, width: int = 90) -> str:
    line = " ".join(sanitize(text).split())
    return line if len(line) <= width else line[: width - 1] + "\u2026"


def cmd_alternatives(args: argparse.Namespace) -> int:
    from memory_tui.insights.alternatives import alternatives, group_by_fork

    _state_dir, view, sessions = _load(args)
    pairs = alternatives(view, sessions)
    if getattr(args, "json", False):
        emit_json({"revision": view.revision, "alternatives": [p.to_json() for p in pairs]})
        return 0
    if not pairs:
        print("no alternatives: no two records cite sibling branches of one session")
        return 0
    for group in group_by_fork(pairs, sessions):
        print(f"session {sanitize(group.session_id)}  fork at {sanitize(group.fork_point)}  "
              f"head {sanitize(str(group.head_id))}")
        for branch in group.branches:
            print(f"  branch from {sanitize(branch.first_node)}{'  <- head' if branch.on_head else ''}")
            for side in branch.records:
                print(f"    ^{sanitize(side.memory_id)} ({sanitize(side.topic_path)}) via "
                      f"{sanitize(side.node_id)}: {_short(side.content)}")
    print(f"{len(pairs)} pair(s) of alternatives")
    return 0
