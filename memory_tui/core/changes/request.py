"""OpenProgram's three change forms as pure functions over staged topic texts (memory spec §6).

* ``validate_request`` checks a ``memory_update`` / ``POST /api/memory/changes`` payload
  (spec §5.3 steps 1-2 and §6) and returns a frozen ``Request``.
* ``replace_new_source_labels`` swaps ``new-source-…`` labels for archived source ids (§5.3 step 5).
* ``apply_memory_changes`` (record ops, §6.1), ``apply_file_changes`` (whole files, §6.2) and
  ``apply_patch`` (legacy unified diff, §6.3) turn a ``{topic path: text}`` map into a new map.
* ``check_append_only`` is §5.3 step 7.

Texts are keyed by the path relative to ``topics/`` (``people/dave.md``); a missing key is a
missing file. Output texts are *pre-normalisation*: new evidence carries local labels
(``new-evidence-record-<i>``), new paragraphs carry no block id; the transaction normalises
(§3.8), validates and installs. Nothing here touches the disk.

Every rejection is a ``MemoryError`` with the spec's code and a ``details`` dict naming what
to point at: ``op_index`` / ``change_index`` (0-based positions in the request list) and
``field``, or ``line`` / ``expected`` / ``found`` for a patch conflict.
"""

from __future__ import annotations

import datetime as _dt
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from ..format.errors import MemoryError
from ..format.paths import check_writable, relpath
from ..format.topics import (
    DEFINITION_RE,
    Paragraph,
    ParagraphShape,
    is_mem_id,
    iter_blocks,
    paragraph_shape,
    split_lines,
)
from ..format.views import rebase_target

MAX_CHANGES = 64
MAX_PATCH_BYTES = 512_000
MAX_SOURCES = 64
MAX_SOURCE_CONTENT_BYTES = 256_000
MAX_HEADINGS = 6
MAX_COMMIT_MESSAGE = 500
DEFAULT_COMMIT_MESSAGE = "Update memory"
CORE_TOPIC = "core.md"  # topics/core.md, relative to topics/

GIT_COMMIT_MODES = ("auto", "on", "off")
POSITIONS = ("start", "end", "before", "after")
SOURCE_ROLES = ("user", "assistant", "system", "tool")
NEW_SOURCE_LABEL_RE = re.compile(r"new-source-[a-z0-9-]+")
_NEW_SOURCE_LABEL_FULL = re.compile(r"new-source-[a-z0-9-]+\Z")
NEW_EVIDENCE_PREFIX = "new-evidence-record-"

_TIME_RE = re.compile(r"([0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2}))?)?\Z")
_TRAILING_ID_RE = re.compile(r"(?:^|\s)\^[A-Za-z0-9-]+\s*\Z")
_FENCE_OR_HTML_RE = re.compile(r"^\s*(?:```|<!--|<a\s)")
_LINK_RE = re.compile(r"\[([^\]\n]*)\]\(([^)\n]*)\)")
_BLOCK_LINK_RE = re.compile(r"(\[[^\]\n]*\]\()([^)#\s]*)(#\^[A-Za-z0-9_-]+\))")
_HUNK_RE = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

TOP_LEVEL_KEYS = frozenset(
    {"base_revision", "patch", "changes", "memory_changes", "sources", "commit_message", "git_commit", "append_only"}
)

_REF_KEYS = ("source_refs", "sources")
OP_KEYS: dict[str, frozenset[str]] = {
    "create_record": frozenset({"op", "content", "time", "source_refs", "sources", "destination"}),
    "update_record": frozenset({"op", "memory_id", "content", "time", "source_refs", "sources"}),
    "delete_record": frozenset({"op", "memory_id"}),
    "move_records": frozenset({"op", "memory_ids", "destination"}),
    # legacy aliases
    "create": frozenset({"op", "content", "time", "source_refs", "sources", "topic_path", "headings"}),
    "update": frozenset({"op", "memory_id", "content", "time", "source_refs", "sources"}),
    "delete": frozenset({"op", "memory_id"}),
}
_CANONICAL_OP = {"create": "create_record", "update": "update_record", "delete": "delete_record"}
_DESTINATION_KEYS = frozenset({"topic_path", "headings", "position", "anchor_memory_id"})
CONTENT_RULE = "content must be one final paragraph without Runtime IDs"

# link_for(source_id, from_dir) -> canonical relative link target; from_dir is the topic
# file's workspace-relative directory ("topics/people"). ``SourceIndex.link_for`` fits.
LinkFor = Callable[[str, str], "str | None"]


# ---------------------------------------------------------------------------------------------
# Request model
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceRef:
    """One cited source of a record op: ``source`` id and an optional display label."""

    source: str
    label: str | None = None  # None for ``source_refs`` (the ref itself is the label)

    @property
    def display(self) -> str:
        return self.label if self.label is not None else self.source


@dataclass(frozen=True)
class Destination:
    topic_path: str  # relative to topics/ ("people/dave.md")
    headings: tuple[str, ...]
    position: str  # start | end | before | after
    anchor_memory_id: str | None = None

    @property
    def workspace_path(self) -> str:
        return "topics/" + self.topic_path


@dataclass(frozen=True)
class RecordOp:
    index: int  # 0-based position in memory_changes
    op: str  # create_record | update_record | delete_record | move_records
    content: str | None = None
    time: str | None = None  # "undated" or ASCII YYYY[-MM[-DD]]; set for create/update
    refs: tuple[SourceRef, ...] = ()
    memory_id: str | None = None
    memory_ids: tuple[str, ...] = ()
    destination: Destination | None = None
    legacy_name: str | None = None  # "create" / "update" / "delete" when the alias was used

    @property
    def target_ids(self) -> tuple[str, ...]:
        return self.memory_ids if self.op == "move_records" else ((self.memory_id,) if self.memory_id else ())


@dataclass(frozen=True)
class FileChange:
    index: int
    path: str  # relative to topics/
    action: str  # write | delete
    content: str | None = None

    @property
    def workspace_path(self) -> str:
        return "topics/" + self.path


@dataclass(frozen=True)
class NewSource:
    label: str
    role: str
    content: str
    observed_at: str | None = None  # ISO 8601, re-serialised


@dataclass(frozen=True)
class Request:
    base_revision: str
    form: str  # "memory_changes" | "changes" | "patch"
    memory_changes: tuple[RecordOp, ...] = ()
    changes: tuple[FileChange, ...] = ()
    patch: str | None = None
    sources: tuple[NewSource, ...] = ()
    commit_message: str = DEFAULT_COMMIT_MESSAGE
    git_commit: str = "auto"
    append_only: bool = False


@dataclass(frozen=True)
class ChangeOutcome:
    texts: dict[str, str]  # every topic text after the change (missing key = file deleted)
    changed_paths: tuple[str, ...]  # topic-relative paths created, modified or deleted (sorted)
    allowed_refs: frozenset[str]  # new refs this form allows (record form: every ref declared in ops)
    removable_ids: frozenset[str] | None  # ids the install may drop; None = any (patch / changes)
    new_evidence_labels: dict[int, str] = field(default_factory=dict)  # op index -> local label

    @property
    def changed_files(self) -> tuple[str, ...]:
        """Workspace-relative paths (``topics/…``) as a result's ``changed_files`` lists them."""
        return tuple("topics/" + p for p in self.changed_paths)


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def _bad(message: str, code: str = "INVALID_ARGUMENT", path: str | None = None, **details: Any) -> MemoryError:
    return MemoryError(code, message, path=path, details={k: v for k, v in details.items() if v is not None})


def _op_where(index: int | None, field_name: str | None = None) -> str:
    where = f"memory_changes[{index}]" if index is not None else "memory_changes"
    return f"{where}.{field_name}" if field_name else where


def _is_blank_str(value: Any) -> bool:
    return not isinstance(value, str) or not value.strip()


def _string_bytes(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    if isinstance(value, Mapping):
        return sum(_string_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_string_bytes(v) for v in value)
    return 0


def _topic_rel(workspace_path: str, **details: Any) -> str:
    """Apply the one writable-path rule (pitfall 11) and return the path relative to topics/."""
    try:
        norm = check_writable(workspace_path)
    except MemoryError as exc:
        raise MemoryError(exc.code, exc.message, path=exc.path, details={**exc.details, **details}) from None
    return norm[len("topics/"):]


def is_valid_time(value: str) -> bool:
    """A time memory-tui writes: ``undated`` or an ASCII, real calendar ``YYYY[-MM[-DD]]``."""
    if value == "undated":
        return True
    m = _TIME_RE.match(value)
    if not m:
        return False
    year = int(m.group(1))
    month = int(m.group(2)) if m.group(2) else 1
    day = int(m.group(3)) if m.group(3) else 1
    try:
        _dt.date(year, month, day)
    except ValueError:
        return False
    return True


def check_record_content(content: Any, index: int | None = None) -> str:
    """§6.1 content rule; returns the trimmed content."""
    where = _op_where(index, "content")
    if _is_blank_str(content):
        raise _bad(f"{where} must be a non-blank string", op_index=index, field="content")
    text = content.strip()
    lines = text.split("\n")
    bad = (
        any(not line.strip() for line in lines)  # blank line -> two paragraphs
        or any(line.lstrip().startswith("#") for line in lines)  # heading-like line
        or "[^" in text  # citations / definitions are the runtime's
        or bool(_TRAILING_ID_RE.search(text))  # trailing ^id
        or any(_FENCE_OR_HTML_RE.match(line) for line in lines)  # would not stay one paragraph
        or "\r" in text
    )
    if bad:
        raise _bad(f"{_op_where(index)}: {CONTENT_RULE}", op_index=index, field="content")
    return text


def normalise_commit_message(message: Any) -> str:
    if message is None:
        return DEFAULT_COMMIT_MESSAGE
    text = message.replace("\n", " ")
    text = "".join(ch for ch in text if ch.isprintable()).strip()[:MAX_COMMIT_MESSAGE].strip()
    return text or DEFAULT_COMMIT_MESSAGE


# ---------------------------------------------------------------------------------------------
# validate_request
# ---------------------------------------------------------------------------------------------


def validate_request(payload: Mapping[str, Any]) -> Request:
    """Every argument check of §5.3 steps 1-2 and §6 that needs no workspace."""
    if not isinstance(payload, Mapping):
        raise _bad("request must be a JSON object")
    unknown = sorted(set(payload) - TOP_LEVEL_KEYS)
    if unknown:
        raise _bad(f"unknown request field: {unknown[0]}", field=unknown[0])
    git_commit = payload.get("git_commit", "auto")
    if git_commit is None:
        git_commit = "auto"
    if git_commit not in GIT_COMMIT_MODES:
        raise _bad("git_commit must be auto, on or off", field="git_commit")
    base_revision = payload.get("base_revision")
    if _is_blank_str(base_revision):
        raise _bad("base_revision is required", field="base_revision")
    commit_message = payload.get("commit_message")
    if commit_message is not None and not isinstance(commit_message, str):
        raise _bad("commit_message must be a string", field="commit_message")
    append_only = payload.get("append_only", False)
    if append_only is None:
        append_only = False
    if not isinstance(append_only, bool):
        raise _bad("append_only must be a boolean", field="append_only")
    forms = [name for name in ("patch", "changes", "memory_changes") if payload.get(name) is not None]
    if len(forms) != 1:
        raise _bad("exactly one of patch, changes or memory_changes is required")
    form = forms[0]
    patch = None
    changes: tuple[FileChange, ...] = ()
    ops: tuple[RecordOp, ...] = ()
    if form == "patch":
        patch = payload["patch"]
        if not isinstance(patch, str) or not patch.strip():
            raise _bad("patch must be a non-empty string", field="patch")
        if len(patch.encode("utf-8")) > MAX_PATCH_BYTES:
            raise _bad(f"patch exceeds {MAX_PATCH_BYTES} bytes", field="patch")
    elif form == "changes":
        changes = validate_file_changes(payload["changes"])
    else:
        ops = validate_memory_changes(payload["memory_changes"])
    sources = validate_sources(payload.get("sources"))
    return Request(
        base_revision=base_revision.strip(),
        form=form,
        memory_changes=ops,
        changes=changes,
        patch=patch,
        sources=sources,
        commit_message=normalise_commit_message(commit_message),
        git_commit=git_commit,
        append_only=append_only,
    )


def validate_sources(raw: Any) -> tuple[NewSource, ...]:
    """§5.3 step 2 (shape only; provenance is the transaction's)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _bad("sources must be a list", field="sources")
    if len(raw) > MAX_SOURCES:
        raise _bad(f"sources allows at most {MAX_SOURCES} items", field="sources")
    out: list[NewSource] = []
    seen: set[str] = set()
    total = 0
    for i, item in enumerate(raw):
        where = f"sources[{i}]"
        if not isinstance(item, Mapping):
            raise _bad(f"{where} must be an object", source_index=i)
        extra = sorted(set(item) - {"label", "role", "content", "observed_at"})
        if extra:
            raise _bad(f"{where} has unknown field: {extra[0]}", source_index=i, field=extra[0])
        label = item.get("label")
        if not isinstance(label, str) or not _NEW_SOURCE_LABEL_FULL.match(label):
            raise _bad(f"{where}.label must match new-source-[a-z0-9-]+", source_index=i, field="label")
        if label in seen:
            raise _bad(f"duplicate source label: {label}", source_index=i, field="label")
        seen.add(label)
        role = item.get("role")
        if role not in SOURCE_ROLES:
            raise _bad(f"{where}.role must be user, assistant, system or tool", source_index=i, field="role")
        content = item.get("content")
        if _is_blank_str(content):
            raise _bad(f"{where}.content must be a non-blank string", source_index=i, field="content")
        total += len(content.encode("utf-8"))
        if total > MAX_SOURCE_CONTENT_BYTES:
            raise _bad(f"sources content exceeds {MAX_SOURCE_CONTENT_BYTES} bytes", source_index=i, field="content")
        observed = item.get("observed_at")
        if observed is not None:
            if not isinstance(observed, str) or not observed.strip():
                raise _bad(f"{where}.observed_at must be an ISO 8601 string", source_index=i, field="observed_at")
            try:
                observed = _dt.datetime.fromisoformat(observed.strip()).isoformat()
            except ValueError:
                raise _bad(f"{where}.observed_at must be ISO 8601", source_index=i, field="observed_at") from None
        out.append(NewSource(label, role, content, observed))
    return tuple(out)


def validate_file_changes(raw: Any) -> tuple[FileChange, ...]:
    """§6.2 shape: items ``{path, action, content?}``."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_CHANGES:
        raise _bad(f"changes must be a list of 1 to {MAX_CHANGES} items", field="changes")
    out: list[FileChange] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        where = f"changes[{i}]"
        if not isinstance(item, Mapping):
            raise _bad(f"{where} must be an object", change_index=i)
        extra = sorted(set(item) - {"path", "action", "content"})
        if extra:
            raise _bad(f"{where} has unknown field: {extra[0]}", change_index=i, field=extra[0])
        raw_path = item.get("path")
        if not isinstance(raw_path, str) or not raw_path.strip():
            raise _bad(f"{where}.path is required", change_index=i, field="path")
        path = _topic_rel(raw_path, change_index=i, field="path")
        if path in seen:
            raise _bad(f"duplicate change path: topics/{path}", change_index=i, field="path", path="topics/" + path)
        seen[path] = i
        action = item.get("action")
        if action not in ("write", "delete"):
            raise _bad(f"{where}.action must be write or delete", change_index=i, field="action")
        content = item.get("content")
        if action == "write":
            if not isinstance(content, str):
                raise _bad(f"{where}.content must be a string for write", change_index=i, field="content")
        elif "content" in item:
            raise _bad(f"{where}.content is not allowed for delete", change_index=i, field="content")
        if action == "delete" and path == CORE_TOPIC:
            raise _core_delete_error(change_index=i, field="path")
        out.append(FileChange(i, path, action, content if action == "write" else None))
    return tuple(out)


def _core_delete_error(**details: Any) -> MemoryError:
    return _bad(
        "topics/core.md cannot be deleted or emptied as a whole (OpenProgram would rebuild it from the "
        "clipped core.md and lose records); remove core records one by one with delete_record",
        path="topics/core.md",
        **details,
    )


def _validate_refs(op: Mapping[str, Any], index: int) -> tuple[SourceRef, ...]:
    present = [k for k in _REF_KEYS if op.get(k) is not None]
    if len(present) != 1:
        raise _bad(f"{_op_where(index)}: exactly one of source_refs or sources is required", op_index=index, field="source_refs")
    key = present[0]
    raw = op[key]
    if not isinstance(raw, list) or not raw:
        raise _bad(f"{_op_where(index, key)} must be a non-empty list", op_index=index, field=key)
    refs: list[SourceRef] = []
    seen: set[str] = set()
    for j, item in enumerate(raw):
        where = f"{_op_where(index, key)}[{j}]"
        if key == "source_refs":
            if _is_blank_str(item):
                raise _bad(f"{where} must be a non-blank string", op_index=index, field=key, item_index=j)
            source, label = item.strip(), None
        else:
            if not isinstance(item, Mapping) or set(item) != {"source", "label"}:
                raise _bad(f"{where} must be an object with exactly source and label", op_index=index, field=key, item_index=j)
            if _is_blank_str(item["source"]) or _is_blank_str(item["label"]):
                raise _bad(f"{where}: source and label must be non-blank strings", op_index=index, field=key, item_index=j)
            source, label = item["source"].strip(), item["label"]
            if "]" in label or "\n" in label or "\r" in label:
                # OpenProgram renders the label and fails the strict parse of the result, so the
                # code is the topic-format one (corpus cases 245, 246); the message says why.
                raise _bad(f"{where}.label must not contain ']' or line breaks", "INVALID_TOPIC_FORMAT",
                           op_index=index, field=key, item_index=j)
        if any(ch in source for ch in "\r\n") or not source.isprintable():
            raise _bad(f"{where}: source must be a printable single-line id", op_index=index, field=key, item_index=j)
        if source in seen:
            raise _bad(f"{_op_where(index, key)}: duplicate source reference: {source}", op_index=index, field=key, item_index=j)
        seen.add(source)
        refs.append(SourceRef(source, label))
    return tuple(refs)


def _validate_time(op: Mapping[str, Any], index: int) -> str:
    if "time" not in op:
        raise _bad(f"{_op_where(index, 'time')} is required (use null or \"undated\" when unknown)", op_index=index, field="time")
    value = op["time"]
    if value is None:
        return "undated"
    # Taken as given, not trimmed: OpenProgram refuses " 2026-11 " (corpus case 217), and so
    # does its message, word for word.
    if not isinstance(value, str) or not is_valid_time(value):
        raise _bad(
            f"{_op_where(index, 'time')} must be null or YYYY, YYYY-MM, or YYYY-MM-DD",
            op_index=index,
            field="time",
        )
    return value


def _validate_headings(raw: Any, index: int, field_name: str) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise _bad(f"{_op_where(index, field_name)} must be a list of strings", op_index=index, field=field_name)
    if len(raw) > MAX_HEADINGS:
        raise _bad(f"{_op_where(index, field_name)} allows at most {MAX_HEADINGS} headings", op_index=index, field=field_name)
    out = []
    for title in raw:
        if _is_blank_str(title) or "\n" in title or "\r" in title:
            raise _bad(f"{_op_where(index, field_name)}: each heading must be a non-blank single line", op_index=index, field=field_name)
        out.append(title.strip())
    return tuple(out)


def _validate_destination(raw: Any, index: int) -> Destination:
    where = _op_where(index, "destination")
    if not isinstance(raw, Mapping):
        raise _bad(f"{where} is required and must be an object", op_index=index, field="destination")
    extra = sorted(set(raw) - _DESTINATION_KEYS)
    if extra:
        raise _bad(f"{where} has unknown field: {extra[0]}", op_index=index, field="destination." + extra[0])
    if _is_blank_str(raw.get("topic_path")):
        raise _bad(f"{where}.topic_path is required", op_index=index, field="destination.topic_path")
    topic = _topic_rel(raw["topic_path"], op_index=index, field="destination.topic_path")
    if "headings" not in raw:
        raise _bad(f"{where}.headings is required ([] = before the first heading)", op_index=index, field="destination.headings")
    headings = _validate_headings(raw["headings"], index, "destination.headings")
    position = raw.get("position")
    if position not in POSITIONS:
        raise _bad(f"{where}.position must be start, end, before or after", op_index=index, field="destination.position")
    anchor = raw.get("anchor_memory_id")
    if position in ("before", "after"):
        if _is_blank_str(anchor):
            raise _bad(f"{where}.anchor_memory_id is required for position {position}", op_index=index, field="destination.anchor_memory_id")
        anchor = anchor.strip()
    elif anchor is not None:
        raise _bad(f"{where}.anchor_memory_id is only allowed with position before or after", op_index=index, field="destination.anchor_memory_id")
    return Destination(topic, headings, position, anchor)


def _validate_op(raw: Any, index: int) -> RecordOp:
    if not isinstance(raw, Mapping):
        raise _bad(f"{_op_where(index)} must be an object", op_index=index)
    name = raw.get("op")
    if name not in OP_KEYS:
        raise _bad(
            f"{_op_where(index, 'op')} must be create_record, update_record, delete_record or move_records",
            op_index=index,
            field="op",
        )
    canonical = _CANONICAL_OP.get(name, name)
    if canonical == "create_record" and "memory_id" in raw:
        raise _bad(f"{_op_where(index, 'memory_id')}: memory_id is Runtime-assigned", op_index=index, field="memory_id")
    extra = sorted(set(raw) - OP_KEYS[name])
    if extra:
        raise _bad(f"{_op_where(index)}: unknown field for {name}: {extra[0]}", op_index=index, field=extra[0])
    legacy = name if name != canonical else None
    if canonical in ("update_record", "delete_record"):
        memory_id = raw.get("memory_id")
        if _is_blank_str(memory_id):
            raise _bad(f"{_op_where(index, 'memory_id')} is required", op_index=index, field="memory_id")
        memory_id = memory_id.strip()
        if canonical == "delete_record":
            return RecordOp(index, canonical, memory_id=memory_id, legacy_name=legacy)
        content = check_record_content(raw.get("content"), index)
        time = _validate_time(raw, index)
        refs = _validate_refs(raw, index)
        return RecordOp(index, canonical, content=content, time=time, refs=refs, memory_id=memory_id, legacy_name=legacy)
    if canonical == "move_records":
        ids = raw.get("memory_ids")
        if not isinstance(ids, list) or not ids or any(_is_blank_str(x) for x in ids):
            raise _bad(f"{_op_where(index, 'memory_ids')} must be a non-empty list of ids", op_index=index, field="memory_ids")
        ids = [x.strip() for x in ids]
        dup = next((x for i, x in enumerate(ids) if x in ids[:i]), None)
        if dup is not None:
            raise _bad(f"{_op_where(index, 'memory_ids')}: duplicate memory_id: {dup}", op_index=index, field="memory_ids", memory_id=dup)
        dest = _validate_destination(raw.get("destination"), index)
        if dest.anchor_memory_id is not None and dest.anchor_memory_id in ids:
            raise _bad(
                f"{_op_where(index, 'destination')}: anchor_memory_id {dest.anchor_memory_id} is one of the moved ids",
                op_index=index,
                field="destination.anchor_memory_id",
            )
        return RecordOp(index, canonical, memory_ids=tuple(ids), destination=dest)
    # create
    content = check_record_content(raw.get("content"), index)
    time = _validate_time(raw, index)
    refs = _validate_refs(raw, index)
    if name == "create":
        if _is_blank_str(raw.get("topic_path")):
            raise _bad(f"{_op_where(index, 'topic_path')} is required", op_index=index, field="topic_path")
        topic = _topic_rel(raw["topic_path"], op_index=index, field="topic_path")
        headings = _validate_headings(raw.get("headings", []), index, "headings")
        dest = Destination(topic, headings, "end", None)
    else:
        dest = _validate_destination(raw.get("destination"), index)
    return RecordOp(index, canonical, content=content, time=time, refs=refs, destination=dest, legacy_name=legacy)


def validate_memory_changes(raw: Any) -> tuple[RecordOp, ...]:
    """§6.1 argument checks, including the cross-op rules that need no workspace."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_CHANGES:
        raise _bad(f"memory_changes must be a list of 1 to {MAX_CHANGES} changes", field="memory_changes")
    if _string_bytes(raw) > MAX_PATCH_BYTES:
        raise _bad(f"memory_changes exceed {MAX_PATCH_BYTES} bytes of text", field="memory_changes")
    ops = tuple(_validate_op(item, i) for i, item in enumerate(raw))
    content_target: dict[str, int] = {}
    deleted: dict[str, int] = {}
    moved: dict[str, int] = {}
    for op in ops:
        if op.op in ("update_record", "delete_record"):
            mid = op.memory_id
            assert mid is not None
            if mid in content_target:
                raise _bad(
                    f"{_op_where(op.index)}: memory_id {mid} is already the target of memory_changes[{content_target[mid]}]",
                    op_index=op.index,
                    field="memory_id",
                    memory_id=mid,
                )
            content_target[mid] = op.index
            if op.op == "delete_record":
                if mid in moved:
                    raise _bad(
                        f"{_op_where(op.index)}: cannot delete memory_id {mid}: memory_changes[{moved[mid]}] moves it",
                        op_index=op.index,
                        field="memory_id",
                        memory_id=mid,
                    )
                deleted[mid] = op.index
        elif op.op == "move_records":
            for mid in op.memory_ids:
                if mid in moved:
                    raise _bad(
                        f"{_op_where(op.index)}: memory_id {mid} is already moved by memory_changes[{moved[mid]}]",
                        op_index=op.index,
                        field="memory_ids",
                        memory_id=mid,
                    )
                if mid in deleted:
                    raise _bad(
                        f"{_op_where(op.index)}: cannot move memory_id {mid}: memory_changes[{deleted[mid]}] deletes it",
                        op_index=op.index,
                        field="memory_ids",
                        memory_id=mid,
                    )
                moved[mid] = op.index
    return ops


# ---------------------------------------------------------------------------------------------
# §5.3 step 5 and step 7
# ---------------------------------------------------------------------------------------------


def _replace_labels(text: str, source_ids: Mapping[str, str], **details: Any) -> str:
    for m in NEW_SOURCE_LABEL_RE.finditer(text):
        if m.group(0) not in source_ids:
            raise MemoryError(
                "MISSING_SOURCE",
                f"undeclared source label: {m.group(0)} (declare it in sources)",
                details={"label": m.group(0), **details},
            )
    return NEW_SOURCE_LABEL_RE.sub(lambda m: source_ids[m.group(0)], text)


def replace_new_source_labels(request: Request, source_ids: Mapping[str, str]) -> Request:
    """§5.3 step 5: every ``new-source-…`` label in the patch, file contents and record source
    refs becomes its archived source id. Labels are matched as whole tokens, which is what
    OpenProgram's longest-first replacement achieves for declared labels; a token that is not
    declared is ``MISSING_SOURCE`` (it would otherwise be half-replaced)."""
    if request.patch is not None:
        return replace(request, patch=_replace_labels(request.patch, source_ids, field="patch"))
    if request.changes:
        changes = tuple(
            replace(ch, content=_replace_labels(ch.content, source_ids, change_index=ch.index, field="content"))
            if ch.content is not None
            else ch
            for ch in request.changes
        )
        return replace(request, changes=changes)
    ops = []
    for op in request.memory_changes:
        if op.refs:
            key = "sources" if any(r.label is not None for r in op.refs) else "source_refs"
            refs = tuple(
                replace(r, source=_replace_labels(r.source, source_ids, op_index=op.index, field=key)) for r in op.refs
            )
            if len({r.source for r in refs}) != len(refs):
                raise _bad(f"{_op_where(op.index, key)}: duplicate source reference after label replacement", op_index=op.index, field=key)
            op = replace(op, refs=refs)
        ops.append(op)
    return replace(request, memory_changes=tuple(ops))


def check_append_only(old_texts: Mapping[str, str], new_texts: Mapping[str, str]) -> None:
    """§5.3 step 7: every pre-existing file that changed must still exist and start with its old bytes."""
    for path in sorted(old_texts):
        old = old_texts[path]
        if path not in new_texts:
            raise MemoryError(
                "APPEND_ONLY_REQUIRED",
                f"append-only change may not delete topics/{path}",
                path="topics/" + path,
            )
        new = new_texts[path]
        if new != old and not new.encode("utf-8").startswith(old.encode("utf-8")):
            raise MemoryError(
                "APPEND_ONLY_REQUIRED",
                f"append-only change must keep the existing bytes of topics/{path} and only add after them",
                path="topics/" + path,
            )


def _outcome(
    before: Mapping[str, str],
    after: dict[str, str],
    *,
    allowed: frozenset[str] = frozenset(),
    removable: frozenset[str] | None = None,
    labels: dict[int, str] | None = None,
) -> ChangeOutcome:
    changed = sorted(
        {p for p in set(before) | set(after) if before.get(p) != after.get(p)}, key=lambda p: tuple(p.split("/"))
    )
    return ChangeOutcome(after, tuple(changed), allowed, removable, dict(labels or {}))


def _guard_core(before: Mapping[str, str], after: Mapping[str, str], **details: Any) -> None:
    """Pitfall 10: topics/core.md may not vanish through a whole-file change or a patch. A core
    text with no citation left would be pruned away by normalisation, which is the same thing."""
    if CORE_TOPIC in before and (CORE_TOPIC not in after or "[^" not in after[CORE_TOPIC]):
        raise _core_delete_error(**details)


# ---------------------------------------------------------------------------------------------
# §6.2 whole-file changes
# ---------------------------------------------------------------------------------------------


def apply_file_changes(texts: Mapping[str, str], changes: Sequence[FileChange] | Sequence[Mapping[str, Any]]) -> ChangeOutcome:
    """Write or delete whole topic files. Content is written verbatim (normalised later)."""
    if changes and not all(isinstance(c, FileChange) for c in changes):
        changes = validate_file_changes(list(changes))
    elif not changes:
        raise _bad(f"changes must be a list of 1 to {MAX_CHANGES} items", field="changes")
    after = dict(texts)
    seen: set[str] = set()
    for ch in changes:
        assert isinstance(ch, FileChange)
        if ch.path in seen:
            raise _bad(f"duplicate change path: {ch.workspace_path}", path=ch.workspace_path, change_index=ch.index, field="path")
        seen.add(ch.path)
        if ch.action == "delete":
            if ch.path == CORE_TOPIC:
                raise _core_delete_error(change_index=ch.index, field="path")
            if ch.path not in after:
                raise MemoryError(
                    "PATCH_CONFLICT",
                    f"change deletes a file that does not exist: {ch.workspace_path}",
                    path=ch.workspace_path,
                    details={"change_index": ch.index},
                )
            del after[ch.path]
        else:
            if not isinstance(ch.content, str):
                raise _bad(f"changes[{ch.index}].content must be a string for write", change_index=ch.index, field="content")
            after[ch.path] = ch.content
            if ch.path == CORE_TOPIC:
                _guard_core(texts, after, change_index=ch.index, field="content")
    return _outcome(texts, after)


# ---------------------------------------------------------------------------------------------
# §6.3 legacy unified diff
# ---------------------------------------------------------------------------------------------


@dataclass
class _Hunk:
    old_start: int
    header_line: int  # 1-based line in the patch
    body: list[tuple[str, str, int]]  # (kind " " | "-" | "+", text, patch line)


@dataclass
class _Section:
    old: str | None  # topic-relative; None = /dev/null
    new: str | None
    header_line: int
    hunks: list[_Hunk]


_FORBIDDEN_HEADERS = (
    ("rename from", "rename"),
    ("rename to", "rename"),
    ("copy from", "copy"),
    ("copy to", "copy"),
    ("old mode", "mode change"),
    ("new mode", "mode change"),
    ("similarity index", "rename/copy"),
    ("dissimilarity index", "rename/copy"),
    ("Binary files", "binary"),
    ("GIT binary patch", "binary"),
)


def _unquote_git_path(raw: str) -> str:
    if len(raw) < 2 or not (raw.startswith('"') and raw.endswith('"')):
        return raw
    body = raw[1:-1]
    out = bytearray()
    i = 0
    simple = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b", "f": b"\f", "r": b"\r", "v": b"\v"}
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            if re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
        out += ch.encode("utf-8")
        i += 1
    return out.decode("utf-8", errors="replace")


def _patch_path(raw: str, line: int) -> str | None:
    path = raw.split("\t", 1)[0].rstrip(" \r")
    path = _unquote_git_path(path)
    if path == "/dev/null":
        return None
    if path.startswith("a/") or path.startswith("b/"):
        path = path[2:]
    if not path:
        raise _bad(f"patch line {line}: file header names no path", line=line)
    return _topic_rel(path, line=line)


def parse_patch(patch: Any) -> list[_Section]:
    if not isinstance(patch, str) or not patch.strip():
        raise _bad("empty patch", field="patch")
    if len(patch.encode("utf-8")) > MAX_PATCH_BYTES:
        raise _bad(f"patch exceeds {MAX_PATCH_BYTES} bytes", field="patch")
    lines = patch.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    n = len(lines)
    sections: list[_Section] = []
    current: _Section | None = None

    def close() -> None:
        if current is not None and not current.hunks:
            raise _bad(f"patch line {current.header_line}: file section has no hunks", line=current.header_line)

    def is_header(i: int) -> bool:
        return lines[i].startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ ")

    i = 0
    while i < n:
        line = lines[i]
        if is_header(i):
            close()
            current = _Section(_patch_path(line[4:], i + 1), _patch_path(lines[i + 1][4:], i + 2), i + 1, [])
            sections.append(current)
            i += 2
            continue
        if line.startswith("@@"):
            m = _HUNK_RE.match(line)
            if current is None:
                raise _bad(f"patch line {i + 1}: hunk before any ---/+++ file header", line=i + 1)
            if not m:
                raise _bad(f"patch line {i + 1}: malformed hunk header: {line[:80]}", line=i + 1)
            hunk = _Hunk(int(m.group(1)), i + 1, [])
            i += 1
            while i < n:
                body = lines[i]
                if body.startswith("@@") or is_header(i):
                    break
                if body == "":
                    hunk.body.append((" ", "", i + 1))
                elif body[0] in " -+":
                    hunk.body.append((body[0], body[1:], i + 1))
                elif body[0] != "\\":
                    break
                i += 1
            current.hunks.append(hunk)
            continue
        for prefix, what in _FORBIDDEN_HEADERS:
            if line.startswith(prefix):
                raise _bad(f"patch line {i + 1}: {what} patches are not supported", line=i + 1)
        if line.startswith("new file mode") or line.startswith("deleted file mode"):
            mode = line.rsplit(" ", 1)[-1].strip()
            if mode != "100644":
                raise _bad(f"patch line {i + 1}: only regular files (mode 100644) can be patched, not mode {mode}", line=i + 1)
        elif line.startswith("--- ") or line.startswith("+++ "):
            raise _bad(f"patch line {i + 1}: file header must be a --- line followed by a +++ line", line=i + 1)
        i += 1
    close()
    if not sections:
        raise _bad("patch has no file sections (--- a/topics/<path> / +++ b/topics/<path>)", field="patch")
    return sections


def _apply_hunks(path: str, old_lines: list[str], hunks: list[_Hunk]) -> list[str]:
    wpath = "topics/" + path
    out: list[str] = []
    pos = 0
    for hunk in hunks:
        old_len = sum(1 for kind, _, _ in hunk.body if kind != "+")
        start = hunk.old_start - 1 if old_len and hunk.old_start > 0 else hunk.old_start
        if start < pos:
            raise MemoryError(
                "PATCH_CONFLICT",
                f"overlapping hunks in {wpath} (patch line {hunk.header_line})",
                path=wpath,
                details={"line": hunk.old_start, "patch_line": hunk.header_line},
            )
        if start > len(old_lines):
            raise MemoryError(
                "PATCH_CONFLICT",
                f"hunk starts past the end of {wpath} (line {hunk.old_start}, file has {len(old_lines)} lines)",
                path=wpath,
                details={"line": hunk.old_start, "patch_line": hunk.header_line},
            )
        out.extend(old_lines[pos:start])
        cur = start
        for kind, text, pline in hunk.body:
            if kind == "+":
                out.append(text)
                continue
            if cur >= len(old_lines):
                raise MemoryError(
                    "PATCH_CONFLICT",
                    f"patch runs past the end of {wpath} at line {cur + 1}",
                    path=wpath,
                    line=cur + 1,
                    details={"line": cur + 1, "expected": text, "found": None, "patch_line": pline},
                )
            if old_lines[cur] != text:
                raise MemoryError(
                    "PATCH_CONFLICT",
                    f"patch does not match {wpath} at line {cur + 1}: expected {text!r}, found {old_lines[cur]!r}",
                    path=wpath,
                    line=cur + 1,
                    details={"line": cur + 1, "expected": text, "found": old_lines[cur], "patch_line": pline},
                )
            if kind == " ":
                out.append(text)
            cur += 1
        pos = cur
    out.extend(old_lines[pos:])
    return out


def _file_lines(text: str) -> list[str]:
    """A unified diff numbers LF-terminated lines, so a patch applies to the text split on LF
    only; the normaliser splits the result as OpenProgram does afterwards (§3.1)."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def apply_patch(texts: Mapping[str, str], patch: str) -> ChangeOutcome:
    """Apply a legacy unified diff (§6.3) to the staged topic texts, all or nothing."""
    sections = parse_patch(patch)
    after = dict(texts)
    seen: set[str] = set()
    for sec in sections:
        if sec.old is None and sec.new is None:
            raise _bad(f"patch line {sec.header_line}: both sides are /dev/null", line=sec.header_line)
        if sec.old is not None and sec.new is not None and sec.old != sec.new:
            raise _bad(
                f"patch line {sec.header_line}: renames are not supported (topics/{sec.old} -> topics/{sec.new})",
                line=sec.header_line,
            )
        path = sec.new if sec.new is not None else sec.old
        assert path is not None
        wpath = "topics/" + path
        if path in seen:
            raise _bad(f"patch changes {wpath} in more than one section", path=wpath, line=sec.header_line)
        seen.add(path)
        if sec.old is None:  # create
            if path in after:
                raise MemoryError("PATCH_CONFLICT", f"patch creates {wpath}, which already exists", path=wpath, details={"patch_line": sec.header_line})
            new_lines = _apply_hunks(path, [], sec.hunks)
            after[path] = "\n".join(new_lines) + "\n" if new_lines else ""
        elif sec.new is None:  # delete
            if path == CORE_TOPIC:
                raise _core_delete_error(line=sec.header_line)
            if path not in after:
                raise MemoryError("PATCH_CONFLICT", f"patch deletes {wpath}, which does not exist", path=wpath, details={"patch_line": sec.header_line})
            rest = _apply_hunks(path, _file_lines(after[path]), sec.hunks)
            if any(rest):
                raise MemoryError(
                    "PATCH_CONFLICT",
                    f"patch deletes {wpath} but its hunks leave {len(rest)} line(s)",
                    path=wpath,
                    details={"patch_line": sec.header_line},
                )
            del after[path]
        else:  # modify
            if path not in after:
                raise MemoryError("PATCH_CONFLICT", f"patch modifies {wpath}, which does not exist", path=wpath, details={"patch_line": sec.header_line})
            new_lines = _apply_hunks(path, _file_lines(after[path]), sec.hunks)
            after[path] = "\n".join(new_lines) + "\n" if new_lines else ""
    _guard_core(texts, after)
    return _outcome(texts, after)


# ---------------------------------------------------------------------------------------------
# §6.1 record ops
# ---------------------------------------------------------------------------------------------


class _Loc(NamedTuple):
    """Where one memory id lives in the current staged texts. A named tuple, not a frozen
    dataclass: a record op builds one per id of the workspace from the kept summaries (20 000
    at scale 1), and a frozen dataclass costs several times more to build."""

    path: str
    para: int  # index into the file's paragraphs
    legacy: bool
    ids: tuple[str, ...]  # block: every alias (identity last); legacy: the ids of its citation group
    group: int | None = None  # legacy: index of the citation group in the paragraph


@dataclass
class _Scan:
    lines: list[str]
    paragraphs: list[Paragraph]
    shapes: list[ParagraphShape]
    headings: list[tuple[int, int, tuple[str, ...]]]  # (0-based line, level, chain)
    defs: dict[str, list[int]]  # footnote id -> 0-based definition lines
    units: dict[str, _Loc]

    def cited(self, exclude_para: int | None = None) -> set[str]:
        out: set[str] = set()
        for i, shape in enumerate(self.shapes):
            if i != exclude_para:
                out.update(shape.cited)
        return out

    def chains(self) -> list[tuple[str, ...]]:
        return [p.headings for p in self.paragraphs]


def _scan(path: str, lines: list[str]) -> _Scan:
    text = "\n".join(lines)
    paragraphs, classified, heads = iter_blocks(text)
    shapes = [paragraph_shape(p.text) for p in paragraphs]
    headings: list[tuple[int, int, tuple[str, ...]]] = []
    chain: list[str] = []
    for h in heads:
        chain = chain[: h.level - 1] + [h.title]
        headings.append((h.line - 1, h.level, tuple(chain)))
    defs: dict[str, list[int]] = {}
    for line in classified:
        if line.kind == "definition":
            m = DEFINITION_RE.match(line.text)
            if m:
                defs.setdefault(m.group(1), []).append(line.number - 1)
    units: dict[str, _Loc] = {}
    for pi, shape in enumerate(shapes):
        if shape.ids:
            loc = _Loc(path, pi, False, shape.ids)
            for bid in shape.ids:
                units.setdefault(bid, loc)
        elif not shape.invalid_ids:
            for gi, (_, _, fids) in enumerate(shape.groups):
                if fids and all(is_mem_id(f) for f in fids):
                    loc = _Loc(path, pi, True, fids, gi)
                    for fid in fids:
                        units.setdefault(fid, loc)
    return _Scan(lines, paragraphs, shapes, headings, defs, units)


def _is_blank(line: str) -> bool:
    return not line.strip()


def _insert_block(lines: list[str], at: int, block: list[str]) -> tuple[int, int]:
    """Insert ``block`` at ``at`` with one blank line of separation each side.
    Returns (index of the block's first line, number of lines inserted including padding)."""
    pad_before = at > 0 and not _is_blank(lines[at - 1])
    pad_after = at < len(lines) and not _is_blank(lines[at])
    chunk = ([""] if pad_before else []) + block + ([""] if pad_after else [])
    lines[at:at] = chunk
    return at + (1 if pad_before else 0), len(chunk)


def _remove_lines(lines: list[str], start: int, end: int) -> None:
    """Remove lines[start:end] and nothing else. The blank lines around them stay, so a
    delete, move or update can leave two to four consecutive blank lines: that is what
    OpenProgram writes (corpus cases 174, 286, 299), and collapsing them would make every
    such file differ from OpenProgram's bytes. Trailing blank lines go when the file is
    rendered (§3.8 step 6)."""
    del lines[start:end]


def _rel_link(target: str, old_dir: str, new_dir: str) -> str:
    """Re-relativise a relative ``path#fragment`` target from old_dir to new_dir (workspace dirs)."""
    if "#" not in target:
        return target  # a plain handle (source id, D ref) is location-free
    return rebase_target(target, old_dir, new_dir)


def _relocate_definition(line: str, old_dir: str, new_dir: str) -> str:
    if old_dir == new_dir:
        return line
    return _LINK_RE.sub(lambda m: f"[{m.group(1)}]({_rel_link(m.group(2), old_dir, new_dir)})", line)


def _relocate_block_links(text: str, old_dir: str, new_dir: str) -> str:
    if old_dir == new_dir:
        return text

    def fix(m: re.Match[str]) -> str:
        path = m.group(2)
        if not path.endswith(".md") or path.startswith("/") or _SCHEME_RE.match(path):
            return m.group(0)
        resolved = posixpath.normpath(posixpath.join(old_dir, path))
        return m.group(1) + relpath(resolved, new_dir) + m.group(3)

    return _BLOCK_LINK_RE.sub(fix, text)


def _topic_dir(path: str) -> str:
    return posixpath.dirname("topics/" + path)


def _def_id(line: str) -> str | None:
    m = DEFINITION_RE.match(line)
    return m.group(1) if m else None


# What ``_Work`` needs of a file no op touches: its units' locations (in scan order) and every
# footnote id it cites or defines. A pure function of (path, text); see ``scan_summary``.
ScanSummary = tuple[tuple[tuple[str, int, bool, tuple[str, ...], "int | None"], ...], frozenset[str]]


def scan_summary(path: str, text: str) -> ScanSummary:
    """The summary of one file exactly as ``_Work`` would scan it (a caller may keep it by the
    file's bytes and pass it back through ``apply_memory_changes(summaries=...)``)."""
    scan = _scan(path, split_lines(text))
    units = tuple((mid, loc.para, loc.legacy, loc.ids, loc.group) for mid, loc in scan.units.items())
    notes: set[str] = set(scan.defs)
    for shape in scan.shapes:
        notes.update(shape.cited)
    return units, frozenset(notes)


def is_scan_summary(value: object) -> bool:
    """A well-formed ``ScanSummary`` (a stored one of any other shape is a cache miss)."""
    if not (type(value) is tuple and len(value) == 2 and type(value[1]) is frozenset and type(value[0]) is tuple):
        return False
    if not all(type(n) is str for n in value[1]):
        return False
    for u in value[0]:
        if not (type(u) is tuple and len(u) == 5 and type(u[0]) is str and type(u[1]) is int and type(u[2]) is bool
                and type(u[3]) is tuple and all(type(i) is str for i in u[3]) and (u[4] is None or type(u[4]) is int)):
            return False
    return True


class _Scans(dict):
    """``_Work.scans``: files known only by their summary are scanned on first access."""

    def __init__(self, work: "_Work") -> None:
        super().__init__()
        self._work = work

    def __missing__(self, path: str) -> _Scan:
        if path in self._work.summarized:
            return self._work.materialize(path)
        if path in self._work.pending:
            return self._work.load(path)
        raise KeyError(path)

    def __contains__(self, path: object) -> bool:
        return dict.__contains__(self, path) or path in self._work.summarized or path in self._work.pending

    def get(self, path: str, default: Any = None) -> Any:
        return self[path] if path in self else default


class _Lines(dict):
    """``_Work.lines``: a file's lines are split on first use. A record op looks at a few files
    of a workspace of hundreds; splitting every one up front cost more than the op itself."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        super().__init__()
        self._texts = texts

    def __missing__(self, path: str) -> list[str]:
        if path not in self._texts:
            raise KeyError(path)
        lines = self[path] = split_lines(self._texts[path])
        return lines

    def __contains__(self, path: object) -> bool:
        return dict.__contains__(self, path) or path in self._texts

    def get(self, path: str, default: Any = None) -> Any:
        return self[path] if path in self else default

    def setdefault(self, path: str, default: Any = None) -> Any:
        if path not in self:
            self[path] = default
        return self[path]


class _OwnedIndex(dict):
    """``_Work.index`` when every id's file is known up front (``owners.get(id)``: the one
    file whose scan holds it; no id in two files). A file is scanned when one of its ids is first
    looked up -- before any ``setdefault`` too, so an id a changed file gains never shadows
    the same id of a file not scanned yet. That is the index the full scan would have built:
    with every id in one file, the order files are scanned in cannot matter."""

    def __init__(self, work: "_Work", owners: Mapping[str, str]) -> None:
        super().__init__()
        self._work = work
        self._owners = owners

    def _resolve(self, mid: object) -> None:
        if not dict.__contains__(self, mid):
            path = self._owners.get(mid)  # type: ignore[call-overload]
            if path is not None and path in self._work.pending:
                self._work.load(path)

    def __missing__(self, mid: str) -> _Loc:
        self._resolve(mid)
        if dict.__contains__(self, mid):
            return dict.__getitem__(self, mid)
        raise KeyError(mid)

    def __contains__(self, mid: object) -> bool:
        self._resolve(mid)
        return dict.__contains__(self, mid)

    def get(self, mid: str, default: Any = None) -> Any:
        self._resolve(mid)
        return dict.get(self, mid, default)

    def setdefault(self, mid: str, default: Any = None) -> Any:
        self._resolve(mid)
        return dict.setdefault(self, mid, default)


class _Work:
    """Mutable working copy of the staged texts with an id index kept current per file.

    With ``summaries(path, text) -> ScanSummary | None``, a file is first known by its summary
    (the index and footnote ids are built from it) and fully scanned only when an op looks at
    it; the index then holds that scan's locations, exactly as if every file had been scanned.

    With ``owned`` (``recordindex.Owners`` of exactly these texts: no id in two files), no
    file is looked at up front: a file is scanned when an op names it or one of its ids, and
    ``footnote_ids`` holds only the ``new-evidence-record-`` ids (the only ones a new label
    is checked against)."""

    def __init__(self, texts: Mapping[str, str], link_for: LinkFor | None,
                 summaries: Callable[[str, str], ScanSummary | None] | None = None,
                 owned: Any = None) -> None:
        self.original = dict(texts)
        self.lines: dict[str, list[str]] = _Lines(self.original)
        self.summarized: dict[str, dict[str, _Loc]] = {}
        self.pending: set[str] = set()  # files of ``owned`` not scanned yet
        self.scans: dict[str, _Scan] = _Scans(self)
        self.index: dict[str, _Loc] = {}
        self.footnote_ids: set[str] = set()
        self.link_for = link_for
        self.touched: set[str] = set()
        if owned is not None:
            self.index = _OwnedIndex(self, owned.owner)
            self.pending = set(self.original)
            self.footnote_ids = set(owned.labels)
            return
        for path in sorted(self.original, key=lambda p: tuple(p.split("/"))):
            summary = summaries(path, texts[path]) if summaries is not None else None
            if summary is not None:
                units = {mid: _Loc(path, para, legacy, ids, group) for mid, para, legacy, ids, group in summary[0]}
                self.summarized[path] = units
                for mid, loc in units.items():
                    self.index.setdefault(mid, loc)
                self.footnote_ids.update(summary[1])
                continue
            scan = self._rescan(path)
            for shape in scan.shapes:
                self.footnote_ids.update(shape.cited)
            self.footnote_ids.update(scan.defs)

    def materialize(self, path: str) -> _Scan:
        """Scan a file known by its summary: its locations in the index become the scan's."""
        units = self.summarized.pop(path)
        if self.lines[path] != split_lines(self.original[path]):
            # Every op scans a file before it edits it; an edit before the first scan would
            # leave the summary's locations in the index, so refuse loudly, never answer wrong.
            raise RuntimeError(f"internal: topics/{path} changed before it was scanned")
        scan = _scan(path, self.lines[path])
        for mid, loc in scan.units.items():
            if self.index.get(mid) is units.get(mid):
                self.index[mid] = loc
        dict.__setitem__(self.scans, path, scan)
        return scan

    def load(self, path: str) -> _Scan:
        """Scan a file not looked at yet (``owned``), as the full scan would have at the start."""
        self.pending.discard(path)
        if dict.__contains__(self.lines, path) and self.lines[path] != split_lines(self.original[path]):
            raise RuntimeError(f"internal: topics/{path} changed before it was scanned")
        scan = _scan(path, self.lines[path])
        dict.__setitem__(self.scans, path, scan)
        for mid, loc in scan.units.items():
            dict.setdefault(self.index, mid, loc)
        return scan

    def _rescan(self, path: str) -> _Scan:
        old = self.scans.get(path)
        if old is not None:
            for mid, loc in old.units.items():
                if self.index.get(mid) is loc:
                    del self.index[mid]
        scan = _scan(path, self.lines.setdefault(path, []))
        self.scans[path] = scan
        for mid, loc in scan.units.items():
            self.index.setdefault(mid, loc)
        return scan

    def changed(self, path: str) -> _Scan:
        self.touched.add(path)
        return self._rescan(path)

    def scan(self, path: str) -> _Scan:
        if path not in self.scans:
            self.lines[path] = []
            return self._rescan(path)
        return self.scans[path]

    def texts(self) -> dict[str, str]:
        out = dict(self.original)
        for path in self.touched:
            lines = self.lines.get(path, [])
            while lines and _is_blank(lines[-1]):
                lines.pop()
            out[path] = "\n".join(lines) + "\n" if lines else ""
        return out

    def render_definition(self, label: str, time: str, refs: Sequence[SourceRef], path: str) -> str:
        """The definition as OpenProgram first writes it: the source handles as given (the bare
        handle for ``source_refs``, ``[label](handle)`` for ``sources``). The normaliser then
        allocates the ``e-`` id from this form (§3.8 step 2: SEED = the handles) and only
        afterwards expands each handle into its relative link (step 6). Rendering the link first
        would seed a different id (spec §6.1, checked against OpenProgram's corpus)."""
        if all(ref.label is None for ref in refs):
            sources = ", ".join(ref.source for ref in refs)
        else:
            sources = ", ".join(f"[{ref.display}]({ref.source})" for ref in refs)
        return f"[^{label}]: Time: `{time}`; Sources: " + sources

    def remove_unused_definitions(self, path: str, candidates: Sequence[str], keep: Sequence[str] = ()) -> _Scan:
        scan = self.scans[path]
        cited = scan.cited()
        drop = sorted(
            {ln for fid in dict.fromkeys(candidates) if fid not in cited and fid not in keep for ln in scan.defs.get(fid, [])},
            reverse=True,
        )
        lines = self.lines[path]
        for ln in drop:
            _remove_lines(lines, ln, ln + 1)
        return self.changed(path) if drop else scan


def _not_found(mid: str, op: RecordOp, field_name: str) -> MemoryError:
    return MemoryError(
        "MEMORY_NOT_FOUND",
        f"{_op_where(op.index)}: memory_id does not exist: {mid}",
        details={"op_index": op.index, "field": field_name, "memory_id": mid},
    )


def _placement(work: _Work, op: RecordOp, dest: Destination) -> tuple[int, list[str]]:
    """(insertion line index, heading lines to create first) for a destination."""
    scan = work.scan(dest.topic_path)
    lines = scan.lines
    want = dest.headings
    if dest.position in ("before", "after"):
        anchor = dest.anchor_memory_id
        assert anchor is not None
        loc = work.index.get(anchor)
        if loc is None:
            raise MemoryError(
                "MEMORY_NOT_FOUND",
                f"{_op_where(op.index)}: anchor_memory_id does not exist: {anchor}",
                details={"op_index": op.index, "field": "destination.anchor_memory_id", "memory_id": anchor},
            )
        ascan = work.scans[loc.path]
        para = ascan.paragraphs[loc.para]
        if loc.path != dest.topic_path or para.headings != want:
            raise _bad(
                f"{_op_where(op.index, 'destination')}: anchor {anchor} is in topics/{loc.path} under "
                f"{list(para.headings)}, not in {dest.workspace_path} under {list(want)}",
                op_index=op.index,
                field="destination.anchor_memory_id",
                memory_id=anchor,
            )
        if dest.position == "before":
            return para.start - 1, []
        # Right after the anchor paragraph, before its own definitions: OpenProgram's
        # placement (corpus cases 185, 186, 190).
        return para.end, []

    def back_off(at: int, floor: int) -> int:
        while at > floor and _is_blank(lines[at - 1]):
            at -= 1
        return at

    if not want:
        first = scan.headings[0][0] if scan.headings else len(lines)
        return (0, []) if dest.position == "start" else (back_off(first, 0), [])
    for k in range(len(want), 0, -1):
        match = next((h for h in scan.headings if h[2] == want[:k]), None)
        if match is None:
            continue
        hline, hlevel, _ = match
        following = [h for h in scan.headings if h[0] > hline]
        if k == len(want):
            if dest.position == "start":
                return hline + 1, []
            nxt = following[0][0] if following else len(lines)
            return back_off(nxt, hline + 1), []
        end = next((h[0] for h in following if h[1] <= hlevel), len(lines))
        return back_off(end, hline + 1), _heading_lines(op, want, k)
    return back_off(len(lines), 0), _heading_lines(op, want, 0)


def _heading_lines(op: RecordOp, want: tuple[str, ...], have: int) -> list[str]:
    out: list[str] = []
    for j, title in enumerate(want[have:]):
        level = have + 1 + j
        if level > MAX_HEADINGS:
            raise _bad(f"{_op_where(op.index, 'destination')}: cannot create a heading deeper than level 6", op_index=op.index, field="destination.headings")
        out += ["#" * level + " " + title, ""]
    return out


def _insert_records(work: _Work, op: RecordOp, dest: Destination, block: list[str]) -> None:
    """Insert record paragraphs (+ their definitions) at the destination and check that they
    landed under exactly the requested heading chain without moving any other record. When new
    headings are needed and irregular heading levels make the natural spot (the end of the
    matching section) change other records' chains, the end of the file is tried too."""
    path = dest.topic_path
    scan = work.scan(path)
    before_chains = scan.chains()
    original = list(work.lines[path])
    at, heads = _placement(work, op, dest)
    candidates = [at]
    if heads:
        eof = len(original)
        while eof > 0 and _is_blank(original[eof - 1]):
            eof -= 1
        if eof != at:
            candidates.append(eof)
    for at in candidates:
        lines = work.lines[path] = list(original)
        first, count = _insert_block(lines, at, heads + block)
        new = work.changed(path)
        inserted = [i for i, p in enumerate(new.paragraphs) if first <= p.start - 1 < first + count]
        others = [p.headings for i, p in enumerate(new.paragraphs) if i not in inserted]
        if others == before_chains and all(new.paragraphs[i].headings == dest.headings for i in inserted):
            return
    work.lines[path] = original
    work.changed(path)
    raise _bad(
        f"{_op_where(op.index, 'destination')}: cannot place a record under {list(dest.headings)} in "
        f"{dest.workspace_path} without changing the sections of other records (irregular heading levels)",
        op_index=op.index,
        field="destination.headings",
    )


def _record_lines(content: str, label: str, ids: Sequence[str] = ()) -> list[str]:
    lines = content.split("\n")
    lines[-1] = lines[-1] + f"[^{label}]" + ("".join(f" ^{i}" for i in ids))
    return lines


def _replace_paragraph(work: _Work, loc: _Loc, new_lines: list[str]) -> _Scan:
    scan = work.scans[loc.path]
    para = scan.paragraphs[loc.para]
    work.lines[loc.path][para.start - 1 : para.end] = new_lines
    return work.changed(loc.path)


def _remove_paragraph(work: _Work, loc: _Loc) -> _Scan:
    scan = work.scans[loc.path]
    para = scan.paragraphs[loc.para]
    _remove_lines(work.lines[loc.path], para.start - 1, para.end)
    return work.changed(loc.path)


def _legacy_pieces(scan: _Scan, loc: _Loc) -> tuple[str, int, int, int]:
    """(paragraph text, segment start, group start, group end) of a legacy unit."""
    text = scan.paragraphs[loc.para].text
    groups = scan.shapes[loc.para].groups
    assert loc.group is not None
    gstart, gend, _ = groups[loc.group]
    seg_start = groups[loc.group - 1][1] if loc.group > 0 else 0
    return text, seg_start, gstart, gend


def _cut_legacy(work: _Work, loc: _Loc, only: str | None) -> tuple[str, _Scan]:
    """Remove a legacy unit from its paragraph. ``only`` = remove just that id from a shared
    group. Returns (the removed segment text, new scan)."""
    scan = work.scans[loc.path]
    text, seg_start, gstart, gend = _legacy_pieces(scan, loc)
    segment = text[seg_start:gstart]
    if only is not None:
        group = text[gstart:gend].replace(f"[^{only}]", "", 1)
        new_text = text[:gstart] + group + text[gend:]
    else:
        new_text = text[:seg_start] + text[gend:]
        if seg_start == 0:
            new_text = new_text.lstrip()
    if not paragraph_shape(new_text).groups or not new_text.strip():
        return segment, _remove_paragraph(work, loc)
    return segment, _replace_paragraph(work, loc, new_text.split("\n"))


def _do_create(work: _Work, op: RecordOp, label: str) -> None:
    dest = op.destination
    assert dest is not None and op.content is not None and op.time is not None
    definition = work.render_definition(label, op.time, op.refs, dest.topic_path)
    _insert_records(work, op, dest, _record_lines(op.content, label) + ["", definition])


def _do_update(work: _Work, op: RecordOp, label: str | None) -> None:
    mid = op.memory_id
    assert mid is not None and op.content is not None and op.time is not None
    loc = work.index.get(mid)
    if loc is None:
        raise _not_found(mid, op, "memory_id")
    scan = work.scans[loc.path]
    if loc.legacy:
        if len(loc.ids) > 1:
            raise _bad(
                f"{_op_where(op.index)}: legacy unit {mid} shares its text with {', '.join(i for i in loc.ids if i != mid)}; "
                "update would change them too",
                op_index=op.index,
                field="memory_id",
                memory_id=mid,
            )
        if mid in scan.cited(exclude_para=loc.para):
            raise _bad(
                f"{_op_where(op.index)}: evidence [^{mid}] is also cited by another paragraph; update would change it",
                op_index=op.index,
                field="memory_id",
                memory_id=mid,
            )
        text, seg_start, gstart, _ = _legacy_pieces(scan, loc)
        segment = text[seg_start:gstart]
        lead = segment[: len(segment) - len(segment.lstrip())]
        new_text = text[:seg_start] + lead + op.content + text[gstart:]
        scan = _replace_paragraph(work, loc, new_text.split("\n"))
        definition = work.render_definition(mid, op.time, op.refs, loc.path)
        lines = work.lines[loc.path]
        existing = scan.defs.get(mid, [])
        if existing:
            lines[existing[0]] = definition
            for ln in sorted(existing[1:], reverse=True):
                _remove_lines(lines, ln, ln + 1)
            work.changed(loc.path)
        else:
            para = scan.paragraphs[work.index[mid].para]
            _insert_block(lines, para.end, [definition])
            work.changed(loc.path)
        return
    assert label is not None
    old_cited = scan.shapes[loc.para].cited
    scan = _replace_paragraph(work, loc, _record_lines(op.content, label, loc.ids))
    para = scan.paragraphs[work.index[mid].para]
    definition = work.render_definition(label, op.time, op.refs, loc.path)
    _insert_block(work.lines[loc.path], para.end, [definition])
    work.changed(loc.path)
    work.remove_unused_definitions(loc.path, old_cited)


def _do_delete(work: _Work, op: RecordOp) -> None:
    mid = op.memory_id
    assert mid is not None
    loc = work.index.get(mid)
    if loc is None:
        raise _not_found(mid, op, "memory_id")
    scan = work.scans[loc.path]
    cited = scan.shapes[loc.para].cited
    if loc.legacy:
        _, scan = _cut_legacy(work, loc, mid if len(loc.ids) > 1 else None)
        work.remove_unused_definitions(loc.path, [mid])
        return
    if len(loc.ids) > 1:
        para = scan.paragraphs[loc.para]
        shape = scan.shapes[loc.para]
        body = para.text[: shape.body_end].rstrip()
        remaining = [i for i in loc.ids if i != mid]
        _replace_paragraph(work, loc, (body + "".join(f" ^{i}" for i in remaining)).split("\n"))
        return
    _remove_paragraph(work, loc)
    work.remove_unused_definitions(loc.path, cited)


def _do_move(work: _Work, op: RecordOp) -> None:
    dest = op.destination
    assert dest is not None
    dest_dir = _topic_dir(dest.topic_path)
    moved: set[str] = set()
    pieces: list[tuple[list[str], list[str]]] = []  # (paragraph lines, definition lines)
    for mid in op.memory_ids:
        if mid in moved:
            continue
        loc = work.index.get(mid)
        if loc is None:
            raise _not_found(mid, op, "memory_ids")
        group = [i for i in op.memory_ids if i in loc.ids]
        if sorted(group) != sorted(loc.ids):
            missing = [i for i in loc.ids if i not in group]
            raise _bad(
                f"{_op_where(op.index)}: moving {mid} must also move {', '.join(missing)} (same block)",
                op_index=op.index,
                field="memory_ids",
                memory_id=mid,
            )
        if tuple(group) != loc.ids:
            raise _bad(
                f"{_op_where(op.index)}: ids of one block must be listed in their order: {', '.join(loc.ids)}",
                op_index=op.index,
                field="memory_ids",
                memory_id=mid,
            )
        moved.update(loc.ids)
        scan = work.scans[loc.path]
        src_dir = _topic_dir(loc.path)
        if loc.legacy:
            text, _, gstart, gend = _legacy_pieces(scan, loc)
            cites = list(loc.ids)
            segment, _ = _cut_legacy(work, loc, None)
            para_text = segment.strip() + text[gstart:gend]
        else:
            para_text = scan.paragraphs[loc.para].text
            cites = list(dict.fromkeys(scan.shapes[loc.para].cited))
            _remove_paragraph(work, loc)
        scan = work.scans[loc.path]
        defs = [_relocate_definition(scan.lines[scan.defs[f][0]], src_dir, dest_dir) for f in cites if f in scan.defs]
        work.remove_unused_definitions(loc.path, cites)
        pieces.append((_relocate_block_links(para_text, src_dir, dest_dir).split("\n"), defs))
    # evidence definitions: reuse an identical one in the destination, refuse a conflicting one
    dscan = work.scan(dest.topic_path)
    have: dict[str, str] = {fid: work.lines[dest.topic_path][lns[0]].strip() for fid, lns in dscan.defs.items()}
    # All moved paragraphs first, then all their definitions, each separated by one blank
    # line: the order OpenProgram writes (corpus cases 305, 306).
    paragraphs: list[str] = []
    definitions: list[str] = []
    for para_lines, defs in pieces:
        for d in defs:
            fid = _def_id(d)
            assert fid is not None
            if fid in have:
                if have[fid] != d.strip():
                    raise _bad(
                        f"{_op_where(op.index)}: conflicting evidence definitions for [^{fid}] in {dest.workspace_path}",
                        op_index=op.index,
                        field="memory_ids",
                        evidence_id=fid,
                    )
                continue
            have[fid] = d.strip()
            definitions += ([""] if definitions else []) + [d]
        paragraphs += ([""] if paragraphs else []) + para_lines
    _insert_records(work, op, dest, paragraphs + ([""] + definitions if definitions else []))


def apply_memory_changes(
    texts: Mapping[str, str],
    committed_tree: Any = None,
    ops: Sequence[RecordOp] | Sequence[Mapping[str, Any]] = (),
    *,
    link_for: LinkFor | None = None,
    summaries: Callable[[str, str], ScanSummary | None] | None = None,
    owned: Any = None,
) -> ChangeOutcome:
    """Apply record ops (§6.1) to the staged topic texts.

    ``summaries(path, text)``: a caller's kept ``scan_summary`` of that text (or None), so the
    files no op touches are not scanned; the outcome is the same either way. ``owned``
    (``recordindex.Owners`` of exactly ``texts``) goes further: only the files the ops name
    are scanned, and no summary is looked up.

    ``ops`` are validated ``RecordOp``s (raw dicts are validated here). Memory ids are looked up
    in ``texts`` (at this point of a transaction they equal the committed tree);
    ``committed_tree`` (a ``topics.TopicTree``), when given, must know every targeted id too,
    so an id that only exists in uncommitted staged text is not found. ``link_for`` renders
    canonical source links (plain handles are written when it is missing).
    """
    if ops and not all(isinstance(o, RecordOp) for o in ops):
        ops = validate_memory_changes(list(ops))
    if not ops:
        raise _bad(f"memory_changes must be a list of 1 to {MAX_CHANGES} changes", field="memory_changes")
    work = _Work(texts, link_for, summaries, owned)
    # ``has_id``: the tree's own lookup, not a set of all its ids built for a few questions
    in_tree = getattr(committed_tree, "has_id", None) if committed_tree is not None else None
    if in_tree is None and committed_tree is not None:
        committed_ids = getattr(committed_tree, "ids", None)
        in_tree = committed_ids.__contains__ if committed_ids is not None else None

    def exists(mid: str) -> bool:
        return mid in work.index and (in_tree is None or in_tree(mid))

    # existence and the rules that need the tree
    update_block: dict[tuple[Any, ...], int] = {}
    for op in ops:
        fld = "memory_ids" if op.op == "move_records" else "memory_id"
        for mid in op.target_ids:
            if not exists(mid):
                raise _not_found(mid, op, fld)
        if op.op == "update_record":
            assert op.memory_id is not None
            loc = work.index[op.memory_id]
            key = (loc.path, loc.para, loc.group)
            if key in update_block:
                raise _bad(
                    f"{_op_where(op.index)}: {op.memory_id} is the same block as the one memory_changes[{update_block[key]}] updates",
                    op_index=op.index,
                    field="memory_id",
                    memory_id=op.memory_id,
                )
            update_block[key] = op.index

    order = [o for o in ops if o.op != "move_records"] + [o for o in ops if o.op == "move_records"]
    labels: dict[int, str] = {}
    taken = set(work.footnote_ids)
    for pos, op in enumerate(order, start=1):
        needs = op.op == "create_record" or (
            op.op == "update_record" and not work.index[op.memory_id].legacy  # type: ignore[index]
        )
        if needs:
            i = pos
            while f"{NEW_EVIDENCE_PREFIX}{i}" in taken:
                i += 1
            labels[op.index] = f"{NEW_EVIDENCE_PREFIX}{i}"
            taken.add(labels[op.index])

    for op in order:
        if op.op == "create_record":
            _do_create(work, op, labels[op.index])
        elif op.op == "update_record":
            _do_update(work, op, labels.get(op.index))
        elif op.op == "delete_record":
            _do_delete(work, op)
        else:
            _do_move(work, op)

    allowed = frozenset(r.source for o in ops for r in o.refs)
    removable = frozenset(o.memory_id for o in ops if o.op == "delete_record" and o.memory_id)
    return _outcome(texts, work.texts(), allowed=allowed, removable=removable, labels=labels)
