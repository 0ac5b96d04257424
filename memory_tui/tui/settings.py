"""User settings for the app: keymap overrides and theme.

Path: ``$MEMORY_TUI_CONFIG`` if set, else ``$XDG_CONFIG_HOME/memory-tui/config.toml``
(``~/.config/memory-tui/config.toml``); a ``config.json`` next to it is read when there is
no TOML file. Example::

    theme = "textual-dark"

    [keymap]            # binding id = key(s), comma separated
    "view.topics" = "f2"
    "app.quit" = "q,ctrl+q"

A broken file never stops the app: its problem is shown in the header instead.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from memory_tui.core.errors import MemoryError
from memory_tui.pipeline.settings import WriterSettings, config_path, parse_settings

from .commands import COMMANDS


@dataclass(frozen=True)
class Settings:
    keymap: dict[str, str] = field(default_factory=dict)
    theme: str | None = None
    writer: WriterSettings = field(default_factory=WriterSettings)
    path: Path | None = None
    problem: str | None = None


def settings_path(env: dict[str, str] | None = None) -> Path:
    """The one path rule, shared with the CLI's writer settings (``pipeline.settings``)."""
    return config_path(env)


def load_settings(path: Path | None = None) -> Settings:
    path = path or settings_path()
    candidates = [path]
    if path.suffix == ".toml":
        candidates.append(path.with_suffix(".json"))
    for candidate in candidates:
        try:
            raw = candidate.read_bytes()
        except OSError:
            continue
        try:
            data = json.loads(raw) if candidate.suffix == ".json" else tomllib.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            return Settings(path=candidate, problem=f"{candidate.name}: {exc}")
        if not isinstance(data, dict):
            return Settings(path=candidate, problem=f"{candidate.name}: expected a table")
        keymap_raw = data.get("keymap", {})
        keymap: dict[str, str] = {}
        if isinstance(keymap_raw, dict):
            for key, value in keymap_raw.items():
                if isinstance(value, list):
                    value = ",".join(str(v) for v in value)
                if isinstance(key, str) and isinstance(value, str) and value.strip():
                    keymap[key] = value.strip()
        theme = data.get("theme") if isinstance(data.get("theme"), str) else None
        problems: list[str] = []
        known = {cmd.id for cmd in COMMANDS}
        unknown = sorted(k for k in keymap if k not in known)
        if unknown:
            problems.append(f"{candidate}: [keymap] unknown binding id {unknown[0]!r} (see ? for the ids)")
            for k in unknown:
                keymap.pop(k)
        writer = WriterSettings()
        try:
            writer = parse_settings(data, source=str(candidate))
        except MemoryError as exc:
            problems.append(f"{candidate}: {exc.message}")
        return Settings(keymap=keymap, theme=theme, writer=writer, path=candidate, problem="; ".join(problems) or None)
    return Settings(path=path)
