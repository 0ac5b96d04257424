"""Dry-run previews of the jobs, for a confirm dialog (or ``--dry-run`` output).

Each preview runs the job's own ``dry_run=True`` path (``write``, ``reorganize``,
``backfill``) and adds what that path does not say: how many items and tokens in total, and
the files the job is likely to change (paths relative to the state directory, so memory and
session files read alike). Nothing here decides what a job would do; it only reads the
job's own plan, so a preview cannot drift from the job.

``migrate`` has no dry-run mode of its own; its preview composes the same public steps
``migrate_locked`` takes (``candidates`` → ``prefix_to_mark``) without marking anything.

"Likely": a writer other than the embedded one chooses its own topic files, so for it the
topic entry is the pattern ``memory/topics/**/*.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JOBS = ("write", "write-all-forced", "reorganize", "backfill", "migrate")

# Files every installing transaction may rewrite (memory spec §5.4 step 8, §8).
DERIVED = (
    "memory/timeline/",
    "memory/recent_events.jsonl",
    "memory/relations.json",
    "memory/core.md",
    "memory/.scriptorium/runtime.json",
)
WRITER_BOOKKEEPING = ("memory/.scriptorium/writer-status.json", "memory/.scriptorium/agent-history.jsonl")
ANY_TOPIC = "memory/topics/**/*.md"


@dataclass(frozen=True)
class PreviewBatch:
    ids: tuple[str, ...]  # turn ids (write), source ids (backfill), record ids (reorganize)
    tokens: int
    session_id: str | None = None
    tip: str | None = None
    result: str = "planned"  # planned | below-threshold (write); planned otherwise
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"ids": list(self.ids), "tokens": self.tokens, "session_id": self.session_id,
                "tip": self.tip, "result": self.result, "note": self.note}


@dataclass(frozen=True)
class JobPreview:
    job: str  # one of JOBS
    title: str  # e.g. "write local_a1b2 (per-turn)"
    writer: str | None
    unit: str  # what ``count`` counts: turns | sources | record ops | turns to mark
    count: int
    tokens: int
    batches: tuple[PreviewBatch, ...]
    files: tuple[str, ...]  # likely to change, relative to the state dir
    revision: str | None
    notes: tuple[str, ...] = ()
    busy: bool = False  # the dry run could not take the lock it needs (reorganize)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # the job's own dry-run report

    @property
    def nothing_to_do(self) -> bool:
        return self.count == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job, "title": self.title, "writer": self.writer, "unit": self.unit,
            "count": self.count, "tokens": self.tokens, "batches": [b.to_json() for b in self.batches],
            "files": list(self.files), "revision": self.revision, "notes": list(self.notes),
            "busy": self.busy, "nothing_to_do": self.nothing_to_do,
        }


def _writer_name(ctx: Any) -> str:
    return str(getattr(ctx.writer, "name", None) or getattr(ctx.settings, "name", "?"))


def _uniq(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _writer_topic(ctx: Any, session_id: str, title: str) -> str:
    """The topic file the embedded writer will use for a session (its own rule), else a pattern."""
    if _writer_name(ctx) != "extractive":
        return ANY_TOPIC
    from memory_tui.pipeline.writers.base import Turn, WriteTask
    from memory_tui.pipeline.writers.extractive import topic_for

    task = WriteTask("write", (), session_id, title, ctx.settings.topic)
    return "memory/" + topic_for(task, Turn("", "user", "", "", session_id=session_id, session_title=title))


def _node_files(ctx: Any, session: Any, ids: tuple[str, ...]) -> list[str]:
    from memory_tui.sessions.marks import find_nodes_files

    out = []
    files = find_nodes_files(session.dir, ids)  # one listing of history/ for the whole batch
    for node_id in ids:
        for p in files.get(node_id, []):
            try:
                out.append(p.relative_to(ctx.state_dir).as_posix())
            except ValueError:  # a session under a locations.json root outside the state dir
                out.append(str(p))
    return out


def preview_write(ctx: Any, session_id: str | None = None, *, branch: str | None = None, force: bool = False) -> JobPreview:
    """``write`` (one session or all; per-turn or forced) as ``write --dry-run`` plans it."""
    from memory_tui.core.format.sources import archive_path
    from memory_tui.pipeline.context import load_snapshot
    from memory_tui.pipeline.write import write

    report = write(ctx, session_id, branch=branch, force=force, dry_run=True)
    snap = load_snapshot(ctx)
    planned = [b for b in report.batches if b.result == "planned"]
    files: list[str] = []
    for b in planned:
        session = snap.get(b.session_id)
        files.append("memory/" + archive_path(f"openprogram/{b.session_id}/{b.ids[0]}"))
        files.append(_writer_topic(ctx, b.session_id, session.title if session else ""))
    if planned:
        files.extend(DERIVED)
        files.extend(WRITER_BOOKKEEPING)
        files.append("memory/.git")  # each batch commits "memory: incremental transaction"
        for b in planned:
            session = snap.get(b.session_id)
            if session is not None:
                files.extend(_node_files(ctx, session, tuple(b.ids)))
    notes = list(report.warnings)
    if report.outcome.message:
        notes.append(report.outcome.message)
    if report.outcome.failed:
        notes.append(f"{report.outcome.code}: {report.outcome.message}")
    for b in report.batches:
        if b.result == "below-threshold":
            notes.append(f"{b.session_id} {b.tip}: {b.message}")
    if force and session_id is None:
        job, title = "write-all-forced", "write every session (forced)"
    else:
        job = "write"
        where = session_id or "every session"
        title = f"write {where}" + (f" branch {branch}" if branch else "") + (" (forced)" if force else " (per-turn)")
    batches = tuple(PreviewBatch(tuple(b.ids), b.tokens, b.session_id, b.tip, b.result, b.message) for b in report.batches)
    return JobPreview(
        job, title, report.writer, "turns", sum(len(b.ids) for b in planned), sum(b.tokens for b in planned),
        batches, _uniq(files), report.revision_before, tuple(dict.fromkeys(notes)), raw=report.to_json(),
    )


def preview_reorganize(ctx: Any) -> JobPreview:
    """``reorganize --dry-run``: the record ops, and the topic files holding their records."""
    from memory_tui.core.format.sources import SourceIndex
    from memory_tui.core.format.topics import parse_tree
    from memory_tui.pipeline.reorganize import reorganize
    from memory_tui.pipeline.context import revision

    report = reorganize(ctx, dry_run=True)
    ops = list(report.planned_ops or ())
    files: list[str] = []
    if ops:
        root = ctx.memory_root
        tree = parse_tree(root / "topics", resolve=SourceIndex.load(root).resolve_target)
        for op in ops:
            unit = tree.by_id(op["memory_id"])
            if unit is not None:
                files.append("memory/" + unit.path)
        files.extend(DERIVED)
        files.append("memory/.scriptorium/agent-history.jsonl")
        files.append("memory/.git")
    notes = []
    status = report.outcome.status
    # the dry run reads without the lock (it never waits for a writer); say if the job would
    busy = status == "busy"
    if not busy and ctx.memory_root.is_dir():
        from memory_tui.core.store.lockprobe import probe_write_lock

        busy = probe_write_lock(ctx.memory_root).held
    if busy:
        notes.append("another writer holds the write lock; the job will wait for it")
    if status in ("disabled", "empty"):
        notes.append({"disabled": "memory is disabled (memory.backend: none)", "empty": "there are no topics"}[status])
    if report.outcome.code is not None:
        notes.append(f"{report.outcome.code}: {report.outcome.message}")
    deletes = sum(1 for o in ops if o["op"] == "delete_record")
    if ops:
        notes.append(f"folds {deletes} duplicate record(s) into {len(ops) - deletes}")
    batches = tuple(PreviewBatch((o["memory_id"],), 0, note=o["op"]) for o in ops)
    rev = revision(ctx.memory_root) if ctx.memory_root.is_dir() else None
    return JobPreview("reorganize", "reorganize topics", "deterministic organizer", "record ops", len(ops), 0,
                      batches, _uniq(files), rev, tuple(notes), busy=busy, raw=report.to_json())


def preview_backfill(ctx: Any) -> JobPreview:
    """``backfill --dry-run``: the uncited trusted sources and their batches."""
    from memory_tui.core.format.sources import split_source_id
    from memory_tui.pipeline.backfill import backfill

    report = backfill(ctx, dry_run=True)
    batches = tuple(PreviewBatch(b.ids, b.tokens) for b in report.batches)
    files: list[str] = []
    notes: list[str] = []
    root = ctx.memory_root
    if not (root / "topics" / "core.md").exists() and (root / "core.md").is_file():
        notes.append("a legacy root core.md is promoted (or archived as a source) first")
        files.extend(["memory/topics/core.md", "memory/sources/openprogram-migration/_v2/legacy-core.md"])
    if report.declined:
        notes.append(f"{len(report.declined)} source(s) a writer already declined are not offered again "
                     f"(memory-tui backfill --retry-declined offers them)")
    if batches:
        if _writer_name(ctx) == "extractive":
            titles = _session_titles(ctx)
            for b in batches:
                for sid in b.ids:
                    parts = split_source_id(sid) or ("", "", "")
                    files.append(_writer_topic(ctx, parts[1], titles.get(parts[1], "")))
        else:
            files.append(ANY_TOPIC)
        files.extend(DERIVED)
        files.append("memory/.scriptorium/agent-history.jsonl")
    return JobPreview("backfill", "backfill uncited sources", report.writer or _writer_name(ctx), "sources",
                      report.offered, sum(b.tokens for b in batches), batches, _uniq(files),
                      report.revision, tuple(notes), raw=report.to_json())


def _session_titles(ctx: Any) -> dict[str, str]:
    from memory_tui.pipeline.context import load_snapshot

    return {sid: s.title for sid, s in load_snapshot(ctx).sessions.items()}


def preview_migrate(ctx: Any) -> JobPreview:
    """The one-time cursor migration: which turns would get marks (nothing is marked)."""
    from memory_tui.core.store.workspace import load_runtime_state
    from memory_tui.pipeline.migrate import candidates, prefix_to_mark
    from memory_tui.pipeline.context import load_snapshot, revision

    root = ctx.memory_root
    rev = revision(root) if root.is_dir() else None
    if not root.is_dir() or not load_runtime_state(root)[0].has_legacy_cursors:
        return JobPreview("migrate", "migrate legacy cursors", None, "turns to mark", 0, 0, (), (), rev,
                          ("no legacy cursors in runtime.json: nothing to migrate",))
    cands = candidates(root)
    snap = load_snapshot(ctx)
    batches: list[PreviewBatch] = []
    files: list[str] = []
    for sid in sorted(cands):
        session = snap.get(sid)
        if session is None:
            continue
        ids = tuple(prefix_to_mark(session, cands[sid]))
        if ids:
            batches.append(PreviewBatch(ids, 0, sid))
            files.extend(_node_files(ctx, session, ids))
    files.append("memory/.scriptorium/runtime.json")
    return JobPreview("migrate", "migrate legacy cursors", None, "turns to mark", sum(len(b.ids) for b in batches), 0,
                      tuple(batches), _uniq(files), rev, ("legacy cursors are removed from runtime.json once every mark landed",))


def preview_job(ctx: Any, job: str, *, session_id: str | None = None, branch: str | None = None, force: bool = False) -> JobPreview:
    """One entry point for the confirm dialog: ``job`` is one of ``JOBS``."""
    if job == "write":
        return preview_write(ctx, session_id, branch=branch, force=force)
    if job == "write-all-forced":
        return preview_write(ctx, None, force=True)
    if job == "reorganize":
        return preview_reorganize(ctx)
    if job == "backfill":
        return preview_backfill(ctx)
    if job == "migrate":
        return preview_migrate(ctx)
    raise ValueError(f"unknown job {job!r}; expected one of {', '.join(JOBS)}")
