"""Setting the test switches (``memory_tui.core.switches``) from a test."""

from __future__ import annotations

from memory_tui.core import switches


def set_derive(monkeypatch, mode: str | None) -> None:
    """``MEMORY_TUI_TEST_DERIVE=mode`` (``None``: unset, the default) for the rest of the test, in
    this process (the switches are read again) and in the processes it starts. ``monkeypatch``
    puts the environment back; ``conftest``'s autouse fixture then reads the switches again."""
    if mode is None:
        monkeypatch.delenv(switches.DERIVE_ENV, raising=False)
    else:
        monkeypatch.setenv(switches.DERIVE_ENV, mode)
    switches.reload()
