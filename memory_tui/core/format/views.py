"""Derived views (memory spec §8): ``timeline/``, ``recent_events.jsonl``, ``relations.json``
and ``core.md``, rebuilt from parsed topic units, byte for byte as OpenProgram writes them.

Every function here is pure: units (plus the trusted-source set, the runtime creation order,
the recent limit and an injected token counter) in, text out. Nothing touches the disk except
``workspace.check_views``, which only reads.

Unlike OpenProgram, the core render keeps what it dropped (``CoreRender.omitted_ids``,
``pending_skipped_ids``, token counts) as data, and counts special-token text such as
``<|endoftext|>`` as ordinary text instead of failing (pitfall 15).
"""

from __future__ import annotations

import heapq
import json
import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .config import CORE_BUDGET_TOKENS
from .errors import SPECIAL_TOKEN_TEXT, Problem
from .paths import relpath
from .sources import anchor, archive_path, d_anchor, d_archive_path, parse_d_ref, split_source_id
from .tokens import DEFAULT_COUNTER, TokenCounter
from ..cache.registry import keeps

TIMELINE_DIR = "timeline"
RECENT_FILE = "recent_events.jsonl"
RELATIONS_FILE = "relations.json"
CORE_FILE = "core.md"
CORE_MASTER = "topics/core.md"

_TIME_RE = re.compile(r"\d{4}(?:-\d{2}(?:-\d{2})?)?")
_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_LINK_TARGET_RE = re.compile(r"(\]\()([^()\s]+)(\))")
_BLANK_RUN_RE = re.compile(r"\n\s*\n")
_DEFINITION_START_RE = re.compile(r"\[\^[A-Za-z0-9_-]+\]:")
_TRAILING_ID_RE = re.compile(r"\^([A-Za-z0-9-]+)\s*$")

# Source link of a row: (label, href relative to the row's file).
LinkFor = Callable[[str, str], "str | None"]  # (source_id, from_dir) -> href or None


# --------------------------------------------------------------------------------------------
# Path helpers (pure posix strings; never the process cwd)
# --------------------------------------------------------------------------------------------


def _split_fragment(target: str) -> tuple[str, str]:
    path, sep, frag = target.partition("#")
    return path, (sep + frag)


def _is_relative_path_target(target: str) -> bool:
    if not target or target.startswith("#") or target.startswith("/"):
        return False
    return not _SCHEME_RE.match(target)


@keeps
@lru_cache(maxsize=65536)
def rebase_target(target: str, from_dir: str, to_dir: str) -> str:
    """A link target written in ``from_dir`` re-expressed relative to ``to_dir``.

    Absolute paths, fragment-only targets and anything with a scheme (``http:``, ``mailto:``,
    plain ``D18:11`` handles) are returned unchanged.
    """
    if not _is_relative_path_target(target):
        return target
    path, frag = _split_fragment(target)
    if not path:
        return target
    resolved = posixpath.normpath(posixpath.join(from_dir, path)) if from_dir else posixpath.normpath(path)
    return relpath(resolved, to_dir) + frag


def rebase_links(text: str, from_dir: str, to_dir: str) -> str:
    """Rewrite every ``](target)`` in Markdown text from one directory to another."""

    def sub(m: re.Match[str]) -> str:
        return m.group(1) + rebase_target(m.group(2), from_dir, to_dir) + m.group(3)

    return _LINK_TARGET_RE.sub(sub, text)


def source_location(source_id: str) -> str | None:
    """Canonical workspace-relative href of a source id (§3.5, §4.1), v2 form, by the same
    id rules the archive itself uses (ASCII digits only in D refs; no "." or ".." provider)."""
    d_ref = parse_d_ref(source_id)
    if d_ref:
        return f"{d_archive_path(source_id)}#{d_anchor(source_id)}"
    if split_source_id(source_id) is None:
        return None
    return f"{archive_path(source_id)}#{anchor(source_id)}"


def _topic_href(topic_path: str) -> str:
    # A timeline row links its topic by the plain relative path, spaces and non-ASCII letters
    # as they are (OpenProgram's own rebuild writes it so); only the block links rewritten
    # inside topics are percent-encoded (§3.7).
    return f"topics/{topic_path}"


# --------------------------------------------------------------------------------------------
# Unit accessors (duck-typed over memory_tui.core.format.topics.Unit)
# --------------------------------------------------------------------------------------------


def _units(tree_or_units: Any) -> Sequence[Any]:
    units = getattr(tree_or_units, "units", tree_or_units)
    return tuple(units)


def _is_legacy(unit: Any) -> bool:
    return bool(getattr(unit, "legacy", False)) or str(unit.memory_id).startswith("mem_")


def _valid_time(value: Any) -> str | None:
    """A time a timeline file can be named after (§8.1); OpenProgram also lets non-ASCII digits
    through (pitfall 12), which ``\\d`` matches too."""
    if isinstance(value, str) and _TIME_RE.fullmatch(value):
        return value
    return None


def _evidence_time(evidence: Any) -> str | None:
    return _valid_time(getattr(evidence, "when", None))


def _annotation_evidence(unit: Any) -> list[tuple[Any, Any]]:
    """(annotation, evidence) pairs in paragraph order; a citation group may cite several."""
    out = []
    for ann in getattr(unit, "annotations", ()) or ():
        evs = ann.evidence
        if not isinstance(evs, (tuple, list)):
            evs = (evs,)
        out.extend((ann, ev) for ev in evs)
    return out


def _annotation_quote(annotation: Any) -> str:
    return (getattr(annotation, "quote", "") or "").strip()


# --------------------------------------------------------------------------------------------
# §8.1 timeline/
# --------------------------------------------------------------------------------------------


def timeline_path(when: str) -> str:
    """``2026-08-09`` → ``timeline/2026/08/09.md``."""
    return TIMELINE_DIR + "/" + "/".join(when.split("-")) + ".md"


def _link_href(link: Any, topic_dir: str, to_dir: str, link_for: LinkFor | None) -> str:
    target = getattr(link, "target", "") or ""
    source_id = getattr(link, "source_id", None)
    path, _frag = _split_fragment(target)
    if _is_relative_path_target(target) and "#" in target and path:
        return rebase_target(target, topic_dir, to_dir)
    if source_id:
        if link_for is not None:
            href = link_for(source_id, to_dir)
            if href:
                return href
        loc = source_location(source_id)
        if loc:
            path, frag = _split_fragment(loc)
            return relpath(path, to_dir) + frag
    return target


def _links_text(links: Iterable[Any], topic_dir: str, to_dir: str, link_for: LinkFor | None) -> str:
    out = []
    for link in links:
        label = getattr(link, "label", "") or getattr(link, "source_id", "") or ""
        out.append(f"[{label}]({_link_href(link, topic_dir, to_dir, link_for)})")
    return " ".join(out)


@dataclass(frozen=True)
class TimelineRow:
    when: str
    memory_id: str
    topic_path: str
    text: str
    sort_ref: str
    line: str


RowCache = dict  # id(unit) -> (unit, rows); lets a refresh reuse rows of unchanged units


def timeline_rows(tree_or_units: Any, *, link_for: LinkFor | None = None, cache: RowCache | None = None) -> list[TimelineRow]:
    """Every timeline row. ``cache`` (a dict, updated in place) skips units seen before."""
    rows: list[TimelineRow] = []
    for unit in _units(tree_or_units):
        if cache is not None:
            hit = cache.get(id(unit))
            if hit is not None and hit[0] is unit:
                rows.extend(hit[1])
                continue
            rows.extend(_unit_rows(unit, link_for, cache))
            continue
        rows.extend(_unit_rows(unit, link_for, None))
    return rows


def _unit_rows(unit: Any, link_for: LinkFor | None, cache: RowCache | None) -> list[TimelineRow]:
    rows: list[TimelineRow] = []
    topic_dir = posixpath.dirname(f"topics/{unit.topic_path}")
    frag = f"#{unit.memory_id}" if _is_legacy(unit) else f"#^{unit.memory_id}"
    unit_refs = list(getattr(unit, "source_refs", ()) or ())
    dated = False
    for ann, ev in _annotation_evidence(unit):
        when = _evidence_time(ev)
        if when is None:
            continue
        dated = True
        links = tuple(getattr(ev, "links", ()) or ())
        refs = [l.source_id for l in links if getattr(l, "source_id", None)]
        sort_ref = refs[0] if refs else (unit_refs[0] if unit_refs else "")
        rows.append(_row(unit, when, _annotation_quote(ann) or unit.content, topic_dir, frag, links, sort_ref, link_for))
    if not dated:
        when = _valid_time(getattr(unit, "when", None))
        if when is not None:
            links: list[Any] = []
            seen: set[tuple[str, str]] = set()
            for _ann, ev in _annotation_evidence(unit):
                for link in getattr(ev, "links", ()) or ():
                    key = (link.label, link.target)
                    if key not in seen:
                        seen.add(key)
                        links.append(link)
            rows.append(_row(unit, when, unit.content, topic_dir, frag, tuple(links), unit_refs[0] if unit_refs else "", link_for))
    if cache is not None:
        cache[id(unit)] = (unit, tuple(rows))
    return rows


def _row(unit, when, text, topic_dir, frag, links, sort_ref, link_for) -> TimelineRow:
    file_dir = posixpath.dirname(timeline_path(when))
    topic_link = relpath(_topic_href(unit.topic_path), file_dir) + frag
    parts = [text, f"[Topic]({topic_link})"]
    sources = _links_text(links, topic_dir, file_dir, link_for)
    if sources:
        parts.append(sources)
    return TimelineRow(when, unit.memory_id, unit.topic_path, text, sort_ref, " ".join(parts))


def rows_by_time(rows: Iterable[TimelineRow]) -> dict[str, list[TimelineRow]]:
    """Rows grouped by the time (so the timeline file) they belong to, in arrival order."""
    by_when: dict[str, list[TimelineRow]] = {}
    for row in rows:
        by_when.setdefault(row.when, []).append(row)
    return by_when


def timeline_file_text(when: str, rows: Iterable[TimelineRow]) -> str:
    """The text of ``timeline_path(when)`` holding ``rows``."""
    ordered = sorted(rows, key=lambda r: (r.sort_ref, r.memory_id))
    return f"# {when}\n" + "".join(f"\n{r.line}\n" for r in ordered)


def render_timeline(tree_or_units: Any, *, link_for: LinkFor | None = None, cache: RowCache | None = None) -> dict[str, str]:
    """``{"timeline/2026/11.md": text}`` for every time that has at least one row."""
    by_when = rows_by_time(timeline_rows(tree_or_units, link_for=link_for, cache=cache))
    out = {timeline_path(when): timeline_file_text(when, by_when[when]) for when in sorted(by_when)}
    return dict(sorted(out.items()))


# --------------------------------------------------------------------------------------------
# §8.2 recent_events.jsonl
# --------------------------------------------------------------------------------------------


def effective_creation_order(tree_or_units: Any, creation_order: Mapping[str, int] | None) -> dict[str, int]:
    """The runtime creation order grown the way an install grows it: ids not yet known get
    max+1 in occurrence order (an empty order is seeded from occurrence order)."""
    order = dict(creation_order or {})
    nxt = max(order.values(), default=-1) + 1
    for unit in _units(tree_or_units):
        if unit.memory_id not in order:
            order[unit.memory_id] = nxt
            nxt += 1
    return order


def recent_event(unit: Any, created_order: int) -> dict[str, Any]:
    whens: list[str] = []
    # A legacy mem_ unit lists no evidence times in OpenProgram's recent_events.jsonl, only its
    # `when` (corpus cases 284, 412; the spec's "distinct evidence times" is silent on mem_ units).
    legacy = bool(getattr(unit, "legacy", False))
    for _ann, ev in () if legacy else _annotation_evidence(unit):
        w = getattr(ev, "when", None)
        if w is not None and w not in whens:
            whens.append(w)
    refs = list(getattr(unit, "source_refs", ()) or ())
    return {
        "memory_id": unit.memory_id,
        "when": getattr(unit, "when", None),
        "whens": whens,
        "content": unit.content,
        "refs": refs,
        "source_refs": list(refs),
        "topic_path": f"topics/{unit.topic_path}",
        "headings": list(getattr(unit, "headings", ()) or ()),
        "created_order": created_order,
    }


def recent_events(tree_or_units: Any, creation_order: Mapping[str, int] | None, limit: int = 50) -> list[dict[str, Any]]:
    """The ``limit`` units last in (creation order, position), ascending."""
    if limit <= 0:
        return []
    units = _units(tree_or_units)
    order = effective_creation_order(units, creation_order)
    # nlargest, not a full sort: a tree has ~20 000 units and the file keeps 50
    chosen = heapq.nlargest(limit, range(len(units)), key=lambda i: (order[units[i].memory_id], i))
    chosen.reverse()
    return [recent_event(units[i], order[units[i].memory_id]) for i in chosen]


def render_recent(tree_or_units: Any, creation_order: Mapping[str, int] | None, limit: int = 50) -> str:
    events = recent_events(tree_or_units, creation_order, limit)
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)


# --------------------------------------------------------------------------------------------
# §8.3 relations.json
# --------------------------------------------------------------------------------------------


# One encoder, not json.dumps(..., ensure_ascii=False) per call, which builds a new encoder
# each time: relations.json renders two values for each of ~20 000 records.
_dumps = json.JSONEncoder(ensure_ascii=False).encode


def relation_parts(tree_or_units: Any) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """What ``tree_or_units`` contributes to ``relations.json``: per memory id its rendered
    ``"id": [targets]`` outbound entry, and the (target, memory id) backlinks it makes.

    Outbound entries are rendered here, not when joined, so a cached part keeps its text."""
    targets_of: dict[str, set[str]] = {}
    for unit in _units(tree_or_units):  # a raw unit list may repeat an id: its targets merge
        targets_of.setdefault(unit.memory_id, set()).update(getattr(unit, "relation_targets", ()) or ())
    outbound = tuple((mid, f"{_dumps(mid)}: {_dumps(sorted(ts))}") for mid, ts in targets_of.items())
    backlinks = tuple((t, mid) for mid, ts in targets_of.items() for t in sorted(ts))
    return outbound, backlinks


def join_relations(outbound: Iterable[tuple[str, str]], backlinks: Iterable[tuple[str, str]]) -> str:
    """``relations.json`` from :func:`relation_parts` of disjoint sets of memory ids."""
    back: dict[str, set[str]] = {}
    for target, mid in backlinks:
        back.setdefault(target, set()).add(mid)
    back_text = ", ".join(f"{_dumps(k)}: {_dumps(sorted(v))}" for k, v in sorted(back.items()))
    out_text = ", ".join(frag for _mid, frag in sorted(outbound, key=lambda kv: kv[0]))
    return '{"backlinks": {' + back_text + '}, "outbound": {' + out_text + "}}\n"


def render_relations(tree_or_units: Any) -> str:
    return join_relations(*relation_parts(tree_or_units))


# --------------------------------------------------------------------------------------------
# §8.4 core.md
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoreChunk:
    text: str
    block_id: str | None
    tokens: int
    status: str  # "kept" | "omitted" | "pending"


@dataclass(frozen=True)
class CoreRender:
    """The rendered root ``core.md`` plus what OpenProgram keeps only in memory."""

    text: str
    rendered_tokens: int
    kept_ids: tuple[str, ...]
    omitted_ids: tuple[str, ...]  # ids of chunks past the budget (first non-fitting chunk on)
    pending_skipped_ids: tuple[str, ...]  # blocks citing a source that is not trusted
    chunks: tuple[CoreChunk, ...]
    budget: int = CORE_BUDGET_TOKENS
    master_tokens: int = 0  # every non-pending chunk counted, whether it fit or not
    special_tokens: tuple[str, ...] = ()  # special-token strings OpenProgram's counter rejects

    @property
    def clipped(self) -> bool:
        return bool(self.omitted_ids) or any(c.status == "omitted" for c in self.chunks)

    def to_json(self) -> dict[str, Any]:
        return {
            "rendered_tokens": self.rendered_tokens,
            "budget_tokens": self.budget,
            "master_tokens": self.master_tokens,
            "kept_ids": list(self.kept_ids),
            "omitted_ids": list(self.omitted_ids),
            "pending_skipped_ids": list(self.pending_skipped_ids),
            "special_tokens": list(self.special_tokens),
        }


def core_root_text(master_text: str) -> str:
    """The master with relative link targets re-based from ``topics/`` to the root."""
    return rebase_links(master_text, "topics", "")


def split_core_chunks(text: str) -> list[tuple[str, str | None]]:
    """(chunk text, block id) pairs, as OpenProgram splits the master (§8.4)."""
    chunks: list[list[str]] = []
    for part in _BLANK_RUN_RE.split(text):
        part = part.strip("\n")
        if not part:
            continue
        if chunks and _DEFINITION_START_RE.match(part):
            chunks[-1].append(part)
        else:
            chunks.append([part])
    out: list[tuple[str, str | None]] = []
    for pieces in chunks:
        m = _TRAILING_ID_RE.search(pieces[0])
        out.append(("\n\n".join(pieces), m.group(1) if m else None))
    return out


def pending_block_ids(tree_or_units: Any, trusted_ids: Iterable[str] | None) -> frozenset[str]:
    """Blocks citing any source outside the trusted set (§4.7); none when the set is unknown."""
    if trusted_ids is None:
        return frozenset()
    trusted = trusted_ids if isinstance(trusted_ids, (set, frozenset)) else frozenset(trusted_ids)
    return frozenset(
        u.memory_id for u in _units(tree_or_units) if any(ref not in trusted for ref in (getattr(u, "source_refs", ()) or ()))
    )


def render_core(
    master_text: str,
    trusted_ids: Iterable[str] | None = None,
    counter: TokenCounter | None = None,
    budget: int = CORE_BUDGET_TOKENS,
    *,
    units: Any = (),
    pending_ids: Iterable[str] | None = None,
) -> CoreRender:
    """Render root ``core.md`` from the ``topics/core.md`` text.

    ``units`` (a TopicTree or units) + ``trusted_ids`` decide which blocks are pending;
    ``pending_ids`` may be given directly instead.
    """
    counter = counter or DEFAULT_COUNTER
    pending = frozenset(pending_ids) if pending_ids is not None else pending_block_ids(units, trusted_ids)
    text = core_root_text(master_text)
    tokens = 0
    master_tokens = 0
    kept_text: list[str] = []
    kept: list[str] = []
    omitted: list[str] = []
    skipped: list[str] = []
    chunks: list[CoreChunk] = []
    stopped = False
    for chunk, block_id in split_core_chunks(text):
        if block_id is not None and block_id in pending:
            skipped.append(block_id)
            chunks.append(CoreChunk(chunk, block_id, counter.count(chunk), "pending"))
            continue
        n = counter.count(chunk)
        master_tokens += n
        if not stopped and tokens + n <= budget:
            tokens += n
            kept_text.append(chunk)
            if block_id is not None:
                kept.append(block_id)
            chunks.append(CoreChunk(chunk, block_id, n, "kept"))
            continue
        stopped = True
        if block_id is not None:
            omitted.append(block_id)
        chunks.append(CoreChunk(chunk, block_id, n, "omitted"))
    rendered = "\n\n".join(kept_text) + "\n"
    return CoreRender(
        text=rendered,
        rendered_tokens=tokens,
        kept_ids=tuple(kept),
        omitted_ids=tuple(omitted),
        pending_skipped_ids=tuple(skipped),
        chunks=tuple(chunks),
        budget=budget,
        master_tokens=master_tokens,
        special_tokens=tuple(counter.special_tokens_in(master_text)),
    )


def special_token_problems(topics: Iterable[Any], counter: TokenCounter | None = None) -> tuple[Problem, ...]:
    """A warning for every line of ``topics/core.md`` holding special-token text such as
    ``<|endoftext|>``.

    memory-tui counts it as ordinary text (pitfall 15), so nothing here fails on it; the
    owner still has to hear that OpenProgram's own counter raises on it where OpenProgram
    counts: ``topics/core.md`` is counted on every install (the core render, §8.4), so each
    OpenProgram transaction (its writer's, its edits) fails while the text is there. Any
    other topic OpenProgram accepts with that text (pitfall 15) and never counts, so there is
    nothing to warn of; in a turn it blocks OpenProgram's writer, which ``why`` explains
    (``special_token_blocks_writer``).
    """
    counter = counter or DEFAULT_COUNTER
    out: list[Problem] = []
    for topic in topics:
        if f"topics/{topic.path}" != CORE_MASTER:
            continue
        tokens = counter.special_tokens_in(topic.text)
        if not tokens:
            continue
        # numbered as the topic reader numbers lines (str.splitlines, memory spec §3.1)
        for number, line in enumerate(topic.text.splitlines(), start=1):
            found = sorted((line.find(tok), tok) for tok in tokens if tok in line)
            if not found:
                continue
            names = [tok for _col, tok in found]
            why = ("OpenProgram's token counter raises on it when it renders core.md, so every OpenProgram "
                   "memory transaction (its writer's and its edits) fails until it is removed")
            out.append(Problem(
                SPECIAL_TOKEN_TEXT, f"special-token text {', '.join(names)}: {why}", f"topics/{topic.path}", number,
                found[0][0] + 1,
                {"severity": "warning", "tokens": names, "blocks_openprogram": True},
            ))
    return tuple(out)


def promote_legacy_core(root_text: str) -> str:
    """Legacy promotion (§8.4): a hand-written root ``core.md`` re-based into ``topics/core.md``.

    The caller keeps the result only if the whole tree still parses with it.
    """
    return rebase_links(root_text, "", "topics")


@dataclass(frozen=True)
class CoreInjection:
    """What OpenProgram puts into every system prompt from root ``core.md`` (§8.4 last bullet)."""

    enabled: bool  # memory.core.inject
    injected: bool
    text: str  # the trimmed root file when injected, else ""
    tokens: int
    reason: str  # why nothing is injected, or "injected"

    def to_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "injected": self.injected, "tokens": self.tokens, "reason": self.reason, "text": self.text}


def core_injection(root_text: str | None, *, inject: bool = True, counter: TokenCounter | None = None) -> CoreInjection:
    counter = counter or DEFAULT_COUNTER
    if not inject:
        return CoreInjection(False, False, "", 0, "memory.core.inject is false")
    if root_text is None:
        return CoreInjection(True, False, "", 0, "no core.md")
    trimmed = root_text.strip()
    substantive = [ln for ln in trimmed.splitlines() if ln.strip() and not ln.startswith("# ")]
    if not substantive:
        return CoreInjection(True, False, "", 0, "core.md has only top-level headings")
    return CoreInjection(True, True, trimmed, counter.count(trimmed), "injected")


# --------------------------------------------------------------------------------------------
# All views together
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DerivedViews:
    """Every derived file as ``{workspace-relative path: text}``; ``core`` is ``None`` when
    ``topics/core.md`` does not exist (a hand-written root ``core.md`` is then left alone)."""

    timeline: Mapping[str, str]
    recent: str
    relations: str
    core: CoreRender | None
    recent_limit: int = 50

    @property
    def files(self) -> dict[str, str]:
        out = dict(self.timeline)
        out[RECENT_FILE] = self.recent
        out[RELATIONS_FILE] = self.relations
        if self.core is not None:
            out[CORE_FILE] = self.core.text
        return out


def build_views(
    tree_or_units: Any,
    *,
    master_text: str | None = None,
    trusted_ids: Iterable[str] | None = None,
    creation_order: Mapping[str, int] | None = None,
    recent_limit: int = 50,
    counter: TokenCounter | None = None,
    budget: int = CORE_BUDGET_TOKENS,
    link_for: LinkFor | None = None,
    row_cache: RowCache | None = None,
    timeline: Mapping[str, str] | None = None,
    relations: str | None = None,
    recent: str | None = None,
    core_pending: Iterable[str] | None = None,
) -> DerivedViews:
    """Every derived view of the units. ``timeline`` / ``relations`` / ``recent``, when given,
    are those files already derived from the same units (``viewcache`` keeps them from
    per-topic parts); ``core_pending`` the pending ids among the master's blocks."""
    # every view given, the units are not read (a tree builds them on first read)
    given = timeline is not None and recent is not None and relations is not None
    units = () if given and (master_text is None or core_pending is not None) else _units(tree_or_units)
    core = None
    if master_text is not None:
        core = render_core(master_text, trusted_ids, counter, budget, units=units, pending_ids=core_pending)
    return DerivedViews(
        timeline=render_timeline(units, link_for=link_for, cache=row_cache) if timeline is None else timeline,
        recent=render_recent(units, creation_order, recent_limit) if recent is None else recent,
        relations=render_relations(units) if relations is None else relations,
        core=core,
        recent_limit=recent_limit,
    )


# --------------------------------------------------------------------------------------------
# `views --check`
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ViewMismatch:
    path: str
    kind: str  # "differs" | "missing" | "extra"
    line: int | None = None  # first differing line (1-based) when kind == "differs"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.kind}"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "kind": self.kind, "line": self.line}


def _first_diff_line(a: str, b: str) -> int:
    la, lb = a.split("\n"), b.split("\n")
    for i, (x, y) in enumerate(zip(la, lb), start=1):
        if x != y:
            return i
    return min(len(la), len(lb)) + 1


def compare_views(memory_root: Path, views: DerivedViews) -> list[ViewMismatch]:
    """Committed derived files vs ``views``; reads only."""
    out: list[ViewMismatch] = []
    expected = views.files
    on_disk_timeline: set[str] = set()
    tl = memory_root / TIMELINE_DIR
    if tl.is_dir():
        for p in tl.rglob("*"):
            if p.is_file() and not p.is_symlink():
                on_disk_timeline.add(p.relative_to(memory_root).as_posix())
    for rel in sorted(expected):
        path = memory_root / rel
        try:
            actual = path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            out.append(ViewMismatch(rel, "missing"))
            continue
        except OSError:
            out.append(ViewMismatch(rel, "missing"))
            continue
        if actual != expected[rel]:
            out.append(ViewMismatch(rel, "differs", _first_diff_line(actual, expected[rel])))
    for rel in sorted(on_disk_timeline - set(expected)):
        out.append(ViewMismatch(rel, "extra"))
    return out

