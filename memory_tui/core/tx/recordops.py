"""Owner record changes — move, update text, delete — as ``memory_changes`` ops (spec §6.1).

The CLI verbs ``record move|update|delete`` and the app's record actions both call these
functions, so the two give the same bytes. Each builds exactly one op from the committed
record, and runs it as one ``api.update`` with compare-and-set on the revision:
the revision the caller saw (``base_revision``), or the one this call read the record at.
A change made in between (by OpenProgram or another memory-tui) is refused as
``CONCURRENT_UPDATE`` instead of being applied to a record that is not what was shown.

* move: the whole paragraph moves (every alias id of a merged block, in order — the change
  form refuses a move that leaves a surviving alias behind); the heading chain defaults to
  the anchor's (``before``/``after``) or to the record's own.
* update: the new text keeps the record's sources (with their labels) and its time.
* delete: refused by the transaction when another record links to it (``#^id``); the
  result then lists those records, so the owner knows what to unlink first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..format.errors import MemoryError
from ..format.topics import TopicTree, Unit

POSITIONS = ("start", "end", "before", "after")


@dataclass(frozen=True)
class LinkRef:
    """A record that links to another with ``[…](…#^id)``."""

    memory_id: str
    path: str  # workspace-relative topic path
    line: int
    content: str

    def to_json(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "path": self.path, "line": self.line, "content": self.content}


@dataclass(frozen=True)
class RecordLocation:
    memory_id: str
    path: str
    line: int
    headings: tuple[str, ...]
    block_ids: tuple[str, ...] = ()  # every id of the paragraph, identity last
    evidence_ids: tuple[str, ...] = ()  # its evidence definitions, in citation order

    def to_json(self) -> dict[str, Any]:
        return {"memory_id": self.memory_id, "path": self.path, "line": self.line, "headings": list(self.headings),
                "block_ids": list(self.block_ids), "evidence_ids": list(self.evidence_ids)}


@dataclass(frozen=True)
class RecordOpResult:
    action: str  # move | update | delete
    memory_id: str
    op: dict[str, Any]  # the memory_changes op that was sent ({} when refused before sending)
    result: Any  # result.TxResult
    linked_by: tuple[LinkRef, ...] = ()  # delete: the records linking to it
    location: RecordLocation | None = None  # move/update: where the record is now
    evidence_before: tuple[str, ...] = ()  # update: the evidence ids the record had before

    @property
    def ok(self) -> bool:
        return bool(self.result.ok)

    def to_json(self) -> dict[str, Any]:
        out = dict(self.result.to_json())
        out["action"] = self.action
        out["memory_id"] = self.memory_id
        out["op"] = self.op
        if self.linked_by:
            out["linked_by"] = [link.to_json() for link in self.linked_by]
        if self.location is not None:
            out["location"] = self.location.to_json()
        return out


def committed_tree(state: Any) -> tuple[TopicTree, str]:
    """The committed topics and the revision they were read at."""
    from ..format.topics import parse_tree
    from ..store.workspace import workspace_revision
    from .stage import memory_root, source_index

    root = memory_root(state)
    rev = workspace_revision(root)
    tree = parse_tree(root / "topics", resolve=source_index(root).resolve_target)
    return tree, rev


def linkers(tree: TopicTree, memory_id: str) -> tuple[LinkRef, ...]:
    """Records (other than the record itself) whose text links to ``memory_id``."""
    out: list[LinkRef] = []
    seen: set[tuple[str, int]] = set()
    for unit in tree.units:
        if memory_id in unit.relation_targets and memory_id not in unit.aliases:
            key = (unit.path, unit.line)
            if key not in seen:
                seen.add(key)
                out.append(LinkRef(unit.identity, unit.path, unit.line, unit.content))
    return tuple(out)


def _find(tree: TopicTree, memory_id: str) -> Unit:
    unit = tree.by_id(memory_id)
    if unit is None:
        # a linked topic entry is never read: the record may be behind it, and a change there
        # would have to write through the link -- that is the refusal to report, naming it
        for problem in tree.problems:
            if problem.code == "PATH_OUTSIDE_WORKSPACE" or problem.details.get("kind") == "symlink":
                raise MemoryError.from_problem(problem, code="PATH_OUTSIDE_WORKSPACE")
        raise MemoryError("MEMORY_NOT_FOUND", f"memory_id does not exist: {memory_id}", details={"memory_id": memory_id})
    return unit


def _topic_path(topic: str) -> str:
    rel = topic  # a backslash is no separator: the path rule refuses it, never rewrites it
    if not rel.startswith(("topics/", "topics\\")):  # the latter is refused as given, not nested
        rel = "topics/" + rel
    if not rel.endswith(".md") and "." not in rel.rsplit("/", 1)[-1]:
        rel += ".md"
    return rel


def sources_of(unit: Unit) -> list[dict[str, str]]:
    """The record's cited sources as ``{source, label}`` (labels as written), first use first."""
    out: dict[str, str] = {}
    for ann in unit.annotations:
        for ev in ann.evidence:
            for link in ev.links:
                if link.source_id and link.source_id not in out:
                    out[link.source_id] = link.label or link.source_id
    for ref in unit.source_refs:  # refs whose link carried no label (D refs, plain handles)
        out.setdefault(ref, ref)
    return [{"source": ref, "label": label} for ref, label in out.items()]


def _locate(state: Any, memory_id: str) -> RecordLocation | None:
    tree, _ = committed_tree(state)
    unit = tree.by_id(memory_id)
    if unit is None:
        return None
    return RecordLocation(memory_id, unit.path, unit.line, unit.headings, tuple(unit.aliases), unit.evidence_ids)


def _run(state: Any, action: str, memory_id: str, op: dict[str, Any], base: str, **tx_kw: Any) -> RecordOpResult:
    from . import api

    result = api.update(state, base, memory_changes=[op], **tx_kw)
    location = _locate(state, memory_id) if result.ok and action != "delete" and not result.validate_only else None
    return RecordOpResult(action, memory_id, op, result, location=location)


def _refused(action: str, memory_id: str, exc: MemoryError) -> RecordOpResult:
    from .result import TxResult

    return RecordOpResult(action, memory_id, {}, TxResult.failure(exc))


def move_record(
    state: Any,
    memory_id: str,
    *,
    topic: str,
    headings: list[str] | tuple[str, ...] | None = None,
    position: str = "end",
    anchor: str | None = None,
    base_revision: str | None = None,
    **tx_kw: Any,
) -> RecordOpResult:
    """Move the record's paragraph to ``topic`` under ``headings`` at ``position``."""
    try:
        if position not in POSITIONS:
            raise MemoryError("INVALID_ARGUMENT", f"position must be one of {', '.join(POSITIONS)}")
        if (position in ("before", "after")) != (anchor is not None):
            raise MemoryError("INVALID_ARGUMENT", "before/after need an anchor record id; start/end take none")
        tree, rev = committed_tree(state)
        unit = _find(tree, memory_id)
        dest_path = _topic_path(topic)
        if headings is None:
            if anchor is not None:
                headings = _find(tree, anchor).headings
            else:
                headings = unit.headings
        destination: dict[str, Any] = {"topic_path": dest_path, "headings": list(headings), "position": position}
        if anchor is not None:
            destination["anchor_memory_id"] = anchor
        ids = list(unit.aliases) if unit.aliases and not unit.legacy else [memory_id]
        op = {"op": "move_records", "memory_ids": ids, "destination": destination}
    except MemoryError as exc:
        return _refused("move", memory_id, exc)
    return _run(state, "move", memory_id, op, base_revision or rev, **tx_kw)


def update_record_text(state: Any, memory_id: str, text: str, *, base_revision: str | None = None, **tx_kw: Any) -> RecordOpResult:
    """Replace the record's text, keeping its sources (and their labels) and its time."""
    try:
        tree, rev = committed_tree(state)
        unit = _find(tree, memory_id)
        sources = sources_of(unit)
        if not sources:
            raise MemoryError("MISSING_SOURCE", f"record {memory_id} cites no source to keep", path=unit.path, line=unit.line)
        op = {"op": "update_record", "memory_id": memory_id, "content": text.strip(), "time": unit.when, "sources": sources}
    except MemoryError as exc:
        return _refused("update", memory_id, exc)
    out = _run(state, "update", memory_id, op, base_revision or rev, **tx_kw)
    return replace(out, evidence_before=tuple(unit.evidence_ids))


def delete_record(state: Any, memory_id: str, *, base_revision: str | None = None, **tx_kw: Any) -> RecordOpResult:
    """Delete the record; when the transaction refuses because records link to it, say which."""
    try:
        tree, rev = committed_tree(state)
        _find(tree, memory_id)
    except MemoryError as exc:
        return _refused("delete", memory_id, exc)
    links = linkers(tree, memory_id)
    out = _run(state, "delete", memory_id, {"op": "delete_record", "memory_id": memory_id}, base_revision or rev, **tx_kw)
    if out.ok or not links:
        return out
    listing = "; ".join(f"{link.memory_id} ({link.path}:{link.line})" for link in links)
    result = replace(out.result, message=f"{out.result.message} — linked from: {listing}")
    return replace(out, result=result, linked_by=links)


@dataclass(frozen=True)
class SectionChoice:
    """One heading chain of a topic, with its records in file order (for a move picker)."""

    headings: tuple[str, ...]  # () = the preamble before the first heading
    records: tuple[tuple[str, str], ...]  # (memory_id, content)


@dataclass(frozen=True)
class TopicChoice:
    path: str  # workspace-relative, "topics/…md"
    sections: tuple[SectionChoice, ...]


def destinations(tree: TopicTree) -> tuple[TopicChoice, ...]:
    """Every topic with its heading chains (headings without records too) and their records."""
    out: list[TopicChoice] = []
    for topic in tree.topics:
        chains: dict[tuple[str, ...], list[tuple[str, str]]] = {}
        stack: list[str] = []
        for h in topic.headings:
            stack = stack[: max(0, h.level - 1)]
            stack.append(h.title)
            chains.setdefault(tuple(stack), [])
        for unit in topic.units:
            if unit.memory_id == unit.identity:  # one entry per paragraph
                chains.setdefault(tuple(unit.headings), []).append((unit.memory_id, unit.content))
        out.append(TopicChoice(topic.workspace_path, tuple(SectionChoice(k, tuple(v)) for k, v in chains.items())))
    return tuple(out)


CORE_MASTER = "topics/core.md"
CORE_DELETE_REASON = ("topics/core.md cannot be deleted: it is the core master, and deleting it would rebuild core.md "
                      "from a clipped copy and lose every record beyond the budget (remove core records one by one instead)")


@dataclass(frozen=True)
class TopicDeleteCheck:
    path: str
    allowed: bool
    reason: str  # why not, when not allowed
    records: int  # records that would go
    dangling: tuple[LinkRef, ...]  # records in other topics that link into this one


def topic_delete_check(tree: TopicTree, path: str) -> TopicDeleteCheck:
    """What deleting the topic ``path`` would do: refused for core, and the links it leaves dangling."""
    rel = _topic_path(path)
    topic = tree.topic(rel)
    if rel == CORE_MASTER:
        return TopicDeleteCheck(rel, False, CORE_DELETE_REASON, len(topic.units) if topic else 0, ())
    if topic is None:
        return TopicDeleteCheck(rel, False, f"topic does not exist: {rel}", 0, ())
    ids = set(topic.block_ids)
    dangling: list[LinkRef] = []
    for unit in tree.units:
        if unit.path != rel and ids & set(unit.relation_targets):
            dangling.append(LinkRef(unit.identity, unit.path, unit.line, unit.content))
    return TopicDeleteCheck(rel, True, "", sum(1 for u in topic.units if u.memory_id == u.identity), tuple(dangling))


__all__ = ["CORE_DELETE_REASON", "SectionChoice", "TopicChoice", "TopicDeleteCheck", "destinations", "topic_delete_check","POSITIONS", "LinkRef", "RecordLocation", "RecordOpResult", "committed_tree", "delete_record",
           "linkers", "move_record", "sources_of", "update_record_text"]
