"""Normalisation of a staged ``topics/`` tree (memory spec §3.8, §3.9) and block links (§3.7).

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
add or remove lines).
"""

from __future__ import annotations

import posixpath
import re
import threading
from itertools import compress, filterfalse, repeat
from operator import and_, attrgetter, is_, is_not, itemgetter, not_
from collections.abc import Callable, Iterable, Mapping, Set as AbstractSet
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import unquote

from .errors import Problem
from .paths import relpath
from .sources import pct
from .topics import (
    BLOCK_LINK_RE,
    CITATION_RE,
    INVALID_TOPIC_FORMAT,
    MARKDOWN_LINK_RE,
    SOURCE_LINK_RE,
    SourceResolver,
    Topic,
    TopicTree,
    Unit,
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
_HEADING_MARK_RE = re.compile(r"#{1,6}\s+")
_D_HANDLE_RE = re.compile(r"D([0-9]+):([0-9]+)\Z")
_LOCAL_REF_RE = re.compile(r"\[\^(?:e[0-9]+|new-evidence-[A-Za-z0-9-]+)\]")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_BLOCK_FRAGMENT_RE = re.compile(r"\^[A-Za-z0-9_-]+\Z")


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
    paragraphs, _, _ = iter_blocks(text)
    for para in paragraphs:
        for index in range(para.start - 1, para.end):
            line = lines[index]
            number = index + 1
            if _LONE_IDS_RE.match(line) and index > para.start - 1:
                # Committed or not: OpenProgram makes the paragraph a new block and keeps the
                # id only as an alias (pitfall 14, corpus cases 048, 409), so it is refused.
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
                    odd = ", ".join(sorted({f"U+{ord(c):04X}" for c in m.group(1) if c not in " \t"}))
                    problems.append(_problem(
                        topic_path, f"malformed id placement: ^{m.group(2)} follows unusual whitespace ({odd})",
                        number, m.start(2), kind="malformed_id_placement", memory_id=m.group(2),
                    ))
                    reported.add(m.group(2))
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


def _text_line_end_ids(text: str) -> frozenset[str]:
    return frozenset(_line_end_ids(split_lines(text)))


def _line_end_ids(lines: Iterable[str]) -> set[str]:
    out = set()
    for line in lines:
        m = _LINE_END_ID_RE.search(line)
        if m:
            out.add(m.group(1))
    return out


# ---------------------------------------------------------------------------------------------
# Step 6: canonical lines
# ---------------------------------------------------------------------------------------------


def _canonical_text_line(line: str, labels: Mapping[str, str]) -> str:
    line = CITATION_RE.sub(lambda m: f"[^{labels.get(m.group(1), m.group(1))}]", line)
    line = _WS_BEFORE_REF_RE.sub("", line)
    m = _SUFFIX_TOKENS_RE.search(line)
    if m and m.start() > 0:
        ids = re.findall(r"\^([A-Za-z0-9-]+)", m.group(0))
        line = line[: m.start()].rstrip() + "".join(f" ^{i}" for i in ids)
    return line


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

# committed topic (by identity) -> (the id set asked about, whether the topic's own block ids hold it)
_OWN_IDS: dict[int, tuple[Topic, frozenset[str], bool]] = {}


def _ids_own(topic: Topic, ids: frozenset[str]) -> bool:
    """``ids`` are all block ids of ``topic`` itself (so of any tree holding it): the
    passthrough test without looking up every file's ids among every id of the workspace."""
    hit = _OWN_IDS.get(id(topic))
    if hit is not None and hit[0] is topic and hit[1] is ids:
        return hit[2]
    value = ids <= frozenset(topic.memory_ids)  # a cached topic answers without building its units
    _OWN_IDS[id(topic)] = (topic, ids, value)
    return value


def normalize_tree(
    staged: Mapping[str, str | None],
    *,
    committed_ids: Iterable[str] = (),
    committed: TopicTree | Mapping[str, str] | None = None,
    resolve: SourceResolver | None = None,
    link_for: LinkFor | None = None,
    assume_committed_normal: bool = False,
    proven_canonical: Callable[[str, str], bool] | None = None,
    memo: Callable[[str, str, Callable[[str], object]], object] | None = None,
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
    ``memo(path, text, fn)``: returns ``fn(text)``, possibly remembered from an earlier call
    with the same path and text (per-file facts of passed-through files).
    ``proof_key``: an object for which the caller guarantees that, while it is the same object,
    ``proven_canonical`` keeps answering True for a (path, text object) it answered True for;
    the passthrough test of a file whose text and committed topic are the objects of the last
    call's is then not asked again. ``mode`` (the transaction's ``MEMORY_TUI_TX``): ``full``
    asks every file and sorts every time, ``check`` also compares the remembered answer.
    """
    if memo is None:
        def memo(_path, text, fn):  # type: ignore[no-redef]
            return fn(text)
    # A one-topic edit hands every topic of the tree: what is asked of every file below is one
    # C-level pass at most, and only the files that changed since the last call (``_SEEN``) are
    # looked at one by one.
    seen = _SEEN
    if seen is not None and not (assume_committed_normal and isinstance(committed, TopicTree) and mode != "full"
                                 and proof_key is not None and seen.key is proof_key):
        seen = None
    keys = tuple(staged)
    same_paths = seen is not None and keys == seen.paths
    # the paths ``seen`` holds were given without a ``topics/`` prefix
    plain = same_paths or not any(map(str.startswith, keys, repeat("topics/")))
    inputs: dict[str, str | None]
    if plain:
        inputs = dict(staged)
        paths = keys
    else:
        inputs = {}
        for key, value in staged.items():
            inputs[key[len("topics/"):] if key.startswith("topics/") else key] = value
        paths = tuple(inputs)
    committed_texts: dict[str, str] = {}
    committed_tree: TopicTree | None
    own_get: Callable[[str], Topic | None]
    if isinstance(committed, TopicTree):
        committed_tree = committed
        own_get = _topic_at(committed)

        def committed_text(path: str) -> str | None:
            own = own_get(path)
            return None if own is None else own.text
    elif committed is not None:
        committed_texts = {(k[7:] if k.startswith("topics/") else k): v for k, v in committed.items() if v is not None}
        committed_tree = parse_tree(committed_texts, resolve=resolve, strict=False)
        own_get, committed_text = _topic_at(committed_tree), committed_texts.get
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

    values = list(inputs.values())
    test: set[str] | None = None  # the paths whose passthrough test is asked; None: every path
    deleted: bool | None = None  # whether an input is None; None: not known yet
    in_order: bool | None = None  # whether ``paths`` is tree order; None: not known yet
    if seen is not None:
        test, at = _to_test(seen, same_paths, paths, values, committed_tree)  # type: ignore[arg-type]
        if at is not None:  # the same paths: only a changed position can hold a new None
            deleted = None if seen.deleted else any(values[i] is None for i in at)
            in_order = seen.in_order
    if deleted is None:
        deleted = None in values
    live = inputs if not deleted else {p: t for p, t in inputs.items() if t is not None}
    order_inputs: list[str] | None = None  # distinct paths: the order of any subset is this one's
    if not in_order or test is None or not assume_committed_normal:
        order_inputs, in_order = _sorted_paths(paths, mode)
    if committed_tree is not None:
        _keep_only(_OWN_IDS, committed_tree.topics)
    passed: frozenset[str] = frozenset()
    unpassed: set[str] = set()  # the input paths not passed through
    if assume_committed_normal:
        retest: set[str] = set()  # those not passed on their own committed topic's ids
        if test is None:
            assert order_inputs is not None
            asked: Iterable[str] = order_inputs
        else:
            asked = sorted(filter(inputs.__contains__, test), key=topic_sort_key)
        for path in asked:
            text = inputs[path]
            by_own = False
            if text is not None and committed_text(path) == text and not memo(path, text, has_local_label):
                own = own_get(path)
                ids = memo(path, text, _text_line_end_ids)
                by_own = own is not None and _ids_own(own, ids)
                if (by_own or ids <= committed_set) and (proven_canonical is None or proven_canonical(path, text)):
                    if not by_own:
                        retest.add(path)  # a function of the whole committed tree: not remembered
                    continue
            unpassed.add(path)
            retest.add(path)
        if same_paths and seen.unpassed == unpassed:  # type: ignore[union-attr]
            passed = seen.passed  # type: ignore[union-attr]
        else:
            passed = frozenset(filterfalse(unpassed.__contains__, inputs))
        if plain and proof_key is not None and isinstance(committed, TopicTree):
            _remember_seen(_Seen(proof_key, paths, values, committed, frozenset(retest), frozenset(unpassed),
                                 passed, bool(in_order), bool(deleted)))
        if mode == "check":
            _check_passthrough(passed, live, committed_texts or _texts_of(committed_tree), committed_tree,
                               committed_set, proven_canonical, memo)
        order = sorted(filter(live.__contains__, unpassed), key=topic_sort_key)
    else:
        assert order_inputs is not None
        order = order_inputs if not deleted else [p for p in order_inputs if p in live]
    work: dict[str, list[str]] = {p: split_lines(live[p]) for p in order}
    problems: list[Problem] = []

    # Step 2. (A passed-through file holds no local label, so with none elsewhere there is
    # nothing to allocate.)
    if passed and not any(_LOCAL_REF_RE.search(live[p]) for p in order):
        labels: dict[str, str] = {}
    elif passed:
        known: set[str] = set()
        for p in passed:
            known |= memo(p, live[p], definition_ids)  # type: ignore[operator]
        labels = allocate_evidence_ids({p: live[p] for p in order}, existing_ids=known)
    else:
        labels = allocate_evidence_ids(live)
    # Step 3.
    for path in order:
        _rebind_orphans(work[path])
    # Step 4.
    for path in order:
        problems.extend(_strip_invented(path, work[path], committed_set))
    # Step 5.
    # the ids taken: committed ones, every file's line-end ids (a passed-through file's are all
    # committed) and those allocated below
    used: set[str] = set()
    for path in order:
        used |= _line_end_ids(work[path])
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
    # Pitfall 12: OpenProgram accepts any Unicode digits in a time; memory-tui never writes them.
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
    # Steps 1 + 6.
    recovery = _Recovery(committed_tree, resolve)
    texts: dict[str, str | None] = {}
    dropped: list[Problem] = []
    for path in order:
        lines = work[path]
        joined = "\n".join(lines)
        paragraphs, classified, _ = iter_blocks(joined)
        citing: dict[str, tuple[str, ...]] = {}
        for para in paragraphs:
            ids = paragraph_shape(para.text).ids
            for fid in CITATION_RE.findall(para.text):
                citing[fid] = citing.get(fid, ()) + ids
        out: list[str] = []
        for line in classified:
            if line.kind == "text":
                out.append(_canonical_text_line(line.text, labels))
            elif line.kind == "definition":
                out.append(_render_definition(path, line.text, line.number, labels, citing, resolve, link_for, recovery))
            elif line.kind == "heading" and "[^" in line.text:
                # OpenProgram also closes the gap before a citation in a heading: `# Ideas[^e1]`
                # (corpus cases 057, 098).
                # Only inside the title: the gap after the `#` marker is what makes it a heading.
                m = _HEADING_MARK_RE.match(line.text)
                mark, title = (m.group(0), line.text[m.end():]) if m else ("", line.text)
                out.append(mark + _WS_BEFORE_REF_RE.sub("", title))
            else:
                out.append(line.text)
        canonical = "\n".join(out).rstrip() + "\n"
        # Step 7.
        pruned, notes = prune_topic(path, canonical, committed_text=committed_text(path),
                                    refuse_drops=refuse_drops)
        texts[path] = pruned
        dropped.extend(notes)
    # every input path, in tree order: a passed-through file's text as given, a deleted one's None
    changed_texts = texts
    if in_order:
        texts = dict(inputs)
    else:
        assert order_inputs is not None
        texts = dict(zip(order_inputs, map(inputs.__getitem__, order_inputs)))
    texts.update(changed_texts)
    if mode == "check":
        _check_order(texts, order, inputs, live, passed)
    used_labels = {label: eid for label, eid in labels.items()}
    return NormalizeResult(
        texts=texts,
        block_ids=block_ids,
        evidence_ids=used_labels,
        dropped=tuple(dropped),
        problems=tuple(problems),
        inputs=inputs,
        passed=passed,
    )


# ---------------------------------------------------------------------------------------------
# §3.7 block links
# ---------------------------------------------------------------------------------------------


def _pct_block_path(path: str) -> str:
    out = []
    for ch in path:
        if ch.isascii() and (ch.isalnum() or ch in "/._-"):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def has_local_label(text: str) -> bool:
    """Whether ``text`` still cites a file-local footnote label (``[^e1]``, ``[^new-evidence-…]``)."""
    return _LOCAL_REF_RE.search(text) is not None


def file_block_ids(text: str) -> tuple[str, ...]:
    """The block / mem_ ids of one topic text, in order (what ``_id_locations`` uses)."""
    out: list[str] = []
    paragraphs, _, _ = iter_blocks(text)
    for para in paragraphs:
        shape = paragraph_shape(para.text)
        if shape.invalid_ids:
            continue
        out.extend(shape.ids or tuple(
            fid for _, _, fids in shape.groups if all(is_mem_id(f) for f in fids) for fid in fids
        ))
    return tuple(out)


def block_id_locations(texts: Mapping[str, str], file_ids: Callable[[str, str], Iterable[str]] | None = None,
                       ) -> dict[str, str]:
    """Where ``rewrite_block_links`` points each id: block id / mem_ id -> the topic path of
    its first occurrence in tree order (live texts only)."""
    return _id_locations(texts, file_ids)


def _id_locations(texts: Mapping[str, str], file_ids: Callable[[str, str], Iterable[str]] | None = None) -> dict[str, str]:
    """Block id / mem_ id -> topic path, first occurrence in tree order (cheap: no evidence).
    ``file_ids(path, text)``: a caller's (cached) ``file_block_ids``."""
    where: dict[str, str] = {}
    for path in sorted(texts, key=topic_sort_key):
        ids = file_ids(path, texts[path]) if file_ids is not None else file_block_ids(texts[path])
        for bid in ids:
            where.setdefault(bid, path)
    return where


def _is_relative_link(path: str) -> bool:
    return not (path.startswith("/") or _SCHEME_RE.match(path))


def rewrite_block_links(
    texts: Mapping[str, str | None], *, file_ids: Callable[[str, str], Iterable[str]] | None = None,
    rewritten: Callable[[str, str, tuple, Callable[[], str]], str] | None = None,
    locations: Mapping[str, str] | None = None,
    memo: Callable[[str, str, Callable[[str], object]], object] | None = None,
    mode: str = "incremental",
) -> dict[str, str | None]:
    """Point every ``[text](path#^id)`` at the current file holding ``id`` (relative to the
    linking topic, percent-encoding all but ``/._-``; same file -> ``<file>.md#^id``).
    Links to unknown ids are left alone (``check_cross_topic_links`` reports them).

    ``rewritten(path, text, locations, compute)``: a caller's memo of one file's result. The
    result is a function of the path, the text and where each id it could link to lives:
    ``locations`` is ``((id, path or None), ...)`` for every ``#^id)`` in the text (a superset
    of the ids of its block links), so equal arguments always mean an equal result.

    ``locations``: ``block_id_locations`` of the live texts, when the caller has it (kept up
    to date from the previous call's); ``memo(path, text, fn)``: a caller's memo of per-text facts.
    With ``locations``, the last such call's answer is kept (``_REWRITTEN``): a file whose text
    is the very object it was and none of whose linked ids moved keeps its rewrite, so only
    the changed files and those linking to a moved id are asked. ``mode`` (the transaction's
    ``MEMORY_TUI_TX``): ``full`` asks every file, ``check`` both, comparing them."""
    if locations is None:
        where = _id_locations({(k[7:] if k.startswith("topics/") else k): v for k, v in texts.items() if v is not None},
                              file_ids)
        return _rewrite_all(texts, where, rewritten, memo)[0]
    if mode == "full":
        return _rewrite_all(texts, locations, rewritten, memo)[0]
    with _REWRITTEN_LOCK:
        last, _REWRITTEN[0] = _REWRITTEN[0], None  # taken: a failure below leaves none
        out = _rewrite_since(last, texts, locations, rewritten, memo) if last is not None else None
        if out is None:
            out, linking = _rewrite_all(texts, locations, rewritten, memo)
            _REWRITTEN[0] = _Rewritten(tuple(texts), list(texts.values()), out, locations, linking)
        else:
            _REWRITTEN[0] = last._replace(keys=tuple(texts), values=list(texts.values()), out=out, where=locations)
    if mode == "check":
        full = _rewrite_all(texts, locations, rewritten, memo)[0]
        if full != out or list(full) != list(out):
            raise RewriteMismatch(f"incremental block-link rewrite differs: "
                                  f"{sorted(k for k in full if full[k] != out.get(k))[:10]}")
    return dict(out)


class RewriteMismatch(AssertionError):
    """``mode="check"``: the kept block-link rewrite differs from asking every file."""


class _Rewritten(NamedTuple):
    """The last ``rewrite_block_links`` call with ``locations``: its texts, its answer, the
    locations it was given and, per id, the keys of the texts that link to it."""

    keys: tuple[str, ...]
    values: list[str | None]
    out: dict[str, str | None]  # never handed out (the caller gets a copy)
    where: Mapping[str, str]
    linking: dict[str, set[str]]  # id -> keys whose ``_linked_ids`` hold it; changed in place


_REWRITTEN_LOCK = threading.Lock()
_REWRITTEN: list[_Rewritten | None] = [None]
# More changed texts or files to ask again than this and every file is asked.
REWRITE_MAX_CHANGED = 64


def _rewrite_one(key: str, value: str | None, where: Mapping[str, str],
                 rewritten: Callable[[str, str, tuple, Callable[[], str]], str] | None,
                 memo: Callable[[str, str, Callable[[str], object]], object] | None,
                 ) -> tuple[str | None, tuple[str, ...] | None]:
    """One text's rewrite and its ``_linked_ids``."""
    if value is None:
        return None, None
    path = key[7:] if key.startswith("topics/") else key
    fast = _LINKED.get(path)
    if fast is not None and fast[0] is value:  # a pure function of the very text
        linked = fast[1]
    else:
        linked = memo(path, value, _linked_ids) if memo is not None else _linked_ids(value)
        _LINKED[path] = (value, linked)
    if linked is None:
        return value, None
    if rewritten is None:
        return _rewrite_file(path, value, where), linked
    found = tuple((bid, where.get(bid)) for bid in linked)
    return rewritten(path, value, found, lambda: _rewrite_file(path, value, where)), linked


def _rewrite_all(texts: Mapping[str, str | None], where: Mapping[str, str],
                 rewritten: Callable[[str, str, tuple, Callable[[], str]], str] | None,
                 memo: Callable[[str, str, Callable[[str], object]], object] | None,
                 ) -> tuple[dict[str, str | None], dict[str, set[str]]]:
    """Every text's rewrite, and per id the keys of the texts linking to it."""
    out: dict[str, str | None] = {}
    linking: dict[str, set[str]] = {}
    for key, value in texts.items():
        out[key], linked = _rewrite_one(key, value, where, rewritten, memo)
        for bid in linked or ():
            linking.setdefault(bid, set()).add(key)
    return out, linking


def _rewrite_since(last: _Rewritten, texts: Mapping[str, str | None], where: Mapping[str, str],
                   rewritten: Callable[[str, str, tuple, Callable[[], str]], str] | None,
                   memo: Callable[[str, str, Callable[[str], object]], object] | None,
                   ) -> dict[str, str | None] | None:
    """``last.out`` with the texts that are other objects and those linking to an id whose
    location moved asked again (``last.linking`` updated in place); None when that cannot
    be told here: other keys, other locations, too many changes."""
    keys = tuple(texts)
    if keys != last.keys:
        return None
    moved = _moved_ids(last.where, where)
    if moved is None:
        return None
    values = list(texts.values())
    at = list(compress(range(len(values)), map(is_not, values, last.values)))
    if len(at) > REWRITE_MAX_CHANGED:
        return None
    again = set(map(keys.__getitem__, at))
    linking = last.linking
    for bid in moved:
        again.update(linking.get(bid, ()))
    if len(again) > REWRITE_MAX_CHANGED:
        return None
    out = dict(last.out)
    for i in at:  # their linked ids as they were, taken out of the index
        key, before = keys[i], last.values[i]
        if before is not None:
            old = _linked_of(key, before)
            for bid in old or ():
                paths = linking.get(bid)
                if paths is not None:
                    paths.discard(key)
                    if not paths:
                        del linking[bid]
    for key in again:
        value = texts[key]
        out[key], linked = _rewrite_one(key, value, where, rewritten, memo)
        for bid in linked or ():
            linking.setdefault(bid, set()).add(key)
    return out


def _linked_of(key: str, text: str) -> tuple[str, ...] | None:
    path = key[7:] if key.startswith("topics/") else key
    fast = _LINKED.get(path)
    return fast[1] if fast is not None and fast[0] is text else _linked_ids(text)


def _moved_ids(old: Mapping[str, str], new: Mapping[str, str]) -> set[str] | None:
    """The ids whose location may differ between two ``block_id_locations`` maps, when both
    are the same plain map with (``txcache.Locations``) a few ids laid over it; else None."""
    if new is old:
        return set()
    old_base, old_delta = _laid_over(old)
    new_base, new_delta = _laid_over(new)
    if old_base is not new_base:
        return None
    return {bid for bid in old_delta.keys() | new_delta.keys() if old.get(bid) != new.get(bid)}


def _laid_over(where: Mapping[str, str]) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """``(base, delta)``: a ``txcache.Locations``'s shared plain map and what is laid over it
    (any other map is its own base)."""
    if type(where) is dict:
        return where, {}
    base, delta = getattr(where, "base", None), getattr(where, "delta", None)
    if isinstance(base, dict) and isinstance(delta, dict):
        return base, delta
    return where, {}


# path -> (the last text object seen there, its ``_linked_ids``): asked of every file per edit
_LINKED: dict[str, tuple[str, tuple[str, ...] | None]] = {}


def _linked_ids(text: str) -> tuple[str, ...] | None:
    """Every id some ``#^id)`` of ``text`` ends in, sorted (the ids of its block links are
    among them); None when it has no ``#^`` at all (it is then its own rewrite)."""
    if "#^" not in text:
        return None
    return tuple(sorted(set(_LINKED_ID_RE.findall(text))))


# Every id a block link can end in: BLOCK_LINK_RE's last group is followed by ")" and preceded
# by "#^", and no "#^id)" can overlap another (ids hold neither "#" nor ")").
_LINKED_ID_RE = re.compile(r"#\^([A-Za-z0-9_-]+)\)")


def _rewrite_file(path: str, value: str, where: Mapping[str, str]) -> str:
    here = posixpath.dirname(path) or "."

    def fix(m: re.Match) -> str:
        label, target_path, bid = m.group(1), m.group(2), m.group(3)
        # An absolute path (``/core.md#^id``) is re-pointed too: OpenProgram rewrites every
        # block link by its id (corpus cases 010, 094, 139), so keeping it would leave a file
        # that OpenProgram's next no-op edit rewrites. Only links with a scheme stay.
        if _SCHEME_RE.match(target_path) or bid not in where:
            return m.group(0)
        dest = where[bid]
        rel = posixpath.basename(dest) if dest == path else posixpath.relpath(dest, here)
        return f"[{label}]({_pct_block_path(rel)}#^{bid})"

    new_lines = []
    for line in classify_lines(value):
        new_lines.append(BLOCK_LINK_RE.sub(fix, line.text) if line.kind == "text" else line.text)
    new = "\n".join(new_lines)
    if value.endswith("\n"):
        new += "\n"
    return new


def check_cross_topic_links(
    tree: TopicTree | Mapping[str, str | None],
    *,
    committed: TopicTree | None = None,
    changed_only: bool = True,
) -> list[Problem]:
    """§3.7 rules with positions: in changed record content (units new or whose body differs
    from ``committed``; all units when ``committed`` is None or ``changed_only`` is False) a
    relative link to a ``.md`` inside ``topics/`` must end ``#^<id>``; and every unit's ``#^id``
    targets must exist in the tree (``dangling block link``)."""
    if not isinstance(tree, TopicTree):
        tree = parse_tree({k: v for k, v in tree.items() if v is not None}, strict=False)
    problems: list[Problem] = []
    ids = tree.ids
    seen_paragraphs: set[tuple[str, int]] = set()
    line_cache: dict[str, list[str]] = {}
    for unit in tree.units:
        key = (unit.topic_path, unit.line)
        if key in seen_paragraphs or "](" not in unit.body:
            continue
        seen_paragraphs.add(key)
        if unit.topic_path not in line_cache:
            topic = tree.topic(unit.topic_path)
            line_cache[unit.topic_path] = split_lines(topic.text) if topic else []
        changed = _unit_changed(unit, committed, changed_only)
        for bid, problem in _unit_link_findings(unit, line_cache[unit.topic_path]):
            if bid is not None:
                if bid not in ids:
                    problems.append(problem)
            elif changed:
                problems.append(problem)
    return problems


def _unit_changed(unit: Unit, committed: TopicTree | None, changed_only: bool) -> bool:
    if committed is None or not changed_only:
        return True
    old = committed.by_id(unit.identity)
    return old is None or old.body != unit.body


def _unit_link_findings(unit: Unit, lines: list[str]) -> list[tuple[str | None, Problem]]:
    """What ``check_cross_topic_links`` may report for one unit, in its order: ``(bid,
    problem)`` for a block link (reported when ``bid`` is not in the tree) and ``(None,
    problem)`` for a topic link without ``#^id`` (reported when the unit's content changed)."""
    out: list[tuple[str | None, Problem]] = []
    for m, line_no, col in _links_with_positions(lines, unit):
        target = m.group(2)
        path_part, hash_, fragment = target.partition("#")
        if fragment.startswith("^"):
            bid = fragment[1:]
            if _BLOCK_FRAGMENT_RE.match(fragment):
                out.append((bid, _problem(unit.topic_path, f"dangling block link: {bid}", line_no, col,
                                          target=target)))
        if not _is_relative_link(path_part):
            continue
        rel = unquote(path_part) if path_part else posixpath.basename(unit.topic_path)
        if not rel.endswith(".md"):
            continue
        norm = posixpath.normpath(posixpath.join(posixpath.dirname(unit.topic_path), rel))
        if norm == ".." or norm.startswith("../"):
            continue
        if not (hash_ and _BLOCK_FRAGMENT_RE.match(fragment)):
            out.append((None, _problem(
                unit.topic_path, f"Topic-to-Topic link must target #^block-id: {unit.topic_path} -> {target}",
                line_no, col, target=target,
            )))
    return out


# topic (by identity) -> its units' link findings; a function of the topic alone
_TOPIC_FINDINGS: dict[int, tuple[Topic, tuple[tuple[Unit, tuple[tuple[str | None, Problem], ...]], ...]]] = {}


def topic_link_findings(topic: Topic) -> tuple[tuple[Unit, tuple[tuple[str | None, Problem], ...]], ...]:
    """Per unit of ``topic`` holding a link, its ``_unit_link_findings`` (paragraphs once),
    remembered while the topic object lives."""
    hit = _TOPIC_FINDINGS.get(id(topic))
    if hit is not None and hit[0] is topic:
        return hit[1]
    seen: set[int] = set()
    lines: list[str] | None = None
    out = []
    for unit in topic.units:
        if unit.line in seen or "](" not in unit.body:
            continue
        seen.add(unit.line)
        if lines is None:
            lines = split_lines(topic.text)
        out.append((unit, tuple(_unit_link_findings(unit, lines))))
    value = tuple(out)
    _TOPIC_FINDINGS[id(topic)] = (topic, value)
    return value


def topic_link_summary(topic: Topic) -> tuple[bool, tuple[str, ...]]:
    """What the link check needs of ``topic`` besides the tree it is in: whether any of its
    units holds a topic link without ``#^id`` (reported when the unit changed), and the
    sorted block ids its block links name (each reported when the tree lacks it). Like
    ``topic_link_findings``, a function of the topic's path and text, so it can be kept by
    them across processes and answer for a topic whose units were never built."""
    bids: set[str] = set()
    bare = False
    for _unit, findings in topic_link_findings(topic):
        for bid, _problem in findings:
            if bid is None:
                bare = True
            else:
                bids.add(bid)
    return bare, tuple(sorted(bids))


class _Seen(NamedTuple):
    """What one ``normalize_tree`` call with a proof key saw and found. Every fact in it stays
    true while the key does: whether a path passes on its own committed topic's ids is a
    function of its text and that topic (its label, its line-end ids, the committed text) and
    of the proof, which holds for a text object while the key does."""

    key: object  # the proof key
    paths: tuple[str, ...]  # the input paths in the order given, none of them ``topics/``-prefixed
    values: list[str | None]  # their texts, aligned
    tree: TopicTree  # the committed tree
    # the paths that did not pass on their own committed topic's ids: not passed (deleted
    # included), or passed on the whole tree's ids -- the only ones asked again while their
    # text and committed topic stay the objects they were
    retest: frozenset[str]
    unpassed: frozenset[str]  # the paths not passed through
    passed: frozenset[str]  # the others (``NormalizeResult.passed``)
    in_order: bool  # ``paths`` is tree order
    deleted: bool  # some value is None


# the last call's ``_Seen``; replaced whole, so a thread reads one consistent snapshot (and any
# snapshot under the same key is as good as the newest, only older)
_SEEN: _Seen | None = None
# the last path order asked for: (the paths in the order given, topic order, whether they are the same)
_ORDER: tuple[tuple[str, ...], tuple[str, ...], bool] = ((), (), True)
# More texts or committed parses moved than this since the last call and the paths are matched by name.
SEEN_MAX_MOVED = 64
_ABSENT = object()


class PassthroughMismatch(AssertionError):
    """``mode="check"``: the remembered passthrough set differs from the file-by-file test."""


def _remember_seen(seen: _Seen) -> None:
    global _SEEN
    _SEEN = seen


def _topic_at(tree: TopicTree) -> Callable[[str], Topic | None]:
    """The committed topic at exactly this path (``TopicTree.topic`` also strips a
    ``topics/`` prefix, which a path of ``topics/topics/…`` keeps)."""
    return tree._topic_index.get


def _texts_of(tree: TopicTree | None) -> dict[str, str]:
    return {} if tree is None else dict(zip(map(_TOPIC_PATH, tree.topics), map(_TOPIC_TEXT, tree.topics)))


def _to_test(seen: _Seen, same_paths: bool, paths: tuple[str, ...], values: list[str | None], tree: TopicTree,
             ) -> tuple[set[str], list[int] | None]:
    """``(paths to test, changed positions)``: every path but those ``seen`` found passing on
    their own committed topic whose text and committed topic are still the very objects it saw
    (the changed positions when ``paths`` are ``seen``'s, else None). Found by C-level passes:
    by position while the paths and the committed topics' paths stand where they stood, else
    by name."""
    if same_paths:
        at = list(compress(range(len(values)), map(is_not, values, seen.values)))
        tops, old = tree.topics, seen.tree.topics
        if len(at) <= SEEN_MAX_MOVED and len(tops) == len(old):
            moved = list(compress(range(len(tops)), map(is_not, tops, old)))
            if len(moved) <= SEEN_MAX_MOVED:
                # a path whose committed topic is another object had one at a position that
                # moved (paths are distinct), or had none and did not pass
                out = set(seen.retest)
                out.update(map(paths.__getitem__, at))
                out.update(map(_TOPIC_PATH, map(old.__getitem__, moved)))
                return out, at
    else:
        at = None
    where = dict(zip(seen.paths, range(len(seen.paths))))
    before = [*seen.values, _ABSENT]
    then = map(before.__getitem__, map(where.get, paths, repeat(len(seen.paths))))
    same = map(and_, map(is_, values, then), map(is_, map(_topic_at(tree), paths), map(_topic_at(seen.tree), paths)))
    kept = map(and_, same, map(not_, map(seen.retest.__contains__, paths)))
    return set(compress(paths, map(not_, kept))), at


def _sorted_paths(keys: tuple[str, ...], mode: str = "incremental") -> tuple[list[str], bool]:
    """``(sorted(keys, key=topic_sort_key), whether that is their order)``, remembered for the
    last tuple of keys (a transaction hands the same keys in the same order every time)."""
    global _ORDER
    last_keys, last_order, last_same = _ORDER
    if last_keys == keys and mode != "full":
        return list(last_order), last_same
    order = tuple(sorted(keys, key=topic_sort_key))
    _ORDER = (keys, order, order == keys)
    return list(order), order == keys


def _check_order(texts: Mapping[str, str | None], order: list[str], inputs: Mapping[str, str | None],
                 live: Mapping[str, str], passed: AbstractSet[str]) -> None:
    """``MEMORY_TUI_TX=check``: the result's paths in tree order and the files normalised those
    not passed through, in tree order."""
    tree_order = sorted(inputs, key=topic_sort_key)
    if list(texts) != tree_order:
        raise PassthroughMismatch("the result's paths are not in tree order")
    if order != [p for p in tree_order if p in live and p not in passed]:
        raise PassthroughMismatch(f"incremental files to normalise differ: {order[:10]}")


def _check_passthrough(passthrough, live, committed_texts, committed_tree, committed_set, proven_canonical, memo) -> None:
    """``MEMORY_TUI_TX=check``: the passthrough set as the test for every file gives it."""
    own_of = {t.path: t for t in committed_tree.topics} if committed_tree is not None else {}
    full: set[str] = set()
    for path, text in live.items():
        if committed_texts.get(path) != text or memo(path, text, has_local_label):
            continue
        ids = memo(path, text, _text_line_end_ids)
        own = own_of.get(path)
        if ((own is not None and _ids_own(own, ids)) or ids <= committed_set) and (
                proven_canonical is None or proven_canonical(path, text)):
            full.add(path)
    if full != passthrough:
        raise PassthroughMismatch(f"incremental passthrough differs: {sorted(full ^ passthrough)[:10]}")


def _keep_only(memo: dict[int, tuple], topics: tuple[Topic, ...]) -> None:
    """Drop what a per-parse memo holds for parses no longer in the tree once it is twice the
    tree's size (an entry keeps its parse alive)."""
    if len(memo) > 2 * len(topics) + 64:
        live = {id(t): t for t in topics}
        for key, value in list(memo.items()):  # one C call: safe while another thread adds
            if live.get(key) is not value[0]:
                memo.pop(key, None)


# The last memoised link check: its tree, and per path the topic object found clear in it (no
# bare topic link, every block id it links to in that tree) with those ids; ``_LINKED_BY`` indexes
# the clear topics by the ids they link to. Only those topics' answers carry over to the next
# tree, and only while none of their ids left it. Updated in place under ``_CLEAR_LOCK``.
_CLEAR_LOCK = threading.Lock()
_CLEAR: dict[str, tuple[Topic, tuple[str, ...]]] = {}
_LINKED_BY: dict[str, set[str]] = {}
_CLEAR_TREE: list[TopicTree | None] = [None]
# the positions in ``_CLEAR_TREE[0]`` of the topics the last call looked at
_LOOKED: list[list[int]] = [[]]
# More replaced topics than this since the last check and every topic is looked at again.
CLEAR_MAX_MOVED = 64


def check_cross_topic_links_incremental(
    tree: TopicTree, *, committed: TopicTree | None = None,
    summary: Callable[[Topic], tuple[bool, tuple[str, ...]] | None] | None = None,
) -> list[Problem]:
    """``check_cross_topic_links(tree, committed=committed)`` from per-topic findings kept
    across calls: a topic's findings are a function of the topic alone, and what the tree adds
    (is the id there, did the unit's content change) is looked up for the few units that hold
    a link. Only for a tree free of duplicate ids (its units are its topics' units in order);
    anything else takes the full check. ``summary(topic)``: ``topic_link_summary(topic)``
    (possibly remembered by path and text) or ``None``; a topic it clears is not looked into.

    With ``summary``, a topic found clear by the last call is not asked again while it is the
    very same parse and no id it links to left the tree since: its answer cannot have changed
    (it has no bare link, so the committed tree does not enter it). So an edit looks at the
    topics it replaced, those linking to an id it removed, and the few that are not clear --
    not at every topic of the tree."""
    if not tree.dupfree:
        return check_cross_topic_links(tree, committed=committed)
    _keep_only(_TOPIC_FINDINGS, tree.topics)
    if summary is None:
        return _link_problems(tree, tree.topics, committed, None)
    with _CLEAR_LOCK:
        return _link_problems(tree, _to_look_at(tree), committed, summary)


def _to_look_at(tree: TopicTree) -> Iterable[Topic]:
    """The topics of ``tree`` (in its order) whose answer ``_CLEAR`` does not give; forgets the
    clear answers that no longer hold. Call with ``_CLEAR_LOCK`` held."""
    topics = tree.topics
    last = _CLEAR_TREE[0]
    _CLEAR_TREE[0] = tree
    looked_last = _LOOKED[0]
    if last is None or not last.dupfree or len(last.topics) != len(topics):
        return _looked_at(topics, range(len(topics)), clear=True)
    moved = list(compress(range(len(topics)), map(is_not, topics, last.topics)))
    if len(moved) > CLEAR_MAX_MOVED:
        return _looked_at(topics, range(len(topics)), clear=True)
    old = last.topics
    forgot = False
    for mid in {mid for i in moved for mid in old[i].memory_ids if not tree.has_id(mid)}:
        for path in _LINKED_BY.pop(mid, ()):
            _forget_clear(path)
            forgot = True
    if forgot:  # where the forgotten paths stand is not at hand: every topic is asked
        return _looked_at(topics, range(len(topics)))
    # A topic the last call did not look at was clear in the last tree and nothing forgot it
    # since (only the topics looked at, and the ids that left, change ``_CLEAR``): while it is
    # the very parse at its position it still is.
    return _looked_at(topics, sorted(set(moved).union(looked_last)))


def _looked_at(topics: tuple[Topic, ...], at: Iterable[int], clear: bool = False) -> list[Topic]:
    """The topics at the positions ``at`` that are not their path's clear parse (all of them,
    after forgetting every clear answer, with ``clear``), noted in ``_LOOKED``."""
    if clear:
        _CLEAR.clear()
        _LINKED_BY.clear()
        _LOOKED[0] = list(at)
        return list(topics)
    at = list(at)
    hits = map(_CLEAR.get, map(_TOPIC_PATH, map(topics.__getitem__, at)), repeat(_NO_CLEAR))
    looked = list(compress(at, map(is_not, map(topics.__getitem__, at), map(_FIRST, hits))))
    _LOOKED[0] = looked
    return list(map(topics.__getitem__, looked))


def _forget_clear(path: str) -> None:
    hit = _CLEAR.pop(path, None)
    if hit is not None:
        for bid in hit[1]:
            paths = _LINKED_BY.get(bid)
            if paths is not None:
                paths.discard(path)
                if not paths:
                    del _LINKED_BY[bid]


def _link_problems(tree: TopicTree, topics: Iterable[Topic], committed: TopicTree | None,
                   summary: Callable[[Topic], tuple[bool, tuple[str, ...]] | None] | None) -> list[Problem]:
    problems: list[Problem] = []
    has_id = tree.has_id
    for topic in topics:
        if summary is not None:
            known = summary(topic)
            if _CLEAR.get(topic.path, _NO_CLEAR)[0] is not topic:
                _forget_clear(topic.path)
            # no bare topic link and every block link's id in the tree: nothing to report,
            # whatever changed, so a cached topic's units need not be built to know it
            if known is not None and not known[0] and all(map(has_id, known[1])):
                _CLEAR[topic.path] = (topic, known[1])
                for bid in known[1]:
                    _LINKED_BY.setdefault(bid, set()).add(topic.path)
                continue
        for unit, findings in topic_link_findings(topic):
            if not findings:
                continue
            changed = _unit_changed(unit, committed, True)
            for bid, problem in findings:
                if bid is not None:
                    if not has_id(bid):
                        problems.append(problem)
                elif changed:
                    problems.append(problem)
    return problems


_NO_CLEAR = (None, ())
_FIRST = itemgetter(0)
_TOPIC_PATH, _TOPIC_TEXT = attrgetter("path"), attrgetter("text")


def _links_with_positions(lines: list[str], unit: Unit):
    for index in range(unit.line - 1, min(unit.end_line, len(lines))):
        for m in MARKDOWN_LINK_RE.finditer(lines[index]):
            yield m, index + 1, m.start() + 1


__all__ = [
    "LinkFor", "NormalizeResult", "allocate_evidence_ids", "definition_ids", "check_cross_topic_links",
    "block_id_locations", "check_cross_topic_links_incremental", "default_link_for", "topic_link_findings", "topic_link_summary",
    "definition_seed", "file_block_ids", "has_local_label", "normalize_tree", "prune_topic", "rewrite_block_links",
]
