"""OpenProgram's ``config.json`` ``memory.*`` keys (memory spec §8.5): invalid means default."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import Problem

TRIGGER_CHOICES = (8000, 16000, 32000)
CORE_BUDGET_TOKENS = 2000
WRITER_MAX_TURNS = 20
IDLE_MINUTES = 30
POLL_SECONDS = 300
LOCAL_ORGANIZE_BATCHES = 5
LOCAL_ORGANIZE_TOKENS = 40_000
GLOBAL_ORGANIZE_SECONDS = 86_400
IDLE_ALLOWANCE_SECONDS = 3600


@dataclass(frozen=True)
class MemoryConfig:
    backend: str = "local"
    writer_enabled: bool = True
    writer_model: str = ""
    trigger_tokens: int = 16000
    retrieval_method: str = "bm25"
    retrieval_top_k: int = 5
    retrieval_include_sources: bool = True
    core_inject: bool = True
    recent_limit: int = 50
    core_budget_tokens: int = CORE_BUDGET_TOKENS
    problems: tuple[Problem, ...] = field(default=(), compare=False)

    @property
    def enabled(self) -> bool:
        return self.backend != "none"

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "enabled": self.enabled,
            "writer_enabled": self.writer_enabled,
            "writer_model": self.writer_model,
            "trigger_tokens": self.trigger_tokens,
            "retrieval_method": self.retrieval_method,
            "retrieval_top_k": self.retrieval_top_k,
            "retrieval_include_sources": self.retrieval_include_sources,
            "core_inject": self.core_inject,
            "recent_limit": self.recent_limit,
            "core_budget_tokens": self.core_budget_tokens,
        }


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _bool(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _int_in(value: Any, lo: int, hi: int, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value if lo <= value <= hi else default


def parse_memory_config(data: Any, problems: tuple[Problem, ...] = ()) -> MemoryConfig:
    backend = _get(data, "memory", "backend")
    trigger = _get(data, "memory", "writer", "trigger_tokens")
    if isinstance(trigger, str) and trigger.strip().isdigit():
        trigger = int(trigger.strip())
    if isinstance(trigger, bool) or trigger not in TRIGGER_CHOICES:
        trigger = 16000
    model = _get(data, "memory", "writer", "model")
    method = _get(data, "memory", "retrieval", "method")
    return MemoryConfig(
        backend=backend if isinstance(backend, str) and backend else "local",
        writer_enabled=_bool(_get(data, "memory", "writer", "enabled"), True),
        writer_model=model if isinstance(model, str) else "",
        trigger_tokens=int(trigger),
        retrieval_method=method if method in ("agent", "bm25", "embedding", "hybrid") else "bm25",
        retrieval_top_k=_int_in(_get(data, "memory", "retrieval", "top_k"), 1, 10, 5),
        retrieval_include_sources=_bool(_get(data, "memory", "retrieval", "include_sources"), True),
        core_inject=_bool(_get(data, "memory", "core", "inject"), True),
        recent_limit=_int_in(_get(data, "memory", "recent", "limit"), 1, 500, 50),
        problems=problems,
    )


def load_memory_config(state_dir: Path) -> MemoryConfig:
    path = state_dir / "config.json"
    try:
        data_bytes = path.read_bytes()
    except FileNotFoundError:
        return MemoryConfig()
    except OSError as exc:
        return MemoryConfig(problems=(Problem("CORRUPT_FILE", f"cannot read config: {exc.strerror or exc}", "config.json"),))
    # OpenProgram falls back to defaults for an unreadable config; we do too, but say so.
    try:
        raw = data_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data_bytes[: exc.start].count(b"\n") + 1
        column = exc.start - (data_bytes.rfind(b"\n", 0, exc.start) + 1) + 1
        return MemoryConfig(problems=(Problem("CORRUPT_FILE", "not valid UTF-8; using defaults", "config.json", line, column),))
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        return MemoryConfig(
            problems=(Problem("CORRUPT_FILE", f"invalid JSON: {exc.msg}", "config.json", exc.lineno, exc.colno),)
        )
    except RecursionError:
        return MemoryConfig(problems=(Problem("CORRUPT_FILE", "invalid JSON: nested too deeply", "config.json", 1),))
    return parse_memory_config(data)
