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
# Invisible characters that change how the rest of a line reads: bidi embeddings, overrides
# and isolates (Trojan-Source style reordering), marks, zero-width space / word joiner / BOM.
# ZWJ and ZWNJ stay: scripts and emoji need them, and they reorder nothing.
INVISIBLE = "\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff"
_INVISIBLE = re.compile(f"[{INVISIBLE}]")
_LINE_BREAKS = re.compile("[\u2028\u2029\u0085]")
# Every character any of the passes below acts on (an escape sequence starts with ESC or an
# 8-bit introducer, both controls; U+0085 is a C1 control): text holding none is returned as
# it is, after one scan instead of five (most record text, ~140 000 strings per app load).
_ANY = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{INVISIBLE}]")
# Characters json.dumps(ensure_ascii=False) leaves raw that a terminal would act on.
_JSON_RAW = re.compile(f"[\x7f-\x9f{INVISIBLE}\u2028\u2029]")


def sanitize(text: str) -> str:
    """The one sanitiser for text that reaches a terminal: removes terminal escape sequences
    (CSI, OSC incl. OSC 52 / OSC 8 / title changes, DCS, ...), C0/C1 controls except TAB and LF,
    bidi controls and zero-width characters; U+2028/U+2029 become line feeds."""
    if not text or _ANY.search(text) is None:
        return text
    text = _ESCAPES.sub("", text)
    text = _CONTROLS.sub("", text.replace("\r\n", "\n"))
    text = _LINE_BREAKS.sub("\n", text)
    return _INVISIBLE.sub("", text)


def json_safe(dumped: str) -> str:
    """Escape, inside already-dumped JSON, what ``ensure_ascii=False`` leaves raw: DEL, C1,
    bidi/zero-width controls and U+2028/2029 become ``\\uXXXX``. Only strings can hold them,
    so the JSON stays valid and decodes to the same value."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", dumped)


class SanitizingStream:
    """A text stream that passes everything written through :func:`sanitize`: CLI text output
    is then inert whatever a verb prints (file names, config values, topic text). ESC and the
    8-bit introducers are removed on their own, so a sequence split across writes is inert too."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(sanitize(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


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
