"""Legacy provider archives and ``sources/D<n>.md`` benchmark archives (memory spec §4.6):
read-only, everything in them trusted, nothing authoritative."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from .frames import SourceFrame
from .ids import anchor, archive_path, split_source_id
from .scan import _ANCHOR_LINE, _COUNT_LINE, _SOURCE_LINE, _SPEAKER_LINE, _SPEAKER_PREFIX, _decode, _split_record_head
from ..errors import Problem


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
