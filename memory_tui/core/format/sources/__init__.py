"""OpenProgram's source archive (memory spec §4 format, §3.5 link targets, §5.4 step 6
reference checks). Everything here is byte-exact with OpenProgram's archive files; the
reader is strict where OpenProgram is strict (v2 scanning never resynchronises) and the index
scans each archive once per change (pitfall 4: OpenProgram re-reads a whole archive for every
citation).

The rooms, each importing only the ones listed after it:

* ``index``: ``SourceIndex``, every archive under ``sources/`` indexed once, re-indexed
  incrementally; link targets and reference checks
* ``entries``: ``ArchiveFile``, one indexed file, and ``index_file``
* ``legacy``: the read-only legacy and ``D<n>`` archives (§4.6)
* ``scan``: the strict v2 scanner and its one-pass reader of well-formed archives (§4.2)
* ``frames``: records, frames, speaker fields, the bytes a frame is rendered as (§4.2, §4.3)
* ``trust``: trust metadata (§4.4)
* ``ids``: source ids, locations, anchors, ``D`` references (§4.1)

The appender (``store/archives.py``) writes with these rules. This package re-exports the
names the rest of memory-tui uses, so callers import from ``format.sources``; a test that
patches a name patches it in the room that looks it up.
"""

from .entries import FROM_KEPT, HANDED, ArchiveFile, classify, index_file, proven, take_handed
from .frames import (MARKER, AppendResult, FrameFacts, SourceFrame, SourceRecord, decode_speaker, encode_speaker,
                     record_from_frame, render_archive, render_frame, speaker_label, speaker_marker)
from .ids import (APPEND_REFUSED, SOURCES_DIR, anchor, archive_path, archive_paths, d_anchor, d_archive_path,
                  is_v2_valid_id, parse_d_ref, pct, split_source_id)
from .index import SourceIndex, SourceResolver, walk_sources
from .legacy import LegacyScan, scan_d, scan_legacy
from .scan import V2Scan, scan_v2, scan_v2_appended, scan_well_formed
from .trust import TrustMeta, decode_meta, encode_meta, normalize_meta

__all__ = [
    "APPEND_REFUSED", "FROM_KEPT", "HANDED", "MARKER", "SOURCES_DIR",
    "AppendResult", "ArchiveFile", "FrameFacts", "LegacyScan", "SourceFrame", "SourceIndex", "SourceResolver", "SourceRecord",
    "TrustMeta", "V2Scan",
    "anchor", "archive_path", "archive_paths", "classify", "d_anchor", "d_archive_path", "decode_meta",
    "decode_speaker", "encode_meta", "encode_speaker", "index_file", "is_v2_valid_id", "normalize_meta",
    "parse_d_ref", "pct", "proven", "record_from_frame", "render_archive", "render_frame", "scan_d", "scan_legacy",
    "scan_v2", "scan_v2_appended", "scan_well_formed", "speaker_label", "speaker_marker", "split_source_id",
    "take_handed", "walk_sources",
]
