"""The revision stream: one SHA-256 over every file of the revision, in order (memory spec
§2.6), resumed from a kept chain instead of hashed from the start.

The revision cannot be combined from per-file digests; what can be reused is the hash *state*
after a prefix of files, and the bytes of the files after it. These functions plan and feed
the stream from a chain of entries; ``revision.RevisionChain`` owns the chain between calls.
"""

from __future__ import annotations

import hashlib
import os
import threading
from itertools import compress, repeat
from operator import is_, is_not, itemgetter, ne
from typing import Mapping

from ..cache.stamp import is_racy
from .walk import Stamp

# A chain entry is ``(rel, stamp, check, state, seg)``: the file fed, what proves it still holds
# the bytes fed (``check`` None: its stamp, which was older than the clock tick; else the
# SHA-256 of those bytes, re-read and compared), the hash state right after it (``None``
# between checkpoints: a resume backs up to the last entry that has one and feeds again from
# there), and ``seg``: ``(buffer, start, end)``, the stream bytes fed for it
# (``path NUL bytes NUL``) when they are held in memory.

CHECKPOINT_BYTES = 4 << 20  # along bytes fed from memory, a hash state at least this often
TAIL_BYTES = 48 << 20  # stream bytes held in memory at most (the end of the stream)
MAX_RUNS = 16  # held bytes spread over more separate buffers than this are joined into one

Entry = tuple  # (rel, stamp | None, check | None, state | None, seg | None)


def proof(data: bytes, st: Stamp, now: int) -> str | None:
    """``None`` when ``st`` proves the file holds ``data`` (its size, and older than the clock
    tick: no later write can keep that stamp), else the SHA-256 that must be re-checked."""
    if len(data) == st[1] and not is_racy(st[0], st[3], now):
        return None
    return hashlib.sha256(data).hexdigest()


def feed_stream(base: str, chain: list, items: list, new: Mapping[str, bytes], now: int,
                cancelled: threading.Event | None = None, hold: bool = False,
                stale: int | None = None) -> tuple[str, list] | None:
    """The revision of the files ``items`` (``(rel, stamp)`` in the revision's order) and the
    chain to keep for the next call, where a path in ``new`` will hold those bytes (its stamp
    is ``None``: the caller fills it in once the file is written) and every other file's bytes
    are on disk under ``base``. Pure: reads ``chain``, never changes it.

    The longest prefix of ``chain`` that still holds (same paths; stamps equal, or young files
    re-read and their SHA-256 compared) gives the state to resume from; after it, a file whose
    entry proves it by stamp and holds its bytes in memory is fed from there -- runs of such
    files are contiguous in one buffer and go to ``hashlib`` in a few large updates, which
    release the GIL --, anything else is read from disk. With ``hold`` the bytes read or
    given are kept in memory for the next call (at most ``TAIL_BYTES``, the end of the
    stream: what follows a change, and so what the next change of the same files re-hashes).
    ``stale``: the chain's hash states from that index on are not to be resumed from (see
    ``RevisionChain.defer_revision``). ``None`` when ``cancelled`` was set."""
    planned = plan_stream(base, chain, items, new, now, read_now=hold, stale=stale)
    if planned[0] is None:
        return planned[1], planned[2]
    return feed_planned(base, planned[0], planned[1], planned[2], now, hold, cancelled)


def plan_stream(base: str, chain: list, items: list, new: Mapping[str, bytes], now: int,
                read_now: bool, read_limit: int | None = None, stale: int | None = None) -> tuple | None:
    """``feed_stream``'s first half: everything that must look at the files, nothing hashed.
    ``(None, value, kept)`` when the chain already ends in the state of ``items``; else
    ``(digest, out, todo)``: the state to resume from, the chain entries before it, and what to
    feed after it as ``(rel, stamp, check, seg, data)`` (``seg`` xor ``data``; neither when the
    file is to be read as it is fed, which ``read_now`` rules out). A file in ``new`` with a
    stamp (an install already wrote it) is proven by that stamp like any other. With
    ``read_limit``, ``None`` as soon as more than that many bytes would have to be read from
    disk or given (what a deferred hash would have to hold)."""
    n = len(items)
    kept: list = []
    i = 0
    limit = min(n, len(chain))
    while i < limit:
        rel, st = items[i]
        entry = chain[i]
        if entry[0] != rel or rel in new:
            break
        if entry[2] is None:
            if entry[1] != st:
                break
        else:
            try:
                data = read_file(base, rel)
            except OSError:
                break
            if hashlib.sha256(data).hexdigest() != entry[2]:
                break
            proven = len(data) == st[1] and not is_racy(st[0], st[3], now)
            entry = (rel, st, None if proven else entry[2], entry[3], entry[4])
        kept.append(entry)
        i += 1
    k = (i if stale is None else min(i, stale)) - 1
    while k >= 0 and kept[k][3] is None:
        k -= 1
    if k == n - 1:
        return None, (kept[k][3].hexdigest()[:32] if k >= 0 else hashlib.sha256().hexdigest()[:32]), kept
    digest = kept[k][3].copy() if k >= 0 else hashlib.sha256()
    out = kept[:k + 1]

    todo: list = []
    later: dict | None = None
    budget = read_limit
    for j in range(k + 1, n):
        rel, st = items[j]
        if j < i:  # proven above; only its state was missing
            e = kept[j]
            if e[4] is not None:
                todo.append((rel, e[1], e[2], e[4], None))
                continue
        elif rel in new:
            data = new[rel]
            if budget is not None:
                budget -= len(data)
                if budget < 0:
                    return None
            check = hashlib.sha256(data).hexdigest() if st is None else proof(data, st, now)
            todo.append((rel, st, check, None, data))
            continue
        else:
            e = chain[j] if j < len(chain) and chain[j][0] == rel else None
            if e is None:
                if later is None:
                    later = {c[0]: c for c in chain[i:]}
                e = later.get(rel)
            if e is not None and e[2] is None and e[1] == st and e[4] is not None:
                todo.append((rel, st, None, e[4], None))
                continue
        if read_now:
            if budget is not None:
                budget -= st[1]
                if budget < 0:
                    return None
            data = read_file(base, rel)
            todo.append((rel, st, proof(data, st, now), None, data))
        else:  # read as it is fed: one file in memory at a time, not the whole stream
            todo.append((rel, st, None, None, None))
    return digest, out, todo


ENTRY_REL, _ENTRY_STAMP, _ENTRY_CHECK, _ENTRY_SEG = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(4)
NOT_IN_PLACE = object()


def held_segment(rel: str, data: bytes) -> tuple[bytes, int, int]:
    """A file's stream bytes (``path NUL bytes NUL``) as a held segment."""
    piece = b"".join((rel.encode("utf-8"), b"\x00", data, b"\x00"))
    return piece, 0, len(piece)


def young_at(entries: list) -> list[int]:
    """Where ``entries`` has a file whose stamp did not prove its bytes (C-level passes)."""
    return list(compress(range(len(entries)), map(is_not, map(_ENTRY_CHECK, entries), repeat(None))))


def defer_in_place(base: str, chain: list, stale: int, rels: list[str], stamps: list, new: Mapping[str, bytes],
                   now: int):
    """``RevisionChain.defer_revision`` when the install added and removed no file (the
    chain's paths are ``rels``, in order): ``(entries, resume, stale)``, the chain with the
    entries that moved replaced by their new bytes, the index of the state to resume from and
    the index from which the entries' states are stale. The files that moved, the young ones
    and the ones whose bytes are not held are found by C-level passes over the chain, so the
    work grows with what changed, not with the workspace. ``None`` when more than
    ``TAIL_BYTES`` would have to be read or given; ``NOT_IN_PLACE`` when the general plan
    must decide."""
    n = len(rels)
    moved = set(compress(range(n), map(ne, map(_ENTRY_STAMP, chain), stamps)))
    checks: dict[int, str | None] = {}  # young entries still holding their bytes -> their check now
    for j in young_at(chain):
        rel = rels[j]
        if j in moved or rel in new:
            continue
        try:
            data = read_file(base, rel)
        except OSError:
            return NOT_IN_PLACE
        if hashlib.sha256(data).hexdigest() != chain[j][2]:
            moved.add(j)
            continue
        checks[j] = proof(data, stamps[j], now)
    moved.update(map(rels.index, new))
    if not moved:
        return NOT_IN_PLACE  # nothing moved: the general plan answers from the chain
    stale = min(min(moved), stale)
    resume = stale - 1
    while resume >= 0 and chain[resume][3] is None:
        resume -= 1
    entries = list(chain)
    for j, check in checks.items():
        e = entries[j]
        entries[j] = (e[0], e[1], check, e[3], e[4])
    # after the resume point every byte is held: what moved, and whatever was not held
    unheld = compress(range(resume + 1, n), map(is_, map(_ENTRY_SEG, chain[resume + 1:]), repeat(None)))
    budget = TAIL_BYTES
    for j in sorted(moved.union(unheld)):
        rel, st = rels[j], stamps[j]
        data = new.get(rel)
        if data is None:
            budget -= st[1]
            if budget < 0:
                return None
            data = read_file(base, rel)
        else:
            budget -= len(data)
            if budget < 0:
                return None
        entries[j] = (rel, st, proof(data, st, now), None, held_segment(rel, data))
    return entries, resume, stale


def feed_planned(base: str, digest, out: list, todo: list, now: int, hold: bool,
                 cancelled: threading.Event | None = None) -> tuple[str, list] | None:
    """``feed_stream``'s second half: hash ``todo`` (``plan_stream``) into ``digest`` after
    the entries ``out``, keeping in memory what ``hold`` and ``TAIL_BYTES`` allow."""
    # what stays in memory: the last TAIL_BYTES of the stream
    budget = TAIL_BYTES
    held = [False] * len(todo)
    for j in range(len(todo) - 1, -1, -1):
        rel, _st, _check, seg, data = todo[j]
        if seg is None and not hold:
            continue
        size = seg[2] - seg[1] if seg is not None else len(rel) + len(data) + 2
        if size > budget:
            break
        budget -= size
        held[j] = True
    for j in range(len(out) - 1, -1, -1):
        seg = out[j][4]
        if seg is None:
            continue
        if seg[2] - seg[1] > budget:
            out[j] = out[j][:4] + (None,)
            budget = 0
        else:
            budget -= seg[2] - seg[1]

    # bytes from memory spread over too many separate buffers: joined into one (once after
    # the files were first read, each into its own)
    segs = [t[3] for t in todo if t[3] is not None]
    if segs and 1 + sum(1 for a, b in zip(segs, segs[1:]) if not (a[0] is b[0] and a[2] == b[1])) > MAX_RUNS:
        joined = b"".join([memoryview(sg[0])[sg[1]:sg[2]] for sg in segs])
        pos = 0
        for j, t in enumerate(todo):
            if t[3] is not None:
                size = t[3][2] - t[3][1]
                todo[j] = (t[0], t[1], t[2], (joined, pos, pos + size), None)
                pos += size

    # feed: runs of contiguous held bytes in large updates, other files one by one
    run: list = []  # indexes into todo of the current run of contiguous bytes

    def flush() -> bool:
        if not run:
            return True
        buf, start = todo[run[0]][3][0], todo[run[0]][3][1]
        view = memoryview(buf)
        mark = start
        for pos, j in enumerate(run):
            rel, st, check, seg, _data = todo[j]
            state = None
            if pos == len(run) - 1 or seg[2] - mark >= CHECKPOINT_BYTES:
                if cancelled is not None and cancelled.is_set():
                    return False
                digest.update(view[mark:seg[2]])
                mark = seg[2]
                state = digest.copy()
            out.append((rel, st, check, state, seg if held[j] else None))
        run.clear()
        return True

    for j, (rel, st, check, seg, data) in enumerate(todo):
        if seg is not None:
            if run:
                prev = todo[run[-1]][3]
                if not (prev[0] is seg[0] and prev[2] == seg[1]):
                    if not flush():
                        return None
            run.append(j)
            continue
        if not flush():
            return None
        if cancelled is not None and cancelled.is_set():
            return None
        if data is None:
            data = read_file(base, rel)
            check = proof(data, st, now)
        name = rel.encode("utf-8")
        if held[j]:
            piece = b"".join((name, b"\x00", data, b"\x00"))
            digest.update(piece)
            kept_seg = (piece, 0, len(piece))
        else:
            digest.update(name)
            digest.update(b"\x00")
            digest.update(data)
            digest.update(b"\x00")
            kept_seg = None
        out.append((rel, st, check, digest.copy(), kept_seg))
    if not flush():
        return None
    return digest.hexdigest()[:32], out


def still_holds(base: str, checks: Mapping[str, str]) -> bool:
    """Every file ``checks`` names (``rel -> SHA-256``) still holds those bytes."""
    for rel, check in checks.items():
        try:
            data = read_file(base, rel)
        except OSError:
            return False
        if hashlib.sha256(data).hexdigest() != check:
            return False
    return True


def read_file(base: str, rel: str) -> bytes:
    # plain ``open``: the revision reads every file after the first changed one, and a Path
    # per file costs as much as the read of a small one
    with open(os.path.join(base, rel), "rb") as fh:
        return fh.read()


__all__ = ["CHECKPOINT_BYTES", "ENTRY_REL", "Entry", "MAX_RUNS", "NOT_IN_PLACE", "TAIL_BYTES", "defer_in_place",
           "feed_planned", "feed_stream", "held_segment", "plan_stream", "proof", "read_file", "still_holds", "young_at"]
