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

Why one long module: it is one grammar, the source archive's, and every part above reads or
writes the same bytes. The writer renders the frames the strict scanner reads back, the
one-pass scanner of well-formed archives (``scan_well_formed``) is only right because it agrees
with the general one (``_scan_frames``), and the index and the appender stand on both; they
share the id, anchor and frame rules and their regular expressions, so a change to the format
is made and seen in one file.
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
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain, compress, repeat
from operator import attrgetter, itemgetter, not_
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping
from urllib.parse import quote, unquote

from ..cache.stamp import NO_STAMP, Stamp, stamp_of, stamp_racy
from .errors import TRUNCATED_ARCHIVE, CORRUPT_FILE, Problem
from .fastdata import bulk, positional
from .paths import relpath
from .text import header_part
from ..cache.registry import keeps

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


@keeps
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


_make_frame = positional(SourceFrame)


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
_FIRST_LINE = re.compile(r"\[([^\[\]]*)\]\s(.+?): (.*)", re.DOTALL)  # the definition _split_record_head implements
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
    """``_FIRST_LINE.fullmatch`` by string search (once per frame of every archive)."""
    if not first.startswith("["):
        return None
    close = first.find("]", 1)
    if close < 0 or "[" in first[1:close]:  # the stamp holds no bracket: it ends at the first one
        return None
    sep = close + 1
    if sep >= len(first) or not first[sep].isspace():  # str.isspace is what \s matches
        return None
    colon = first.find(": ", sep + 2)  # the label is the shortest non-empty run before ": "
    if colon < 0:
        return None
    return first[1:close], first[sep + 1:colon], first[colon + 2:]


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
    if text.startswith(_V2_START):
        fast = scan_well_formed(rel_path, text)
        if fast is not None:
            return fast
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


# a well-formed archive's frame head and first record line, read by one regex
# match over the whole text instead of a list of lines and a dozen checks per line. Each
# group accepts exactly what the line checks of ``_scan_frames`` accept (a line there never
# holds "\n"; ``[^\S\n]`` is the one whitespace character ``str.isspace`` allows in a line).
_FRAME_HEAD = re.compile(
    r'<a id="([^"\n]*)"></a>\n'
    r"<!-- source-id:([^\[\]<>\r\n]*) -->\n"  # none of the characters a v2 id may not hold
    r"(?:<!-- speaker-id:([^\n]*) -->\n)?"
    r"(?:<!-- source-meta:([^\n]*) -->\n)?"
    r"<!-- record-lines:([0-9]{1,9}) -->\n"
    r"(\[([^\[\]\n]*)\][^\S\n]([^\n]+?): ([^\n]*))\n"
)
_V2_START = MARKER + "\n\n"


def scan_well_formed(rel_path: str, text: str) -> V2Scan | None:
    """``scan_v2`` of an archive every frame of which is well formed, in one pass over the
    text; ``None`` as soon as anything is not (then the line scanner decides what it is, and
    reports it). Gives exactly the frames, lines and flags the line scanner gives:
    ``tests/property/test_parse_fast_props.py`` compares the two."""
    read = _well_formed_fields(rel_path, text)
    if read is None:
        return None
    fields, n_lines, resumable = read
    return V2Scan(_frames_of(rel_path, fields), True, None, True, n_lines, resumable)


def _well_formed_fields(rel_path: str, text: str) -> tuple[list[tuple], int, bool] | None:
    """``scan_well_formed``'s reading without the frames: per frame the fields ``take_handed``
    describes, then the scan's ``n_lines`` and ``resumable``; ``None`` where it gives ``None``."""
    size = len(text)
    pos = len(_V2_START)
    number = 3  # 1-based line of the frame's anchor
    seen: set[str] = set()
    match = _FRAME_HEAD.match
    find = text.find
    place = "\x00"  # "provider/thread/" of ids already known to belong in rel_path
    ends_after_record = False
    fields: list[tuple] = []
    keep = fields.append
    while pos < size:
        m = match(text, pos)
        if m is None:
            return None
        anchor_value, sid, marker, token, digits, first, ts, label, first_text = m.groups()
        if not (sid.startswith(place) and len(sid) > len(place)):  # else: the split_source_id of a known place
            parts = sid.split("/", 2)
            if len(parts) != 3:
                return None
            provider, thread, message = parts
            if not provider or not thread or not message or provider in (".", ".."):
                return None
            if _location(provider, thread, False) != rel_path:
                return None
            place = f"{provider}/{thread}/"
        if not sid.isprintable() or sid in seen:
            return None
        if ANCHOR_PREFIX + hashlib.sha256(sid.encode("utf-8")).hexdigest()[:16] != anchor_value:
            return None
        speaker_raw = None
        if marker is not None:
            speaker_raw = decode_speaker(marker)
            if speaker_raw is None:
                return None
        meta = None
        if token is not None:
            meta = decode_meta(token)
            if meta is None:
                return None
        end = m.end()
        count = int(digits)
        if count == 1:
            body: tuple[str, ...] = (first,)
        else:
            if count < 1:
                return None
            at = end
            for _ in range(count - 1):
                at = find("\n", at) + 1
                if at == 0:  # the record runs past the end of the file (or its last LF)
                    return None
            body = (first, *text[end:at - 1].split("\n"))
            end = at
        trusted = meta is None or meta.trusted
        pending = meta is not None and meta.pending
        # the text starts in the first record line where its first line's text does
        keep((sid, anchor_value, trusted, speaker_raw, token, body, ts, label, len(first) - len(first_text),
              pending, number))
        seen.add(sid)
        number += 3 + (marker is not None) + (token is not None) + count
        if end == size:
            ends_after_record = True
            break
        if text[end] != "\n":  # the record lines must be followed by an empty line
            return None
        pos = end + 1
        number += 1
    # the text ends with the LF of line ``number - 1`` here: its last record line's or blank line's
    return fields, number - 1, bool(fields) and ends_after_record


def _frames_of(rel_path: str, fields: list[tuple]) -> tuple[SourceFrame, ...]:
    """The frames of ``_well_formed_fields``' fields (a well-formed v2 archive at ``rel_path``)."""
    make = _make_frame
    frames = []
    for sid, anchor_value, trusted, speaker_raw, token, body, ts, label, at, pending, number in fields:
        first = body[0]
        content = first[at:] if len(body) == 1 else "\n".join([first[at:], *body[1:]])
        # SourceFrame's fields in order (see _scan_frames); a meta token was decoded when read
        frames.append(make(sid, anchor_value, speaker_raw, None if token is None else decode_meta(token), body, ts,
                           label, content, trusted, pending, rel_path, number, "v2", token))
    return tuple(frames)


def _well_formed_entry(rel: str, data: bytes, key: StatKey, digest: str) -> ArchiveFile | None:
    """``index_file``'s entry for a well-formed v2 archive, its frames built when first asked
    for (a cold load's readers need the ids, anchors and trust flags, not 32 800 frames, as
    the parse cache's entries do); ``None`` for any other archive."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    read = _well_formed_fields(rel, text) if text.startswith(_V2_START) else None
    if read is None:
        return None
    fields, n_lines, resumable = read
    sids, anchors, trusted = (tuple(map(itemgetter(i), fields)) for i in range(3))

    def build() -> tuple[SourceFrame, ...]:
        with bulk():
            return _frames_of(rel, fields)

    entry = ArchiveFile.deferred(rel, "v2", key, (sids, anchors, trusted), build, True, digest=digest,
                                 scan_row=(True, True, n_lines, resumable))
    vars(entry)[HANDED] = (fields, (True, True, n_lines, resumable))
    return entry


# A well-formed archive's entry hands the parse cache each frame's fields as they were read:
# reading them back off 32 800 frames at a cold flush costs several times more (memory-bound
# attribute reads). Kept on the entry (not a field: equality, hash and repr ignore it) until
# taken.
HANDED = "_handed_fields"


def take_handed(entry: ArchiveFile) -> tuple[list[tuple], tuple[bool, bool, int, bool]] | None:
    """What ``entry`` (an ``index_file`` entry of a well-formed v2 archive) was made from, at
    most once (``None`` after, or for an entry made another way): the fields of every frame,
    in order, ``(source_id, anchor, trusted, speaker_id_raw, meta_token, lines, timestamp,
    speaker_label, offset of the text in its first record line, pending, line)`` (path and
    kind are the entry's own, ``v2``), and its scan's ``(complete, ends_with_lf, n_lines,
    resumable)``."""
    return vars(entry).pop(HANDED, None)


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
        # _ANCHOR_LINE / _SOURCE_LINE by slicing (no line holds "\n", which "." alone refuses)
        line = lines[i]
        if not (len(line) >= 13 and line.startswith('<a id="') and line.endswith('"></a>') and '"' not in line[7:-6]):
            return fail(i, "malformed anchor line (expected <a id=\"source-…\"></a>)")
        anchor_value = line[7:-6]
        i += 1
        if i >= n_lines:
            return fail(start, "frame runs past end of file (no source-id line)", truncated=True)
        line = lines[i]
        if not (len(line) >= 19 and line.startswith("<!-- source-id:") and line.endswith(" -->")):
            return fail(i, "malformed source-id line")
        sid = line[15:-4]
        parts = split_source_id(sid)  # is_v2_valid_id and archive_path, splitting once
        if parts is None or not sid.isprintable() or _FORBIDDEN_V2_RE.search(sid) is not None:
            return fail(i, f"invalid v2 source id: {sid!r}")
        loc = _location(parts[0], parts[1], False)
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
        line = lines[i]  # _COUNT_LINE by slicing
        digits = line[18:-4]
        if not (23 <= len(line) <= 31 and line.startswith("<!-- record-lines:") and line.endswith(" -->")
                and digits.isascii() and digits.isdigit()):
            return fail(i, "malformed record-lines line")
        count = int(digits)
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
        # SourceFrame's fields in order: source_id, anchor, speaker_id_raw, meta, lines,
        # timestamp, speaker_label, text, trusted, pending, path, line, kind, meta_token
        frames.append(_make_frame(
            sid, anchor_value, speaker_raw, meta, tuple(body), ts, label, content, meta is None or meta.trusted,
            meta is not None and meta.pending, rel_path, offset + start + 1, "v2", token,
        ))
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

StatKey = Stamp  # the cache kit's (mtime_ns, size, inode, ctime_ns)
# Set (in an entry's instance dict) on an entry rebuilt from a persisted cache rather than
# from bytes this process read: ``SourceIndex._verified`` checks its bytes before a trust
# verdict rests on it.
FROM_KEPT = "_from_kept"


# Set on an entry whose stamp was inside the clock tick when its bytes were read: the stamp
# may not show a write later in the same tick, so no later load reuses the entry by it.
UNPROVEN = "_unproven"


def proven(entry: "ArchiveFile") -> bool:
    """Whether ``entry``'s stamp vouches for its bytes (see ``UNPROVEN``)."""
    return UNPROVEN not in entry.__dict__


def _read_regular(path: str) -> bytes:
    """The bytes of a regular file, never through a symbolic link."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"not a regular file: {path}")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# The fields two indexes of the same bytes agree on (``scan`` and ``by_anchor`` are derived).
_COMPARED = ("path", "kind", "key", "frames", "complete", "problem", "comment_ids", "anchor_lines", "digest")
_SOURCE_ID, _ANCHOR, _TRUSTED = attrgetter("source_id"), attrgetter("anchor"), attrgetter("trusted")


@dataclass(frozen=True, eq=False)
class ArchiveFile:
    """One indexed file under ``sources/``.

    Besides its frames, an entry answers what an index is built from without them: the
    ``outline`` (source ids, anchors, trusted flags in frame order), ``sid_at`` / ``has_anchor``
    and ``frame_of``. :meth:`deferred` makes an entry whose frames are built only when asked
    for (a cached load needs the ids, not the 32 800 frames behind them).
    """

    path: str  # workspace-relative posix
    kind: str  # "v2" | "legacy" | "d"
    key: StatKey  # (mtime_ns, size, inode, ctime_ns)
    frames: tuple[SourceFrame, ...]
    complete: bool = True
    problem: Problem | None = None
    comment_ids: frozenset[str] = frozenset()
    anchor_lines: frozenset[str] = frozenset()
    digest: str = ""  # sha256 of the bytes indexed (lets an append-only change resume)
    scan: V2Scan | None = field(default=None, repr=False)
    by_anchor: Mapping[str, SourceFrame] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        frames = self.frames
        mapping: dict[str, SourceFrame] = dict(zip(map(_ANCHOR, frames), frames))
        if len(mapping) != len(frames):  # an anchor twice: the first frame with it wins
            mapping = {}
            for fr in frames:
                mapping.setdefault(fr.anchor, fr)
        object.__setattr__(self, "by_anchor", mapping)

    @classmethod
    def deferred(
        cls,
        path: str,
        kind: str,
        key: StatKey,
        outline: tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]],
        build: "Callable[[], tuple[SourceFrame, ...]]",
        complete: bool = True,
        comment_ids: frozenset[str] = frozenset(),
        anchor_lines: frozenset[str] = frozenset(),
        digest: str = "",
        scan_row: tuple[bool, bool, int, bool] | None = None,
    ) -> "ArchiveFile":
        """An entry equal to ``ArchiveFile(path, kind, key, build(), …)`` whose frames (and
        ``scan``, ``by_anchor``) are built by ``build`` on first use. ``outline`` must be what
        the built frames' outline is; ``scan_row`` is ``(complete, ends_with_lf, n_lines,
        resumable)`` of a problem-free scan of those frames, ``None`` for no scan. (Such an
        entry is not rebuilt by ``dataclasses.replace``: make a new one.)"""
        return _DeferredArchiveFile.make(path, kind, key, outline, build, complete, comment_ids, anchor_lines, digest,
                                         scan_row)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArchiveFile):
            return NotImplemented
        if self is other:
            return True
        return all(getattr(self, name) == getattr(other, name) for name in _COMPARED)

    def __hash__(self) -> int:
        return hash((self.path, self.kind, self.key, self.digest))

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self.outline()[0])

    def outline(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[bool, ...]]:
        """``(source ids, anchors, trusted flags)`` of the frames, in frame order."""
        got = self.__dict__.get("_outline")
        if got is None:
            frames = self.frames
            got = (tuple(map(_SOURCE_ID, frames)), tuple(map(_ANCHOR, frames)), tuple(map(_TRUSTED, frames)))
            got = self.__dict__.setdefault("_outline", got)
        return got

    def sid_at(self, anchor_value: str) -> str | None:
        """The source id of the first frame with this anchor (``by_anchor``'s), else ``None``."""
        fr = self.by_anchor.get(anchor_value)
        return None if fr is None else fr.source_id

    def has_anchor(self, anchor_value: str) -> bool:
        return anchor_value in self.by_anchor

    def frame_of(self, source_id: str) -> SourceFrame | None:
        """The frame the index holds for ``source_id`` from this file: the last one of a v2
        file (a later frame overwrites), the first one of a legacy or D file."""
        table = self.__dict__.get("_by_id")
        if table is None:
            table = {}
            if self.kind == "v2":
                for fr in self.frames:
                    table[fr.source_id] = fr
            else:
                for fr in self.frames:
                    table.setdefault(fr.source_id, fr)
            table = self.__dict__.setdefault("_by_id", table)
        return table.get(source_id)


class _DeferredArchiveFile(ArchiveFile):
    """An ``ArchiveFile`` whose frames are built on first use (see ``ArchiveFile.deferred``).

    The built values are kept in the instance dict with ``setdefault``, so threads racing
    on the first access all get the one object that was kept."""

    @classmethod
    def make(cls, path: str, kind: str, key: StatKey, outline: Any, build: Any, complete: bool,
             comment_ids: frozenset[str], anchor_lines: frozenset[str], digest: str,
             scan_row: tuple | None) -> "ArchiveFile":
        self = object.__new__(cls)
        self.__dict__.update(path=path, kind=kind, key=key, complete=complete, problem=None, comment_ids=comment_ids,
                             anchor_lines=anchor_lines, digest=digest, _outline=outline, _build=build,
                             _scan_row=scan_row)
        return self

    @property
    def frames(self) -> tuple[SourceFrame, ...]:  # type: ignore[override]
        d = self.__dict__
        got = d.get("_frames")
        if got is None:
            build = d.get("_build")
            if build is None:  # another thread built them (it keeps them before it lets go of the builder)
                return d["_frames"]
            built = build()
            if len(built) != len(d["_outline"][0]):
                raise ValueError(f"frames of {self.path} do not match the outline they were indexed by")
            got = d.setdefault("_frames", built)
            d.pop("_build", None)  # what it built them from is no longer needed
        return got

    @property
    def scan(self) -> V2Scan | None:  # type: ignore[override]
        row = self.__dict__["_scan_row"]
        if row is None:
            return None
        got = self.__dict__.get("_scan")
        if got is None:
            got = self.__dict__.setdefault("_scan", V2Scan(self.frames, row[0], None, *row[1:]))
        return got

    @property
    def by_anchor(self) -> Mapping[str, SourceFrame]:  # type: ignore[override]
        got = self.__dict__.get("_by_anchor")
        if got is None:
            mapping: dict[str, SourceFrame] = {}
            for fr in self.frames:
                mapping.setdefault(fr.anchor, fr)
            got = self.__dict__.setdefault("_by_anchor", mapping)
        return got

    def _anchor_ids(self) -> dict[str, str]:
        got = self.__dict__.get("_anchor_map")
        if got is None:
            sids, anchors, _trusted = self.__dict__["_outline"]
            mapping: dict[str, str] = {}
            for a, s in zip(anchors, sids):
                mapping.setdefault(a, s)
            got = self.__dict__.setdefault("_anchor_map", mapping)
        return got

    def sid_at(self, anchor_value: str) -> str | None:
        return self._anchor_ids().get(anchor_value)

    def has_anchor(self, anchor_value: str) -> bool:
        return anchor_value in self._anchor_ids()

    def __reduce__(self) -> tuple:
        # a copy or pickle is the plain entry it stands for (its builder is not data)
        return (ArchiveFile, (self.path, self.kind, self.key, self.frames, self.complete, self.problem,
                              self.comment_ids, self.anchor_lines, self.digest, self.scan))


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


def index_file(rel: str, data: bytes, key: StatKey = (0, 0, 0, 0), previous: ArchiveFile | None = None) -> ArchiveFile:
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
            digest = hashlib.sha256(data).hexdigest()
            entry = _well_formed_entry(rel, data, key, digest)
            if entry is not None:
                return entry
            scan = scan_v2(rel, data)
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


@keeps
@lru_cache(maxsize=8192)
def _sources_file_of(topic_path: str, rel_part: str) -> str | None:
    """The ``sources/`` file a link's path part names from ``topics/<topic_path>``, else
    ``None``. Cached: a topic's links point into a few archives, thousands of times."""
    if not rel_part or rel_part.startswith("/") or "\\" in rel_part or "\x00" in rel_part:
        return None
    topic_dir = posixpath.dirname(topic_path.replace("\\", "/").lstrip("/"))
    base = posixpath.join("topics", topic_dir) if topic_dir else "topics"
    joined = posixpath.normpath(posixpath.join(base, rel_part))
    if not joined.startswith(SOURCES_DIR + "/"):
        return None
    return joined


def _ref_problem(message: str, ref: str, rule: str) -> Problem:
    return Problem(REF_PROBLEM, message, None, None, None, {"ref": ref, "rule": rule})


class SourceResolver:
    """``index.resolve_target`` as a callable, with the index's ``file_lookup``."""

    __slots__ = ("_resolve", "file_lookup")

    def __init__(self, index: "SourceIndex") -> None:
        self._resolve = index.resolve_target
        self.file_lookup = index.file_lookup

    def __call__(self, topic_path: str, target: str) -> str | None:
        return self._resolve(topic_path, target)


@dataclass(frozen=True, eq=False)
class SourceIndex:
    """Every archive under ``<M>/sources`` scanned once; lookups are dictionary reads.

    The id maps lead to the archive entry holding a frame, not to the frame: an index is
    built from the entries' outlines, so archives whose frames nobody asks for (a cached
    load, a transaction) never build them."""

    root: Path
    files: Mapping[str, ArchiveFile]
    _v2: Mapping[str, ArchiveFile] = field(repr=False)  # source id -> the v2 entry whose frame wins
    _legacy: Mapping[str, ArchiveFile] = field(repr=False)  # source id -> the first legacy/D entry with it
    _trusted: frozenset[str] = field(repr=False)
    _pending: frozenset[str] = field(repr=False)
    _all: frozenset[str] = field(repr=False)

    # -- building -------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        memory_root: Path | str,
        previous: "SourceIndex | None" = None,
        walked: "Iterable[tuple[str, Path, os.stat_result]] | None" = None,
    ) -> "SourceIndex":
        """Index ``<memory_root>/sources``; with ``previous``, re-read only changed files.
        ``walked``: what ``walk_sources(memory_root)`` just gave (the caller's own walk)."""
        root = Path(memory_root)
        old = previous.files if previous is not None and Path(previous.root) == root else {}
        files: dict[str, ArchiveFile] = {}
        for rel, path, st in _walk_sources(root) if walked is None else walked:
            key = stamp_of(st)
            prior = old.get(rel)
            if prior is not None and prior.key == key and proven(prior):
                files[rel] = prior
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                problem = Problem(CORRUPT_FILE, f"unreadable: {exc.strerror}", rel)
                # a key no stat can have, so the next load tries again
                files[rel] = ArchiveFile(rel, classify(rel) or "legacy", NO_STAMP, (), False, problem)
                continue
            if len(data) != key[1]:  # changed while reading: index what was read, re-read next time
                key = (key[0], len(data), key[2], key[3])
            entry = files[rel] = index_file(rel, data, key, prior)
            if stamp_racy(key):  # a stamp that proves nothing: the next load reads the file again
                entry.__dict__[UNPROVEN] = True
        return cls.from_files(root, files)

    @classmethod
    def from_files(cls, root: Path | str, files: Mapping[str, ArchiveFile]) -> "SourceIndex":
        v2: dict[str, ArchiveFile] = {}
        legacy: dict[str, ArchiveFile] = {}
        # the id sets are built once each from these parts (no set copied into a frozenset)
        trusted_parts: list[Iterable[str]] = []
        pending_parts: list[Iterable[str]] = []
        other_parts: list[Iterable[str]] = []
        for rel in sorted(files):
            entry = files[rel]
            sids, _anchors, flags = entry.outline()
            if entry.kind == "v2":
                v2.update(zip(sids, repeat(entry)))  # a later file's frame overwrites, as before
                trusted_parts.append(compress(sids, flags))
                pending_parts.append(compress(sids, map(not_, flags)))
            else:
                for sid in sids:
                    legacy.setdefault(sid, entry)
                ids = sids if entry.kind == "d" else entry.comment_ids
                trusted_parts.append(ids)
                other_parts.append(ids)
        trusted = frozenset(chain.from_iterable(trusted_parts))
        pending = frozenset(chain.from_iterable(pending_parts)) - trusted
        every = frozenset(chain(v2, *other_parts))
        return cls(Path(root), dict(files), v2, legacy, trusted, pending, every)

    # -- queries --------------------------------------------------------------------------

    @property
    def problems(self) -> tuple[Problem, ...]:
        return tuple(f.problem for _, f in sorted(self.files.items()) if f.problem is not None)

    def frame(self, source_id: str) -> SourceFrame | None:
        """The v2 frame for ``source_id``, else the legacy (or D) one."""
        entry = self._v2.get(source_id) or self._legacy.get(source_id)
        return None if entry is None else entry.frame_of(source_id)

    def v2_frame(self, source_id: str) -> SourceFrame | None:
        entry = self._v2.get(source_id)
        return None if entry is None else entry.frame_of(source_id)

    def has_v2(self, source_id: str) -> bool:
        """Whether a v2 archive holds ``source_id`` (no frame is built to say so)."""
        return source_id in self._v2

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
        out = [entry.frame_of(sid) for sid, entry in self._v2.items()]
        out.extend(entry.frame_of(sid) for sid, entry in self._legacy.items() if sid not in self._v2)
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
        # 1. plain handle (a D reference starts with its "D": the usual file link skips the regex)
        if target[0] == "D" and parse_d_ref(target) is not None:
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

    @property
    def resolver(self) -> "SourceResolver":
        """``resolve_target`` as a resolver that also offers ``file_lookup`` (see ``topics``).
        A new one each time: kept on the index it would make the index part of a cycle, freed
        only by a full collection."""
        return SourceResolver(self)

    def file_lookup(self, topic_path: str, rel_part: str) -> Callable[[str], str | None] | None:
        """The function from a fragment to what ``resolve_target(topic_path, rel_part + "#" +
        fragment)`` finds in the file ``rel_part`` names, when that is an indexed v2 or legacy
        archive (steps 1 and 3 never apply to a target with "#" that the file answers)."""
        joined = _sources_file_of(topic_path, rel_part)
        entry = None if joined is None else self.files.get(joined)
        if entry is None or entry.kind not in ("v2", "legacy"):
            return None
        return entry.sid_at

    def _resolve_file_fragment(self, topic_path: str, rel_part: str, fragment: str) -> str | None:
        joined = _sources_file_of(topic_path, rel_part)
        if joined is None:
            return None
        entry = self.files.get(joined)  # only regular, non-symlink files are indexed
        if entry is None:
            return None
        if entry.kind in ("v2", "legacy"):
            return entry.sid_at(fragment)
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
            fr = self._legacy[source_id].frame_of(source_id)
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
            if entry is None or entry.kind != "d" or not entry.has_anchor(d_anchor(ref)):
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

    def _verified(self, entry: ArchiveFile) -> ArchiveFile:
        """``entry``, or the entry its file's bytes give now when it came from a persisted
        cache and those bytes are no longer the ones it was made from (its sha256 digest). A
        trust verdict lets a citation into memory: it is decided on bytes read by this
        process, never on a value another process left behind."""
        if not entry.__dict__.get(FROM_KEPT):
            return entry
        path = os.path.join(self.root, entry.path)
        try:
            data = _read_regular(path)
        except OSError:
            data = None
        if data is not None and entry.digest and hashlib.sha256(data).hexdigest() == entry.digest:
            entry.__dict__.pop(FROM_KEPT, None)
            return entry
        if data is None:
            return ArchiveFile(entry.path, entry.kind, NO_STAMP, (), False, Problem(CORRUPT_FILE, "unreadable", entry.path))
        return index_file(entry.path, data, NO_STAMP)

    def _check_new(self, ref: str, new: bool, allowed: Iterable[str] | None, rule: str, *, v2: bool) -> Problem | None:
        if not new:
            return None
        if v2:
            fr = self._verified(self._v2[ref]).frame_of(ref)
            if fr is None:
                return _ref_problem(f"missing source reference: {ref}", ref, rule or "exists")
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
    "SourceResolver",
    "SourceRecord",
    "TrustMeta",
    "V2Scan",
    "anchor",
    "archive_path",
    "archive_paths",
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
    "scan_well_formed",
    "speaker_label",
    "speaker_marker",
    "split_source_id",
]
