"""Source ids, archive locations and anchors (memory spec §4.1), and the ``D<n>:<m>``
references of benchmark archives: the names every other room of the archive format uses."""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from urllib.parse import quote

from ...cache.registry import keeps

MARKER = "<!-- openprogram-source-archive:v2 -->"
SOURCES_DIR = "sources"
V2_DIR = "_v2"
ANCHOR_PREFIX = "source-"

# Code used when an append is refused (OpenProgram raises a ValueError there, which its
# failure classifier turns into WRITER_PRECONDITION_FAILED; memory spec §9 item 13).
APPEND_REFUSED = "WRITER_PRECONDITION_FAILED"
# Reference problems are validation failures of a transaction (§5.3 step 9).
REF_PROBLEM = "INVALID_TOPIC_FORMAT"

_FORBIDDEN_V2_RE = re.compile(r"[\[\]<>\r\n]")  # one C-level search instead of a generator per character

# --------------------------------------------------------------------------------------------
# 4.1 Source ids and locations
# --------------------------------------------------------------------------------------------


def split_source_id(source_id: object) -> tuple[str, str, str] | None:
    """``provider/thread/message`` split on the first two ``/``; ``None`` when not a source id.

    All three parts must be non-empty and the provider must not be ``.`` or ``..``; the message
    may itself contain ``/``.
    """
    if not isinstance(source_id, str):
        return None
    parts = source_id.split("/", 2)
    if len(parts) != 3:
        return None
    provider, thread, message = parts
    if not provider or not thread or not message or provider in (".", ".."):
        return None
    return provider, thread, message


def is_v2_valid_id(source_id: object) -> bool:
    """A source id that may be framed in a v2 archive: printable, none of ``[ ] < > CR LF``."""
    if split_source_id(source_id) is None:
        return False
    assert isinstance(source_id, str)
    return source_id.isprintable() and _FORBIDDEN_V2_RE.search(source_id) is None


def pct(part: str) -> str:
    """UTF-8 percent quoting, uppercase hex, keeping only ``A-Z a-z 0-9 - _ . ~``."""
    return quote(part, safe="", encoding="utf-8", errors="strict")


@keeps
@lru_cache(maxsize=4096)
def _location(provider: str, thread: str, legacy: bool) -> str:
    middle = "/" if legacy else f"/{V2_DIR}/"
    return f"{SOURCES_DIR}/{pct(provider)}{middle}{pct(thread)}.md"


def archive_path(source_id: str, legacy: bool = False) -> str:
    """Workspace-relative posix path of the archive holding ``source_id``.

    ``openprogram/sess 1/m`` -> ``sources/openprogram/_v2/sess%201.md`` (legacy: without ``/_v2``).
    Raises ``ValueError`` for something that is not a source id.
    """
    parts = split_source_id(source_id)
    if parts is None:
        raise ValueError(f"invalid source id: {source_id!r}")
    return _location(parts[0], parts[1], legacy)


def archive_paths(source_id: str) -> tuple[str, str]:
    """``(archive_path(id), archive_path(id, legacy=True))`` splitting once (both raise alike)."""
    parts = split_source_id(source_id)
    if parts is None:
        raise ValueError(f"invalid source id: {source_id!r}")
    return _location(parts[0], parts[1], False), _location(parts[0], parts[1], True)


def anchor(source_id: str) -> str:
    """``source-`` + first 16 hex of sha256(source_id) (same for v2 and legacy)."""
    return ANCHOR_PREFIX + hashlib.sha256(source_id.encode("utf-8")).hexdigest()[:16]


_D_REF = re.compile(r"D([0-9]+):([0-9]+)")
_D_FRAGMENT = re.compile(r"#d([0-9]+)-([0-9]+)\Z", re.IGNORECASE)
_D_FILE = re.compile(r"D([0-9]+)\.md")


def parse_d_ref(ref: object) -> tuple[str, str] | None:
    """``D18:11`` -> ``("18", "11")`` (digits as written)."""
    if not isinstance(ref, str):
        return None
    m = _D_REF.fullmatch(ref)
    return (m.group(1), m.group(2)) if m else None


def d_archive_path(ref: str) -> str:
    n, _m = parse_d_ref(ref) or (None, None)
    if n is None:
        raise ValueError(f"not a D reference: {ref!r}")
    return f"{SOURCES_DIR}/D{n}.md"


def d_anchor(ref: str) -> str:
    parsed = parse_d_ref(ref)
    if parsed is None:
        raise ValueError(f"not a D reference: {ref!r}")
    return f"d{parsed[0]}-{parsed[1]}"
