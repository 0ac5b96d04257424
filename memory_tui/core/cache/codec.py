"""The one serializer of memory-tui's caches: ``marshal`` of plain tuples, lists, dicts,
sets, strings, numbers and bytes. No class is named in the bytes, so nothing but plain data
can come out of them. This module and the kit's envelope are the only ones that import
``marshal`` (an import-linter contract says so, and that nothing imports ``pickle``), so how
a cached value becomes bytes is decided here and nowhere else.

``dumps`` / ``loads`` are marshal's own functions, not wrappers: hot loops map them over
thousands of rows. A value stored on its own goes inside an envelope (``envelope.pack``:
kind, version, crc32); these two are for values nested inside one (rows kept as blobs and
decoded only when used).
"""

from __future__ import annotations

import marshal

dumps = marshal.dumps
loads = marshal.loads
DECODE_ERRORS = (EOFError, ValueError, TypeError)  # what ``loads`` raises for bytes it did not write

__all__ = ["DECODE_ERRORS", "dumps", "loads"]
