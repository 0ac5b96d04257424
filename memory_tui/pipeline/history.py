"""The persisted job history: ``writer-status.json`` and ``agent-history.jsonl`` read as one list.

``writer-status.json`` (memory spec §7.9) holds the last outcome with UTC times, but only
the latest success and failure. ``agent-history.jsonl`` holds one line per writer/organizer
run (stage, reply or error, token counts, the commit audit in ``turns``) in the order the
runs happened, without times. Neither alone answers "what did the writers do lately", so
the reader returns both kinds as ``HistoryEntry`` values, newest first: the timed status
facts first (they are the latest by construction), then the runs, newest line first.

Bad lines are not skipped silently: each becomes a ``Problem`` naming the file and line.
The file may be large (each line carries the writer's prompt); only the last ``limit``
lines are kept in memory, read in one streaming pass.
"""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_tui.core.format.errors import CORRUPT_FILE, Problem
from memory_tui.core.format.outcomes import describe_outcome
from memory_tui.core.format.paths import Layout

HISTORY_FILE = "agent-history.jsonl"
DEFAULT_LIMIT = 200


@dataclass(frozen=True)
class HistoryEntry:
    origin: str  # "writer-status" | "agent-history"
    stage: str  # write | backfill | promote | organize (maybe "-repair"), or "last success" / "last failure"
    ok: bool
    summary: str  # the reply's first line, the error, or the outcome's meaning
    at: str | None = None  # UTC ISO time, when the file records one
    line: int | None = None  # 1-based line in agent-history.jsonl
    code: str | None = None  # failure reason code
    retryable: bool | None = None
    topic_paths: tuple[str, ...] = ()  # from the commit audit entries
    new_ids: int = 0  # block ids added by accepted commits (audit "count")
    input_tokens: int = 0
    output_tokens: int = 0
    rounds: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin, "stage": self.stage, "ok": self.ok, "summary": self.summary, "at": self.at,
            "line": self.line, "code": self.code, "retryable": self.retryable, "topic_paths": list(self.topic_paths),
            "new_ids": self.new_ids, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
            "rounds": self.rounds,
        }


@dataclass(frozen=True)
class JobHistory:
    entries: tuple[HistoryEntry, ...]  # newest first
    total_runs: int  # lines in agent-history.jsonl (entries may hold fewer: ``limit``)
    problems: tuple[Problem, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"entries": [e.to_json() for e in self.entries], "total_runs": self.total_runs,
                "problems": [p.to_json() for p in self.problems]}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _first_line(text: Any, width: int = 200) -> str:
    if not isinstance(text, str):
        return ""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:width]
    return ""


def run_entry(data: dict[str, Any], line: int) -> HistoryEntry:
    """One ``agent-history.jsonl`` object as an entry."""
    stage = data.get("stage") if isinstance(data.get("stage"), str) else "?"
    topics: list[str] = []
    count = 0
    audit_error = ""
    for turn in data.get("turns") or []:
        if not isinstance(turn, dict) or turn.get("tool") != "commit":
            continue
        if turn.get("status") == "ok":
            count += _int(turn.get("count"))
            topics.extend(p for p in turn.get("topic_paths") or [] if isinstance(p, str))
        elif turn.get("status") == "error":
            audit_error = _first_line(turn.get("output"))
    error = data.get("error")
    ok = error is None and not audit_error
    summary = _first_line(error) if error is not None else (audit_error or _first_line(data.get("reply")) or "(no reply)")
    return HistoryEntry(
        "agent-history", stage, ok, summary, line=line, topic_paths=tuple(dict.fromkeys(topics)), new_ids=count,
        input_tokens=_int(data.get("input_tokens")), output_tokens=_int(data.get("output_tokens")), rounds=_int(data.get("rounds")),
    )


def _status_entries(memory_root: Path, problems: list[Problem]) -> list[HistoryEntry]:
    from memory_tui.core.store.workspace import load_writer_status

    status, found = load_writer_status(memory_root)
    problems.extend(found)
    out: list[HistoryEntry] = []
    failure = status.last_failure
    if failure is not None:
        meaning = describe_outcome(failure.reason_code, failure.retryable)
        out.append(HistoryEntry("writer-status", "last failure", False, meaning.meaning, at=failure.at,
                                code=failure.reason_code, retryable=meaning.retryable))
    if status.last_success_at:
        out.append(HistoryEntry("writer-status", "last success", True, "the writer marked turns as written",
                                at=status.last_success_at))
    out.sort(key=lambda e: e.at or "", reverse=True)  # same zone (UTC ISO), so text order is time order
    return out


def read_job_history(memory_root: Path | str, *, limit: int = DEFAULT_LIMIT) -> JobHistory:
    runtime_dir = Layout(Path(memory_root)).runtime_dir
    problems: list[Problem] = []
    entries = _status_entries(Path(memory_root), problems)
    rel = f"{runtime_dir.name}/{HISTORY_FILE}"
    tail: collections.deque[tuple[int, bytes]] = collections.deque(maxlen=max(0, limit))
    total = 0
    try:
        with open(runtime_dir / HISTORY_FILE, "rb") as fh:
            for number, raw in enumerate(fh, 1):
                if raw.strip():
                    total += 1
                    tail.append((number, raw))
    except FileNotFoundError:
        pass
    except OSError as exc:
        problems.append(Problem(CORRUPT_FILE, f"cannot read: {exc}", rel))
    runs: list[HistoryEntry] = []
    for number, raw in tail:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            problems.append(Problem(CORRUPT_FILE, f"not a JSON line: {exc}", rel, number))
            continue
        if not isinstance(data, dict):
            problems.append(Problem(CORRUPT_FILE, "not a JSON object", rel, number))
            continue
        runs.append(run_entry(data, number))
    runs.reverse()
    return JobHistory(tuple(entries + runs), total, tuple(problems))
