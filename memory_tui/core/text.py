"""Text hygiene for anything read from disk before it reaches a terminal."""

from __future__ import annotations

import re

# CSI/OSC/DCS/APC/PM/SOS sequences, lone ESC pairs, and C0/C1 controls except TAB/LF.
_ESCAPES = re.compile(
    r"""
    \x1b\[[0-?]*[ -/]*[@-~]            # CSI
  | \x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?   # OSC, DCS, SOS, PM, APC (BEL or ST terminated)
  | \x1b[@-Z\\-_]                      # two-byte ESC sequences
  | \x9b[0-?]*[ -/]*[@-~]              # 8-bit CSI
  | [\x9d\x90\x98\x9e\x9f][^\x07\x9c]*(?:\x07|\x9c)?   # 8-bit OSC/DCS/SOS/PM/APC
    """,
    re.VERBOSE,
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def sanitize(text: str) -> str:
    """Remove terminal escape sequences and control characters (keeps TAB and LF)."""
    if not text:
        return text
    text = _ESCAPES.sub("", text)
    return _CONTROLS.sub("", text.replace("\r\n", "\n"))


def header_part(value: str | None) -> str:
    """OpenProgram's normalisation of a speaker header part (memory spec §4.3)."""
    if not value:
        return ""
    value = " ".join(str(value).split())
    value = "".join(ch for ch in value if ch.isprintable())
    value = value.replace("[", "(").replace("]", ")").replace(":", "\uff1a")
    if len(value) > 64:
        value = value[:64] + "\u2026"
    return value
