"""How often preparing a stage returns to a room it had left: the reading walk of ``prepare``.

    python benchmarks/walk_prepare.py STATE [--depth N] [--show]   # STATE: has memory/

Follows one one-record reword (as ``run.py``'s ``edit_reword_inproc``: the middle topic file,
``git_commit="off"``) through ``core.tx.prepare.prepare`` and records, call by call, which
module of ``memory_tui`` the value is in. A room is a module file. Calls deeper than
``--depth`` (default 1: what ``prepare`` itself calls) are folded into the call at that
depth, as a reader who does not open them; code outside ``memory_tui`` (the standard library,
generated dataclass methods) is transparent. The walk is the sequence of rooms entered, with
a step back to the caller counted like any other step; a *return* is an entry into a room the
walk had been in and left. The edit is undone afterwards. Prints the count, and with
``--show`` the walk.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import memory_tui
from memory_tui.core.tx import api as tx
from memory_tui.core.tx import prepare as prepare_room

PACKAGE = str(Path(memory_tui.__file__).resolve().parent) + "/"


def walk_of(call, depth: int) -> list[str]:
    """The rooms ``call()`` walks through, to ``depth`` calls below its own room."""
    rooms: list[str] = []
    stack: list[str | None] = []  # per Python frame: its room, None for a frame outside memory_tui

    def room_at() -> str | None:
        level = 0
        for room in stack:
            if room is not None:
                level += 1
                if level == depth + 1:
                    return room
        return next((room for room in reversed(stack) if room is not None), None)

    def step() -> None:
        room = room_at()
        if room is not None and (not rooms or rooms[-1] != room):
            rooms.append(room)

    def profile(frame, event, _arg) -> None:
        if event == "call":
            file = frame.f_code.co_filename
            stack.append(file[len(PACKAGE):] if file.startswith(PACKAGE) else None)
            step()
        elif event == "return" and stack:
            stack.pop()
            step()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return rooms


def returns(rooms: list[str]) -> int:
    """Entries into a room the walk had already been in and left."""
    seen: set[str] = set()
    count = 0
    for room in rooms:
        if room in seen:
            count += 1
        seen.add(room)
    return count


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("state", type=Path)
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--show", action="store_true")
    args = ap.parse_args()
    memory = args.state / "memory"
    files = sorted(p.relative_to(memory).as_posix() for p in (memory / "topics").rglob("*.md"))
    rel = next((f for f in files[len(files) // 2:] if "(fact " in (memory / f).read_text()), files[len(files) // 2])
    base = (memory / rel).read_text()
    other = base.replace("(fact ", "(Fact ", 1) if "(fact " in base else base.rstrip("\n") + "\n"
    assert tx.staged_edit(args.state, rel, base, git_commit="off").ok  # caches warm, as in the app
    walks: list[list[str]] = []
    real = prepare_room.prepare

    def traced(stage, ctx):
        out = []
        walks.append(walk_of(lambda: out.append(real(stage, ctx)), args.depth))
        return out[0]

    prepare_room.prepare = traced
    try:
        result = tx.staged_edit(args.state, rel, other, git_commit="off")
    finally:
        prepare_room.prepare = real
        tx.staged_edit(args.state, rel, base, git_commit="off")
    assert result.ok, (result.code, result.message)
    for rooms in walks:
        print(f"prepare, depth {args.depth}: {len(rooms)} steps, {returns(rooms)} returns to rooms it had left")
        if args.show:
            print("  " + " -> ".join(rooms))


if __name__ == "__main__":
    main()
