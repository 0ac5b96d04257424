"""Writers behind one interface (``base.Writer``): extractive (default), command, openai."""

from __future__ import annotations

from typing import Any

from memory_tui.pipeline.writers.base import Turn, Writer, WriterFailure, WriterOutcome, WriteTask


def make_writer(settings: Any) -> Writer:
    name = getattr(settings, "name", "extractive")
    if name == "command":
        from memory_tui.pipeline.writers.command import writer_from_settings
    elif name == "openai":
        from memory_tui.pipeline.writers.openai import writer_from_settings
    else:
        from memory_tui.pipeline.writers.extractive import writer_from_settings
    return writer_from_settings(settings)


__all__ = ["Turn", "Writer", "WriterFailure", "WriterOutcome", "WriteTask", "make_writer"]
