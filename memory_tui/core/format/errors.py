"""The closed error vocabulary shared by every layer (memory spec §5.6).

A ``MemoryError`` is data: a code from the closed set, a human message, and where it
happened (workspace-relative path, 1-based line and column) so the CLI can print it and
the editor can put it on the line.
"""

from __future__ import annotations

import errno as errno_mod
import os
import re
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


# An operating-system refusal, named: what the file system said, never "internal error".
# (Not OpenProgram codes: writer-status.json, whose enum is closed, stores them as
# WRITER_FAILURE_UNKNOWN; every report, the CLI and ``--json`` carry the precise one.)
NO_SPACE = "NO_SPACE"
READ_ONLY = "READ_ONLY"
NAME_TOO_LONG = "NAME_TOO_LONG"
PERMISSION_DENIED = "PERMISSION_DENIED"
IO_ERROR = "IO_ERROR"
TOO_MANY_OPEN_FILES = "TOO_MANY_OPEN_FILES"
OS_ERROR = "OS_ERROR"
OS_ERROR_CODES = (NO_SPACE, READ_ONLY, NAME_TOO_LONG, PERMISSION_DENIED, IO_ERROR, TOO_MANY_OPEN_FILES, OS_ERROR)

_ERRNO_CODES = {
    errno_mod.ENOSPC: NO_SPACE,
    errno_mod.EDQUOT: NO_SPACE,
    errno_mod.EFBIG: NO_SPACE,
    errno_mod.EROFS: READ_ONLY,
    errno_mod.ENAMETOOLONG: NAME_TOO_LONG,
    errno_mod.EACCES: PERMISSION_DENIED,
    errno_mod.EPERM: PERMISSION_DENIED,
    errno_mod.EIO: IO_ERROR,
    errno_mod.EMFILE: TOO_MANY_OPEN_FILES,
    errno_mod.ENFILE: TOO_MANY_OPEN_FILES,
    errno_mod.ELOOP: "PATH_OUTSIDE_WORKSPACE",  # O_NOFOLLOW met a link (fsutil.refuse_link)
}


# a file written in a stage or the install scratch dir stands for the workspace file it becomes
_STAGED = re.compile(r"^\.(?:scriptorium|nativemem)-(?:stage/[^/]+|txn/(?:new|old))/")


def os_error_code(exc: OSError) -> str:
    return _ERRNO_CODES.get(exc.errno or 0, OS_ERROR)


def os_failure(exc: OSError, *, root: Any = None, kept: str = "") -> MemoryError:
    """An ``OSError`` as a coded ``MemoryError``: the code (``NO_SPACE``, ``READ_ONLY`` …), the
    file (relative to ``root`` when inside it) and what the failed operation kept."""
    filename = exc.filename if exc.filename is not None else exc.filename2
    path = os.fsdecode(filename) if filename is not None else None
    if path is not None and root is not None:
        try:
            rel = os.path.relpath(path, os.fspath(root))
            if not rel.startswith(".."):
                path = _STAGED.sub("", rel.replace(os.sep, "/"))
        except ValueError:
            pass
    reason = exc.strerror or str(exc)
    message = reason  # the path is the error's location: every face prints it before the code
    if kept:
        message += f"; {kept}"
    details: dict[str, Any] = {"errno": errno_mod.errorcode.get(exc.errno or 0, str(exc.errno))}
    if kept:
        details["kept"] = kept
    return MemoryError(os_error_code(exc), message, path=path, details=details)


def classify_write_failure(exc: BaseException) -> tuple[str, bool]:
    """Map an exception from a write to (persisted reason code, retryable)."""
    if isinstance(exc, OSError):
        return os_error_code(exc), False
    if isinstance(exc, MemoryError) and exc.code in OS_ERROR_CODES:
        return exc.code, False
    if isinstance(exc, MemoryError):
        if exc.code in TRANSACTION_KEPT_CODES:
            return exc.code, exc.code in RETRYABLE_TRANSACTION_CODES
        if exc.code in WRITE_FAILURE_CODES:
            return exc.code, bool(exc.details.get("retryable", False))
        return "TRANSACTION_FAILURE_UNKNOWN", False
    if isinstance(exc, ValueError):
        return "WRITER_PRECONDITION_FAILED", False
    return "WRITER_FAILURE_UNKNOWN", bool(getattr(exc, "retryable", False))
