"""The one-pass reader of a well-formed topic file (what the owner's files almost always
are): one pass over the lines, no line or paragraph objects, the units built when first read.

It reads exactly the files the general parser (``parse.parse_topic``) reads without a
problem, and gives the same topic; anything else it declines (``None``) and the general
parser reads it and says what is wrong. ``tests/property/test_parse_fast_props.py`` compares
the two.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from .grammar import (DEFINITION_RE, HEADING_RE, SOURCE_LINK_RE, _WHEN_SHAPE, _classify_line, _relation_targets,
                      heading_chain, parse_when, resolve_plain_target, resolve_source_target)
from .model import (Evidence, Heading, SourceResolver, Topic, Unit, _make_annotation, _make_evidence, _make_link,
                    _make_unit_fields)
from ..fastdata import bulk

# A resolver may also offer ``file_lookup(topic_path, rel_part)``: for the file a link's path
# part names, a function from a fragment to the source id ``resolve(topic_path, rel_part +
# "#" + fragment)`` answers, or ``None`` (then ``resolve`` itself is asked). The one-pass
# reader asks it once per file instead of resolving each of thousands of links from scratch.
_NO_FILE: Callable[[str], None] = lambda fragment: None  # noqa: E731


# the one-pass reading of a well-formed topic file (what the owner's files are
# almost always). Line breaks other than LF, fences and multi-line paragraphs are left to the
# general parser, as is every file with something to report.
_OTHER_BREAKS_RE = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # str.splitlines' other line ends
# DEFINITION_RE and then _CANON_DEF_RE on the rest of the line, up to where the sources
# start. The id part can match only one way, and _CANON_DEF_RE's "(?P<sources>.*?)\s*$" always
# matches what follows (a line holds no line break), so the groups are the ones the two
# matches give and the sources are the rest of the line without its trailing whitespace.
_CANON_DEFINITION_RE = re.compile(rf"\[\^([A-Za-z0-9_-]+)\]:\s*Time:\s*(`{_WHEN_SHAPE}`|{_WHEN_SHAPE})\s*;\s*Sources:\s*(?=\S)")
# A record line "QUOTE[^a][^b] ^id" (paragraph_shape's usual case): QUOTE holds no "[^", so the
# group is the only one and ends the body; one space before the one id. (QUOTE as an unrolled
# loop: an alternation tried per character costs the regex engine five times as much.)
_RECORD_LINE_RE = re.compile(
    r"([^\[]*(?:\[(?!\^)[^\[]*)*)(\[\^[A-Za-z0-9_-]+\](?:\[\^[A-Za-z0-9_-]+\])*) \^([A-Za-z0-9-]+)"
)


def parse_well_formed(topic_path: str, text: str, *, resolve: SourceResolver | None = None) -> Topic | None:
    """``parse_topic(topic_path, text, resolve=resolve)`` (strict or not: the same here) of a
    file with nothing to report whose record paragraphs are one line each, each with one
    citation group before one usual `` ^id``; ``None`` for any other file (``parse_topic`` then
    reads it the general way and says what is wrong). One pass over the lines, no line or
    paragraph objects: ``tests/property/test_parse_fast_props.py`` compares it with the
    general parser and with the golden parses of earlier releases."""
    if not text or _OTHER_BREAKS_RE.search(text) is not None:
        return None
    read = _well_formed_lines(topic_path, text, resolve)
    if read is None:
        return None
    headings, paragraphs, def_fields, link_fields, def_at, def_refs, def_whens = read
    unit_fields = _well_formed_units(paragraphs, def_at, def_refs, def_whens)
    if unit_fields is None:
        return None
    fields = (def_fields, link_fields, unit_fields)
    topic = Topic.deferred(topic_path, text, tuple(headings), (), tuple([f[0] for f in unit_fields]),
                           lambda: _built_well_formed(topic_path, text, fields))
    _hand_over(topic, fields)
    return topic


def _well_formed_lines(topic_path: str, text: str, resolve: SourceResolver | None) -> tuple | None:
    """``parse_well_formed``'s pass over the lines: (headings, the one-line paragraphs as
    (line number, line, heading chain), and the definitions' fields: ``def_fields``,
    ``link_fields``, ``def_at``, ``def_refs``, ``def_whens``); ``None`` as soon as a line is one
    the general parser must read."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # str.splitlines gives no empty last line
    headings: list[Heading] = []
    paragraphs: list[tuple[int, str, tuple[str, ...]]] = []
    chain: list[str] = []
    heads: tuple[str, ...] = ()
    in_text = False  # the previous line was a text line
    # the fields the objects are built from when first read (_built_well_formed), which are
    # also the columns the parse cache stores (see _hand_over)
    def_fields: list[tuple] = []
    link_fields: list[tuple[str, str, str | None]] = []
    def_at: dict[str, int] = {}  # a definition's id -> its index
    def_refs: list[tuple[str, ...]] = []  # a definition's links' source ids that are set
    def_whens: list = []
    canon = _CANON_DEFINITION_RE.match
    file_lookup = getattr(resolve, "file_lookup", None)
    in_file: dict[str, Callable[[str], str | None]] = {}  # a link's path part -> file_lookup's answer
    links_in = SOURCE_LINK_RE.finditer
    one_link = SOURCE_LINK_RE.fullmatch
    for number, line in enumerate(lines, 1):
        if not line:
            in_text = False
            continue
        first = line[0]
        if first == "[":  # _classify_line: a definition, else a text line
            m = canon(line)
            if m is not None:
                fid, raw_when = m.groups()
                if fid in def_at:
                    return None
                if raw_when.startswith("`"):
                    raw_when = raw_when[1:-1]
                raw_when = raw_when.strip()
                ok, when, non_ascii = parse_when(raw_when)
                if not ok or non_ascii:
                    return None
                raw_sources = line[m.end():].rstrip()
                one = one_link(raw_sources)  # the usual single link: finditer would find just it
                n_links = len(link_fields)
                for label, target in ((one.groups(),) if one is not None else
                                      [lm.groups() for lm in links_in(raw_sources)]):
                    target = target.strip()
                    if not label.strip():
                        return None
                    if resolve is not None and "#" in target:  # resolve_source_target: no plain handle has "#"
                        source_id = None
                        if file_lookup is not None:
                            rel_part, _, fragment = target.partition("#")
                            find = in_file.get(rel_part)
                            if find is None:
                                find = in_file[rel_part] = file_lookup(topic_path, rel_part) or _NO_FILE
                            source_id = find(fragment)
                        if not source_id:
                            try:
                                source_id = resolve(topic_path, target)
                            except (OSError, ValueError):
                                source_id = None
                        if not source_id:
                            source_id = resolve_plain_target(target, fallback=True)
                            if source_id is None:
                                return None
                    else:
                        source_id = resolve_source_target(topic_path, target, resolve)
                        if source_id is None and (resolve is not None or not target):
                            return None
                    link_fields.append((label, target, source_id))
                n_links = len(link_fields) - n_links
                if not n_links:
                    return None
                def_at[fid] = len(def_fields)
                def_refs.append(tuple(dict.fromkeys([f[2] for f in link_fields[-n_links:] if f[2]])))
                def_whens.append(when)
                def_fields.append((fid, raw_when, when, number, m.end(), m.end() + len(raw_sources), len(line),
                                   n_links))
                in_text = False
                continue
            if DEFINITION_RE.match(line):  # a legacy or unreadable definition
                return None
        elif first == "#":  # _classify_line: a heading, else a text line
            hm = HEADING_RE.match(line)
            if hm is not None:
                level, title = len(hm.group(1)), hm.group(2).strip()
                chain = heading_chain(chain, level, title)
                heads = tuple(chain)
                headings.append(Heading(level, title, number))
                in_text = False
                continue
        elif first in "<`" or first.isspace():
            if first.isspace():
                return None
            kind = _classify_line(line, False)
            if kind != "text":  # html, or a fence (not read here)
                if kind == "fence":
                    return None
                in_text = False
                continue
        if in_text:  # a paragraph of more than one line
            return None
        in_text = True
        paragraphs.append((number, line, heads))
    return headings, paragraphs, def_fields, link_fields, def_at, def_refs, def_whens


def _well_formed_units(paragraphs: list[tuple[int, str, tuple[str, ...]]], def_at: dict[str, int],
                       def_refs: list[tuple[str, ...]], def_whens: list) -> list[tuple] | None:
    """``parse_well_formed``'s units: each paragraph a record line citing known definitions
    (and every definition cited), read into its fields; ``None`` for any other paragraph."""
    unit_fields: list[tuple] = []
    seen_ids: set[str] = set()
    cited: set[str] = set()
    record = _RECORD_LINE_RE.fullmatch
    for number, line, heads in paragraphs:
        m = record(line)
        if m is None:
            return None
        quote, group, bid = m.groups()
        body = line[:m.end(2)]
        if bid in seen_ids or body.rsplit(None, 1)[-1].startswith("^"):  # a duplicate; another id token before it
            return None
        quote = quote.strip()
        if not quote:  # "missing memory content"
            return None
        at = []
        for fid in group[2:-1].split("][^"):
            i = def_at.get(fid)
            if i is None:
                return None
            cited.add(fid)
            at.append(i)
        if len(at) == 1:  # the usual one citation: its definition's source ids and time
            source_refs, when = def_refs[i], def_whens[i]
        else:  # the source ids in first-seen order, the first time given
            source_refs = tuple(dict.fromkeys(itertools.chain.from_iterable(map(def_refs.__getitem__, at))))
            when = next((w for w in map(def_whens.__getitem__, at) if w is not None), None)
        seen_ids.add(bid)
        relations = _relation_targets(body) if "#^" in body else ()
        unit_fields.append((bid, heads, quote, len(body), at, source_refs, relations, when, number, (bid,)))
    if len(cited) != len(def_at):  # an unused definition: said in a strict parse
        return None
    return unit_fields


def _built_well_formed(topic_path: str, text: str, fields: tuple) -> tuple[tuple[Unit, ...], tuple[Evidence, ...]]:
    """The units and evidence ``parse_well_formed`` read ``fields`` off ``text`` for (see
    ``take_handed`` for their layout): built when the topic's units are first read, since a
    cold load's readers touch few of its 80 000 objects (what a topic from the cache does)."""
    def_fields, link_fields, unit_fields = fields
    lines = text.split("\n")
    make_evidence, make_unit, make_annotation = _make_evidence, _make_unit_fields, _make_annotation
    with bulk():
        links = list(map(_make_link, *zip(*link_fields))) if link_fields else []
        evidence = []
        at = 0
        for fid, raw_when, when, number, sources_start, sources_end, _length, n_links in def_fields:
            line = lines[number - 1]
            # Evidence's fields in order (see _read_evidence)
            evidence.append(make_evidence(fid, raw_when, when, tuple(links[at:at + n_links]), topic_path, number, False,
                                          False, line[sources_start:sources_end], line))
            at += n_links
        units = []
        for mid, heads, quote, body_length, cited, source_refs, relations, when, number, aliases in unit_fields:
            # _make_unit: the body's [^..] are all in its one group, so its content is the quote
            units.append(make_unit(mid, topic_path, heads, quote, lines[number - 1][:body_length],
                                   (make_annotation(quote, tuple(map(evidence.__getitem__, cited))),), source_refs,
                                   relations, when, number, number, aliases, False, False))
    return tuple(units), tuple(evidence)


# The one-pass reader hands the parse cache the fields it read, as it read them: writing a
# cold tree's rows from the 80 000 objects costs several times more (memory-bound attribute
# reads). Kept on the topic (not a field: equality, hash and repr ignore it) until the cache
# takes it (parsecache.topic_rows); a copy made by dataclasses.replace has none.
HANDED = "_handed_fields"


def _hand_over(topic: Topic, fields: tuple) -> None:
    try:
        vars(topic)[HANDED] = fields
    except TypeError:  # a Topic without an instance dict: the cache reads the objects instead
        pass


def take_handed(topic: Topic) -> tuple | None:
    """The fields ``parse_well_formed`` read ``topic`` from, at most once (``None`` after, or
    for a topic read another way): ``(definitions, links, records)``, each a list of tuples —
    a definition ``(id, raw_when, when, line, sources start, sources end, line length,
    number of links)`` (offsets in its line), a link ``(label, target, source_id)`` in
    definition order, a record ``(id, headings, quote, body length, definition indexes,
    source_refs, relation_targets, when, line, aliases)``."""
    try:
        return vars(topic).pop(HANDED, None)
    except TypeError:
        return None


def handed_links(topic: Topic) -> list[tuple[str, str, str | None]] | None:
    """The link fields ``take_handed`` would give (``(label, target, source_id)`` of every
    link, in definition order), without taking them; ``None`` when there are none."""
    try:
        fields = vars(topic).get(HANDED)
    except TypeError:
        return None
    return None if fields is None else fields[1]
