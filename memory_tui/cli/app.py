"""The default action (no verb) opens the app; ``demo`` builds a demo state dir and opens it."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path

from memory_tui.core.paths import discover_state_dir


def _add_app_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-watch", action="store_true", default=False, help="do not watch files for changes")
    parser.add_argument("--ascii", action="store_true", default=False, help="ASCII glyphs only")


def register_root(root: argparse.ArgumentParser) -> None:
    """Options of the default action live on the root parser (``memory-tui --ascii``)."""
    _add_app_options(root)
    root._memory_tui_default = run_app  # type: ignore[attr-defined]


def register(subparsers: argparse._SubParsersAction) -> None:
    demo = subparsers.add_parser("demo", help="build a demo state directory and open it")
    demo.add_argument("--path", metavar="DIR", default=None, help="where to build it (default: a temp dir)")
    demo.add_argument("--no-open", action="store_true", help="build only; print the state dir")
    demo.add_argument("--state", metavar="DIR", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    demo.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    _add_app_options(demo)
    demo.set_defaults(func=run_demo)


def _open(state_dir: Path, args: argparse.Namespace) -> int:
    import sys

    from memory_tui.cli import CliError

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Without a terminal the app's input loop would spin a core forever.
        raise CliError("the app needs a terminal (stdin and stdout a TTY); use a verb such as `memory-tui status`")
    from memory_tui.tui.app import create_app

    app = create_app(state_dir, watch=not getattr(args, "no_watch", False), ascii=getattr(args, "ascii", False))
    app.run()
    return 0


def run_app(args: argparse.Namespace) -> int:
    state_dir = discover_state_dir(getattr(args, "state", None))
    return _open(state_dir, args)


def run_demo(args: argparse.Namespace) -> int:
    from memory_tui.cli import CliError

    try:
        from memory_tui import demo as demo_mod  # written by the demo owner
    except ModuleNotFoundError as exc:
        if exc.name != "memory_tui.demo":
            raise
        raise CliError(
            "the demo builder (memory_tui.demo) is not part of this build yet; "
            "open a real state dir with `memory-tui --state DIR`"
        ) from None
    import tempfile

    target = Path(args.path).expanduser() if args.path else Path(tempfile.mkdtemp(prefix="memory-tui-demo-"))
    state_dir = demo_mod.build_demo(target, clock=lambda: datetime.now(timezone.utc))
    if args.no_open:
        print(state_dir)
        return 0
    return _open(Path(state_dir), args)
