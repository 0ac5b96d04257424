"""Steps the layers above core add to every locked open.

Finishing a killed job's marks intent or a killed migration needs the session model, which
core may not import; those layers register a step here (the package root wires the engine's
own step, so every entry point, CLI, app or library, runs it). ``install.recover`` calls each
step with the memory root under the write lock, after an interrupted install is finished and
before its git step. Kept free of imports so wiring it costs nothing at start-up.
"""

from __future__ import annotations

from typing import Any, Callable

_STEPS: list[Callable[[Any], None]] = []


def register(step: Callable[[Any], None]) -> None:
    if step not in _STEPS:
        _STEPS.append(step)


def steps() -> tuple[Callable[[Any], None], ...]:
    return tuple(_STEPS)
