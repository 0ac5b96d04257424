"""The one-line header: state dir, workspace id, revision, writer health, problems."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from rich.text import Text
from textual.widgets import Static

from ..model.data import WorkspaceModel
from ..render import UNICODE, Glyphs


def relative_time(iso: str | None, now: datetime | None) -> str:
    if not iso:
        return ""
    try:
        at = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if now is None:
        return at.strftime("%Y-%m-%d %H:%M")
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    secs = int((now - at).total_seconds())
    if secs < 0:
        return at.strftime("%Y-%m-%d %H:%M")
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return "just now"


LOST_LOCK_RACE = "CONCURRENT_UPDATE"


def header_text(
    model: WorkspaceModel | None,
    width: int,
    now: datetime | None,
    glyphs: Glyphs,
    *,
    problems: int | None = None,
    job: str = "",
    lock: str = "",
    insights: Any = None,
) -> Text:
    """One line: state dir, workspace id, short revision, writer health. Shrinks with width.

    ``problems`` is the count of every problem the app knows (the model's plus settings');
    clicking it opens the Problems screen.
    """
    # Below 100 columns every part is short; above, the insight counts take their short words
    # when the long ones would push the last count off the line; then the workspace id (the
    # least used part) goes, then the revision. Last, the parts that fit whole, in their
    # order: a part cut mid-word reads as another word ("✓ 1d ag…"); only a state dir too long
    # for the line is cut, at its end.
    narrow = width < 100
    # (short words for the parts, short words for the insight counts, the ids shown: 2 both, 1 revision, 0 none)
    tiers = [(narrow, narrow, 2)] + ([] if narrow else [(False, True, 2), (True, True, 2)]) + [(True, True, 1), (True, True, 0)]
    for short_parts, short_insights, ids in tiers:
        text = _header_line(model, now, glyphs, problems, job, lock, insights,
                            narrow=short_parts, short_insights=short_insights, ids=ids)
        if text.cell_len <= width:
            return text
    text = _header_line(model, now, glyphs, problems, job, lock, insights, narrow=True, short_insights=True, ids=0,
                        width=width)
    text.truncate(width, overflow="ellipsis")
    return text


def _header_line(model, now, glyphs, problems, job, lock, insights, *, narrow: bool, short_insights: bool,
                 ids: int, width: int | None = None) -> Text:
    """The header's parts; with ``width``, only those that fit whole (the first is always kept)."""
    text = Text()
    text.append(" memory-tui ", "bold reverse")
    if model is None:
        return text
    parts: list[tuple[str, str, str | None]] = [(model.display_dir, "bold", None)]
    if model.workspace_id and ids >= 2:
        parts.append((model.workspace_id, "", None))
    if model.revision and ids >= 1:
        parts.append((("" if narrow else "rev ") + model.revision[:8], "dim", None))
    st = model.status
    if model.memory_exists:
        if not model.enabled:
            parts.append(("memory off", "bold red", None))
        elif not model.writer_enabled:
            parts.append(("writer off", "bold yellow", None))
        elif st.last_outcome == "failure" and st.last_failure_code == LOST_LOCK_RACE:
            # losing the write-lock race is no writer failure: nothing was written
            # and a retry can succeed
            parts.append(("lock busy: retry" if narrow else "writer: lost the lock race, retry", "bold yellow", None))
        elif st.last_outcome == "failure":
            code = st.last_failure_code or "failure"
            parts.append(((f"{glyphs.bad} " if narrow else f"writer {glyphs.bad} ") + code, "bold red", None))
        elif st.last_outcome == "success":
            when = relative_time(st.last_success_at, now)
            parts.append(((f"{glyphs.ok} " if narrow else f"writer {glyphs.ok} ") + when, "green", None))
        else:
            parts.append(("writer: never ran" if not narrow else "no writes", "dim", None))
        if st.pending_turns is not None:
            parts.append((f"{st.pending_turns} pending" if not narrow else f"pend {st.pending_turns}", "", None))
    n = len(model.problems) if problems is None else problems
    if n:
        parts.append((f"{n} problem" + ("s" if n != 1 else ""), "bold yellow", "app.problems"))
    if job:  # a running job's progress goes first, so a narrow header keeps it
        parts.insert(1, (job, "bold cyan", None))
    if lock:  # someone else holds the write lock; a job would wait, then stop
        parts.append((lock, "bold magenta", None))
    # the three counts, each opening its list in the Evidence screen.
    if insights is not None and model.memory_exists:
        # The adapter's full phrases do not fit one line beside the rest: same counts, short words.
        wide = {"single": "single-episode", "alternatives": "with alternatives", "pending": "citing pending"}
        short = {"single": "1ep", "alternatives": "alt", "pending": "pend-src"}
        for phrase, target in insights.counts.phrases():
            count = phrase.split(" ", 1)[0]
            label = f"{count} {short[target]}" if short_insights else f"{count} {wide[target]}"
            parts.append((label, "yellow" if count != "0" else "dim", f"app.open_evidence('{target}')"))
    sep = " │ " if glyphs is UNICODE else " | "
    for i, (label, style, action) in enumerate(parts):
        if width is not None and i > 0 and text.cell_len + len(sep) + Text(label).cell_len > width:
            continue
        text.append(" " if i == 0 else sep, "dim")
        piece = Text(label, style)
        if action:
            piece.apply_meta({"@click": action if action.endswith(")") else action + "()"})
        text.append_text(piece)
    return text


class HeaderBar(Static):
    DEFAULT_CSS = "HeaderBar { height: 1; }"
