"""The staged texts made normal (§3.8 normalisation, §3.9 pruning): a committed file passes
through only with a proof that normalising it is the identity; ``topics/core.md`` is never
removed (pitfall 10); a legacy root ``core.md`` is promoted (§5.4 step 4); block links are
rewritten to where their blocks now are."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import is_
from typing import Any, Mapping

from ..format.errors import MemoryError
from ..format.topics import TopicTree, is_error
from .checks import Errors, check_changed, validate
from .context import Context
from .stage import Stage

CORE_MASTER = "topics/core.md"

CORE_REMOVED = (
    "topics/core.md cannot be removed: it is the core master, and without it core.md would be "
    "rebuilt from the clipped root core.md, losing every record beyond the token budget"
)


@dataclass(frozen=True)
class Normalized:
    """What normalisation made of the staged texts: the texts to install, the ids it gave new
    blocks and evidence, what pruning dropped, and a note on a promoted legacy core."""

    texts: dict[str, str]
    block_ids: Mapping[str, str]
    evidence_ids: Mapping[str, str]
    dropped: tuple[Any, ...]
    warnings: tuple[str, ...]


def normal_and_valid(stage: Stage, texts: Mapping[str, str], changed: frozenset[str], ctx: Context
                     ) -> tuple[Normalized, TopicTree]:
    """The staged ``texts`` checked as written, normalised, and the normal texts validated:
    the errors of all three are gathered into one ``checks.Errors`` and raised together (the
    rules are the checks room's; the order, written texts before normal ones, is this one's)."""
    errors = check_changed(texts, changed, stage.index, ctx.rule)
    normalized = normalize_staged(stage, texts, ctx, errors)
    return normalized, validate(stage, normalized.texts, changed, ctx, errors)


def normalize_staged(stage: Stage, texts: Mapping[str, str], ctx: Context, errors: Errors) -> Normalized:
    """Normalise the staged ``texts``; an error of normalisation (or a removed core master)
    ends the gathering of ``errors`` (pruning moved lines: what later checks find would point
    at the wrong lines)."""
    from ..format.blocklinks import rewrite_block_links

    cache, index, token = stage.cache, stage.index, stage.token
    # The owner's own texts (hand edit, whole-file change, patch) must land whole; record ops,
    # writers and organize legitimately leave empty sections for pruning.
    result = _normalize(texts, stage, refuse_drops=ctx.refuse_drops)
    errors.stop(result.errors)
    noted = {p.path for p in (*result.problems, *result.dropped)}
    # a file passed through was found proven under this token, and proofs of live texts stay
    for rel in result.texts.keys() - result.passed:
        out = result.texts[rel]
        if out is not None and texts.get(rel) == out and "topics/" + rel not in noted:
            cache.prove(rel, out, index, token)
    dropped = tuple(p for p in result.dropped if not is_error(p))
    normalized = _present(result.texts)
    try:
        _guard_core_master(stage, texts, normalized)
    except MemoryError as exc:
        errors.stop([exc.as_problem()])
        raise
    normalized, promotion = _promote_legacy_core(stage, normalized, ctx)
    new_texts = _present(rewrite_block_links(
        normalized, file_ids=cache.file_ids, rewritten=cache.link_rewrite, memo=cache.memo,
        locations=cache.block_locations(normalized, stage.switches), mode=stage.switches.derive))
    return Normalized(new_texts, result.block_ids, result.evidence_ids, dropped, (promotion,) if promotion else ())


def _normalize(texts: Mapping[str, str], stage: Stage, refuse_drops: bool = False) -> Any:
    """§3.8 normalisation + §3.9 pruning (helper module ``normalize``).

    A committed file passes through unchanged only when the cache holds a proof that
    normalising exactly those bytes (with the same source archives) is the identity; every
    other file is normalised as OpenProgram would (pitfall 4 without losing byte-compatibility).
    """
    from ..format.normalize import normalize_tree

    cache, index, token = stage.cache, stage.index, stage.token
    return normalize_tree(
        texts,
        committed=stage.baseline,
        resolve=index.resolve_target,
        link_for=index.link_for,
        assume_committed_normal=True,
        proven_canonical=lambda rel, text: cache.is_proven(rel, text, index, token),
        memo=cache.memo,
        refuse_drops=refuse_drops,
        # is_proven's True for a text object under this token stands while the token does
        proof_key=token,
        mode=stage.switches.derive,
    )


def _guard_core_master(stage: Stage, staged: Mapping[str, str], normalized: Mapping[str, str]) -> None:
    """Pitfall 10, whatever the entry point: a change must not remove ``topics/core.md``."""
    if "core.md" not in stage.committed_texts or "core.md" in normalized:
        return
    if "core.md" not in staged:
        raise MemoryError(
            "INVALID_ARGUMENT",
            f"{CORE_REMOVED} (remove core records one by one instead)",
            path=CORE_MASTER,
        )
    raise MemoryError(
        "INVALID_TOPIC_FORMAT",
        f"{CORE_REMOVED}: this change leaves it without any record, and a topic without records "
        "is deleted (keep at least one core record)",
        path=CORE_MASTER,
        line=1,
        column=1,
    )


def _promote_legacy_core(stage: Stage, normalized: dict[str, str], ctx: Context) -> tuple[dict[str, str], str | None]:
    """§5.4 step 4 / §8.4: no ``topics/core.md`` but a root ``core.md`` -> copy it into
    ``topics/core.md`` with links re-based to ``topics/``; kept only if the whole tree still
    parses (and, stricter than OpenProgram, only if its sources validate, so a legacy file
    never makes an unrelated edit fail). Returns (texts, note)."""
    from ..format.blocklinks import rewrite_block_links
    from ..format.views import promote_legacy_core

    if "core.md" in normalized:
        return normalized, None
    root_core = stage.root_file("core.md")
    try:
        if root_core.is_symlink() or not root_core.is_file():
            return normalized, None
        legacy = root_core.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return normalized, "root core.md is unreadable; not promoted to topics/core.md"
    if not legacy.strip():
        return normalized, None
    candidate = dict(normalized)
    candidate["core.md"] = promote_legacy_core(legacy)
    candidate = {rel: text for rel, text in rewrite_block_links(candidate, file_ids=stage.cache.file_ids, rewritten=stage.cache.link_rewrite).items() if text is not None}
    tree = stage.cache.tree(candidate, stage.index, stage.token, switches=stage.switches)
    if tree.errors:
        return normalized, f"root core.md not promoted to topics/core.md: {tree.errors[0]}"
    core_topic = tree.topic("core.md")
    assert core_topic is not None
    for unit in core_topic.units:
        for ref in unit.source_refs:
            found = stage.index.validate_ref(ref, new=True, allowed=None, rule=ctx.rule)
            if found is not None:
                return normalized, f"root core.md not promoted to topics/core.md: {found.message}"
    return dict(normalized, **{"core.md": candidate["core.md"]}), "promoted the legacy root core.md to topics/core.md"


def _present(texts: Mapping[str, str | None]) -> dict[str, str]:
    """``texts`` without the paths whose text is ``None`` (removed), in order; a copy by one
    C-level pass when there is none (every edit that removes no file)."""
    if not any(map(is_, texts.values(), repeat(None))):
        return dict(texts)
    return {rel: text for rel, text in texts.items() if text is not None}
