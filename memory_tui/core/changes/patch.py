"""§6.3 legacy unified diff: ``parse_patch`` reads git's text, ``apply_patch`` applies it to the
staged topic texts all or nothing (no renames, copies, mode changes or binary patches)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..format.errors import MemoryError
from .request import (
    CORE_TOPIC,
    MAX_PATCH_BYTES,
    ChangeOutcome,
    argument_error,
    change_outcome,
    core_delete_error,
    guard_core,
    topic_rel,
)

_HUNK_RE = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    old_start: int
    header_line: int  # 1-based line in the patch
    body: list[tuple[str, str, int]]  # (kind " " | "-" | "+", text, patch line)


@dataclass
class PatchSection:
    old: str | None  # topic-relative; None = /dev/null
    new: str | None
    header_line: int
    hunks: list[Hunk]


_FORBIDDEN_HEADERS = (
    ("rename from", "rename"),
    ("rename to", "rename"),
    ("copy from", "copy"),
    ("copy to", "copy"),
    ("old mode", "mode change"),
    ("new mode", "mode change"),
    ("similarity index", "rename/copy"),
    ("dissimilarity index", "rename/copy"),
    ("Binary files", "binary"),
    ("GIT binary patch", "binary"),
)


def _unquote_git_path(raw: str) -> str:
    if len(raw) < 2 or not (raw.startswith('"') and raw.endswith('"')):
        return raw
    body = raw[1:-1]
    out = bytearray()
    i = 0
    simple = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b", "f": b"\f", "r": b"\r", "v": b"\v"}
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            if re.match(r"[0-7]{3}", body[i + 1 : i + 4]):
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
        out += ch.encode("utf-8")
        i += 1
    return out.decode("utf-8", errors="replace")


def _patch_path(raw: str, line: int) -> str | None:
    path = raw.split("\t", 1)[0].rstrip(" \r")
    path = _unquote_git_path(path)
    if path == "/dev/null":
        return None
    if path.startswith("a/") or path.startswith("b/"):
        path = path[2:]
    if not path:
        raise argument_error(f"patch line {line}: file header names no path", line=line)
    return topic_rel(path, line=line)


def parse_patch(patch: Any) -> list[PatchSection]:
    if not isinstance(patch, str) or not patch.strip():
        raise argument_error("empty patch", field="patch")
    if len(patch.encode("utf-8")) > MAX_PATCH_BYTES:
        raise argument_error(f"patch exceeds {MAX_PATCH_BYTES} bytes", field="patch")
    lines = patch.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    n = len(lines)
    sections: list[PatchSection] = []
    current: PatchSection | None = None

    def close() -> None:
        if current is not None and not current.hunks:
            raise argument_error(f"patch line {current.header_line}: file section has no hunks", line=current.header_line)

    def is_header(i: int) -> bool:
        return lines[i].startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ ")

    i = 0
    while i < n:
        line = lines[i]
        if is_header(i):
            close()
            current = PatchSection(_patch_path(line[4:], i + 1), _patch_path(lines[i + 1][4:], i + 2), i + 1, [])
            sections.append(current)
            i += 2
            continue
        if line.startswith("@@"):
            m = _HUNK_RE.match(line)
            if current is None:
                raise argument_error(f"patch line {i + 1}: hunk before any ---/+++ file header", line=i + 1)
            if not m:
                raise argument_error(f"patch line {i + 1}: malformed hunk header: {line[:80]}", line=i + 1)
            hunk = Hunk(int(m.group(1)), i + 1, [])
            i += 1
            while i < n:
                body = lines[i]
                if body.startswith("@@") or is_header(i):
                    break
                if body == "":
                    hunk.body.append((" ", "", i + 1))
                elif body[0] in " -+":
                    hunk.body.append((body[0], body[1:], i + 1))
                elif body[0] != "\\":
                    break
                i += 1
            current.hunks.append(hunk)
            continue
        for prefix, what in _FORBIDDEN_HEADERS:
            if line.startswith(prefix):
                raise argument_error(f"patch line {i + 1}: {what} patches are not supported", line=i + 1)
        if line.startswith("new file mode") or line.startswith("deleted file mode"):
            mode = line.rsplit(" ", 1)[-1].strip()
            if mode != "100644":
                raise argument_error(f"patch line {i + 1}: only regular files (mode 100644) can be patched, not mode {mode}", line=i + 1)
        elif line.startswith("--- ") or line.startswith("+++ "):
            raise argument_error(f"patch line {i + 1}: file header must be a --- line followed by a +++ line", line=i + 1)
        i += 1
    close()
    if not sections:
        raise argument_error("patch has no file sections (--- a/topics/<path> / +++ b/topics/<path>)", field="patch")
    return sections


def _apply_hunks(path: str, old_lines: list[str], hunks: list[Hunk]) -> list[str]:
    wpath = "topics/" + path
    out: list[str] = []
    pos = 0
    for hunk in hunks:
        old_len = sum(1 for kind, _, _ in hunk.body if kind != "+")
        start = hunk.old_start - 1 if old_len and hunk.old_start > 0 else hunk.old_start
        if start < pos:
            raise MemoryError(
                "PATCH_CONFLICT",
                f"overlapping hunks in {wpath} (patch line {hunk.header_line})",
                path=wpath,
                details={"line": hunk.old_start, "patch_line": hunk.header_line},
            )
        if start > len(old_lines):
            raise MemoryError(
                "PATCH_CONFLICT",
                f"hunk starts past the end of {wpath} (line {hunk.old_start}, file has {len(old_lines)} lines)",
                path=wpath,
                details={"line": hunk.old_start, "patch_line": hunk.header_line},
            )
        out.extend(old_lines[pos:start])
        cur = start
        for kind, text, pline in hunk.body:
            if kind == "+":
                out.append(text)
                continue
            if cur >= len(old_lines):
                raise MemoryError(
                    "PATCH_CONFLICT",
                    f"patch runs past the end of {wpath} at line {cur + 1}",
                    path=wpath,
                    line=cur + 1,
                    details={"line": cur + 1, "expected": text, "found": None, "patch_line": pline},
                )
            if old_lines[cur] != text:
                raise MemoryError(
                    "PATCH_CONFLICT",
                    f"patch does not match {wpath} at line {cur + 1}: expected {text!r}, found {old_lines[cur]!r}",
                    path=wpath,
                    line=cur + 1,
                    details={"line": cur + 1, "expected": text, "found": old_lines[cur], "patch_line": pline},
                )
            if kind == " ":
                out.append(text)
            cur += 1
        pos = cur
    out.extend(old_lines[pos:])
    return out


def _file_lines(text: str) -> list[str]:
    """A unified diff numbers LF-terminated lines, so a patch applies to the text split on LF
    only; the normaliser splits the result as OpenProgram does afterwards (§3.1)."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def apply_patch(texts: Mapping[str, str], patch: str) -> ChangeOutcome:
    """Apply a legacy unified diff (§6.3) to the staged topic texts, all or nothing."""
    sections = parse_patch(patch)
    after = dict(texts)
    seen: set[str] = set()
    for sec in sections:
        if sec.old is None and sec.new is None:
            raise argument_error(f"patch line {sec.header_line}: both sides are /dev/null", line=sec.header_line)
        if sec.old is not None and sec.new is not None and sec.old != sec.new:
            raise argument_error(
                f"patch line {sec.header_line}: renames are not supported (topics/{sec.old} -> topics/{sec.new})",
                line=sec.header_line,
            )
        path = sec.new if sec.new is not None else sec.old
        assert path is not None
        wpath = "topics/" + path
        if path in seen:
            raise argument_error(f"patch changes {wpath} in more than one section", path=wpath, line=sec.header_line)
        seen.add(path)
        if sec.old is None:  # create
            if path in after:
                raise MemoryError("PATCH_CONFLICT", f"patch creates {wpath}, which already exists", path=wpath, details={"patch_line": sec.header_line})
            new_lines = _apply_hunks(path, [], sec.hunks)
            after[path] = "\n".join(new_lines) + "\n" if new_lines else ""
        elif sec.new is None:  # delete
            if path == CORE_TOPIC:
                raise core_delete_error(line=sec.header_line)
            if path not in after:
                raise MemoryError("PATCH_CONFLICT", f"patch deletes {wpath}, which does not exist", path=wpath, details={"patch_line": sec.header_line})
            rest = _apply_hunks(path, _file_lines(after[path]), sec.hunks)
            if any(rest):
                raise MemoryError(
                    "PATCH_CONFLICT",
                    f"patch deletes {wpath} but its hunks leave {len(rest)} line(s)",
                    path=wpath,
                    details={"patch_line": sec.header_line},
                )
            del after[path]
        else:  # modify
            if path not in after:
                raise MemoryError("PATCH_CONFLICT", f"patch modifies {wpath}, which does not exist", path=wpath, details={"patch_line": sec.header_line})
            new_lines = _apply_hunks(path, _file_lines(after[path]), sec.hunks)
            after[path] = "\n".join(new_lines) + "\n" if new_lines else ""
    guard_core(texts, after)
    return change_outcome(texts, after)
