"""What a transaction answers: ``TxResult`` (OpenProgram's result / error object, §5.3), the
core's token report, and the one way a list of problems becomes a refusal."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..format.errors import MemoryError, Problem


@dataclass(frozen=True)
class CoreInfo:
    tokens: int | None
    omitted_ids: tuple[str, ...] = ()
    budget: int = 2000

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "omitted_ids": list(self.omitted_ids), "budget": self.budget}


class _Revision:
    """``TxResult.revision``: given a string or a pending revision (``txcache``'s
    ``PendingRevision``, or ``InstalledRevision`` in an install's own result), read as the
    string, hashed at the first read: an install's caller that never reads the new revision
    never pays for its O(workspace) hash."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = "_" + name

    def __get__(self, obj: Any, owner: type | None = None) -> str | None:
        if obj is None:
            return None  # the dataclass field's default
        from ..store.revision import revision_text

        return revision_text(obj.__dict__[self._slot])

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self._slot] = value  # frozen: only ``__init__`` sets it


@dataclass(frozen=True)
class TxResult:
    ok: bool
    code: str | None = None
    message: str = ""
    path: str | None = None
    line: int | None = None
    column: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    revision: str | None = _Revision()  # type: ignore[assignment]
    changed_files: tuple[str, ...] = ()
    block_ids: Mapping[str, str] = field(default_factory=dict)
    evidence_ids: Mapping[str, str] = field(default_factory=dict)
    source_ids: Mapping[str, str] = field(default_factory=dict)
    memory_committed: bool = False
    git_committed: bool = False
    git_commit: str | None = None
    git_error: str | None = None
    core: CoreInfo | None = None
    problems: tuple[Problem, ...] = ()
    dropped: tuple[Any, ...] = ()
    validate_only: bool = False
    warnings: tuple[str, ...] = ()

    @classmethod
    def failure(cls, exc: MemoryError, **extra: Any) -> "TxResult":
        problems = exc.problems or (exc.as_problem(),)
        return cls(
            ok=False,
            code=exc.code,
            message=exc.message,
            path=exc.path,
            line=exc.line,
            column=exc.column,
            details=dict(exc.details),
            problems=tuple(problems),
            memory_committed=bool(exc.details.get("memory_committed", False)),
            **extra,
        )

    def error(self) -> MemoryError:
        return MemoryError(
            self.code or "TRANSACTION_FAILURE_UNKNOWN",
            self.message,
            path=self.path,
            line=self.line,
            column=self.column,
            details=dict(self.details),
            problems=self.problems,
        )

    def to_json(self) -> dict[str, Any]:
        """OpenProgram's result / error object (§5.3), plus our extra keys on success."""
        if not self.ok:
            err: dict[str, Any] = {"code": self.code, "message": self.message, "path": self.path}
            if self.line is not None:
                err["line"] = self.line
                err["column"] = self.column
            if self.details:
                err["details"] = dict(self.details)
            return {"ok": False, "error": err}
        out: dict[str, Any] = {
            "ok": True,
            "revision": self.revision,
            "source_ids": dict(self.source_ids),
            "block_ids": dict(self.block_ids),
            "evidence_ids": dict(self.evidence_ids),
            "changed_files": list(self.changed_files),
            "memory_committed": self.memory_committed,
            "git_committed": self.git_committed,
            "git_commit": self.git_commit,
        }
        if self.git_error:
            out["git_error"] = self.git_error
        if self.core is not None:
            out["core"] = self.core.to_json()
        if self.dropped:
            out["dropped"] = [d.to_json() if hasattr(d, "to_json") else d for d in self.dropped]
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out

    def all_errors(self) -> tuple[Problem, ...]:
        """Every error of a refusal: first the one reported (OpenProgram's), then the others
        in file order (path, line, column), each once. Empty when ok."""
        if self.ok:
            return ()
        first = Problem(self.code or "TRANSACTION_FAILURE_UNKNOWN", self.message, self.path, self.line, self.column,
                        dict(self.details))
        from ..format.topics import is_error, topic_sort_key  # only a refusal needs the topic grammar

        rest = [p for p in self.problems if is_error(p)]
        rest.sort(key=lambda p: (topic_sort_key(p.path or ""), p.line or 0, p.column or 0))
        out = [first]
        seen = {(first.path, first.line, first.column, first.message)}
        for p in rest:
            key = (p.path, p.line, p.column, p.message)
            if key not in seen:
                seen.add(key)
                out.append(p)
        return tuple(out)

    def edit_json(self) -> dict[str, Any]:
        """The CLI ``edit --json`` shape: the first error in the top-level fields, as before,
        and every error in ``errors``."""
        return {
            "ok": self.ok,
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "revision": self.revision,
            "changed_files": list(self.changed_files),
            "errors": [
                {"code": p.code, "message": p.message, "path": p.path, "line": p.line, "column": p.column}
                for p in self.all_errors()
            ],
        }


def raise_first(problems: Iterable[Problem]) -> None:
    """Refuse with the first error of ``problems`` (every error kept in ``problems``); nothing
    when none is an error."""
    from ..format.topics import is_error

    errors = [p for p in problems if is_error(p)]
    if errors:
        first = errors[0]
        raise MemoryError(
            first.code if first.code else "INVALID_TOPIC_FORMAT",
            first.message,
            path=first.path,
            line=first.line,
            column=first.column,
            details=dict(first.details),
            problems=tuple(errors),
        )
