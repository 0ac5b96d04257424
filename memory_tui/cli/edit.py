"""Verbs that change memory, all through ``core.tx.api``: ``edit``, ``apply``, ``views``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from memory_tui.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_RETRYABLE, EXIT_USAGE, CliError, add_common, emit_json
from memory_tui.core.tx import api as tx
from memory_tui.core.tx.context import GIT_MODES
from memory_tui.core.tx.result import TxResult
from memory_tui.core.tx.roots import memory_root
from memory_tui.core.format.errors import RETRYABLE_TRANSACTION_CODES, MemoryError
from memory_tui.core.format.paths import check_writable, discover_state_dir
from memory_tui.core.format.text import sanitize
from memory_tui.core.store.txmode import one_shot


def _state(args: argparse.Namespace) -> Path:
    return discover_state_dir(getattr(args, "state", None))


CURRENT = "current"
# origin_id of sources supplied to `apply`: the owner sending a memory_changes request is what
# OpenProgram's web route does, and the origin is hashed into the source ids (§5.3 step 4), so
# the same request must archive the same ids here as there (checked by tests/interop).
APPLY_ORIGIN = "owner-rest/memory-changes"


def _topic_rel(topic: str) -> str:
    rel = topic  # a backslash is no separator: the path rule refuses it, never rewrites it
    if rel.startswith("/") or (len(rel) > 1 and rel[1] == ":"):
        return rel  # absolute: left as given, so the path rule refuses it (never topics/<abs>)
    if not rel.startswith(("topics/", "topics\\")):  # the latter is refused as given, not nested
        rel = "topics/" + rel
    if not rel.endswith(".md") and "." not in rel.rsplit("/", 1)[-1]:
        rel += ".md"
    return rel


def _exit_for(result: TxResult) -> int:
    if result.ok:
        return EXIT_OK
    return EXIT_RETRYABLE if result.code in RETRYABLE_TRANSACTION_CODES else EXIT_FAILURE


def _print_rejection(result: TxResult, action: str = "edit", target: str | None = None) -> None:
    """Every error of the refusal on its line with the rule it broke (as the app's editor
    shows them), then what was wrong and the fix (``core.tx.refusals``, as the app says it)."""
    from memory_tui.core.format.rules import rule_of
    from memory_tui.core.tx.refusals import explain_refusal

    seen = set()
    for problem in result.problems or (result.error().as_problem(),):
        line = sanitize(str(problem))
        if line not in seen:
            seen.add(line)
            print(f"rejected: {line}", file=sys.stderr)
            rule = rule_of(str(getattr(problem, "message", "") or ""))
            if rule:
                print(f"  rule: {sanitize(rule)}", file=sys.stderr)
    refusal = explain_refusal(result.code, result.message or "", action=action, target=target or result.path)
    print(f"  {sanitize(refusal.heading)}", file=sys.stderr)
    print(f"  fix: {sanitize(refusal.fix)}", file=sys.stderr)


def _print_success(result: TxResult) -> None:
    at = f" (revision {result.revision})" if result.revision else ""
    if result.validate_only:
        # a check installs nothing: say what the change would do, never that it did it
        if not result.changed_files:
            print(f"valid: would change nothing{at}")
            return
        print(f"valid: would change {len(result.changed_files)} file(s){at.replace('(revision', '(at revision')}")
        for path in result.changed_files:
            print(f"  would change {sanitize(path)}")
        for note in result.dropped:
            print(f"note: {sanitize(str(note))}")
        return
    if not result.changed_files:
        print(f"no change{at}")
        return
    print(f"revision {result.revision}")
    for path in result.changed_files:
        print(f"  {sanitize(path)}")
    if result.git_committed:
        print(f"git: committed {result.git_commit[:12] if result.git_commit else ''}")
    elif result.git_error:
        print(f"git: not committed: {sanitize(result.git_error)}")
    for note in result.dropped:
        print(f"note: {sanitize(str(note))}")


def _read_source(spec: str) -> str:
    if spec == "-":
        return sys.stdin.read()
    try:
        return Path(spec).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {spec}: {exc}", EXIT_USAGE) from None


def _editor_loop(state: Path, rel: str, git_commit: str) -> TxResult:
    # only the interactive editor needs these; `edit --from` and `apply` start without them
    import shlex
    import subprocess
    import tempfile

    root = memory_root(state)
    current = root / rel
    text = current.read_text(encoding="utf-8") if current.is_file() else ""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    fd, tmp = tempfile.mkstemp(prefix="memory-edit-", suffix=".md")
    os.close(fd)
    try:
        Path(tmp).write_text(text, encoding="utf-8")
        while True:
            rc = subprocess.call([*shlex.split(editor), tmp])
            if rc != 0:
                raise CliError(f"editor exited with status {rc}; nothing saved")
            new = Path(tmp).read_text(encoding="utf-8")
            if new == text:
                # nothing to install: the revision is the one the text was read at
                from memory_tui.core.store.workspace import workspace_revision

                rev = workspace_revision(root) if root.is_dir() else None
                return TxResult(ok=True, message="no change", revision=rev)
            result = tx.staged_edit(state, rel, new, git_commit=git_commit)
            if result.ok:
                return result
            _print_rejection(result, "edit", rel)
            try:  # a closed or empty stdin declines
                print("re-open the editor? [Y/n] ", end="", file=sys.stderr, flush=True)
                answer = sys.stdin.readline()
            except (OSError, ValueError):
                answer = ""
            if not answer or answer.strip().lower() in ("n", "no"):
                return result
    finally:
        os.unlink(tmp)


def _missing_topic(state: Path, rel: str) -> bool:
    """No such topic in a readable workspace (anything stranger is left to the transaction,
    which names what is wrong, e.g. ``topics`` being a file)."""
    try:
        check_writable(rel)
    except MemoryError:
        return False  # not a topic path at all: the transaction's path rule names what is wrong
    root = memory_root(state)
    return (root / "topics").is_dir() and not os.path.lexists(root / rel)


def _cmd_edit(args: argparse.Namespace) -> int:
    state = _state(args)
    rel = _topic_rel(args.topic)
    as_json = getattr(args, "json", False)
    if args.delete and args.source is not None:
        raise CliError("--delete and --from are exclusive", EXIT_USAGE)
    if args.delete:
        with one_shot():
            result = tx.staged_edit(state, rel, None, git_commit=args.git_commit, validate_only=args.check)
    elif args.source is not None and not args.create and _missing_topic(state, rel):
        # OpenProgram's own CLI edit refuses a missing file: a mistyped path must not quietly
        # start a new topic. --create says it on purpose (the web PUT allows new files).
        result = TxResult(ok=False, code="MEMORY_NOT_FOUND", message=f"No memory file at '{rel}'.", path=rel,
                          validate_only=args.check)
    elif args.source is not None:
        text = _read_source(args.source)
        with one_shot():
            result = tx.staged_edit(state, rel, text, git_commit=args.git_commit, validate_only=args.check)
    else:
        if as_json:
            raise CliError("--json needs --from FILE|- or --delete", EXIT_USAGE)
        result = _editor_loop(state, rel, args.git_commit)
    if as_json:
        emit_json(result.edit_json())
    elif result.ok:
        if result.validate_only:
            print("valid")
        else:
            _print_success(result)
    else:
        _print_rejection(result, "delete-topic" if args.delete else "edit", rel)
    return _exit_for(result)


def _cmd_apply(args: argparse.Namespace) -> int:
    raw = _read_source(args.changes)
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CliError(f"{args.changes}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}", EXIT_USAGE) from None
    except RecursionError:
        raise CliError(f"{args.changes}:1:1: invalid JSON: nested too deeply", EXIT_USAGE) from None
    if isinstance(payload, list):
        payload = {"memory_changes": payload}
    if not isinstance(payload, dict):
        raise CliError(f"{args.changes}: expected a JSON object", EXIT_USAGE)
    if args.base_revision:
        payload["base_revision"] = args.base_revision
    known = ("base_revision", "memory_changes", "changes", "patch", "sources", "commit_message", "git_commit", "append_only")
    unknown = sorted(set(payload) - set(known))
    if unknown:
        result = TxResult(ok=False, code="INVALID_ARGUMENT", message=f"unknown request field: {unknown[0]}")
    else:
        state = _state(args)
        base = payload.get("base_revision")
        if base == CURRENT:  # explicit opt-out of compare-and-set, said out loud
            from memory_tui.core.store.workspace import workspace_revision

            base = workspace_revision(memory_root(state))
            print(f"memory-tui: applying to the current revision {base} (no compare-and-set: "
                  "changes made since you read the workspace are not detected)", file=sys.stderr)
        if base is None:
            result = TxResult(
                ok=False, code="INVALID_ARGUMENT",
                message="base_revision is required: pass --base-revision R (the revision you read, "
                        "e.g. from `memory-tui status --json`), or --base-revision current to apply "
                        "to whatever the workspace holds now",
            )
            return _report_apply(args, result)
        kwargs: dict[str, Any] = {k: payload[k] for k in known[1:] if k in payload}
        if payload.get("sources"):
            from memory_tui.core.tx.provenance import owner_provenance

            # sources are spoken by the local owner: the principal OpenProgram persisted
            try:
                kwargs["provenance"] = owner_provenance(state, APPLY_ORIGIN)
            except MemoryError as exc:
                return _report_apply(args, TxResult.failure(exc, validate_only=args.check))
        with one_shot():
            result = tx.update(state, base, validate_only=args.check, **kwargs)
    return _report_apply(args, result)


def _report_apply(args: argparse.Namespace, result: TxResult) -> int:
    if getattr(args, "json", False):
        emit_json(result.to_json())
    elif result.ok:
        _print_success(result)
    else:
        _print_rejection(result, "apply")
    return _exit_for(result)


def _cmd_views(args: argparse.Namespace) -> int:
    state = _state(args)
    as_json = getattr(args, "json", False)
    if args.rebuild:
        return _report_apply(args, tx.rebuild_views(state))
    from memory_tui.core.store.workspace import check_views

    root = memory_root(state)
    if not root.parent.is_dir():
        raise CliError(f"state directory not found: {state}")
    if not root.is_dir():
        raise CliError(f"no memory workspace at {root}")
    mismatches = check_views(root, state_dir=root.parent)
    if as_json:
        emit_json({"ok": not mismatches, "mismatches": [m.to_json() for m in mismatches]})
    elif mismatches:
        for m in mismatches:
            print(f"stale: {sanitize(str(m))}")
        print("run `memory-tui views --rebuild` to re-derive them")
    else:
        print("derived views are current")
    return EXIT_OK if not mismatches else EXIT_FAILURE


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("edit", help="edit, replace or delete one topic through the transaction")
    add_common(p)
    p.add_argument("topic", help="topic path, e.g. people/ada.md or topics/people/ada.md")
    p.add_argument("--from", dest="source", metavar="FILE|-", default=None, help="new text from a file or stdin")
    p.add_argument("--delete", action="store_true", help="delete the topic (never topics/core.md)")
    p.add_argument("--create", action="store_true", help="with --from: allow a topic that does not exist yet")
    p.add_argument("--check", action="store_true", help="validate only; install nothing")
    p.add_argument("--git-commit", choices=GIT_MODES, default="auto")
    p.set_defaults(func=_cmd_edit)

    p = subparsers.add_parser(
        "apply",
        help="apply an OpenProgram memory_changes / changes / patch request (needs --base-revision)",
        description="Apply a structured change (OpenProgram's memory_update request) through the one "
                    "transaction. A base revision is required, as in OpenProgram: read it with "
                    "`memory-tui status --json`; use --base-revision current to skip the check on purpose.",
    )
    add_common(p)
    p.add_argument("changes", metavar="CHANGES.json", help="request JSON (or a bare memory_changes list); - for stdin")
    p.add_argument(
        "--base-revision", metavar="R", default=None,
        help="compare-and-set token: the revision the change was prepared against (required here or "
             "as base_revision in the JSON); the change is refused with CONCURRENT_UPDATE (exit 3) if "
             "the workspace moved on. 'current' applies to whatever is there now, without that check",
    )
    p.add_argument("--check", action="store_true", help="validate only; install nothing")
    p.set_defaults(func=_cmd_apply)

    p = subparsers.add_parser("views", help="check or rebuild the derived views")
    add_common(p)
    group = p.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="compare derived files with a rebuild (default)")
    group.add_argument("--rebuild", action="store_true", help="re-derive and install what differs")
    p.set_defaults(func=_cmd_views)
