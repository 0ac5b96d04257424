# The round-4 sources parser (before the round-5 faster one), kept verbatim as an oracle for the equivalence tests
# of the faster one (test_parse_fast_props.py). Not used by memory_tui itself.
"""OpenProgram's source archive: ids, the strict v2 format, legacy readers, an index, the appender.

Memory spec §4 (format), §3.5 (link targets), §5.4 step 6 (reference checks). Everything here is
byte-exact with OpenProgram's archive files; the reader is strict where OpenProgram is strict
(v2 scanning never resynchronises) and the index scans each archive once per change
(pitfall 4: OpenProgram re-reads a whole archive for every citation).

Layout of the module:

* source ids, locations and anchors (§4.1)
* speaker fields and trust metadata (§4.3, §4.4)
* ``render_frame`` / ``scan_v2`` (§4.2) and the read-only legacy / D-format parsers (§4.6)
* ``SourceIndex``: every archive under ``sources/`` indexed once, incremental re-index
* ``append_records``: content-addressed, idempotent, atomic append (§4.5)
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import posixpath
import re
import stat as stat_mod
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence
from urllib.parse import quote, unquote

from memory_tui.core.format.errors import TRUNCATED_ARCHIVE, CORRUPT_FILE, MemoryError, Problem
from memory_tui.core.fsutil import atomic_write
from memory_tui.core.format.paths import Layout, relpath
from memory_tui.core.format.text import header_part

MARKER = "<!-- openprogram-source-archive:v2 -->"
SOURCES_DIR = "sources"
V2_DIR = "_v2"
ANCHOR_PREFIX = "source-"
TRUST_STATES = ("pending", "trusted")
AUTHORITY_TIERS = (None, "owner", "paired")
LEGACY_ORIGINS = ("legacy-unknown", "local-owner")

# Code used when an append is refused (OpenProgram raises a ValueError there, which its
# failure classifier turns into WRITER_PRECONDITION_FAILED; memory spec §9 item 13).
APPEND_REFUSED = "WRITER_PRECONDITION_FAILED"
# Reference problems are validation failures of a transaction (§5.3 step 9).
REF_PROBLEM = "INVALID_TOPIC_FORMAT"

_FORBIDDEN_V2 = frozenset("[]<>\r\n")

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
    return source_id.isprintable() and not any(ch in _FORBIDDEN_V2 for ch in source_id)


def pct(part: str) -> str:
    """UTF-8 percent quoting, uppercase hex, keeping only ``A-Z a-z 0-9 - _ . ~``."""
    return quote(part, safe="", encoding="utf-8", errors="strict")


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
# 4.4 Trust metadata
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrustMeta:
    version: int = 1
    trust_state: str = "trusted"
    speaker_kind: str = "unknown"
    principal_id: str = "unknown"
    authority_tier: str | None = None

    @property
    def trusted(self) -> bool:
        return self.trust_state == "trusted"

    @property
    def pending(self) -> bool:
        return self.trust_state == "pending"

    def to_json(self) -> dict[str, Any]:
        return {
            "authority_tier": self.authority_tier,
            "principal_id": self.principal_id,
            "speaker_kind": self.speaker_kind,
            "trust_state": self.trust_state,
            "version": self.version,
        }


def _norm_text(value: object) -> str:
    return value if isinstance(value, str) and value.strip() else "unknown"


def normalize_meta(
    trust_state: object = "trusted",
    speaker_kind: object = None,
    principal_id: object = None,
    authority_tier: object = None,
) -> TrustMeta:
    """Build a normalised ``TrustMeta``; ``ValueError`` for an unknown trust state or tier."""
    if trust_state not in TRUST_STATES:
        raise ValueError(f"invalid trust_state: {trust_state!r}")
    if authority_tier not in AUTHORITY_TIERS:
        raise ValueError(f"invalid authority_tier: {authority_tier!r}")
    return TrustMeta(1, str(trust_state), _norm_text(speaker_kind), _norm_text(principal_id), authority_tier)  # type: ignore[arg-type]


def _b64(obj: Mapping[str, Any]) -> str:
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(payload).decode("ascii").rstrip("=")


def encode_meta(meta: TrustMeta) -> str:
    """TOKEN = base64url without padding of the sorted compact JSON (non-ASCII kept)."""
    return _b64(meta.to_json())


_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


@lru_cache(maxsize=1024)
def decode_meta(token: str) -> TrustMeta | None:
    """Decode a ``source-meta`` token; ``None`` unless it is canonical.

    Accepts the current shape and, read-only, the pre-tier shape with ``origin_scope`` (tier
    ``owner`` iff origin ``local-owner``). Either way the token must re-encode identically.
    """
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        obj = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict) or type(obj.get("version")) is not int or obj["version"] != 1:
        return None
    keys = set(obj)
    base_ok = (
        obj.get("trust_state") in TRUST_STATES
        and isinstance(obj.get("speaker_kind"), str)
        and isinstance(obj.get("principal_id"), str)
    )
    if not base_ok:
        return None
    if keys == {"version", "trust_state", "speaker_kind", "principal_id", "authority_tier"}:
        tier = obj["authority_tier"]
        if tier not in AUTHORITY_TIERS:
            return None
        try:
            meta = normalize_meta(obj["trust_state"], obj["speaker_kind"], obj["principal_id"], tier)
        except ValueError:
            return None
        return meta if encode_meta(meta) == token else None
    if keys == {"version", "trust_state", "speaker_kind", "principal_id", "origin_scope"}:
        scope = obj["origin_scope"]
        if not isinstance(scope, dict) or set(scope) != {"origin", "capabilities"}:
            return None
        origin, caps = scope["origin"], scope["capabilities"]
        if origin not in LEGACY_ORIGINS or not isinstance(caps, list):
            return None
        if not all(isinstance(c, str) and c for c in caps) or caps != sorted(set(caps)):
            return None
        meta = normalize_meta(
            obj["trust_state"], obj["speaker_kind"], obj["principal_id"], "owner" if origin == "local-owner" else None
        )
        canonical = {
            "origin_scope": {"capabilities": caps, "origin": origin},
            "principal_id": meta.principal_id,
            "speaker_kind": meta.speaker_kind,
            "trust_state": meta.trust_state,
            "version": 1,
        }
        return meta if _b64(canonical) == token else None
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
# 4.2 The strict v2 scanner
# --------------------------------------------------------------------------------------------

_ANCHOR_LINE = re.compile(r'<a id="([^"]*)"></a>')
_SOURCE_LINE = re.compile(r"<!-- source-id:(.*) -->")
_SPEAKER_LINE = re.compile(r"<!-- speaker-id:(.*) -->")
_META_LINE = re.compile(r"<!-- source-meta:(.*) -->")
_COUNT_LINE = re.compile(r"<!-- record-lines:([0-9]{1,9}) -->")
# "[" ts "]" ws+ label ": " text. One whitespace character is taken as the separator and the
# rest stays in the label, so a label that header_part left starting with a space (a dropped
# control character after a collapsed space) reads back exactly as it was written.
_FIRST_LINE = re.compile(r"\[([^\[\]]*)\]\s(.+?): (.*)", re.DOTALL)
_SPEAKER_PREFIX = "<!-- speaker-id:"
_META_PREFIX = "<!-- source-meta:"


@dataclass(frozen=True)
class V2Scan:
    frames: tuple[SourceFrame, ...]
    complete: bool
    problem: Problem | None = None
    ends_with_lf: bool = True
    n_lines: int = 0  # LF-terminated lines (plus a final unterminated one) in the scanned text
    resumable: bool = False  # complete, ends with the last record line's LF: an append can resume

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(f.source_id for f in self.frames)


def _decode(
    rel: str, data: bytes | str, line_offset: int = 0, byte_offset: int = 0
) -> tuple[str | None, Problem | None]:
    if isinstance(data, str):
        return data, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        line = line_offset + data.count(b"\n", 0, exc.start) + 1
        return None, Problem(CORRUPT_FILE, f"not valid UTF-8 (byte {byte_offset + exc.start})", rel, line)


def _split_record_head(first: str) -> tuple[str, str, str] | None:
    m = _FIRST_LINE.fullmatch(first)
    if not m:
        return None
    return m.group(1), m.group(2), m.group(3)


def _split_lines(text: str) -> tuple[list[str], bool]:
    ends_lf = text.endswith("\n")
    lines = text.split("\n")
    if ends_lf:
        lines.pop()
    return lines, ends_lf


def scan_v2(rel_path: str, data: bytes | str) -> V2Scan:
    """Scan a v2 archive strictly; stop at the first invalid frame (never resynchronise).

    ``rel_path`` is the workspace-relative posix path (``sources/openprogram/_v2/x.md``): a
    frame whose computed location differs is invalid. Never raises for any input.
    """
    text, bad = _decode(rel_path, data)
    if text is None:
        return V2Scan((), False, bad)
    lines, ends_lf = _split_lines(text)
    n_lines = len(lines)
    if not lines or lines[0] != MARKER:
        prob = Problem(TRUNCATED_ARCHIVE, "not a v2 archive: the first line must be the v2 marker", rel_path, 1)
        return V2Scan((), False, prob, ends_lf, n_lines)
    if n_lines < 2 or lines[1] != "":
        prob = Problem(TRUNCATED_ARCHIVE, "the v2 marker must be followed by an empty line", rel_path, 2)
        return V2Scan((), False, prob, ends_lf, n_lines)
    if n_lines == 3 and lines[2] == "":
        return V2Scan((), True, None, ends_lf, n_lines)  # one tolerated extra LF after an empty archive
    return _scan_frames(rel_path, lines, 2, 0, [], set(), ends_lf)


def scan_v2_appended(rel_path: str, data: bytes, prior: V2Scan, prior_size: int) -> V2Scan | None:
    """Continue ``prior`` (the scan of ``data[:prior_size]``) over the appended tail.

    The caller guarantees the first ``prior_size`` bytes are unchanged. Gives exactly what
    ``scan_v2(rel_path, data)`` gives, or ``None`` when ``prior`` cannot be resumed.
    """
    if not prior.resumable or prior_size >= len(data):
        return None
    tail, bad = _decode(rel_path, data[prior_size:], prior.n_lines, prior_size)
    if tail is None:
        return V2Scan((), False, bad)  # the whole file is not UTF-8, as scan_v2 would say
    lines, ends_lf = _split_lines(tail)
    return _scan_frames(rel_path, lines, 0, prior.n_lines, list(prior.frames), set(prior.ids), ends_lf, after_frame=True)


def _scan_frames(
    rel_path: str,
    lines: list[str],
    i: int,
    offset: int,
    frames: list[SourceFrame],
    seen: set[str],
    ends_lf: bool,
    *,
    after_frame: bool = False,
) -> V2Scan:
    """The frame loop. ``lines`` are 0-based; reported lines are ``offset + index + 1``.

    With ``after_frame`` the position ``i`` is just past a frame's record lines (a resumed scan).
    """
    n_lines = len(lines)
    total = offset + n_lines

    def fail(index: int, what: str, **details: Any) -> V2Scan:
        details.setdefault("valid_frames", len(frames))
        prob = Problem(TRUNCATED_ARCHIVE, what, rel_path, offset + index + 1, None, details)
        return V2Scan(tuple(frames), False, prob, ends_lf, total)

    last_end = -1
    if after_frame:
        if i >= n_lines:
            return V2Scan(tuple(frames), True, None, ends_lf, total, bool(frames) and ends_lf)
        if lines[i] != "":
            frames.pop()  # that line makes the previous frame itself invalid, as in a full scan
            return fail(i, "expected an empty line after the record lines")
        last_end = i
        i += 1
    while i < n_lines:
        start = i
        m = _ANCHOR_LINE.fullmatch(lines[i])
        if not m:
            return fail(i, "malformed anchor line (expected <a id=\"source-…\"></a>)")
        anchor_value = m.group(1)
        i += 1
        if i >= n_lines:
            return fail(start, "frame runs past end of file (no source-id line)", truncated=True)
        m = _SOURCE_LINE.fullmatch(lines[i])
        if not m:
            return fail(i, "malformed source-id line")
        sid = m.group(1)
        if not is_v2_valid_id(sid):
            return fail(i, f"invalid v2 source id: {sid!r}")
        loc = archive_path(sid)
        if loc != rel_path:
            return fail(i, f"source id {sid} belongs in {loc}, not in this file")
        if anchor(sid) != anchor_value:
            return fail(start, f"anchor {anchor_value} does not match source id {sid}")
        if sid in seen:
            return fail(i, f"duplicate source id in archive: {sid}")
        i += 1
        speaker_raw: str | None = None
        meta: TrustMeta | None = None
        token: str | None = None
        if i < n_lines and lines[i].startswith(_SPEAKER_PREFIX):
            m = _SPEAKER_LINE.fullmatch(lines[i])
            speaker_raw = decode_speaker(m.group(1)) if m else None
            if speaker_raw is None:
                return fail(i, "non-canonical speaker-id marker")
            i += 1
        if i < n_lines and lines[i].startswith(_META_PREFIX):
            m = _META_LINE.fullmatch(lines[i])
            meta = decode_meta(m.group(1)) if m else None
            if meta is None or m is None:
                return fail(i, "source-meta token does not decode canonically")
            token = m.group(1)
            i += 1
        if i >= n_lines:
            return fail(start, "frame runs past end of file (no record-lines line)", truncated=True)
        m = _COUNT_LINE.fullmatch(lines[i])
        if not m:
            return fail(i, "malformed record-lines line")
        count = int(m.group(1))
        if count < 1:
            return fail(i, "record-lines must be at least 1")
        i += 1
        if i + count > n_lines:
            return fail(
                start,
                f"frame runs past end of file: record-lines:{count} but only {n_lines - i} line(s) left",
                truncated=True,
            )
        body = lines[i : i + count]
        head = _split_record_head(body[0])
        if head is None:
            return fail(i, 'first record line must look like "[timestamp] speaker: text"')
        j = i + count
        if j < n_lines and lines[j] != "":
            return fail(j, "expected an empty line after the record lines")
        ts, label, first_text = head
        content = first_text if count == 1 else "\n".join([first_text, *body[1:]])
        frames.append(
            SourceFrame(
                source_id=sid,
                anchor=anchor_value,
                speaker_id_raw=speaker_raw,
                meta=meta,
                lines=tuple(body),
                timestamp=ts,
                speaker_label=label,
                text=content,
                trusted=meta is None or meta.trusted,
                pending=meta is not None and meta.pending,
                path=rel_path,
                line=offset + start + 1,
                kind="v2",
                meta_token=token,
            )
        )
        seen.add(sid)
        last_end = j
        i = j + 1  # skip the separating empty line (or step past EOF)
    resumable = bool(frames) and ends_lf and last_end == n_lines
    return V2Scan(tuple(frames), True, None, ends_lf, total, resumable)


# --------------------------------------------------------------------------------------------
# 4.6 Legacy archives (read-only)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LegacyScan:
    """A legacy provider archive. Everything in it counts as trusted; nothing is authoritative.

    ``frames`` holds anchor + source-id pairs whose computed legacy location is this file and
    whose anchor matches (what a link may target). ``comment_ids`` is every ``source-id``
    comment in the file (the trusted set, §4.7), ``anchor_lines`` every anchor line (what a
    reference check looks for, §5.4). A record body can forge such lines; only v2 is
    authoritative.
    """

    frames: tuple[SourceFrame, ...]
    comment_ids: frozenset[str]
    anchor_lines: frozenset[str]
    problem: Problem | None = None


def _legacy_lines(text: str) -> list[str]:
    return text.splitlines()


def scan_legacy(rel_path: str, data: bytes | str) -> LegacyScan:
    text, bad = _decode(rel_path, data)
    if text is None:
        return LegacyScan((), frozenset(), frozenset(), bad)
    lines = _legacy_lines(text)
    frames: list[SourceFrame] = []
    seen: set[str] = set()
    comment_ids: set[str] = set()
    anchors: set[str] = set()
    for idx, line in enumerate(lines):
        m = _SOURCE_LINE.fullmatch(line)
        if m:
            comment_ids.add(m.group(1))
        m = _ANCHOR_LINE.fullmatch(line)
        if not m:
            continue
        anchors.add(m.group(1))
        if idx + 1 >= len(lines):
            continue
        sm = _SOURCE_LINE.fullmatch(lines[idx + 1])
        if not sm:
            continue
        sid = sm.group(1)
        if sid in seen or split_source_id(sid) is None:
            continue
        try:
            if anchor(sid) != m.group(1) or archive_path(sid, legacy=True) != rel_path:
                continue
        except UnicodeEncodeError:
            continue
        k = idx + 2
        speaker_raw = None
        if k < len(lines) and lines[k].startswith(_SPEAKER_PREFIX):
            spm = _SPEAKER_LINE.fullmatch(lines[k])
            speaker_raw = unquote(spm.group(1)) if spm else None
            k += 1
        count = None
        if k < len(lines):
            cm = _COUNT_LINE.fullmatch(lines[k])
            if cm:
                count = int(cm.group(1))
                k += 1
        if count is not None:
            body = lines[k : k + count]
        else:
            end = k
            while end < len(lines) and lines[end].strip():
                end += 1
            body = lines[k:end]
        head = _split_record_head(body[0]) if body else None
        ts, label, first = head if head else ("", "", body[0] if body else "")
        frames.append(
            SourceFrame(
                source_id=sid,
                anchor=m.group(1),
                speaker_id_raw=speaker_raw,
                meta=None,
                lines=tuple(body),
                timestamp=ts,
                speaker_label=label,
                text="\n".join([first, *body[1:]]) if body else "",
                trusted=True,
                pending=False,
                path=rel_path,
                line=idx + 1,
                kind="legacy",
            )
        )
        seen.add(sid)
    return LegacyScan(tuple(frames), frozenset(comment_ids), frozenset(anchors))


_D_ANCHOR = re.compile(r'<a id="(d[0-9]+-[0-9]+)"></a>')
_D_TAIL = re.compile(r"\s*\[(D[0-9]+:[0-9]+)\]\Z")


def scan_d(rel_path: str, data: bytes | str) -> LegacyScan:
    """A ``sources/D<n>.md`` benchmark archive: ``<a id="d<n>-<m>"></a>`` entries."""
    text, bad = _decode(rel_path, data)
    if text is None:
        return LegacyScan((), frozenset(), frozenset(), bad)
    lines = _legacy_lines(text)
    frames: list[SourceFrame] = []
    anchors: set[str] = set()
    for idx, line in enumerate(lines):
        m = _D_ANCHOR.fullmatch(line)
        if not m:
            continue
        a = m.group(1)
        if a in anchors:
            continue
        anchors.add(a)
        n, mm = a[1:].split("-")
        ref = f"D{n}:{mm}"
        body = lines[idx + 1] if idx + 1 < len(lines) else ""
        head = _split_record_head(body)
        ts, label, content = head if head else ("", "", body)
        content = _D_TAIL.sub("", content)
        frames.append(
            SourceFrame(ref, a, None, None, (body,), ts, label, content, True, False, rel_path, idx + 1, "d")
        )
    return LegacyScan(tuple(frames), frozenset(), frozenset(anchors))


# --------------------------------------------------------------------------------------------
# The index
# --------------------------------------------------------------------------------------------

StatKey = tuple[int, int, int]


@dataclass(frozen=True)
class ArchiveFile:
    """One indexed file under ``sources/``."""

    path: str  # workspace-relative posix
    kind: str  # "v2" | "legacy" | "d"
    key: StatKey  # (mtime_ns, size, inode)
    frames: tuple[SourceFrame, ...]
    complete: bool = True
    problem: Problem | None = None
    comment_ids: frozenset[str] = frozenset()
    anchor_lines: frozenset[str] = frozenset()
    digest: str = ""  # sha256 of the bytes indexed (lets an append-only change resume)
    scan: V2Scan | None = field(default=None, repr=False, compare=False)
    by_anchor: Mapping[str, SourceFrame] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        mapping: dict[str, SourceFrame] = {}
        for fr in self.frames:
            mapping.setdefault(fr.anchor, fr)
        object.__setattr__(self, "by_anchor", mapping)

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(f.source_id for f in self.frames)


def classify(rel: str) -> str | None:
    """``v2`` for ``sources/<p>/_v2/<t>.md``, ``d`` for ``sources/D<n>.md``, else ``legacy``."""
    parts = rel.split("/")
    if not rel.endswith(".md") or len(parts) < 2 or parts[0] != SOURCES_DIR:
        return None
    if len(parts) == 4 and parts[2] == V2_DIR:
        return "v2"
    if len(parts) == 2 and _D_FILE.fullmatch(parts[1]):
        return "d"
    return "legacy"


def index_file(rel: str, data: bytes, key: StatKey = (0, 0, 0), previous: ArchiveFile | None = None) -> ArchiveFile:
    """Index one archive. With ``previous`` (an earlier index of the same path) and bytes that
    only grew, a v2 scan resumes after the old end instead of starting over."""
    kind = classify(rel) or "legacy"
    if kind == "v2":
        scan = None
        if (
            previous is not None
            and previous.scan is not None
            and previous.scan.resumable
            and previous.digest
            and len(data) > previous.key[1]
        ):
            hasher = hashlib.sha256(data[: previous.key[1]])
            if hasher.hexdigest() == previous.digest:
                scan = scan_v2_appended(rel, data, previous.scan, previous.key[1])
                if scan is not None:
                    hasher.update(data[previous.key[1] :])
                    digest = hasher.hexdigest()
        if scan is None:
            scan = scan_v2(rel, data)
            digest = hashlib.sha256(data).hexdigest()
        return ArchiveFile(rel, kind, key, scan.frames, scan.complete, scan.problem, digest=digest, scan=scan)
    legacy = scan_d(rel, data) if kind == "d" else scan_legacy(rel, data)
    return ArchiveFile(
        rel, kind, key, legacy.frames, legacy.problem is None, legacy.problem, legacy.comment_ids, legacy.anchor_lines
    )


def _walk_sources(root: Path) -> Iterator[tuple[str, Path, os.stat_result]]:
    """Regular ``*.md`` files under ``<root>/sources`` (symlinks neither followed nor listed)."""
    top = root / SOURCES_DIR
    stack = [(top, SOURCES_DIR)]
    while stack:
        directory, rel = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            child_rel = f"{rel}/{entry.name}"
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat_mod.S_ISDIR(st.st_mode):
                stack.append((Path(entry.path), child_rel))
            elif stat_mod.S_ISREG(st.st_mode) and entry.name.endswith(".md"):
                yield child_rel, Path(entry.path), st


def walk_sources(root: Path) -> Iterator[tuple[str, Path, os.stat_result]]:
    """The files ``SourceIndex.load`` indexes, with their stats (for the parse cache)."""
    return _walk_sources(root)


def _ref_problem(message: str, ref: str, rule: str) -> Problem:
    return Problem(REF_PROBLEM, message, None, None, None, {"ref": ref, "rule": rule})


@dataclass(frozen=True, eq=False)
class SourceIndex:
    """Every archive under ``<M>/sources`` scanned once; lookups are dictionary reads."""

    root: Path
    files: Mapping[str, ArchiveFile]
    _v2: Mapping[str, SourceFrame] = field(repr=False)
    _legacy: Mapping[str, SourceFrame] = field(repr=False)
    _trusted: frozenset[str] = field(repr=False)
    _pending: frozenset[str] = field(repr=False)
    _all: frozenset[str] = field(repr=False)

    # -- building -------------------------------------------------------------------------

    @classmethod
    def load(cls, memory_root: Path | str, previous: "SourceIndex | None" = None) -> "SourceIndex":
        """Index ``<memory_root>/sources``; with ``previous``, re-read only changed files."""
        root = Path(memory_root)
        old = previous.files if previous is not None and Path(previous.root) == root else {}
        files: dict[str, ArchiveFile] = {}
        for rel, path, st in _walk_sources(root):
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            prior = old.get(rel)
            if prior is not None and prior.key == key:
                files[rel] = prior
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                problem = Problem(CORRUPT_FILE, f"unreadable: {exc.strerror}", rel)
                # a key no stat can have, so the next load tries again
                files[rel] = ArchiveFile(rel, classify(rel) or "legacy", (-1, -1, -1), (), False, problem)
                continue
            if len(data) != key[1]:  # changed while reading: index what was read, re-read next time
                key = (key[0], len(data), key[2])
            files[rel] = index_file(rel, data, key, prior)
        return cls.from_files(root, files)

    @classmethod
    def from_files(cls, root: Path | str, files: Mapping[str, ArchiveFile]) -> "SourceIndex":
        v2: dict[str, SourceFrame] = {}
        legacy: dict[str, SourceFrame] = {}
        trusted: set[str] = set()
        pending: set[str] = set()
        every: set[str] = set()
        for rel in sorted(files):
            entry = files[rel]
            if entry.kind == "v2":
                for fr in entry.frames:
                    v2[fr.source_id] = fr
                    (trusted if fr.trusted else pending).add(fr.source_id)
            else:
                for fr in entry.frames:
                    legacy.setdefault(fr.source_id, fr)
                if entry.kind == "d":
                    ids = {fr.source_id for fr in entry.frames}
                else:
                    ids = set(entry.comment_ids)
                trusted |= ids
                every |= ids
        every |= v2.keys()
        pending -= trusted
        return cls(Path(root), dict(files), v2, legacy, frozenset(trusted), frozenset(pending), frozenset(every))

    # -- queries --------------------------------------------------------------------------

    @property
    def problems(self) -> tuple[Problem, ...]:
        return tuple(f.problem for _, f in sorted(self.files.items()) if f.problem is not None)

    def frame(self, source_id: str) -> SourceFrame | None:
        """The v2 frame for ``source_id``, else the legacy (or D) one."""
        return self._v2.get(source_id) or self._legacy.get(source_id)

    def v2_frame(self, source_id: str) -> SourceFrame | None:
        return self._v2.get(source_id)

    def is_trusted(self, source_id: str) -> bool:
        return source_id in self._trusted

    def is_pending(self, source_id: str) -> bool:
        return source_id in self._pending

    def trusted_ids(self) -> frozenset[str]:
        return self._trusted

    def pending_ids(self) -> frozenset[str]:
        return self._pending

    def all_ids(self) -> frozenset[str]:
        return self._all

    def events(self) -> list[SourceFrame]:
        """Every readable frame once (v2 preferred over legacy copies), by (path, line, id)."""
        out = list(self._v2.values())
        out.extend(fr for sid, fr in self._legacy.items() if sid not in self._v2)
        out.sort(key=lambda fr: (fr.path, fr.line, fr.source_id))
        return out

    def complete(self, rel: str) -> bool:
        entry = self.files.get(rel)
        return entry is None or entry.complete

    # -- §3.5 link targets ----------------------------------------------------------------

    def resolve_target(self, topic_path: str, target: str) -> str | None:
        """The source id a definition's link target names (memory spec §3.5), or ``None``.

        ``topic_path`` is relative to ``topics/`` (``people/ada.md``).
        """
        if not isinstance(target, str):
            return None
        target = target.strip()
        if not target:
            return None
        # 1. plain handle
        if parse_d_ref(target) is not None:
            return target
        if "#" not in target and is_v2_valid_id(target):
            return target
        # 2. relpath#fragment inside sources/
        if "#" in target:
            rel_part, _, fragment = target.partition("#")
            found = self._resolve_file_fragment(topic_path, rel_part, fragment)
            if found is not None:
                return found
        # 3. fallback: #d<n>-<m>
        m = _D_FRAGMENT.search(target)
        if m:
            return f"D{m.group(1)}:{m.group(2)}"
        return None

    def _resolve_file_fragment(self, topic_path: str, rel_part: str, fragment: str) -> str | None:
        if not rel_part or rel_part.startswith("/") or "\\" in rel_part or "\x00" in rel_part:
            return None
        topic_dir = posixpath.dirname(topic_path.replace("\\", "/").lstrip("/"))
        base = posixpath.join("topics", topic_dir) if topic_dir else "topics"
        joined = posixpath.normpath(posixpath.join(base, rel_part))
        if not joined.startswith(SOURCES_DIR + "/"):
            return None
        entry = self.files.get(joined)  # only regular, non-symlink files are indexed
        if entry is None:
            return None
        if entry.kind in ("v2", "legacy"):
            fr = entry.by_anchor.get(fragment)
            if fr is not None:
                return fr.source_id
        return None

    def link_for(self, source_id: str, from_dir: str) -> str:
        """Canonical committed link target for ``source_id`` from a workspace-relative dir.

        v2 frame -> ``…/sources/<p>/_v2/<t>.md#source-<hex16>``; only a legacy frame -> the
        legacy file; ``D<n>:<m>`` -> ``…/sources/D<n>.md#d<n>-<m>``. A source the index does
        not hold gets the v2 form.
        """
        from_dir = from_dir.strip("/") or "."
        if parse_d_ref(source_id) is not None:
            return relpath(d_archive_path(source_id), from_dir) + "#" + d_anchor(source_id)
        if source_id not in self._v2 and source_id in self._legacy:
            fr = self._legacy[source_id]
            return relpath(fr.path, from_dir) + "#" + fr.anchor
        return relpath(archive_path(source_id), from_dir) + "#" + anchor(source_id)

    # -- §5.4 step 6 ----------------------------------------------------------------------

    def validate_ref(
        self,
        ref: str,
        *,
        new: bool = False,
        allowed: Iterable[str] | None = None,
        rule: str = "",
    ) -> Problem | None:
        """Check one source reference of a unit (memory spec §5.4 step 6).

        ``new``: the ref is new to that block id, so it must be a trusted v2 frame (a legacy
        or D source is accepted as is) and, when ``allowed`` is given (restricted or structured
        transactions), one of the allowed ids. ``rule`` names the citation rule that applied
        (pitfall 5); it goes into the problem's details.
        """
        dref = parse_d_ref(ref)
        if dref is not None:
            entry = self.files.get(d_archive_path(ref))
            if entry is None or entry.kind != "d" or d_anchor(ref) not in entry.by_anchor:
                return _ref_problem(f"missing source reference: {ref}", ref, rule or "exists")
            return self._check_new(ref, new, allowed, rule, v2=False)
        if split_source_id(ref) is None:
            return _ref_problem(f"invalid source reference: {ref}", ref, rule or "well-formed")
        if ref in self._v2:
            return self._check_new(ref, new, allowed, rule, v2=True)
        try:
            legacy_rel = archive_path(ref, legacy=True)
        except (ValueError, UnicodeEncodeError):
            return _ref_problem(f"invalid source reference: {ref}", ref, rule or "well-formed")
        entry = self.files.get(legacy_rel)
        if entry is not None and entry.kind == "legacy" and anchor(ref) in entry.anchor_lines:
            return self._check_new(ref, new, allowed, rule, v2=False)
        return _ref_problem(f"missing source reference: {ref}", ref, rule or "exists")

    def _check_new(self, ref: str, new: bool, allowed: Iterable[str] | None, rule: str, *, v2: bool) -> Problem | None:
        if not new:
            return None
        if v2:
            fr = self._v2[ref]
            if fr.meta is None or not fr.meta.trusted:
                return _ref_problem(f"source reference is not trusted; promote it first: {ref}", ref, rule or "trusted")
        if allowed is not None and ref not in set(allowed):
            return _ref_problem(
                f"source reference is not evidence of this transaction: {ref}", ref, rule or "transaction-evidence"
            )
        return None


# --------------------------------------------------------------------------------------------
# 4.5 Appending
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppendResult:
    written_ids: tuple[str, ...]
    skipped_ids: tuple[str, ...]
    changed_paths: tuple[str, ...]  # workspace-relative posix


def _fold(name: str) -> str:
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", name).casefold())


def _refuse(message: str, *, path: str | None = None, line: int | None = None, **details: Any) -> MemoryError:
    return MemoryError(APPEND_REFUSED, message, path=path, line=line, details=details)


def _check_collisions(root: Path, rels: Sequence[str]) -> None:
    """Abort if two path prefixes are equal under NFC+casefold but spelled differently,
    within the batch or against names already on disk (memory spec §4.5)."""
    spelled: dict[str, str] = {}  # folded prefix -> the batch's spelling
    parents: set[str] = set()
    for rel in rels:
        parts = rel.split("/")
        for depth in range(2, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            other = spelled.setdefault(_fold(prefix), prefix)
            if other != prefix:
                raise _refuse("source archive path collision", path=rel, other=other)
            parents.add("/".join(parts[: depth - 1]))
    for parent in sorted(parents):
        try:
            names = os.listdir(root / parent)
        except OSError:
            continue
        for name in names:
            existing = f"{parent}/{name}"
            mine = spelled.get(_fold(existing))
            if mine is not None and mine != existing:
                raise _refuse("source archive path collision", path=mine, other=existing)


def _contained(root: Path, rel: str) -> bool:
    norm = posixpath.normpath(rel)
    if norm != rel or not rel.startswith(SOURCES_DIR + "/") or ".." in rel.split("/"):
        return False
    sources = (root / SOURCES_DIR).resolve()
    try:
        (root / rel).resolve().relative_to(sources)
    except ValueError:
        return False
    return True


def _mkdirs(root: Path, rel_dir: str) -> None:
    cur = root
    for part in rel_dir.split("/"):
        cur = cur / part
        try:
            cur.mkdir(mode=0o700)
        except FileExistsError:
            if not cur.is_dir() or cur.is_symlink():
                raise _refuse(f"not a directory: {cur.relative_to(root).as_posix()}")
            continue
        os.chmod(cur, 0o700)


def append_records(
    memory_root: Path | str,
    records: Sequence[SourceRecord],
    *,
    runtime_dir: Path | str | None = None,
    index: SourceIndex | None = None,
    existing_root: Path | str | None = None,
) -> AppendResult:
    """Archive ``records`` into their v2 files (memory spec §4.5).

    Content addressed and idempotent: a source id already framed in its v2 file is skipped
    (content is not compared), so archiving twice leaves the bytes identical. Every check
    (ids, containment, collisions, complete existing files) runs before any file is written;
    each file is replaced atomically (temp in the runtime dir, fsync, 0600, rename).
    The caller holds the workspace write lock. ``index`` (a ``SourceIndex`` of this root) spares
    re-scanning files it already holds unchanged, or resumes the scan of files that only grew.
    ``existing_root``: where names already on disk are looked up for the path-collision check
    (default ``memory_root``); a transaction stage that holds only the archives it appends to
    passes the committed memory root.
    """
    root = Path(memory_root)
    rt = Path(runtime_dir) if runtime_dir is not None else Layout(root).runtime_dir
    ordered = sorted(records, key=lambda r: (r.provider, r.thread_id, r.ordinal))

    groups: dict[str, list[tuple[SourceRecord, bytes]]] = {}
    for rec in ordered:
        sid = rec.source_id
        if not is_v2_valid_id(sid):
            raise _refuse(f"invalid source id: {sid}", source_id=sid)
        try:
            frame = render_frame(rec).encode("utf-8")  # lone surrogates fail here, before any write
            rel = archive_path(sid)
        except (ValueError, UnicodeEncodeError) as exc:
            raise _refuse(str(exc), source_id=sid) from None
        groups.setdefault(rel, []).append((rec, frame))

    rels = list(groups)
    for rel in rels:
        if not _contained(root, rel):
            raise _refuse("source archive path escapes sources/", path=rel)
    _check_collisions(Path(existing_root) if existing_root is not None else root, rels)

    plans: list[tuple[str, bytes]] = []
    known = index.files if index is not None and Path(index.root) == root else {}
    written: list[str] = []
    skipped: list[str] = []
    for rel in rels:
        target = root / rel
        existing: set[str] = set()
        old: bytes | None = None
        empty_archive = False
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            st = None
        except NotADirectoryError:
            raise _refuse(f"invalid or truncated v2 archive: {rel}", path=rel, reason="parent is not a directory") from None
        if st is not None and not stat_mod.S_ISREG(st.st_mode):
            raise _refuse(f"invalid or truncated v2 archive: {rel}", path=rel, reason="not a regular file")
        if st is not None:
            data = target.read_bytes()
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            prior = known.get(rel)
            if prior is not None and prior.kind == "v2" and prior.key == key and len(data) == key[1]:
                entry = prior
            else:
                entry = index_file(rel, data, key, prior)
            if not entry.complete:
                prob = entry.problem
                raise _refuse(
                    f"invalid or truncated v2 archive: {rel}",
                    path=rel,
                    line=prob.line if prob else None,
                    reason=prob.message if prob else "",
                )
            old = data
            existing = set(entry.ids)
            empty_archive = not entry.frames
        new_frames: list[bytes] = []
        for rec, frame in groups[rel]:
            sid = rec.source_id
            if sid in existing:
                skipped.append(sid)
                continue
            existing.add(sid)
            new_frames.append(frame)
            written.append(sid)
        if not new_frames:
            continue
        if old is None or empty_archive:
            # OpenProgram appends after an empty archive's blank line, leaving two blank lines
            # that its own scanner rejects; writing the new-file form keeps the file valid.
            out = MARKER.encode("ascii") + b"\n\n" + b"\n".join(new_frames)
        else:
            sep = b"\n" if old.endswith(b"\n") else b"\n\n"
            out = old + sep + b"\n".join(new_frames)
        plans.append((rel, out))

    if plans:
        rt.mkdir(mode=0o700, parents=True, exist_ok=True)
        from memory_tui.core.store.gitlog import mark_pending

        mark_pending(root)  # appended frames reach git with the next commit or the next locked open
    for rel, out in plans:
        _mkdirs(root, posixpath.dirname(rel))
        atomic_write(root / rel, out, tmp_dir=rt, tmp_prefix="source-archive-")
    return AppendResult(tuple(written), tuple(skipped), tuple(rel for rel, _ in plans))


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
    meta = frame.meta or TrustMeta()
    return SourceRecord(
        provider=provider,
        thread_id=thread,
        message_id=message,
        ordinal=ordinal,
        role=role,
        content=frame.text,
        timestamp=frame.timestamp,
        speaker_id=sid,
        speaker_display=display,
        speaker_kind=meta.speaker_kind,
        principal_id=meta.principal_id,
        authority_tier=meta.authority_tier,
        trust_state=meta.trust_state,
    )


__all__ = [
    "MARKER",
    "AppendResult",
    "ArchiveFile",
    "LegacyScan",
    "SourceFrame",
    "SourceIndex",
    "SourceRecord",
    "TrustMeta",
    "V2Scan",
    "anchor",
    "append_records",
    "archive_path",
    "classify",
    "d_anchor",
    "d_archive_path",
    "decode_meta",
    "decode_speaker",
    "encode_meta",
    "encode_speaker",
    "index_file",
    "is_v2_valid_id",
    "normalize_meta",
    "parse_d_ref",
    "pct",
    "record_from_frame",
    "render_archive",
    "render_frame",
    "scan_d",
    "scan_legacy",
    "scan_v2",
    "scan_v2_appended",
    "speaker_label",
    "speaker_marker",
    "split_source_id",
]
