"""§6.2 whole-file changes: write or delete topic files, verbatim (the transaction normalises)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..format.errors import MemoryError
from .request import (
    CORE_TOPIC,
    MAX_CHANGES,
    ChangeOutcome,
    FileChange,
    argument_error,
    change_outcome,
    core_delete_error,
    guard_core,
    validate_file_changes,
)


def apply_file_changes(texts: Mapping[str, str], changes: Sequence[FileChange] | Sequence[Mapping[str, Any]]) -> ChangeOutcome:
    """Write or delete whole topic files. Content is written verbatim (normalised later)."""
    if changes and not all(isinstance(c, FileChange) for c in changes):
        changes = validate_file_changes(list(changes))
    elif not changes:
        raise argument_error(f"changes must be a list of 1 to {MAX_CHANGES} items", field="changes")
    after = dict(texts)
    seen: set[str] = set()
    for ch in changes:
        assert isinstance(ch, FileChange)
        if ch.path in seen:
            raise argument_error(f"duplicate change path: {ch.workspace_path}", path=ch.workspace_path, change_index=ch.index, field="path")
        seen.add(ch.path)
        if ch.action == "delete":
            if ch.path == CORE_TOPIC:
                raise core_delete_error(change_index=ch.index, field="path")
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
                raise argument_error(f"changes[{ch.index}].content must be a string for write", change_index=ch.index, field="content")
            after[ch.path] = ch.content
            if ch.path == CORE_TOPIC:
                guard_core(texts, after, change_index=ch.index, field="content")
    return change_outcome(texts, after)
