"""The closed error vocabulary shared by every layer (memory spec §5.6).

A ``MemoryError`` is data: a code from the closed set, a human message, and where it
happened (workspace-relative path, 1-based line and column) so the CLI can print it and
the editor can put it on the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# MemoryWriteFailureCode: what writer-status.json may persist.
WRITE_FAILURE_CODES = (
    "MISSING_SESSION_ID",
    "SESSION_NODES_UNAVAILABLE",
    "WRITER_NO_PROGRESS",
    "WRITER_PRECONDITION_FAILED",
    "MEMORY_PROVIDER_RESOLUTION_FAILED",
    "MODEL_TRANSPORT",
    "MODEL_RATE_LIMIT",
    "MODEL_PROVIDER_INTERNAL",
    "MODEL_AUTHENTICATION",
    "MODEL_AUTHORIZATION",
    "MODEL_INVALID_REQUEST",
    "MODEL_CONTEXT_LENGTH",
    "MODEL_CONTENT_POLICY",
    "MODEL_TIMEOUT",
    "MODEL_FAILURE_UNKNOWN",
    "APPEND_ONLY_REQUIRED",
    "COMMIT_REJECTED",
    "CONCURRENT_UPDATE",
    "EMBEDDING_UNAVAILABLE",
    "GIT_COMMIT_FAILED",
    "INVALID_ARGUMENT",
    "INVALID_TOPIC_FORMAT",
    "MISSING_SOURCE",
    "PATCH_CONFLICT",
    "PATH_OUTSIDE_WORKSPACE",
    "READ_ONLY_PATH",
    "TRANSACTION_FAILURE_UNKNOWN",
    "WRITER_FAILURE_UNKNOWN",
)

# Transaction codes that keep their identity when a failed write is classified.
TRANSACTION_KEPT_CODES = (
    "APPEND_ONLY_REQUIRED",
    "COMMIT_REJECTED",
    "CONCURRENT_UPDATE",
    "EMBEDDING_UNAVAILABLE",
    "GIT_COMMIT_FAILED",
    "INVALID_ARGUMENT",
    "INVALID_TOPIC_FORMAT",
    "MISSING_SOURCE",
    "PATCH_CONFLICT",
    "PATH_OUTSIDE_WORKSPACE",
    "READ_ONLY_PATH",
)

TRANSACTION_CODES = TRANSACTION_KEPT_CODES + (
    "GIT_UNAVAILABLE",
    "MEMORY_NOT_FOUND",
    "WRITER_PRECONDITION_FAILED",
)

RETRYABLE_TRANSACTION_CODES = frozenset({"CONCURRENT_UPDATE", "EMBEDDING_UNAVAILABLE"})


@dataclass(frozen=True)
class Location:
    path: str | None = None  # workspace-relative posix path, e.g. "topics/people/ada.md"
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based

    def __str__(self) -> str:
        if not self.path:
            return ""
        out = self.path
        if self.line is not None:
            out += f":{self.line}"
            if self.column is not None:
                out += f":{self.column}"
        return out


@dataclass(frozen=True)
class Problem:
    """One finding about on-disk data: a parse error, a validation failure, a warning."""

    code: str
    message: str
    path: str | None = None
    line: int | None = None
    column: int | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def location(self) -> Location:
        return Location(self.path, self.line, self.column)

    def __str__(self) -> str:
        where = str(self.location)
        return f"{where}: {self.code}: {self.message}" if where else f"{self.code}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message, "path": self.path}
        out["line"] = self.line
        out["column"] = self.column
        if self.details:
            out["details"] = self.details
        return out


class MemoryError(Exception):
    """Raised for any failure that has a code from the closed set."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        details: dict[str, Any] | None = None,
        problems: tuple[Problem, ...] = (),
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        self.details = dict(details or {})
        self.problems = problems

    @classmethod
    def from_problem(cls, problem: Problem, *, code: str | None = None) -> "MemoryError":
        return cls(
            code or problem.code,
            problem.message,
            path=problem.path,
            line=problem.line,
            column=problem.column,
            details=problem.details,
            problems=(problem,),
        )

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE_TRANSACTION_CODES

    def as_problem(self) -> Problem:
        return Problem(self.code, self.message, self.path, self.line, self.column, self.details)

    def to_json(self) -> dict[str, Any]:
        """OpenProgram's error object shape, plus line/column."""
        err: dict[str, Any] = {"code": self.code, "message": self.message, "path": self.path}
        if self.line is not None:
            err["line"] = self.line
            err["column"] = self.column
        if self.details:
            err["details"] = self.details
        return {"ok": False, "error": err}

    def __str__(self) -> str:
        return str(self.as_problem())


# Codes for read-side problems that are not part of OpenProgram's write enum but that the
# reader needs to name precisely (a corrupt JSON state file, a truncated archive...).
CORRUPT_FILE = "CORRUPT_FILE"
TRUNCATED_ARCHIVE = "TRUNCATED_ARCHIVE"
STATE_NOT_FOUND = "STATE_NOT_FOUND"
SPECIAL_TOKEN_TEXT = "SPECIAL_TOKEN_TEXT"  # a warning: text OpenProgram's token counter raises on (pitfall 15)


def classify_write_failure(exc: BaseException) -> tuple[str, bool]:
    """Map an exception from a write to (persisted reason code, retryable)."""
    if isinstance(exc, MemoryError):
        if exc.code in TRANSACTION_KEPT_CODES:
            return exc.code, exc.code in RETRYABLE_TRANSACTION_CODES
        if exc.code in WRITE_FAILURE_CODES:
            return exc.code, bool(exc.details.get("retryable", False))
        return "TRANSACTION_FAILURE_UNKNOWN", False
    if isinstance(exc, ValueError):
        return "WRITER_PRECONDITION_FAILED", False
    return "WRITER_FAILURE_UNKNOWN", bool(getattr(exc, "retryable", False))
