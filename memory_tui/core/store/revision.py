"""The workspace revision (memory spec §2.6), kept per memory root as a resumable chain.

``RevisionChain`` owns the chain of the revision stream (``revstream``) between
transactions: the revision of a walk's stamps, the revision an install leaves (hashed in a
worker while it installs: ``RevisionJob``; or deferred until it is read: ``PendingRevision``),
and the proof that a just-walked workspace still holds the bytes of a revision.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Mapping

from ..format.paths import RUNTIME_NAMES, is_internal_top
from . import revmemo, revstream
from ..cache.stamp import is_racy
from .revstream import ENTRY_REL, NOT_IN_PLACE, held_segment, still_holds, young_at
from ..switches import Switches
from .txmode import in_one_shot
from .walk import Stamp, any_racy


class RevisionChain:
    """The revision stream's chain of one memory root, and what the last installs left of it.
    Shares the workspace cache's lock."""

    def __init__(self, root: Path, lock: threading.RLock) -> None:
        self.root = root
        self.lock = lock
        self._revision: tuple[dict, str] | None = None
        self._walk: tuple[dict[str, Stamp], tuple[str, ...], object, int | None] | None = None  # ``note_walk``
        self._chain: list = []  # the revision stream's chain (``revstream.feed_stream``)
        self._stale = 0  # the chain's hash states from this index on are not of its bytes (a deferred install's)
        self._pending: PendingRevision | None = None  # the last install's revision, not yet hashed
        self._chain_of: PendingRevision | None = None  # the pending revision whose hash the chain is
        # the last revision hashed here: (its stamps, its value, rel -> SHA-256 of every file
        # whose stamp did not prove its bytes then); see ``holds_revision``
        self._hashed: tuple[dict[str, Stamp], str, dict[str, str]] | None = None

    def revision(self, stamps: Mapping[str, tuple], installed: bool = False, *, switches: Switches) -> str:
        """The workspace revision (memory spec §2.6) of the files named by ``stamps`` (as
        ``revision_walk`` lists them: sorted, ``rel -> (mtime_ns, size, inode, ctime_ns)``).

        The revision is one SHA-256 stream over every file in order, so per-file digests cannot
        be combined into it; what can be reused is the hash *state* after a prefix of files,
        and the bytes of the files after it (``revstream.feed_stream``). The bytes fed are exactly
        ``workspace.workspace_revision``'s (a property test compares the two). ``installed``:
        the files a transaction of this process just installed, whose revision is kept for the
        next process (``revmemo``; only then, so a refused or read-only run writes nothing).
        ``switches``: the caller's test switches (``full`` neither resumes nor keeps anything)."""
        with self.lock:
            last = self._revision
            if last is not None and last[0] == stamps:
                return last[1]
            chain, stale, pending = self._chain, self._stale, self._pending
        if pending is not None and pending.holds(stamps):
            return pending.value()
        now = time.time_ns()

        def fed() -> tuple[str, list | None]:
            out = revstream.feed_stream(os.fspath(self.root), chain, list(stamps.items()), {}, now, stale=stale)
            assert out is not None  # only a cancelled feed stops early
            return out

        def kept() -> tuple[str, list | None]:
            # a fresh process has no chain: the revision the last transaction kept, or the last
            # reader, when it proves these files (the chain stays empty; the next feed reads them)
            if chain:
                return fed()
            value = revmemo.lookup(self.root, stamps)
            if value is None and not installed:  # an install keeps the chain it feeds in the state
                value = revmemo.reader_lookup(self.root, stamps)
            if value is not None:
                return value, None
            value, entries = fed()
            if not installed and entries is not None:  # an install keeps it in the state dir
                revmemo.reader_keep(self.root, value, entries)
            return value, entries

        value, entries = switches.choose("revision", kept, fed, lambda a, b: a[0] == b[0])
        with self.lock:
            if entries is not None:
                self._chain, self._stale, self._chain_of = entries, len(entries), None
                self._note_hashed(stamps, value, entries)
            if not any_racy(stamps, now):
                self._revision = (dict(stamps), value)
        if installed and entries is not None:
            self._keep_revision(value, entries, switches)
        return value

    def _keep_revision(self, value: str, entries: list, switches: Switches) -> None:
        if not switches.full:  # the full mode is the code before any cache: it keeps none
            revmemo.keep(self.root, value, entries)

    def note_walk(self, stamps: Mapping[str, Stamp], links: tuple[str, ...], revision: object,
                  generation: int | None = None) -> None:
        """``revision_walk(root)`` as an install under the lock just left it, the revision of
        exactly the bytes it installed (a string or a ``PendingRevision``), and the file-system
        monitor's generation at which these stamps were true (``fsmonitor``; ``None``: no
        monitor), for the next optimistic stage, which ``take_walk`` hands them to once."""
        with self.lock:
            self._walk = (dict(stamps), tuple(links), revision, generation)

    def take_walk(self) -> tuple[dict[str, Stamp], tuple[str, ...], object, int | None] | None:
        with self.lock:
            walk, self._walk = self._walk, None
        return walk

    def start_revision(self, before: Mapping[str, Stamp], changes: Mapping[str, bytes | None], *,
                       switches: Switches) -> "RevisionJob":
        """The revision the workspace will have once ``changes`` (path -> new bytes, ``None``
        = removed) are installed over the files ``before`` names, computed in a worker thread
        from now on: the hash of the new bytes and of everything after them runs while the
        caller installs, flushes caches and writes its bookkeeping (``hashlib`` releases the
        GIL while it hashes, and the stream's unchanged bytes come from memory in a few large
        buffers, so the worker rarely needs the GIL). :meth:`RevisionJob.result` hands the
        value out only for the very stamps the install left; anything else is recomputed."""
        return RevisionJob(self, before, changes, switches)

    def can_defer(self, switches: Switches) -> bool:
        """Whether an install's revision can be left for :meth:`defer_revision` (the caller
        then starts no :class:`RevisionJob`): a chain to build on, held bytes kept between
        transactions (never in a ``one_shot`` process, whose one result is printed at once)
        and not the full-rebuild mode, which keeps nothing."""
        with self.lock:
            return bool(self._chain) and not in_one_shot() and not switches.full

    def defer_revision(self, stamps: Mapping[str, Stamp], puts: Mapping[str, bytes], *,
                       switches: Switches) -> "PendingRevision | str | None":
        """The revision of the files ``stamps`` names right after an install (call under the
        write lock, ``stamps`` as ``installed_stamps`` gives them; ``puts``: the bytes the
        install wrote, by path), hashed only when it is read (:class:`PendingRevision`).

        Everything that could change after the lock is released is settled here: the chain's
        prefix is proven (stamps, young files re-read), and every byte after the resume point
        is taken into memory -- the chain's held bytes (their stamps proven), ``puts``, and any
        other file read now. The chain becomes that unhashed one, so the next install builds
        on it. ``None`` when more than ``TAIL_BYTES`` would have to be read or given (the
        caller hashes now); the value itself when the chain already ends in these files."""
        with self.lock:
            chain, stale = self._chain, self._stale
        now = time.time_ns()
        base = os.fspath(self.root)
        new = {rel: data for rel, data in puts.items() if data is not None and rel in stamps}
        rels = list(stamps)
        deferred = NOT_IN_PLACE
        if len(rels) == len(chain) and list(map(ENTRY_REL, chain)) == rels:
            deferred = revstream.defer_in_place(base, chain, stale, rels, list(stamps.values()), new, now)
        if deferred is NOT_IN_PLACE:
            planned = revstream.plan_stream(base, chain, list(stamps.items()), new, now, read_now=True,
                                            read_limit=revstream.TAIL_BYTES, stale=stale)
            if planned is None:
                return None
            if planned[0] is None:
                return planned[1]
            _digest, entries, todo = planned
            resume = len(entries) - 1
            for rel, st, check, seg, data in todo:
                entries.append((rel, st, check, None, seg if seg is not None else held_segment(rel, data)))
            deferred = entries, resume, resume + 1
        if deferred is None:
            return None
        entries, resume, stale = deferred
        young = {entries[j][0]: entries[j][2] for j in young_at(entries)}
        pending = PendingRevision(self, dict(stamps), entries, resume, young, now, switches)
        with self.lock:
            self._chain, self._stale, self._chain_of = entries, stale, None
            self._pending = pending
        return pending

    def _complete(self, pending: "PendingRevision", entries: list, resume: int) -> str:
        """Hash what ``pending`` holds (everything after its resume point is in memory); the
        hashed chain replaces this one when that is still ``pending``'s unhashed one."""
        digest = entries[resume][3].copy() if resume >= 0 else hashlib.sha256()
        todo = [(e[0], e[1], e[2], e[4], None) for e in entries[resume + 1:]]
        fed = revstream.feed_planned(os.fspath(self.root), digest, entries[:resume + 1], todo, pending.planned_at, True)
        assert fed is not None  # only a cancelled feed stops early
        value, out = fed
        now = time.time_ns()
        with self.lock:
            if self._chain is entries:
                self._chain, self._stale, self._chain_of = out, len(out), pending
                self._pending = None
                self._note_hashed(pending.stamps, value, out)
                if not any_racy(pending.stamps, now):
                    self._revision = (pending.stamps, value)
        return value

    def _keep_hashed(self, pending: "PendingRevision", value: str) -> None:
        """Keep ``pending``'s value for the next process while the chain is still its hash."""
        with self.lock:
            chain = self._chain if self._chain_of is pending else None
        if chain is not None:
            self._keep_revision(value, chain, pending.switches)

    def _note_hashed(self, stamps: Mapping[str, Stamp], value: str, entries: list) -> None:
        if len(entries) == len(stamps):  # call with ``self.lock`` held
            self._hashed = (dict(stamps), value, {e[0]: e[2] for e in entries if e[2] is not None})

    def holds_revision(self, stamps: Mapping[str, Stamp], revision: str) -> bool:
        """The files ``stamps`` names (just walked) provably hold the bytes of ``revision``
        without hashing the stream again: the last revision hashed here is ``revision``, of these
        very stamps, and every file whose stamp did not prove its bytes then (inside the clock
        tick: a same-size write in place may keep the stamp) holds the bytes hashed, by SHA-256
        read again now. A file whose stamp proved its bytes then still does (its stamp is
        unchanged, and no later write can keep it). What is read is the files young at that
        hash -- after an install, the ones it wrote -- not the whole stream. ``False`` means
        "not proven" (the caller compares revisions), never "changed"."""
        if isinstance(revision, PendingRevision):
            return revision.owner is self and revision.holds(stamps)
        with self.lock:
            hashed = self._hashed
        if hashed is None or hashed[1] != revision or hashed[0] != stamps:
            return False
        return still_holds(os.fspath(self.root), hashed[2])

    def _commit_stream(self, entries: list, stamps: Mapping[str, Stamp], value: str, now: int,
                       switches: Switches) -> None:
        with self.lock:
            self._chain, self._stale, self._chain_of = entries, len(entries), None
            self._note_hashed(stamps, value, entries)
            if not any_racy(stamps, now):
                self._revision = (dict(stamps), value)
        self._keep_revision(value, entries, switches)


class PendingRevision:
    """The revision an install left, hashed when first read (:meth:`value`).

    The revision is one SHA-256 stream over every file (memory spec §2.6), so hashing it after
    an edit costs the stream from the first changed file to the end: O(workspace) for any
    edit. An edit whose caller never reads the value (a run of edits in process, each
    compared with the next by :meth:`holds`) does not pay it; one that does pays it then,
    outside the write lock. The value is exact whenever it is read: every byte it hashes was
    proven or read under the lock (``RevisionChain.defer_revision``) and is held in memory;
    nothing is read from disk afterwards, so a later change of the files cannot leak in."""

    def __init__(self, owner: RevisionChain, stamps: dict[str, Stamp], entries: list, resume: int,
                 young: dict[str, str], planned_at: int, switches: Switches) -> None:
        self.owner = owner
        self.switches = switches  # the deferring transaction's: whether the value is kept
        self.stamps = stamps  # the files as the install left them
        self.planned_at = planned_at
        self._entries: list | None = entries  # the unhashed chain, until hashed
        self._resume = resume  # index of its last entry with a hash state (-1: none)
        self._young = young  # rel -> SHA-256 of each file its stamp did not prove then
        self._value: str | None = None
        self._kept = False  # kept for the next process (``revmemo``) once
        self._lock = threading.Lock()

    def value(self, installer: bool = False) -> str:
        """The revision, hashed at the first call. ``installer``: the caller is the install's
        own result (``TxResult.revision``), whose value is kept for the next process
        (``revmemo``) as an install that hashed at once keeps it; a reader's call never writes."""
        with self._lock:
            if self._value is None:
                assert self._entries is not None
                self._value = self.owner._complete(self, self._entries, self._resume)
                self._entries = None  # the chain keeps what it needs; the held bytes go
            if installer and not self._kept:
                self._kept = True
                self.owner._keep_hashed(self, self._value)
            return self._value

    @property
    def hashed(self) -> bool:
        return self._value is not None

    def holds(self, stamps: Mapping[str, Stamp]) -> bool:
        """The files ``stamps`` names (just walked) hold exactly the bytes of this revision:
        the same stamps, and every file young then re-read and its SHA-256 compared (a
        same-size write in place inside the clock tick can keep a stamp). ``False`` means
        "not proven", never "changed"."""
        return stamps == self.stamps and still_holds(os.fspath(self.owner.root), self._young)

    def __repr__(self) -> str:
        return f"PendingRevision({self._value or 'not hashed'})"


class InstalledRevision:
    """A ``PendingRevision`` as its install's own result holds it: read there, its value is
    kept for the next process (``PendingRevision.value``'s ``installer``)."""

    __slots__ = ("pending",)

    def __init__(self, pending: PendingRevision) -> None:
        self.pending = pending

    def value(self) -> str:
        return self.pending.value(installer=True)


def revision_text(revision: "str | PendingRevision | InstalledRevision | None") -> str | None:
    """A revision as the string every reader sees (a pending one is hashed now)."""
    return revision if revision is None or type(revision) is str else revision.value()


class RevisionJob:
    """``RevisionChain.start_revision``'s worker: the revision after an install, hashed while
    the install runs. Nothing it computes is kept unless :meth:`result` is handed the stamps
    the install left and they are exactly the ones it assumed; a cancelled or failed job (the
    transaction failed, or was refused under the lock) leaves the chain as it was."""

    def __init__(self, owner: RevisionChain, before: Mapping[str, Stamp], changes: Mapping[str, bytes | None],
                 switches: Switches) -> None:
        self.owner = owner
        self.switches = switches  # the starting transaction's
        puts: dict[str, bytes] = {}
        gone: set[str] = set()
        for rel, data in changes.items():
            parts = rel.split("/")
            if is_internal_top(parts[0]) and not (len(parts) == 2 and parts[0] in RUNTIME_NAMES and parts[1] == "runtime.json"):
                continue  # not part of the revision
            if data is None:
                gone.add(rel)
            else:
                puts[rel] = data
        before = dict(before)  # the caller's may change while the worker reads it
        self._puts = puts
        # the chain is then ``before``'s paths in its order (see ``result``)
        self._before = before if not gone and all(rel in before for rel in puts) else None
        self._out: tuple[str, list] | None = None
        self._error: BaseException | None = None
        self._cancel = threading.Event()
        with owner.lock:
            chain, stale = owner._chain, owner._stale
        now = time.time_ns()
        base = os.fspath(owner.root)
        hold = not in_one_shot()

        def run() -> None:
            try:
                if gone or any(rel not in before for rel in puts):
                    items = [(rel, st) for rel, st in before.items() if rel not in gone and rel not in puts]
                    items += [(rel, None) for rel in puts]
                    items.sort(key=lambda item: tuple(item[0].split("/")))
                else:
                    items = [(rel, None if rel in puts else st) for rel, st in before.items()]
                self._out = revstream.feed_stream(base, chain, items, puts, now, self._cancel, hold=hold, stale=stale)
            except BaseException as exc:  # handed to ``result``, which re-raises what is not a race
                self._error = exc

        self._thread = threading.Thread(target=run, name="memory-tui-revision", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Stop and wait for the worker (a no-op once :meth:`result` ran)."""
        self._cancel.set()
        self._thread.join()

    def result(self, stamps: Mapping[str, Stamp]) -> str:
        """The revision of the workspace whose files are ``stamps`` (walked, or derived by
        ``installed_stamps``, after the install): the worker's value when every path, and the
        stamp of every file the install did not write, is the one it assumed; otherwise (or
        when it met a file vanishing) ``RevisionChain.revision(stamps)``, from the files."""
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            if not isinstance(error, OSError):
                raise error
            return self.owner.revision(stamps, installed=True, switches=self.switches)
        out, self._out = self._out, None
        if out is None or len(out[1]) != len(stamps):
            return self.owner.revision(stamps, installed=True, switches=self.switches)
        value, entries = out
        now = time.time_ns()
        puts = self._puts
        if self._before is not None:
            return self._result_in_place(value, entries, stamps, now)
        fixed: list = []
        for entry, (rel, st) in zip(entries, stamps.items()):
            if entry[0] != rel:
                return self.owner.revision(stamps, installed=True, switches=self.switches)
            if entry[1] is None:  # written by the install: its stamp proves it once old enough
                data = puts[rel]
                check = None if len(data) == st[1] and not is_racy(st[0], st[3], now) else entry[2]
                entry = (rel, st, check, entry[3], entry[4])
            elif entry[1] != st:
                return self.owner.revision(stamps, installed=True, switches=self.switches)
            fixed.append(entry)
        self.owner._commit_stream(fixed, stamps, value, now, self.switches)
        return value

    def _result_in_place(self, value: str, entries: list, stamps: Mapping[str, Stamp], now: int) -> str:
        """``result`` for an install that removed and added no file: the chain's paths are
        ``before``'s, in its order, and each entry the install did not write carries
        ``before``'s stamp, so the walk's check is two C-level comparisons (``before`` with the
        written files' new stamps equals ``stamps``, in the same order) and only the written
        files' entries are made again -- not a Python loop over every file."""
        before, puts = self._before, self._puts
        assert before is not None
        expected = dict(before)
        for rel in puts:
            expected[rel] = stamps.get(rel)
        keys = list(stamps)
        if expected != stamps or keys != list(expected):
            return self.owner.revision(stamps, installed=True, switches=self.switches)
        fixed = list(entries)
        for rel in puts:
            i = keys.index(rel)
            entry, st, data = fixed[i], stamps[rel], puts[rel]
            if entry[0] != rel or entry[1] is not None:
                return self.owner.revision(stamps, installed=True, switches=self.switches)
            check = None if len(data) == st[1] and not is_racy(st[0], st[3], now) else entry[2]
            fixed[i] = (rel, st, check, entry[3], entry[4])
        self.owner._commit_stream(fixed, stamps, value, now, self.switches)
        return value



__all__ = ["InstalledRevision", "PendingRevision", "RevisionChain", "RevisionJob", "revision_text"]
