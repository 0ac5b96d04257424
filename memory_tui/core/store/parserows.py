"""Parses as plain data: the rows the parse cache stores a topic or an archive as, and the
builders that make the objects again from them (``parsecache`` reads and writes the files;
this module knows only the shape of one entry).
"""

from __future__ import annotations

from itertools import accumulate, chain, repeat
from operator import add, and_, attrgetter, eq, is_, itemgetter, sub
from typing import Any, Callable, Iterable

from ..cache import codec
from ..format.errors import Problem
from ..format.fastdata import bulk, positional
from ..format.sources import ArchiveFile, FrameFacts, SourceFrame, decode_meta
from ..format.sources import take_handed as take_handed_frames
from ..format.topics import Annotation, Evidence, Heading, SourceLink, Topic, Unit, take_handed

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

    def facts() -> tuple[FrameFacts, ...]:
        with bulk():
            return _facts_from_blob(path, blob, len(sids))

    return ArchiveFile.deferred(path, kind, tuple(key), (tuple(sids), tuple(anchors), tuple(trusted)), build,
                                complete, frozenset(comment_ids), frozenset(anchor_lines), digest,
                                None if scan_row is None else tuple(scan_row), facts)


def _facts_from_blob(path: str, blob: bytes, n: int) -> tuple[FrameFacts, ...]:
    """The :class:`FrameFacts` ``_frames_from_blob``'s frames would have: the same columns,
    no frame, text or line kept."""
    _speakers, tokens, _lines, stamps, labels, _texts, pending, *_rest = _unzip(codec.loads(blob), 10)
    if len(stamps) != n:
        raise ValueError(f"archive rows of {path}: {len(stamps)} frames for {n} ids")
    metas = [decode_meta(tok) if tok is not None else None for tok in tokens]
    return tuple(map(FrameFacts, stamps, labels, metas, pending))


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
