"""The shape of the code a newcomer has to read: no file over 1 000 lines (at most two, each
saying why in its opening comment), no class over 400 lines, no function over 120 lines,
anywhere in ``memory_tui/``. Measured from the source (``ast``), so a long docstring or
comment counts as the reader meets it.

An exception is listed below with its reason. "Being split" entries are owned by a branch that
is splitting the code at the moment; the lead removes them when that branch lands, and this
test then holds the line.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "memory_tui"

FILE_LINES = 1000
CLASS_LINES = 400
FUNCTION_LINES = 120
LONG_FILES_AT_MOST = 2  # files over FILE_LINES, each a grammar or an equally good reason

# (kind, "path relative to memory_tui/" or "path:qualified name") -> why it may be longer
ALLOWED: dict[tuple[str, str], str] = {
}


def _measure() -> list[tuple[str, str, int]]:
    """(kind, name, lines) of every file, class and function over its limit."""
    over: list[tuple[str, str, int]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > FILE_LINES:
            over.append(("file", rel, lines))
        stack: list[tuple[ast.AST, str]] = [(ast.parse(text, rel), "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    name = prefix + child.name
                    size = child.end_lineno - child.lineno + 1  # type: ignore[operator]
                    # decorators are part of what a reader reads
                    size += child.lineno - min((d.lineno for d in child.decorator_list), default=child.lineno)
                    kind = "class" if isinstance(child, ast.ClassDef) else "function"
                    if size > (CLASS_LINES if kind == "class" else FUNCTION_LINES):
                        over.append((kind, f"{rel}:{name}", size))
                    stack.append((child, name + "."))
                else:
                    stack.append((child, prefix))
    return over


def test_nothing_is_longer_than_its_limit_unless_listed():
    unlisted = [f"{kind} {name}: {size} lines" for kind, name, size in _measure() if (kind, name) not in ALLOWED]
    assert not unlisted, "over the limits (split it by responsibility, or list it with a reason):\n" + "\n".join(
        unlisted)


def test_every_listed_exception_is_still_needed():
    # an entry whose code was split must go, so the list never hides a new long function
    needed = {(kind, name) for kind, name, _size in _measure()}
    stale = sorted(f"{kind} {name}" for kind, name in ALLOWED if (kind, name) not in needed)
    assert not stale, "listed but no longer over the limit (remove from ALLOWED):\n" + "\n".join(stale)


def test_at_most_two_long_files_and_each_says_why():
    long_files = [name for kind, name, _size in _measure() if kind == "file"]
    for_good = [name for name in long_files if not ALLOWED.get(("file", name), "").startswith("being split")]
    assert len(for_good) <= LONG_FILES_AT_MOST, for_good
    for name in for_good:
        opening = ast.get_docstring(ast.parse((PACKAGE / name).read_text(encoding="utf-8"))) or ""
        assert "why" in opening.lower() and "long" in opening.lower(), f"{name}: its opening comment must say why it is long"


def test_the_measure_sees_a_long_function(tmp_path, monkeypatch):
    # the measure itself, on a package of one long function and one long class
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES + 1))
    methods = "\n".join(f"    def m{i}(self):\n        return {i}\n" for i in range(CLASS_LINES // 3 + 1))
    (tmp_path / "long.py").write_text(f"def f():\n{body}\n\n\nclass C:\n{methods}\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    found = {(kind, name) for kind, name, _size in _measure()}
    assert found == {("function", "long.py:f"), ("class", "long.py:C")}
