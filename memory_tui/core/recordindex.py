"""Which topic file holds each memory id, kept between processes, so a fresh ``apply`` of a
few record ops scans the files those ops name and not every file of the workspace.

A record op finds its target by the id's location in the staged texts (``changes._Work``),
which the full path builds by scanning (or loading the kept scan summary of) all ~300 files:
at scale 1 that is 20 000 locations made for one op. What the ops need of the files they do
not touch is only (a) which file holds an id and (b) whether a ``new-evidence-record-<n>``
footnote id is taken. Both are a pure function of the committed texts, stored here as

* ``shas``: every topic file's SHA-256 (the key: the entry describes exactly these texts),
* ``owner``: id -> the one file whose scan holds it (only when no id is in two files: then
  the order files are scanned in cannot change any location, see ``changes._OwnedIndex``),
* ``labels``: file -> the ``new-evidence-record-`` footnote ids it cites or defines,

in ``<M>/<runtime-dir>/memory-tui-records`` (marshal behind a crc32, ``sealed``), written by
this code only. A process whose texts differ from the entry's in a few files updates it from
those files' scans (the previous ``apply`` changed one or two) and writes it back; more
differences, a duplicate id, a damaged, missing or other code's file rebuild it from every
file's summary (the full path's own input). ``MEMORY_TUI_TX=full`` never reads it;
``check`` runs the ops both ways and compares the outcomes (``changes.apply_memory_changes``'
callers do). The file is outside the revision, git and every stage; OpenProgram ignores it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .changes import NEW_EVIDENCE_PREFIX, ScanSummary, scan_summary
from .fsutil import replace_cache_file
from .parsecache import code_tag
from .paths import Layout
from .sealed import seal, unseal

NAME = "memory-tui-records"
MAGIC = b"memory-tui-records 1\n"
MAX_UPDATED = 16  # files changed since the entry beyond this: rebuilt from the summaries


class Owners:
    """``owner`` (id -> file) and ``labels`` (the taken ``new-evidence-record-`` ids) of one
    set of texts, as ``changes._Work(owned=...)`` reads them."""

    __slots__ = ("owner", "labels")

    def __init__(self, owner: Mapping[str, str], labels: frozenset[str]) -> None:
        self.owner = owner
        self.labels = labels


def _file(root: Path) -> Path:
    return Layout(Path(root)).runtime_dir / NAME


def _read(root: Path) -> tuple[dict[str, str], dict[str, str], dict[str, tuple[str, ...]]] | None:
    try:
        data = _file(root).read_bytes()
    except OSError:
        return None
    value = unseal(MAGIC, data)
    if not (type(value) is tuple and len(value) == 4 and value[0] == code_tag()):
        return None
    _, shas, owner, labels = value
    if not (type(shas) is dict and type(owner) is dict and type(labels) is dict):
        return None
    return shas, owner, labels


def _labels_of(summary: ScanSummary) -> tuple[str, ...]:
    return tuple(sorted(n for n in summary[1] if n.startswith(NEW_EVIDENCE_PREFIX)))


def _add(owner: dict[str, str], labels: dict[str, tuple[str, ...]], path: str, summary: ScanSummary) -> bool:
    """Enter one file; ``False`` when one of its ids is already another file's."""
    for unit in summary[0]:
        mid = unit[0]
        if owner.setdefault(mid, path) != path:
            return False
    found = _labels_of(summary)
    if found:
        labels[path] = found
    return True


def _valid(summary: Any) -> bool:
    from .changes import is_scan_summary

    return summary is not None and is_scan_summary(summary)


def owners(root: Path, texts: Mapping[str, str], shas: Mapping[str, str],
           summaries: Callable[[str, str], ScanSummary | None] | None = None) -> Owners | None:
    """The ``Owners`` of ``texts`` (``shas``: each text's SHA-256, as the stage read them), from
    the kept entry, updated and written back when it was of other texts; ``None`` when some id
    is in two files (then only the full scan gives the index its order-dependent locations)."""
    if set(texts) != set(shas):
        return None
    found = _read(root)
    owner: dict[str, str] | None = None
    labels: dict[str, tuple[str, ...]] = {}
    if found is not None:
        old_shas, owner, labels = found
        if old_shas == shas:
            return _owners(owner, labels)
        moved = [p for p in shas if old_shas.get(p) != shas[p]]
        gone = [p for p in old_shas if p not in shas]
        if len(moved) + len(gone) > MAX_UPDATED:
            owner = None
        else:
            drop = set(moved) | set(gone)
            owner = {mid: p for mid, p in owner.items() if p not in drop}
            labels = {p: v for p, v in labels.items() if p not in drop}
            for path in sorted(moved, key=lambda p: tuple(p.split("/"))):
                if not _add(owner, labels, path, scan_summary(path, texts[path])):
                    return None
    if owner is None:
        owner, labels = {}, {}
        for path in sorted(texts, key=lambda p: tuple(p.split("/"))):
            summary = summaries(path, texts[path]) if summaries is not None else None
            if not _valid(summary):
                summary = scan_summary(path, texts[path])
            if not _add(owner, labels, path, summary):  # type: ignore[arg-type]
                return None
    try:
        replace_cache_file(_file(root), seal(MAGIC, (code_tag(), dict(shas), owner, labels)))
    except OSError:
        pass  # a cache: the next process rebuilds it
    return _owners(owner, labels)


def _owners(owner: dict[str, str], labels: Mapping[str, tuple[str, ...]]) -> Owners:
    return Owners(owner, frozenset(n for v in labels.values() for n in v))
