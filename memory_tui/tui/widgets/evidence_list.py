"""The Evidence list: every record with its figures, sortable.

``s`` cycles the sort (weakest first, sessions, days, branches, pending, topic, id), ``r``
reverses it; selecting a row posts :class:`EvidenceList.RecordChosen` carrying the row's
view model (never an id to decode).
"""

from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from ..model.insights import EVIDENCE_SORTS, EvidenceRowVM, sort_rows

COLUMNS = ("record", "topic", "sess", "days", "br", "backing", "pending", "episode", "content")


class EvidenceList(DataTable):
    BINDINGS = [
        Binding("s", "cycle_sort", "Sort", id="evidence.sort"),
        Binding("r", "reverse_sort", "Reverse", id="evidence.reverse"),
    ]

    class RecordChosen(Message):
        def __init__(self, row: EvidenceRowVM) -> None:
            super().__init__()
            self.row = row

    class SortChanged(Message):
        def __init__(self, key: str, reverse: bool) -> None:
            super().__init__()
            self.key = key
            self.reverse = reverse

    def __init__(self, rows: Iterable[EvidenceRowVM] = (), *, sort: str = "weakest", reverse: bool = False,
                 **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        if sort not in EVIDENCE_SORTS:
            raise ValueError(f"unknown sort {sort!r}")
        self._rows: tuple[EvidenceRowVM, ...] = tuple(rows)
        self._shown: list[EvidenceRowVM] = []
        self.sort_key = sort
        self.sort_reverse = reverse

    def on_mount(self) -> None:
        for name in COLUMNS:
            self.add_column(name, key=name)
        self._fill()

    @property
    def shown(self) -> tuple[EvidenceRowVM, ...]:
        """Rows in display order."""
        return tuple(self._shown)

    def set_rows(self, rows: Iterable[EvidenceRowVM]) -> None:
        """New figures (after a reload); the cursor stays on the same record when it still exists."""
        current = self._shown[self.cursor_row].memory_id if 0 <= self.cursor_row < len(self._shown) else None
        self._rows = tuple(rows)
        self._fill(keep=current)

    def set_sort(self, key: str, reverse: bool = False) -> None:
        if key not in EVIDENCE_SORTS:
            raise ValueError(f"unknown sort {key!r}")
        current = self._shown[self.cursor_row].memory_id if 0 <= self.cursor_row < len(self._shown) else None
        self.sort_key, self.sort_reverse = key, reverse
        self._fill(keep=current)
        self.post_message(self.SortChanged(key, reverse))

    def action_cycle_sort(self) -> None:
        i = EVIDENCE_SORTS.index(self.sort_key)
        self.set_sort(EVIDENCE_SORTS[(i + 1) % len(EVIDENCE_SORTS)], self.sort_reverse)

    def action_reverse_sort(self) -> None:
        self.set_sort(self.sort_key, not self.sort_reverse)

    def _fill(self, keep: str | None = None) -> None:
        self.clear()
        self._shown = sort_rows(self._rows, self.sort_key, reverse=self.sort_reverse)
        for r in self._shown:
            backing = "owner" if r.owner_backed else "agent" if r.assistant_only else "-"
            self.add_row(
                Text("^" + r.memory_id),
                Text(r.topic_path.removeprefix("topics/")),
                str(r.sessions),
                str(r.days),
                str(r.branches),
                Text(backing, "green" if r.owner_backed else "yellow" if r.assistant_only else ""),
                Text(str(r.pending_sources), "bold red") if r.pending_sources else "-",
                Text("single", "yellow") if r.single_episode else Text("multi", "green"),
                Text(r.content, overflow="ellipsis", no_wrap=True),
                key=r.memory_id,
            )
        if keep is not None:
            for i, r in enumerate(self._shown):
                if r.memory_id == keep:
                    self.move_cursor(row=i)
                    break

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._shown):
            self.post_message(self.RecordChosen(self._shown[event.cursor_row]))
