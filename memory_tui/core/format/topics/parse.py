"""The general topic parser (memory spec §3): any text in, a ``Topic`` with every problem
found out; never raises for bad text.

Every rule violation becomes a ``Problem`` with code ``INVALID_TOPIC_FORMAT``, OpenProgram's
message text, the workspace-relative path (``topics/<path>``), a 1-based line and column.
Findings that OpenProgram itself accepts but that memory-tui refuses to *write* (pitfall 14 id
placement) are warnings (``details["severity"] == "warning"``) and do not make a strict parse
fail. A well-formed file is read by ``fast`` first; this parser reads the rest.
"""

from __future__ import annotations

from collections.abc import Iterable

from .fast import parse_well_formed
from .grammar import (ANY_FOOTNOTE_REF_RE, CITATION_RE, SOURCE_LINK_RE, Paragraph, ParagraphShape, RawDefinition,
                      _offset_to_line_col, _relation_targets, _strip_topics_prefix, is_mem_id, iter_blocks,
                      paragraph_shape, parse_when, read_definition, resolve_source_target)
from .model import (INVALID_TOPIC_FORMAT, _SEVERITY_WARNING, Annotation, Evidence, SourceLink, SourceResolver, Topic, Unit,
                    _make_annotation, _make_evidence, _make_link, _make_unit_fields, is_error)
from ..errors import MemoryError, Problem


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
        elif entry.separator[-1] not in " \t":
            # OpenProgram's suffix pattern takes any whitespace run, so an id is read the same
            # after "\u00a0 " as after " " (and that is what its normaliser writes); only an
            # unusual character right before the "^" is worth a word.
            names = ", ".join(sorted({f"U+{ord(c):04X}" for c in entry.separator if c not in " \t"}))
            report.warning(
                f"malformed id placement: ^{entry.id} follows unusual whitespace ({names})", line, column,
                kind="malformed_id_placement", memory_id=entry.id,
            )


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
