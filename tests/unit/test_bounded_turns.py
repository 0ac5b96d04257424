"""pipeline.bounded: a turn above the limit is cut to a prefix within it, reading a bounded
slice of the text however large the turn is."""

from __future__ import annotations

from memory_tui.pipeline.bounded import bound_task, clip_text, clipped_note, turn_limit
from memory_tui.pipeline.writers.base import Turn, WriteTask


class WordCounter:
    """One token per word; remembers how much text it was asked to count."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def count(self, text: str) -> int:
        self.asked.append(len(text))
        return len(text.split())

    def special_tokens_in(self, text: str) -> list[str]:
        return []


def test_a_huge_text_is_cut_within_the_limit_at_a_word_reading_a_bounded_slice():
    text = "".join(f"word{i} " for i in range(1_000_000))  # ~7.9 MB
    c = WordCounter()
    out = clip_text(text, 100, c)
    assert text.startswith(out) and 90 <= c.count(out) <= 100
    assert out.endswith(tuple("0123456789"))  # whole words only: cut before a space
    assert max(c.asked[:-1]) <= 100 * 16


def test_turns_within_the_limit_are_handed_over_unchanged():
    c = WordCounter()
    small = Turn("openprogram/s/a", "user", "Owner", "a few words here", tokens=4)
    task = WriteTask("write", (small,))
    assert bound_task(task, 10, c) is task
    assert clipped_note(task.turns, 10) == ""


def test_only_the_turn_above_the_limit_is_clipped_and_the_note_names_it():
    c = WordCounter()
    big_text = " ".join(f"w{i}" for i in range(500))
    small = Turn("openprogram/s/a", "user", "Owner", "one two three", tokens=3)
    big = Turn("openprogram/s/b", "assistant", "agent", big_text, tokens=500)
    task = WriteTask("write", (small, big))
    out = bound_task(task, 50, c)
    assert out.turns[0] is small
    assert out.turns[1].clipped_from == 500 and out.turns[1].tokens <= turn_limit(50) == 50
    assert big_text.startswith(out.turns[1].text)
    assert "first 50 tokens of b (500 tokens)" in clipped_note(task.turns, 50)
