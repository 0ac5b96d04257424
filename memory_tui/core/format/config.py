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


def json_key_line(text: str, keys: tuple[str, ...]) -> int | None:
    """The 1-based line of the last key of ``keys`` in JSON ``text``, found by scanning.

    json gives no positions for values it parsed fine. Each key is searched after the
    previous one, which finds nested keys in ordinary files; None when a key is not there.
    """
    pos = 0
    for key in keys:
        hit = text.find(json.dumps(key), pos)
        if hit < 0:
            return None
        pos = hit + 1
    return text.count("\n", 0, pos) + 1


def parse_memory_config(data: Any, problems: tuple[Problem, ...] = (), *, text: str = "") -> MemoryConfig:
    """OpenProgram's reading of ``memory.*``: a value it treats as invalid means the default.

    We use the same default (the owner must see what OpenProgram does) and add a problem
    naming ``config.json``, the key and its line, so the fallback is never silent.
    """
    found: list[Problem] = list(problems)

    def invalid(keys: tuple[str, ...], value: Any, default: Any, allowed: str) -> None:
        dotted = ".".join(keys)
        found.append(Problem(
            "INVALID_CONFIG",
            f"{dotted} = {json.dumps(value)[:60]} is not {allowed}; OpenProgram uses the default {json.dumps(default)}",
            "config.json", json_key_line(text, keys), None, {"key": dotted, "value_default": default},
        ))

    def present(*keys: str) -> bool:
        obj = data
        for key in keys:
            if not isinstance(obj, dict) or key not in obj:
                return False
            obj = obj[key]
        return True

    backend = _get(data, "memory", "backend")
    if present("memory", "backend") and not (isinstance(backend, str) and backend):
        invalid(("memory", "backend"), backend, "local", "a backend name")
    trigger = _get(data, "memory", "writer", "trigger_tokens")
    trigger_raw = trigger
    if isinstance(trigger, str) and trigger.strip().isdigit():
        trigger = int(trigger.strip())
    if isinstance(trigger, bool) or trigger not in TRIGGER_CHOICES:
        if present("memory", "writer", "trigger_tokens"):
            invalid(("memory", "writer", "trigger_tokens"), trigger_raw, 16000,
                    "one of " + ", ".join(str(c) for c in TRIGGER_CHOICES))
        trigger = 16000
    model = _get(data, "memory", "writer", "model")
    if present("memory", "writer", "model") and not isinstance(model, str):
        invalid(("memory", "writer", "model"), model, "", "a model name (a string)")
    method = _get(data, "memory", "retrieval", "method")
    methods = ("agent", "bm25", "embedding", "hybrid")
    if present("memory", "retrieval", "method") and method not in methods:
        invalid(("memory", "retrieval", "method"), method, "bm25", "one of " + ", ".join(methods))

    def flag(*keys: str, default: bool) -> bool:
        value = _get(data, *keys)
        if present(*keys) and not isinstance(value, bool):
            invalid(keys, value, default, "true or false")
        return _bool(value, default)

    def bounded(*keys: str, lo: int, hi: int, default: int) -> int:
        value = _get(data, *keys)
        out = _int_in(value, lo, hi, default)
        if present(*keys) and (isinstance(value, bool) or out != value):
            invalid(keys, value, default, f"a whole number from {lo} to {hi}")
        return out

    return MemoryConfig(
        backend=backend if isinstance(backend, str) and backend else "local",
        writer_enabled=flag("memory", "writer", "enabled", default=True),
        writer_model=model if isinstance(model, str) else "",
        trigger_tokens=int(trigger),
        retrieval_method=method if method in methods else "bm25",
        retrieval_top_k=bounded("memory", "retrieval", "top_k", lo=1, hi=10, default=5),
        retrieval_include_sources=flag("memory", "retrieval", "include_sources", default=True),
        core_inject=flag("memory", "core", "inject", default=True),
        recent_limit=bounded("memory", "recent", "limit", lo=1, hi=500, default=50),
        problems=tuple(found),
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
    return parse_memory_config(data, text=raw)
