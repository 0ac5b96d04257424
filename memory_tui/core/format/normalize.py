"""Normalisation of a staged ``topics/`` tree (memory spec §3.8, §3.9).

``normalize_tree`` takes the staged texts (topics-relative path -> text) plus what is committed
and returns the texts OpenProgram's runtime would install, the ids it allocated, and -- where
memory-tui is stricter than OpenProgram (pitfalls 2, 13, 14) -- Problems that say what would have
been dropped or invented, and why. The steps run in the spec's order:

1. relocated evidence (source identities recovered by block/evidence id),
2. local evidence labels -> ``e-`` ids (whole tree, sorted file order, first definition wins),
3. orphan citations rebound to the next unused definitions after the paragraph,
4. invented trailing ``^id`` stripped,
5. block ids allocated,
6. canonical rewrite of every line,
7. pruning of empty sections and topics.

Line numbers in every Problem are those of the staged text the caller handed in (steps 3-6 never
add or remove lines). Which files pass through unchanged is ``passthrough``'s; block links
(§3.7) are rewritten by ``blocklinks`` and checked by ``linkcheck``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Set as AbstractSet
from dataclasses import dataclass, field
from itertools import repeat
from typing import Protocol

from .errors import Problem
from .passthrough import Committed, PassFacts, Seen, check_order, select, topic_at, usable_seen
from .paths import relpath
from .sources import pct
from .topics import (
    CITATION_RE,
    INVALID_TOPIC_FORMAT,
    SOURCE_LINK_RE,
    SourceResolver,
    Topic,
    TopicTree,
    block_id,
    classify_lines,
    evidence_id,
    heading_chain,
    HEADING_RE,
    is_error,
    is_local_label,
    is_mem_id,
    iter_blocks,
    paragraph_shape,
    parse_tree,
    parse_when,
    read_definition,
    resolve_plain_target,
    resolve_source_target,
    sha256hex,
    split_bare_sources,
    split_lines,
    topic_sort_key,
    DEFINITION_RE,
)

# (source id, workspace-relative directory of the topic file) -> link target relative to that
# directory, e.g. "../../sources/openprogram/_v2/s.md#source-…". ``SourceIndex.link_for`` fits.
LinkFor = Callable[[str, str], "str | None"]

_LINE_END_ID_RE = re.compile(r"(?:^|\s)\^([A-Za-z0-9-]+)\s*$")
_TRAILING_ID_RE = re.compile(r"(\s+)\^([A-Za-z0-9-]+)\s*$")
_LONE_IDS_RE = re.compile(r"^\s*(?:\^[A-Za-z0-9-]+\s*)+$")
_SUFFIX_TOKENS_RE = re.compile(r"(?:\s+\^[A-Za-z0-9-]+)+\s*$")
_WS_BEFORE_REF_RE = re.compile(r"(?<=\S)\s+(?=\[\^)")
# OpenProgram's canonical rewrite of every line that is not a definition (memory spec §3.8
# step 6), applied as it applies it -- to text, headings, fenced code and comments alike: the
# spaces and tabs before a citation go, and the last trailing id gets exactly one space before
# it (any other whitespace before it, a no-break space say, stays where it is).
_OP_REF_GAP_RE = re.compile(r"[ \t]+\[\^([A-Za-z0-9_-]+)\]")
_OP_LAST_ID_RE = re.compile(r"[ \t]*\^([A-Za-z0-9-]+)\s*$")
# Step 4 as OpenProgram runs it on every line: one uncommitted trailing id, with the spaces
# and tabs before it.
_OP_INVENTED_RE = re.compile(r"[ \t]*\^([A-Za-z0-9-]+)(?=\s*$)")
_HEADING_MARK_RE = re.compile(r"#{1,6}\s+")
_D_HANDLE_RE = re.compile(r"D([0-9]+):([0-9]+)\Z")
_LOCAL_REF_RE = re.compile(r"\[\^(?:e[0-9]+|new-evidence-[A-Za-z0-9-]+)\]")


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NormalizeResult:
    texts: dict[str, str | None]  # topics-relative path -> normalised text; None = file deleted
    block_ids: dict[str, str]  # "topics/<path>#<n>" -> allocated block id
    evidence_ids: dict[str, str]  # local label -> allocated e- id
    dropped: tuple[Problem, ...]  # content pruning removed (pitfalls 2/13); errors when new
    problems: tuple[Problem, ...] = ()  # other refusals (pitfall 14 id placement, ...)
    inputs: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)
    # the files passed through unchanged (their proof held: ``proven_canonical``)
    passed: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def changed(self) -> dict[str, str | None]:
        """Only the paths whose text differs from the staged input."""
        return {p: t for p, t in self.texts.items() if self.inputs.get(p) != t}

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in (*self.problems, *self.dropped) if is_error(p))

    @property
    def ok(self) -> bool:
        return not self.errors


# ---------------------------------------------------------------------------------------------
# Link targets
# ---------------------------------------------------------------------------------------------


def default_link_for(source_id: str, from_dir: str) -> str | None:
    """The canonical target computed from the id alone (v2 location, or the D archive).
    Used when no ``SourceIndex`` is at hand; it cannot know a source that exists only in a
    legacy archive."""
    from_dir = from_dir.strip("/") or "."
    m = _D_HANDLE_RE.match(source_id)
    if m:
        n, k = m.groups()
        return relpath(f"sources/D{n}.md", from_dir) + f"#d{n}-{k}"
    parts = source_id.split("/", 2)
    if len(parts) != 3 or not all(parts):
        return None
    provider, thread, _ = parts
    location = f"sources/{pct(provider)}/_v2/{pct(thread)}.md"
    return relpath(location, from_dir) + "#source-" + sha256hex(source_id)[:16]


def _topic_dir(topic_path: str) -> str:
    return posixpath.dirname("topics/" + topic_path)


# ---------------------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------------------


def _problem(topic_path: str, message: str, line: int, column: int = 1, *, warning: bool = False, **details) -> Problem:
    if warning:
        details["severity"] = "warning"
    return Problem(INVALID_TOPIC_FORMAT, message, "topics/" + topic_path, line, column, details)


# ---------------------------------------------------------------------------------------------
# Step 2: local evidence labels
# ---------------------------------------------------------------------------------------------


def definition_seed(raw_sources: str) -> str:
    """SEED of §3.8 step 2: stripped link targets joined by '|', else the bare values."""
    targets = [m.group(2).strip() for m in SOURCE_LINK_RE.finditer(raw_sources)]
    if targets:
        return "|".join(targets)
    return "|".join(split_bare_sources(raw_sources))


def definition_ids(text: str) -> frozenset[str]:
    """The non-local footnote definition ids of one topic text (``allocate_evidence_ids``'s
    ``existing`` part of a file)."""
    out = set()
    for line in classify_lines(text):
        if line.kind == "definition":
            fid = read_definition(line.text, line.number).id
            if not is_local_label(fid):
                out.add(fid)
    return frozenset(out)


def allocate_evidence_ids(texts: Mapping[str, str], *, existing_ids: Iterable[str] = ()) -> dict[str, str]:
    """Local label -> ``e-`` id over the whole staged tree (sorted files, first definition wins).
    ``existing_ids``: non-local definition ids of files left out of ``texts`` (files without
    local labels, which add nothing else)."""
    definitions: list[tuple[str, str, str]] = []  # (label, when, seed)
    existing: set[str] = set(existing_ids)
    for path in sorted(texts, key=topic_sort_key):
        for line in classify_lines(texts[path]):
            if line.kind != "definition":
                continue
            raw = read_definition(line.text, line.number)
            if not is_local_label(raw.id):
                existing.add(raw.id)
            elif raw.raw_when is not None:
                definitions.append((raw.id, raw.raw_when or "undated", definition_seed(raw.raw_sources)))
    labels: dict[str, str] = {}
    for label, when, seed in definitions:
        if label in labels:
            continue
        k = 0
        while (candidate := evidence_id(when, seed, k)) in existing:
            k += 1
        existing.add(candidate)
        labels[label] = candidate
    return labels


# ---------------------------------------------------------------------------------------------
# Step 3: orphan rebinding
# ---------------------------------------------------------------------------------------------


def _rebind_orphans(lines: list[str]) -> None:
    text = "\n".join(lines)
    paragraphs, classified, _ = iter_blocks(text)
    defs = [(l.number, DEFINITION_RE.match(l.text).group(1)) for l in classified if l.kind == "definition"]  # type: ignore[union-attr]
    defined = {fid for _, fid in defs}
    cited: set[str] = set()
    for para in paragraphs:
        cited.update(CITATION_RE.findall(para.text))
    taken: set[str] = set()
    for para in paragraphs:
        orphans = list(dict.fromkeys(f for f in CITATION_RE.findall(para.text) if is_local_label(f) and f not in defined))
        if not orphans:
            continue
        free = [fid for number, fid in defs if number > para.end and fid not in cited and fid not in taken]
        mapping = dict(zip(orphans, free))
        if not mapping:
            continue
        taken.update(mapping.values())
        for i in range(para.start - 1, para.end):
            lines[i] = CITATION_RE.sub(lambda m: f"[^{mapping.get(m.group(1), m.group(1))}]", lines[i])


# ---------------------------------------------------------------------------------------------
# Step 4: invented ids
# ---------------------------------------------------------------------------------------------


def _strip_invented(topic_path: str, lines: list[str], committed: frozenset[str] | set[str]) -> list[Problem]:
    problems: list[Problem] = []
    text = "\n".join(lines)
    paragraphs, classified, _ = iter_blocks(text)
    if "^" in text:
        problems.extend(_strip_invented_outside(topic_path, lines, {line.number - 1: line.kind for line in classified},
                                                committed))
    for para in paragraphs:
        for index in range(para.start - 1, para.end):
            line = lines[index]
            number = index + 1
            if _LONE_IDS_RE.match(line) and para.end > para.start:
                # Committed or not: OpenProgram makes the paragraph a new block and keeps the
                # id only as an alias (pitfall 14, corpus cases 048, 409), so it is refused.
                # On a paragraph's first line too: the canonical gap would put a space before
                # it, and the next edit would strip it as an invented id, splitting the record.
                for m in re.finditer(r"\^([A-Za-z0-9-]+)", line):
                    problems.append(_problem(
                        topic_path, f"malformed id placement: ^{m.group(1)} stands alone on its own line "
                        "(put the id at the end of the paragraph's last line, or leave it out)",
                        number, m.start() + 1, kind="malformed_id_placement", memory_id=m.group(1),
                    ))
                continue
            reported: set[str] = set()
            while True:
                m = _TRAILING_ID_RE.search(line)
                if not m or m.group(2) in committed:
                    break
                if any(ch not in " \t" for ch in m.group(1)):
                    # OpenProgram strips the id with the spaces and tabs before it and keeps the
                    # rest (a no-break space, say); the id allocated next ends the line's text.
                    op = _OP_INVENTED_RE.search(line)
                    line = line[: op.start()] + line[op.end():] if op is not None else line[: m.start()]
                    break
                line = line[: m.start()]
            # What is left at the end of the line are committed ids; uncommitted aliases before
            # them are hand-made (pitfall 14) -- OpenProgram would make them permanent.
            suffix = _SUFFIX_TOKENS_RE.search(line)
            if suffix:
                for t in re.finditer(r"\^([A-Za-z0-9-]+)", suffix.group(0)):
                    if t.group(1) not in committed and t.group(1) not in reported:
                        problems.append(_problem(
                            topic_path, f"malformed id placement: alias ^{t.group(1)} is not a committed block id "
                            "(only the runtime allocates ids)",
                            number, suffix.start() + t.start() + 1, kind="malformed_id_placement",
                            memory_id=t.group(1),
                        ))
            lines[index] = line
    return problems


def line_end_ids(text: str) -> frozenset[str]:
    """The ids at the ends of the lines of one topic text (the passthrough test's ids)."""
    return frozenset(_ids_at_line_ends(split_lines(text)))


def _ids_at_line_ends(lines: Iterable[str]) -> set[str]:
    out = set()
    for line in lines:
        m = _LINE_END_ID_RE.search(line)
        if m:
            out.add(m.group(1))
    return out


# ---------------------------------------------------------------------------------------------
# Step 6: canonical lines
# ---------------------------------------------------------------------------------------------


def _canonical_text_line(line: str, labels: Mapping[str, str], committed: AbstractSet[str]) -> str:
    line = CITATION_RE.sub(lambda m: f"[^{labels.get(m.group(1), m.group(1))}]", line)
    return _canonical_id_gap(_OP_REF_GAP_RE.sub(r"[^\1]", line), committed)


def _canonical_id_gap(line: str, committed: AbstractSet[str]) -> str:
    """The last trailing id gets exactly one space before it. A ``^word`` glued to the text
    ("page#^x", "2^10") gets one only when it is a committed id: step 4 left the glued word
    as text, and a gap would make it an invented id that the next normalisation strips."""
    if "^" not in line:
        return line

    def gap(m: re.Match[str]) -> str:
        glued = m.group(0).startswith("^") and m.start() > 0 and not line[m.start() - 1].isspace()
        if glued and not _committed_like(m.group(1), committed):
            return m.group(0)
        return f" ^{m.group(1)}"

    return _OP_LAST_ID_RE.sub(gap, line)


def _committed_like(memory_id: str, committed: AbstractSet[str]) -> bool:
    """Whether OpenProgram's step 4 keeps this trailing id: it is committed, or a committed id
    followed by a '-' part (its test ends each committed id at a word boundary)."""
    if memory_id in committed:
        return True
    at = memory_id.find("-")
    while at > 0:
        if memory_id[:at] in committed:
            return True
        at = memory_id.find("-", at + 1)
    return False


def _strip_invented_outside(topic_path: str, lines: list[str], kinds: Mapping[int, str],
                            committed: AbstractSet[str]) -> list[Problem]:
    """Step 4 on the lines no paragraph holds: OpenProgram strips an uncommitted trailing
    ``^id`` from every line of the file. On a heading that is an id-like tag, stripped as in a
    paragraph (``# Title ^x`` is installed as ``# Title``); in fenced code or a comment it is
    the owner's content (``2^n``), which would be lost while the edit answers ok, so it is
    refused instead (a row of the README's stricter table)."""
    problems: list[Problem] = []
    for index, kind in kinds.items():
        if kind not in ("heading", "fence", "fenced", "html") or "^" not in lines[index]:
            continue
        m = _OP_INVENTED_RE.search(lines[index])
        if m is None or _committed_like(m.group(1), committed):
            continue
        column = m.start() + len(m.group(0)) - len(m.group(1))  # of the "^"
        if kind == "heading":
            stripped = lines[index][: m.start()] + lines[index][m.end():]
            again = _OP_INVENTED_RE.search(stripped)
            if HEADING_RE.match(stripped) and (again is None or _committed_like(again.group(1), committed)):
                lines[index] = stripped
                continue
            # What is left would be stripped again by the next normalisation (another ^word
            # ends it) or is no heading at all ("## ^x"): the written file would not be what
            # the next edit keeps, so the owner is asked to put it right instead.
            problems.append(_problem(
                topic_path, f"malformed id placement: ^{m.group(1)} ends a heading, and stripping it as an "
                "invented block id leaves a heading that still ends in a ^word (or no heading at all): "
                "remove the ^words from the heading", index + 1, column,
                kind="malformed_id_placement", memory_id=m.group(1),
            ))
            continue
        where = "a comment" if kind == "html" else "fenced code"
        problems.append(_problem(
            topic_path, f"malformed id placement: ^{m.group(1)} ends a line of {where}, and OpenProgram strips a "
            "trailing ^word there as an invented block id, so the text would be lost: put something after it "
            "on the line", index + 1, column,
            kind="malformed_id_placement", memory_id=m.group(1),
        ))
    return problems


class _Recovery:
    """Step 1: committed source identities of a definition, by block id then evidence id."""

    def __init__(self, committed: TopicTree | None, resolve: SourceResolver | None) -> None:
        self.committed = committed
        self.resolve = resolve

    def lookup(self, block_ids: Iterable[str], eid: str, target: str, position: int, here: str) -> str | None:
        """Only for evidence that came from another file (``here`` = the topic it is in now):
        a definition whose link was changed in place is the owner's edit, and OpenProgram
        refuses a broken one ("invalid source target", corpus cases 044, 083, 153) rather than
        restoring the committed link."""
        if self.committed is None:
            return None
        candidates = []
        for bid in block_ids:
            unit = self.committed.by_id(bid)
            if unit is not None:
                candidates.extend((unit, ev) for ev in unit.evidence if ev.id == eid)
        if not candidates:
            for unit in self.committed.units:
                candidates.extend((unit, ev) for ev in unit.evidence if ev.id == eid)
        candidates = [(unit, ev) for unit, ev in candidates if unit.topic_path != here]
        for by_position in (False, True):
            for unit, ev in candidates:
                for i, link in enumerate(ev.links):
                    if (i == position) if by_position else (link.target == target):
                        sid = link.source_id or resolve_source_target(unit.topic_path, link.target, self.resolve)
                        if sid:
                            return sid
        return None


def _render_definition(
    topic_path: str,
    line: str,
    number: int,
    labels: Mapping[str, str],
    citing_blocks: Mapping[str, tuple[str, ...]],
    resolve: SourceResolver | None,
    link_for: LinkFor | None,
    recovery: _Recovery,
) -> str:
    raw = read_definition(line, number)
    new_id = labels.get(raw.id, raw.id)
    if raw.raw_when is None:
        return f"[^{new_id}]:" + line[DEFINITION_RE.match(line).end():]  # type: ignore[union-attr]
    when = raw.raw_when or "undated"
    matches = list(SOURCE_LINK_RE.finditer(raw.raw_sources))
    if matches:
        pairs = [(m.group(1), m.group(2).strip()) for m in matches]
    else:
        values = split_bare_sources(raw.raw_sources)
        if not values or any(resolve_plain_target(v, fallback=False) is None for v in values):
            # Not a list of plain handles: leave it for the strict parse to reject.
            return f"[^{new_id}]:" + line[DEFINITION_RE.match(line).end():]  # type: ignore[union-attr]
        pairs = [(value, value) for value in values]
    from_dir = _topic_dir(topic_path)
    rendered = []
    for position, (label, target) in enumerate(pairs):
        plain = resolve_plain_target(target, fallback=False)
        sid = resolve_source_target(topic_path, target, resolve)
        recovered = False
        if sid is None and resolve is not None:
            # Step 1: the link is broken here (the paragraph moved); recover by block/evidence id.
            sid = recovery.lookup(citing_blocks.get(raw.id, ()), raw.id, target, position, topic_path)
            recovered = sid is not None
        new_target = target
        if sid is not None:
            if link_for is not None:
                new_target = _safe_link(link_for, sid, from_dir) or target
            elif plain is not None or recovered:
                new_target = _safe_link(default_link_for, sid, from_dir) or target
        # A bare handle is its own label (pairs above); a link with a blank label stays blank,
        # so the strict parse refuses it ("memory source labels required", cases 066, 162)
        # instead of the edit being quietly repaired.
        rendered.append(f"[{label}]({new_target})")
    return f"[^{new_id}]: Time: `{when}`; Sources: " + ", ".join(rendered)


def _safe_link(link_for: LinkFor, sid: str, from_dir: str) -> str | None:
    try:
        return link_for(sid, from_dir)
    except (ValueError, KeyError, TypeError):
        return None


# ---------------------------------------------------------------------------------------------
# Step 7: pruning
# ---------------------------------------------------------------------------------------------


def _describe(kinds: set[str]) -> str:
    names = {"text": "prose", "heading": "heading", "fence": "fenced block", "fenced": "fenced block",
             "html": "comment", "definition": "evidence definition"}
    return ", ".join(sorted({names.get(k, k) for k in kinds}))


def prune_topic(
    topic_path: str, text: str, *, committed_text: str | None = None, refuse_drops: bool = False
) -> tuple[str | None, list[Problem]]:
    """§3.9: drop sections with no record; delete a file with no record paragraph.

    Returns the new text (None = deleted) and one Problem per dropped run of lines. A drop is
    an error when the dropped lines are new (not in ``committed_text``) or hold prose, a
    warning otherwise: committed uncited prose is refused by OpenProgram's strict baseline
    parse (§5.3 step 3), and pruning it would silently delete the owner's text.
    """
    paragraphs, lines, _ = iter_blocks(text)
    defined = {DEFINITION_RE.match(l.text).group(1) for l in lines if l.kind == "definition"}  # type: ignore[union-attr]
    record_chains: list[tuple[str, ...]] = []
    record_cites: set[str] = set()
    for para in paragraphs:
        shape = paragraph_shape(para.text)
        cites = set(CITATION_RE.findall(para.text))
        if shape.suffix or (cites & defined):
            record_chains.append(para.headings)
            record_cites.update(cites)
    committed_lines = set(l.strip() for l in split_lines(committed_text)) if committed_text is not None else set()

    def is_new(line_texts: list[str]) -> bool:
        return any(t.strip() and t.strip() not in committed_lines for t in line_texts)

    problems: list[Problem] = []
    if not record_chains:
        kept_nonblank = [l for l in lines if l.text.strip()]
        if kept_nonblank:
            prose = [l for l in kept_nonblank if l.kind == "text"]
            new = is_new([l.text for l in kept_nonblank])
            if prose:
                first = prose[0]
                message = f"memory block ID required: {topic_path}"
            else:
                first = kept_nonblank[0]
                message = (f"topic holds no cited record, so it would be deleted "
                           f"({_describe({l.kind for l in kept_nonblank})})")
            problems.append(_problem(
                topic_path, message, first.number, 1, warning=not (new or bool(prose)), kind="dropped",
                reason="no record paragraph: topic deleted", lines=[kept_nonblank[0].number, kept_nonblank[-1].number],
                new=new,
            ))
        return None, problems

    out: list[str] = []
    dropped: list[list] = []  # runs of dropped Line objects
    on = True
    chain: list[str] = []
    run: list = []
    for line in lines:
        if line.kind == "heading":
            m = HEADING_RE.match(line.text)
            assert m is not None
            chain = heading_chain(chain, len(m.group(1)), m.group(2).strip())
            on = any(tuple(rc[: len(chain)]) == tuple(chain) for rc in record_chains)
            if on and run:
                dropped.append(run)
                run = []
        keep = on
        if not keep and line.kind == "definition":
            fid = DEFINITION_RE.match(line.text).group(1)  # type: ignore[union-attr]
            keep = fid in record_cites
        if keep:
            out.append(line.text)
            if line.text.strip() and run:
                dropped.append(run)
                run = []
        elif line.text.strip():
            if line.kind == "heading" and run:
                dropped.append(run)
                run = []
            run.append(line)
    if run:
        dropped.append(run)
    for run in dropped:
        new = is_new([l.text for l in run])
        prose = [l for l in run if l.kind == "text"]
        heading = next((l.text.strip() for l in run if l.kind == "heading"), None)
        where = f"section {heading!r}" if heading else "section"
        if prose:
            message = f"memory block ID required: {topic_path} ({where} holds no cited record and would be dropped)"
            first = prose[0]
        else:
            message = f"{where} holds no cited record and would be dropped ({_describe({l.kind for l in run})})"
            first = run[0]
        # A committed heading the owner kept, whose section no longer holds a record, would be
        # dropped while the edit is answered ok (pitfall 13, corpus case 059).
        problems.append(_problem(
            topic_path, message, first.number, 1, warning=not (new or bool(prose) or refuse_drops), kind="dropped",
            reason="section without record", lines=[run[0].number, run[-1].number], new=new,
        ))
    return "\n".join(out).rstrip() + "\n", problems
# ---------------------------------------------------------------------------------------------
# The whole pass
# ---------------------------------------------------------------------------------------------


class TextFacts:
    """The per-text facts normalisation asks of a file, computed afresh: pure functions of the
    text (the path only names it). A caller that keeps them between calls hands
    ``normalize_tree`` a ``memo`` with the same methods (``memos.TextMemos``)."""

    @staticmethod
    def has_local_label(path: str, text: str) -> bool:
        return has_local_label(text)

    @staticmethod
    def line_end_ids(path: str, text: str) -> frozenset[str]:
        return line_end_ids(text)

    @staticmethod
    def definition_ids(path: str, text: str) -> frozenset[str]:
        return definition_ids(text)


class NormalizeFacts(PassFacts, Protocol):
    """What ``normalize_tree`` asks of its ``memo``: the passthrough test's facts and the
    definition ids of a passed-through file."""

    def definition_ids(self, path: str, text: str) -> frozenset[str]: ...


def normalize_tree(
    staged: Mapping[str, str | None],
    *,
    committed_ids: Iterable[str] = (),
    committed: TopicTree | Mapping[str, str] | None = None,
    resolve: SourceResolver | None = None,
    link_for: LinkFor | None = None,
    assume_committed_normal: bool = False,
    proven_canonical: Callable[[str, str], bool] | None = None,
    memo: NormalizeFacts | None = None,
    refuse_drops: bool = False,
    proof_key: object | None = None,
    mode: str = "incremental",
) -> NormalizeResult:
    """Run §3.8 steps 1-7 over a staged topics tree.

    ``refuse_drops``: the texts are the owner's own (a hand edit, a whole-file change), so
    anything pruning would remove is an error, committed headings included (pitfall 13).

    ``staged``: topics-relative path (a leading ``topics/`` is accepted) -> text, ``None`` for a
    deleted file. ``committed_ids``: every block id of the committed tree (added to the ids of
    ``committed`` when that is given). ``committed``: the committed tree (parsed, or its texts),
    used to recover moved evidence (step 1) and to tell new dropped content from old.
    ``resolve``: ``SourceIndex.resolve_target``. ``link_for``: ``SourceIndex.link_for``; without
    it plain handles get the default v2/D location and written archive links are kept.
    ``assume_committed_normal``: a file whose staged text equals its committed text, holds no
    local label and whose line-end ids are all committed is passed through unchanged (it still
    counts for the tree-wide id sets). OpenProgram re-normalises every file; this is the fast
    path for a one-topic edit on a large workspace that memory-tui itself keeps normal.
    ``proven_canonical(path, text)``: with ``assume_committed_normal``, only files for which it
    answers True are passed through (the caller proved that normalising exactly that text is
    the identity); every other file is re-normalised as OpenProgram would.
    ``memo``: the per-file facts of ``TextFacts`` (its default), possibly remembered from an
    earlier call with the same path and text (facts of passed-through files).
    ``proof_key``: an object for which the caller guarantees that, while it is the same object,
    ``proven_canonical`` keeps answering True for a (path, text object) it answered True for;
    the passthrough test of a file whose text and committed topic are the objects of the last
    call's is then not asked again. ``mode`` (the transaction's ``MEMORY_TUI_TEST_DERIVE``): ``full``
    asks every file and sorts every time, ``check`` also compares the remembered answer.
    """
    facts: NormalizeFacts = memo if memo is not None else TextFacts()
    seen = usable_seen(assume_committed_normal, committed, mode, proof_key)
    inputs, paths, same_paths, plain = _inputs(staged, seen)
    base = _committed_base(committed, committed_ids, resolve)
    chosen = select(inputs, paths, seen, same_paths, plain, base, assume_committed_normal=assume_committed_normal,
                    proven_canonical=proven_canonical, memo=facts, proof_key=proof_key, committed=committed, mode=mode)
    order, live, passed = chosen.order, chosen.live, chosen.passed
    work: dict[str, list[str]] = {p: split_lines(live[p]) for p in order}
    problems: list[Problem] = []
    labels = _allocate_labels(order, live, passed, facts)  # step 2
    for path in order:  # step 3
        _rebind_orphans(work[path])
    for path in order:  # step 4
        problems.extend(_strip_invented(path, work[path], base.ids))
    block_ids = _allocate_block_ids(order, work, base.ids, problems)  # step 5
    problems.extend(_non_ascii_times(order, work, base.text_of))
    changed_texts, dropped = _render_and_prune(order, work, labels, base, resolve, link_for, refuse_drops, problems)
    # every input path, in tree order: a passed-through file's text as given, a deleted one's None
    if chosen.in_order:
        texts = dict(inputs)
    else:
        assert chosen.order_inputs is not None
        texts = dict(zip(chosen.order_inputs, map(inputs.__getitem__, chosen.order_inputs)))
    texts.update(changed_texts)
    if mode == "check":
        check_order(texts, order, inputs, live, passed)
    return NormalizeResult(
        texts=texts,
        block_ids=block_ids,
        evidence_ids=dict(labels),
        dropped=tuple(dropped),
        problems=tuple(problems),
        inputs=inputs,
        passed=passed,
    )


def _inputs(staged: Mapping[str, str | None], seen: Seen | None,
            ) -> tuple[dict[str, str | None], tuple[str, ...], bool, bool]:
    """``(inputs, paths, same_paths, plain)``: the staged texts by topics-relative path and
    those paths in the order given; whether they are the paths ``seen`` holds, and whether
    none was given with a ``topics/`` prefix."""
    keys = tuple(staged)
    same_paths = seen is not None and keys == seen.paths
    # the paths ``seen`` holds were given without a ``topics/`` prefix
    plain = same_paths or not any(map(str.startswith, keys, repeat("topics/")))
    if plain:
        return dict(staged), keys, same_paths, plain
    inputs: dict[str, str | None] = {}
    for key, value in staged.items():
        inputs[key[len("topics/"):] if key.startswith("topics/") else key] = value
    return inputs, tuple(inputs), same_paths, plain


def _committed_base(committed: TopicTree | Mapping[str, str] | None, committed_ids: Iterable[str],
                    resolve: SourceResolver | None) -> Committed:
    """What is committed, as a tree (parsed from the texts when given as texts)."""
    committed_texts: dict[str, str] = {}
    committed_tree: TopicTree | None
    own_get: Callable[[str], Topic | None]
    if isinstance(committed, TopicTree):
        committed_tree = committed
        own_get = topic_at(committed)

        def committed_text(path: str) -> str | None:
            own = own_get(path)
            return None if own is None else own.text
    elif committed is not None:
        committed_texts = {(k[7:] if k.startswith("topics/") else k): v for k, v in committed.items() if v is not None}
        committed_tree = parse_tree(committed_texts, resolve=resolve, strict=False)
        own_get, committed_text = topic_at(committed_tree), committed_texts.get
    else:
        committed_tree = None
        own_get = committed_text = {}.get
    committed_set: AbstractSet[str]
    if committed_tree is not None and not committed_ids:
        committed_set = committed_tree.id_view  # only looked up: no set of every id is built
    else:
        committed_set = set(committed_ids)
        if committed_tree is not None:
            committed_set |= set(committed_tree.ids)
    return Committed(committed_texts, committed_tree, own_get, committed_text, committed_set)


def _allocate_labels(order: list[str], live: Mapping[str, str], passed: frozenset[str],
                     facts: NormalizeFacts) -> dict[str, str]:
    """Step 2 over the files to normalise. (A passed-through file holds no local label, so
    with none elsewhere there is nothing to allocate.)"""
    if passed and not any(_LOCAL_REF_RE.search(live[p]) for p in order):
        return {}
    if passed:
        known: set[str] = set()
        for p in passed:
            known |= facts.definition_ids(p, live[p])
        return allocate_evidence_ids({p: live[p] for p in order}, existing_ids=known)
    return allocate_evidence_ids(live)


def _allocate_block_ids(order: list[str], work: dict[str, list[str]], committed_set: AbstractSet[str],
                        problems: list[Problem]) -> dict[str, str]:
    """Step 5: a block id at the end of every paragraph that cites evidence and has none, in
    ``work`` (changed in place); returns ``"topics/<path>#<n>" -> id``."""
    # the ids taken: committed ones, every file's line-end ids (a passed-through file's are all
    # committed) and those allocated below
    used: set[str] = set()
    for path in order:
        used |= _ids_at_line_ends(work[path])
    block_ids: dict[str, str] = {}
    for path in order:
        lines = work[path]
        paragraphs, _, _ = iter_blocks("\n".join(lines))
        file_name = posixpath.basename(path)
        n = 0
        for para in paragraphs:
            last = lines[para.end - 1]
            if _LINE_END_ID_RE.search(last):
                continue
            body = " ".join(" ".join(lines[para.start - 1: para.end]).split())
            if "[^" not in body:
                continue
            cites = CITATION_RE.findall(body)
            if cites and all(is_mem_id(c) for c in cites):
                continue
            k = 0
            while (candidate := block_id(file_name, body, k)) in used or candidate in committed_set:
                k += 1
            used.add(candidate)
            lines[para.end - 1] = last.rstrip() + " ^" + candidate
            if classify_lines(lines[para.end - 1])[0].kind != "text":
                # e.g. a last line "#": with the id it becomes a heading and the record is lost.
                problems.append(_problem(
                    path, f"cannot place block id ^{candidate}: the paragraph's last line {last.strip()!r} "
                    "would stop being text; join it to the paragraph or remove it",
                    para.end, 1, kind="malformed_id_placement", memory_id=candidate,
                ))
            block_ids[f"topics/{path}#{n}"] = candidate
            n += 1
    return block_ids


def _non_ascii_times(order: list[str], work: dict[str, list[str]],
                     committed_text: Callable[[str], str | None]) -> list[Problem]:
    """Pitfall 12: OpenProgram accepts any Unicode digits in a time; memory-tui never writes them."""
    problems: list[Problem] = []
    for path in order:
        old_lines = set(split_lines(committed_text(path) or ""))
        for line in classify_lines("\n".join(work[path])):
            if line.kind != "definition" or line.text in old_lines:
                continue
            raw = read_definition(line.text, line.number)
            if raw.raw_when and parse_when(raw.raw_when)[2]:
                problems.append(_problem(
                    path, f"evidence time must use ASCII digits (YYYY[-MM[-DD]]): {raw.raw_when}",
                    line.number, line.text.find(raw.raw_when) + 1, kind="non_ascii_time", footnote=raw.id,
                ))
    return problems


def _render_and_prune(order: list[str], work: dict[str, list[str]], labels: Mapping[str, str], base: Committed,
                      resolve: SourceResolver | None, link_for: LinkFor | None,
                      refuse_drops: bool, problems: list[Problem]) -> tuple[dict[str, str | None], list[Problem]]:
    """Steps 1 + 6 (relocated evidence recovered while every line is rewritten canonically)
    and step 7 (pruning) of each file to normalise: its new text, and what pruning dropped.
    A prose line that the rewrite would turn into something else is added to ``problems``."""
    recovery = _Recovery(base.tree, resolve)
    texts: dict[str, str | None] = {}
    dropped: list[Problem] = []
    for path in order:
        paragraphs, classified, _ = iter_blocks("\n".join(work[path]))
        citing: dict[str, tuple[str, ...]] = {}
        for para in paragraphs:
            ids = paragraph_shape(para.text).ids
            for fid in CITATION_RE.findall(para.text):
                citing[fid] = citing.get(fid, ()) + ids
        out: list[str] = []
        for line in classified:
            if line.kind == "text":
                canonical_line = _canonical_text_line(line.text, labels, base.ids)
                becomes = classify_lines(canonical_line)[0].kind if canonical_line[:1] != line.text[:1] else "text"
                if becomes != "text":
                    # "\t[^e-1]: Time: ..." is prose (indented), but without the gap before its
                    # citation it reads as an evidence definition: the next edit would read it
                    # so, and the block id this edit gives it would be lost.
                    problems.append(_problem(
                        path, "prose line starts with whitespace before a citation, and written without it (the "
                        f"canonical form) it reads as a {_describe({becomes})} instead: "
                        "remove the leading whitespace or the line", line.number, 1, kind="line_changes_class",
                    ))
                out.append(canonical_line)
            elif line.kind == "definition":
                out.append(_render_definition(path, line.text, line.number, labels, citing, resolve, link_for, recovery))
            elif line.kind == "heading":
                # OpenProgram also closes the gap before a citation in a heading: `# Ideas[^e1]`
                # (corpus cases 057, 098).
                # Only inside the title: the gap after the `#` marker is what makes it a heading.
                m = _HEADING_MARK_RE.match(line.text)
                mark, title = (m.group(0), line.text[m.end():]) if m else ("", line.text)
                out.append(_canonical_id_gap(mark + _OP_REF_GAP_RE.sub(r"[^\1]", title), base.ids))
            elif line.kind in ("fence", "fenced", "html"):
                out.append(_canonical_id_gap(_OP_REF_GAP_RE.sub(r"[^\1]", line.text), base.ids))
            else:
                out.append(line.text)
        canonical = "\n".join(out).rstrip() + "\n"
        pruned, notes = prune_topic(path, canonical, committed_text=base.text_of(path), refuse_drops=refuse_drops)
        texts[path] = pruned
        dropped.extend(notes)
    return texts, dropped


def has_local_label(text: str) -> bool:
    """Whether ``text`` still cites a file-local footnote label (``[^e1]``, ``[^new-evidence-…]``)."""
    return _LOCAL_REF_RE.search(text) is not None


__all__ = [
    "LinkFor", "NormalizeResult", "TextFacts", "allocate_evidence_ids", "default_link_for", "definition_ids",
    "definition_seed", "has_local_label", "line_end_ids", "normalize_tree", "prune_topic",
]
