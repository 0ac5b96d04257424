"""The app's one diff computation: two texts as rows (unified, or side by side), from
``difflib``. Pure functions, no terminal: ``widgets/diff_view.py`` draws the rows, the
History view's model types them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

CONTEXT = 3


@dataclass(frozen=True)
class UnifiedRow:
    kind: str  # " " context | "-" removed | "+" added | "@" hunk header | "=" files header
    text: str
    old_line: int | None = None  # 1-based
    new_line: int | None = None


@dataclass(frozen=True)
class SideRow:
    kind: str  # equal | replace | delete | insert | gap
    old_line: int | None
    old_text: str
    new_line: int | None
    new_text: str


def _lines(text: str) -> list[str]:
    return text.splitlines()


def unified_rows(old: str, new: str, *, old_label: str = "on disk", new_label: str = "buffer", context: int = CONTEXT) -> list[UnifiedRow]:
    a, b = _lines(old), _lines(new)
    rows: list[UnifiedRow] = []
    groups = list(difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context))
    if not groups:
        return rows
    rows.append(UnifiedRow("=", f"--- {old_label}"))
    rows.append(UnifiedRow("=", f"+++ {new_label}"))
    for group in groups:
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        rows.append(UnifiedRow("@", f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@"))
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                for k in range(a2 - a1):
                    rows.append(UnifiedRow(" ", a[a1 + k], a1 + k + 1, b1 + k + 1))
                continue
            for k in range(a1, a2):
                rows.append(UnifiedRow("-", a[k], k + 1, None))
            for k in range(b1, b2):
                rows.append(UnifiedRow("+", b[k], None, k + 1))
    return rows


def side_rows(old: str, new: str, *, context: int = CONTEXT) -> list[SideRow]:
    a, b = _lines(old), _lines(new)
    rows: list[SideRow] = []
    for n, group in enumerate(difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context)):
        if n:
            rows.append(SideRow("gap", None, "", None, ""))
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                rows.extend(SideRow("equal", a1 + k + 1, a[a1 + k], b1 + k + 1, b[b1 + k]) for k in range(a2 - a1))
                continue
            span = max(a2 - a1, b2 - b1)
            for k in range(span):
                i, j = a1 + k, b1 + k
                has_a, has_b = i < a2, j < b2
                kind = "replace" if has_a and has_b else ("delete" if has_a else "insert")
                rows.append(SideRow(kind, i + 1 if has_a else None, a[i] if has_a else "",
                                    j + 1 if has_b else None, b[j] if has_b else ""))
    return rows
