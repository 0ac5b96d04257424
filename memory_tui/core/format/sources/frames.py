"""A record and its v2 frame (memory spec §4.2-§4.3): the speaker fields, the record a writer
hands the archive, the frame read back from disk, the exact bytes a frame is rendered as, and
the record that renders back to a frame. The scanner (``scan``) reads what ``render_frame``
writes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, NamedTuple
from urllib.parse import quote, unquote

from .ids import anchor, is_v2_valid_id, split_source_id
from .trust import TrustMeta, encode_meta, normalize_meta
from ..fastdata import positional
from ..text import header_part
from ...cache.registry import keeps

MARKER = "<!-- openprogram-source-archive:v2 -->"


# --------------------------------------------------------------------------------------------
# 4.3 Speaker fields
# --------------------------------------------------------------------------------------------


def speaker_label(speaker_id: str | None, speaker_display: str | None, role: str) -> str:
    """``display (id)`` when both normalised parts exist and differ, else display, id, role."""
    sid = header_part(speaker_id)
    disp = header_part(speaker_display)
    if sid and disp and sid != disp:
        return f"{disp} ({sid})"
    if disp:
        return disp
    if sid:
        return sid
    return header_part(role) or str(role or "")


def encode_speaker(speaker_id: str | None) -> str:
    """Percent-encode a raw speaker id: letters, digits, ``_ . ~`` kept, ``-`` as ``%2D``."""
    return quote(speaker_id or "", safe="", encoding="utf-8", errors="strict").replace("-", "%2D")


@keeps
@lru_cache(maxsize=4096)
def decode_speaker(value: str) -> str | None:
    """Decode a speaker marker value; ``None`` unless re-encoding reproduces it exactly."""
    try:
        raw = unquote(value, encoding="utf-8", errors="strict")
        again = encode_speaker(raw)
    except (UnicodeDecodeError, UnicodeEncodeError):
        return None
    return raw if again == value else None


def speaker_marker(speaker_id: str | None, speaker_display: str | None) -> str | None:
    """The marker value to write, or ``None`` when no marker line is written."""
    if header_part(speaker_id) or header_part(speaker_display):
        return encode_speaker(speaker_id or "")
    return None


# --------------------------------------------------------------------------------------------
# Records and frames
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceRecord:
    """One message to archive (what OpenProgram's writer hands to the archive)."""

    provider: str
    thread_id: str
    message_id: str
    ordinal: int
    role: str
    content: str
    timestamp: str = ""  # ISO 8601 or ""
    speaker_id: str | None = None
    speaker_display: str | None = None
    speaker_kind: str = "unknown"
    principal_id: str = "unknown"
    authority_tier: str | None = None
    trust_state: str = "trusted"

    @property
    def source_id(self) -> str:
        return f"{self.provider}/{self.thread_id}/{self.message_id}"

    @property
    def meta(self) -> TrustMeta:
        return normalize_meta(self.trust_state, self.speaker_kind, self.principal_id, self.authority_tier)

    @classmethod
    def spoken(cls, source_id: tuple[str, str, str], ordinal: int, role: str, content: str, timestamp: str,
               speaker: tuple[str | None, str | None], meta: TrustMeta) -> "SourceRecord":
        """The record of one message: ``source_id`` as ``(provider, thread, message)``,
        ``speaker`` as ``(speaker_id, speaker_display)``, and its trust fields ``meta``'s (the
        one place a record is put together from its parts: read back from an archive frame
        or declared by a transaction's caller)."""
        provider, thread, message = source_id
        return cls(provider, thread, message, ordinal, role, content, timestamp, speaker[0], speaker[1],
                   meta.speaker_kind, meta.principal_id, meta.authority_tier, meta.trust_state)

    @property
    def label(self) -> str:
        return speaker_label(self.speaker_id, self.speaker_display, self.role)


@dataclass(frozen=True)
class SourceFrame:
    """One archived record as read from disk (v2 frame, legacy block or D entry)."""

    source_id: str
    anchor: str
    speaker_id_raw: str | None  # decoded speaker marker; None = no marker line
    meta: TrustMeta | None
    lines: tuple[str, ...]  # the record lines, verbatim
    timestamp: str
    speaker_label: str
    text: str  # the content (record text without the "[ts] label: " prefix)
    trusted: bool
    pending: bool
    path: str  # workspace-relative posix path of the archive
    line: int  # 1-based line of the anchor
    kind: str = "v2"  # "v2" | "legacy" | "d"
    meta_token: str | None = None  # the token as written (pre-tier tokens keep their bytes)

    @property
    def record_text(self) -> str:
        return "\n".join(self.lines)

    def render(self) -> str:
        """The v2 frame bytes (as text) this frame was parsed from."""
        marker = None if self.speaker_id_raw is None else encode_speaker(self.speaker_id_raw)
        token = self.meta_token if self.meta_token is not None else (encode_meta(self.meta) if self.meta else None)
        return _frame_text(self.source_id, marker, token, list(self.lines))


_make_frame = positional(SourceFrame)


class FrameFacts(NamedTuple):
    """What the insight figures read of a frame, by the frame's own names, without its lines and
    text: kept for every frame of every cited archive, the frames themselves were ~100 MB at
    the benchmark's scale 4."""

    timestamp: str
    speaker_label: str
    meta: TrustMeta | None
    pending: bool

    @classmethod
    def of(cls, frame: SourceFrame) -> "FrameFacts":
        return cls(frame.timestamp, frame.speaker_label, frame.meta, frame.pending)


def _check_timestamp(ts: str) -> None:
    if not isinstance(ts, str) or (ts and (not ts.isprintable() or any(c in "[]\r\n" for c in ts))):
        raise ValueError(f"invalid source timestamp: {ts!r}")


def record_text(timestamp: str, label: str, content: str) -> str:
    return f"[{timestamp}] {label}: {content}"


def _frame_text(source_id: str, marker: str | None, token: str | None, lines: list[str]) -> str:
    out = [f'<a id="{anchor(source_id)}"></a>', f"<!-- source-id:{source_id} -->"]
    if marker is not None:
        out.append(f"<!-- speaker-id:{marker} -->")
    if token is not None:
        out.append(f"<!-- source-meta:{token} -->")
    out.append(f"<!-- record-lines:{len(lines)} -->")
    out.extend(lines)
    return "\n".join(out) + "\n"


def render_frame(record: SourceRecord) -> str:
    """The exact v2 frame text OpenProgram writes for ``record`` (ends with one LF).

    Raises ``ValueError`` for a source id that is not v2-valid or a malformed timestamp.
    """
    sid = record.source_id
    if not is_v2_valid_id(sid):
        raise ValueError(f"invalid source id: {sid!r}")
    ts = record.timestamp or ""
    _check_timestamp(ts)
    text = record_text(ts, record.label, record.content)
    return _frame_text(
        sid,
        speaker_marker(record.speaker_id, record.speaker_display),
        encode_meta(record.meta),
        text.split("\n"),
    )


def render_archive(frames: Iterable[str]) -> str:
    """A new archive file: MARKER LF LF + frames separated by one empty line."""
    return MARKER + "\n\n" + "\n".join(frames)


# --------------------------------------------------------------------------------------------
# 4.5 Appending
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppendResult:
    written_ids: tuple[str, ...]
    skipped_ids: tuple[str, ...]
    changed_paths: tuple[str, ...]  # workspace-relative posix


def record_from_frame(frame: SourceFrame, ordinal: int = 0, role: str = "user") -> SourceRecord:
    """A record that renders back to ``frame`` (display recovered from ``display (id)``)."""
    provider, thread, message = split_source_id(frame.source_id) or ("", "", "")
    sid = frame.speaker_id_raw
    display: str | None = frame.speaker_label
    norm_id = header_part(sid)
    if sid is not None and norm_id and frame.speaker_label.endswith(f" ({norm_id})"):
        display = frame.speaker_label[: -len(f" ({norm_id})")]
    elif sid is not None and norm_id == frame.speaker_label:
        display = None
    if sid is None:
        role, display = frame.speaker_label, None
    return SourceRecord.spoken((provider, thread, message), ordinal, role, frame.text, frame.timestamp,
                               (sid, display), frame.meta or TrustMeta())
