"""Which topic file holds each memory id, kept between processes, so a fresh ``apply`` of a
few record ops scans the files those ops name and not every file of the workspace.

A record op finds its target by the id's location in the staged texts (``changes._Work``),
which the full path builds by scanning (or loading the kept scan summary of) all ~300 files:
at scale 1 that is 20 000 locations made for one op. What the ops need of the files they do
not touch is only (a) which file holds an id and (b) whether a ``new-evidence-record-<n>``
footnote id is taken. Both are a pure function of the committed texts, stored here as

* ``shas``: every topic file's SHA-256 (the key: the entry describes exactly these texts),
* ``ids``: file -> the ids its scan holds, one per line (only when no id is in two files:
  then the order files are scanned in cannot change any location, see ``changes._OwnedIndex``),
* ``labels``: file -> the ``new-evidence-record-`` footnote ids it cites or defines,

in ``<M>/<runtime-dir>/memory-tui-records`` (one envelope of the cache kit,
``cache.envelope``), written by this code only. A process whose texts differ from the entry's in a few files updates it from
those files' scans (the previous ``apply`` changed one or two) and writes it back; more
differences, a duplicate id, a damaged, missing or other code's file rebuild it from every
file's summary (the full path's own input). ``MEMORY_TUI_TEST_DERIVE=full`` never reads it;
``check`` runs the ops both ways and compares the outcomes (``changes.apply_memory_changes``'
callers do). The file is outside the revision, git and every stage; OpenProgram ignores it.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..changes.request import NEW_EVIDENCE_PREFIX
from ..changes.workcopy import ScanSummary, scan_summary
from .parsecache import code_tag
from ..format.paths import Layout
from ..cache import envelope

NAME = "memory-tui-records"
KIND = "records"
VERSION = 2
MAX_UPDATED = 16  # files changed since the entry beyond this: rebuilt from the summaries


class Owners:
    """Which file holds each id (``ids``: file -> its ids, each on a line of its own, so one
    substring search finds an id's file without building a map of all 20 000) and ``labels``
    (the taken ``new-evidence-record-`` ids), as ``changes._Work(owned=...)`` reads them."""

    __slots__ = ("ids", "labels", "owner")

    def __init__(self, ids: Mapping[str, str], labels: frozenset[str]) -> None:
        self.ids = ids
        self.labels = labels
        self.owner = _Finder(ids)


class _Finder:
    """``owner.get(mid)``: the file holding ``mid``, or ``None``."""

    __slots__ = ("_ids", "_seen", "_all", "_starts", "_paths")

    def __init__(self, ids: Mapping[str, str]) -> None:
        self._ids = ids
        self._seen: dict[str, str | None] = {}
        self._all: str | None = None

    def get(self, mid: str, default: None = None) -> str | None:
        if mid in self._seen:
            return self._seen[mid]
        found = None
        needle = f"\n{mid}\n"
        if mid and "\n" not in mid:
            if self._all is None:
                # every file's lines in one string: a lookup is one C-level search, not one
                # per file (a changed file's rescan looks up each of its ~200 ids)
                self._paths = list(self._ids)
                held = list(self._ids.values())
                self._starts = list(itertools.accumulate(map(len, held), initial=0))
                framed = all(h[:1] == "\n" and h[-1:] == "\n" for h in held)
                self._all = "".join(held) if framed else ""
            if self._all:
                # every file's string starts and ends with a line break, so the needle of a
                # non-empty id without one lies inside one file's string
                at = self._all.find(needle)
                if at >= 0:
                    found = self._paths[bisect.bisect_right(self._starts, at) - 1]
            else:
                for path, held_ids in self._ids.items():
                    if needle in held_ids:
                        found = path
                        break
        self._seen[mid] = found
        return found


def _file(root: Path) -> Path:
    return Layout(Path(root)).runtime_dir / NAME


def _read(root: Path) -> tuple[dict[str, str], dict[str, str], dict[str, tuple[str, ...]]] | None:
    value = envelope.read(_file(root), KIND, VERSION)
    if not (type(value) is tuple and len(value) == 4 and value[0] == code_tag()):
        return None
    _, shas, ids, labels = value
    if not (type(shas) is dict and type(ids) is dict and type(labels) is dict):
        return None
    return shas, ids, labels


def _entry(summary: ScanSummary) -> tuple[str, tuple[str, ...]] | None:
    """One file's ids (one per line) and taken labels; ``None`` for an id no line can hold."""
    mids = [unit[0] for unit in summary[0]]
    if any("\n" in m or not m for m in mids):
        return None
    return "\n" + "".join(m + "\n" for m in mids), tuple(sorted(n for n in summary[1] if n.startswith(NEW_EVIDENCE_PREFIX)))


def _valid(summary: Any) -> bool:
    from ..changes.workcopy import is_scan_summary

    return summary is not None and is_scan_summary(summary)


def owners(root: Path, texts: Mapping[str, str], shas: Mapping[str, str],
           summaries: Callable[[str, str], ScanSummary | None] | None = None) -> Owners | None:
    """The ``Owners`` of ``texts`` (``shas``: each text's SHA-256, as the stage read them), from
    the kept entry, updated and written back when it was of other texts; ``None`` when some id
    is in two files (then only the full scan gives the index its order-dependent locations)."""
    if set(texts) != set(shas):
        return None
    found = _read(root)
    ids: dict[str, str] | None = None
    labels: dict[str, tuple[str, ...]] = {}
    if found is not None:
        old_shas, ids, labels = found
        if old_shas == shas:
            return _owners(ids, labels)
        moved = sorted((p for p in shas if old_shas.get(p) != shas[p]), key=lambda p: tuple(p.split("/")))
        gone = [p for p in old_shas if p not in shas]
        if len(moved) + len(gone) > MAX_UPDATED:
            ids = None
        else:
            drop = set(moved) | set(gone)
            before = {p: ids[p] for p in moved if p in ids}
            ids = {p: v for p, v in ids.items() if p not in drop}
            labels = {p: v for p, v in labels.items() if p not in drop}
            entries = {}
            for path in moved:
                entry = _entry(scan_summary(path, texts[path]))
                if entry is None:
                    return None
                entries[path] = entry
                ids[path] = entry[0]
                if entry[1]:
                    labels[path] = entry[1]
            for path, entry in entries.items():
                # an id a file held before was in no other file then (the entry had no id
                # twice): only an id new to a file can be another file's now
                held = set(before.get(path, "").split("\n"))
                new = [mid for mid in entry[0].split("\n")[1:-1] if mid not in held]
                if new:
                    others = "".join(v for p, v in ids.items() if p != path)
                    if any(f"\n{mid}\n" in others for mid in new):
                        return None
    if ids is None:
        ids, labels = {}, {}
        seen: set[str] = set()
        for path in sorted(texts, key=lambda p: tuple(p.split("/"))):
            summary = summaries(path, texts[path]) if summaries is not None else None
            if not _valid(summary):
                summary = scan_summary(path, texts[path])
            entry = _entry(summary)  # type: ignore[arg-type]
            if entry is None:
                return None
            mids = [unit[0] for unit in summary[0]]  # type: ignore[index]
            if not seen.isdisjoint(mids):
                return None
            seen.update(mids)
            ids[path] = entry[0]
            if entry[1]:
                labels[path] = entry[1]
    envelope.write(_file(root), KIND, (code_tag(), dict(shas), ids, labels), VERSION)
    return _owners(ids, labels)


def _owners(ids: dict[str, str], labels: Mapping[str, tuple[str, ...]]) -> Owners:
    return Owners(ids, frozenset(n for v in labels.values() for n in v))
