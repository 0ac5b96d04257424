"""The default action (no verb) opens the app; ``demo`` builds a demo state dir and opens it."""

from __future__ import annotations

import argparse
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

from memory_tui.cli.common import CliError
from memory_tui.core.format.paths import discover_state_dir


def _add_app_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-watch", action="store_true", default=False, help="do not watch files for changes")
    parser.add_argument("--ascii", action="store_true", default=False, help="ASCII glyphs only")


def _demo():
    # the demo builder pulls in the pipeline; every command line registers this module's
    # root options, so it is imported only when a demo is built
    from memory_tui import demo

    return demo


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


def _need_terminal() -> None:
    # Without a terminal Textual would wait on a pipe or draw into a file; say so at once.
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CliError(
            "the app needs a terminal (stdin and stdout are not one); "
            "run it in a terminal, or use a verb such as `memory-tui status`",
        )


def _open(state_dir: Path, args: argparse.Namespace) -> int:
    _need_terminal()
    # Imported here, not at the top: every other verb starts without loading Textual.
    from memory_tui.tui.app import create_app

    app = create_app(state_dir, watch=not getattr(args, "no_watch", False), ascii=getattr(args, "ascii", False))
    app.run()
    # Textual prints the traceback of an exception no handler caught and returns from run()
    # as a quit would; its return code (1 then) is the only trace of the crash a shell sees.
    return app.return_code or 0


def app_settings_problems() -> tuple:
    """The settings file's problems as the app finds them: its loader knows the binding ids a
    ``[keymap]`` entry may name, so an unknown id is reported as the app reports it."""
    from memory_tui.tui.app import load_app_settings

    return load_app_settings().problems


def run_app(args: argparse.Namespace) -> int:
    state_dir = discover_state_dir(getattr(args, "state", None))
    return _open(state_dir, args)


def run_demo(args: argparse.Namespace) -> int:
    if not args.no_open:
        _need_terminal()
    if args.path:
        target = Path(args.path).expanduser()
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            raise CliError(f"demo --path {target}: the folder is not empty; give a new or empty folder")
        state_dir = _demo().build_demo(target, clock=lambda: datetime.now(timezone.utc))
        return _print_or_open(Path(state_dir), args)
    import tempfile  # every command line imports this module (root options); only the demo needs tempfile

    target = Path(tempfile.mkdtemp(prefix="memory-tui-demo-"))
    keep = bool(args.no_open)  # the printed folder is what the user asked for
    try:
        state_dir = _demo().build_demo(target, clock=lambda: datetime.now(timezone.utc))
        return _print_or_open(Path(state_dir), args)
    finally:
        if not keep:
            shutil.rmtree(target, ignore_errors=True)


def _print_or_open(state_dir: Path, args: argparse.Namespace) -> int:
    if args.no_open:
        print(state_dir)
        return 0
    return _open(state_dir, args)
