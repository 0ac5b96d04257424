# The round-4 topics parser (before the round-5 faster one), kept verbatim as an oracle for the equivalence tests
# of the faster one (test_parse_fast_props.py). Not used by memory_tui itself.
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
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from memory_tui.core.format.errors import MemoryError, Problem

INVALID_TOPIC_FORMAT = "INVALID_TOPIC_FORMAT"

# (topic path relative to topics/, link target as written) -> source id, or None.
SourceResolver = Callable[[str, str], "str | None"]

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
CITATION_GROUP_RE = re.compile(r"(?:\[\^[A-Za-z0-9_-]+\])+")
ANY_FOOTNOTE_REF_RE = re.compile(r"\[\^[^\]]*\]")
LOCAL_LABEL_RE = re.compile(r"(?:e[0-9]+|new-evidence-[A-Za-z0-9-]+)\Z")
EVIDENCE_ID_RE = re.compile(r"e-[0-9a-f]{10}\Z")
# [text](path#^id): a block link (relation). The path part has no '#'.
BLOCK_LINK_RE = re.compile(r"\[([^\]]*)\]\(([^)#\s]*)#\^([A-Za-z0-9_-]+)\)")
MARKDOWN_LINK_RE = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]*)\)")
SOURCE_LINK_RE = re.compile(r"\[([^\]]*)\]\(([^)\n]*)\)")

# Definition bodies (after "[^id]:").
_CANON_DEF_RE = re.compile(
    r"^\s*Time:\s*(?P<when>`[^`]*`|[^;`]*?)\s*;\s*Sources:\s*(?P<sources>.*?)\s*$", re.DOTALL
)
_LEGACY_DEF_RE = re.compile(r"^\s*(?P<when>[^\s·]+)\s*·\s*Sources:\s*(?P<sources>.*?)\s*$", re.DOTALL)
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
        return tuple(u.memory_id for u in self.units)

    def evidence_by_id(self, eid: str) -> Evidence | None:
        for ev in self.evidence:
            if ev.id == eid:
                return ev
        return None


@dataclass(frozen=True)
class TopicTree:
    topics: tuple[Topic, ...]  # sorted component-wise by path
    units: tuple[Unit, ...]  # tree order
    problems: tuple[Problem, ...]
    _index: dict[str, Unit] = field(default_factory=dict, compare=False, repr=False)
    _topic_index: dict[str, Topic] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self._index:
            for unit in self.units:
                self._index.setdefault(unit.memory_id, unit)
        if not self._topic_index:
            for topic in self.topics:
                self._topic_index[topic.path] = topic

    def by_id(self, memory_id: str) -> Unit | None:
        return self._index.get(memory_id)

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


def parse_when(raw: str) -> tuple[bool, str | None, bool]:
    """(valid, when-or-None, non_ascii) for a definition's time text (backticks removed)."""
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


def iter_blocks(text: str) -> tuple[list[Paragraph], list[Line], list[Heading]]:
    """Paragraphs (maximal runs of text lines, with their heading chain), all lines, headings."""
    paragraphs, lines, headings = _blocks(text)
    return list(paragraphs), list(lines), list(headings)


@functools.lru_cache(maxsize=4096)
def _blocks(text: str) -> tuple[tuple[Paragraph, ...], tuple[Line, ...], tuple[Heading, ...]]:
    lines = _classified(text)
    paragraphs: list[Paragraph] = []
    headings: list[Heading] = []
    chain: list[str] = []
    run: list[Line] = []

    def flush() -> None:
        if run:
            paragraphs.append(Paragraph(run[0].number, run[-1].number, tuple(l.text for l in run), tuple(chain)))
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
    groups = tuple(
        (m.start(), m.end(), tuple(CITATION_RE.findall(m.group(0))))
        for m in CITATION_GROUP_RE.finditer(text, 0, body_end)
    )
    return ParagraphShape(tuple(suffix), tuple(invalid), body_end, groups)


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
        return RawDefinition(m.group(1), number, line_text, when.strip(), canon.group("sources"), False, backticked)
    legacy = _LEGACY_DEF_RE.match(rest)
    if legacy:
        return RawDefinition(m.group(1), number, line_text, legacy.group("when"), legacy.group("sources"), True, False)
    return RawDefinition(m.group(1), number, line_text, None, "", False, False)


def split_bare_sources(raw_sources: str) -> list[str]:
    """With no links: the ``,``/``·``-separated values (SEED form of §3.8 step 2)."""
    return [part.strip() for part in re.split(r"[,·]", raw_sources) if part.strip()]


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------


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
    raw: RawDefinition, topic_path: str, resolve: SourceResolver | None, report: _Reporter
) -> Evidence | None:
    col_of = lambda needle: max(raw.text.find(needle), 0) + 1  # noqa: E731
    if raw.raw_when is None:
        report.error(f"invalid evidence definition: {raw.id}", raw.line, 1, footnote=raw.id)
        # Still a definition: citing it is not an "undefined footnote" on top.
        return Evidence(raw.id, "", None, (), topic_path, raw.line, False, text=raw.text)
    ok, when, non_ascii = parse_when(raw.raw_when)
    if not ok:
        report.error("invalid evidence date", raw.line, col_of(raw.raw_when) if raw.raw_when else 1,
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
        links.append(SourceLink(label, target, source_id))
    return Evidence(
        id=raw.id,
        raw_when=raw.raw_when,
        when=when if ok else None,
        links=tuple(links),
        topic_path=topic_path,
        line=raw.line,
        legacy=raw.legacy,
        non_ascii_time=non_ascii,
        raw_sources=raw.raw_sources,
        text=raw.text,
    )


def _relation_targets(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.group(3) for m in BLOCK_LINK_RE.finditer(text)))


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
            for sid in ev.source_ids:
                refs.setdefault(sid, None)
            if when is None and ev.when is not None:
                when = ev.when
            non_ascii = non_ascii or ev.non_ascii_time
    return Unit(
        memory_id=memory_id,
        topic_path=topic_path,
        headings=para.headings,
        content=ANY_FOOTNOTE_REF_RE.sub("", body).strip(),
        body=body,
        annotations=annotations,
        source_refs=tuple(refs),
        relation_targets=_relation_targets(body),
        when=when,
        line=para.start,
        end_line=para.end,
        aliases=aliases,
        legacy=legacy,
        non_ascii_time=non_ascii,
    )


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
    report = _Reporter(topic_path)
    paragraphs, lines, headings = iter_blocks(text)

    # Definitions first: citations may precede them.
    definitions: dict[str, Evidence] = {}
    evidence_order: list[Evidence] = []
    for line in lines:
        if line.kind != "definition":
            continue
        raw = read_definition(line.text, line.number)
        if raw.id in definitions or any(e.id == raw.id for e in evidence_order):
            report.error("duplicate footnote definition", line.number, 1, footnote=raw.id)
            continue
        ev = _read_evidence(raw, topic_path, resolve, report)
        if ev is not None:
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
                annotations.append(Annotation(quote.strip(), tuple(evs)))
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
                        ann = (Annotation(quote, (ev,) if ev else ()),)
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
    problems.sort(key=lambda p: (topic_sort_key(p.path or ""), p.line or 0, p.column or 0))
    return TopicTree(parsed, tuple(units), tuple(problems))


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
    "Annotation", "Evidence", "Heading", "Line", "Paragraph", "ParagraphShape", "SourceLink",
    "SourceResolver", "SuffixId", "Topic", "TopicTree", "Unit", "INVALID_TOPIC_FORMAT",
    "block_id", "evidence_id", "classify_lines", "iter_blocks", "is_ascii_when", "is_error",
    "is_local_label", "is_mem_id", "is_v2_source_id", "is_valid_block_id", "paragraph_shape",
    "parse_topic", "parse_topic_strict", "parse_tree", "parse_tree_strict", "parse_when",
    "raise_for_problems", "read_definition", "read_topic_texts", "resolve_plain_target",
    "resolve_source_target", "sha256hex", "split_bare_sources", "split_lines", "topic_sort_key",
]
