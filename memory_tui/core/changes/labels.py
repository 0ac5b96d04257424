"""§5.3 step 5: ``new-source-…`` labels become the archived source ids of the request's sources."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..format.errors import MemoryError
from .request import Request, argument_error, op_where

NEW_SOURCE_LABEL_RE = re.compile(r"new-source-[a-z0-9-]+")


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
                raise argument_error(f"{op_where(op.index, key)}: duplicate source reference after label replacement", op_index=op.index, field=key)
            op = replace(op, refs=refs)
        ops.append(op)
    return replace(request, memory_changes=tuple(ops))
