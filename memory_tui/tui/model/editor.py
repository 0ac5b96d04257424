"""The editor's bridge to the engine: validate a buffer, turn the result into diagnostics.

No Textual here, so a worker thread can call it and the tests can too. The editor widget
only ever sees ``Diagnostic`` values; where they come from is this module's business.

Validation runs the core's validate-only transaction (``transaction.validate_edit``, what
``memory-tui edit --check`` runs): the full stage → normalise → validate path, nothing
installed. It reports every error the core gathers across its validation stages
(``TxResult.all_errors``: a dropped block id no longer hides the uncited prose beside it),
each on its line and naming the rule it broke (``core.rules.rule_of``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem on one line of the buffer. ``line``/``column`` are 1-based."""

    line: int
    column: int | None
    code: str
    message: str
    path: str | None = None  # the file it was found in, when not the edited one
    rule: str | None = None  # the rule of the format it broke, when the core's message names one

    @property
    def where(self) -> str:
        return f"{self.line}:{self.column}" if self.column else f"{self.line}"

    def label(self) -> str:
        prefix = f"{self.path}: " if self.path else ""
        rule = f" [{self.rule}]" if self.rule and self.rule not in self.message else ""
        return f"{prefix}{self.code}: {self.message}{rule}"


@dataclass(frozen=True)
class Validation:
    """A validation's answer for buffer version ``seq``."""

    seq: int
    ok: bool
    diagnostics: tuple[Diagnostic, ...]
    result: Any = None  # the core's TxResult (its revision, changed files...)


def _clamp(value: Any, low: int, high: int | None = None) -> int:
    n = value if isinstance(value, int) and not isinstance(value, bool) else low
    n = max(low, n)
    return min(n, high) if high is not None else n


def diagnostics_from_problems(problems: Iterable[Any], path: str, *, line_count: int | None = None) -> tuple[Diagnostic, ...]:
    """Problems (anything with code/message/path/line/column) as diagnostics of the file ``path``.

    A problem in another file (a link this edit left dangling elsewhere) or without a line
    is put on line 1, naming its file, so nothing the core said is lost. Duplicates go.
    """
    from memory_tui.core.format.rules import rule_of

    out: list[Diagnostic] = []
    seen: set[tuple[Any, ...]] = set()
    for p in problems:
        own = p.path in (None, path)
        line = _clamp(p.line, 1, line_count) if own and p.line is not None else 1
        column = p.column if own and isinstance(p.column, int) and p.column >= 1 else None
        d = Diagnostic(line, column, str(p.code), str(p.message), None if own else p.path, rule_of(str(p.message)))
        key = (d.line, d.column, d.code, d.message, d.path)
        if key not in seen:
            seen.add(key)
            out.append(d)
    out.sort(key=lambda d: (d.line, d.column or 0))
    return tuple(out)


def diagnostics_from_result(result: Any, path: str, *, line_count: int | None = None) -> tuple[Diagnostic, ...]:
    if result.ok:
        return ()
    # the core's full ordered list (OpenProgram's first error, then the rest in file order)
    problems = tuple(result.all_errors()) or (result.error().as_problem(),)
    return diagnostics_from_problems(problems, path, line_count=line_count)


def validate_topic_text(state_dir: Path | str, path: str, text: str, seq: int = 0, **kw: Any) -> Validation:
    """Validate ``text`` as the new content of topic ``path`` (validate-only; installs nothing)."""
    from memory_tui.core.tx import api as tx

    result = tx.validate_edit(state_dir, path, text, **kw)
    lines = text.count("\n") + 1
    return Validation(seq, bool(result.ok), diagnostics_from_result(result, path, line_count=lines), result)


def save_topic_text(state_dir: Path | str, path: str, text: str, **kw: Any) -> Validation:
    """Save through ``staged_edit``; a rejection comes back as the same diagnostics."""
    from memory_tui.core.tx import api as tx

    result = tx.staged_edit(state_dir, path, text, **kw)
    lines = text.count("\n") + 1
    return Validation(-1, bool(result.ok), diagnostics_from_result(result, path, line_count=lines), result)


def read_topic_text(state_dir: Path | str, path: str) -> tuple[str, str | None]:
    """The committed text of topic ``path`` ("" for a new one) and the workspace revision."""
    from memory_tui.core.store.workspace import workspace_revision

    root = Path(state_dir) / "memory"
    file = root / path
    text = file.read_text(encoding="utf-8") if file.is_file() else ""
    return text, workspace_revision(root) if root.is_dir() else None
