"""ASCII mode's last line of defence: a line filter over everything the app draws.

The app's own glyphs already come from ``render.ASCII``; this catches what the libraries
draw themselves (Rich's ``…`` when text is cut, Textual's borders, the footer's ``▏``,
scrollbar blocks, the command palette's search icon) so no box drawing, block element, ``·``,
``…`` or emoji of the app's own reaches a terminal that asked for ASCII. Each replacement is as
many cells wide as what it replaces, so layout never shifts.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

_SPECIAL = {
    "…": "~", "·": "-", "•": "*", "→": ">", "←": "<", "↑": "^", "↓": "v", "▸": ">", "▶": ">",
    "◆": "*", "○": "o", "●": "*", "✓": "+", "✗": "x", "“": '"', "”": '"', "‘": "'", "’": "'",
    "–": "-", "—": "-", "\u00a0": " ",
    "\U0001f50e": "> ",  # Textual's command palette icon, two cells wide
}


def _ascii_for(ch: str) -> str:
    code = ord(ch)
    if 0x2500 <= code <= 0x257F:  # box drawing: lines become - |, corners and joints +
        if ch in "─━┄┅┈┉╌╍═╴╶╸╺":
            return "-"
        if ch in "│┃┆┇┊┋╎╏║╵╷╹╻":
            return "|"
        return "+"
    if 0x2580 <= code <= 0x259F:  # block elements (scrollbar thumbs, vkey borders)
        if ch in "▏▕▎▍▌▐":
            return "|"
        if ch in "▁▂▃▄▔▀":
            return "-"
        return "#"
    return _SPECIAL.get(ch, ch)


_TABLE = {code: _ascii_for(chr(code)) for code in [*range(0x2500, 0x25A0), *map(ord, _SPECIAL)]}


def to_ascii(text: str) -> str:
    return text.translate(_TABLE)


class AsciiFilter(LineFilter):
    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [
            Segment(to_ascii(seg.text), seg.style, seg.control) if not seg.control and not seg.text.isascii() else seg
            for seg in segments
        ]
