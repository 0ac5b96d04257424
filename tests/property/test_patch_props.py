"""Property tests for apply_patch: it never raises anything but MemoryError, and a difflib
unified diff from A to B applied to A yields B."""

from __future__ import annotations

import difflib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.changes.patch import apply_patch
from memory_tui.core.format.errors import MemoryError

LINE_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r")
lines = st.lists(st.text(LINE_CHARS, max_size=12) | st.sampled_from(["", " ", "-", "+", "@@", "--- x", "+++ y", "\\"]), max_size=25)

HEADER_BITS = st.sampled_from(
    [
        "--- a/topics/a.md",
        "+++ b/topics/a.md",
        "--- /dev/null",
        "+++ /dev/null",
        "@@ -1 +1 @@",
        "@@ -0,0 +1,2 @@",
        "@@ -3,2 +3,5 @@",
        "diff --git a/topics/a.md b/topics/a.md",
        "rename from x",
        "new file mode 100644",
        "\\ No newline at end of file",
        "",
        " context",
        "-removed",
        "+added",
        "--- a/topics/../x.md",
        "+++ b/sources/x.md",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(HEADER_BITS | st.text(LINE_CHARS, max_size=15), max_size=20), st.booleans())
def test_apply_patch_only_raises_memory_error(parts, final_lf):
    patch = "\n".join(parts) + ("\n" if final_lf else "")
    texts = {"a.md": "# A\ncontext\nremoved\nx\n", "core.md": "# Core\n\nc.[^e1] ^c1\n\n[^e1]: Time: `2026`; Sources: [x](p/t/m)\n"}
    try:
        out = apply_patch(texts, patch)
    except MemoryError as exc:
        assert exc.code in {"INVALID_ARGUMENT", "PATCH_CONFLICT", "READ_ONLY_PATH", "PATH_OUTSIDE_WORKSPACE"}
        return
    assert set(out.changed_paths) <= set(out.texts) | set(texts)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_apply_patch_arbitrary_text(patch):
    try:
        apply_patch({"a.md": "x\n"}, patch)
    except MemoryError:
        pass


def _diff(a: list[str], b: list[str], n: int, old: str, new: str) -> str:
    return "".join(
        line if line.endswith("\n") else line + "\n"
        for line in difflib.unified_diff([x + "\n" for x in a], [x + "\n" for x in b], old, new, n=n)
    )


@settings(max_examples=300, deadline=None)
@given(lines, lines, st.integers(min_value=0, max_value=3))
def test_difflib_patch_round_trip(a, b, n):
    patch = _diff(a, b, n, "a/topics/t.md", "b/topics/t.md")
    texts = {"t.md": "".join(x + "\n" for x in a)}
    expected = "".join(x + "\n" for x in b)
    if not patch:
        return  # identical inputs: difflib emits nothing, which is an empty patch
    out = apply_patch(texts, patch)
    assert out.texts["t.md"] == expected


@settings(max_examples=100, deadline=None)
@given(lines.filter(bool))
def test_difflib_create_and_delete(b):
    create = _diff([], b, 3, "/dev/null", "b/topics/new.md")
    assert apply_patch({}, create).texts == {"new.md": "".join(x + "\n" for x in b)}
    delete = _diff(b, [], 3, "a/topics/new.md", "/dev/null")
    assert apply_patch({"new.md": "".join(x + "\n" for x in b)}, delete).texts == {}
