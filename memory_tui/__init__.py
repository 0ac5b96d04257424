"""memory-tui: a terminal client for OpenProgram's memory workspace."""

__version__ = "0.1.0"
