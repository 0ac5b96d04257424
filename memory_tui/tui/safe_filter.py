"""The app's last line of defence for text from disk: a line filter over everything it draws.

Views sanitise what they show (file names, titles, record text) through the one sanitiser
(``core.format.text.sanitize``), but a widget a view forgets, or a library's own rendering of
a value, would otherwise write a file name's ``ESC ] 0 ; … BEL`` or ``ESC [ 2 J`` straight to
the terminal. Every line of every widget passes this filter before the compositor writes it,
so no escape sequence or control character from content ever reaches the terminal. The
styles Textual emits are not text segments and are untouched. Removed visible characters
(an OSC's payload) become spaces, so the line keeps its width and the layout never shifts.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from memory_tui.core.format.text import sanitize


def safe_segment_text(text: str) -> str:
    """``text`` as the terminal may see it: sanitised, padded to its former cell width."""
    if text.isprintable():  # the common case, one C-level pass: nothing a terminal acts on
        return text
    clean = sanitize(text).replace("\n", " ").replace("\t", " ")
    missing = cell_len(text) - cell_len(clean)
    return clean + " " * missing if missing > 0 else clean


class SanitizeFilter(LineFilter):
    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        out = segments
        for i, seg in enumerate(segments):
            if seg.control or seg.text.isprintable():
                continue
            clean = safe_segment_text(seg.text)
            if clean != seg.text:
                if out is segments:
                    out = list(segments)
                out[i] = Segment(clean, seg.style, seg.control)
        return out
