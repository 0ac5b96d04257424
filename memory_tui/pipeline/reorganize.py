"""Reorganize (memory spec §7.6): the deterministic default organizer.

It finds records that say the same thing and folds them into one, through record ops
(``update_record`` + ``delete_record``) applied by ``transaction.update`` — so the kept
record keeps its id, its evidence grows to the union of both records' sources, and empty
sections/files are pruned by the transaction's normaliser (§3.9).

"The same thing" is the same claim: identical content after collapsing whitespace and case and
dropping the final full stop. Records that only look alike (the same quoted statement, or word
sets with Jaccard similarity >= 0.85 when both have at least five words) may still say different
things ("Migration rule 5 ..." / "Migration rule 6 ..."), so they are never folded: they are
reported as ``candidates`` and left as they are, unless the configured writer confirms them:
a writer with ``confirm_folds`` (the command and the HTTP writer) is asked about the candidates
of a pass, and only the pairs it names as the same fact fold (the extractive writer reads no
meaning and confirms none; a dry run does not ask).
The kept record is the oldest (creation order, then tree order); among equals the longer
content wins the text. A record that another record links to (``#^id``) is never deleted,
and legacy ``mem_`` units are left alone.

Result: a ``ReorganizeReport`` (status disabled | empty | busy | ok | failed, the number of
topic files, the changed files; ``failed`` names its error), committed as ``memory: reorganize
topics``. Its ``--json`` object is ``{"status", "topics", "changed_files"}`` plus ``error``,
``planned_ops`` (dry run) and ``reason`` when they apply.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Callable

from memory_tui.core.format.errors import MemoryError
from memory_tui.core.store import gitlog
from memory_tui.core.store.lock import TIMEOUT_EDIT
from memory_tui.core.store.workspace import load_runtime_state, workspace_revision
from memory_tui.pipeline import status as st
from memory_tui.pipeline.context import Context, JobCancelled, JobPhase, git_commit, locked, topic_tree
from memory_tui.pipeline.reports import JobOutcome, ReorganizeReport
from memory_tui.pipeline.txport import TransactionPort
from memory_tui.pipeline.writers.base import FoldCandidate, confirm_folds

REORGANIZE_MESSAGE = "memory: reorganize topics"
NEAR = 0.85
CHUNK = 64  # ``update`` allows at most 64 ops per request
_QUOTE = re.compile(r"[“\"]([^”\"]{8,})[”\"]")
_WORD = re.compile(r"[\w']+")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _quote(text: str) -> str | None:
    m = _QUOTE.search(text)
    return _norm(m.group(1)).rstrip(".!") if m else None


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _key(text: str) -> tuple[str, str | None, frozenset[str]]:
    """The claim (normal form without the final full stop), the quoted statement, the words."""
    return _norm(text).rstrip(".!?"), _quote(text), frozenset(_words(text))


def _alike(ka: tuple[str, str | None, frozenset[str]], kb: tuple[str, str | None, frozenset[str]]) -> bool:
    """Worded alike, which says nothing about meaning: a fold candidate, never a fold."""
    qa, qb = ka[1], kb[1]
    if qa and qb and qa == qb:
        return True
    wa, wb = ka[2], kb[2]
    if len(wa) >= 5 and len(wb) >= 5:
        return len(wa & wb) / len(wa | wb) >= NEAR
    return False


def same_thing(a: str, b: str) -> bool:
    """The same claim, so folding the two loses nothing: equal after normalisation."""
    return _key(a)[0] == _key(b)[0]


def look_alike(a: str, b: str) -> bool:
    return _alike(_key(a), _key(b))


def _candidates(keys: list[tuple[str, str | None, frozenset[str]]]) -> Callable[[int], list[int]]:
    """For unit ``i``, the later units that can make its claim or look alike with it, in order:
    a superset of the true matches (each is still checked), found without comparing every pair.
    Equal claims and equal quotes share a bucket; two word sets whose Jaccard similarity is at
    least NEAR share a word among the first ``|A| - ceil(NEAR * |A|) + 1`` words of each, in
    one global order (prefix filtering), rarest words first so the buckets stay small."""
    near = Fraction(NEAR).limit_denominator(1000)
    by_norm: dict[str, list[int]] = {}
    by_quote: dict[str, list[int]] = {}
    freq: dict[str, int] = {}
    for i, (norm, quote, words) in enumerate(keys):
        by_norm.setdefault(norm, []).append(i)
        if quote:
            by_quote.setdefault(quote, []).append(i)
        for w in words:
            freq[w] = freq.get(w, 0) + 1
    by_word: dict[str, list[int]] = {}
    prefixes: list[tuple[str, ...]] = []
    for i, (_norm_, _quote_, words) in enumerate(keys):
        if len(words) < 5:
            prefixes.append(())
            continue
        ordered = sorted(words, key=lambda w: (freq[w], w))
        prefix = tuple(ordered[: len(words) - math.ceil(near * len(words)) + 1])
        prefixes.append(prefix)
        for w in prefix:
            by_word.setdefault(w, []).append(i)

    def later(i: int) -> list[int]:
        norm, quote, _words_ = keys[i]
        found = {j for j in by_norm[norm] if j > i}
        if quote:
            found.update(j for j in by_quote[quote] if j > i)
        for w in prefixes[i]:
            found.update(j for j in by_word[w] if j > i)
        return sorted(found)

    return later


def _labels(unit: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for ann in unit.annotations:
        for ev in ann.evidence:
            for link in ev.links:
                if link.source_id and link.source_id not in out:
                    out[link.source_id] = link.label
    return out


def plan_ops(tree: Any, creation_order: dict[str, int]) -> list[dict[str, Any]]:
    """Record ops that fold duplicates into their oldest copy."""
    return plan(tree, creation_order)[0]


def plan(tree: Any, creation_order: dict[str, int], confirmed: frozenset[tuple[str, str]] = frozenset(),
         ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Record ops that fold records making the same claim into their oldest copy, and the
    pairs that only look alike (``{"memory_ids": [older, newer], "reason"}``), left alone.
    ``confirmed``: look-alike pairs (as reported) the configured writer says state the same
    fact; they fold like equal claims."""
    units = [u for u in tree.units if not u.legacy and len(u.aliases) <= 1 and u.source_refs]
    targets = {t for u in tree.units for t in u.relation_targets}
    order = {u.memory_id: i for i, u in enumerate(tree.units)}
    units.sort(key=lambda u: (creation_order.get(u.memory_id, 10**9), order[u.memory_id]))
    ops: list[dict[str, Any]] = []
    alike: list[dict[str, Any]] = []
    consumed: set[str] = set()
    # Each text's claim, quote and word set once per unit, and only the units that can match
    # compared (a write's organize pass over thousands of records spent minutes comparing pairs).
    keys = [_key(u.content) for u in units]
    later = _candidates(keys)
    for i, keep in enumerate(units):
        if keep.memory_id in consumed:
            continue
        kk = keys[i]
        near = [j for j in later(i) if units[j].memory_id not in consumed]
        group = [units[j] for j in near if units[j].memory_id not in targets
                 and (keys[j][0] == kk[0] or (keep.memory_id, units[j].memory_id) in confirmed)]
        folded = {other.memory_id for other in group}
        for j in near:
            if units[j].memory_id not in folded and _alike(kk, keys[j]):
                alike.append({"memory_ids": [keep.memory_id, units[j].memory_id],
                              "reason": "worded alike but not the same claim: left as they are"})
        if not group:
            continue
        refs = list(keep.source_refs)
        labels = _labels(keep)
        text = keep.content
        for other in group:
            consumed.add(other.memory_id)
            for ref in other.source_refs:
                if ref not in refs:
                    refs.append(ref)
            for ref, lab in _labels(other).items():
                labels.setdefault(ref, lab)
            if _norm(other.content) != _norm(text) and len(other.content) > len(text) and _quote(other.content) is None:
                text = other.content
        consumed.add(keep.memory_id)
        ops.append(
            {
                "op": "update_record",
                "memory_id": keep.memory_id,
                "content": text,
                "time": keep.when,
                "sources": [{"source": r, "label": labels.get(r) or r} for r in refs],
            }
        )
        for other in group:
            ops.append({"op": "delete_record", "memory_id": other.memory_id})
    return ops, alike


def _with_writer_confirmations(ctx: Context, tree: Any, creation_order: dict[str, int], ops: list[dict[str, Any]],
                               candidates: list[dict[str, Any]],
                               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The plan once the configured writer has judged the look-alike candidates: the pairs it
    confirms fold, the rest stay candidates. Its run goes into the agent history."""
    by_id = {u.memory_id: u for u in tree.units}
    asked = [FoldCandidate(n, (a, b), (by_id[a].content, by_id[b].content), ("topics/" + by_id[a].topic_path, "topics/" + by_id[b].topic_path))
             for n, (a, b) in enumerate((tuple(c["memory_ids"]) for c in candidates), start=1)]
    verdict = confirm_folds(ctx.writer, asked, ctx.memory_root)
    if not verdict.history:  # a writer that judges nothing (the extractive one) was not asked
        return ops, candidates
    st.append_history(ctx.layout.runtime_dir, verdict.history)
    if verdict.confirmed:
        ops, candidates = plan(tree, creation_order, verdict.confirmed)
    name = getattr(ctx.writer, "name", "configured")
    unconfirmed = f"worded alike; the {name} writer did not confirm them as one claim: left as they are"
    return ops, [{**c, "reason": unconfirmed} for c in candidates]


def _failed(exc: MemoryError) -> JobOutcome:
    # the CLI exits 1 on any failed pass (only "busy", the lock not taken, exits 3)
    return JobOutcome("failed", True, exc.code, exc.message, path=exc.path)


_DEFERRED = "cancelled: what is left to fold waits for the next organize pass (or `reorganize`)"


def organize_locked(ctx: Context, *, reason: str = "manual", dry_run: bool = False, commit: bool = False) -> ReorganizeReport:
    """One organize pass; the caller holds the write lock."""
    root = ctx.memory_root
    tree = topic_tree(root)
    n_topics = len(tree.topics)
    if not tree.topics:
        return ReorganizeReport(JobOutcome("empty"), reason=reason)
    if not dry_run and not commit and ctx.cancelled():
        # a write's organize, cancelled before it began: the batch it follows is whole; the
        # folding waits for the next pass (the next trigger, or `reorganize`)
        return ReorganizeReport(JobOutcome("cancelled", message=_DEFERRED), n_topics, reason=reason)
    state, _ = load_runtime_state(root)
    ops, candidates = plan(tree, dict(state.creation_order))
    if dry_run:  # reads only: the writer is not asked, so its confirmations are not planned
        return ReorganizeReport(JobOutcome("ok"), n_topics, planned_ops=tuple(ops), reason=reason, candidates=tuple(candidates))
    if candidates:
        ops, candidates = _with_writer_confirmations(ctx, tree, dict(state.creation_order), ops, candidates)
    found = tuple(candidates)
    prompt = f"organize ({reason}): {len(ops)} record op(s) over {n_topics} topic file(s)"
    if not ops:
        st.append_history(ctx.layout.runtime_dir, [st.history_entry("organize", "memory-tui deterministic organizer", prompt, reply="organize: nothing to change")])
        return ReorganizeReport(JobOutcome("ok"), n_topics, reason=reason, candidates=found)
    port = TransactionPort(root, restricted=False, counter=ctx.counter)
    changed: list[str] = []
    before: str | None = None  # the first transaction's base
    after: str | None = None  # the last one's result
    chunks = range(0, len(ops), CHUNK)
    if commit:
        # Said before the first install, so a kill anywhere up to the end of the commit below
        # (inside ``git commit`` included) is committed by the next locked open.
        gitlog.mark_pending(root)
    for n, start in enumerate(chunks):
        if commit:  # a manual reorganize can be cancelled between its transactions
            try:
                ctx.checkpoint(JobPhase.ORGANIZE, n)
            except JobCancelled as cancel:
                if changed:
                    git_commit(ctx, REORGANIZE_MESSAGE)
                else:
                    gitlog.clear_pending(root)
                # what was written before the cancel: its transactions are whole and committed
                cancel.result = ReorganizeReport(JobOutcome("cancelled"), len(topic_tree(root).topics), tuple(sorted(changed)),
                                                 reason=reason, revision_before=before, revision=after or workspace_revision(root))
                raise
        elif ctx.cancelled():
            # inside a write batch: the cancel takes effect here, between two transactions,
            # not after the whole pass. The batch's own end (its marks, counters, intent and
            # git commit) is the caller's and still runs; the job then stops at its next
            # checkpoint, before another batch.
            st.append_history(ctx.layout.runtime_dir, [st.history_entry(
                "organize", "memory-tui deterministic organizer", prompt,
                reply=f"cancelled after {n} of {len(chunks)} transaction(s)")])
            return ReorganizeReport(JobOutcome("cancelled", message=_DEFERRED), len(topic_tree(root).topics),
                                    tuple(sorted(changed)), reason=reason, revision_before=before, revision=after,
                                    candidates=found)
        ctx.emit(JobPhase.ORGANIZE, n, len(chunks), f"{len(ops)} record op(s) over {n_topics} topic file(s)")
        chunk = ops[start:start + CHUNK]
        try:
            base = workspace_revision(root)
            before = before or base
            info = port.update(base, chunk)
        except MemoryError as exc:
            st.append_history(ctx.layout.runtime_dir, [st.history_entry("organize", "memory-tui deterministic organizer", prompt, error=f"{exc.code}: {exc.message}")])
            return ReorganizeReport(_failed(exc), n_topics, tuple(changed), reason=reason, revision_before=before, revision=after)
        after = info.revision
        for f in info.changed_topics:
            if f not in changed:
                changed.append(f)
    st.append_history(ctx.layout.runtime_dir, [st.history_entry("organize", "memory-tui deterministic organizer", prompt, reply=f"folded {sum(1 for o in ops if o['op'] == 'delete_record')} duplicate record(s)")])
    ctx.emit(JobPhase.ORGANIZE, len(chunks), len(chunks), f"changed {len(changed)} topic file(s)")
    if commit:
        git_commit(ctx, REORGANIZE_MESSAGE)
    return ReorganizeReport(JobOutcome("ok"), len(topic_tree(root).topics), tuple(sorted(changed)), reason=reason,
                            revision_before=before, revision=after, candidates=found)


def reorganize(ctx: Context, *, dry_run: bool = False) -> ReorganizeReport:
    """The ``reorganize`` job: lock (5 s), organize, commit ``memory: reorganize topics``."""
    assert ctx.config is not None  # set in Context.__post_init__

    if not ctx.config.enabled:
        return ReorganizeReport(JobOutcome("disabled", True))
    if not (ctx.memory_root / "topics").is_dir():
        return ReorganizeReport(JobOutcome("empty"))
    try:
        ctx.checkpoint(JobPhase.ORGANIZE)
        if dry_run:  # reads only: a plan never waits for (or blocks) a writer
            return organize_locked(ctx, reason="manual", dry_run=True)
        with locked(ctx, TIMEOUT_EDIT):
            return organize_locked(ctx, reason="manual", dry_run=dry_run, commit=not dry_run)
    except MemoryError as exc:
        if exc.code == "CONCURRENT_UPDATE":
            return ReorganizeReport(JobOutcome("busy", True, retryable=True))
        return ReorganizeReport(_failed(exc))
