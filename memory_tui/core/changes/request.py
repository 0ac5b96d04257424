"""The request: OpenProgram's three change forms as frozen types, and every argument check that
needs no workspace (memory spec §5.3 steps 1-2, §6).

* ``validate_request`` checks a ``memory_update`` / ``POST /api/memory/changes`` payload and
  returns a frozen ``Request``; ``check_append_only`` is §5.3 step 7.
* The forms are applied by their own modules, each a pure function over staged topic texts:
  ``records`` (record ops, §6.1), ``files`` (whole files, §6.2), ``patch`` (legacy unified diff,
  §6.3); ``labels`` swaps ``new-source-…`` labels for archived source ids (§5.3 step 5).
  ``change_outcome`` and ``guard_core`` are the rules all three share.

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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..format.errors import MemoryError
from ..format.paths import check_writable

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
_NEW_SOURCE_LABEL_FULL = re.compile(r"new-source-[a-z0-9-]+\Z")
NEW_EVIDENCE_PREFIX = "new-evidence-record-"

_TIME_RE = re.compile(r"([0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2}))?)?\Z")
_TRAILING_ID_RE = re.compile(r"(?:^|\s)\^[A-Za-z0-9-]+\s*\Z")
_FENCE_OR_HTML_RE = re.compile(r"^\s*(?:```|<!--|<a\s)")

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


def argument_error(message: str, code: str = "INVALID_ARGUMENT", path: str | None = None, **details: Any) -> MemoryError:
    return MemoryError(code, message, path=path, details={k: v for k, v in details.items() if v is not None})


def op_where(index: int | None, field_name: str | None = None) -> str:
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


def topic_rel(workspace_path: str, **details: Any) -> str:
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
    where = op_where(index, "content")
    if _is_blank_str(content):
        raise argument_error(f"{where} must be a non-empty string", op_index=index, field="content")
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
        raise argument_error(f"{op_where(index)}.{CONTENT_RULE}", op_index=index, field="content")
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
        raise argument_error("request must be a JSON object")
    unknown = sorted(set(payload) - TOP_LEVEL_KEYS)
    if unknown:
        raise argument_error(f"unknown request field: {unknown[0]}", field=unknown[0])
    git_commit = payload.get("git_commit", "auto")
    if git_commit is None:
        git_commit = "auto"
    if git_commit not in GIT_COMMIT_MODES:
        raise argument_error("git_commit must be auto, on or off", field="git_commit")
    base_revision = payload.get("base_revision")
    if _is_blank_str(base_revision):
        raise argument_error("base_revision is required", field="base_revision")
    commit_message = payload.get("commit_message")
    if commit_message is not None and not isinstance(commit_message, str):
        raise argument_error("commit_message must be a string", field="commit_message")
    append_only = payload.get("append_only", False)
    if append_only is None:
        append_only = False
    if not isinstance(append_only, bool):
        raise argument_error("append_only must be a boolean", field="append_only")
    forms = [name for name in ("patch", "changes", "memory_changes") if payload.get(name) is not None]
    if len(forms) != 1:
        raise argument_error("exactly one of patch, changes or memory_changes is required")
    form = forms[0]
    patch = None
    changes: tuple[FileChange, ...] = ()
    ops: tuple[RecordOp, ...] = ()
    if form == "patch":
        patch = payload["patch"]
        if not isinstance(patch, str) or not patch.strip():
            raise argument_error("patch must be a non-empty string", field="patch")
        if len(patch.encode("utf-8")) > MAX_PATCH_BYTES:
            raise argument_error(f"patch exceeds {MAX_PATCH_BYTES} bytes", field="patch")
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
        raise argument_error("sources must be a list", field="sources")
    if len(raw) > MAX_SOURCES:
        raise argument_error(f"sources allows at most {MAX_SOURCES} items", field="sources")
    out: list[NewSource] = []
    seen: set[str] = set()
    total = 0
    for i, item in enumerate(raw):
        where = f"sources[{i}]"
        if not isinstance(item, Mapping):
            raise argument_error(f"{where} must be an object", source_index=i)
        extra = sorted(set(item) - {"label", "role", "content", "observed_at"})
        if extra:
            raise argument_error(f"{where} has unknown field: {extra[0]}", source_index=i, field=extra[0])
        label = item.get("label")
        if not isinstance(label, str) or not _NEW_SOURCE_LABEL_FULL.match(label):
            raise argument_error(f"{where}.label must match new-source-[a-z0-9-]+", source_index=i, field="label")
        if label in seen:
            raise argument_error(f"duplicate source label: {label}", source_index=i, field="label")
        seen.add(label)
        role = item.get("role")
        if role not in SOURCE_ROLES:
            raise argument_error(f"{where}.role must be user, assistant, system or tool", source_index=i, field="role")
        content = item.get("content")
        if _is_blank_str(content):
            raise argument_error(f"{where}.content must be a non-blank string", source_index=i, field="content")
        total += len(content.encode("utf-8"))
        if total > MAX_SOURCE_CONTENT_BYTES:
            raise argument_error(f"sources content exceeds {MAX_SOURCE_CONTENT_BYTES} bytes", source_index=i, field="content")
        observed = item.get("observed_at")
        if observed is not None:
            if not isinstance(observed, str) or not observed.strip():
                raise argument_error(f"{where}.observed_at must be an ISO 8601 string", source_index=i, field="observed_at")
            try:
                observed = _dt.datetime.fromisoformat(observed.strip()).isoformat()
            except ValueError:
                raise argument_error(f"{where}.observed_at must be ISO 8601", source_index=i, field="observed_at") from None
        out.append(NewSource(label, role, content, observed))
    return tuple(out)


def validate_file_changes(raw: Any) -> tuple[FileChange, ...]:
    """§6.2 shape: items ``{path, action, content?}``."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_CHANGES:
        raise argument_error(f"changes must be a list of 1 to {MAX_CHANGES} items", field="changes")
    out: list[FileChange] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        where = f"changes[{i}]"
        if not isinstance(item, Mapping):
            raise argument_error(f"{where} must be an object", change_index=i)
        extra = sorted(set(item) - {"path", "action", "content"})
        if extra:
            raise argument_error(f"{where} has unknown field: {extra[0]}", change_index=i, field=extra[0])
        raw_path = item.get("path")
        if not isinstance(raw_path, str) or not raw_path.strip():
            raise argument_error(f"{where}.path is required", change_index=i, field="path")
        path = topic_rel(raw_path, change_index=i, field="path")
        if path in seen:
            raise argument_error(f"duplicate change path: topics/{path}", change_index=i, field="path", path="topics/" + path)
        seen[path] = i
        action = item.get("action")
        if action not in ("write", "delete"):
            raise argument_error(f"{where}.action must be write or delete", change_index=i, field="action")
        content = item.get("content")
        if action == "write":
            if not isinstance(content, str):
                raise argument_error(f"{where}.content must be a string for write", change_index=i, field="content")
        elif "content" in item:
            raise argument_error(f"{where}.content is not allowed for delete", change_index=i, field="content")
        if action == "delete" and path == CORE_TOPIC:
            raise core_delete_error(change_index=i, field="path")
        out.append(FileChange(i, path, action, content if action == "write" else None))
    return tuple(out)


def core_delete_error(**details: Any) -> MemoryError:
    return argument_error(
        "topics/core.md cannot be deleted or emptied as a whole (OpenProgram would rebuild it from the "
        "clipped core.md and lose records); remove core records one by one with delete_record",
        path="topics/core.md",
        **details,
    )


def _validate_refs(op: Mapping[str, Any], index: int) -> tuple[SourceRef, ...]:
    present = [k for k in _REF_KEYS if op.get(k) is not None]
    if len(present) != 1:
        raise argument_error(f"{op_where(index)}: exactly one of source_refs or sources is required", op_index=index, field="source_refs")
    key = present[0]
    raw = op[key]
    if not isinstance(raw, list) or not raw:
        raise argument_error(f"{op_where(index, key)} must be a non-empty list", op_index=index, field=key)
    refs: list[SourceRef] = []
    seen: set[str] = set()
    for j, item in enumerate(raw):
        where = f"{op_where(index, key)}[{j}]"
        if key == "source_refs":
            if _is_blank_str(item):
                raise argument_error(f"{where} must be a non-blank string", op_index=index, field=key, item_index=j)
            source, label = item.strip(), None
        else:
            if not isinstance(item, Mapping) or set(item) != {"source", "label"}:
                raise argument_error(f"{where} must be an object with exactly source and label", op_index=index, field=key, item_index=j)
            if _is_blank_str(item["source"]) or _is_blank_str(item["label"]):
                raise argument_error(f"{where}: source and label must be non-blank strings", op_index=index, field=key, item_index=j)
            source, label = item["source"].strip(), item["label"]
            if "]" in label or "\n" in label or "\r" in label:
                # OpenProgram renders the label and fails the strict parse of the result, so the
                # code is the topic-format one (corpus cases 245, 246); the message says why.
                raise argument_error(f"{where}.label must not contain ']' or line breaks", "INVALID_TOPIC_FORMAT",
                           op_index=index, field=key, item_index=j)
        if any(ch in source for ch in "\r\n") or not source.isprintable():
            raise argument_error(f"{where}: source must be a printable single-line id", op_index=index, field=key, item_index=j)
        if source in seen:
            raise argument_error(f"{op_where(index, key)}: duplicate source reference: {source}", op_index=index, field=key, item_index=j)
        seen.add(source)
        refs.append(SourceRef(source, label))
    return tuple(refs)


def _validate_time(op: Mapping[str, Any], index: int) -> str:
    if "time" not in op:
        raise argument_error(f"{op_where(index, 'time')} is required (use null or \"undated\" when unknown)", op_index=index, field="time")
    value = op["time"]
    if value is None:
        return "undated"
    # Taken as given, not trimmed: OpenProgram refuses " 2026-11 " (corpus case 217), and so
    # does its message, word for word.
    if not isinstance(value, str) or not is_valid_time(value):
        raise argument_error(
            f"{op_where(index, 'time')} must be null or YYYY, YYYY-MM, or YYYY-MM-DD",
            op_index=index,
            field="time",
        )
    return value


def _validate_headings(raw: Any, index: int, field_name: str) -> tuple[str, ...]:
    if not isinstance(raw, list):
        raise argument_error(f"{op_where(index, field_name)} must be a list of strings", op_index=index, field=field_name)
    if len(raw) > MAX_HEADINGS:
        raise argument_error(f"{op_where(index, field_name)} allows at most {MAX_HEADINGS} headings", op_index=index, field=field_name)
    out = []
    for title in raw:
        if _is_blank_str(title) or "\n" in title or "\r" in title:
            raise argument_error(f"{op_where(index, field_name)}: each heading must be a non-blank single line", op_index=index, field=field_name)
        out.append(title.strip())
    return tuple(out)


def _validate_destination(raw: Any, index: int) -> Destination:
    where = op_where(index, "destination")
    if not isinstance(raw, Mapping):
        raise argument_error(f"{where} is required and must be an object", op_index=index, field="destination")
    extra = sorted(set(raw) - _DESTINATION_KEYS)
    if extra:
        raise argument_error(f"{where} has unknown field: {extra[0]}", op_index=index, field="destination." + extra[0])
    if _is_blank_str(raw.get("topic_path")):
        raise argument_error(f"{where}.topic_path is required", op_index=index, field="destination.topic_path")
    topic = topic_rel(raw["topic_path"], op_index=index, field="destination.topic_path")
    if "headings" not in raw:
        raise argument_error(f"{where}.headings is required ([] = before the first heading)", op_index=index, field="destination.headings")
    headings = _validate_headings(raw["headings"], index, "destination.headings")
    position = raw.get("position")
    if position not in POSITIONS:
        raise argument_error(f"{where}.position must be start, end, before or after", op_index=index, field="destination.position")
    anchor = raw.get("anchor_memory_id")
    if position in ("before", "after"):
        if _is_blank_str(anchor):
            raise argument_error(f"{where}.anchor_memory_id is required for position {position}", op_index=index, field="destination.anchor_memory_id")
        anchor = anchor.strip()
    elif anchor is not None:
        raise argument_error(f"{where}.anchor_memory_id is only allowed with position before or after", op_index=index, field="destination.anchor_memory_id")
    return Destination(topic, headings, position, anchor)


def _validate_op(raw: Any, index: int) -> RecordOp:
    if not isinstance(raw, Mapping):
        raise argument_error(f"{op_where(index)} must be an object", op_index=index)
    name = raw.get("op")
    if name not in OP_KEYS:
        raise argument_error(
            f"{op_where(index, 'op')} must be create_record, update_record, delete_record, move_records",
            op_index=index,
            field="op",
        )
    canonical = _CANONICAL_OP.get(name, name)
    if canonical == "create_record" and "memory_id" in raw:
        raise argument_error(f"{op_where(index, 'memory_id')}: memory_id is Runtime-assigned", op_index=index, field="memory_id")
    extra = sorted(set(raw) - OP_KEYS[name])
    if extra:
        raise argument_error(f"{op_where(index)}: unknown field for {name}: {extra[0]}", op_index=index, field=extra[0])
    legacy = name if name != canonical else None
    if canonical in ("update_record", "delete_record"):
        memory_id = raw.get("memory_id")
        if _is_blank_str(memory_id):
            raise argument_error(f"{op_where(index, 'memory_id')} is required", op_index=index, field="memory_id")
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
            raise argument_error(f"{op_where(index, 'memory_ids')} must be a non-empty string list", op_index=index, field="memory_ids")
        ids = [x.strip() for x in ids]
        dup = next((x for i, x in enumerate(ids) if x in ids[:i]), None)
        if dup is not None:
            raise argument_error(f"{op_where(index, 'memory_ids')}: duplicate memory_id: {dup}", op_index=index, field="memory_ids", memory_id=dup)
        dest = _validate_destination(raw.get("destination"), index)
        if dest.anchor_memory_id is not None and dest.anchor_memory_id in ids:
            raise argument_error(
                f"{op_where(index, 'destination')}: anchor_memory_id {dest.anchor_memory_id} is one of the moved ids",
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
            raise argument_error(f"{op_where(index, 'topic_path')} is required", op_index=index, field="topic_path")
        topic = topic_rel(raw["topic_path"], op_index=index, field="topic_path")
        headings = _validate_headings(raw.get("headings", []), index, "headings")
        dest = Destination(topic, headings, "end", None)
    else:
        dest = _validate_destination(raw.get("destination"), index)
    return RecordOp(index, canonical, content=content, time=time, refs=refs, destination=dest, legacy_name=legacy)


def validate_memory_changes(raw: Any) -> tuple[RecordOp, ...]:
    """§6.1 argument checks, including the cross-op rules that need no workspace."""
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_CHANGES:
        raise argument_error(f"memory_changes must be a list of 1 to {MAX_CHANGES} changes", field="memory_changes")
    if _string_bytes(raw) > MAX_PATCH_BYTES:
        raise argument_error(f"memory_changes exceed {MAX_PATCH_BYTES} bytes of text", field="memory_changes")
    ops = tuple(_validate_op(item, i) for i, item in enumerate(raw))
    content_target: dict[str, int] = {}
    deleted: dict[str, int] = {}
    moved: dict[str, int] = {}
    for op in ops:
        if op.op in ("update_record", "delete_record"):
            mid = op.memory_id
            assert mid is not None
            if mid in content_target:
                raise argument_error(
                    f"{op_where(op.index)}: memory_id {mid} is already the target of memory_changes[{content_target[mid]}]",
                    op_index=op.index,
                    field="memory_id",
                    memory_id=mid,
                )
            content_target[mid] = op.index
            if op.op == "delete_record":
                if mid in moved:
                    raise argument_error(
                        f"{op_where(op.index)}: cannot delete memory_id {mid}: memory_changes[{moved[mid]}] moves it",
                        op_index=op.index,
                        field="memory_id",
                        memory_id=mid,
                    )
                deleted[mid] = op.index
        elif op.op == "move_records":
            for mid in op.memory_ids:
                if mid in moved:
                    raise argument_error(
                        f"{op_where(op.index)}: memory_id {mid} is already moved by memory_changes[{moved[mid]}]",
                        op_index=op.index,
                        field="memory_ids",
                        memory_id=mid,
                    )
                if mid in deleted:
                    raise argument_error(
                        f"{op_where(op.index)}: cannot move memory_id {mid}: memory_changes[{deleted[mid]}] deletes it",
                        op_index=op.index,
                        field="memory_ids",
                        memory_id=mid,
                    )
                moved[mid] = op.index
    return ops


# ---------------------------------------------------------------------------------------------
# Rules every form's outcome shares (§5.3 step 7, pitfall 10)
# ---------------------------------------------------------------------------------------------


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


def change_outcome(
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


def guard_core(before: Mapping[str, str], after: Mapping[str, str], **details: Any) -> None:
    """Pitfall 10: topics/core.md may not vanish through a whole-file change or a patch. A core
    text with no citation left would be pruned away by normalisation, which is the same thing."""
    if CORE_TOPIC in before and (CORE_TOPIC not in after or "[^" not in after[CORE_TOPIC]):
        raise core_delete_error(**details)
