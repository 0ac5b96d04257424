"""Widgets, one per module: header, view tabs, tree, record list, source pane."""

from __future__ import annotations

from .header import HeaderBar, header_text, relative_time
from .records import CitationOption, RecordList, RecordOption, chip_text, render_record
from .source import SourcePane, frame_text
from .tabs import ViewTabs, views_text
from .tree import MemoryTree

__all__ = [
    "CitationOption",
    "HeaderBar",
    "MemoryTree",
    "RecordList",
    "RecordOption",
    "SourcePane",
    "ViewTabs",
    "chip_text",
    "frame_text",
    "header_text",
    "relative_time",
    "render_record",
    "views_text",
]
