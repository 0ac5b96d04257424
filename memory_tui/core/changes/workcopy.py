"""The working copy a record op edits: the staged texts as lines, each file's scan (paragraphs,
headings, footnote definitions, which memory id lives where) and an id index kept current per file.

A record op looks at a few files of a workspace of hundreds, so nothing is done up front that an
op may not need: lines are split on first use, a file known by its kept ``scan_summary`` is
scanned only when an op looks at it, and with ``owned`` (every id's file known) a file is
scanned only when an op names it or one of its ids. Each way gives the index the full scan
would have built; ``records`` applies the ops on top.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..format.topics import (
    DEFINITION_RE,
    Paragraph,
    ParagraphShape,
    is_mem_id,
    iter_blocks,
    paragraph_shape,
    split_lines,
)
from .request import SourceRef

# link_for(source_id, from_dir) -> canonical relative link target; from_dir is the topic
# file's workspace-relative directory ("topics/people"). ``SourceIndex.link_for`` fits.
LinkFor = Callable[[str, str], "str | None"]


class Location(NamedTuple):
    """Where one memory id lives in the current staged texts. A named tuple, not a frozen
    dataclass: a record op builds one per id of the workspace from the kept summaries (20 000
    at scale 1), and a frozen dataclass costs several times more to build."""

    path: str
    para: int  # index into the file's paragraphs
    legacy: bool
    ids: tuple[str, ...]  # block: every alias (identity last); legacy: the ids of its citation group
    group: int | None = None  # legacy: index of the citation group in the paragraph


@dataclass
class FileScan:
    lines: list[str]
    paragraphs: list[Paragraph]
    shapes: list[ParagraphShape]
    headings: list[tuple[int, int, tuple[str, ...]]]  # (0-based line, level, chain)
    defs: dict[str, list[int]]  # footnote id -> 0-based definition lines
    units: dict[str, Location]

    def cited(self, exclude_para: int | None = None) -> set[str]:
        out: set[str] = set()
        for i, shape in enumerate(self.shapes):
            if i != exclude_para:
                out.update(shape.cited)
        return out

    def chains(self) -> list[tuple[str, ...]]:
        return [p.headings for p in self.paragraphs]


def _scan(path: str, lines: list[str]) -> FileScan:
    text = "\n".join(lines)
    paragraphs, classified, heads = iter_blocks(text)
    shapes = [paragraph_shape(p.text) for p in paragraphs]
    headings: list[tuple[int, int, tuple[str, ...]]] = []
    chain: list[str] = []
    for h in heads:
        chain = chain[: h.level - 1] + [h.title]
        headings.append((h.line - 1, h.level, tuple(chain)))
    defs: dict[str, list[int]] = {}
    for line in classified:
        if line.kind == "definition":
            m = DEFINITION_RE.match(line.text)
            if m:
                defs.setdefault(m.group(1), []).append(line.number - 1)
    units: dict[str, Location] = {}
    for pi, shape in enumerate(shapes):
        if shape.ids:
            loc = Location(path, pi, False, shape.ids)
            for bid in shape.ids:
                units.setdefault(bid, loc)
        elif not shape.invalid_ids:
            for gi, (_, _, fids) in enumerate(shape.groups):
                if fids and all(is_mem_id(f) for f in fids):
                    loc = Location(path, pi, True, fids, gi)
                    for fid in fids:
                        units.setdefault(fid, loc)
    return FileScan(lines, paragraphs, shapes, headings, defs, units)


def is_blank_line(line: str) -> bool:
    return not line.strip()


def remove_lines(lines: list[str], start: int, end: int) -> None:
    """Remove lines[start:end] and nothing else. The blank lines around them stay, so a
    delete, move or update can leave two to four consecutive blank lines: that is what
    OpenProgram writes (corpus cases 174, 286, 299), and collapsing them would make every
    such file differ from OpenProgram's bytes. Trailing blank lines go when the file is
    rendered (§3.8 step 6)."""
    del lines[start:end]


# What ``WorkCopy`` needs of a file no op touches: its units' locations (in scan order) and every
# footnote id it cites or defines. A pure function of (path, text); see ``scan_summary``.
ScanSummary = tuple[tuple[tuple[str, int, bool, tuple[str, ...], "int | None"], ...], frozenset[str]]


def scan_summary(path: str, text: str) -> ScanSummary:
    """The summary of one file exactly as ``WorkCopy`` would scan it (a caller may keep it by the
    file's bytes and pass it back through ``apply_memory_changes(summaries=...)``)."""
    scan = _scan(path, split_lines(text))
    units = tuple((mid, loc.para, loc.legacy, loc.ids, loc.group) for mid, loc in scan.units.items())
    notes: set[str] = set(scan.defs)
    for shape in scan.shapes:
        notes.update(shape.cited)
    return units, frozenset(notes)


def is_scan_summary(value: object) -> bool:
    """A well-formed ``ScanSummary`` (a stored one of any other shape is a cache miss)."""
    if not (type(value) is tuple and len(value) == 2 and type(value[1]) is frozenset and type(value[0]) is tuple):
        return False
    if not all(type(n) is str for n in value[1]):
        return False
    for u in value[0]:
        if not (type(u) is tuple and len(u) == 5 and type(u[0]) is str and type(u[1]) is int and type(u[2]) is bool
                and type(u[3]) is tuple and all(type(i) is str for i in u[3]) and (u[4] is None or type(u[4]) is int)):
            return False
    return True


class _Scans(dict):
    """``WorkCopy.scans``: files known only by their summary are scanned on first access."""

    def __init__(self, work: "WorkCopy") -> None:
        super().__init__()
        self._work = work

    def __missing__(self, path: str) -> FileScan:
        if path in self._work.summarized:
            return self._work.materialize(path)
        if path in self._work.pending:
            return self._work.load(path)
        raise KeyError(path)

    def __contains__(self, path: object) -> bool:
        return dict.__contains__(self, path) or path in self._work.summarized or path in self._work.pending

    def get(self, path: str, default: Any = None) -> Any:
        return self[path] if path in self else default


class _Lines(dict):
    """``WorkCopy.lines``: a file's lines are split on first use. A record op looks at a few files
    of a workspace of hundreds; splitting every one up front cost more than the op itself."""

    def __init__(self, texts: Mapping[str, str]) -> None:
        super().__init__()
        self._texts = texts

    def __missing__(self, path: str) -> list[str]:
        if path not in self._texts:
            raise KeyError(path)
        lines = self[path] = split_lines(self._texts[path])
        return lines

    def __contains__(self, path: object) -> bool:
        return dict.__contains__(self, path) or path in self._texts

    def get(self, path: str, default: Any = None) -> Any:
        return self[path] if path in self else default

    def setdefault(self, path: str, default: Any = None) -> Any:
        if path not in self:
            self[path] = default
        return self[path]


class _OwnedIndex(dict):
    """``WorkCopy.index`` when every id's file is known up front (``owners.get(id)``: the one
    file whose scan holds it; no id in two files). A file is scanned when one of its ids is first
    looked up -- before any ``setdefault`` too, so an id a changed file gains never shadows
    the same id of a file not scanned yet. That is the index the full scan would have built:
    with every id in one file, the order files are scanned in cannot matter."""

    def __init__(self, work: "WorkCopy", owners: Mapping[str, str]) -> None:
        super().__init__()
        self._work = work
        self._owners = owners

    def _resolve(self, mid: object) -> None:
        if not dict.__contains__(self, mid):
            path = self._owners.get(mid)  # type: ignore[call-overload]
            if path is not None and path in self._work.pending:
                self._work.load(path)

    def __missing__(self, mid: str) -> Location:
        self._resolve(mid)
        if dict.__contains__(self, mid):
            return dict.__getitem__(self, mid)
        raise KeyError(mid)

    def __contains__(self, mid: object) -> bool:
        self._resolve(mid)
        return dict.__contains__(self, mid)

    def get(self, mid: str, default: Any = None) -> Any:
        self._resolve(mid)
        return dict.get(self, mid, default)

    def setdefault(self, mid: str, default: Any = None) -> Any:
        self._resolve(mid)
        return dict.setdefault(self, mid, default)


class WorkCopy:
    """Mutable working copy of the staged texts with an id index kept current per file.

    With ``summaries(path, text) -> ScanSummary | None``, a file is first known by its summary
    (the index and footnote ids are built from it) and fully scanned only when an op looks at
    it; the index then holds that scan's locations, exactly as if every file had been scanned.

    With ``owned`` (``recordindex.Owners`` of exactly these texts: no id in two files), no
    file is looked at up front: a file is scanned when an op names it or one of its ids, and
    ``footnote_ids`` holds only the ``new-evidence-record-`` ids (the only ones a new label
    is checked against)."""

    def __init__(self, texts: Mapping[str, str], link_for: LinkFor | None,
                 summaries: Callable[[str, str], ScanSummary | None] | None = None,
                 owned: Any = None) -> None:
        self.original = dict(texts)
        self.lines: dict[str, list[str]] = _Lines(self.original)
        self.summarized: dict[str, dict[str, Location]] = {}
        self.pending: set[str] = set()  # files of ``owned`` not scanned yet
        self.scans: dict[str, FileScan] = _Scans(self)
        self.index: dict[str, Location] = {}
        self.footnote_ids: set[str] = set()
        self.link_for = link_for
        self.touched: set[str] = set()
        if owned is not None:
            self.index = _OwnedIndex(self, owned.owner)
            self.pending = set(self.original)
            self.footnote_ids = set(owned.labels)
            return
        for path in sorted(self.original, key=lambda p: tuple(p.split("/"))):
            summary = summaries(path, texts[path]) if summaries is not None else None
            if summary is not None:
                units = {mid: Location(path, para, legacy, ids, group) for mid, para, legacy, ids, group in summary[0]}
                self.summarized[path] = units
                for mid, loc in units.items():
                    self.index.setdefault(mid, loc)
                self.footnote_ids.update(summary[1])
                continue
            scan = self._rescan(path)
            for shape in scan.shapes:
                self.footnote_ids.update(shape.cited)
            self.footnote_ids.update(scan.defs)

    def materialize(self, path: str) -> FileScan:
        """Scan a file known by its summary: its locations in the index become the scan's."""
        units = self.summarized.pop(path)
        if self.lines[path] != split_lines(self.original[path]):
            # Every op scans a file before it edits it; an edit before the first scan would
            # leave the summary's locations in the index, so refuse loudly, never answer wrong.
            raise RuntimeError(f"internal: topics/{path} changed before it was scanned")
        scan = _scan(path, self.lines[path])
        for mid, loc in scan.units.items():
            if self.index.get(mid) is units.get(mid):
                self.index[mid] = loc
        dict.__setitem__(self.scans, path, scan)
        return scan

    def load(self, path: str) -> FileScan:
        """Scan a file not looked at yet (``owned``), as the full scan would have at the start."""
        self.pending.discard(path)
        if dict.__contains__(self.lines, path) and self.lines[path] != split_lines(self.original[path]):
            raise RuntimeError(f"internal: topics/{path} changed before it was scanned")
        scan = _scan(path, self.lines[path])
        dict.__setitem__(self.scans, path, scan)
        for mid, loc in scan.units.items():
            dict.setdefault(self.index, mid, loc)
        return scan

    def _rescan(self, path: str) -> FileScan:
        old = self.scans.get(path)
        if old is not None:
            for mid, loc in old.units.items():
                if self.index.get(mid) is loc:
                    del self.index[mid]
        scan = _scan(path, self.lines.setdefault(path, []))
        self.scans[path] = scan
        for mid, loc in scan.units.items():
            self.index.setdefault(mid, loc)
        return scan

    def changed(self, path: str) -> FileScan:
        self.touched.add(path)
        return self._rescan(path)

    def scan(self, path: str) -> FileScan:
        if path not in self.scans:
            self.lines[path] = []
            return self._rescan(path)
        return self.scans[path]

    def texts(self) -> dict[str, str]:
        out = dict(self.original)
        for path in self.touched:
            lines = self.lines.get(path, [])
            while lines and is_blank_line(lines[-1]):
                lines.pop()
            out[path] = "\n".join(lines) + "\n" if lines else ""
        return out

    def render_definition(self, label: str, time: str, refs: Sequence[SourceRef], path: str) -> str:
        """The definition as OpenProgram first writes it: the source handles as given (the bare
        handle for ``source_refs``, ``[label](handle)`` for ``sources``). The normaliser then
        allocates the ``e-`` id from this form (§3.8 step 2: SEED = the handles) and only
        afterwards expands each handle into its relative link (step 6). Rendering the link first
        would seed a different id (spec §6.1, checked against OpenProgram's corpus)."""
        if all(ref.label is None for ref in refs):
            sources = ", ".join(ref.source for ref in refs)
        else:
            sources = ", ".join(f"[{ref.display}]({ref.source})" for ref in refs)
        return f"[^{label}]: Time: `{time}`; Sources: " + sources

    def remove_unused_definitions(self, path: str, candidates: Sequence[str], keep: Sequence[str] = ()) -> FileScan:
        scan = self.scans[path]
        cited = scan.cited()
        drop = sorted(
            {ln for fid in dict.fromkeys(candidates) if fid not in cited and fid not in keep for ln in scan.defs.get(fid, [])},
            reverse=True,
        )
        lines = self.lines[path]
        for ln in drop:
            remove_lines(lines, ln, ln + 1)
        return self.changed(path) if drop else scan

