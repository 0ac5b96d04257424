"""Insights over memory: evidence strength, record history and revert, branch alternatives.

This layer sits above ``core`` (topics, sources, git, the transaction) and ``sessions``
(nodes and branches), because every insight here joins the two: a record's citations name
source frames, and those frames name session nodes. It never imports ``textual``,
``memory_tui.tui`` or ``memory_tui.cli``; the CLI and the TUI both call it.
"""
