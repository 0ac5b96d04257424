"""The strict v2 scanner (memory spec §4.2): it stops at the first invalid frame and never
resynchronises, as OpenProgram's reader does.

Why the two readers share a module: it is one grammar, the v2 frame's, read two ways. The
one-pass scanner of well-formed archives (``scan_well_formed``) is only right because it
accepts exactly what the general frame loop (``_scan_frames``) accepts and gives the same
frames; side by side, a change to a rule is seen in both at once
(``tests/property/test_parse_fast_props.py`` compares them).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from .frames import MARKER, SourceFrame, _make_frame, decode_speaker
from .ids import ANCHOR_PREFIX, _FORBIDDEN_V2_RE, _location, anchor, split_source_id
from .trust import TrustMeta, decode_meta
from ..errors import CORRUPT_FILE, TRUNCATED_ARCHIVE, Problem


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
