"""Batch selection (memory spec §7.3, session spec §4.4): pure functions, counter injected.

* ``first_batch``: the shortest leading run of pending records whose summed o200k token
  count reaches the threshold, or every pending record when the total stays below it.
* ``plan_batches``: the batches a forced pass over one branch would take, in order (used
  by ``--dry-run``; it assumes each batch gets written).
* ``unforced_gate``: the per-turn rule: write iff batch tokens ≥ threshold, or tokens > 0
  and the newest record is at least one hour old (a record without a time counts as now).

Records are any objects; ``text_of`` and ``time_of`` read their text and Unix time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Sequence, TypeVar

from memory_tui.core.format.config import IDLE_ALLOWANCE_SECONDS
from memory_tui.core.format.tokens import TokenCounter

R = TypeVar("R")


def default_text(record: Any) -> str:
    for name in ("text", "content"):
        value = getattr(record, name, None)
        if isinstance(value, str):
            return value
    if isinstance(record, dict):
        value = record.get("text", record.get("content"))
        if isinstance(value, str):
            return value
    return ""


def default_time(record: Any) -> float | None:
    for name in ("created_at", "timestamp"):
        value = getattr(record, name, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    if isinstance(record, dict):
        value = record.get("created_at", record.get("timestamp"))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


@dataclass(frozen=True)
class Batch(Generic[R]):
    records: tuple[R, ...]
    tokens: int

    def __bool__(self) -> bool:
        return bool(self.records)

    def __len__(self) -> int:
        return len(self.records)


def first_batch(
    pending: Sequence[R],
    counter: TokenCounter,
    threshold: int,
    *,
    text_of: Callable[[R], str] = default_text,
) -> Batch[R]:
    total = 0
    taken: list[R] = []
    for record in pending:
        taken.append(record)
        total += counter.count(text_of(record))
        if total >= threshold:
            break
    return Batch(tuple(taken), total)


def plan_batches(
    pending: Sequence[R],
    counter: TokenCounter,
    threshold: int,
    *,
    forced: bool = True,
    text_of: Callable[[R], str] = default_text,
) -> list[Batch[R]]:
    """Consecutive batches over ``pending``.

    ``forced`` (head branch of a forced pass): every record, the last batch may be short.
    Not forced (other tips of a forced pass): only while the remaining pending tokens reach
    the threshold; a remainder below it stays unwritten.
    """
    out: list[Batch[R]] = []
    rest = list(pending)
    while rest:
        if not forced and sum(counter.count(text_of(r)) for r in rest) < threshold:
            break
        batch = first_batch(rest, counter, threshold, text_of=text_of)
        out.append(batch)
        rest = rest[len(batch.records):]
    return out


def total_tokens(records: Sequence[R], counter: TokenCounter, *, text_of: Callable[[R], str] = default_text) -> int:
    return sum(counter.count(text_of(r)) for r in records)


def unforced_gate(
    batch: Batch[R],
    threshold: int,
    now: float,
    *,
    time_of: Callable[[R], float | None] = default_time,
) -> bool:
    if not batch.records:
        return False
    if batch.tokens >= threshold:
        return True
    if batch.tokens <= 0:
        return False
    times = [time_of(r) for r in batch.records]
    newest = max((t if t is not None else now) for t in times)
    return now - newest >= IDLE_ALLOWANCE_SECONDS


def budget_batches(
    items: Sequence[R],
    counter: TokenCounter,
    budget: int,
    *,
    text_of: Callable[[R], str] = default_text,
) -> list[Batch[R]]:
    """Backfill batching (§7.6): add items while the sum (min 1 each) stays ≤ budget;
    a batch always holds at least one item."""
    out: list[Batch[R]] = []
    cur: list[R] = []
    tokens = 0
    for item in items:
        n = max(1, counter.count(text_of(item)))
        if cur and tokens + n > budget:
            out.append(Batch(tuple(cur), tokens))
            cur, tokens = [], 0
        cur.append(item)
        tokens += n
    if cur:
        out.append(Batch(tuple(cur), tokens))
    return out
