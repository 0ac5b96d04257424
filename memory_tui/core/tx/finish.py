"""Finish a prepared stage under the write lock: the crash-safe install, what it left told to
the caches (the stamps stat-ed again, the new revision -- hashed meanwhile on the second core,
or left for its first reader -- and the file-system monitor's generation), then the git
commit, whose intent is marked before the install so that a kill in between is finished on
the next open. A validate-only run and a plan that changes nothing answer without installing."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..store import gitlog
from ..store.fsmonitor import monitor_for
from ..store.install import InstallPlan, install
from ..store.revision import InstalledRevision, PendingRevision, RevisionJob, revision_text
from ..store.walk import installed_stamps
from ..store.workspace import workspace_revision
from ..switches import Switches
from .context import Context
from .noop import remember_noop
from .prepare import Prepared
from .result import TxResult
from .stage import Stage, revision_stamps


def validated(stage: Stage, ctx: Context, prep: Prepared) -> TxResult:
    """The answer of a validate-only run: nothing installed."""
    stage.cache.retain_lazily({**stage.committed_texts, **prep.new_texts}, stage.switches)
    return TxResult(ok=True, message="valid", revision=stage.revision_ref, changed_files=_changed(prep.plan, ctx),
                    warnings=prep.warnings, **prep.base)


def finish(stage: Stage, ctx: Context, prep: Prepared) -> TxResult:
    """Install a prepared stage and commit. Call under the write lock, with the workspace at
    ``stage.revision``."""
    if ctx.validate_only:
        return validated(stage, ctx, prep)
    if prep.plan.empty:
        return _no_change(stage, ctx, prep)
    root = stage.memory_root
    committing = ctx.git_commit != "off" and ctx.commit_message is not None
    if committing:
        gitlog.mark_pending(root)  # a kill before the commit below is finished on the next open
    revision = _install(stage, prep)
    git_committed, git_commit, git_error, warnings = False, None, None, prep.warnings
    if committing:
        outcome = gitlog.commit(root, ctx.commit_message, env=ctx.git_env)
        git_committed, git_commit, git_error = outcome.committed, outcome.commit, outcome.error
        if not outcome.committed:
            warnings = warnings + (f"memory changed but Git commit failed: {outcome.error}",)
    return TxResult(
        ok=True,
        message="installed",
        revision=InstalledRevision(revision) if isinstance(revision, PendingRevision) else revision,
        changed_files=_changed(prep.plan, ctx),
        memory_committed=True,
        git_committed=git_committed,
        git_commit=git_commit,
        git_error=git_error,
        warnings=warnings,
        **prep.base,
    )


def _no_change(stage: Stage, ctx: Context, prep: Prepared) -> TxResult:
    """A plan that installs nothing: the workspace keeps its revision."""
    stage.cache.retain_lazily(stage.committed_texts, stage.switches)  # a no-op writes nothing, not even the cache
    # the workspace as walked under this lock (a stage made under it: as walked then)
    stage.cache.note_walk(stage.locked_stamps if stage.locked_stamps is not None else stage.stamps,
                          stage.locked_links if stage.locked_links is not None else stage.links, stage.revision_ref,
                          _generation(stage))
    remember_noop(stage, ctx, prep)  # ... except its own answer, once (noopcache)
    return TxResult(
        ok=True, message="no change", revision=stage.revision_ref, changed_files=tuple(sorted(set(ctx.reported_changed))),
        memory_committed=True, git_error=gitlog.NOTHING_TO_COMMIT if ctx.git_commit != "off" else None,
        warnings=prep.warnings, **prep.base,
    )


def _install(stage: Stage, prep: Prepared) -> str | PendingRevision:
    """Install ``prep`` and tell the caches what the install left; the new revision."""
    root = stage.memory_root
    # the stamps walked under this lock (by ``stage.unchanged``, or by a stage made under it)
    before = stage.locked_stamps if stage.locked_stamps is not None else stage.stamps
    job = prep.revision_job if prep.revision_job is not None else start_revision(stage, prep, before)
    # no job: the revision is left for its first reader (``defer_revision``), from the bytes
    # staged now (the install moves the staged files into place)
    puts = _staged_bytes(stage, prep) if job is None and stage.cache.can_defer(stage.switches) else None
    generation = _generation(stage)
    switches = stage.switches
    try:
        try:
            install(root, stage.path, prep.plan)
        finally:
            generation = _absorb_install(root, prep.plan, generation, switches)
        stage.cache.retain_lazily(prep.new_texts, stage.switches)
        stage.cache.save_disk(stage.layout)
        # ``before`` with what the install replaced stat-ed again: no second walk of the whole workspace
        targets = [(t.kind, t.path) for t in prep.plan.targets]

        def after_install() -> dict:
            return installed_stamps(root, before, targets) or revision_stamps(root, switches)

        stamps = stage.switches.choose("post-install stamps", after_install, lambda: revision_stamps(root, switches))

        def installed_revision() -> str | PendingRevision:
            if job is not None:
                return job.result(stamps)
            if puts is not None:
                deferred = stage.cache.defer_revision(stamps, puts, switches=switches)
                if deferred is not None:
                    return deferred
            return stage.cache.revision(stamps, installed=True, switches=switches)

        revision = stage.switches.choose("post-install revision", installed_revision, lambda: workspace_revision(root),
                                          lambda a, b: revision_text(a) == b)
        if all(t.kind == "file" for t in prep.plan.targets):
            # one regular file renamed over (or removed) per target: no link came or went
            links = stage.locked_links if stage.locked_links is not None else stage.links
            stage.cache.note_walk(stamps, links, revision, generation)
    finally:
        if job is not None:
            job.cancel()
    return revision


def _changed(plan: InstallPlan, ctx: Context) -> tuple[str, ...]:
    # sorted as OpenProgram's result lists them (plain string order), so the two compare as lists
    return tuple(sorted({*ctx.reported_changed, *plan.changed_files}))


def _generation(stage: Stage) -> int | None:
    """The file-system monitor's generation at which the stamps an install starts from were true:
    the lock's (``stage.unchanged``), else the stage's own (a stage made under the lock)."""
    return stage.locked_generation if stage.locked_stamps is not None else stage.monitor_generation


def _absorb_install(root: Path, plan: InstallPlan, since: int | None, switches: Switches) -> int | None:
    """The file-system monitor's generation at which the stamps an install left are true
    (right after it, under the same lock; the workspace was at ``since`` before it), or
    ``None``: something besides the install's own writes changed meanwhile, or it replaced a
    whole tree, whose folders the monitor does not watch yet. Either way every other stage
    of this process sees a new generation (see ``FsMonitor.after_install``)."""
    watch = monitor_for(root, switches=switches)
    if watch is None:
        return None
    own: set[str] = set()
    for t in plan.targets:
        if t.kind != "file":
            watch.invalidate()
            return None
        parts = t.path.split("/")
        own.update("/".join(parts[:n]) for n in range(1, len(parts) + 1))
    generation = watch.after_install(own, since) if since is not None else None
    if since is None:
        watch.invalidate()
    return generation


def start_revision(stage: Stage, prep: Prepared, before: Mapping[str, tuple[int, int, int, int]]) -> RevisionJob | None:
    """Start hashing the revision the install of ``prep`` will leave (memory spec §2.6: one
    stream, so everything after the first changed file is hashed again) on the second core,
    from the staged bytes, while the install and the bookkeeping run -- unless the cache can
    leave it for its first reader (``WorkspaceCache.can_defer``: a process that keeps a chain
    between transactions). Only for plans whose every target is one file (the new bytes are
    exactly the staged file's); a tree target, or the ``full`` switches, takes the revision
    from the files after the install."""
    if prep.plan.empty or stage.switches.full or stage.cache.can_defer(stage.switches):
        return None
    changes = _staged_bytes(stage, prep)
    return None if changes is None else stage.cache.start_revision(before, changes, switches=stage.switches)


def _staged_bytes(stage: Stage, prep: Prepared) -> dict[str, bytes | None] | None:
    """What the install of ``prep`` will write, by path (``None``: removed); ``None`` when a
    target is a whole tree."""
    changes: dict[str, bytes | None] = {}
    for t in prep.plan.targets:
        if t.kind != "file":
            return None
        changes[t.path] = None if t.new is None else (stage.path / t.path).read_bytes()
    return changes
