"""memory-tui's own settings file ``~/.config/memory-tui/config.toml``: the one loader.

The app and the CLI both read the file here (``load_config``): ``theme``, ``[keymap]``
(binding id = key(s)) and ``[writer]``. A bad value is a ``Problem`` naming the file, key
and line; the value falls back to its default and the problem is shown (app banner and
Problems screen, ``memory-tui status``), never silently. Jobs in the CLI are stricter:
``load_settings`` raises on a bad ``[writer]`` because running the wrong writer is worse
than not running.

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

import json
import os
import re
import shlex
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from memory_tui.core.format.errors import MemoryError, Problem

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


def _argv(value: Any, key: str, where: str | None = None, text: str = "") -> tuple[str, ...]:
    line = _key_line(text, "writer", key)
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise MemoryError("INVALID_ARGUMENT", f"[writer] {key}: {exc}", path=where, line=line,
                              details={"key": f"writer.{key}"}) from None
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise MemoryError("INVALID_ARGUMENT", f"[writer] {key} must be a string or a list of strings", path=where,
                      line=line, details={"key": f"writer.{key}"})


# A TOML key: simple keys (bare, "basic" or 'literal') joined by dots, spaces allowed around them.
_SIMPLE_KEY = r"""(?:"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[A-Za-z0-9_-]+)"""
_DOTTED_KEY = rf"{_SIMPLE_KEY}(?:[ \t]*\.[ \t]*{_SIMPLE_KEY})*"
_HEADER_RE = re.compile(rf"^[ \t]*\[\[?[ \t]*({_DOTTED_KEY})[ \t]*\]")
_ASSIGN_RE = re.compile(rf"^[ \t]*({_DOTTED_KEY})[ \t]*=")
_PART_RE = re.compile(_SIMPLE_KEY)


def _key_parts(dotted: str) -> tuple[str, ...]:
    parts = []
    for raw in _PART_RE.findall(dotted):
        if raw.startswith('"'):
            try:
                raw = json.loads(raw)  # TOML's basic-string escapes are JSON's, but for \U and \e
            except ValueError:
                raw = raw[1:-1]
        elif raw.startswith("'"):
            raw = raw[1:-1]
        parts.append(raw)
    return tuple(parts)


def _still_open(line: str, quote: str | None) -> str | None:
    """The multi-line string delimiter still open at the end of ``line`` (None: none is).

    ``quote`` is the one open at its start. Single-line strings and comments are skipped
    so a ``#`` or a quote inside them opens nothing.
    """
    i, end = 0, len(line)
    while i < end:
        if quote is not None:
            close = line.find(quote, i)
            while quote == '"""' and close > 0 and _escaped(line, close):
                close = line.find(quote, close + 1)
            if close < 0:
                return quote
            i, quote = close + 3, None
            continue
        c = line[i]
        if c == "#":
            return None
        if line.startswith('"""', i) or line.startswith("'''", i):
            quote, i = line[i:i + 3], i + 3
        elif c == '"':
            i += 1
            while i < end and line[i] != '"':
                i += 2 if line[i] == "\\" else 1
            i += 1
        elif c == "'":
            close = line.find("'", i + 1)
            i = end if close < 0 else close + 1
        else:
            i += 1
    return quote


def _escaped(line: str, at: int) -> bool:
    """Whether ``line[at]`` follows an odd run of backslashes (a basic string's escape)."""
    run = 0
    while at - run - 1 >= 0 and line[at - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _key_line(text: str, table: str | None, key: str) -> int | None:
    """The 1-based line where ``key`` is set inside ``[table]`` (None: top level).

    tomllib reports no positions for values it parsed fine, so the line of a bad value is
    found by scanning the text. Every header (``[a.b]``, ``[[a]]``) and ``k = `` line is read
    as a full key path, dotted keys (``a.b = 1``, ``"a.b" = 1``) included, so the hit is the
    first line that sets ``table.key`` or something inside it (``[keymap.app]`` or
    ``app.filter = ...`` under ``[keymap]`` both set ``keymap.app``). Without a hit, the first
    line that sets anything in the table (its header) is the fallback, then None. Lines
    inside a multi-line string (a prompt text, say) are content, never keys.
    """
    if not text:
        return None
    table_path = () if table is None else (table,)
    want = table_path + (key,)
    current: tuple[str, ...] = ()
    fallback: int | None = None
    open_quote: str | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if open_quote is not None:
            open_quote = _still_open(line, open_quote)
            continue
        open_quote = _still_open(line, None)
        header = _HEADER_RE.match(line)
        if header:
            current = _key_parts(header.group(1))
            path = current
        else:
            assign = _ASSIGN_RE.match(line)
            if not assign:
                continue
            path = current + _key_parts(assign.group(1))
        if path[: len(want)] == want:
            return n
        if fallback is None and table_path and path[: len(table_path)] == table_path:
            fallback = n
    return fallback


def _check(s: WriterSettings, where: str | None, text: str = "") -> None:
    def bad(key: str, msg: str) -> MemoryError:
        return MemoryError("INVALID_ARGUMENT", f"[writer] {key} {msg}", path=where,
                           line=_key_line(text, "writer", key), details={"key": f"writer.{key}"})

    if s.name not in WRITER_NAMES:
        raise bad("name", f"must be one of {', '.join(WRITER_NAMES)}, not {s.name!r}")
    if s.topic:
        t = s.topic
        if not (t.startswith("topics/") and t.endswith(".md")) or ".." in t.split("/"):
            raise bad("topic", "must be a path like topics/inbox.md")
    if not (isinstance(s.timeout, (int, float)) and not isinstance(s.timeout, bool) and s.timeout > 0):
        raise bad("timeout", "must be a positive number of seconds")
    if not (isinstance(s.max_tokens, int) and s.max_tokens > 0):
        raise bad("max_tokens", "must be a positive integer")
    if not (isinstance(s.backfill_budget, int) and s.backfill_budget > 0):
        raise bad("backfill_budget", "must be a positive integer")


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


def parse_settings(data: Mapping[str, Any], *, source: str | None = None, text: str = "") -> WriterSettings:
    """The ``[writer]`` table of ``data``; ``text`` (the file's text) lets errors name a line."""
    section = data.get("writer", {})
    if not isinstance(section, Mapping):
        raise MemoryError("INVALID_ARGUMENT", "[writer] must be a table", path=source,
                          line=_key_line(text, None, "writer"), details={"key": "writer"})
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key == "command":
            values["command"] = _argv(value, key, source, text)
            continue
        kind = _KEYS.get(key)
        line = _key_line(text, "writer", key)
        if kind is None:
            raise MemoryError("INVALID_ARGUMENT", f"[writer] unknown key {key!r}", path=source, line=line,
                              details={"key": f"writer.{key}"})
        if isinstance(value, bool) or not isinstance(value, kind):
            raise MemoryError("INVALID_ARGUMENT", f"[writer] {key} has the wrong type", path=source, line=line,
                              details={"key": f"writer.{key}"})
        values[key] = value
    out = WriterSettings(source=source, **values)
    _check(out, source, text)
    return out


def _read_file(path: Path) -> tuple[dict[str, Any], str, Path] | None:
    """(table, text, file read) of the settings file; None when there is none.

    A ``config.json`` next to a missing ``config.toml`` is read instead (same keys), for
    owners who keep their settings as JSON. Raises MemoryError naming the file and line
    when the file cannot be read or parsed.
    """
    candidates = [path]
    if path.suffix == ".toml":
        candidates.append(path.with_suffix(".json"))
    for candidate in candidates:
        try:
            raw = candidate.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise MemoryError("INVALID_ARGUMENT", f"cannot read {candidate}: {exc.strerror}", path=str(candidate)) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            raise MemoryError("INVALID_ARGUMENT", "config is not UTF-8", path=str(candidate), line=line) from None
        if candidate.suffix == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise MemoryError("INVALID_ARGUMENT", f"invalid JSON: {exc.msg}", path=str(candidate),
                                  line=exc.lineno, column=exc.colno) from None
            except RecursionError:
                raise MemoryError("INVALID_ARGUMENT", "invalid JSON: nested too deeply", path=str(candidate), line=1) from None
            if not isinstance(data, dict):
                raise MemoryError("INVALID_ARGUMENT", "expected a JSON object", path=str(candidate), line=1)
            return data, "", candidate
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            line = getattr(exc, "lineno", None)
            col = getattr(exc, "colno", None)
            m = re.search(r"at line (\d+), column (\d+)", str(exc))
            if line is None and m:
                line, col = int(m.group(1)), int(m.group(2))
            raise MemoryError("INVALID_ARGUMENT", f"invalid TOML: {exc}", path=str(candidate), line=line, column=col) from None
        return data, text, candidate
    return None


def load_settings(path: Path | None = None, *, env: Mapping[str, str] | None = None) -> WriterSettings:
    """The ``[writer]`` settings for a CLI job; a bad file raises (file, key, line)."""
    path = path or config_path(env)
    read = _read_file(path)
    if read is None:
        return WriterSettings()
    data, text, actual = read
    return parse_settings(data, source=str(actual), text=text)


SETTINGS_CODE = "INVALID_SETTINGS"


@dataclass(frozen=True)
class Settings:
    """The whole settings file as the app uses it; ``problems`` say what fell back to a default."""

    keymap: dict[str, str] = field(default_factory=dict)
    theme: str | None = None
    writer: WriterSettings = field(default_factory=WriterSettings)
    path: Path | None = None
    problems: tuple[Problem, ...] = ()

    @property
    def problem(self) -> str | None:
        """All problems as one line (the banner), or None."""
        if not self.problems:
            return None
        return "; ".join(str(p) for p in self.problems)


def load_config(
    path: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    binding_ids: frozenset[str] | set[str] | None = None,
) -> Settings:
    """Read the settings file, never raising for its content.

    ``binding_ids`` are the ids a ``[keymap]`` entry may name (the app passes its command
    registry; the engine does not know the app's bindings). None skips that check.
    """
    path = path or config_path(env)

    def problem(message: str, key: str | None, line: int | None, column: int | None = None) -> Problem:
        return Problem(SETTINGS_CODE, message, where, line, column, {"key": key} if key else {})

    try:
        read = _read_file(path)
    except MemoryError as exc:
        where = exc.path or str(path)
        return Settings(path=Path(where), problems=(problem(exc.message, None, exc.line, exc.column),))
    if read is None:
        return Settings(path=path)
    data, text, path = read
    where = str(path)
    problems: list[Problem] = []

    theme_raw = data.get("theme")
    theme = theme_raw if isinstance(theme_raw, str) and theme_raw.strip() else None
    if theme_raw is not None and theme is None:
        problems.append(problem("theme must be a theme name (a string); using the default theme", "theme",
                                _key_line(text, None, "theme")))

    keymap: dict[str, str] = {}
    keymap_raw = data.get("keymap", {})
    if not isinstance(keymap_raw, dict):
        problems.append(problem("[keymap] must be a table of binding id = key(s); using the default keys", "keymap",
                                _key_line(text, None, "keymap")))
        keymap_raw = {}
    for key, value in keymap_raw.items():
        line = _key_line(text, "keymap", key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = ",".join(value)
        if isinstance(value, dict):
            problems.append(problem(f"[keymap] {key}...: a binding id with dots must be quoted, e.g. \"{key}.x\" = \"f4\"",
                                    f"keymap.{key}", line))
            continue
        if not isinstance(value, str) or not value.strip():
            problems.append(problem(f"[keymap] {key!r} must be a key or a list of keys; keeping its default key",
                                    f"keymap.{key}", line))
            continue
        if binding_ids is not None and key not in binding_ids:
            problems.append(problem(f"[keymap] unknown binding id {key!r} (press ? for the ids)", f"keymap.{key}", line))
            continue
        keymap[key] = value.strip()

    writer = WriterSettings(source=where)
    try:
        writer = parse_settings(data, source=where, text=text)
    except MemoryError as exc:
        key = exc.details.get("key") if isinstance(exc.details, dict) else None
        problems.append(problem(f"{exc.message}; using the default writer settings", key, exc.line))

    return Settings(keymap=keymap, theme=theme, writer=writer, path=path, problems=tuple(problems))
