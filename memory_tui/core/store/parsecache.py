"""A persistent parse cache: a fresh process starts from the last one's parses.

Two kinds of parse entry, one file each (or one pack per kind), under ``<M>/<runtime-dir>/memory-tui-cache/<code tag>/``:

* **archives/** — the scanned :class:`~memory_tui.core.format.sources.ArchiveFile` of one
  ``sources/**/*.md`` file, keyed by its path and ``(mtime_ns, size, inode)``;
* **topics/** — the strict parse of one ``topics/**/*.md`` file, keyed by its path, the same
  stat key and the sha256 of its bytes, plus the archive dependencies of that parse
  (``topic_deps``) and their signature (``deps_signature``).

Exactness: an entry is used only when the file's stat key (for topics: or its digest) is
the one it was made from *and*, for a topic, the signature of every archive its links
point into is unchanged; anything else is parsed again. Stamps younger than the kernel's
clock tick (``is_racy``) are never stored, so a file rewritten within one tick
cannot hide behind an old entry. Topics whose parse has problems are never stored: a file
that needs reporting is always parsed for real. The directory name is a digest of the
parser code and the cache format, so other code's entries are never read.

The cache lives in the runtime dir: an internal name (memory spec §2.1) outside the revision
and outside git, never copied into a stage; OpenProgram ignores it. Topic and archive entries
are *rows* (plain tuples of their fields, rebuilt with positional constructors only when
used; a cold flush writes each kind as one ``<kind>.pack``); derived entries are plain data
too (id sets, strings, tuples). Every file is one envelope of the cache kit
(``cache.envelope``: kind, version, crc32, marshal payload), so no file names a class and
nothing but plain data comes out of one. A corrupt, truncated, foreign or unreadable entry
is ignored (and overwritten when its file is parsed again), never an error. Losing the cache
only costs time.
"""

from __future__ import annotations

import errno
import dataclasses
import hashlib
import os
import posixpath
import shutil
import stat as stat_mod
import threading
import time
from functools import lru_cache
from itertools import accumulate, chain, repeat
from operator import add, and_, attrgetter, eq, is_, itemgetter, methodcaller, sub
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..format.errors import Problem
from ..format.fastdata import bulk, positional
from ..fsutil import replace_cache_file
from ..format.paths import Layout
from ..cache import codec, envelope
from ..cache.stamp import MTIME, NO_STAMP, RACY_NS, SIZE, Stamp, is_racy, is_stamp, stamp_of, stamp_racy
from ..format.sources import (FROM_KEPT, ArchiveFile, proven, SourceFrame, SourceIndex, archive_paths, d_archive_path, decode_meta,
                      parse_d_ref, split_source_id, walk_sources)
from ..format.sources import take_handed as take_handed_frames
from ..format.topics import (Annotation, Evidence, Heading, SourceLink, Topic, Unit, assemble_tree, handed_links, parse_topic,
                     take_handed, read_topic_file, topic_sort_key)
from ..cache.registry import keeps



def topic_deps(topic: Topic) -> tuple[str, ...]:
    """Every ``sources/`` file whose content can change how ``topic`` parses or normalises."""
    handed = handed_links(topic)
    if handed is not None:  # the link fields the one-pass reader kept: no read of the objects
        targets, sids = list(map(_SECOND, handed)), list(map(_THIRD, handed))
    else:
        links = list(chain.from_iterable(map(_LINKS, topic.evidence)))
        targets, sids = list(map(_TARGET, links)), list(map(_SOURCE_ID, links))
    deps: set[str] = set()
    topic_dir = posixpath.dirname("topics/" + topic.path)
    # the file part of each link target (a topic links into a handful of archives)
    for rel_part in set(map(_FIRST, map(_PARTITION_HASH, map(str.strip, targets)))):
        joined = _file_dep(topic_dir, rel_part)
        if joined is not None:
            deps.add(joined)
    cited = set(sids)
    cited.discard(None)
    cited.discard("")
    if not cited:
        return tuple(sorted(deps))
    # an archive pair per place (provider and thread); most topics cite one or two places, so
    # the ids of the place of any one id are checked together: an id starting with
    # "<provider>/<thread>/" and longer splits into exactly those (neither holds a "/")
    places: dict[tuple[str, str], str] = {}  # (provider, thread) -> one id of it
    rest = cited
    some = next(iter(cited))
    parts = split_source_id(some)
    if parts is not None:
        place = f"{parts[0]}/{parts[1]}/"
        if all(map(str.startswith, cited, repeat(place))) and min(map(len, cited)) > len(place):
            places[parts[0], parts[1]] = some
            rest = ()
    for sid in rest:
        if sid[0] == "D" and parse_d_ref(sid) is not None:
            deps.add(d_archive_path(sid))
            continue
        parts = split_source_id(sid)
        if parts is not None:
            places.setdefault((parts[0], parts[1]), sid)
    for sid in places.values():  # the two paths depend on the place only
        try:
            v2, legacy = archive_paths(sid)
        except (ValueError, UnicodeEncodeError):
            continue
        deps.add(v2)
        deps.add(legacy)
    return tuple(sorted(deps))


_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)
_PARTITION_HASH = methodcaller("partition", "#")
_TARGET = attrgetter("target")
_SOURCE_ID = attrgetter("source_id")


@keeps
@lru_cache(maxsize=16384)
def _file_dep(topic_dir: str, rel_part: str) -> str | None:
    """The ``sources/`` file a link's path part names. Cached: thousands of links share a
    handful of archive files."""
    if rel_part and not rel_part.startswith("/") and "\\" not in rel_part:
        joined = posixpath.normpath(posixpath.join(topic_dir, rel_part))
        if joined.startswith("sources/"):
            return joined
    return None


def deps_signature(index: SourceIndex, deps: Iterable[str]) -> str:
    h = hashlib.sha256()
    for rel in deps:
        entry = index.files.get(rel)
        if entry is None:
            token = "-"
        elif entry.kind == "v2" and entry.digest:
            token = entry.digest
        else:
            token = f"{entry.kind}:{entry.key}"
        h.update(f"{rel}\x00{token}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


DIR_NAME = "memory-tui-cache"
FORMAT = 5  # 5: every file an envelope of the cache kit, every value plain data
# Per-topic values derived from one parse, keyed by what they are a function of:
# "views" (sha256, deps signature) -> viewcache.TopicPart as plain tuples (``part_plain``); "ids" (sha256,) -> file_block_ids;
# "refs" (sha256, deps signature) -> whether every source ref of the parse exists;
# "lineids" / "defids" (sha256,) -> normalize's per-text id sets (``WorkspaceCache.memo``);
# "links" (sha256, digest of the locations of the ids it links to) -> rewrite_block_links'
# output for the file; "scan" (sha256,) -> changes.scan_summary (what a record op needs of a
# file it does not touch); "blinks" (sha256,) -> normalize.topic_link_summary. Readers check
# the value's type: anything else is a miss.
DERIVED = ("views", "ids", "refs", "lineids", "defids", "links", "scan", "blinks")
# Kinds whose values are small: one envelope holds every entry of the kind (``<kind>.pack``),
# so a fresh process opens, checks and decodes one file instead of one per topic.
PACKED = frozenset(("ids", "refs", "lineids", "defids", "links", "scan", "blinks"))
PACK_SUFFIX = ".pack"
ENTRY_SUFFIX = ".entry"
# The parses themselves (big): their pack is a marshal pack (``decode_pack``).
BULK = frozenset(("archives", "topics"))
# Every packed kind (PACKED and BULK) is written the same way, so a flush costs what changed
# (a pack rewritten whole cost ~10 ms per one-record edit at scale 4): a flush
# that changes most entries of a kind (a cold start) writes the whole kind into its pack and
# removes the per-entry files; a smaller one writes only the changed entries, as per-entry
# files (``<kind>/<name>.entry``) that win over the pack when read. Once more per-entry files
# than LOOSE_MIN or an eighth of the kind exist, the next flush folds them into a new pack:
# a rewrite of N entries every N/8 changed ones, a bounded cost per change, and a bounded
# number of files for a fresh process to open. Every file is written whole under a temporary
# name and renamed into place, so a reader sees an old or a new file, never half of one; two
# processes flushing at once can only lose each other's entries (a pack write removes the
# per-entry files it lists), which costs a recomputation, never a wrong answer: every entry
# says what it is a function of and is checked against that when used.
LOOSE_MIN = 16

# The cache kit's stamp, ctime included: a same-size rewrite with its mtime put back keeps
# (mtime, size, inode) but never the ctime. An install that hard-links a topic file into its
# stage moves the ctime without touching a byte; a topic entry whose stamp differs only there
# is checked against the sha256 of the file's bytes (``topic_for_stat``) and re-stamped.
StatKey = Stamp


@keeps
@lru_cache(maxsize=1)
def code_tag() -> str:
    """A digest of the code whose output an entry holds (and of this format)."""
    from ..cache.codetag import code_tag as tag_of

    # The entries hold parses and the derived parts and memos that txcache and viewcache keep
    # in them; named, not imported, because those modules import this one.
    return tag_of(*(f"memory_tui.core.{name}" for name in (
        "format.topics", "format.sources", "format.errors", "store.txcache", "store.parsecache", "format.views",
        "store.viewcache", "format.normalize", "changes.request", "changes.labels", "changes.files", "changes.patch",
        "changes.records", "changes.workcopy", "format.fastdata", "format.blocklinks", "format.linkcheck",
        "store.treecache", "store.linkcache", "store.memos")), salt=f"format {FORMAT}", length=16)


stat_key = stamp_of
_racy = stamp_racy


# ------------------------------------------------------------------------------ encoding
#
# Every file of the cache is one envelope of the cache kit (``cache.envelope``: magic, kind,
# version, crc32, marshal payload): a per-entry file is ``(rel, body)`` of kind
# ``parse-<kind>``, a pack of kind ``parse-<kind>-pack`` (a ``pack_many`` of such pairs for the
# parses, one dict for the small derived kinds). Only plain data is stored (rows, frozensets,
# tuples, strings): a value marshal cannot hold is not stored, and a file that is not an intact
# envelope of its kind and this FORMAT is a miss.

def _entry_kind(kind: str) -> str:
    return "parse-" + kind


def _pack_kind(kind: str) -> str:
    return "parse-" + kind + "-pack"


def encode_entry(kind: str, rel: str, body: Any) -> bytes:
    """The per-entry file of ``rel``'s ``body`` in ``kind`` (ValueError: not plain data)."""
    return envelope.pack(_entry_kind(kind), (rel, body), FORMAT)


def decode_entry(kind: str, data: bytes) -> tuple[str, Any] | None:
    """``(rel, body)`` of an intact per-entry file of ``kind``, else ``None``."""
    value = envelope.unpack(_entry_kind(kind), data, FORMAT)
    if not (type(value) is tuple and len(value) == 2 and type(value[0]) is str):
        return None
    return value


def encode_pack(kind: str, table: Mapping[str, Any]) -> bytes:
    """The pack of a small derived ``kind``: every entry that is plain data."""
    try:
        return envelope.pack(_pack_kind(kind), dict(table), FORMAT)
    except ValueError:  # some value marshal cannot hold: leave that one out
        plain = {}
        for rel, body in table.items():
            try:
                envelope.packed_value(body)
            except ValueError:
                continue
            plain[rel] = body
        return envelope.pack(_pack_kind(kind), plain, FORMAT)


def decode_pack(kind: str, data: bytes) -> dict[str, Any]:
    """The entries of an intact pack of ``kind`` (either shape); ``{}`` for anything else."""
    if kind in BULK:
        items = envelope.unpack_many(_pack_kind(kind), data, FORMAT) or ()
        return {item[0]: item[1] for item in items
                if type(item) is tuple and len(item) == 2 and type(item[0]) is str}
    table = envelope.unpack(_pack_kind(kind), data, FORMAT)
    if type(table) is not dict:
        return {}
    return {rel: body for rel, body in table.items() if type(rel) is str}


# ------------------------------------------------------------------ rows: parses as plain data
#
# A topic or archive entry is stored as nested tuples of its fields, in field order, and
# rebuilt with the positional constructors (``fastdata.positional``): no class is named in
# the file, so nothing but these constructors can come out of it, and rebuilding ~10^5
# objects costs a fraction of unpickling them. Objects shared inside one parse (an
# evidence cited by several units, an annotation shared by a paragraph's aliases) are stored
# once and shared again. A parse these rows cannot represent exactly is not stored.

_make_link = positional(SourceLink)
_make_evidence = positional(Evidence)
_make_annotation = positional(Annotation)
_make_unit = positional(Unit)
_make_frame = positional(SourceFrame)
_ROW_ERRORS = (TypeError, ValueError, IndexError, KeyError, AttributeError)  # a row of the wrong shape


class _Unrepresentable(Exception):
    """A parse the rows format does not hold exactly (it is then simply not stored)."""


def topic_rows(topic: Topic) -> tuple:
    """A topic as columns: the definitions, their links (one flat table with a count per
    definition), the annotations and the units (each with flat references and counts), and
    the strings that are slices of a longer one as spans (see ``_spans``). Each one-per-record
    structure is then a handful of C-level ``map``/``zip`` calls to rebuild.

    Built the same way: every column is a ``map`` of an ``attrgetter`` over the objects (a
    cold flush writes 20 000 units and definitions; a Python loop over them was half its
    time), with a per-item loop only for what the C-level pass cannot vouch for."""
    handed = take_handed(topic)
    if handed is not None:
        return _handed_rows(topic, *handed)
    path = topic.path
    same = {}.setdefault  # equal values written once (marshal refers back to an object it wrote)
    text = topic.text
    evidence = topic.evidence
    units = topic.units
    if any(map(path.__ne__, map(_TOPIC_PATH, evidence))) or any(map(path.__ne__, map(_TOPIC_PATH, units))):
        raise _Unrepresentable(path)
    starts = _line_starts(text)
    ev_links = list(map(_LINKS, evidence))
    flat_links = list(chain.from_iterable(ev_links))
    if flat_links:
        labels, targets, sids = zip(*map(_LINK_FIELDS, flat_links))
        links = (tuple(map(same, labels, labels)), targets, sids)
    else:
        links = ()
    etext_strs = list(map(_TEXT, evidence))
    etexts = _spans_at(etext_strs, text, map(_LINE, evidence), starts)
    raws = _tails_in(list(map(_RAW_SOURCES, evidence)), etext_strs)
    if evidence:
        ids, raw_whens, whens, lines, legacies, non_ascii = zip(*map(_EV_FIELDS, evidence))
        evs = (ids, tuple(map(same, raw_whens, raw_whens)), tuple(map(same, whens, whens)), lines, legacies,
               non_ascii)
    else:
        evs = ()
    unit_anns = list(map(_ANNOTATIONS, units))
    flat_anns = list(chain.from_iterable(unit_anns))
    by_id = dict(zip(map(id, flat_anns), flat_anns))  # first appearance order; an alias shares its paragraph's
    ann_at = dict(zip(by_id, range(len(by_id))))
    distinct = list(by_id.values())
    ann_evs = list(map(_EVIDENCE, distinct))
    ev_at = dict(zip(map(id, evidence), range(len(evidence))))
    try:
        cited = tuple(map(ev_at.__getitem__, map(id, chain.from_iterable(ann_evs))))
    except KeyError:  # evidence that is not one of the topic's definitions
        raise _Unrepresentable(path) from None
    quotes = tuple(map(_QUOTE, distinct))
    refs = tuple(map(ann_at.__getitem__, map(id, flat_anns)))
    body_strs = list(map(_BODY, units))
    bodies = _spans_at(body_strs, text, map(_LINE, units), starts)
    content_strs = list(map(_CONTENT, units))
    if content_strs and all(content_strs) and all(map(str.startswith, body_strs, content_strs)):
        contents: tuple | list = [tuple(map(len, content_strs))]
    else:
        contents = _prefixes([len(c) if c and b.startswith(c) else c for c, b in zip(content_strs, body_strs)])
    if units:
        mids, headings, source_refs, rels, uwhens, ulines, ends, aliases, ulegacies, unon_ascii = zip(
            *map(_UNIT_FIELDS, units))
        unit_cols = (mids, tuple(map(same, headings, headings)), source_refs, rels, tuple(map(same, uwhens, uwhens)),
                     ulines, ends, aliases, ulegacies, unon_ascii)
    else:
        unit_cols = ()
    heads = tuple([(h.level, h.title, h.line) for h in topic.headings])
    problems = tuple([(p.code, p.message, p.path, p.line, p.column, p.details) for p in topic.problems])
    return (path, text, heads, evs, etexts, raws, links, _counts(list(map(len, ev_links))),
            quotes, cited, _counts(list(map(len, ann_evs))), unit_cols, bodies, contents,
            refs, _counts(list(map(len, unit_anns))), problems)


def _handed_rows(topic: Topic, defs: list[tuple], link_fields: list[tuple], records: list[tuple]) -> tuple:
    """``topic_rows`` of a topic the one-pass reader read, from the fields it handed over
    (``topics.take_handed``) instead of the objects. What that reader accepts fixes the
    shapes: every definition is a whole line and each record's body starts its line, one
    annotation per record (its quote, a prefix of the body), no problems; the columns are
    the ones ``topic_rows`` reads off the objects (tests compare the two)."""
    same = {}.setdefault
    starts = _line_starts(topic.text)
    n_ev = len(defs)
    if defs:
        ids, raw_whens, whens, lines, src_starts, src_ends, lengths, n_links = zip(*defs)
        falses = (False,) * n_ev
        # a parsed time is memoised by its text: equal ones are one object already
        evs = (ids, tuple(map(same, raw_whens, raw_whens)), whens, lines, falses, falses)
        at = tuple(map(starts.__getitem__, map(sub, lines, repeat(1))))
        etexts = [at, tuple(map(add, at, lengths))]
        raws = [src_starts, src_ends]
        link_counts = _counts(n_links)
    else:
        evs, etexts, raws, link_counts = (), [(), ()], [(), ()], None
    if link_fields:
        labels, targets, sids = zip(*link_fields)
        links = (tuple(map(same, labels, labels)), targets, sids)
    else:
        links = ()
    n = len(records)
    if records:
        mids, headings, quotes, body_lengths, cited_at, source_refs, rels, uwhens, ulines, aliases = zip(*records)
        falses = (False,) * n
        # a heading chain is one object for its section's records, a time one per text
        unit_cols = (mids, headings, source_refs, rels, uwhens, ulines, ulines, aliases, falses, falses)
        at = tuple(map(starts.__getitem__, map(sub, ulines, repeat(1))))
        bodies = [at, tuple(map(add, at, body_lengths))]
        contents = [tuple(map(len, quotes))]
        cited = tuple(chain.from_iterable(cited_at))
        cited_counts = _counts(list(map(len, cited_at)))
    else:
        quotes, unit_cols, bodies, contents, cited, cited_counts = (), (), [(), ()], (), (), None
    heads = tuple([(h.level, h.title, h.line) for h in topic.headings])
    return (topic.path, topic.text, heads, evs, etexts, raws, links, link_counts, quotes, cited, cited_counts,
            unit_cols, bodies, contents, tuple(range(n)), None, ())


_TOPIC_PATH = attrgetter("topic_path")
_LINKS = attrgetter("links")
_LINK_FIELDS = attrgetter("label", "target", "source_id")
_TEXT = attrgetter("text")
_LINE = attrgetter("line")
_RAW_SOURCES = attrgetter("raw_sources")
_EV_FIELDS = attrgetter("id", "raw_when", "when", "line", "legacy", "non_ascii_time")
_ANNOTATIONS = attrgetter("annotations")
_EVIDENCE = attrgetter("evidence")
_QUOTE = attrgetter("quote")
_BODY = attrgetter("body")
_CONTENT = attrgetter("content")
_UNIT_FIELDS = attrgetter("memory_id", "headings", "source_refs", "relation_targets", "when", "line", "end_line",
                          "aliases", "legacy", "non_ascii_time")


def _line_starts(text: str) -> list[int]:
    """The offset of each LF-separated line of ``text`` (index = 1-based line number - 1)."""
    return list(accumulate(map(add, map(len, text.split("\n")), repeat(1)), initial=0))


def _spans_at(parts: list[str], whole: str, lines: Iterable[int], starts: list[int]) -> tuple | list:
    """``_spans`` of ``parts``, each looked for in ``whole`` from the start of its 1-based line
    (only where to start looking: any occurrence is the same string, and a line numbering
    that is not LF's only makes a part be looked for again from the beginning)."""
    last = len(starts) - 1
    try:
        hints = list(map(starts.__getitem__, map(min, map(sub, lines, repeat(1)), repeat(last))))
    except (IndexError, TypeError):
        hints = [0] * len(parts)
    if all(map(whole.startswith, parts, hints)):  # a definition line, a paragraph from its first column
        return [tuple(hints), tuple(map(add, hints, map(len, parts)))]
    found = list(map(whole.find, parts, hints))
    if -1 not in found:
        return [tuple(found), tuple(map(add, found, map(len, parts)))]
    items: list = []
    for part, at in zip(parts, found):
        if at < 0:
            at = whole.find(part)
        items.append(part if at < 0 else (at, at + len(part)))
    return _spans(items)


def _tails_in(parts: list[str], wholes: list[str]) -> tuple | list:
    """``_spans`` of each part as its last occurrence in its own whole string."""
    found = list(map(str.rfind, wholes, parts))
    if -1 not in found:
        return [tuple(found), tuple(map(add, found, map(len, parts)))]
    return _spans([part if at < 0 else (at, at + len(part)) for part, at in zip(parts, found)])


_TOPIC_ROW_WIDTH = 17


def _columns(rows: list[tuple]) -> tuple:
    """Rows stored field by field (one tuple per field): marshal then builds a dozen tuples
    instead of one per record, and the decoder maps the constructors over the columns."""
    return tuple(zip(*rows)) if rows else ()


def _unzip(columns: tuple, width: int, n: int | None = None) -> tuple:
    """The columns of a stored table, all of one length (``map`` would silently stop at the
    shortest) and, given ``n``, of that length."""
    if not columns:
        if n:
            raise ValueError("an empty table for a non-empty one")
        return ((),) * width
    if len(columns) != width or len({len(c) for c in columns}) != 1 or (n is not None and len(columns[0]) != n):
        raise ValueError("columns of different lengths")
    return columns


def _counts(counts: list[int]) -> tuple[int, ...] | None:
    """How many items each record has in a flat table; ``None`` when every one has one."""
    return None if all(c == 1 for c in counts) else tuple(counts)


def _grouped(flat: list, counts: tuple[int, ...] | None, n: int) -> list[tuple]:
    """``flat`` cut into ``n`` tuples of ``counts`` items (one each for ``None``)."""
    if counts is None:
        if len(flat) != n:
            raise ValueError("a flat table of the wrong length")
        return list(zip(flat))  # one-item tuples, built in C
    if len(counts) != n or sum(counts) != len(flat):
        raise ValueError("counts that do not cover the flat table")
    out = []
    at = 0
    for c in counts:
        out.append(tuple(flat[at:at + c]))
        at += c
    return out


def _spans(items: list) -> tuple | list:
    """A column of strings, each itself or a ``(start, end)`` span of another string: when
    every item is a span, the starts and the ends as two int columns in a *list* (marshal
    keeps list and tuple apart), rebuilt by ``map(slice)``; else the column as it is."""
    if items and all(type(x) is tuple for x in items):
        return [tuple([x[0] for x in items]), tuple([x[1] for x in items])]
    return tuple(items)


def _sliced(column: tuple | list, bases: Any, n: int) -> list[str]:
    """The strings of a ``_spans`` column; ``bases`` is one string (every span is in it) or a
    list of one string per item."""
    one = type(bases) is str
    if type(column) is list:
        starts, ends = column
        if not (len(starts) == len(ends) == n):
            raise ValueError("span columns of the wrong length")
        if one:
            return list(map(bases.__getitem__, map(slice, starts, ends)))
        return list(map(str.__getitem__, bases, map(slice, starts, ends)))
    if len(column) != n:
        raise ValueError("a column of the wrong length")
    if one:
        return [t if type(t) is str else bases[t[0]:t[1]] for t in column]
    return [t if type(t) is str else b[t[0]:t[1]] for t, b in zip(column, bases)]


def _prefixes(items: list) -> tuple | list:
    """A column of strings, each itself or the length of the prefix of its body it is: all
    lengths as one int column in a list (``map(slice)`` again), else the column itself."""
    if items and all(type(x) is int for x in items):
        return [tuple(items)]
    return tuple(items)


def topic_from_rows(rows: tuple) -> Topic:
    (path, text, heads, evs, etexts, raws, links, link_counts, quotes, cited, cited_counts, units, bodies, contents,
     refs, ref_counts, problems) = rows
    n_ev = len(evs[0]) if evs else 0
    ids, raw_whens, whens, lines, legacies, non_ascii = _unzip(evs, 6, n_ev)
    etexts = _sliced(etexts, text, n_ev)
    raws = _sliced(raws, etexts, n_ev)
    labels, targets, sids = _unzip(links, 3)
    made_links = _grouped(list(map(_make_link, labels, targets, sids)), link_counts, n_ev)
    evidence = list(map(_make_evidence, ids, raw_whens, whens, made_links, repeat(path), lines, legacies, non_ascii,
                        raws, etexts))
    annotations = list(map(_make_annotation, quotes,
                           _grouped(list(map(evidence.__getitem__, cited)), cited_counts, len(quotes))))
    n = len(units[0]) if units else 0
    mids, headings, source_refs, rels, whens, lines, ends, aliases, legacies, non_ascii = _unzip(units, 10, n)
    bodies = _sliced(bodies, text, n)
    if type(contents) is list:
        (lengths,) = contents
        if len(lengths) != n:
            raise ValueError("a column of the wrong length")
        contents = list(map(str.__getitem__, bodies, map(slice, lengths)))
    else:
        if len(contents) != n:
            raise ValueError("a column of the wrong length")
        contents = [c if type(c) is str else b[:c] for c, b in zip(contents, bodies)]
    anns = _grouped(list(map(annotations.__getitem__, refs)), ref_counts, n)
    made = tuple(map(_make_unit, mids, repeat(path), headings, contents, bodies, anns, source_refs, rels, whens, lines,
                     ends, aliases, legacies, non_ascii))
    return Topic(path, text, made, tuple(evidence), tuple([Heading(*h) for h in heads]),
                 tuple([Problem(c, m, p, ln, col, dict(d)) for c, m, p, ln, col, d in problems]))


# A topic's stored entry is its head — what a tree needs before any unit is built: path,
# text, headings, problems, the units' ids — and the rest of its rows as one marshal blob
# inside it, decoded when the topic's units are first read. The pack's crc covers the blob
# when the pack is read; reading the pack then decodes a handful of objects per topic instead
# of ~10^3 tuples (and the collection that follows does not traverse them).
_TOPIC_HEAD_WIDTH = 6


def topic_head(rows: tuple) -> tuple:
    """The stored form of ``topic_rows``' rows (see above)."""
    units = rows[11]
    try:
        return (rows[0], rows[1], rows[2], rows[16], units[0] if units else (), codec.dumps(rows[2:], 4))
    except ValueError:  # a value marshal cannot hold (say, a details object)
        raise _Unrepresentable(rows[0]) from None


def rows_of_head(head: tuple) -> tuple:
    """``topic_rows``' rows back from their stored form."""
    rows = (head[0], head[1], *codec.loads(head[5]))
    if len(rows) != _TOPIC_ROW_WIDTH:
        raise ValueError("a topic blob of the wrong width")
    return rows


def topic_deferred(head: tuple, reparse: Callable[[str, str], Topic]) -> Topic:
    """``topic_from_rows(rows_of_head(head))`` with its units and evidence built on first use
    (``Topic.deferred``). What is read now — path, text, headings, problems, the units' ids —
    is checked now; the rest comes from the same crc-checked pack, so building it can fail
    only on a bug, and then the topic is parsed from its text (``reparse(path, text)``, the
    parse these rows were made from) instead; either way its ids are checked."""
    path, text, heads, problems, mids, blob = head
    if type(path) is not str or type(text) is not str or type(blob) is not bytes or type(mids) is not tuple:
        raise ValueError("a topic head of the wrong shape")
    if mids and set(map(type, mids)) != {str}:
        raise ValueError("a memory id that is not a string")
    headings = tuple([Heading(*h) for h in heads])
    problem_objs = tuple([Problem(c, m, p, ln, col, dict(d)) for c, m, p, ln, col, d in problems])

    def build() -> tuple[tuple, tuple]:
        try:
            with bulk():
                topic = topic_from_rows(rows_of_head(head))
        except (*_ROW_ERRORS, EOFError):
            topic = reparse(path, text)
        if tuple(map(_MID, topic.units)) != mids:
            raise RuntimeError(f"the cached parse of {path} does not hold its ids")
        return topic.units, topic.evidence

    return Topic.deferred(path, text, headings, problem_objs, mids, build)


_MID = attrgetter("memory_id")


# Strings that are slices of another stored string are stored as where they sit in it (a
# third of the bytes: less to read, check and decode); each is verified before it is used.

def _text_in(text: str, lines: tuple[str, ...]) -> str | int:
    """A frame's text as the offset in its first line where it starts (the rest of the
    record lines follow it verbatim), else the text itself."""
    if not lines:
        return text
    if len(lines) == 1:  # most records: the text is the end of the line
        start = len(lines[0]) - len(text)
        return start if start >= 0 and lines[0].endswith(text) else text
    rest = len(text) - sum(len(line) + 1 for line in lines[1:])
    start = len(lines[0]) - rest
    if rest < 0 or start < 0:
        return text
    rebuilt = lines[0][start:] if len(lines) == 1 else "\n".join([lines[0][start:], *lines[1:]])
    return start if rebuilt == text else text


def archive_rows(entry: ArchiveFile) -> tuple:
    """An archive as ``(path, kind, key, outline, frames blob, complete, comment_ids,
    anchor_lines, digest, scan row)``: the outline (source ids, anchors, trusted flags) is
    what an index is built from; the rest of every frame is one marshal blob inside the
    entry, decoded only when the archive's frames are asked for (``ArchiveFile.deferred``)."""
    same = {}.setdefault  # equal values written once: speakers, tokens, stamps repeat
    handed = take_handed_frames(entry)
    if handed is not None:
        return _handed_archive_rows(entry, *handed, same)
    frames = entry.frames
    if frames:
        (speakers, tokens, lines, stamps, labels, texts, pending, paths, numbers,
         kinds) = zip(*map(_FRAME_FIELDS, frames))
        # decode_meta is memoised: a frame read from its token holds the very object it returns
        if list(map(decode_meta, tokens)) != list(map(_META, frames)):
            raise _Unrepresentable(entry.path)
        # stamps are not merged: nearly every record has its own
        columns = (_shared(speakers, same), _shared(tokens, same), lines, stamps, _shared(labels, same),
                   _texts_in(texts, lines), pending, _shared(paths, same), numbers, _shared(kinds, same))
    else:
        columns = ()
    scan = entry.scan
    if scan is None:
        scan_row = None
    elif scan.frames == entry.frames and scan.problem is None:
        scan_row = (scan.complete, scan.ends_with_lf, scan.n_lines, scan.resumable)
    else:
        raise _Unrepresentable(entry.path)
    if entry.problem is not None:
        raise _Unrepresentable(entry.path)
    outline = entry.outline()
    if not set(map(type, outline[2])) <= {bool}:
        raise _Unrepresentable(entry.path)
    try:
        blob = codec.dumps(columns, 4)
    except ValueError:  # a value marshal cannot hold
        raise _Unrepresentable(entry.path) from None
    return (entry.path, entry.kind, entry.key, outline, blob, entry.complete, entry.comment_ids, entry.anchor_lines,
            entry.digest, scan_row)


def _handed_archive_rows(entry: ArchiveFile, handed: list[tuple], scan_row: tuple, same: Any) -> tuple:
    """``archive_rows`` of a well-formed v2 archive's entry from the fields it was made from
    (``sources.take_handed``), without building its frames. That reading fixes the shapes:
    every frame has record lines and its meta decoded from its token, path and kind are the
    entry's, the scan is complete with no problem (tests compare the two row sets)."""
    outline = entry.outline()
    if entry.problem is not None or entry.kind != "v2" or len(handed) != len(outline[0]):
        raise _Unrepresentable(entry.path)
    n = len(handed)
    if handed:
        (_sids, _anchors, _trusted, speakers, tokens, lines, stamps, labels, offsets, pending,
         numbers) = zip(*handed)
        columns = (_shared(speakers, same), _shared(tokens, same), lines, stamps, _shared(labels, same), offsets,
                   pending, (entry.path,) * n, numbers, ("v2",) * n)
        if not set(map(type, outline[2])) <= {bool}:
            raise _Unrepresentable(entry.path)
    else:
        columns = ()
    try:
        blob = codec.dumps(columns, 4)
    except ValueError:
        raise _Unrepresentable(entry.path) from None
    return (entry.path, entry.kind, entry.key, outline, blob, entry.complete, entry.comment_ids, entry.anchor_lines,
            entry.digest, scan_row)


_FRAME_FIELDS = attrgetter("speaker_id_raw", "meta_token", "lines", "timestamp", "speaker_label", "text", "pending",
                           "path", "line", "kind")
_META = attrgetter("meta")


def _shared(column: tuple, same: Any) -> tuple:
    """``column`` with equal values as one object (marshal then writes each once); a column
    that is one object throughout (a scan's path, its kind) is already that."""
    if all(map(is_, column, repeat(column[0]))):
        return column
    return tuple(map(same, column, column))


def _texts_in(texts: tuple[str, ...], lines: tuple[tuple[str, ...], ...]) -> tuple:
    """``_text_in`` of every frame: for the one-line records, whose text ends their line, the
    offsets in C; a frame of any other shape goes through ``_text_in``."""
    try:
        firsts = list(map(itemgetter(0), lines))
    except IndexError:  # a frame without record lines
        return tuple(map(_text_in, texts, lines))
    one_line = map(eq, map(len, lines), repeat(1))
    if all(map(and_, one_line, map(str.endswith, firsts, texts))):
        return tuple(map(sub, map(len, firsts), map(len, texts)))
    return tuple(map(_text_in, texts, lines))


_ARCHIVE_ROW_WIDTH = 10


def _archive_row_ok(rows: Any, rel: str) -> bool:
    """The shape of one stored archive row, checked when the pack is read (so a frame built
    later can only fail on a bug, never on a damaged file: the pack's crc covered it)."""
    if not (isinstance(rows, tuple) and len(rows) == _ARCHIVE_ROW_WIDTH and rows[0] == rel
            and type(rows[4]) is bytes and isinstance(rows[3], tuple) and len(rows[3]) == 3):
        return False
    sids, anchors, trusted = rows[3]
    return (type(sids) is tuple and type(anchors) is tuple and type(trusted) is tuple
            and len(sids) == len(anchors) == len(trusted))


def archive_from_rows(rows: tuple) -> ArchiveFile:
    """The entry the rows hold; its frames are built from the blob on first use."""
    path, kind, key, outline, blob, complete, comment_ids, anchor_lines, digest, scan_row = rows
    sids, anchors, trusted = outline
    if not (type(blob) is bytes and len(sids) == len(anchors) == len(trusted)):
        raise ValueError(f"archive rows of {path} are malformed")

    def build() -> tuple[SourceFrame, ...]:
        with bulk():
            return _frames_from_blob(path, blob, sids, anchors, trusted, len(sids))

    return ArchiveFile.deferred(path, kind, tuple(key), (tuple(sids), tuple(anchors), tuple(trusted)), build,
                                complete, frozenset(comment_ids), frozenset(anchor_lines), digest,
                                None if scan_row is None else tuple(scan_row))


def _frames_from_blob(path: str, blob: bytes, sids: tuple, anchors: tuple, trusted: tuple,
                      n: int) -> tuple[SourceFrame, ...]:
    speakers, tokens, lines, stamps, labels, texts, pending, paths, numbers, kinds = _unzip(codec.loads(blob), 10)
    if len(speakers) != n:
        raise ValueError(f"archive rows of {path}: {len(speakers)} frames for {n} ids")
    metas = [decode_meta(tok) if tok is not None else None for tok in tokens]
    texts = [t if type(t) is str else (ls[0][t:] if len(ls) == 1 else "\n".join([ls[0][t:], *ls[1:]]))
             for t, ls in zip(texts, lines)]
    return tuple(map(_make_frame, sids, anchors, speakers, metas, lines, stamps, labels, texts, trusted, pending,
                     paths, numbers, kinds, tokens))


class _Stored:
    """Rows read from disk, rebuilt into objects only when an entry is used."""

    __slots__ = ("rows",)

    def __init__(self, rows: tuple) -> None:
        self.rows = rows


def _name(rel: str) -> str:
    return hashlib.sha256(rel.encode("utf-8", "surrogatepass")).hexdigest()[:32] + ENTRY_SUFFIX


# --------------------------------------------------------------------------------- store


@dataclasses.dataclass
class _TopicEntry:
    key: StatKey
    sha: str
    topic: Any  # memory_tui.core.format.topics.Topic
    deps: tuple[str, ...]
    sig: str
    rows: tuple | None = None  # the stored head (``topic_head``) ``topic`` was made from


class ParseStore:
    """The cache of one memory root. Use through :func:`store_for`; thread-safe.

    Readers only read it; :meth:`flush` (called by transactions, which write anyway) writes
    what readers and writers of this process parsed since."""

    def __init__(self, memory_root: Path) -> None:
        self.memory_root = Path(memory_root)
        self.dir = Layout(self.memory_root).runtime_dir / DIR_NAME / code_tag()
        self.lock = threading.RLock()
        self._archives: dict[str, tuple[StatKey, Any]] | None = None
        self._topics: dict[str, _TopicEntry] | None = None
        self._dirty_archives: set[str] = set()
        self._dirty_topics: set[str] = set()
        # derived per-file values (kinds in DERIVED): rel -> (*key, value); see derived()
        self._derived: dict[str, dict[str, tuple]] = {}
        self._dirty_derived: dict[str, set[str]] = {kind: set() for kind in DERIVED}
        # per kind, the entries whose per-entry file (written after the pack) was read or written
        self._loose: dict[str, set[str]] = {}

    # -- reading ------------------------------------------------------------------------
    def _load_pack(self, kind: str) -> dict[str, Any]:
        try:
            data = _read(str(self.dir / (kind + PACK_SUFFIX)))
        except OSError:
            return {}
        return decode_pack(kind, data)

    def _load_kind(self, kind: str) -> dict[str, Any]:
        with bulk():
            return self._load_kind_files(kind)

    def _load_kind_files(self, kind: str) -> dict[str, Any]:
        out: dict[str, Any] = self._load_pack(kind)
        loose = self._loose[kind] = set()
        folder = self.dir / kind
        try:
            names = os.listdir(folder)
        except OSError:
            return out
        base = str(folder) + os.sep
        for name in names:
            if not name.endswith(ENTRY_SUFFIX):
                continue
            try:
                value = decode_entry(kind, _read(base + name))
            except OSError:
                continue
            if value is None:
                continue
            rel, body = value
            if _name(rel) == name:
                out[rel] = body
                loose.add(rel)
        return out

    def _archive_map(self) -> dict[str, tuple[StatKey, Any]]:
        """rel -> (stat key, ArchiveFile or the _Stored rows of one[, the rows it came from])."""
        if self._archives is None:
            loaded = self._load_kind("archives")
            self._archives = {
                rel: (tuple(body[0]), _Stored(body[1])) for rel, body in loaded.items()
                if isinstance(body, tuple) and len(body) == 2 and _is_key(body[0]) and _archive_row_ok(body[1], rel)
            }
        return self._archives

    def _archive_hit(self, rel: str, key: StatKey) -> Any:
        """The cached scan of ``rel`` made from exactly ``key``, else ``None``."""
        cached = self._archive_map()
        hit = cached.get(rel)
        if hit is None or hit[0] != key or _racy(key):
            return None
        entry = hit[1]
        if isinstance(entry, _Stored):
            rows = entry.rows
            try:
                entry = archive_from_rows(rows)
            except _ROW_ERRORS:  # not rows this code wrote: a miss, overwritten by the next flush
                del cached[rel]
                return None
            cached[rel] = (key, entry, rows)  # the rows are what a flush writes again for it
            entry.__dict__[FROM_KEPT] = True  # a trust verdict on it checks its bytes first
        return entry

    def _topic_map(self) -> dict[str, _TopicEntry]:
        if self._topics is None:
            loaded = self._load_kind("topics")
            self._topics = {}
            for rel, body in loaded.items():
                if (isinstance(body, tuple) and len(body) == 5 and _is_key(body[0]) and isinstance(body[1], str)
                        and isinstance(body[3], tuple) and isinstance(body[4], str) and isinstance(body[2], tuple)
                        and len(body[2]) == _TOPIC_HEAD_WIDTH and body[2][0] == rel):
                    self._topics[rel] = _TopicEntry(tuple(body[0]), body[1], _Stored(body[2]), tuple(body[3]), body[4])
        return self._topics

    def _topic_of(self, rel: str, hit: _TopicEntry, index: Any) -> Any:
        topic = hit.topic
        if isinstance(topic, _Stored):
            rows = topic.rows
            resolve = index.resolve_target
            try:
                topic = topic_deferred(rows, lambda path, text: parse_topic(path, text, resolve=resolve, strict=True))
            except _ROW_ERRORS:
                del self._topic_map()[rel]
                return None
            hit.topic = topic
            hit.rows = rows  # what a flush writes again for it, without building or encoding it
        return topic

    # -- archives -----------------------------------------------------------------------
    def source_index(self, previous: Any = None) -> Any:
        """``SourceIndex.load`` that starts from cached scans of unchanged archives."""

        with self.lock:
            if previous is not None and Path(previous.root) == self.memory_root:
                prior_files = dict(previous.files)
            else:
                prior_files = {}
            keys: dict[str, StatKey] = {}
            walked = list(walk_sources(self.memory_root))
            for rel, _path, st in walked:
                keys[rel] = stat_key(st)
            if prior_files and keys.keys() == prior_files.keys() and all(
                    prior_files[rel].key == key and proven(prior_files[rel]) for rel, key in keys.items()):
                return previous  # what SourceIndex.load would rebuild from the very same entries
            cached = self._archive_map()
            for rel, key in keys.items():
                if rel in prior_files and proven(prior_files[rel]):
                    continue
                hit = self._archive_hit(rel, key)
                if hit is not None:
                    prior_files[rel] = hit
            index = SourceIndex.load(self.memory_root, previous=_Prior(self.memory_root, prior_files), walked=walked)
            for rel, entry in index.files.items():
                key = keys.get(rel)
                if key is None or _racy(key) or entry.key != key or entry.problem is not None or not proven(entry):
                    continue
                hit = cached.get(rel)
                if hit is None or hit[0] != key or hit[1] is not entry:
                    cached[rel] = (key, entry)
                    self._dirty_archives.add(rel)
            for rel in [r for r in cached if r not in index.files]:
                del cached[rel]
                self._dirty_archives.add(rel)
            return index

    # -- topics -------------------------------------------------------------------------
    def topic_for_stat(self, rel: str, key: StatKey, index: Any) -> Any:
        """The cached strict parse of ``topics/<rel>`` if its stat key and deps are unchanged."""

        with self.lock:
            hit = self._topic_map().get(rel)
            if hit is None:
                return None
            if hit.key != key or _racy(key):
                if hit.key[:3] != key[:3] or not self._same_bytes(rel, hit, key):
                    return None
            if deps_signature(index, hit.deps) != hit.sig:
                return None
            return self._topic_of(rel, hit, index)

    def _same_bytes(self, rel: str, hit: _TopicEntry, key: StatKey) -> bool:
        """Whether ``topics/<rel>``, whose stamp differs from the entry's only in its ctime (a
        hard link or chmod by an install), still holds the bytes the entry was parsed from;
        if so the entry is re-stamped (git's index refresh), unless the new stamp is racy."""
        try:
            data = _read(os.path.join(self.memory_root, "topics", rel))
        except OSError:
            return False
        if len(data) != key[SIZE] or hashlib.sha256(data).hexdigest() != hit.sha:
            return False
        if not _racy(key):
            hit.key = key
            self._dirty_topics.add(rel)
        return True

    def topic_for_sha(self, rel: str, sha: str, index: Any) -> tuple[Any, tuple[str, ...], str] | None:
        """``(topic, deps, sig)`` cached for this exact text (by digest), deps unchanged."""

        with self.lock:
            hit = self._topic_map().get(rel)
            if hit is None or hit.sha != sha:
                return None
            if deps_signature(index, hit.deps) != hit.sig:
                return None
            topic = self._topic_of(rel, hit, index)
            return None if topic is None else (topic, hit.deps, hit.sig)

    def put_topic(self, rel: str, key: StatKey | None, sha: str, topic: Any, deps: tuple[str, ...], sig: str) -> None:
        """Remember a problem-free strict parse (``key`` None: known by digest only)."""
        if not topic.ok or topic.path != rel:
            return
        with self.lock:
            topics = self._topic_map()
            old = topics.get(rel)
            stored_key: StatKey = key if key is not None and not _racy(key) else NO_STAMP
            if old is not None and old.sha == sha and old.sig == sig and (old.key == stored_key or stored_key[0] == -1):
                return
            topics[rel] = _TopicEntry(stored_key, sha, topic, deps, sig)
            self._dirty_topics.add(rel)

    def retain_topics(self, live: Iterable[str]) -> None:
        live = set(live)
        with self.lock:
            topics = self._topic_map()
            for rel in [r for r in topics if r not in live]:
                del topics[rel]
                self._dirty_topics.add(rel)
        self.retain_derived(live)

    # -- derived per-file values -----------------------------------------------------------
    def _derived_map(self, kind: str) -> dict[str, tuple]:
        table = self._derived.get(kind)
        if table is None:
            table = self._derived[kind] = {
                rel: body for rel, body in self._load_kind(kind).items() if isinstance(body, tuple) and len(body) >= 2
            }
        return table

    def derived(self, kind: str, rel: str, key: tuple) -> Any:
        """The value stored for ``topics/<rel>`` under exactly ``key`` (e.g. its sha256 and
        deps signature), else ``None``."""
        with self.lock:
            body = self._derived_map(kind).get(rel)
            if body is None or body[:-1] != key:
                return None
            return body[-1]

    def put_derived(self, kind: str, rel: str, key: tuple, value: Any) -> None:
        with self.lock:
            table = self._derived_map(kind)
            body = (*key, value)
            old = table.get(rel)
            if old is not None and old[:-1] == key:
                return
            table[rel] = body
            self._dirty_derived[kind].add(rel)

    def retain_derived(self, live: Iterable[str]) -> None:
        live = set(live)
        with self.lock:
            for kind in DERIVED:
                table = self._derived.get(kind)
                if table is None:  # never loaded: nothing to prune in memory, entries stay valid by key
                    continue
                for rel in [r for r in table if r not in live]:
                    del table[rel]
                    self._dirty_derived[kind].add(rel)

    # -- writing ------------------------------------------------------------------------
    def flush(self) -> None:
        """Write changed entries (atomic replace, 0600) and drop other code's caches. Best effort."""
        with self.lock:
            if not (self._dirty_archives or self._dirty_topics or any(self._dirty_derived.values())):
                return
            runtime = self.dir.parent.parent
            if not runtime.is_dir():  # no workspace skeleton: never create one for a cache
                return
            try:
                self._prune_other_tags()
                kinds = [("archives", self._dirty_archives, self._archives or {}),
                         ("topics", self._dirty_topics, self._topics or {})]
                kinds += [(kind, self._dirty_derived[kind], self._derived.get(kind, {})) for kind in DERIVED]
                for kind, dirty, table in kinds:
                    if not dirty:
                        continue
                    loose = self._loose.setdefault(kind, set())
                    if kind in BULK or kind in PACKED:
                        grown = len(loose | {rel for rel in dirty if rel in table})
                        if len(dirty) * 2 >= len(table) or grown > max(LOOSE_MIN, len(table) // 8):
                            self._write_pack(kind, table)
                            loose.clear()
                            dirty.clear()
                            continue
                    folder = self.dir / kind
                    # level by level: ``parents=True`` would give the parents the default
                    # mode, and every folder in the workspace is 0700 (memory spec §2.4)
                    for level in (self.dir.parent, self.dir, folder):
                        level.mkdir(exist_ok=True, mode=0o700)
                    for rel in sorted(dirty):
                        path = folder / _name(rel)
                        entry = table.get(rel)
                        data = None if entry is None else _entry_bytes(kind, rel, entry)
                        if data is None:
                            try:
                                path.unlink()
                            except FileNotFoundError:
                                pass
                            loose.discard(rel)
                            continue
                        _atomic(path, data)
                        loose.add(rel)
                    dirty.clear()
            except OSError:
                return

    def _write_pack(self, kind: str, table: Mapping[str, Any]) -> None:
        """Every entry of ``kind`` in one file, and the per-entry files it supersedes gone."""
        for level in (self.dir.parent, self.dir):
            level.mkdir(exist_ok=True, mode=0o700)
        if kind in PACKED:
            _atomic(self.dir / (kind + PACK_SUFFIX), encode_pack(kind, table))
        else:
            self._write_bulk(kind, table)
        folder = str(self.dir / kind)
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in names:
            if name.endswith(ENTRY_SUFFIX):
                try:
                    os.unlink(os.path.join(folder, name))
                except FileNotFoundError:
                    pass

    def _write_bulk(self, kind: str, table: Mapping[str, Any]) -> None:
        # Entry by entry: only one entry's rows exist at a time, and the file is the blobs
        # themselves (one buffer of the whole kind would double the peak memory of a flush).
        blobs = []
        for rel in sorted(table):
            value = _entry_value(kind, rel, table[rel])
            if value is None:
                continue
            try:
                blobs.append(envelope.packed_value(value))
            except ValueError:  # a value marshal cannot hold (say, a details object): not stored
                continue
        _atomic(self.dir / (kind + PACK_SUFFIX), envelope.pack_many(_pack_kind(kind), blobs, FORMAT))

    def _prune_other_tags(self) -> None:
        parent = self.dir.parent
        try:
            names = os.listdir(parent)
        except OSError:
            return
        for name in names:
            if name != self.dir.name:
                shutil.rmtree(parent / name, ignore_errors=True)


_is_key = is_stamp


def _entry_value(kind: str, rel: str, entry: Any) -> tuple | None:
    """``(rel, rows)`` of one archive or topic entry; ``None`` for one that is not stored."""
    try:
        if kind == "archives":
            key, value = entry[0], entry[1]
            if len(entry) == 3:  # made from these rows: writing them again builds no frame
                rows = entry[2]
            else:
                rows = value.rows if isinstance(value, _Stored) else archive_rows(value)
            value = (rel, (key, rows))
        else:
            value = entry.topic
            rows = value.rows if isinstance(value, _Stored) else entry.rows or topic_head(topic_rows(value))
            value = (rel, (entry.key, entry.sha, rows, entry.deps, entry.sig))
        return value
    except _Unrepresentable:
        return None


def _entry_bytes(kind: str, rel: str, entry: Any) -> bytes | None:
    """The file of one entry; ``None`` for one that is not stored (see _Unrepresentable)."""
    value = _entry_value(kind, rel, entry) if kind in BULK else (rel, entry)
    try:
        return None if value is None else encode_entry(kind, *value)
    except ValueError:  # marshal met a value it cannot hold (say, a details object): not stored
        return None


@dataclasses.dataclass(frozen=True)
class _Prior:
    """What ``SourceIndex.load`` reads of a previous index: its root and its files."""

    root: Path
    files: Mapping[str, Any]


def _read(path: str) -> bytes:
    """A whole file with plain os calls (hundreds of entries: pathlib and buffered files
    cost as much as the reading)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        chunks = []
        while True:
            chunk = os.read(fd, max(size, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def _atomic(path: Path, data: bytes | tuple[bytes, ...]) -> None:
    replace_cache_file(path, data)


_STORES: dict[str, ParseStore] = keeps({})
_STORES_LOCK = threading.Lock()


# the store by the path as given, so the per-file lookups of one transaction
# (a thousand at scale 1) do not resolve the root each time (~50 ms of a fresh edit)
_BY_GIVEN: dict[str, ParseStore] = keeps({})


def store_for(memory_root: Path | str) -> ParseStore:
    given = os.fspath(memory_root)
    store = _BY_GIVEN.get(given)
    if store is not None:
        return store
    key = str(Path(memory_root).resolve())
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None:
            store = _STORES[key] = ParseStore(Path(memory_root))
        if os.path.isabs(given):  # a relative one means another place after a chdir
            _BY_GIVEN[given] = store
        return store


@keeps
def forget_in_process() -> None:
    """Forget the in-memory copies (the next use re-reads the files; tests, benchmarks)."""
    with _STORES_LOCK:
        _STORES.clear()
        _BY_GIVEN.clear()


def drop(memory_root: Path | str) -> None:
    """Delete the on-disk cache of ``memory_root`` (benchmarks' cold runs)."""
    shutil.rmtree(Layout(Path(memory_root)).runtime_dir / DIR_NAME, ignore_errors=True)
    forget_in_process()


_IGNORED_ERRNOS = frozenset((errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP))  # pathlib's _ignore_error


def topic_stats(topics_dir: Path) -> dict[str, StatKey]:
    """topics-relative path -> stat key of each topic file (``topic_file_stats``)."""
    return {rel: stat_key(st) for rel, st in topic_file_stats(topics_dir).items()}


def topic_file_stats(topics_dir: Path) -> dict[str, os.stat_result]:
    """topics-relative path -> ``stat`` of each file ``topics_dir.rglob("*.md")`` lists that
    ``Path.stat()`` (symlinks followed) finds regular — the topic files — by the same walk
    (every real directory, a symlinked one neither entered; every entry whose name ends in
    ``.md``) with ``os.scandir`` and strings instead of a dozen pathlib objects per file.
    In walk order, not ``sorted`` order."""
    out: dict[str, os.stat_result] = {}
    stack = [(os.fspath(topics_dir), "")]
    while stack:
        directory, rel = stack.pop()
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except PermissionError:  # what rglob skips; anything else it raises
            continue
        for entry in entries:
            name = entry.name
            try:
                is_dir = entry.is_dir()
            except OSError as e:
                if e.errno not in _IGNORED_ERRNOS:
                    raise
                is_dir = False
            if is_dir and not entry.is_symlink():
                stack.append((entry.path, rel + name + "/"))
            if name.endswith(".md"):
                try:
                    st = os.stat(entry.path)
                except OSError:
                    continue
                if stat_mod.S_ISREG(st.st_mode):
                    out[rel + name] = st
    return out


def load_tree(memory_root: Path | str, *, persist: bool = False) -> tuple[Any, Any]:
    """``(SourceIndex, strict TopicTree)`` of the committed workspace, through the cache.

    Equal to ``SourceIndex.load(M)`` and ``parse_tree(M/topics, resolve=..., strict=True)``.
    Reading never writes into the state dir, so new parses are written only with ``persist``
    (writers; the benchmarks) or by the next transaction of this process.
    """

    with bulk():
        return _load_tree(Path(memory_root), persist)


def _load_tree(root: Path, persist: bool) -> tuple[Any, Any]:
    store = store_for(root)
    index = store.source_index()
    topics_dir = root / "topics"
    problems = []
    parsed = []
    rels = topic_stats(topics_dir) if topics_dir.is_dir() else {}
    for rel in sorted(rels, key=topic_sort_key):
        topic = store.topic_for_stat(rel, rels[rel], index)
        if topic is None:
            text, data, problem = read_topic_file(topics_dir, rel)
            if problem is not None:
                problems.append(problem)
                continue
            topic = parse_topic(rel, text, resolve=index.resolver, strict=True)
            deps = topic_deps(topic)
            key = rels[rel] if len(data) == rels[rel][1] else None
            store.put_topic(rel, key, hashlib.sha256(data).hexdigest(), topic, deps, deps_signature(index, deps))
        parsed.append(topic)
    store.retain_topics(rels)
    if persist:
        store.flush()
    return index, assemble_tree(parsed, problems)


__all__ = ["DIR_NAME", "ENTRY_SUFFIX", "decode_entry", "decode_pack", "encode_entry", "encode_pack", "ParseStore", "code_tag", "drop", "forget_in_process", "load_tree", "stat_key", "store_for"]
