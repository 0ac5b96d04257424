"""A topic editor: a ``TextArea`` that shows every validation diagnostic on its line.

* Each line with a diagnostic gets a mark in the gutter (after the line number), its text
  from the diagnostic's column on styled as an error (``get_line`` is TextArea's hook for
  styling a line's spans), and its message after the text, in the blank on the right of the
  line's last row (cut to the room there). When that row is (nearly) full, the
  message goes on the blank line below, after ``↑``; with no blank line there, as much of
  its start as fits is drawn after the text. The diagnostics of the cursor's line are
  shown in the border subtitle too, and the screen highlights them in the diagnostics list,
  where the whole message wraps.
* ``f8`` / ``shift+f8`` go to the next / previous diagnostic. (``[`` and ``]`` are kept for
  typing — Markdown citations need them — so the bracket keys live on the diagnostics
  list and on the screen, which call ``next_diagnostic`` / ``previous_diagnostic``.)
* Validation is debounced: every edit bumps ``seq``; ``debounce`` seconds after the last
  edit the editor posts ``ValidateRequested(text, seq)``. Whoever validates (a worker)
  answers with ``apply_validation(seq, diagnostics)``; an answer for an older ``seq`` is
  dropped, so a slow stale result never paints over a newer buffer.

Markdown highlighting is used when tree-sitter's Markdown grammar is installed (textual's
``syntax`` extra); otherwise the text is plain. Line numbers are always on: the gutter
carries the marks.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Iterable

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.expand_tabs import expand_tabs_inline
from textual.geometry import Offset
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import TextArea

from memory_tui.core.format.text import sanitize

from ..model.editor import Diagnostic

DEBOUNCE_SECONDS = 0.3
ERROR_STYLE = Style(color="red", underline=True)
MARK_STYLE = Style(color="red", bold=True)
ANNOTATION_STYLE = Style(color="red", italic=True)
ANNOTATION_GAP = 2  # cells between a line's text and its message
MIN_ANNOTATION = 12  # less room than this after the text: the message goes on the blank line below
MIN_CUT = 6  # no blank line below either: the message's start when at least this much fits
BELOW_INDENT = 2  # a message on the blank line below starts this far into the text column
MARK = "●"
ASCII_MARK = "!"

# Shown in place of a control character the buffer holds, one cell for one character, so
# the buffer stays byte-exact (it is what gets saved) while nothing from disk reaches the
# terminal as a control sequence. C0 → its Control Pictures glyph (␛ for ESC), DEL → ␡,
# C1 and bidi overrides → U+FFFD.
_VISIBLE = {c: 0x2400 + c for c in range(0x20) if c != 0x09}
_VISIBLE[0x7F] = 0x2421
_VISIBLE.update({c: 0xFFFD for c in range(0x80, 0xA0)})
_VISIBLE.update({c: 0xFFFD for c in (0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069)})


def markdown_available() -> bool:
    """Is tree-sitter with the Markdown grammar importable (textual[syntax])?"""
    return all(importlib.util.find_spec(m) is not None for m in ("tree_sitter", "tree_sitter_markdown"))


class TopicEditor(TextArea):
    """``TopicEditor(text, path=..., diagnostics=..., debounce=0.3, ascii=False)``."""

    BINDINGS = [
        Binding("f8", "next_diagnostic", "Next error", id="editor.next_error"),
        Binding("shift+f8", "previous_diagnostic", "Prev error", id="editor.previous_error"),
        Binding("ctrl+s", "save", "Save", id="editor.save"),
    ]

    DEFAULT_CSS = """
    TopicEditor { border: round $primary-darken-2; }
    TopicEditor:focus { border: round $primary; }
    """

    @dataclass
    class ValidateRequested(Message):
        """Validate ``text`` (buffer version ``seq``); answer with ``apply_validation``."""

        editor: "TopicEditor"
        text: str
        seq: int

        @property
        def control(self) -> "TopicEditor":
            return self.editor

    @dataclass
    class SaveRequested(Message):
        """``ctrl+s``: save ``text`` (through ``staged_edit``); answer with ``mark_saved`` or diagnostics."""

        editor: "TopicEditor"
        text: str
        seq: int

        @property
        def control(self) -> "TopicEditor":
            return self.editor

    @dataclass
    class DiagnosticsChanged(Message):
        editor: "TopicEditor"
        diagnostics: tuple[Diagnostic, ...]

        @property
        def control(self) -> "TopicEditor":
            return self.editor

    def __init__(
        self,
        text: str = "",
        *,
        path: str = "",
        diagnostics: Iterable[Diagnostic] = (),
        debounce: float = DEBOUNCE_SECONDS,
        ascii: bool = False,
        read_only: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(
            text,
            language="markdown" if markdown_available() else None,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=True,
            read_only=read_only,
            name=name,
            id=id,
            classes=classes,
        )
        self.path = path
        self.debounce = debounce
        self.ascii = ascii
        self._seq = 0
        self._seq_text = text
        self._timer: Timer | None = None
        self._diagnostics: tuple[Diagnostic, ...] = ()
        self._by_row: dict[int, tuple[Diagnostic, ...]] = {}
        self.border_title = path or None
        self.base_text = text  # what the buffer was opened from (or last saved as)
        self.base_revision: str | None = None
        self.set_diagnostics(diagnostics)

    # ------------------------------------------------------------------ buffer state

    @property
    def is_dirty(self) -> bool:
        """Does the buffer differ from what it was opened from / last saved as?"""
        return self.text != self.base_text

    def mark_saved(self, text: str | None = None, revision: str | None = None) -> None:
        """The buffer (or ``text``) is now what is on disk, at ``revision``."""
        self.base_text = self.text if text is None else text
        self.base_revision = revision

    def action_save(self) -> None:
        self.post_message(self.SaveRequested(self, self.text, self._seq))

    # ------------------------------------------------------------------ diagnostics

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        return self._diagnostics

    @property
    def seq(self) -> int:
        """The buffer version: bumped whenever the text changes (edits, ``load_text``)."""
        return self._seq

    def diagnostics_on_line(self, line: int) -> tuple[Diagnostic, ...]:
        """Diagnostics of 1-based ``line``."""
        return self._by_row.get(line - 1, ())

    @property
    def cursor_diagnostics(self) -> tuple[Diagnostic, ...]:
        return self._by_row.get(self.cursor_location[0], ())

    def set_diagnostics(self, diagnostics: Iterable[Diagnostic]) -> None:
        """Show ``diagnostics`` now (regardless of ``seq``)."""
        diags = tuple(sorted(diagnostics, key=lambda d: (d.line, d.column or 0)))
        last_row = max(0, self.document.line_count - 1)
        by_row: dict[int, list[Diagnostic]] = {}
        for d in diags:
            by_row.setdefault(min(max(d.line - 1, 0), last_row), []).append(d)
        self._diagnostics = diags
        self._by_row = {row: tuple(items) for row, items in by_row.items()}
        self._update_subtitle()
        if self.is_mounted:
            self.notify_style_update()  # the line cache holds the old spans
            self.refresh()
            self.post_message(self.DiagnosticsChanged(self, diags))

    def apply_validation(self, seq: int, diagnostics: Iterable[Diagnostic]) -> bool:
        """Accept a validation answer for buffer version ``seq``; False (dropped) if stale."""
        if seq != self._seq:
            return False
        self.set_diagnostics(diagnostics)
        return True

    def request_validation(self) -> None:
        """Post ``ValidateRequested`` for the current buffer now (no debounce)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.post_message(self.ValidateRequested(self, self.text, self._seq))

    def load_text(self, text: str) -> None:
        """Replace the buffer (e.g. "take theirs"); counts as a new version at once."""
        super().load_text(text)
        self._note_text()

    def _note_text(self) -> None:
        # ``seq`` names a text, not an event: it moves when the text differs from the last
        # numbered one. So the Changed that load_text posts (handled later) does not bump it
        # a second time, and a validation asked for right after a load is not dropped.
        text = self.text
        if text != self._seq_text:
            self._seq += 1
            self._seq_text = text
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self.is_mounted:
            self._timer = self.set_timer(self.debounce, self.request_validation)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if event.text_area is self:
            self._note_text()

    def on_text_area_selection_changed(self, event: TextArea.SelectionChanged) -> None:
        if event.text_area is self:
            self._update_subtitle()

    def _update_subtitle(self) -> None:
        here = self.cursor_diagnostics
        self.border_subtitle = " · ".join(sanitize(d.label()) for d in here) if here else (
            f"{len(self._diagnostics)} problem(s)" if self._diagnostics else None
        )

    # ------------------------------------------------------------------ navigation

    def goto_diagnostic(self, diagnostic: Diagnostic) -> None:
        row = min(max(diagnostic.line - 1, 0), max(0, self.document.line_count - 1))
        line_len = len(self.document.get_line(row))
        col = min(max((diagnostic.column or 1) - 1, 0), line_len)
        self.move_cursor((row, col), center=True)
        self._update_subtitle()

    def _step(self, forward: bool) -> Diagnostic | None:
        if not self._diagnostics:
            return None
        row, col = self.cursor_location
        here = (row + 1, col + 1)

        def pos(d: Diagnostic) -> tuple[int, int]:
            return (d.line, d.column or 1)

        if forward:
            target = next((d for d in self._diagnostics if pos(d) > here), self._diagnostics[0])
        else:
            target = next((d for d in reversed(self._diagnostics) if pos(d) < here), self._diagnostics[-1])
        self.goto_diagnostic(target)
        return target

    def next_diagnostic(self) -> Diagnostic | None:
        """Move to the next diagnostic after the cursor (wrapping); returns it."""
        return self._step(True)

    def previous_diagnostic(self) -> Diagnostic | None:
        return self._step(False)

    def action_next_diagnostic(self) -> None:
        self.next_diagnostic()

    def action_previous_diagnostic(self) -> None:
        self.previous_diagnostic()

    # ------------------------------------------------------------------ rendering

    def get_line(self, line_index: int) -> Text:
        raw = self.document.get_line(line_index)
        shown = raw.translate(_VISIBLE)
        line = Text(shown, end="", no_wrap=True) if shown != raw else super().get_line(line_index)
        for d in self._by_row.get(line_index, ()):
            start = min(max((d.column or 1) - 1, 0), len(line.plain))
            if start < len(line.plain):
                line.stylize(ERROR_STYLE, start, len(line.plain))
        return line

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        if not self._by_row:
            return strip
        absolute = y + self.scroll_offset.y
        wrapped = self.wrapped_document
        if absolute >= wrapped.height:
            return strip
        row, _ = wrapped.offset_to_location(Offset(0, absolute))
        diags = self._by_row.get(row)
        if not diags:
            above = self._by_row.get(row - 1) if row > 0 else None
            if above and self._note_goes_below(row - 1, strip.cell_length):
                return self._note_below(strip, above)
            return strip
        first = wrapped.location_to_offset((row, 0)).y
        if absolute == first + len(wrapped.get_sections(row)) - 1:
            strip = self._annotate(strip, diags, row)
        gutter = self.gutter_width
        if absolute != first or not self.show_line_numbers or gutter < 2 or strip.cell_length <= gutter:
            return strip
        mark = Strip([Segment(ASCII_MARK if self.ascii else MARK, MARK_STYLE)], 1)
        return Strip.join([strip.crop(0, gutter - 2), mark, strip.crop(gutter - 1, strip.cell_length)])

    def annotation(self, diags: Iterable[Diagnostic]) -> str:
        """What is drawn after the text of a line with ``diags`` (where room allows)."""
        return f"{ASCII_MARK if self.ascii else MARK} " + self._messages(diags)

    @staticmethod
    def _messages(diags: Iterable[Diagnostic]) -> str:
        # the plain message first (the code is in the list and the border): a cut loses the
        # rule's wording, not what is wrong
        def one(d: Diagnostic) -> str:
            where = f"{sanitize(d.path)}: " if d.path else ""
            rule = f" [{sanitize(d.rule)}]" if d.rule and d.rule not in d.message else ""
            return f"{where}{sanitize(d.message)}{rule}"

        return " · ".join(one(d) for d in diags)

    def _note_start(self, row: int) -> int:
        """The cell where a message after line ``row``'s text starts (on its last row)."""
        section = self.wrapped_document.get_sections(row)[-1]
        text = expand_tabs_inline(section, self.indent_width).rstrip()
        return self.gutter_width + cell_len(text) + ANNOTATION_GAP

    def _note_goes_below(self, row: int, width: int) -> bool:
        """Line ``row``'s message does not fit after its text and the next line is blank
        (and has no message of its own): the message is drawn there instead."""
        if width - self._note_start(row) - 1 >= MIN_ANNOTATION:
            return False
        below = row + 1
        return below < self.document.line_count and not self.document.get_line(below).strip() and below not in self._by_row

    def _annotate(self, strip: Strip, diags: tuple[Diagnostic, ...], row: int) -> Strip:
        # every error's message at the end of its line (the last row of a wrapped
        # line), in the blank after the text, cut with "…" to the room there; the full text
        # is in the diagnostics list, which follows the cursor. Too little room: the blank
        # line below takes it, else its start is drawn where it fits.
        start = self._note_start(row)
        room = strip.cell_length - start - 1
        if room < MIN_ANNOTATION and (room < MIN_CUT or self._note_goes_below(row, strip.cell_length)):
            return strip
        return self._overlay(strip, self.annotation(diags), start, room)

    def _note_below(self, strip: Strip, diags: tuple[Diagnostic, ...]) -> Strip:
        start = self.gutter_width + BELOW_INDENT
        room = strip.cell_length - start - 1
        if room < MIN_CUT:
            return strip
        arrow = "^" if self.ascii else "↑"
        return self._overlay(strip, f"{arrow} {self._messages(diags)}", start, room)

    @staticmethod
    def _overlay(strip: Strip, message: str, start: int, room: int) -> Strip:
        shown = Text(message)
        shown.truncate(room, overflow="ellipsis")
        segments = list(strip)
        base = segments[-1].style if segments else None
        style = (base or Style()) + ANNOTATION_STYLE
        note = Strip([Segment(shown.plain, style)], shown.cell_len)
        end = start + shown.cell_len
        return Strip.join([strip.crop(0, start), note, strip.crop(end, strip.cell_length)])
