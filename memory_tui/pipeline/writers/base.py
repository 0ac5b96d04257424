"""One interface for every writer.

A writer receives a ``WriteTask`` (the batch: turns with their source ids, speakers,
text and dates) and a ``TxPort`` (the only door to the workspace: a restricted stage
plus ``commit_edits``, or the structured ``update``). It returns a ``WriterOutcome``
naming the topic files that an accepted commit changed. A writer never marks turns,
never archives and never touches ``sources/``: the pipeline does that around it.

Rejections: ``run_with_repair`` gives a writer exactly one repair attempt carrying the
rejection text; a second rejection raises ``COMMIT_REJECTED`` (memory spec §5.5).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from memory_tui.core.format.errors import MemoryError


@dataclass(frozen=True)
class Turn:
    """One record handed to a writer."""

    source_id: str  # provider/thread/message
    role: str  # user | assistant | system | tool
    speaker: str  # speaker label as archived ("Owner (owner/local)", "agent/main (...)", "user")
    text: str
    timestamp: str = ""  # ISO 8601 as archived, "" when unknown
    speaker_kind: str = "unknown"  # owner | runtime | human | unknown ...
    speaker_display: str = ""
    session_id: str = ""
    session_title: str = ""
    tokens: int = 0
    # > 0 when ``text`` is only the start of the turn: the whole turn's token count (the
    # rest is in the archive under ``source_id``; see ``pipeline.bounded``)
    clipped_from: int = 0

    @property
    def date(self) -> str:
        """``YYYY-MM-DD`` of the turn (its own local time), or ``undated``."""
        ts = self.timestamp
        if len(ts) >= 10 and ts[4] == "-" and ts[7] == "-" and ts[:4].isdigit() and ts[5:7].isdigit() and ts[8:10].isdigit():
            return ts[:10]
        return "undated"

    @property
    def is_owner_side(self) -> bool:
        return self.role == "user"


@dataclass(frozen=True)
class WriteTask:
    stage: str  # write | backfill | organize
    turns: tuple[Turn, ...]
    session_id: str = ""
    session_title: str = ""
    topic: str = ""  # configured topic path (topics/…md) or "" for the default rule

    @property
    def allowed_refs(self) -> tuple[str, ...]:
        return tuple(t.source_id for t in self.turns)

    @property
    def observed(self) -> str:
        """The ``## Observed <date>`` date: the newest turn's date, else ``undated``."""
        dates = [t.date for t in self.turns if t.date != "undated"]
        return max(dates) if dates else "undated"


@dataclass(frozen=True)
class CommitInfo:
    changed_topics: tuple[str, ...]  # "topics/…" paths an accepted commit changed
    revision: str | None = None
    block_ids: dict[str, str] = field(default_factory=dict)


@dataclass
class WriterOutcome:
    changed_topics: tuple[str, ...] = ()
    revision: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""
    records: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.changed_topics)


class StageHandle(Protocol):
    @property
    def path(self) -> Path: ...  # stage root; topics live in path / "topics"


class TxPort(Protocol):
    """What a writer may do to the workspace (implemented by ``pipeline.txport``)."""

    def revision(self) -> str: ...

    def open_stage(self, allowed_refs: Sequence[str]) -> StageHandle: ...

    def commit_edits(self, stage: StageHandle) -> CommitInfo: ...

    def discard(self, stage: StageHandle) -> None: ...

    def update(self, base_revision: str, memory_changes: list[dict[str, Any]]) -> CommitInfo: ...

    def topic_texts(self) -> dict[str, str]: ...  # committed "topics/…" → text


def take_commit_audit(tx: Any) -> list[dict[str, Any]]:
    """The port's commit audit entries since the last call (§5.5), for the ``turns`` of the
    run's agent-history entry; ``[]`` for a port that keeps none (test fakes)."""
    take = getattr(tx, "take_audit", None)
    return list(take()) if callable(take) else []


class WriterFailure(MemoryError):
    """A writer-side failure with a persisted reason code and a retry verdict."""

    def __init__(self, code: str, message: str, *, retryable: bool = False, details: dict[str, Any] | None = None):
        d = dict(details or {})
        d["retryable"] = bool(retryable)
        super().__init__(code, message, details=d)

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return bool(self.details.get("retryable"))


class Rejected(Exception):
    """An attempt's edits were refused; carries the text given to the repair attempt."""

    def __init__(self, message: str, code: str = "INVALID_TOPIC_FORMAT"):
        super().__init__(message)
        self.message = message
        self.code = code


def is_rejection(exc: MemoryError) -> bool:
    """Transaction refusals that a repair attempt can address (not lock/git trouble)."""
    return exc.code not in ("CONCURRENT_UPDATE", "GIT_UNAVAILABLE", "GIT_COMMIT_FAILED", "EMBEDDING_UNAVAILABLE") and not isinstance(
        exc, WriterFailure
    )


def run_with_repair(attempt: Callable[[str | None], WriterOutcome]) -> WriterOutcome:
    """Run ``attempt(None)``; on a rejection run ``attempt(rejection_text)`` once more."""
    try:
        return attempt(None)
    except Rejected as first:
        text = first.message
    except MemoryError as first:
        if not is_rejection(first):
            raise
        text = f"{first.code}: {first.message}" + (f" ({first.path})" if first.path else "")
    try:
        return attempt(text)
    except Rejected as second:
        raise MemoryError("COMMIT_REJECTED", f"repair edits were rejected too: {second.message}") from None
    except MemoryError as second:
        if not is_rejection(second):
            raise
        raise MemoryError("COMMIT_REJECTED", f"repair edits were rejected too: {second.code}: {second.message}") from None


class Writer(Protocol):
    name: str

    def write(self, task: WriteTask, tx: TxPort) -> WriterOutcome: ...


@dataclass(frozen=True)
class FoldCandidate:
    """Two records the organizer found worded alike but not equal after normalisation: only
    a writer that reads them can say whether they make the same claim."""

    number: int  # 1-based, as the writer is asked and answers
    memory_ids: tuple[str, str]  # (kept: the older, folded: the newer)
    texts: tuple[str, str]
    topics: tuple[str, str]  # "topics/…" of each


class FoldJudge(Protocol):
    """A writer that can confirm fold candidates (``confirm_folds``). Only the candidates it
    names are folded; anything it does not name, or an answer that cannot be read, folds
    nothing."""

    def confirm_folds(self, candidates: Sequence[FoldCandidate], memory_root: Path) -> "FoldVerdict": ...


@dataclass
class FoldVerdict:
    confirmed: frozenset[tuple[str, str]]  # the candidates' memory_ids the writer says are one claim
    history: list[dict[str, Any]] = field(default_factory=list)


FOLD_INSTRUCTIONS = (
    "Each numbered pair below holds two memory records that are worded alike. Decide for each "
    "pair whether both records state exactly the same fact, so that one can be deleted and its "
    "sources moved onto the other without losing anything. Records that differ in any detail "
    "(a number, a name, a date, a negation) are not the same fact. Change no file. Answer with "
    'one JSON object on its own line: {"same": [the numbers of the pairs that state the same '
    'fact]}; a pair you leave out is kept as two records.'
)


def fold_prompt(candidates: Sequence[FoldCandidate]) -> str:
    lines = [FOLD_INSTRUCTIONS, ""]
    for c in candidates:
        lines.append(json.dumps({"pair": c.number, "records": [
            {"id": c.memory_ids[0], "topic": c.topics[0], "text": c.texts[0]},
            {"id": c.memory_ids[1], "topic": c.topics[1], "text": c.texts[1]},
        ]}, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return "\n".join(lines) + "\n"


def parse_fold_answer(reply: str, candidates: Sequence[FoldCandidate]) -> frozenset[tuple[str, str]]:
    """The pairs a writer's reply confirms: the last line that is a JSON object with a
    ``same`` list; numbers that name no candidate are ignored, and no such line confirms
    nothing (an unreadable answer never merges)."""
    by_number = {c.number: c.memory_ids for c in candidates}
    for line in reversed(reply.splitlines()):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        same = obj.get("same") if isinstance(obj, dict) else None
        if not isinstance(same, list):
            continue
        return frozenset(by_number[n] for n in same if type(n) is int and n in by_number)
    return frozenset()


def confirm_folds(writer: Any, candidates: Sequence[FoldCandidate], memory_root: Path) -> FoldVerdict:
    """Ask ``writer`` about ``candidates`` when it can judge them; a writer without
    ``confirm_folds`` (the extractive one reads no meaning) confirms none."""
    judge = getattr(writer, "confirm_folds", None)
    if not candidates or not callable(judge):
        return FoldVerdict(frozenset())
    return judge(candidates, memory_root)


REPAIR_PREFIX = "The previous attempt's edits were refused by the workspace and thrown away. Reason:"


def describe_format() -> str:
    """Our own description of the topic format, shared by prompt-based writers."""
    return (
        "Memory lives in Markdown files under topics/ (for example topics/people/ada.md). "
        "Each file is organised by headings. Every piece of memory is one paragraph that ends "
        "with a footnote citation such as [^e1], and the file must also contain that footnote's "
        "definition on its own line, separated by a blank line:\n\n"
        "    Ada takes her tea without sugar.[^e1]\n\n"
        "    [^e1]: Time: `2026-11-30`; Sources: [tea habit](openprogram/session-id/node-id)\n\n"
        "Use local footnote names e1, e2, … (unique across all files you touch). The Time is "
        "YYYY, YYYY-MM or YYYY-MM-DD (or `undated`). Sources are links whose target is one of "
        "the source ids given to you, with a short label. Paragraphs without a citation, bullet "
        "lists and loose prose are refused. Do not invent or edit the trailing ^xxxxxxxx "
        "identifiers: the runtime assigns them. Only files under topics/ may be changed; "
        "everything else is derived or read-only."
    )
