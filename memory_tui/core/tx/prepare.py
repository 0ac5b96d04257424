"""Prepare a stage: normalise, validate and rebuild views in it, then plan the install.

Each step is a function of the room that owns it: the stage reads and writes its own files
(``stage``), normalisation makes the texts normal and has them checked before and validated
after (``normal``, with the rules of ``checks``), and the views and creation order are derived
from the new tree (``derived``).
No lock is needed: everything read here comes from the stage and the caches (the caller
checks the revision under the lock before installing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..store.install import InstallPlan
from ..store.revision import RevisionJob
from .context import Context
from .derived import write_derived
from .normal import normal_and_valid
from .stage import Stage


@dataclass
class Prepared:
    plan: InstallPlan
    base: dict[str, Any]  # the result's fields every outcome of this stage shares
    new_texts: dict[str, str]
    warnings: tuple[str, ...] = ()
    revision_job: RevisionJob | None = None  # the post-install revision, hashing since the plan was known


def prepare(stage: Stage, ctx: Context) -> Prepared:
    """The stage normalised, validated, with its views rebuilt, and its install planned; or
    the refusal, with every error found."""
    texts, changed = stage.changes()
    normalized, tree = normal_and_valid(stage, texts, changed, ctx)
    stage.write_texts(normalized.texts, existing=texts)
    core = write_derived(stage, tree, ctx)
    base = dict(
        block_ids=dict(normalized.block_ids),
        evidence_ids=dict(normalized.evidence_ids),
        source_ids=dict(ctx.source_ids),
        core=core,
        dropped=normalized.dropped,
        validate_only=ctx.validate_only,
    )
    return Prepared(stage.plan(), base, normalized.texts, normalized.warnings)
