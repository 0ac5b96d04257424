"""§6.1 record ops: create, update, delete and move records in the staged topic texts.

``apply_memory_changes`` checks what needs the workspace (every id exists, one update per
block), gives new evidence its local ``new-evidence-record-<i>`` label, and applies the ops on a
``WorkCopy`` (moves last), so each op sees the texts the ops before it left.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..format.errors import MemoryError
from ..format.paths import relpath
from ..format.topics import DEFINITION_RE, paragraph_shape
from ..format.views import rebase_target
from .request import (
    MAX_CHANGES,
    MAX_HEADINGS,
    NEW_EVIDENCE_PREFIX,
    ChangeOutcome,
    Destination,
    RecordOp,
    argument_error,
    change_outcome,
    op_where,
    validate_memory_changes,
)
from .workcopy import FileScan, LinkFor, Location, ScanSummary, WorkCopy, is_blank_line, remove_lines

_LINK_RE = re.compile(r"\[([^\]\n]*)\]\(([^)\n]*)\)")
_BLOCK_LINK_RE = re.compile(r"(\[[^\]\n]*\]\()([^)#\s]*)(#\^[A-Za-z0-9_-]+\))")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _insert_block(lines: list[str], at: int, block: list[str]) -> tuple[int, int]:
    """Insert ``block`` at ``at`` the way OpenProgram joins it in: the text before and the text
    after lose the whitespace at the seam (blank lines left there by an earlier op of the same
    request, trailing spaces, the next line's indent) and meet the block with exactly one
    blank line each side. Returns (index of the block's first line, its number of lines)."""
    before = "\n".join(lines[:at]).rstrip()
    after = "\n".join(lines[at:]).lstrip()
    text = "\n".join(block).strip()
    if not text:  # nothing to insert: the seam is left as it is
        return at, 0
    first = before.count("\n") + 2 if before else 0
    lines[:] = "\n\n".join(part for part in (before, text, after) if part).split("\n")
    return first, text.count("\n") + 1


def _insert_beside(lines: list[str], at: int, block: list[str]) -> None:
    """Insert ``block`` at ``at`` with one blank line of separation each side, leaving the
    lines around it as they are: an updated record's definition goes where OpenProgram's
    in-place replacement of the paragraph puts it (content, blank, definition)."""
    pad_before = at > 0 and not is_blank_line(lines[at - 1])
    pad_after = at < len(lines) and not is_blank_line(lines[at])
    lines[at:at] = ([""] if pad_before else []) + block + ([""] if pad_after else [])


def _rel_link(target: str, old_dir: str, new_dir: str) -> str:
    """Re-relativise a relative ``path#fragment`` target from old_dir to new_dir (workspace dirs)."""
    if "#" not in target:
        return target  # a plain handle (source id, D ref) is location-free
    return rebase_target(target, old_dir, new_dir)


def _relocate_definition(line: str, old_dir: str, new_dir: str) -> str:
    if old_dir == new_dir:
        return line
    return _LINK_RE.sub(lambda m: f"[{m.group(1)}]({_rel_link(m.group(2), old_dir, new_dir)})", line)


def _relocate_block_links(text: str, old_dir: str, new_dir: str) -> str:
    if old_dir == new_dir:
        return text

    def fix(m: re.Match[str]) -> str:
        path = m.group(2)
        if not path.endswith(".md") or path.startswith("/") or _SCHEME_RE.match(path):
            return m.group(0)
        resolved = posixpath.normpath(posixpath.join(old_dir, path))
        return m.group(1) + relpath(resolved, new_dir) + m.group(3)

    return _BLOCK_LINK_RE.sub(fix, text)


def _topic_dir(path: str) -> str:
    return posixpath.dirname("topics/" + path)


def _def_id(line: str) -> str | None:
    m = DEFINITION_RE.match(line)
    return m.group(1) if m else None

def _not_found(mid: str, op: RecordOp, field_name: str) -> MemoryError:
    return MemoryError(
        "MEMORY_NOT_FOUND",
        f"memory_id does not exist: {mid}",  # OpenProgram's words; details name the op
        details={"op_index": op.index, "field": field_name, "memory_id": mid},
    )


def _placement(work: WorkCopy, op: RecordOp, dest: Destination) -> tuple[int, list[str]]:
    """(insertion line index, heading lines to create first) for a destination."""
    scan = work.scan(dest.topic_path)
    lines = scan.lines
    want = dest.headings
    if dest.position in ("before", "after"):
        anchor = dest.anchor_memory_id
        assert anchor is not None
        loc = work.index.get(anchor)
        if loc is None:
            raise MemoryError(
                "MEMORY_NOT_FOUND",
                f"{op_where(op.index)}: anchor_memory_id does not exist: {anchor}",
                details={"op_index": op.index, "field": "destination.anchor_memory_id", "memory_id": anchor},
            )
        ascan = work.scans[loc.path]
        para = ascan.paragraphs[loc.para]
        if loc.path != dest.topic_path or para.headings != want:
            raise argument_error(
                f"{op_where(op.index, 'destination')}: anchor {anchor} is in topics/{loc.path} under "
                f"{list(para.headings)}, not in {dest.workspace_path} under {list(want)}",
                op_index=op.index,
                field="destination.anchor_memory_id",
                memory_id=anchor,
            )
        if dest.position == "before":
            return para.start - 1, []
        # Right after the anchor paragraph, before its own definitions: OpenProgram's
        # placement (corpus cases 185, 186, 190).
        return para.end, []

    def back_off(at: int, floor: int) -> int:
        while at > floor and is_blank_line(lines[at - 1]):
            at -= 1
        return at

    if not want:
        first = scan.headings[0][0] if scan.headings else len(lines)
        return (0, []) if dest.position == "start" else (back_off(first, 0), [])
    for k in range(len(want), 0, -1):
        match = next((h for h in scan.headings if h[2] == want[:k]), None)
        if match is None:
            continue
        hline, hlevel, _ = match
        following = [h for h in scan.headings if h[0] > hline]
        if k == len(want):
            if dest.position == "start":
                return hline + 1, []
            nxt = following[0][0] if following else len(lines)
            return back_off(nxt, hline + 1), []
        end = next((h[0] for h in following if h[1] <= hlevel), len(lines))
        return back_off(end, hline + 1), _heading_lines(op, want, k)
    return back_off(len(lines), 0), _heading_lines(op, want, 0)


def _heading_lines(op: RecordOp, want: tuple[str, ...], have: int) -> list[str]:
    out: list[str] = []
    for j, title in enumerate(want[have:]):
        level = have + 1 + j
        if level > MAX_HEADINGS:
            raise argument_error(f"{op_where(op.index, 'destination')}: cannot create a heading deeper than level 6", op_index=op.index, field="destination.headings")
        out += ["#" * level + " " + title, ""]
    return out


def _insert_records(work: WorkCopy, op: RecordOp, dest: Destination, block: list[str]) -> None:
    """Insert record paragraphs (+ their definitions) at the destination and check that they
    landed under exactly the requested heading chain without moving any other record. When new
    headings are needed and irregular heading levels make the natural spot (the end of the
    matching section) change other records' chains, the end of the file is tried too."""
    path = dest.topic_path
    scan = work.scan(path)
    before_chains = scan.chains()
    original = list(work.lines[path])
    at, heads = _placement(work, op, dest)
    candidates = [at]
    if heads:
        eof = len(original)
        while eof > 0 and is_blank_line(original[eof - 1]):
            eof -= 1
        if eof != at:
            candidates.append(eof)
    for at in candidates:
        lines = work.lines[path] = list(original)
        first, count = _insert_block(lines, at, heads + block)
        new = work.changed(path)
        inserted = [i for i, p in enumerate(new.paragraphs) if first <= p.start - 1 < first + count]
        others = [p.headings for i, p in enumerate(new.paragraphs) if i not in inserted]
        if others == before_chains and all(new.paragraphs[i].headings == dest.headings for i in inserted):
            return
    work.lines[path] = original
    work.changed(path)
    raise argument_error(
        f"{op_where(op.index, 'destination')}: cannot place a record under {list(dest.headings)} in "
        f"{dest.workspace_path} without changing the sections of other records (irregular heading levels)",
        op_index=op.index,
        field="destination.headings",
    )


def _record_lines(content: str, label: str, ids: Sequence[str] = ()) -> list[str]:
    lines = content.split("\n")
    lines[-1] = lines[-1] + f"[^{label}]" + ("".join(f" ^{i}" for i in ids))
    return lines


def _replace_paragraph(work: WorkCopy, loc: Location, new_lines: list[str]) -> FileScan:
    scan = work.scans[loc.path]
    para = scan.paragraphs[loc.para]
    work.lines[loc.path][para.start - 1 : para.end] = new_lines
    return work.changed(loc.path)


def _remove_paragraph(work: WorkCopy, loc: Location) -> FileScan:
    scan = work.scans[loc.path]
    para = scan.paragraphs[loc.para]
    remove_lines(work.lines[loc.path], para.start - 1, para.end)
    return work.changed(loc.path)


def _legacy_pieces(scan: FileScan, loc: Location) -> tuple[str, int, int, int]:
    """(paragraph text, segment start, group start, group end) of a legacy unit."""
    text = scan.paragraphs[loc.para].text
    groups = scan.shapes[loc.para].groups
    assert loc.group is not None
    gstart, gend, _ = groups[loc.group]
    seg_start = groups[loc.group - 1][1] if loc.group > 0 else 0
    return text, seg_start, gstart, gend


def _cut_legacy(work: WorkCopy, loc: Location, only: str | None) -> tuple[str, FileScan]:
    """Remove a legacy unit from its paragraph. ``only`` = remove just that id from a shared
    group. Returns (the removed segment text, new scan)."""
    scan = work.scans[loc.path]
    text, seg_start, gstart, gend = _legacy_pieces(scan, loc)
    segment = text[seg_start:gstart]
    if only is not None:
        group = text[gstart:gend].replace(f"[^{only}]", "", 1)
        new_text = text[:gstart] + group + text[gend:]
    else:
        new_text = text[:seg_start] + text[gend:]
        if seg_start == 0:
            new_text = new_text.lstrip()
    if not paragraph_shape(new_text).groups or not new_text.strip():
        return segment, _remove_paragraph(work, loc)
    return segment, _replace_paragraph(work, loc, new_text.split("\n"))


def _do_create(work: WorkCopy, op: RecordOp, label: str) -> None:
    dest = op.destination
    assert dest is not None and op.content is not None and op.time is not None
    definition = work.render_definition(label, op.time, op.refs, dest.topic_path)
    _insert_records(work, op, dest, _record_lines(op.content, label) + ["", definition])


def _do_update(work: WorkCopy, op: RecordOp, label: str | None) -> None:
    mid = op.memory_id
    assert mid is not None and op.content is not None and op.time is not None
    loc = work.index.get(mid)
    if loc is None:
        raise _not_found(mid, op, "memory_id")
    scan = work.scans[loc.path]
    if loc.legacy:
        if len(loc.ids) > 1:
            raise argument_error(
                f"{op_where(op.index)}: legacy unit {mid} shares its text with {', '.join(i for i in loc.ids if i != mid)}; "
                "update would change them too",
                op_index=op.index,
                field="memory_id",
                memory_id=mid,
            )
        if mid in scan.cited(exclude_para=loc.para):
            raise argument_error(
                f"{op_where(op.index)}: evidence [^{mid}] is also cited by another paragraph; update would change it",
                op_index=op.index,
                field="memory_id",
                memory_id=mid,
            )
        text, seg_start, gstart, _ = _legacy_pieces(scan, loc)
        segment = text[seg_start:gstart]
        lead = segment[: len(segment) - len(segment.lstrip())]
        new_text = text[:seg_start] + lead + op.content + text[gstart:]
        scan = _replace_paragraph(work, loc, new_text.split("\n"))
        definition = work.render_definition(mid, op.time, op.refs, loc.path)
        lines = work.lines[loc.path]
        existing = scan.defs.get(mid, [])
        if existing:
            lines[existing[0]] = definition
            for ln in sorted(existing[1:], reverse=True):
                remove_lines(lines, ln, ln + 1)
            work.changed(loc.path)
        else:
            para = scan.paragraphs[work.index[mid].para]
            _insert_beside(lines, para.end, [definition])
            work.changed(loc.path)
        return
    assert label is not None
    old_cited = scan.shapes[loc.para].cited
    scan = _replace_paragraph(work, loc, _record_lines(op.content, label, loc.ids))
    para = scan.paragraphs[work.index[mid].para]
    definition = work.render_definition(label, op.time, op.refs, loc.path)
    _insert_beside(work.lines[loc.path], para.end, [definition])
    work.changed(loc.path)
    work.remove_unused_definitions(loc.path, old_cited)


def _do_delete(work: WorkCopy, op: RecordOp) -> None:
    mid = op.memory_id
    assert mid is not None
    loc = work.index.get(mid)
    if loc is None:
        raise _not_found(mid, op, "memory_id")
    scan = work.scans[loc.path]
    cited = scan.shapes[loc.para].cited
    if loc.legacy:
        _, scan = _cut_legacy(work, loc, mid if len(loc.ids) > 1 else None)
        work.remove_unused_definitions(loc.path, [mid])
        return
    if len(loc.ids) > 1:
        para = scan.paragraphs[loc.para]
        shape = scan.shapes[loc.para]
        body = para.text[: shape.body_end].rstrip()
        remaining = [i for i in loc.ids if i != mid]
        _replace_paragraph(work, loc, (body + "".join(f" ^{i}" for i in remaining)).split("\n"))
        return
    _remove_paragraph(work, loc)
    work.remove_unused_definitions(loc.path, cited)


def _do_move(work: WorkCopy, op: RecordOp) -> None:
    dest = op.destination
    assert dest is not None
    dest_dir = _topic_dir(dest.topic_path)
    moved: set[str] = set()
    pieces: list[tuple[list[str], list[str]]] = []  # (paragraph lines, definition lines)
    for mid in op.memory_ids:
        if mid in moved:
            continue
        loc = work.index.get(mid)
        if loc is None:
            raise _not_found(mid, op, "memory_ids")
        group = [i for i in op.memory_ids if i in loc.ids]
        if sorted(group) != sorted(loc.ids):
            missing = [i for i in loc.ids if i not in group]
            raise argument_error(
                f"{op_where(op.index)}: moving {mid} must also move {', '.join(missing)} (same block)",
                op_index=op.index,
                field="memory_ids",
                memory_id=mid,
            )
        if tuple(group) != loc.ids:
            raise argument_error(
                f"{op_where(op.index)}: ids of one block must be listed in their order: {', '.join(loc.ids)}",
                op_index=op.index,
                field="memory_ids",
                memory_id=mid,
            )
        moved.update(loc.ids)
        scan = work.scans[loc.path]
        src_dir = _topic_dir(loc.path)
        if loc.legacy:
            text, _, gstart, gend = _legacy_pieces(scan, loc)
            cites = list(loc.ids)
            segment, _ = _cut_legacy(work, loc, None)
            para_text = segment.strip() + text[gstart:gend]
        else:
            para_text = scan.paragraphs[loc.para].text
            cites = list(dict.fromkeys(scan.shapes[loc.para].cited))
            _remove_paragraph(work, loc)
        scan = work.scans[loc.path]
        defs = [_relocate_definition(scan.lines[scan.defs[f][0]], src_dir, dest_dir) for f in cites if f in scan.defs]
        work.remove_unused_definitions(loc.path, cites)
        pieces.append((_relocate_block_links(para_text, src_dir, dest_dir).split("\n"), defs))
    # evidence definitions: reuse an identical one in the destination, refuse a conflicting one
    dscan = work.scan(dest.topic_path)
    have: dict[str, str] = {fid: work.lines[dest.topic_path][lns[0]].strip() for fid, lns in dscan.defs.items()}
    # All moved paragraphs first, then all their definitions, each separated by one blank
    # line: the order OpenProgram writes (corpus cases 305, 306).
    paragraphs: list[str] = []
    definitions: list[str] = []
    for para_lines, defs in pieces:
        for d in defs:
            fid = _def_id(d)
            assert fid is not None
            if fid in have:
                if have[fid] != d.strip():
                    raise argument_error(
                        f"{op_where(op.index)}: conflicting evidence definitions for [^{fid}] in {dest.workspace_path}",
                        op_index=op.index,
                        field="memory_ids",
                        evidence_id=fid,
                    )
                continue
            have[fid] = d.strip()
            definitions += ([""] if definitions else []) + [d]
        paragraphs += ([""] if paragraphs else []) + para_lines
    _insert_records(work, op, dest, paragraphs + ([""] + definitions if definitions else []))


def apply_memory_changes(
    texts: Mapping[str, str],
    committed_tree: Any = None,
    ops: Sequence[RecordOp] | Sequence[Mapping[str, Any]] = (),
    *,
    link_for: LinkFor | None = None,
    summaries: Callable[[str, str], ScanSummary | None] | None = None,
    owned: Any = None,
) -> ChangeOutcome:
    """Apply record ops (§6.1) to the staged topic texts.

    ``summaries(path, text)``: a caller's kept ``scan_summary`` of that text (or None), so the
    files no op touches are not scanned; the outcome is the same either way. ``owned``
    (``recordindex.Owners`` of exactly ``texts``) goes further: only the files the ops name
    are scanned, and no summary is looked up.

    ``ops`` are validated ``RecordOp``s (raw dicts are validated here). Memory ids are looked up
    in ``texts`` (at this point of a transaction they equal the committed tree);
    ``committed_tree`` (a ``topics.TopicTree``), when given, must know every targeted id too,
    so an id that only exists in uncommitted staged text is not found. ``link_for`` renders
    canonical source links (plain handles are written when it is missing).
    """
    if ops and not all(isinstance(o, RecordOp) for o in ops):
        ops = validate_memory_changes(list(ops))
    if not ops:
        raise argument_error(f"memory_changes must be a list of 1 to {MAX_CHANGES} changes", field="memory_changes")
    work = WorkCopy(texts, link_for, summaries, owned)
    # ``has_id``: the tree's own lookup, not a set of all its ids built for a few questions
    in_tree = getattr(committed_tree, "has_id", None) if committed_tree is not None else None
    if in_tree is None and committed_tree is not None:
        committed_ids = getattr(committed_tree, "ids", None)
        in_tree = committed_ids.__contains__ if committed_ids is not None else None

    def exists(mid: str) -> bool:
        return mid in work.index and (in_tree is None or in_tree(mid))

    # existence and the rules that need the tree
    update_block: dict[tuple[Any, ...], int] = {}
    for op in ops:
        fld = "memory_ids" if op.op == "move_records" else "memory_id"
        for mid in op.target_ids:
            if not exists(mid):
                raise _not_found(mid, op, fld)
        if op.op == "update_record":
            assert op.memory_id is not None
            loc = work.index[op.memory_id]
            key = (loc.path, loc.para, loc.group)
            if key in update_block:
                raise argument_error(
                    f"{op_where(op.index)}: {op.memory_id} is the same block as the one memory_changes[{update_block[key]}] updates",
                    op_index=op.index,
                    field="memory_id",
                    memory_id=op.memory_id,
                )
            update_block[key] = op.index

    order = [o for o in ops if o.op != "move_records"] + [o for o in ops if o.op == "move_records"]
    labels: dict[int, str] = {}
    taken = set(work.footnote_ids)
    for pos, op in enumerate(order, start=1):
        needs = op.op == "create_record" or (
            op.op == "update_record" and not work.index[op.memory_id].legacy  # type: ignore[index]
        )
        if needs:
            i = pos
            while f"{NEW_EVIDENCE_PREFIX}{i}" in taken:
                i += 1
            labels[op.index] = f"{NEW_EVIDENCE_PREFIX}{i}"
            taken.add(labels[op.index])

    for op in order:
        if op.op == "create_record":
            _do_create(work, op, labels[op.index])
        elif op.op == "update_record":
            _do_update(work, op, labels.get(op.index))
        elif op.op == "delete_record":
            _do_delete(work, op)
        else:
            _do_move(work, op)

    allowed = frozenset(r.source for o in ops for r in o.refs)
    removable = frozenset(o.memory_id for o in ops if o.op == "delete_record" and o.memory_id)
    return change_outcome(texts, work.texts(), allowed=allowed, removable=removable, labels=labels)
