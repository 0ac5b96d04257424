"""The app's record-change adapter (issue 10) without the app (its $EDITOR hand-over
and how an outcome reads)."""

from __future__ import annotations

import pytest

from memory_tui.tui.model import records as ra


def test_no_editor_set_is_said_not_guessed():
    with pytest.raises(ra.EditorUnavailable, match=r"\$EDITOR is not set"):
        ra.editor_command({})
    assert ra.editor_command({"EDITOR": "nano -w"}) == ["nano", "-w"]
    assert ra.editor_command({"EDITOR": "nano", "VISUAL": "code --wait"}) == ["code", "--wait"]


def test_the_editor_gets_the_text_and_its_answer_comes_back():
    seen: list[list[str]] = []

    def runner(argv: list[str]) -> int:
        seen.append(argv)
        with open(argv[-1], encoding="utf-8") as fh:
            assert fh.read() == "before\n"
        with open(argv[-1], "w", encoding="utf-8") as fh:
            fh.write("after\n")
        return 0

    assert ra.run_external_editor("before\n", runner=runner, environ={"EDITOR": "ed -s"}) == "after\n"
    assert seen[0][:2] == ["ed", "-s"] and seen[0][-1].endswith(".md")
    with pytest.raises(FileNotFoundError):
        open(seen[0][-1])  # the temporary file is gone


@pytest.mark.parametrize("behaviour, message", [
    ("status", "exited with status 2"),
    ("missing", "could not start"),
    ("binary", "not UTF-8"),
])
def test_a_failing_editor_raises_with_the_reason(behaviour, message):
    def runner(argv: list[str]) -> int:
        if behaviour == "missing":
            raise FileNotFoundError(2, "No such file or directory")
        if behaviour == "binary":
            with open(argv[-1], "wb") as fh:
                fh.write(b"\xff\xfe broken")
            return 0
        return 2

    with pytest.raises(ra.EditorUnavailable, match=message):
        ra.run_external_editor("text", runner=runner, environ={"EDITOR": "vim"})


def test_outcome_lines_name_ids_revision_or_code_and_meaning():
    ok = ra.ActionOutcome("move", "ab12cd34", True, revision_before="1" * 32, revision="2" * 32,
                          block_ids=("ab12cd34",), evidence_ids=("e-1",), location="topics/a.md:3 › A")
    assert ok.lines() == ["Moved ab12cd34", "now at topics/a.md:3 › A", "block ids: ^ab12cd34", "evidence ids: e-1",
                          f"revision {'1' * 12} → {'2' * 12}"]
    race = ra.ActionOutcome("delete", "ab12cd34", False, code="CONCURRENT_UPDATE", meaning="Another writer…",
                            message="workspace changed since base_revision was read")
    assert race.concurrent and any("retry" in line for line in race.lines())
    refused = ra.ActionOutcome("delete", "ab12cd34", False, code="INVALID_TOPIC_FORMAT", meaning="grammar",
                               linked_by=(ra.LinkLine("fc30e0e0", "topics/b.md", 3, "links here"),))
    assert not refused.concurrent and "  ^fc30e0e0  topics/b.md:3  links here" in refused.lines()
