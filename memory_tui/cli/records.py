"""``record move|update|delete``: one record change, one transaction (``core.recordops``).

The app's record actions call the same functions, so a script and the app give the same
bytes. Each verb compares-and-sets on the revision it read (or ``--base-revision R``, the
revision you looked at): a change made in between is refused with ``CONCURRENT_UPDATE``
(exit 3) rather than applied to a record that is no longer what you saw.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memory_tui.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_RETRYABLE, EXIT_USAGE, CliError, add_common, emit_json
from memory_tui.core.format.errors import RETRYABLE_TRANSACTION_CODES
from memory_tui.core.format.paths import discover_state_dir
from memory_tui.core.format.text import sanitize


def _state(args: argparse.Namespace):
    state = discover_state_dir(getattr(args, "state", None))
    if not state.is_dir():
        raise CliError(f"state directory not found: {state}")
    return state


def _tx_kw(args: argparse.Namespace) -> dict[str, Any]:
    return {"git_commit": args.git_commit, "validate_only": args.check}


def _report(args: argparse.Namespace, out: Any, text: str | None = None) -> int:
    result = out.result
    if getattr(args, "json", False):
        emit_json(out.to_json())
    elif result.ok:
        verb = {"move": "moved", "update": "updated", "delete": "deleted"}[out.action]
        if result.validate_only:
            print(f"valid: {out.action} {sanitize(out.memory_id)}")
        else:
            print(f"{verb} {sanitize(out.memory_id)}; revision {result.revision}")
        loc = out.location
        if loc is not None:
            chain = " › ".join(sanitize(h) for h in loc.headings) or "(preamble)"
            print(f"  now at {sanitize(loc.path)}:{loc.line} under {chain}")
            print(f"  block ids: {', '.join(loc.block_ids)}; evidence ids: {', '.join(loc.evidence_ids) or 'none'}")
        for key, value in result.block_ids.items():
            print(f"  new block id {value} ({sanitize(key)})")
        for key, value in result.evidence_ids.items():
            # the key is the request's own label for a definition (new-evidence-record-1), not
            # an id the owner ever saw: say whether the record's evidence id changed
            before = getattr(out, "evidence_before", ())
            if value in before:
                print(f"  evidence id {value} (unchanged)")
            elif before:
                print(f"  new evidence id {value} (was {', '.join(before)})")
            else:
                print(f"  new evidence id {value}")
        for path in result.changed_files:
            print(f"  changed {sanitize(path)}")
        if result.git_committed:
            print(f"  git: committed {(result.git_commit or '')[:12]}")
        elif result.git_error:
            print(f"  git: not committed: {sanitize(result.git_error)}")
    else:
        where = f"{result.path}: " if result.path else ""
        from memory_tui.core.tx.refusals import explain_refusal

        print(f"rejected: {sanitize(where)}{result.code}: {sanitize(result.message)}", file=sys.stderr)
        for link in out.linked_by:
            print(f"  linked from {sanitize(link.memory_id)} at {sanitize(link.path)}:{link.line}: {sanitize(link.content)}",
                  file=sys.stderr)
        refusal = explain_refusal(result.code, result.message, action=out.action, target=out.memory_id, text=text,
                                  linked_by=out.linked_by)
        for line in refusal.lines():
            print(f"  {sanitize(line)}", file=sys.stderr)
    if result.ok:
        return EXIT_OK
    return EXIT_RETRYABLE if result.code in RETRYABLE_TRANSACTION_CODES else EXIT_FAILURE


def _cmd_move(args: argparse.Namespace) -> int:
    from memory_tui.core.tx.recordops import move_record

    positions = [p for p in ("start", "end") if getattr(args, p)]
    if args.before:
        positions.append("before")
    if args.after:
        positions.append("after")
    if len(positions) > 1:
        raise CliError("give at most one of --start, --end, --before ID, --after ID", EXIT_USAGE)
    position = positions[0] if positions else "end"
    anchor = args.before or args.after
    out = move_record(_state(args), args.id, topic=args.to, headings=args.heading, position=position, anchor=anchor,
                      base_revision=args.base_revision, **_tx_kw(args))
    return _report(args, out)


def _cmd_update(args: argparse.Namespace) -> int:
    from memory_tui.core.tx.recordops import update_record_text

    if (args.text is None) == (args.source is None):
        raise CliError("give exactly one of --text TEXT or --from FILE|-", EXIT_USAGE)
    if args.source is not None:
        from pathlib import Path

        if args.source == "-":
            text = sys.stdin.read()
        else:
            try:
                text = Path(args.source).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CliError(f"cannot read {args.source}: {exc}", EXIT_USAGE) from None
    else:
        text = args.text
    out = update_record_text(_state(args), args.id, text, base_revision=args.base_revision, **_tx_kw(args))
    return _report(args, out, text)


def _cmd_delete(args: argparse.Namespace) -> int:
    from memory_tui.core.tx.recordops import delete_record

    return _report(args, delete_record(_state(args), args.id, base_revision=args.base_revision, **_tx_kw(args)))


def _common(p: argparse.ArgumentParser) -> None:
    from memory_tui.core.tx.context import GIT_MODES

    add_common(p)
    p.add_argument("id", help="the record's block id")
    p.add_argument("--base-revision", metavar="R", default=None,
                   help="refuse (CONCURRENT_UPDATE, exit 3) unless the workspace is still at revision R")
    p.add_argument("--check", action="store_true", help="validate only; install nothing")
    p.add_argument("--git-commit", choices=GIT_MODES, default="auto")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="move, update or delete one record (one transaction each)")
    rsub = p.add_subparsers(dest="record_verb", metavar="ACTION", required=True)

    m = rsub.add_parser("move", help="move a record within its heading, to another heading or another topic")
    _common(m)
    m.add_argument("--to", required=True, metavar="TOPIC", help="destination topic, e.g. people/ada.md")
    m.add_argument("--heading", action="append", default=None, metavar="H",
                   help="destination heading chain, outermost first (repeat); default: the anchor's or the record's own")
    m.add_argument("--start", action="store_true", help="first in the section")
    m.add_argument("--end", action="store_true", help="last in the section (default)")
    m.add_argument("--before", metavar="ID", default=None, help="just before record ID")
    m.add_argument("--after", metavar="ID", default=None, help="just after record ID")
    m.set_defaults(func=_cmd_move)

    u = rsub.add_parser("update", help="replace a record's text, keeping its sources")
    _common(u)
    u.add_argument("--text", default=None, help="the new text (one paragraph)")
    u.add_argument("--from", dest="source", metavar="FILE|-", default=None, help="the new text from a file or stdin")
    u.set_defaults(func=_cmd_update)

    d = rsub.add_parser("delete", help="delete a record (refused while other records link to it)")
    _common(d)
    d.set_defaults(func=_cmd_delete)
