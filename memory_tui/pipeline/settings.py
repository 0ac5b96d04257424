"""memory-tui's own writer settings: ``~/.config/memory-tui/config.toml``, section ``[writer]``.

OpenProgram's ``config.json`` says *when* to write (``memory.writer.trigger_tokens``);
this file says *who* writes. CLI flags override the file; the file overrides defaults.

Keys (all optional)::

    [writer]
    name = "extractive"          # extractive | command | openai
    topic = ""                   # extractive: put every record in this topic
                                 #   (e.g. "topics/inbox.md"); empty = one file per
                                 #   conversation under topics/conversations/<slug>.md
    command = ["my-agent", "--print"]   # command: argv (a string is shlex-split)
    timeout = 600                # command / openai: seconds per run
    base_url = "https://api.openai.com/v1"   # openai: chat-completions base URL
    model = "gpt-4o-mini"        # openai: model name
    api_key_env = "OPENAI_API_KEY"   # openai: env var holding the key (never the key itself)
    max_tokens = 4096            # openai: completion budget
    backfill_budget = 16000      # backfill: tokens per batch

The location is ``$XDG_CONFIG_HOME/memory-tui/config.toml`` (default ``~/.config``), or
``$MEMORY_TUI_CONFIG`` when set. A missing file means defaults; a malformed one is an
``INVALID_ARGUMENT`` error naming the file and line.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from memory_tui.core.errors import MemoryError

WRITER_NAMES = ("extractive", "command", "openai")
DEFAULT_BACKFILL_BUDGET = 16_000


@dataclass(frozen=True)
class WriterSettings:
    name: str = "extractive"
    topic: str = ""
    command: tuple[str, ...] = ()
    timeout: float = 600.0
    base_url: str = "https://api.openai.com/v1"
    model: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    max_tokens: int = 4096
    backfill_budget: int = DEFAULT_BACKFILL_BUDGET
    source: str | None = field(default=None, compare=False)  # file the values came from

    def with_overrides(self, **overrides: Any) -> "WriterSettings":
        clean = {k: v for k, v in overrides.items() if v is not None}
        if "command" in clean:
            clean["command"] = _argv(clean["command"], "command")
        out = replace(self, **clean)
        _check(out, self.source)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic": self.topic,
            "command": list(self.command),
            "timeout": self.timeout,
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "max_tokens": self.max_tokens,
            "backfill_budget": self.backfill_budget,
            "source": self.source,
        }


def config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    explicit = (env.get("MEMORY_TUI_CONFIG") or "").strip()
    if explicit:
        return Path(explicit).expanduser()
    base = (env.get("XDG_CONFIG_HOME") or "").strip()
    root = Path(base).expanduser() if base else Path(env.get("HOME") or Path.home()) / ".config"
    return root / "memory-tui" / "config.toml"


def _argv(value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise MemoryError("INVALID_ARGUMENT", f"[writer] {key}: {exc}") from None
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise MemoryError("INVALID_ARGUMENT", f"[writer] {key} must be a string or a list of strings")


def _check(s: WriterSettings, where: str | None) -> None:
    def bad(msg: str) -> MemoryError:
        return MemoryError("INVALID_ARGUMENT", f"[writer] {msg}", path=where)

    if s.name not in WRITER_NAMES:
        raise bad(f"name must be one of {', '.join(WRITER_NAMES)}, not {s.name!r}")
    if s.topic:
        t = s.topic
        if not (t.startswith("topics/") and t.endswith(".md")) or ".." in t.split("/"):
            raise bad("topic must be a path like topics/inbox.md")
    if not (isinstance(s.timeout, (int, float)) and not isinstance(s.timeout, bool) and s.timeout > 0):
        raise bad("timeout must be a positive number of seconds")
    if not (isinstance(s.max_tokens, int) and s.max_tokens > 0):
        raise bad("max_tokens must be a positive integer")
    if not (isinstance(s.backfill_budget, int) and s.backfill_budget > 0):
        raise bad("backfill_budget must be a positive integer")


_KEYS = {
    "name": str,
    "topic": str,
    "timeout": (int, float),
    "base_url": str,
    "model": str,
    "api_key_env": str,
    "max_tokens": int,
    "backfill_budget": int,
}


def parse_settings(data: Mapping[str, Any], *, source: str | None = None) -> WriterSettings:
    section = data.get("writer", {})
    if not isinstance(section, Mapping):
        raise MemoryError("INVALID_ARGUMENT", "[writer] must be a table", path=source)
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key == "command":
            values["command"] = _argv(value, key)
            continue
        kind = _KEYS.get(key)
        if kind is None:
            raise MemoryError("INVALID_ARGUMENT", f"[writer] unknown key {key!r}", path=source)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise MemoryError("INVALID_ARGUMENT", f"[writer] {key} has the wrong type", path=source)
        values[key] = value
    out = WriterSettings(source=source, **values)
    _check(out, source)
    return out


def load_settings(path: Path | None = None, *, env: Mapping[str, str] | None = None) -> WriterSettings:
    path = path or config_path(env)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return WriterSettings()
    except OSError as exc:
        raise MemoryError("INVALID_ARGUMENT", f"cannot read {path}: {exc.strerror}", path=str(path)) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise MemoryError("INVALID_ARGUMENT", "config is not UTF-8", path=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None)
        col = getattr(exc, "colno", None)
        m = re.search(r"at line (\d+), column (\d+)", str(exc))
        if line is None and m:
            line, col = int(m.group(1)), int(m.group(2))
        raise MemoryError("INVALID_ARGUMENT", f"invalid TOML: {exc}", path=str(path), line=line, column=col) from None
    return parse_settings(data, source=str(path))
