"""Hand a text to ``$EDITOR`` with the terminal, and take it back.

Used by the record views' ``E`` (a topic file) and the editor screen's ``E`` (its buffer).
The terminal goes over through ``App.suspend()``; a headless test sets ``app.editor_suspend``
(its driver cannot suspend) while the editor process itself still runs for real.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from textual.app import SuspendNotSupported

from ..model import records as ra


def editor_suspend(app: Any) -> AbstractContextManager[None]:
    """What hands the terminal to ``$EDITOR``: ``App.suspend``. A test without a terminal
    sets ``app.editor_suspend`` (headless drivers cannot suspend)."""
    hook = getattr(app, "editor_suspend", None)
    return hook() if hook is not None else app.suspend()


def hand_to_editor(app: Any, text: str, what: str) -> str | None:
    """``text`` through ``$EDITOR`` with the terminal handed over; ``None`` (and the reason
    told) when there is no editor, it fails, or this terminal cannot hand over."""
    try:
        ra.editor_command()
    except ra.EditorUnavailable as exc:
        app.notify(str(exc), severity="error", timeout=15)
        return None
    edited: str | None = None
    failure: ra.EditorUnavailable | None = None
    unexpected: Exception | None = None
    try:
        with editor_suspend(app):
            # Nothing may raise in here: App.suspend resumes the terminal only on a clean exit.
            try:
                edited = ra.run_external_editor(text)
            except ra.EditorUnavailable as exc:
                failure = exc
            except Exception as exc:  # re-raised below, once the terminal is the app's again
                unexpected = exc
    except SuspendNotSupported:
        app.notify("This terminal cannot hand over to $EDITOR (suspend is not supported here).", severity="error")
        return None
    if unexpected is not None:
        raise unexpected
    if failure is not None:
        app.notify(f"{failure}; {what} is unchanged.", severity="error", timeout=15)
        return None
    return edited


async def edit_buffer_outside(screen: Any) -> None:
    """The editor screen's ``E``: its buffer through ``$EDITOR``; what comes back replaces the
    buffer (unsaved, validated as if typed). A failed editor leaves the buffer as it was."""
    editor = screen.editor
    edited = hand_to_editor(screen.app, editor.text, "the buffer")
    if edited is not None and edited != editor.text:
        editor.text = edited
