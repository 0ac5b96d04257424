"""The test switches, read once from the environment into one frozen object.

Every shortcut of the transaction (a tree reassembled from the last one, views derived from
the topics that changed, a sparse stage, the file-system monitor, the remembered revision
and no-op verdicts, ...) has a full side that derives the same fact from scratch, as the code
did before the shortcut existed. ``MEMORY_TUI_TEST_DERIVE`` chooses which side runs:

* ``incremental`` (the default): the shortcuts;
* ``full``: the full side everywhere (whole-tree stages, no monitor, no cache kept);
* ``check``: both, compared; a difference raises ``IncrementalMismatch`` (a bug in the
  shortcut). The random edit-sequence tests run in this mode.

Like git's ``GIT_TEST_*`` variables these are for the test suite and for checking a bug
report, never a setting a user needs; their names say so and they are kept apart from the
user's settings (``MEMORY_TUI_CONFIG``, ``MEMORY_TUI_CACHE_DIR``, ``MEMORY_TUI_DEBUG``) and
from the names of the writer protocol (``MEMORY_TUI_STAGE``, ``MEMORY_TUI_STAGE_KIND``,
``MEMORY_TUI_ALLOWED_REFS``, which a writer command is given and memory-tui itself never
reads).

The environment is read once, the first time a process asks (in practice when it opens its
first workspace or transaction); a transaction's stage keeps the object it was opened with
and hands it to what it calls. ``reload`` reads the environment again, for a test that
changes it.

This module is the lowest floor of ``core``: it imports nothing of memory-tui.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Callable, Mapping, TypeVar

T = TypeVar("T")

DERIVE_ENV = "MEMORY_TUI_TEST_DERIVE"
DERIVE_MODES = ("incremental", "full", "check")
CRASH_ENV = "MEMORY_TUI_TEST_CRASH_AT"  # os._exit at the N-th crash point of the process

# Names older versions read for what DERIVE_ENV now says alone. One left set in a shell or a
# CI script would otherwise be ignored without a word, and a run meant to check would not.
RETIRED = {
    "MEMORY_TUI_TX": DERIVE_ENV,
    "MEMORY_TUI_VIEWS": DERIVE_ENV,
    "MEMORY_TUI_FSMONITOR": DERIVE_ENV,
    "MEMORY_TUI_TEST_STAGE": DERIVE_ENV,
    "MEMORY_TUI_CRASH_AT": CRASH_ENV,
}


class SwitchError(ValueError):
    """A test switch holds a value it cannot have; the message names the variable and the values
    it takes."""


class IncrementalMismatch(AssertionError):
    """``check`` mode: a shortcut's answer differs from the full derivation's (a bug)."""


@dataclass(frozen=True)
class Switches:
    derive: str = "incremental"  # one of DERIVE_MODES
    crash_at: int | None = None  # the crash point (counted from 1) at which the process dies

    def __post_init__(self) -> None:
        if self.derive not in DERIVE_MODES:
            raise SwitchError(f"{DERIVE_ENV} must be one of {', '.join(DERIVE_MODES)}, not {self.derive!r}")

    @property
    def full(self) -> bool:
        """Every fact from scratch, nothing kept for a next transaction."""
        return self.derive == "full"

    @property
    def check(self) -> bool:
        return self.derive == "check"

    @property
    def sparse_stage(self) -> bool:
        """A stage holds only what its transaction writes (else a whole copy of topics/ and
        timeline/, planned and installed by comparing whole trees)."""
        return self.derive != "full"

    @property
    def monitor(self) -> bool:
        """The file-system monitor may stand in for a walk (``check`` walks as well)."""
        return self.derive != "full"

    def choose(self, what: str, incremental: Callable[[], T], full: Callable[[], T],
               same: Callable[[T, T], bool] | None = None) -> T:
        """``incremental()`` or ``full()`` by the mode; in ``check`` both, compared by
        ``same(a, b)`` (default ``==``), and the full answer returned."""
        if self.derive == "full":
            return full()
        if self.derive == "incremental":
            return incremental()
        a, b = incremental(), full()
        if not (same(a, b) if same is not None else a == b):
            raise IncrementalMismatch(f"incremental {what} differs from the full derivation:\n{a!r}\n!=\n{b!r}"[:4000])
        return b


def from_environ(environ: Mapping[str, str]) -> Switches:
    """The switches ``environ`` sets; a clear ``SwitchError`` for a value they cannot take or a
    retired name."""
    for old, new in RETIRED.items():
        if environ.get(old):
            raise SwitchError(f"{old} is no longer read: set {new} instead"
                              + (f" ({', '.join(DERIVE_MODES)})" if new == DERIVE_ENV else " (a crash point, 1 or more)"))
    derive = (environ.get(DERIVE_ENV) or "incremental").strip().lower()
    if derive not in DERIVE_MODES:
        raise SwitchError(f"{DERIVE_ENV} must be one of {', '.join(DERIVE_MODES)}, not {environ.get(DERIVE_ENV)!r}")
    crash_at = None
    spec = (environ.get(CRASH_ENV) or "").strip()
    if spec:
        try:
            crash_at = int(spec)
        except ValueError:
            crash_at = 0
        if crash_at < 1:
            raise SwitchError(f"{CRASH_ENV} must be a crash point, a whole number from 1, not {spec!r}")
    return Switches(derive, crash_at)


_CURRENT: list[Switches] = []  # this process's, once read
_LOCK = threading.Lock()


def current() -> Switches:
    """This process's switches, read from the environment the first time they are asked for."""
    if not _CURRENT:
        reload()
    return _CURRENT[0]


def reload(environ: Mapping[str, str] | None = None) -> Switches:
    """Read the switches again (from ``environ``, else the process environment): for a test that
    changes them; a transaction already open keeps the ones it was opened with."""
    switches = from_environ(os.environ if environ is None else environ)
    with _LOCK:
        _CURRENT[:] = [switches]
    return switches


__all__ = ["CRASH_ENV", "DERIVE_ENV", "DERIVE_MODES", "IncrementalMismatch", "RETIRED", "SwitchError", "Switches",
           "current", "from_environ", "reload"]
