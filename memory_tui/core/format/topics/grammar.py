"""Topic Markdown's grammar (memory spec §3.1-§3.5): the lexical pieces, the line classes,
paragraphs and their id suffix and citation groups, definitions, and the file-free parts of
link resolution.

Shared by the general parser (``parse``), the one-pass reader (``fast``) and the normaliser:
one definition of each rule, so a change to a rule is seen by every reader at once.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import NamedTuple

from .model import Heading, SourceResolver
from ..fastdata import positional
from ...cache.registry import keeps

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


def is_mem_id(fid: str) -> bool:
    return bool(MEM_ID_RE.match(fid))


def is_valid_block_id(bid: str) -> bool:
    return bool(BLOCK_ID_RE.match(bid))


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


def _relation_targets(text: str) -> tuple[str, ...]:
    if "#^" not in text:  # every block link has it
        return ()
    return tuple(dict.fromkeys([m.group(3) for m in BLOCK_LINK_RE.finditer(text)]))
