"""How a parse is written to and compared with a golden file: every field of every
dataclass, all the way down, as compact JSON that keeps the Python types apart (a tuple is a
JSON array; a list, dict, set and bytes are tagged), so a change of any value or type fails.
A dataclass is ``["@Name", field, ...]`` in field order (an archive entry whose frames are
built on first use is an ``ArchiveFile`` subclass and is written as ``ArchiveFile``)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

from memory_tui.core.format.sources import ArchiveFile


def encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = "ArchiveFile" if isinstance(value, ArchiveFile) else type(value).__name__
        return ["@" + name, *(encode(getattr(value, f.name)) for f in dataclasses.fields(value))]
    if isinstance(value, tuple):
        return [encode(v) for v in value]
    if isinstance(value, list):
        return {"list": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((encode(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"no golden encoding for {type(value).__name__}")


def decode_input(value: Any) -> Any:
    """An input as it was stored (text, or ``{"bytes": hex}``)."""
    return bytes.fromhex(value["bytes"]) if isinstance(value, dict) else value


def write(path: Path, data: Any) -> None:
    """Compact JSON, gzip-compressed with a fixed timestamp (the same data, the same bytes)."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw)


def read(path: Path) -> Any:
    with gzip.open(path, "rb") as gz:
        return json.loads(gz.read().decode("utf-8"))
