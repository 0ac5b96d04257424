"""What one writer call is given: each turn bounded to one trigger's worth of tokens.

OpenProgram's batch rule (memory spec §7.3) takes turns until their sum reaches the trigger
(``memory.writer.trigger_tokens``), so every turn of a batch but the last sums below it; the
last may be of any size (a pasted log, a 50 MB reply). The batch stays what OpenProgram makes
it (its turns are archived whole and marked together), but a writer cannot take such a turn:
a model's context holds nothing near it, and the embedded writer's work grows faster than its
input (a 10 MB turn ran for many minutes and gigabytes). So a turn above the trigger is handed
to the writer as its first trigger's worth of tokens, cut at a whitespace, with ``clipped_from``
saying how many tokens the whole turn has (prompt-based writers show that beside the text; the
job report says it too). The whole turn stays in the trusted archive, citable by its ref.

Hence one writer call never gets more than twice the trigger: below it for the turns before
the last, at most the trigger for the last. A backfill batch (every item ≤ its budget, or one
item alone) is bounded the same way.
"""

from __future__ import annotations

import dataclasses

from memory_tui.core.format.tokens import TokenCounter
from memory_tui.pipeline.writers.base import Turn, WriteTask

# Where a cut looks back for whitespace, so the writer does not see half a word.
_BACKTRACK_CHARS = 400
# A token is rarely longer than this many characters; the first guess at the cut reads no more.
_CHARS_PER_TOKEN_CEILING = 16


def turn_limit(threshold: int) -> int:
    """Tokens of one turn a writer is given at most."""
    return max(1, int(threshold))


def clip_text(text: str, limit: int, counter: TokenCounter) -> str:
    """The longest prefix of ``text`` found with at most ``limit`` tokens, ending before a
    whitespace when one is near the cut. Reads at most ``limit * 16`` characters: the rest of
    a huge text is never copied or counted."""
    if limit <= 0:
        return ""
    m = min(len(text), limit * _CHARS_PER_TOKEN_CEILING)
    n = counter.count(text[:m])
    # Shrink in proportion until it fits (token density is close to even over a text, so this
    # ends in two or three counts); each count reads at most the guess.
    while n > limit and m > 0:
        m = max(0, min(m - 1, int(m * limit / n * 0.98)))
        n = counter.count(text[:m])
    if m < len(text):
        cut = max(text.rfind(" ", max(0, m - _BACKTRACK_CHARS), m), text.rfind("\n", max(0, m - _BACKTRACK_CHARS), m))
        if cut > 0:
            m = cut
    return text[:m]


def bound_turn(turn: Turn, limit: int, counter: TokenCounter) -> Turn:
    full = turn.tokens if turn.tokens > 0 else counter.count(turn.text)
    if full <= limit:
        return turn
    shown = clip_text(turn.text, limit, counter)
    return dataclasses.replace(turn, text=shown, tokens=counter.count(shown), clipped_from=full)


def bound_task(task: WriteTask, threshold: int, counter: TokenCounter) -> WriteTask:
    """``task`` with every turn bounded to :func:`turn_limit` tokens (the same task when none
    is above it)."""
    limit = turn_limit(threshold)
    turns = tuple(bound_turn(t, limit, counter) for t in task.turns)
    if all(a is b for a, b in zip(turns, task.turns)):
        return task
    return dataclasses.replace(task, turns=turns)


def clipped_note(turns: tuple[Turn, ...] | list[Turn], threshold: int) -> str:
    """The report's words for the turns a writer was given only in part ('' when none)."""
    limit = turn_limit(threshold)
    big = [t for t in turns if t.tokens > limit]
    if not big:
        return ""
    names = ", ".join(f"{t.source_id.rsplit('/', 1)[-1]} ({t.tokens} tokens)" for t in big)
    return (f"the writer was given the first {limit} tokens of {names}; "
            f"the whole turn is archived and marked with its batch")
