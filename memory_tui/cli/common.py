"""What every verb module shares: exit codes, the one-line error, common options, JSON out.

Its own module so that ``memory_tui.cli`` can import the verb modules at the top and the
verb modules need not import the package that imports them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from memory_tui.core.text import json_safe

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


def emit_json(data: Any) -> None:
    # Content from disk is untrusted: DEL, C1, bidi and line separators leave as \u escapes.
    sys.stdout.write(json_safe(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False)) + "\n")
