"""Regenerate screenshots/*.svg from ``create_app`` (the same factory the CLI and tests use).

Usage: python scripts/screenshots.py [--state DIR]

Without ``--state`` it builds the demo state dir (memory_tui.demo) in a temp folder, or, when
the demo is not available, unpacks ../shared/fixtures/openprogram-state.tgz.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")

from memory_tui.core.format.tokens import O200kCounter  # noqa: E402
from memory_tui.tui.app import create_app  # noqa: E402
from memory_tui.pipeline.settings import Settings  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "screenshots"
FROZEN = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)

SHOTS = {
    "topics": ((120, 40), ("down", "down", "enter", "down")),
    "core": ((120, 40), ("4",)),
    "core-sources": ((120, 40), ("4", "s")),
    "timeline": ((120, 40), ("2",)),
    "recent": ((120, 40), ("3",)),
    "topics-narrow": ((80, 24), ("down", "down", "enter")),
    "help": ((120, 40), ("question_mark",)),
}


def _state(tmp: Path, explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    try:
        from memory_tui.demo import build_demo

        return Path(build_demo(tmp / ".openprogram", clock=lambda: FROZEN))
    except ModuleNotFoundError:
        pass
    tgz = REPO.parent / "shared" / "fixtures" / "openprogram-state.tgz"
    with tarfile.open(tgz) as tar:
        tar.extractall(tmp, filter="tar")
    return tmp / ".openprogram"


async def _shoot(state: Path, name: str, size: tuple[int, int], keys: tuple[str, ...]) -> Path:
    app = create_app(
        state, clock=lambda: FROZEN, tokens=O200kCounter(), watch=False, home=state.parent, settings=Settings(),
        background=False,  # the whole model before the first frame: screenshots never show "loading"
    )
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        path = OUT / f"{name}.svg"
        app.save_screenshot(str(path.name), path=str(OUT))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", metavar="DIR", help="state dir to shoot (default: demo or fixture)")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memory-tui-shots-") as tmp:
        state = _state(Path(tmp), args.state)
        for name, (size, keys) in SHOTS.items():
            print(asyncio.run(_shoot(state, name, size, keys)).relative_to(REPO))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
