"""Outcome codes in plain language, with whether trying again can help (memory spec §5.6).

One table for every face of the engine: a job result dialog, the CLI and the job history
all explain a code the same way. The codes are exactly the closed vocabulary of
``core.errors`` (the persisted writer enum plus the transaction codes) and the read-side
codes, so a code missing here is a bug the unit test catches, not a silent "unknown".

``retryable`` in the table is the default verdict. Where the engine reports its own
verdict for one failure (a model provider saying "try later" for ``MODEL_FAILURE_UNKNOWN``,
``writer-status.json``'s ``retryable``), that verdict wins: pass it to ``describe_outcome``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import (
    CORRUPT_FILE,
    IO_ERROR,
    NAME_TOO_LONG,
    NO_SPACE,
    OS_ERROR,
    OS_ERROR_CODES,
    PERMISSION_DENIED,
    READ_ONLY,
    TOO_MANY_OPEN_FILES,
    STATE_NOT_FOUND,
    TRANSACTION_CODES,
    TRUNCATED_ARCHIVE,
    WRITE_FAILURE_CODES,
)

# code -> (plain-language meaning, retryable by default)
OUTCOMES: dict[str, tuple[str, bool]] = {
    "MISSING_SESSION_ID": ("The job was started without a session id.", False),
    "SESSION_NODES_UNAVAILABLE": ("The session's turns could not be read or marked (missing, unreadable or changed during the write).", False),
    "WRITER_NO_PROGRESS": ("The writer ran but changed no topic, so the pending turns stay pending.", False),
    "WRITER_PRECONDITION_FAILED": ("The writer refused its input before running (bad settings, or text it cannot process).", False),
    "MEMORY_PROVIDER_RESOLUTION_FAILED": ("The configured writer could not be found or started.", False),
    "MODEL_TRANSPORT": ("The model endpoint could not be reached (connection refused, DNS, reset).", True),
    "MODEL_RATE_LIMIT": ("The model endpoint is rate limiting requests.", True),
    "MODEL_PROVIDER_INTERNAL": ("The model provider had an internal error.", True),
    "MODEL_AUTHENTICATION": ("The model endpoint rejected the credentials.", False),
    "MODEL_AUTHORIZATION": ("The credentials are not allowed to use this model.", False),
    "MODEL_INVALID_REQUEST": ("The model endpoint rejected the request as invalid.", False),
    "MODEL_CONTEXT_LENGTH": ("The batch is larger than the model's context window.", False),
    "MODEL_CONTENT_POLICY": ("The model provider's content policy refused the request.", False),
    "MODEL_TIMEOUT": ("The writer took longer than its timeout.", True),
    "MODEL_FAILURE_UNKNOWN": ("The writer failed in a way it did not classify.", False),
    "APPEND_ONLY_REQUIRED": ("The change rewrote existing bytes where only appending is allowed (source archives, append-only callers).", False),
    "COMMIT_REJECTED": ("The writer's edits were rejected, and its repair attempt was rejected too.", False),
    "CONCURRENT_UPDATE": ("Another writer (memory-tui or OpenProgram) holds the write lock, or the workspace changed since it was read. Nothing was changed.", True),
    "EMBEDDING_UNAVAILABLE": ("The embedding service is unavailable.", True),
    "GIT_COMMIT_FAILED": ("Memory was changed, but the git commit of the change failed.", False),
    "INVALID_ARGUMENT": ("The request itself is malformed (a bad option, path or field).", False),
    "INVALID_TOPIC_FORMAT": ("A topic file breaks the topic grammar (uncited prose, a dropped block id, a bad citation).", False),
    "MISSING_SOURCE": ("A citation names a source that is not in the archive.", False),
    "PATCH_CONFLICT": ("The patch does not match the current file contents.", False),
    "PATH_OUTSIDE_WORKSPACE": ("A path escapes the memory workspace.", False),
    "READ_ONLY_PATH": ("Only topics/**/*.md can be written.", False),
    "TRANSACTION_FAILURE_UNKNOWN": ("The transaction failed in a way outside the known codes.", False),
    "WRITER_FAILURE_UNKNOWN": ("The writer failed in a way outside the known codes.", False),
    "GIT_UNAVAILABLE": ("git is not available for the memory repository.", False),
    "MEMORY_NOT_FOUND": ("The workspace, topic or record does not exist.", False),
    CORRUPT_FILE: ("A state file is not valid (bad JSON or bad encoding).", False),
    TRUNCATED_ARCHIVE: ("A source archive ends in the middle of a frame.", False),
    STATE_NOT_FOUND: ("The state directory does not exist.", False),
    NO_SPACE: ("The disk (or quota) is full: a file could not be written. Free space and run it again.", False),
    READ_ONLY: ("The file system is mounted read-only: nothing can be written there.", False),
    NAME_TOO_LONG: ("A file name is longer than the file system allows.", False),
    PERMISSION_DENIED: ("The operating system refused access to a file or folder (permissions).", False),
    IO_ERROR: ("The disk reported an input/output error.", False),
    TOO_MANY_OPEN_FILES: ("The process ran out of file descriptors.", True),
    OS_ERROR: ("The operating system refused a file operation.", False),
}

# Outcomes of a job that are not failures.
SUCCESS_OUTCOMES: dict[str, str] = {
    "success": "The job finished and changed memory.",
    "none": "The job finished; there was nothing to do.",
    "ok": "The job finished.",
    "empty": "There are no topics to work on.",
    "disabled": "Memory is disabled in config.json (memory.backend: none).",
    "incomplete": "The job ran, but some candidates remain.",
}

KNOWN_CODES = (frozenset(WRITE_FAILURE_CODES) | frozenset(TRANSACTION_CODES) | frozenset(OS_ERROR_CODES)
               | {CORRUPT_FILE, TRUNCATED_ARCHIVE, STATE_NOT_FOUND})


@dataclass(frozen=True)
class Outcome:
    code: str
    meaning: str
    retryable: bool
    known: bool  # False: a code outside the closed set (shown as is, never retried)

    @property
    def failed(self) -> bool:
        return self.code not in SUCCESS_OUTCOMES

    def to_json(self) -> dict[str, object]:
        return {"code": self.code, "meaning": self.meaning, "retryable": self.retryable, "known": self.known}


def describe_outcome(code: str | None, retryable: bool | None = None) -> Outcome:
    """The plain-language meaning of ``code``; ``retryable`` (the engine's own verdict) wins."""
    if code is None:
        code = "none"
    if code in SUCCESS_OUTCOMES:
        return Outcome(code, SUCCESS_OUTCOMES[code], False, True)
    entry = OUTCOMES.get(code)
    if entry is None:
        return Outcome(code, f"Unrecognised outcome code {code}.", False, False)
    meaning, default = entry
    return Outcome(code, meaning, default if retryable is None else bool(retryable), True)


def default_retryable(code: str) -> bool:
    return describe_outcome(code).retryable

