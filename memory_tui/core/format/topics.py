"""Topic Markdown: OpenProgram's memory grammar, read side (memory spec §3).

Everything here is pure: text in, frozen dataclasses out. Files on disk are only read by
``parse_tree`` when it is handed a directory. Source links that point into archive files are
resolved through an injected ``SourceResolver`` (``sources.SourceIndex.resolve_target``); the
parts of §3.5 that need no files live here (``resolve_plain_target``).

Parsing never raises for bad text: every rule violation becomes a ``Problem`` with code
``INVALID_TOPIC_FORMAT``, OpenProgram's message text, the workspace-relative path
(``topics/<path>``), a 1-based line and column. Strict callers use ``raise_for_problems`` /
``parse_tree_strict``. Findings that OpenProgram itself accepts but that memory-tui refuses to
*write* (pitfall 14 id placement) are reported with ``details["severity"] == "warning"`` and do
not make a strict parse fail; the normaliser turns them into errors for new content.

Why one long module: it is one grammar, the topic file's, read top to bottom as the spec's §3
is. The general parser and the one-pass reader of well-formed files (``parse_well_formed``)
share its line classes and regular expressions, and the fast reader is only right because it
accepts exactly the files the general parser reads without a problem; kept side by side, a
change to a rule is seen in both places at once. Split into modules, each would have to import
the other's private rules.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .errors import MemoryError, Problem
from .fastdata import bulk, positional
from ..cache.registry import keeps

INVALID_TOPIC_FORMAT = "INVALID_TOPIC_FORMAT"

# (topic path relative to topics/, link target as written) -> source id, or None.
SourceResolver = Callable[[str, str], "str | None"]
# A resolver may also offer ``file_lookup(topic_path, rel_part)``: for the file a link's path
# part names, a function from a fragment to the source id ``resolve(topic_path, rel_part +
# "#" + fragment)`` answers, or ``None`` (then ``resolve`` itself is asked). The one-pass
# reader asks it once per file instead of resolving each of thousands of links from scratch.
_NO_FILE: Callable[[str], None] = lambda fragment: None  # noqa: E731

BLOCK_ID_LENGTH = 8
EVIDENCE_ID_HEX = 10

# ---------------------------------------------------------------------------------------------
# Lexical pieces
# ---------------------------------------------------------------------------------------------

FENCE_RE = re.compile(r"^\s*```")
HTML_RE = re.compile(r"^\s*(?:<!--|<a\s)")
HEADING_RE = re.compile(r"^(#{1,6})\s+(\S.*?)\s*$")
DEFINITION_RE = re.compile(r"^\[\^([A-Za-z0-9_-]+)\]:")
FOOTNOTE_ID_RE = re.compile(r"[A-Za-z0-9_-]+\Z")
BLOCK_ID_RE = re.compile(r"[A-Za-z0-9-]+\Z")
HEX8_RE = re.compile(r"[0-9a-f]{8}\Z")
MEM_ID_RE = re.compile(r"mem_[A-Za-z0-9_-]+\Z")
CITATION_RE = re.compile(r"\[\^([A-Za-z0-9_-]+)\]")
# Written to start with a literal "[^" (same language as "(?:\[\^ID\])+"): the regex engine then
# skips ahead to each "[^" instead of trying every position, three times faster on prose.
CITATION_GROUP_RE = re.compile(r"\[\^[A-Za-z0-9_-]+\](?:\[\^[A-Za-z0-9_-]+\])*")
ANY_FOOTNOTE_REF_RE = re.compile(r"\[\^[^\]]*\]")
LOCAL_LABEL_RE = re.compile(r"(?:e[0-9]+|new-evidence-[A-Za-z0-9-]+)\Z")
EVIDENCE_ID_RE = re.compile(r"e-[0-9a-f]{10}\Z")
# [text](path#^id): a block link (relation), in OpenProgram's shape: a label of at least one
# character, a path without ')' or '#' (spaces are part of it), and a block id or a mem_ id.
# An empty label or an id with '_' that is no mem_ id makes no link: OpenProgram keeps it as
# text, with no relation and no rewrite.
BLOCK_LINK_RE = re.compile(r"\[([^\]]+)\]\(([^)#]*)#\^(mem_[A-Za-z0-9_-]+|[A-Za-z0-9-]+)\)")
MARKDOWN_LINK_RE = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]*)\)")
SOURCE_LINK_RE = re.compile(r"\[([^\]]*)\]\(([^)\n]*)\)")

# Definition bodies (after "[^id]:").
# Exactly the shapes OpenProgram reads as a definition (memory spec §3.4): the time is a date
# shape or "undated", in backticks or bare, with nothing else between them, and something
# follows "Sources:". A line that starts "[^id]:" in any other shape is no definition to
# OpenProgram (its citations are then undefined), so it must not be read -- and rewritten
# canonical by normalisation -- as one here: that would install a text the owner never typed.
# \d on purpose: OpenProgram's shape accepts any Unicode decimal digit (pitfall 12).
_WHEN_SHAPE = r"(?:\d{4}(?:-\d{2}(?:-\d{2})?)?|undated)"
_CANON_DEF_RE = re.compile(
    rf"^\s*Time:\s*(?P<when>`{_WHEN_SHAPE}`|{_WHEN_SHAPE})\s*;\s*Sources:\s*(?P<sources>.+?)\s*$", re.DOTALL
)
_LEGACY_DEF_RE = re.compile(rf"^\s*(?P<when>{_WHEN_SHAPE})\s*·\s*Sources:\s*(?P<sources>.+?)\s*$", re.DOTALL)
# \d on purpose: OpenProgram accepts any Unicode decimal digit here (pitfall 12).
_WHEN_RE = re.compile(r"(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?\Z")
_ASCII_WHEN_RE = re.compile(r"[0-9]{4}(?:-[0-9]{2}(?:-[0-9]{2})?)?\Z")
_D_HANDLE_RE = re.compile(r"D([0-9]+):([0-9]+)\Z")
_D_ANCHOR_RE = re.compile(r"#d([0-9]+)-([0-9]+)\Z", re.IGNORECASE)

_SEVERITY_WARNING = "warning"


# ---------------------------------------------------------------------------------------------
# Data model
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceLink:
    label: str
    target: str
    source_id: str | None  # resolved source id; None when it could not be resolved


@dataclass(frozen=True)
class Evidence:
    """One footnote definition ``[^id]: Time: `WHEN`; Sources: ...``."""

    id: str
    raw_when: str  # time text as written, without backticks ("undated" allowed)
    when: str | None  # "YYYY" / "YYYY-MM" / "YYYY-MM-DD" as written; None when undated/invalid
    links: tuple[SourceLink, ...]
    topic_path: str  # relative to topics/
    line: int  # 1-based
    legacy: bool  # written in the legacy "WHEN · Sources:" shape
    non_ascii_time: bool = False  # time uses non-ASCII digits (OpenProgram accepts, we never write)
    raw_sources: str = ""  # the text after "Sources:"
    text: str = ""  # the whole definition line

    @property
    def source_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(link.source_id for link in self.links if link.source_id))

    @property
    def is_local(self) -> bool:
        return is_local_label(self.id)


@dataclass(frozen=True)
class Annotation:
    """One citation group and the text written before it."""

    quote: str
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class Unit:
    """One memory unit: a record paragraph's identity, one of its aliases, or a legacy mem_ unit."""

    memory_id: str
    topic_path: str  # relative to topics/, e.g. "people/ada.md"
    headings: tuple[str, ...]
    content: str  # body with every [^..] removed, trimmed
    body: str  # raw paragraph text without the id suffix, trimmed
    annotations: tuple[Annotation, ...]
    source_refs: tuple[str, ...]
    relation_targets: tuple[str, ...]
    when: str | None
    line: int  # 1-based first line of the paragraph
    end_line: int  # 1-based last line of the paragraph
    aliases: tuple[str, ...]  # every id of the paragraph, identity last
    legacy: bool  # a legacy mem_ unit
    non_ascii_time: bool = False

    @property
    def identity(self) -> str:
        return self.aliases[-1] if self.aliases else self.memory_id

    @property
    def is_alias(self) -> bool:
        return self.memory_id != self.identity

    @property
    def path(self) -> str:
        """Workspace-relative path of the topic file."""
        return "topics/" + self.topic_path

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        seen: dict[str, Evidence] = {}
        for ann in self.annotations:
            for ev in ann.evidence:
                seen.setdefault(ev.id, ev)
        return tuple(seen.values())

    @property
    def evidence_ids(self) -> tuple[str, ...]:
        return tuple(ev.id for ev in self.evidence)


class Heading(NamedTuple):
    level: int
    title: str
    line: int


@dataclass(frozen=True)
class Topic:
    path: str  # relative to topics/
    text: str
    units: tuple[Unit, ...]
    evidence: tuple[Evidence, ...]
    headings: tuple[Heading, ...]
    problems: tuple[Problem, ...]

    @property
    def workspace_path(self) -> str:
        return "topics/" + self.path

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if is_error(p))

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def block_ids(self) -> tuple[str, ...]:
        return self.memory_ids

    def evidence_by_id(self, eid: str) -> Evidence | None:
        for ev in self.evidence:
            if ev.id == eid:
                return ev
        return None

    # A topic from the persistent parse cache holds its path, text, headings and problems and
    # builds ``units`` and ``evidence`` (~300 objects per file, most of a cached load) the
    # first time either is read: a load of the whole tree then costs what its readers touch.
    # Reached only for a name missing from the instance dict, so a built topic (and every
    # topic the parser made) reads its fields at plain attribute speed.
    def __getattr__(self, name: str):
        if name == "units" or name == "evidence":
            d = self.__dict__
            build = d.get("_deferred")
            if build is not None:
                units, evidence = d.setdefault("_built", build())  # racing threads keep one result
                d.setdefault("evidence", evidence)
                d.setdefault("units", units)
                d.pop("_deferred", None)  # the rows are no longer needed
                d.pop("_built", None)
            if name in d:
                return d[name]
        raise AttributeError(name)

    @classmethod
    def deferred(cls, path: str, text: str, headings: tuple[Heading, ...], problems: tuple[Problem, ...],
                 memory_ids: tuple[str, ...], build: Callable[[], tuple[tuple[Unit, ...], tuple[Evidence, ...]]]
                 ) -> Topic:
        """A topic whose ``units`` and ``evidence`` are ``build()``'s, made on first use;
        ``memory_ids`` must be its units' ids in order (what a tree needs before it builds
        them). Equal to, and pickled as, the topic it stands for."""
        topic = object.__new__(cls)
        d = topic.__dict__
        d["path"], d["text"] = path, text
        d["headings"], d["problems"] = headings, problems
        d["_deferred"], d["_mids"] = build, memory_ids
        return topic

    def __getstate__(self) -> dict:
        self.units  # noqa: B018 - a deferred topic is pickled built
        d = self.__dict__
        return {name: d[name] for name in _TOPIC_FIELDS}

    @property
    def memory_ids(self) -> tuple[str, ...]:
        """Its units' ids in order, without building a deferred topic's units."""
        mids = self.__dict__.get("_mids")
        if mids is None:
            mids = self.__dict__.setdefault("_mids", tuple(map(_MEMORY_ID, self.units)))
        return mids

    def _units_by_id(self) -> dict[str, Unit]:
        d = self.__dict__
        found = d.get("_by_id")
        if found is None:
            units = self.units
            found = d.setdefault("_by_id", dict(zip(map(_MEMORY_ID, units), units)))
        return found


_TOPIC_FIELDS = ("path", "text", "units", "evidence", "headings", "problems")
_MEMORY_ID = operator.attrgetter("memory_id")
_MISSING = object()


class _IdsByTopic(Mapping):
    """The id map of a tree without duplicate ids, before its units are built: each id names
    the topic holding it, and a lookup builds that topic's units (once) and answers with the
    unit. Keys in tree order, as ``assemble_tree``'s dict. Read-only; shared as the base of
    the ``IdOverlay`` of the trees reassembled from it."""

    __slots__ = ("where", "found")

    def __init__(self, where: dict[str, Topic]) -> None:
        self.where = where
        self.found: dict[str, Unit] = {}  # the units of the topics looked into so far

    def __getitem__(self, key):
        unit = self.found.get(key)
        if unit is None:
            topic = self.where[key]
            unit = topic._units_by_id()[key]
            self.found.update(topic._units_by_id())
        return unit

    def get(self, key, default=None):
        unit = self.found.get(key)
        if unit is None:
            topic = self.where.get(key)
            if topic is None:
                return default
            units = topic._units_by_id()
            self.found.update(units)
            unit = units[key]
        return unit

    def __contains__(self, key) -> bool:
        return key in self.where

    def __iter__(self):
        return iter(self.where)

    def __len__(self) -> int:
        return len(self.where)

    def keys(self):
        return self.where.keys()


class IdOverlay(Mapping):
    """A tree's id map as ``base`` (another tree's map, shared, never changed) with ``over``
    laid on it and the ids in ``gone`` taken out. ``reassemble_tree`` makes one for a tree
    that differs from the previous in a few topics instead of copying the previous tree's
    80 000 entries (each copy touches every unit's reference count, all over the heap).
    Read-only; ``over`` and ``gone`` are the new tree's own."""

    __slots__ = ("base", "over", "gone", "_len")

    def __init__(self, base: dict, over: dict, gone: frozenset) -> None:
        self.base, self.over, self.gone = base, over, gone
        self._len = len(base) - len(gone) + sum(1 for key in over if key not in base)  # never a pass over base

    def __getitem__(self, key):
        value = self.over.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if key in self.gone:
            raise KeyError(key)
        return self.base[key]

    def get(self, key, default=None):
        value = self.over.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if key in self.gone:
            return default
        return self.base.get(key, default)

    def __contains__(self, key) -> bool:
        return key in self.over or (key not in self.gone and key in self.base)

    def __iter__(self):
        gone, base = self.gone, self.base
        for key in base:
            if key not in gone:
                yield key
        for key in self.over:
            if key not in base:
                yield key

    def __len__(self) -> int:
        return self._len


# More replaced ids than this laid over a shared map and the new tree's map is a plain dict again.
OVERLAY_MAX = 4096


@dataclass(frozen=True)
class TopicTree:
    topics: tuple[Topic, ...]  # sorted component-wise by path
    units: tuple[Unit, ...]  # tree order
    problems: tuple[Problem, ...]
    _index: Mapping[str, Unit] = field(default_factory=dict, compare=False, repr=False)  # a dict or an IdOverlay
    _topic_index: dict[str, Topic] = field(default_factory=dict, compare=False, repr=False)
    # True only when made by ``assemble_tree``/``reassemble_tree`` and no memory_id occurs twice
    # among all the topics' units: then ``units`` is exactly the topics' units one after the
    # other and every id names one unit, which is what the incremental paths rely on.
    _dupfree: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self._index:
            for unit in self.units:
                self._index.setdefault(unit.memory_id, unit)
        if not self._topic_index:
            for topic in self.topics:
                self._topic_index[topic.path] = topic

    # ``units`` of a tree made by ``assemble_tree`` from topics without duplicate ids is built
    # on first read (the concatenation of the topics' units, which builds deferred topics):
    # the id map, the problems and the topics answer without it. Reached only while
    # ``units`` is missing from the instance dict.
    def __getattr__(self, name: str):
        if name == "units":
            d = self.__dict__
            units_of = d.get("_lazy_units")
            if units_of is not None:
                return d.setdefault("units", units_of(d["topics"]))
        raise AttributeError(name)

    def __getstate__(self) -> dict:
        self.units  # noqa: B018 - pickled built, with a plain id map
        d = dict(self.__dict__)
        d.pop("_lazy_units", None)
        if not isinstance(d["_index"], dict):
            d["_index"] = dict(d["_index"].items())
        return d

    @classmethod
    def _lazy(cls, topics: tuple[Topic, ...], problems: tuple[Problem, ...], index: Mapping[str, Unit],
              topic_index: dict[str, Topic], units_of: Callable[[tuple[Topic, ...]], tuple[Unit, ...]] | None = None
              ) -> TopicTree:
        """A duplicate-free tree whose ``units`` is ``units_of(topics)`` (by default the
        topics' units one after the other), built on first read."""
        tree = object.__new__(cls)
        tree.__dict__.update(topics=topics, problems=problems, _index=index, _topic_index=topic_index,
                             _dupfree=True, _lazy_units=units_of or _concat_units)
        return tree

    def by_id(self, memory_id: str) -> Unit | None:
        return self._index.get(memory_id)

    def has_id(self, memory_id: str) -> bool:
        return memory_id in self._index

    @property
    def id_view(self):
        """The ids as a read-only set view (``in``, ``<=``, ``-``): ``ids`` without building a
        frozenset of every id of the tree."""
        return self._index.keys()

    @property
    def dupfree(self) -> bool:
        return self._dupfree

    def topic(self, topic_path: str) -> Topic | None:
        return self._topic_index.get(_strip_topics_prefix(topic_path))

    def block_ids(self, topic_path: str) -> tuple[str, ...]:
        topic = self.topic(topic_path)
        return topic.block_ids if topic else ()

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(self._index)

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if is_error(p))

    @property
    def ok(self) -> bool:
        return not self.errors


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def sha256hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def block_id(file_name: str, body: str, k: int = 0) -> str:
    """§3.8 step 5: first 8 hex of sha256("block|FILE_NAME|BODY|k")."""
    return sha256hex(f"block|{file_name}|{body}|{k}")[:BLOCK_ID_LENGTH]


def evidence_id(when: str, seed: str, k: int = 0) -> str:
    """§3.8 step 2: "e-" + first 10 hex of sha256("evidence|WHEN|SEED|k")."""
    return "e-" + sha256hex(f"evidence|{when}|{seed}|{k}")[:EVIDENCE_ID_HEX]


def is_local_label(fid: str) -> bool:
    return bool(LOCAL_LABEL_RE.match(fid))


def is_mem_id(fid: str) -> bool:
    return bool(MEM_ID_RE.match(fid))


def is_valid_block_id(bid: str) -> bool:
    return bool(BLOCK_ID_RE.match(bid))


def is_error(problem: Problem) -> bool:
    return problem.details.get("severity") != _SEVERITY_WARNING


def is_ascii_when(when: str) -> bool:
    """True for a time memory-tui may write: ASCII ``YYYY[-MM[-DD]]`` (pitfall 12)."""
    return bool(_ASCII_WHEN_RE.match(when))


def topic_sort_key(path: str) -> tuple[str, ...]:
    """Python's ``sorted(Path.rglob())`` order: component-wise by code point."""
    return tuple(path.split("/"))


def _strip_topics_prefix(path: str) -> str:
    return path[len("topics/"):] if path.startswith("topics/") else path


@keeps
@functools.lru_cache(maxsize=4096)
def parse_when(raw: str) -> tuple[bool, str | None, bool]:
    """(valid, when-or-None, non_ascii) for a definition's time text (backticks removed).
    Cached: a workspace writes the same few hundred dates on thousands of definitions."""
    raw = raw.strip()
    if raw == "undated":
        return True, None, False
    m = _WHEN_RE.match(raw)
    if not m:
        return False, None, False
    try:
        year = int(m.group(1))
        month = int(m.group(2)) if m.group(2) else 1
        day = int(m.group(3)) if m.group(3) else 1
        import datetime

        datetime.date(year, month, day)
    except ValueError:
        return False, None, False
    return True, raw, not raw.isascii()


def is_v2_source_id(value: str) -> bool:
    """§4.1: provider/thread/message, all non-empty, printable, none of [ ] < > CR LF."""
    parts = value.split("/", 2)
    if len(parts) != 3 or not all(parts) or parts[0] in (".", ".."):
        return False
    return all(ch.isprintable() and ch not in "[]<>\r\n" for ch in value)


def resolve_plain_target(target: str, *, fallback: bool = True) -> str | None:
    """The file-free parts of §3.5: a plain handle (``D<n>:<m>`` or a v2 source id without
    ``#``) is its own source id (step 1); with ``fallback`` a target ending ``#d<n>-<m>``
    becomes ``D<n>:<m>`` (step 3, which OpenProgram tries after the file lookup)."""
    target = target.strip()
    if _D_HANDLE_RE.match(target):
        return target
    if "#" not in target and is_v2_source_id(target):
        return target
    if fallback:
        m = _D_ANCHOR_RE.search(target)
        if m:
            return f"D{m.group(1)}:{m.group(2)}"
    return None


def resolve_source_target(topic_path: str, target: str, resolve: SourceResolver | None) -> str | None:
    """§3.5 in order: plain handle, file lookup through ``resolve``, ``#d<n>-<m>`` fallback."""
    plain = resolve_plain_target(target, fallback=False)
    if plain is not None:
        return plain
    if resolve is not None:
        try:
            found = resolve(topic_path, target.strip())
        except (OSError, ValueError):
            found = None
        if found:
            return found
    return resolve_plain_target(target, fallback=True)


def heading_chain(chain: list[str], level: int, title: str) -> list[str]:
    return chain[: level - 1] + [title]


# ---------------------------------------------------------------------------------------------
# Line classes (§3.1)
# ---------------------------------------------------------------------------------------------


class Line(NamedTuple):
    kind: str  # "fence" | "fenced" | "definition" | "html" | "heading" | "blank" | "text"
    text: str
    number: int  # 1-based


def split_lines(text: str) -> list[str]:
    """Lines as Python's ``str.splitlines`` yields them (§3.1): besides LF, CRLF and CR, each of
    U+000B, U+000C, U+001C-U+001E, U+0085, U+2028 and U+2029 ends a line. OpenProgram's
    topic reader and normaliser split this way (the spec said LF only; differential testing
    against OpenProgram's corpus, cases 031, 357, 404, showed otherwise), and the normaliser
    re-joins with LF, so such a character becomes a line break in the written file."""
    return text.splitlines()


def _classify_line(raw: str, fenced: bool) -> str:
    if not raw:  # what the chain below gives an empty line
        return "fenced" if fenced else "blank"
    first = raw[:1]
    # Fast path: most lines are prose and start with a character no other class starts with.
    if first and first not in "#[<`" and not first.isspace():
        return "fenced" if fenced else "text"
    if FENCE_RE.match(raw):
        return "fence"
    if fenced:
        return "fenced"
    if DEFINITION_RE.match(raw):
        return "definition"
    if HTML_RE.match(raw):
        return "html"
    if HEADING_RE.match(raw):
        return "heading"
    if not raw.strip():
        return "blank"
    return "text"


@keeps
@functools.lru_cache(maxsize=4096)
def _classified(text: str) -> tuple[Line, ...]:
    out: list[Line] = []
    fenced = False
    for i, raw in enumerate(split_lines(text), start=1):
        kind = _classify_line(raw, fenced)
        if kind == "fence":
            fenced = not fenced
        out.append(Line(kind, raw, i))
    return tuple(out)


def classify_lines(text: str) -> list[Line]:
    """Every line with its class (§3.1). Results are cached by text (they are immutable)."""
    return list(_classified(text))


@dataclass(frozen=True)
class Paragraph:
    start: int  # 1-based first line
    end: int  # 1-based last line
    lines: tuple[str, ...]
    headings: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


_make_paragraph = positional(Paragraph)


def iter_blocks(text: str) -> tuple[list[Paragraph], list[Line], list[Heading]]:
    """Paragraphs (maximal runs of text lines, with their heading chain), all lines, headings."""
    paragraphs, lines, headings = _blocks(text)
    return list(paragraphs), list(lines), list(headings)


@keeps
@functools.lru_cache(maxsize=4096)
def _blocks(text: str) -> tuple[tuple[Paragraph, ...], tuple[Line, ...], tuple[Heading, ...]]:
    lines = _classified(text)
    paragraphs: list[Paragraph] = []
    headings: list[Heading] = []
    chain: list[str] = []
    run: list[Line] = []

    def flush() -> None:
        if run:
            paragraphs.append(_make_paragraph(run[0].number, run[-1].number, tuple([l.text for l in run]), tuple(chain)))
            run.clear()

    for line in lines:
        if line.kind == "text":
            run.append(line)
            continue
        flush()
        if line.kind == "heading":
            m = HEADING_RE.match(line.text)
            assert m is not None
            level, title = len(m.group(1)), m.group(2).strip()
            chain = heading_chain(chain, level, title)
            headings.append(Heading(level, title, line.number))
    flush()
    return tuple(paragraphs), lines, tuple(headings)


# ---------------------------------------------------------------------------------------------
# Record paragraphs (§3.2) — shared with the normaliser
# ---------------------------------------------------------------------------------------------


class SuffixId(NamedTuple):
    id: str
    offset: int  # offset of the "^" in the paragraph text
    separator: str  # the whitespace run before "^"


@dataclass(frozen=True)
class ParagraphShape:
    """The syntactic pieces of one paragraph's text."""

    suffix: tuple[SuffixId, ...]  # valid ids, in order (identity last)
    invalid_ids: tuple[SuffixId, ...]  # trailing ^tokens with characters outside [A-Za-z0-9-]
    body_end: int  # offset where the body ends (before the id suffix)
    groups: tuple[tuple[int, int, tuple[str, ...]], ...]  # (start, end, footnote ids) in the body

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.suffix)

    @property
    def cited(self) -> tuple[str, ...]:
        return tuple(fid for _, _, fids in self.groups for fid in fids)


def paragraph_shape(text: str) -> ParagraphShape:
    suffix: list[SuffixId] = []
    invalid: list[SuffixId] = []
    pos = len(text.rstrip())
    body_end = pos
    while pos > 0:
        parts = text[:pos].rsplit(None, 1)
        token = parts[-1]
        i = pos - len(token)
        if i == 0 or not token.startswith("^"):
            break
        k = len(parts[0]) if len(parts) == 2 else 0
        entry = SuffixId(token[1:], i, text[k:i])
        if is_valid_block_id(entry.id):
            suffix.insert(0, entry)
        else:
            invalid.insert(0, entry)
        pos = k
        body_end = k
    if invalid:
        # One bad token poisons the suffix: the ids before it are not a suffix either.
        suffix = []
        body_end = len(text.rstrip())
    if "[^" in text:
        # A group matched "(?:\[\^ID\])+" with ID free of "[", "]" and "^": splitting its
        # inside at "][^" yields exactly the ids CITATION_RE would find in it.
        groups = tuple([
            (m.start(), m.end(), tuple(m.group(0)[2:-1].split("][^")))
            for m in CITATION_GROUP_RE.finditer(text, 0, body_end)
        ])
    else:
        groups = ()
    return _make_shape(tuple(suffix), tuple(invalid), body_end, groups)


_make_shape = positional(ParagraphShape)


def _offset_to_line_col(lines: tuple[str, ...], start_line: int, offset: int) -> tuple[int, int]:
    line = start_line
    for raw in lines:
        if offset <= len(raw):
            return line, offset + 1
        offset -= len(raw) + 1
        line += 1
    return start_line + len(lines) - 1, len(lines[-1]) + 1 if lines else 1


# ---------------------------------------------------------------------------------------------
# Definitions (§3.4)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawDefinition:
    id: str
    line: int
    text: str
    raw_when: str | None  # None when the shape is unreadable
    raw_sources: str
    legacy: bool
    backticked: bool


_make_raw_definition = positional(RawDefinition)


def read_definition(line_text: str, number: int) -> RawDefinition:
    m = DEFINITION_RE.match(line_text)
    assert m is not None
    rest = line_text[m.end():]
    canon = _CANON_DEF_RE.match(rest)
    if canon:
        when = canon.group("when")
        backticked = when.startswith("`")
        if backticked:
            when = when[1:-1]
        return _make_raw_definition(m.group(1), number, line_text, when.strip(), canon.group("sources"), False,
                                    backticked)
    legacy = _LEGACY_DEF_RE.match(rest)
    if legacy:
        return _make_raw_definition(m.group(1), number, line_text, legacy.group("when"), legacy.group("sources"), True,
                                    False)
    return _make_raw_definition(m.group(1), number, line_text, None, "", False, False)


def split_bare_sources(raw_sources: str) -> list[str]:
    """With no links: the ``,``/``·``-separated values (SEED form of §3.8 step 2)."""
    return [part.strip() for part in re.split(r"[,·]", raw_sources) if part.strip()]


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------


_make_link = positional(SourceLink)
_make_evidence = positional(Evidence)
_make_annotation = positional(Annotation)
_make_unit_fields = positional(Unit)


class _Reporter:
    def __init__(self, topic_path: str) -> None:
        self.path = "topics/" + topic_path
        self.items: list[Problem] = []

    def error(self, message: str, line: int, column: int = 1, **details: object) -> None:
        self.items.append(Problem(INVALID_TOPIC_FORMAT, message, self.path, line, column, dict(details)))

    def warning(self, message: str, line: int, column: int = 1, **details: object) -> None:
        details = dict(details)
        details["severity"] = _SEVERITY_WARNING
        self.items.append(Problem(INVALID_TOPIC_FORMAT, message, self.path, line, column, details))


def _read_evidence(
    raw: RawDefinition, topic_path: str, resolve: SourceResolver | None, report: _Reporter, cited: bool = False
) -> Evidence:
    col_of = lambda needle: max(raw.text.find(needle), 0) + 1  # noqa: E731
    if raw.raw_when is None:
        if cited:
            # OpenProgram reads no definition here, so its error is the citation's; the line and
            # the shape it needs are what the owner has to fix.
            report.error(f"undefined footnote: {raw.id} (line {raw.line} is not a definition OpenProgram reads: "
                         f"write [^{raw.id}]: Time: `YYYY[-MM[-DD]]` or `undated`; Sources: [label](target))",
                         raw.line, 1, footnote=raw.id)
        else:
            report.error(f"invalid evidence definition: {raw.id}", raw.line, 1, footnote=raw.id)
        # Still a definition: citing it is not an "undefined footnote" on top.
        return Evidence(raw.id, "", None, (), topic_path, raw.line, False, text=raw.text)
    ok, when, non_ascii = parse_when(raw.raw_when)
    if not ok:
        report.error(f"invalid evidence date: {raw.raw_when}", raw.line, col_of(raw.raw_when) if raw.raw_when else 1,
                     footnote=raw.id, value=raw.raw_when)
    if non_ascii:
        report.warning(f"evidence time uses non-ASCII digits: {raw.raw_when}", raw.line, col_of(raw.raw_when),
                       footnote=raw.id, kind="non_ascii_time")
    links: list[SourceLink] = []
    matches = list(SOURCE_LINK_RE.finditer(raw.raw_sources))
    src_col = raw.text.rfind(raw.raw_sources) if raw.raw_sources else len(raw.text)
    if not matches:
        report.error(f"memory source links required: {raw.id}", raw.line, src_col + 1, footnote=raw.id)
    for m in matches:
        label, target = m.group(1), m.group(2).strip()
        column = src_col + m.start() + 1
        if not label.strip():
            report.error(f"memory source labels required: {raw.id}", raw.line, column, footnote=raw.id)
        source_id = resolve_source_target(topic_path, target, resolve)
        if source_id is None and (resolve is not None or not target):
            report.error(f"invalid source target: {target}", raw.line, src_col + m.start(2) + 1,
                         footnote=raw.id, target=target)
        links.append(_make_link(label, target, source_id))
    # Evidence's fields, in order: id, raw_when, when, links, topic_path, line, legacy,
    # non_ascii_time, raw_sources, text
    return _make_evidence(raw.id, raw.raw_when, when if ok else None, tuple(links), topic_path, raw.line, raw.legacy,
                          non_ascii, raw.raw_sources, raw.text)


def _relation_targets(text: str) -> tuple[str, ...]:
    if "#^" not in text:  # every block link has it
        return ()
    return tuple(dict.fromkeys([m.group(3) for m in BLOCK_LINK_RE.finditer(text)]))


def _make_unit(
    memory_id: str,
    topic_path: str,
    para: Paragraph,
    body: str,
    annotations: tuple[Annotation, ...],
    aliases: tuple[str, ...],
    legacy: bool,
) -> Unit:
    refs: dict[str, None] = {}
    when = None
    non_ascii = False
    for ann in annotations:
        for ev in ann.evidence:
            for link in ev.links:  # ev.source_ids, without building it
                if link.source_id:
                    refs.setdefault(link.source_id, None)
            if when is None and ev.when is not None:
                when = ev.when
            non_ascii = non_ascii or ev.non_ascii_time
    content = ANY_FOOTNOTE_REF_RE.sub("", body).strip() if "[^" in body else body.strip()
    # Unit's fields, in order (see the class)
    return _make_unit_fields(memory_id, topic_path, para.headings, content, body, annotations, tuple(refs),
                             _relation_targets(body), when, para.start, para.end, aliases, legacy, non_ascii)


def parse_topic(
    path: str,
    text: str,
    *,
    resolve: SourceResolver | None = None,
    strict: bool = True,
) -> Topic:
    """Parse one topic file. ``path`` is relative to ``topics/`` (a leading ``topics/`` is
    dropped). Never raises for bad text. ``strict`` adds the rules that reject uncited prose and
    unused definitions (OpenProgram's strict parse); without it those are tolerated."""
    topic_path = _strip_topics_prefix(path)
    fast = parse_well_formed(topic_path, text, resolve=resolve)
    if fast is not None:
        return fast
    report = _Reporter(topic_path)
    paragraphs, lines, headings = iter_blocks(text)

    # Definitions first: citations may precede them.
    definitions: dict[str, Evidence] = {}
    evidence_order: list[Evidence] = []
    cited_ids: set[str] | None = None  # read only for a definition OpenProgram does not read
    for line in lines:
        if line.kind != "definition":
            continue
        raw = read_definition(line.text, line.number)
        if raw.id in definitions:  # every definition read so far is in it
            report.error(f"duplicate footnote definition: {raw.id}", line.number, 1, footnote=raw.id)
            continue
        if raw.raw_when is None and cited_ids is None:
            cited_ids = {fid for other in lines if other.kind in ("text", "heading")
                         for fid in CITATION_RE.findall(other.text)}
        ev = _read_evidence(raw, topic_path, resolve, report, raw.raw_when is None and raw.id in cited_ids)  # type: ignore[operator]
        definitions[raw.id] = ev
        evidence_order.append(ev)

    units: list[Unit] = []
    cited: set[str] = set()
    seen_ids: dict[str, int] = {}

    def add_unit(unit: Unit) -> None:
        if unit.memory_id in seen_ids:
            report.error(f"duplicate memory_id: {unit.memory_id}", unit.line, 1, memory_id=unit.memory_id)
            return
        seen_ids[unit.memory_id] = unit.line
        units.append(unit)

    for para in paragraphs:
        ptext = para.text
        shape = paragraph_shape(ptext)

        def where(offset: int) -> tuple[int, int]:
            return _offset_to_line_col(para.lines, para.start, offset)

        for bad in shape.invalid_ids:
            report.error(f"invalid block_id: {bad.id}", *where(bad.offset), value=bad.id)
        if shape.invalid_ids:
            continue

        if shape.suffix:
            identity = shape.suffix[-1].id
            _check_id_placement(shape, para, report, where)
            annotations: list[Annotation] = []
            prev = 0
            for start, end, fids in shape.groups:
                quote = ptext[prev:start]
                if not quote.strip():
                    report.error(f"missing memory content before {fids[0]}", *where(start), footnote=fids[0])
                evs = []
                for j, fid in enumerate(fids):
                    cited.add(fid)
                    ev = definitions.get(fid)
                    if ev is None:
                        report.error(f"undefined footnote: {fid}", *where(start + _nth_ref_offset(ptext, start, j)),
                                     footnote=fid)
                    else:
                        evs.append(ev)
                annotations.append(_make_annotation(quote.strip(), tuple(evs)))
                prev = end
            if not shape.groups:
                report.error(f"memory source footnote required: {identity}", para.start, 1, memory_id=identity)
            elif ptext[prev:shape.body_end].strip():
                tail = prev + (len(ptext[prev:shape.body_end]) - len(ptext[prev:shape.body_end].lstrip()))
                report.error(f"content after final evidence: {identity}", *where(tail), memory_id=identity)
            body = ptext[: shape.body_end].strip()
            ids = shape.ids
            for mid in ids:
                add_unit(_make_unit(mid, topic_path, para, body, tuple(annotations), ids, False))
            continue

        # No id suffix: a legacy mem_ paragraph, or uncited prose.
        mem_groups = [g for g in shape.groups if all(is_mem_id(f) for f in g[2])]
        if mem_groups:
            prev = 0
            for start, end, fids in shape.groups:
                if all(is_mem_id(f) for f in fids):
                    quote = ptext[prev:start].strip()
                    for j, fid in enumerate(fids):
                        cited.add(fid)
                        ev = definitions.get(fid)
                        if ev is None:
                            report.error(f"undefined footnote: {fid}",
                                         *where(start + _nth_ref_offset(ptext, start, j)), footnote=fid)
                        ann = (_make_annotation(quote, (ev,) if ev else ()),)
                        add_unit(_make_unit(fid, topic_path, para, quote, ann, (fid,), True))
                prev = end
            continue
        if strict:
            report.error(f"memory block ID required: {topic_path}", para.start, 1)

    if strict:
        for ev in evidence_order:
            if ev.id not in cited:
                report.error(f"unused footnote definition: {ev.id}", ev.line, 1, footnote=ev.id)

    problems = tuple(sorted(report.items, key=lambda p: (p.line or 0, p.column or 0)))
    return Topic(topic_path, text, tuple(units), tuple(evidence_order), tuple(headings), problems)


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
    general parser and the round-4 one."""
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


def _nth_ref_offset(text: str, group_start: int, n: int) -> int:
    """Offset (relative to the group start) of the n-th [^..] of a citation group."""
    pos = group_start
    for _ in range(n):
        pos = text.index("]", pos) + 1
    return pos - group_start


def _check_id_placement(shape: ParagraphShape, para: Paragraph, report: _Reporter, where) -> None:
    """Pitfall 14: an id on its own line or after an unusual separator makes OpenProgram invent
    an alias. Reported as a warning here (committed files are read as OpenProgram reads them)."""
    for entry in shape.suffix:
        if entry.separator == " ":  # the usual placement: nothing to say (and no position to find)
            continue
        line, column = where(entry.offset)
        if "\n" in entry.separator:
            report.warning(
                f"malformed id placement: ^{entry.id} stands alone on its own line", line, column,
                kind="malformed_id_placement", memory_id=entry.id,
            )
        elif any(ch not in " \t" for ch in entry.separator):
            names = ", ".join(sorted({f"U+{ord(c):04X}" for c in entry.separator if c not in " \t"}))
            report.warning(
                f"malformed id placement: ^{entry.id} follows unusual whitespace ({names})", line, column,
                kind="malformed_id_placement", memory_id=entry.id,
            )


# ---------------------------------------------------------------------------------------------
# Trees
# ---------------------------------------------------------------------------------------------


def _decode(rel: str, data: bytes) -> tuple[str | None, Problem | None]:
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return None, Problem(INVALID_TOPIC_FORMAT, "topic file is not valid UTF-8", "topics/" + rel, line, column)


def outside_link_problem(topics_dir: Path, rel: str) -> Problem | None:
    """A topic file that is a symbolic link leading outside ``topics/`` is never read: its
    content is not memory, and showing it could leak any file on the machine."""
    file = topics_dir / rel
    if not file.is_symlink():
        return None
    try:
        file.resolve(strict=True).relative_to(topics_dir.resolve(strict=True))
        return None
    except (OSError, RuntimeError, ValueError):
        return Problem(
            "PATH_OUTSIDE_WORKSPACE", "symbolic link leads outside the workspace; not read", "topics/" + rel, None, None
        )


def read_topic_file(topics_dir: Path, rel: str) -> tuple[str | None, bytes | None, Problem | None]:
    """One topic file as (text, raw bytes, problem): the single place that decides what a
    topic file on disk reads as (outside links refused, unreadable and non-UTF-8 named)."""
    outside = outside_link_problem(topics_dir, rel)
    if outside is not None:
        return None, None, outside
    try:
        data = (topics_dir / rel).read_bytes()
    except OSError as exc:
        return None, None, Problem(INVALID_TOPIC_FORMAT, f"cannot read topic file: {exc.strerror}", "topics/" + rel, 1, 1)
    text, problem = _decode(rel, data)
    return text, data, problem


def read_topic_texts(topics_dir: Path) -> tuple[dict[str, str], list[Problem]]:
    """Every ``*.md`` under ``topics_dir`` (recursive), decoded; undecodable files are Problems."""
    texts: dict[str, str] = {}
    problems: list[Problem] = []
    if not topics_dir.is_dir():
        return texts, problems
    try:
        files = sorted(topics_dir.rglob("*.md"))
    except OSError as exc:
        problems.append(Problem(INVALID_TOPIC_FORMAT, f"cannot list topic files: {exc.strerror or exc}", "topics", None, None))
        return texts, problems
    for file in files:
        if not file.is_file():
            continue
        rel = file.relative_to(topics_dir).as_posix()
        text, _data, problem = read_topic_file(topics_dir, rel)
        if problem is not None:
            problems.append(problem)
        else:
            texts[rel] = text  # type: ignore[assignment]
    return texts, problems


def parse_tree(
    topics: Path | Mapping[str, str | bytes | None],
    *,
    resolve: SourceResolver | None = None,
    strict: bool = True,
) -> TopicTree:
    """Parse a whole ``topics/`` tree (a directory, or a mapping of topics-relative path -> text;
    ``None`` values are deleted files). Never raises for bad files."""
    problems: list[Problem] = []
    if isinstance(topics, Path):
        texts, read_problems = read_topic_texts(topics)
        problems.extend(read_problems)
    else:
        texts = {}
        for key, value in topics.items():
            rel = _strip_topics_prefix(key)
            if value is None:
                continue
            if isinstance(value, bytes):
                text, problem = _decode(rel, value)
                if problem is not None:
                    problems.append(problem)
                    continue
                value = text  # type: ignore[assignment]
            texts[rel] = value  # type: ignore[assignment]
    parsed: list[Topic] = []
    for rel in sorted(texts, key=topic_sort_key):
        parsed.append(parse_topic(rel, texts[rel], resolve=resolve, strict=strict))
    return assemble_tree(parsed, problems)


def assemble_tree(parsed: Iterable[Topic], problems: Iterable[Problem] = ()) -> TopicTree:
    """Combine per-file parses (already in tree order) into a tree: the cross-file rules
    (a block id must be unique across files) and problem ordering. Callers that cache per-file
    parses use this so they can never drift from ``parse_tree``."""
    parsed = tuple(parsed)
    problems = list(problems)
    # Without a duplicate id (every workspace OpenProgram accepts) the tree is its topics in
    # order, an id map from the topics' id columns and their problems; the units tuple, and
    # the units of topics from the cache, are built when first read.
    where: dict[str, Topic] = {}
    total = 0
    for topic in parsed:
        mids = topic.memory_ids
        total += len(mids)
        where.update(zip(mids, itertools.repeat(topic)))
    if len(where) == total:
        for topic in parsed:
            problems.extend(topic.problems)
        problems.sort(key=_problem_order)
        return TopicTree._lazy(parsed, tuple(problems), _IdsByTopic(where), {t.path: t for t in parsed})
    units: list[Unit] = []
    first_seen: dict[str, Unit] = {}
    for topic in parsed:
        problems.extend(topic.problems)
        for unit in topic.units:
            if unit.memory_id in first_seen:
                other = first_seen[unit.memory_id]
                if other.topic_path != unit.topic_path:  # same-file duplicates are reported by parse_topic
                    problems.append(Problem(
                        INVALID_TOPIC_FORMAT, f"duplicate memory_id: {unit.memory_id}", unit.path, unit.line, 1,
                        {"memory_id": unit.memory_id, "first": f"{other.path}:{other.line}"},
                    ))
                continue
            first_seen[unit.memory_id] = unit
            units.append(unit)
    problems.sort(key=_problem_order)
    dupfree = len(units) == sum(len(topic.units) for topic in parsed)
    index = {unit.memory_id: unit for unit in units}
    return TopicTree(parsed, tuple(units), tuple(problems), index, {t.path: t for t in parsed}, dupfree)


def _problem_order(p: Problem) -> tuple:
    return (topic_sort_key(p.path or ""), p.line or 0, p.column or 0)


# More changed topics than this and the tree is assembled from scratch (it is cheaper).
REASSEMBLE_MAX_CHANGED = 64


def reassemble_tree(previous: TopicTree, parsed: Iterable[Topic]) -> TopicTree:
    """``assemble_tree(parsed)`` when ``parsed`` differs from ``previous.topics`` in a few
    topics: the id map is ``previous``'s with the replaced topics' ids swapped, instead of
    being rebuilt from every unit. Taken only when both trees are free of duplicate ids (then
    ``units`` is the concatenation of the topics' units and ``problems`` the sorted
    concatenation of theirs, exactly what ``assemble_tree`` produces); anything else is
    assembled in full. ``tests/property/test_tree_incremental_props.py`` compares the two."""
    parsed = tuple(parsed)
    if not previous._dupfree:
        return assemble_tree(parsed)
    old_topics = previous.topics
    moved: list[int] | None = None
    if len(parsed) == len(old_topics):
        # the common edit: the same paths in the same order, a few parses replaced -- found by
        # one C-level pass instead of a dict of every topic and a lookup per topic
        moved = list(itertools.compress(range(len(parsed)), map(operator.is_not, parsed, old_topics)))
        if not moved:
            return previous
        if len(moved) > REASSEMBLE_MAX_CHANGED or any(parsed[i].path != old_topics[i].path for i in moved):
            moved = None
    if moved is not None:
        added = [parsed[i] for i in moved]
        gone = [old_topics[i] for i in moved]
        topic_index = dict(previous._topic_index)
        topic_index.update((t.path, t) for t in added)
    else:
        old_index = previous._topic_index
        topic_index = {t.path: t for t in parsed}
        if len(topic_index) != len(parsed):
            return assemble_tree(parsed)
        added = [t for t in parsed if old_index.get(t.path) is not t]
        gone = [t for t in previous.topics if topic_index.get(t.path) is not t]
        if len(added) + len(gone) > REASSEMBLE_MAX_CHANGED:
            return assemble_tree(parsed)
        if not added and not gone:  # the same topics: the same tree, if in the same order
            return previous if all(a is b for a, b in zip(parsed, previous.topics)) else assemble_tree(parsed)
    previous_map = previous._index
    leaving = {mid for topic in gone for mid in topic.memory_ids}
    arriving: dict[str, Unit] = {}
    for topic in added:
        for unit in topic.units:
            mid = unit.memory_id
            if mid in arriving or (mid in previous_map and mid not in leaving):
                return assemble_tree(parsed)  # a duplicate: the full rules decide what it means
            arriving[mid] = unit
    # The new map shares the previous one's base and lays the changed ids over it.
    if isinstance(previous_map, IdOverlay):
        base, over, removed = previous_map.base, dict(previous_map.over), set(previous_map.gone)
    else:
        base, over, removed = previous_map, {}, set()
    for mid in leaving - arriving.keys():
        over.pop(mid, None)
        if mid in base:
            removed.add(mid)
    over.update(arriving)
    removed.difference_update(arriving)
    index: Mapping[str, Unit]
    if len(over) + len(removed) <= OVERLAY_MAX:
        index = IdOverlay(base, over, frozenset(removed))
    else:  # built by insertion: no deleted slots, so the next copy (if any) is one memcpy
        index = {mid: unit for mid, unit in IdOverlay(base, over, frozenset(removed)).items()}
    # The units tuple is its topics' units one after the other (no duplicate), made when first
    # read: an edit whose readers never ask for it pays nothing for it.
    if moved is not None:
        built = previous.__dict__.get("units")
        units_of = _concat_units if built is None else functools.partial(_splice_units, built, old_topics, moved)
        if not previous.problems and not any(t.problems for t in added):
            return TopicTree._lazy(parsed, (), index, topic_index, units_of)
    else:
        units_of = _concat_units
    problems = [p for topic in parsed for p in topic.problems]
    problems.sort(key=_problem_order)
    return TopicTree._lazy(parsed, tuple(problems), index, topic_index, units_of)


def _splice_units(previous: tuple[Unit, ...], old_topics: tuple[Topic, ...], moved: list[int],
                  parsed: tuple[Topic, ...]) -> tuple[Unit, ...]:
    """The units of ``parsed`` from the units of ``old_topics`` (``previous``), where the
    topics at ``moved`` were replaced: the replaced runs swapped by slicing."""
    starts = [0, *itertools.accumulate(map(len, map(_MEMORY_IDS, old_topics)))]
    pieces: list[tuple[Unit, ...]] = []
    at = 0
    for i in moved:
        pieces.append(previous[at:starts[i]])
        pieces.append(tuple(parsed[i].units))
        at = starts[i + 1]
    pieces.append(previous[at:])
    return pieces[0] + pieces[1] + pieces[2] if len(pieces) == 3 else tuple(itertools.chain.from_iterable(pieces))


_MEMORY_IDS = operator.attrgetter("memory_ids")


def _concat_units(parsed: tuple[Topic, ...]) -> tuple[Unit, ...]:
    if len(parsed) < 4:
        return tuple(u for topic in parsed for u in topic.units)
    out: list[Unit] = []
    # Building deferred topics makes ~10^5 acyclic objects: with the collector running between
    # topics, each collection their allocation triggers traverses them all again.
    with bulk():
        for topic in parsed:
            out.extend(topic.units)
    return tuple(out)


def raise_for_problems(problems: Iterable[Problem]) -> None:
    """Raise ``MemoryError(INVALID_TOPIC_FORMAT)`` for the first error (warnings ignored)."""
    errors = tuple(p for p in problems if is_error(p))
    if errors:
        first = errors[0]
        raise MemoryError(first.code, first.message, path=first.path, line=first.line, column=first.column,
                          details=first.details, problems=errors)


def parse_topic_strict(path: str, text: str, *, resolve: SourceResolver | None = None) -> Topic:
    topic = parse_topic(path, text, resolve=resolve, strict=True)
    raise_for_problems(topic.problems)
    return topic


def parse_tree_strict(
    topics: Path | Mapping[str, str | bytes | None], *, resolve: SourceResolver | None = None
) -> TopicTree:
    tree = parse_tree(topics, resolve=resolve, strict=True)
    raise_for_problems(tree.problems)
    return tree


__all__ = [
    "Annotation", "Evidence", "Heading", "IdOverlay", "Line", "Paragraph", "ParagraphShape", "SourceLink",
    "SourceResolver", "SuffixId", "Topic", "TopicTree", "Unit", "INVALID_TOPIC_FORMAT",
    "block_id", "evidence_id", "classify_lines", "iter_blocks", "is_ascii_when", "is_error",
    "is_local_label", "is_mem_id", "is_v2_source_id", "is_valid_block_id", "paragraph_shape",
    "parse_topic", "parse_topic_strict", "parse_tree", "parse_well_formed", "parse_tree_strict", "parse_when", "reassemble_tree",
    "raise_for_problems", "read_definition", "read_topic_texts", "resolve_plain_target",
    "resolve_source_target", "sha256hex", "split_bare_sources", "split_lines", "topic_sort_key",
]
