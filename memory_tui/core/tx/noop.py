"""The remembered answer of a hand edit that changes nothing (``noopcache``): recorded when
such an edit installs nothing, and answered for the same text on exactly the same workspace,
config and code without staging anything."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from ..format.errors import MemoryError
from ..store import gitlog, noopcache
from ..store.confine import check_write_confinement
from ..store.install import needs_recovery
from ..store.lock import write_lock
from .context import Context, ensure_git
from .result import CoreInfo, TxResult
from ..switches import Switches
from .roots import open_locked

if TYPE_CHECKING:  # the answer from a verdict stages nothing: never import the staging code for it
    from .prepare import Prepared
    from .stage import Stage


class NoopMismatch(AssertionError):
    """``MEMORY_TUI_TEST_DERIVE=check``: the remembered no-op answer differs from the full path's."""


def known_noop(root: Path, rel: str, text: str, mode: str, git_env: Mapping[str, str] | None,
               timeout: float, base_revision: str | None, switches: Switches) -> TxResult | None:
    """The answer of a hand edit whose text is the committed file's own bytes, from the
    remembered no-op verdict of exactly this workspace (``noopcache``), or ``None`` (then the
    full path runs; it reports every refusal itself). Under the write lock, as the full path
    installs a no-op: recovery first, the workspace re-checked, git history ensured."""
    if switches.full or needs_recovery(root):
        return None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        return None  # not a text the stage could even be written with
    # the file's bytes, the stored verdict, the config and the code, before the lock; the
    # workspace by one walk under it, after the open's recovery: the same proof as a lookup
    # walked before the lock and re-walked under it, with one walk instead of two
    found = noopcache.candidate(root, rel, data)
    if found is None or (base_revision is not None and base_revision != found.verdict.revision):
        return None
    try:
        check_write_confinement(root)
    except MemoryError:
        return None
    with write_lock(root, timeout):
        open_locked(root)
        verdict = noopcache.confirm(root, found, switches)
        if verdict is None:
            return None
        ensure_git(root, mode, git_env)
    core = None if verdict.core is None else CoreInfo(verdict.core[0], verdict.core[1], verdict.core[2])
    return TxResult(ok=True, message="no change", revision=verdict.revision, memory_committed=True,
                    git_error=gitlog.NOTHING_TO_COMMIT if mode != "off" else None, warnings=verdict.warnings,
                    core=core)


def remember_noop(stage: Stage, ctx: Context, prep: Prepared) -> None:
    """A hand edit that changed nothing: its answer is a function of the workspace, the
    config and the code (``noopcache``), kept for the next fresh process."""
    base = prep.base
    if ctx.noop_config is None or stage.stamps_racy or base["block_ids"] or base["evidence_ids"] or base["dropped"]:
        return
    core = base["core"]
    noopcache.record(stage.memory_root, stage.stamps, stage.links, stage.revision,
                     None if core is None else (core.tokens, tuple(core.omitted_ids), core.budget),
                     prep.warnings, ctx.noop_config)
