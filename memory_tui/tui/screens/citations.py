"""What the views with record lists share: the source pane for the highlighted row, and
``g`` to open the cited node in Sessions."""

from __future__ import annotations

import posixpath

from rich.text import Text
from textual import on
from textual.widgets import OptionList

from memory_tui.core.format.errors import Problem

from ..model.data import FrameVM, RecordVM, WorkspaceModel
from ..widgets import CitationOption, RecordList, RecordOption, SourcePane, frame_text
from .base import ViewScreen, fit_path, topic_name


def unresolved(m: WorkspaceModel, rec: RecordVM, target: str) -> Problem:
    """Why a citation has no frame, from the engine's problems: a damaged archive first (with
    its line), else the topic's own problem for this link target."""
    path = posixpath.normpath(posixpath.join(posixpath.dirname(rec.topic_path), target.split("#", 1)[0]))
    for p in m.problems:
        if p.path == path and p.code in ("TRUNCATED_ARCHIVE", "CORRUPT_FILE"):
            return Problem(p.code, f"the archive is damaged: {p.message}; this frame is past the valid prefix", p.path, p.line, p.column)
    topic = m.topic(rec.topic_path)
    for p in topic.problems if topic else ():
        if p.details.get("target") == target:
            return p
    return Problem("INVALID_TOPIC_FORMAT", f"invalid source target: {target}", rec.topic_path)


class CitationScreen(ViewScreen):
    """A view screen whose detail is a ``RecordList`` with a ``SourcePane``."""

    def show_source(self, records: RecordList, pane: SourcePane) -> None:
        opt = records.highlighted_option
        m = self.model
        g = self.glyphs
        # a short screen gives the pane's rows to the list except on a chip (app.tcss)
        pane.set_class(not isinstance(opt, CitationOption), "-no-chip")
        if isinstance(opt, CitationOption) and m is not None:
            link = opt.link
            frame = m.frame(link.source_id) if link.source_id else unresolved(m, opt.record, link.target)
            pane.update(frame_text(frame, g, link.label))
        elif isinstance(opt, RecordOption) and m is not None:
            rec = opt.record
            text = Text()
            if rec.backlinks:
                text.append(f"{g.back} Linked from: ", "bold")
                text.append(", ".join(f"{b} ({_topic_of(m, b)})" for b in rec.backlinks))
            else:
                text.append("No other record links here.", "dim")
            if rec.relation_targets:
                text.append(f"\n{g.arrow} Links to: ", "bold")
                text.append(", ".join(f"{t} ({_topic_of(m, t)})" for t in rec.relation_targets))
            width = pane.content_size.width or self.app.size.width - 2
            text.append(f"\n{fit_path(f'{rec.topic_path}:{rec.line}', width, g.ellipsis)}", "dim")
            text.append(f"  {g.dot} select a chip to see its source", "dim")
            pane.update(text)
        else:
            pane.update(frame_text(None, g))
        # on a chip ``g`` is the key that matters (RecordActions.footer_ranks); the
        # footer is refitted only when that changes, not on every cursor move
        on_chip = self.cited_frame() is not None
        if on_chip != getattr(self, "_footer_on_chip", False):
            self._footer_on_chip = on_chip
            self.refresh_bindings()

    def cited_frame(self) -> FrameVM | None:
        """The frame of the citation chip under the cursor, if it resolves."""
        focused = self.focused
        lists = [focused] if isinstance(focused, RecordList) else list(self.query(RecordList))
        m = self.model
        for lst in lists:
            opt = lst.highlighted_option
            if isinstance(opt, CitationOption) and opt.link.source_id and m is not None:
                frame = m.frame(opt.link.source_id)
                if isinstance(frame, FrameVM):
                    return frame
        return None

    async def action_goto_session(self) -> None:
        frame = self.cited_frame()
        if frame is None or not frame.session_id:
            self.notify("Select a citation chip first.", severity="warning")
            return
        await self.shell.open_session(frame.session_id, frame.node_id)

    # h history, b alternatives (the logic lives in screens/history.py, alternatives.py)
    def action_history(self) -> None:
        open_record_history(self)

    def action_alternatives(self) -> None:
        open_record_alternatives(self)

    @on(OptionList.OptionSelected, "RecordList")
    async def _chip_selected(self, event: OptionList.OptionSelected) -> None:
        if isinstance(event.option, CitationOption):
            await self.action_goto_session()


# history and alternatives of the selected record (or topic in the tree).
def selected_record_of(screen: CitationScreen) -> RecordVM | None:
    focused = screen.focused
    if isinstance(focused, RecordList) and focused.selected_record is not None:
        return focused.selected_record
    own = getattr(screen, "selected_record", None)
    if callable(own) and own() is not None:
        return own()
    return next((lst.selected_record for lst in screen.query(RecordList) if lst.selected_record is not None), None)


def open_record_history(self: CitationScreen) -> None:
    from .history import open_history

    current_topic = getattr(self, "current_topic", None)
    if current_topic is not None and not isinstance(self.focused, RecordList) and current_topic() is not None:
        open_history(self.app, current_topic().path)
        return
    rec = selected_record_of(self)
    if rec is None:
        self.notify("Select a record first.", severity="warning")
        return
    open_history(self.app, rec.memory_id)


def open_record_alternatives(self: CitationScreen) -> None:
    from .alternatives import open_alternatives

    rec = selected_record_of(self)
    if rec is None:
        self.notify("Select a record first.", severity="warning")
        return
    open_alternatives(self.app, rec.memory_id)


def _topic_of(m: WorkspaceModel, mid: str) -> str:
    rec = m.records.get(mid)
    return topic_name(rec.topic_path) if rec else "missing"
