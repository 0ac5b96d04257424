"""The pane under a record list that shows the source turn a citation cites."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from memory_tui.core.format.errors import Problem

from ..model.data import FrameVM
from ..render import Glyphs


def frame_text(frame: FrameVM | Problem | None, glyphs: Glyphs, label: str = "") -> Text:
    if frame is None:
        return Text("Select a citation chip to see the source turn it cites.", "dim")
    if isinstance(frame, Problem):
        out = Text(f"{glyphs.bad} Source unavailable: ", "bold red")
        out.append(frame.message)
        if frame.path:
            out.append(f"\n{frame.location}", "dim")
        return out
    out = Text()
    out.append(frame.speaker or "unknown speaker", "bold")
    out.append(f"  {frame.timestamp or 'no time'}", "dim")
    out.append("  ")
    if frame.pending:
        out.append("pending (unpaired, not trusted)", "bold yellow")
    elif frame.trusted:
        out.append(f"{glyphs.ok} trusted", "green")
    else:
        out.append("untrusted", "yellow")
    out.append("\n")
    out.append(frame.text)
    out.append(f"\n{frame.session_id or '?'} / {frame.node_id or '?'}  {frame.path}:{frame.line}", "dim")
    if label:
        out.append(f"  ({label})", "dim")
    return out


class SourcePane(Static):
    DEFAULT_CSS = "SourcePane { height: auto; max-height: 12; padding: 0 1; }"
