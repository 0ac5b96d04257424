"""apply_patch (§6.3 legacy unified diff) and apply_file_changes (§6.2 whole files)."""

from __future__ import annotations

import pytest

from memory_tui.core.changes.files import apply_file_changes
from memory_tui.core.changes.patch import apply_patch, parse_patch
from memory_tui.core.format.errors import MemoryError

A = "# A\n\none[^e1] ^11111111\n\n[^e1]: Time: `2026`; Sources: [x](p/t/m)\n"
CORE = "# Core\n\nc.[^e-1111111111] ^c0000001\n\n[^e-1111111111]: Time: `2026`; Sources: [x](p/t/m)\n"
TEXTS = {"a.md": A, "core.md": CORE}


def fails(texts, patch) -> MemoryError:
    with pytest.raises(MemoryError) as info:
        apply_patch(texts, patch)
    return info.value


def test_modify_with_git_headers_and_tab_suffix():
    patch = (
        "diff --git a/topics/a.md b/topics/a.md\n"
        "index 0123abc..4567def 100644\n"
        "--- a/topics/a.md\t2026-08-09 10:00:00\n"
        "+++ b/topics/a.md\t2026-08-09 10:00:01\n"
        "@@ -1,3 +1,3 @@\n"
        " # A\n"
        "\n"  # empty line = blank context
        "-one[^e1] ^11111111\n"
        "+two[^e1] ^11111111\n"
    )
    out = apply_patch(TEXTS, patch)
    assert out.texts["a.md"] == A.replace("one", "two")
    assert out.changed_paths == ("a.md",)
    assert out.removable_ids is None and out.allowed_refs == frozenset()
    assert TEXTS["a.md"] == A


def test_counts_are_ignored_only_old_start_used():
    patch = "--- a/topics/a.md\n+++ b/topics/a.md\n@@ -3,99 +3,1 @@\n-one[^e1] ^11111111\n+uno[^e1] ^11111111\n"
    assert apply_patch(TEXTS, patch).texts["a.md"] == A.replace("one", "uno")


def test_pure_insertion_uses_line_after_start():
    patch = "--- a/topics/a.md\n+++ b/topics/a.md\n@@ -1,0 +2,1 @@\n+inserted\n"
    assert apply_patch(TEXTS, patch).texts["a.md"].split("\n")[:3] == ["# A", "inserted", ""]
    patch = "--- a/topics/a.md\n+++ b/topics/a.md\n@@ -0,0 +1,1 @@\n+top\n"
    assert apply_patch(TEXTS, patch).texts["a.md"].startswith("top\n# A\n")


def test_backslash_lines_ignored_and_added_lines_end_with_lf():
    patch = "--- a/topics/a.md\n+++ b/topics/a.md\n@@ -5 +5 @@\n-[^e1]: Time: `2026`; Sources: [x](p/t/m)\n\\ No newline at end of file\n+[^e1]: Time: `2025`; Sources: [x](p/t/m)\n\\ No newline at end of file\n"
    out = apply_patch(TEXTS, patch)
    assert out.texts["a.md"].endswith("`2025`; Sources: [x](p/t/m)\n")


def test_trailing_lf_ignored_when_matching():
    texts = {"a.md": A.rstrip("\n")}  # no final LF in the file
    patch = "--- a/topics/a.md\n+++ b/topics/a.md\n@@ -5 +5 @@\n-[^e1]: Time: `2026`; Sources: [x](p/t/m)\n+[^e1]: Time: `2024`; Sources: [x](p/t/m)\n"
    assert apply_patch(texts, patch).texts["a.md"].endswith("`2024`; Sources: [x](p/t/m)\n")


def test_several_hunks_and_sections():
    b = "l1\nl2\nl3\nl4\nl5\nl6\n"
    patch = (
        "--- a/topics/b.md\n+++ b/topics/b.md\n"
        "@@ -1,2 +1,2 @@\n-l1\n+L1\n l2\n"
        "@@ -5,2 +5,2 @@\n l5\n-l6\n+L6\n"
        "--- /dev/null\n+++ b/topics/new/c.md\n@@ -0,0 +1,2 @@\n+# C\n+x\n"
        "--- a/topics/a.md\n+++ /dev/null\n@@ -1,5 +0,0 @@\n" + "".join("-" + line + "\n" for line in A.split("\n")[:-1])
    )
    out = apply_patch({"b.md": b, **TEXTS}, patch)
    assert out.texts["b.md"] == "L1\nl2\nl3\nl4\nl5\nL6\n"
    assert out.texts["new/c.md"] == "# C\nx\n"
    assert "a.md" not in out.texts
    assert out.changed_paths == ("a.md", "b.md", "new/c.md")


def test_mismatch_is_conflict_with_line_expected_found():
    patch = "--- a/topics/a.md\n+++ b/topics/a.md\n@@ -3 +3 @@\n-ONE[^e1] ^11111111\n+two\n"
    e = fails(TEXTS, patch)
    assert e.code == "PATCH_CONFLICT" and e.path == "topics/a.md" and e.line == 3
    assert e.details["line"] == 3 and e.details["expected"] == "ONE[^e1] ^11111111" and e.details["found"] == "one[^e1] ^11111111"


def test_past_end_of_file():
    e = fails(TEXTS, "--- a/topics/a.md\n+++ b/topics/a.md\n@@ -5 +5 @@\n [^e1]: Time: `2026`; Sources: [x](p/t/m)\n-beyond\n")
    assert e.code == "PATCH_CONFLICT" and e.details["line"] == 6 and e.details["found"] is None
    e = fails(TEXTS, "--- a/topics/a.md\n+++ b/topics/a.md\n@@ -40 +40 @@\n-x\n")
    assert e.code == "PATCH_CONFLICT" and "past the end" in e.message


def test_overlapping_hunks():
    b = "l1\nl2\nl3\n"
    patch = "--- a/topics/b.md\n+++ b/topics/b.md\n@@ -1,2 +1,2 @@\n l1\n-l2\n+x\n@@ -2 +2 @@\n-l2\n+y\n"
    e = fails({"b.md": b}, patch)
    assert e.code == "PATCH_CONFLICT" and "overlapping" in e.message


@pytest.mark.parametrize(
    "patch,needle",
    [
        ("--- /dev/null\n+++ b/topics/a.md\n@@ -0,0 +1 @@\n+x\n", "already exists"),
        ("--- a/topics/zz.md\n+++ b/topics/zz.md\n@@ -1 +1 @@\n-x\n+y\n", "does not exist"),
        ("--- a/topics/zz.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n", "does not exist"),
        ("--- a/topics/a.md\n+++ /dev/null\n@@ -1 +0,0 @@\n-# A\n", "leave"),
    ],
)
def test_create_existing_modify_missing_delete_missing(patch, needle):
    e = fails(TEXTS, patch)
    assert e.code == "PATCH_CONFLICT" and needle in e.message


@pytest.mark.parametrize(
    "patch,needle",
    [
        ("", "empty patch"),
        ("   \n", "empty patch"),
        ("just some text\n", "no file sections"),
        ("@@ -1 +1 @@\n-x\n+y\n", "hunk before any"),
        ("--- a/topics/a.md\n+++ b/topics/a.md\n", "no hunks"),
        ("--- a/topics/a.md\n+++ b/topics/a.md\n--- a/topics/b.md\n+++ b/topics/b.md\n@@ -1 +1 @@\n-x\n+y\n", "no hunks"),
        ("--- a/topics/a.md\n+++ b/topics/a.md\n@@ garbage @@\n", "malformed hunk header"),
        ("diff --git a/topics/a.md b/topics/b.md\nsimilarity index 90%\nrename from topics/a.md\nrename to topics/b.md\n", "not supported"),
        ("diff --git a/topics/a.md b/topics/a.md\nold mode 100644\nnew mode 100755\n", "mode change"),
        ("diff --git a/topics/l.md b/topics/l.md\nnew file mode 120000\n--- /dev/null\n+++ b/topics/l.md\n@@ -0,0 +1 @@\n+target\n", "mode 120000"),
        ("diff --git a/topics/a.md b/topics/a.md\nBinary files a/topics/a.md and b/topics/a.md differ\n", "binary"),
        ("diff --git a/topics/a.md b/topics/a.md\nGIT binary patch\nliteral 0\n", "binary"),
        ("copy from topics/a.md\ncopy to topics/b.md\n", "copy"),
        ("--- a/topics/a.md\n+++ b/topics/b.md\n@@ -1 +1 @@\n-# A\n+# B\n", "renames are not supported"),
        ("--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+x\n", "both sides"),
        ("--- a/topics/a.md\n@@ -1 +1 @@\n-# A\n+# B\n", "followed by a +++"),
        ("--- a/topics/a.md\n+++ b/topics/a.md\n@@ -1 +1 @@\n-# A\n+# B\n--- a/topics/a.md\n+++ b/topics/a.md\n@@ -3 +3 @@\n-x\n+y\n", "more than one section"),
    ],
)
def test_invalid_patches(patch, needle):
    e = fails(TEXTS, patch)
    assert e.code == "INVALID_ARGUMENT", e
    assert needle in e.message


def test_patch_too_large():
    e = fails(TEXTS, "+" * 512_001)
    assert e.code == "INVALID_ARGUMENT" and "512000" in e.message


@pytest.mark.parametrize(
    "path,code",
    [("a/sources/x.md", "READ_ONLY_PATH"), ("a/../x.md", "PATH_OUTSIDE_WORKSPACE"), ("a/topics/x.txt", "READ_ONLY_PATH"), ("/etc/passwd", "PATH_OUTSIDE_WORKSPACE"), ("a/.scriptorium/runtime.json", "READ_ONLY_PATH")],
)
def test_patch_paths_follow_the_one_path_rule(path, code):
    e = fails(TEXTS, f"--- {path}\n+++ {path.replace('a/', 'b/', 1)}\n@@ -1 +1 @@\n-x\n+y\n")
    assert e.code == code


def test_git_quoted_path():
    out = apply_patch({}, '--- /dev/null\n+++ "b/topics/caf\\303\\251.md"\n@@ -0,0 +1 @@\n+x\n')
    assert out.texts == {"café.md": "x\n"}


def test_paths_without_prefix():
    out = apply_patch(TEXTS, "--- topics/a.md\n+++ topics/a.md\n@@ -1 +1 @@\n-# A\n+# AA\n")
    assert out.texts["a.md"].startswith("# AA\n")


def test_deleting_core_is_refused():
    patch = "--- a/topics/core.md\n+++ /dev/null\n@@ -1,5 +0,0 @@\n" + "".join("-" + line + "\n" for line in CORE.split("\n")[:-1])
    e = fails(TEXTS, patch)
    assert e.code == "INVALID_ARGUMENT" and "topics/core.md cannot be deleted" in e.message


def test_emptying_core_is_refused():
    patch = "--- a/topics/core.md\n+++ b/topics/core.md\n@@ -3,3 +3,0 @@\n-c.[^e-1111111111] ^c0000001\n-\n-[^e-1111111111]: Time: `2026`; Sources: [x](p/t/m)\n"
    e = fails(TEXTS, patch)
    assert e.code == "INVALID_ARGUMENT" and "core.md" in e.message


def test_parse_patch_sections():
    secs = parse_patch("--- a/topics/a.md\n+++ b/topics/a.md\n@@ -1 +1 @@\n-x\n+y\n@@ -5 +5 @@\n z\n")
    assert len(secs) == 1 and [h.old_start for h in secs[0].hunks] == [1, 5]


# --- §6.2 whole files --------------------------------------------------------------------------------


def test_file_changes_write_and_delete():
    out = apply_file_changes(TEXTS, [{"path": "topics/a.md", "action": "delete"}, {"path": "topics/new.md", "action": "write", "content": "raw  \n\n"}])
    assert "a.md" not in out.texts and out.texts["new.md"] == "raw  \n\n"  # verbatim; normalised later
    assert out.changed_paths == ("a.md", "new.md") and out.removable_ids is None


def test_file_changes_delete_missing_is_conflict():
    with pytest.raises(MemoryError) as info:
        apply_file_changes(TEXTS, [{"path": "topics/zz.md", "action": "delete"}])
    assert info.value.code == "PATCH_CONFLICT" and "change deletes a file that does not exist" in info.value.message
    assert info.value.details == {"change_index": 0}


def test_file_changes_duplicate_path():
    with pytest.raises(MemoryError) as info:
        apply_file_changes(TEXTS, [{"path": "topics/a.md", "action": "write", "content": "x"}, {"path": "topics//a.md", "action": "delete"}])
    assert "duplicate change path" in info.value.message


def test_file_changes_core_delete_and_empty_refused():
    for change in ({"path": "topics/core.md", "action": "delete"}, {"path": "topics/core.md", "action": "write", "content": "# Core\n"}):
        with pytest.raises(MemoryError) as info:
            apply_file_changes(TEXTS, [change])
        assert info.value.code == "INVALID_ARGUMENT" and "core.md" in info.value.message
    out = apply_file_changes(TEXTS, [{"path": "topics/core.md", "action": "write", "content": CORE + "\nd.[^e-1111111111] ^c0000002\n"}])
    assert out.changed_paths == ("core.md",)


def test_unchanged_write_reports_nothing():
    assert apply_file_changes(TEXTS, [{"path": "topics/a.md", "action": "write", "content": A}]).changed_paths == ()
