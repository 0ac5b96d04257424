"""Writer bookkeeping files (memory spec §7.7, §7.9), written the way OpenProgram writes them.

* ``writer-status.json``: ``{"version": 1, "last_outcome", "last_success_at", "last_failure"}``,
  indent 2 + LF, atomic (temp + fsync + rename), 0600, under an exclusive flock on
  ``writer-status.json.lock``. Times are UTC ISO with microseconds.
* ``agent-history.jsonl``: one compact-ish ``json.dumps`` line (default separators,
  non-ASCII kept) per writer/organizer run.
* ``runtime.json`` counters: ``local_batches``, ``local_tokens``,
  ``write_commits_since_global``, ``last_global_at`` and the organize triggers
  (5 batches / 40 000 tokens local, 1 day global). Every key we do not own (``cursors``
  included, pitfall 1) is kept.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from memory_tui.core import fsutil
from memory_tui.core.store import workspace as ws
from memory_tui.core.store.confine import refuse_linked_path
from memory_tui.core.format.config import GLOBAL_ORGANIZE_SECONDS, LOCAL_ORGANIZE_BATCHES, LOCAL_ORGANIZE_TOKENS
from memory_tui.core.format.errors import WRITE_FAILURE_CODES

STATUS_VERSION = 1
RUNTIME_KEYS = ("creation_order", "write_commits_since_global", "local_batches", "local_tokens", "last_global_at")


def iso_utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


def parse_iso(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def _confined(path: Path) -> None:
    """These files live in ``<M>/<rt>/``: neither the runtime dir nor the file may be a link
    (the same rule the lock applies; checked here too, since a failure is recorded when the
    lock was refused)."""
    refuse_linked_path(path.parent.parent, f"{path.parent.name}/{path.name}")


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """The shared durable replace, creating the runtime dir (0700) on first use."""
    _confined(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fsutil.atomic_write(path, data, mode=mode)


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    _confined(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# --------------------------------------------------------------------------- writer-status


@dataclass(frozen=True)
class WriterStatus:
    last_outcome: str | None = None
    last_success_at: str | None = None
    last_failure: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STATUS_VERSION,
            "last_outcome": self.last_outcome,
            "last_success_at": self.last_success_at,
            "last_failure": self.last_failure,
        }


def read_writer_status(runtime_dir: Path) -> WriterStatus:
    """Current status via the workspace reader; anything unreadable reads as all-null."""
    try:
        data = json.loads((runtime_dir / "writer-status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return WriterStatus()
    parsed = ws.parse_writer_status(data)
    failure = parsed.last_failure.to_json() if parsed.last_failure else None
    return WriterStatus(parsed.last_outcome, parsed.last_success_at, failure)


def _write_status(runtime_dir: Path, status: WriterStatus) -> None:
    text = json.dumps(status.to_json(), indent=2, ensure_ascii=False) + "\n"
    atomic_write(runtime_dir / "writer-status.json", text.encode("utf-8"))


def record_success(runtime_dir: Path, now: float) -> WriterStatus:
    with _flock(runtime_dir / "writer-status.json.lock"):
        old = read_writer_status(runtime_dir)
        new = WriterStatus("success", iso_utc(now), old.last_failure)
        _write_status(runtime_dir, new)
        return new


def record_failure(runtime_dir: Path, now: float, reason_code: str, retryable: bool) -> WriterStatus:
    code = reason_code if reason_code in WRITE_FAILURE_CODES else "WRITER_FAILURE_UNKNOWN"
    with _flock(runtime_dir / "writer-status.json.lock"):
        old = read_writer_status(runtime_dir)
        new = WriterStatus(
            "failure",
            old.last_success_at,
            {"at": iso_utc(now), "reason_code": code, "retryable": bool(retryable)},
        )
        _write_status(runtime_dir, new)
        return new


# --------------------------------------------------------------------------- agent-history


def history_entry(
    stage: str,
    system_prompt: str,
    prompt: str,
    *,
    reply: str | None = None,
    error: str | None = None,
    turns: list[Any] | None = None,
    rounds: int = 1,
    input_tokens: int = 0,
    output_tokens: int = 0,
    stop_reason: str = "end_turn",
) -> dict[str, Any]:
    if error is not None:
        return {"stage": stage, "system_prompt": system_prompt, "prompt": prompt, "error": error, "turns": turns or []}
    return {
        "stage": stage,
        "system_prompt": system_prompt,
        "prompt": prompt,
        "turns": turns or [],
        "reply": reply or "",
        "rounds": rounds,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "stop_reason": stop_reason,
    }


def commit_audit_ok(count: int, topic_paths: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """The agent-commit audit entry of an accepted commit (§5.5): ``count`` new block ids."""
    return {"tool": "commit", "status": "ok", "count": int(count), "topic_paths": list(topic_paths)}


def commit_audit_error(exc: BaseException) -> dict[str, Any]:
    """The agent-commit audit entry of a refused or failed commit (§5.5)."""
    return {"tool": "commit", "status": "error", "output": f"{type(exc).__name__}: {exc}"}


def append_history(runtime_dir: Path, entries: list[dict[str, Any]]) -> None:
    if not entries:
        return
    path = runtime_dir / "agent-history.jsonl"
    _confined(path)
    runtime_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- runtime.json


def load_runtime(path: Path) -> dict[str, Any]:
    """runtime.json as an ordered dict (workspace reader); unreadable → defaults, unknown keys kept."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        data = {}
    state, _problems = ws.parse_runtime_state(data if isinstance(data, dict) else {})
    return state.to_json()


def dump_runtime(data: dict[str, Any]) -> bytes:
    state, _problems = ws.parse_runtime_state(data)
    return ws.dump_runtime_json(state).encode("utf-8")


def save_runtime(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, dump_runtime(data))


@dataclass(frozen=True)
class OrganizeDecision:
    local: bool
    global_: bool

    @property
    def any(self) -> bool:
        return self.local or self.global_

    @property
    def reason(self) -> str | None:
        if self.local:
            return "local"
        if self.global_:
            return "global"
        return None


def bump_counters(data: dict[str, Any], tokens: int, now: float) -> tuple[dict[str, Any], OrganizeDecision]:
    """Counters after one written batch of trusted records (§7.4 step 8)."""
    out = dict(data)
    out["local_batches"] = int(out.get("local_batches") or 0) + 1
    out["local_tokens"] = int(out.get("local_tokens") or 0) + int(tokens)
    out["write_commits_since_global"] = int(out.get("write_commits_since_global") or 0) + 1
    local = out["local_batches"] >= LOCAL_ORGANIZE_BATCHES or out["local_tokens"] >= LOCAL_ORGANIZE_TOKENS
    if local:
        out["local_batches"] = 0
        out["local_tokens"] = 0
    last = parse_iso(out.get("last_global_at"))
    global_ = out["write_commits_since_global"] > 0 and (last is None or now - last >= GLOBAL_ORGANIZE_SECONDS)
    if global_:
        out["last_global_at"] = iso_utc(now)
        out["write_commits_since_global"] = 0
    return out, OrganizeDecision(local, global_)
