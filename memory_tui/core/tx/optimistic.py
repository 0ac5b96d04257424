"""How a transaction holds the write lock only for the part that needs it: the optimistic
pass prepares the stage outside the lock and installs it only if the workspace still has the
revision the stage was read at; otherwise everything runs again under the lock. A file that
appears or vanishes while a transaction reads it is retried once, then refused as
retryable."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from ..format.errors import MemoryError, os_failure
from ..format.paths import Layout
from ..store.install import JOURNAL_NAME, needs_recovery
from ..store.lock import write_lock
from . import prepare
from .context import Context
from .finish import finish, start_revision, validated
from .result import TxResult
from .stage import Stage, checking_only, open_locked, optimistic_pass, unchanged


def transact(root: Path, make: Callable[[], tuple[Stage, Context]], **kw: Any) -> TxResult:
    """A file under the workspace that appears or vanishes while a transaction reads it (an
    editor saving, another tool) is a race, not an internal error: the transaction runs once
    more, and if the race persists it is refused as CONCURRENT_UPDATE (retryable)."""
    with checking_only(bool(kw.get("validate_only"))):  # a check writes nothing into the workspace
        return _transact_twice(root, make, **kw)


def _transact_twice(root: Path, make: Callable[[], tuple[Stage, Context]], **kw: Any) -> TxResult:
    try:
        try:
            return _transact_once(root, make, **kw)
        except (FileNotFoundError, NotADirectoryError):
            pass
        try:
            return _transact_once(root, make, **kw)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise MemoryError("CONCURRENT_UPDATE", f"a file appeared or vanished during the transaction; retry "
                              f"({exc.strerror}: {os.path.basename(exc.filename or '')})") from None
    except OSError as exc:  # a full disk, a read-only mount, a name too long: named, with what was kept
        raise os_failure(exc, root=root, kept=kept_after_failure(root)) from None


def kept_after_failure(root: Path) -> str:
    """What a transaction that failed with an OS error left: an install whose intent record was
    written completes at the next open (roll-forward needs no new space); before that point
    nothing under the workspace was touched."""
    if (Layout(Path(root)).runtime_dir / JOURNAL_NAME).exists():
        return "the change is recorded in the install journal and the next open completes it"
    return "nothing was changed: the workspace keeps its revision"


def _transact_once(
    root: Path,
    make: Callable[[], tuple[Stage, Context]],
    *,
    timeout: float,
    validate_only: bool,
    before_install: Callable[[], Any] | None = None,
) -> TxResult:
    """Run a transaction holding the write lock only for the part that needs it.

    Optimistic pass: stage, normalise, validate, rebuild views and plan without the lock;
    then take the lock and install only if the workspace still has the revision the stage
    was read at (a validate-only run just re-checks the revision). Otherwise (or when an
    interrupted install must be recovered first) everything runs again under the lock, as
    OpenProgram does. Rejections found on a snapshot that is still current are final.
    """
    # The first pass may start from the stamps this process's last install left; when the
    # workspace moved since, the pass is made again from a fresh walk before anything runs
    # under the lock -- exactly the pass there would have been without the remembered stamps.
    for remembered in (True, False):
        if needs_recovery(root):
            break
        with optimistic_pass(remembered) as attempt:
            try:
                stage, ctx = make()
            except MemoryError:
                if not attempt.reused:
                    raise
                continue  # a refusal is decided on the workspace as it is now, never on remembered stamps
        with stage:
            result = _unlocked_pass(root, stage, ctx, timeout=timeout, validate_only=validate_only,
                                    before_install=before_install)
        if result is not None:
            return result
        if not attempt.reused:
            break
    with write_lock(root, timeout):
        open_locked(root)
        stage, ctx = make()
        with stage:
            prep = prepare.prepare(stage, ctx)
            if before_install is not None and not validate_only and not prep.plan.empty:
                before_install()  # a no-op writes nothing, not even a new repository
            return finish(stage, ctx, prep)


def _unlocked_pass(
    root: Path,
    stage: Stage,
    ctx: Context,
    *,
    timeout: float,
    validate_only: bool,
    before_install: Callable[[], Any] | None,
) -> TxResult | None:
    """Prepare ``stage`` without the lock; answer only if the workspace still has the revision
    it was read at (checked under the lock before an install), else ``None``: the workspace
    moved, and the caller decides under the lock."""
    try:
        prep = prepare.prepare(stage, ctx)
    except MemoryError:
        if unchanged(stage):
            raise
        return None  # read while the workspace changed: decide under the lock
    if validate_only:
        return validated(stage, ctx, prep) if unchanged(stage) else None
    # the hash of the new revision runs while the lock is taken and the workspace
    # walked again; it is kept only if that walk finds the stamps it started from
    prep.revision_job = start_revision(stage, prep, stage.stamps)
    try:
        with write_lock(root, timeout):
            open_locked(root)
            if unchanged(stage):
                if before_install is not None and not prep.plan.empty:
                    before_install()
                return finish(stage, ctx, prep)
    finally:
        if prep.revision_job is not None:
            prep.revision_job.cancel()
    return None
