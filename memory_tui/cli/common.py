"""What every verb module shares: exit codes, the one-line error, common options, JSON out.

Its own module so that ``memory_tui.cli`` can import the verb modules at the top and the
verb modules need not import the package that imports them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from memory_tui.core.format.paths import discover_state_dir
from memory_tui.core.format.text import json_safe

if TYPE_CHECKING:  # the pipeline is imported only by the verbs that run a job
    from memory_tui.pipeline.context import Context, JobEvent

EXIT_OK = 0
EXIT_FAILURE = 1  # non-retryable failure or rejection
EXIT_USAGE = 2
EXIT_RETRYABLE = 3  # e.g. CONCURRENT_UPDATE: try again later


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = code


def add_common(parser: argparse.ArgumentParser) -> None:
    """Options every verb accepts (also accepted before the verb)."""
    parser.add_argument("--state", metavar="DIR", default=argparse.SUPPRESS, help="OpenProgram state directory")
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")


def add_verb(subparsers: argparse._SubParsersAction, name: str, help: str,
             func: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """A verb's parser with the common options, running ``func``."""
    p = subparsers.add_parser(name, help=help)
    add_common(p)
    p.set_defaults(func=func)
    return p


def add_writer_options(parser: argparse.ArgumentParser) -> None:
    """``--writer`` / ``--topic``: the ``[writer]`` settings a job verb may override."""
    from memory_tui.pipeline.settings import WRITER_NAMES

    parser.add_argument("--writer", choices=WRITER_NAMES, default=None, help="override [writer] name")
    parser.add_argument("--topic", default=None, help="extractive writer: put records in this topics/…md file")


def state_dir(args: argparse.Namespace) -> Path:
    """``--state`` (or the discovered state directory), which must be a directory."""
    state = discover_state_dir(getattr(args, "state", None))
    if not state.is_dir():
        raise CliError(f"state directory not found: {state}")
    return state


def job_context(args: argparse.Namespace, *, progress: "Callable[[JobEvent], None] | None" = None,
                cancelled: Callable[[], bool] | None = None) -> "Context":
    """The ``Context`` a job runs in: the state directory, the settings file the app uses
    (a bad one fails naming file, key and line) with ``add_writer_options``' overrides."""
    from memory_tui.pipeline.context import Context
    from memory_tui.pipeline.settings import load_settings

    state = state_dir(args)
    settings = load_settings()
    overrides: dict[str, Any] = {}
    if getattr(args, "writer", None):
        overrides["name"] = args.writer
    if getattr(args, "topic", None):
        overrides["topic"] = args.topic
    if overrides:
        settings = settings.with_overrides(**overrides)
    options: dict[str, Any] = {} if cancelled is None else {"cancelled": cancelled}
    return Context(state, settings=settings, progress=progress, **options)


def emit_json(data: Any) -> None:
    # Content from disk is untrusted: DEL, C1, bidi and line separators leave as \u escapes.
    sys.stdout.write(json_safe(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)) + "\n")
