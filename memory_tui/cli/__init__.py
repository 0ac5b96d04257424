"""Command-line entry point. Each verb group lives in its own module with ``register()``.

Verbs print text for people, or a stable JSON shape with ``--json`` (documented in the
README). Every failure is a one-line message and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from types import ModuleType
from typing import Callable, Sequence

from memory_tui import __version__
from memory_tui.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_RETRYABLE,
    EXIT_USAGE,
    CliError,
    add_common,
    emit_json,
)
from memory_tui.core.format.errors import MemoryError, os_failure
from memory_tui.core.format.text import SanitizingStream, sanitize
from memory_tui.core import switches

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_RETRYABLE", "EXIT_USAGE", "CliError", "add_common", "build_parser", "emit_json", "main"]

# Modules contributing verbs (in help order); each exposes ``register(subparsers)`` and sets
# ``func`` on its parsers (``register_root``: options of the default, no-verb action).
VERB_MODULE_NAMES = ("read", "topics", "edit", "jobs", "records", "actions", "insights", "app")
ROOT_MODULE_NAME = "app"  # the one with ``register_root``: its options are always on the root

# Which module registers each verb, so a command line naming one imports just that module:
# importing every verb module (rich, the pipeline, the demo, ...) costs a fresh ``edit``
# more than a tenth of a second. ``test_cli_lazy`` checks this table against the modules.
VERB_MODULE = {
    "status": "read", "why": "read",
    "topics": "topics", "show": "topics",
    "edit": "edit", "apply": "edit", "views": "edit",
    "write": "jobs", "reorganize": "jobs", "backfill": "jobs", "migrate": "jobs",
    "record": "records",
    "jobs": "actions", "preview": "actions",
    "evidence": "insights", "history": "insights", "revert": "insights", "alternatives": "insights",
    "demo": "app",
}
# verbs that load the workspace, do one thing and exit run without the cyclic
# garbage collector. A fresh ``edit``/``apply`` unpickles millions of objects from the
# persistent caches; with the collector on, every generation pass walks them again (a third
# of a fresh ``apply``: benchmarks/README.md) while they can never be garbage before the process ends.
# Reference counting still frees everything acyclic; the app, the demo and the writer jobs
# (long-lived, or many LLM rounds) keep the collector.
ONE_SHOT_VERBS = frozenset(("status", "why", "topics", "show", "edit", "apply", "views", "record",
                            "evidence", "history", "revert", "alternatives"))
# Root-level tokens the verb finder understands; anything else takes the full parser, so
# argparse's own handling (abbreviations, errors, help) is never second-guessed.
_ROOT_FLAGS = frozenset(("--json", "--no-watch", "--ascii"))


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"memory_tui.cli.{name}")


def _named_verb(argv: Sequence[str]) -> str | None:
    """The verb ``argv`` names, when it is plain enough to know without the full parser."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--state":
            i += 2
            continue
        if tok.startswith("--state=") or tok in _ROOT_FLAGS:
            i += 1
            continue
        return tok if tok in VERB_MODULE else None
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command-line parser. With ``argv`` naming a verb, only that verb's module is
    imported and registered (its sub-parser, and so its parsing, is the same either way);
    otherwise every verb is (top-level help, errors, the default action)."""
    parser = argparse.ArgumentParser(
        prog="memory-tui",
        description="See, explain and safely edit an OpenProgram agent's memory.",
    )
    parser.add_argument("--version", action="version", version=f"memory-tui {__version__}")
    parser.add_argument("--state", metavar="DIR", default=None, help="OpenProgram state directory")
    parser.add_argument("--json", action="store_true", default=False, help="print JSON")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    verb = _named_verb(argv) if argv is not None else None
    names = (VERB_MODULE[verb],) if verb is not None else VERB_MODULE_NAMES
    for name in names:
        _module(name).register(sub)
    # options of the default (no-verb) action, on the root parser whatever the verb
    _module(ROOT_MODULE_NAME).register_root(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    program = argv is None  # the process's own entry point (console script, ``-m``)
    argv = sys.argv[1:] if argv is None else argv
    if _named_verb(argv) in ONE_SHOT_VERBS and gc.isenabled():
        gc.disable()
        try:
            return _main(argv)
        finally:  # main() also runs inside other processes (tests, the app's jobs)
            if program:
                # interpreter shutdown runs one last full collection whatever
                # gc.disable() said, walking every object the caches unpickled (a fifth of
                # a fresh ``apply``) just before the process frees them all
                # anyway. Frozen objects are skipped by it; atexit handlers, flushing and
                # the exit code are untouched (unlike os._exit).
                gc.freeze()
            gc.enable()
    return _main(argv)


def _main(argv: list[str]) -> int:
    try:
        # the test switches, read once for the process: a bad value stops before any work
        switches.current()
    except switches.SwitchError as exc:
        print(f"memory-tui: {sanitize(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        default = getattr(parser, "_memory_tui_default", None)
        if default is None:
            parser.print_help()
            return EXIT_USAGE
        func = default
    if func is not getattr(parser, "_memory_tui_default", None) and getattr(args, "verb", None) != "demo":
        # Text output of every verb goes through the one sanitiser (the app draws its own
        # screen); --json output is escaped by emit_json instead. stderr stays unwrapped: its
        # messages are sanitised where written, and the progress spinner needs its escapes.
        if not getattr(args, "json", False):
            saved = sys.stdout
            sys.stdout = SanitizingStream(sys.stdout)
            try:
                return _run(func, args)
            finally:
                sys.stdout = saved
    return _run(func, args)


CLI_KEPT = "stopped there; an install is all-or-nothing, so memory is at its old or its new revision"


def _run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return int(func(args) or 0)
    except CliError as exc:
        print(f"memory-tui: {sanitize(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except MemoryError as exc:
        if getattr(args, "json", False):
            emit_json(exc.to_json())
        else:
            print(f"memory-tui: {sanitize(str(exc))}", file=sys.stderr)
        return EXIT_RETRYABLE if exc.retryable else EXIT_FAILURE
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            return EXIT_OK
        if os.environ.get("MEMORY_TUI_DEBUG"):
            raise
        # what the file system refused, coded like every other failure (and as JSON under --json);
        # every install is all-or-nothing, so memory holds its old or its new revision
        err = os_failure(exc, kept=CLI_KEPT)
        if getattr(args, "json", False):
            emit_json(err.to_json())
        else:
            print(f"memory-tui: {sanitize(str(err))}", file=sys.stderr)
        return EXIT_RETRYABLE if err.code == "TOO_MANY_OPEN_FILES" else EXIT_FAILURE
    except KeyboardInterrupt:
        print("memory-tui: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        if os.environ.get("MEMORY_TUI_DEBUG"):
            raise
        where = f" ({exc.filename})" if isinstance(exc, OSError) and exc.filename else ""
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"memory-tui: internal error: {type(exc).__name__}{sanitize(where)}: {sanitize(detail)} "
              "(set MEMORY_TUI_DEBUG=1 for the traceback)", file=sys.stderr)
        return EXIT_FAILURE
