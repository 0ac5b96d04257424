"""Validation: every check a staged change must pass, gathered so the owner sees every error
at once -- the changed files' own bytes before normalisation, then the tree they make (block
ids that must survive, links to blocks, evidence times, the refs each unit cites under the
entry point's rule). The fast paths (only the topics a change made are checked) are derived
beside the full checks (``txcache.derive``)."""

from __future__ import annotations

from itertools import compress
from operator import is_, is_not
from typing import Any, Iterable, Mapping

from ..format.errors import MemoryError, Problem
from ..format.sources import SourceIndex
from ..format.topics import (CITATION_RE, DEFINITION_RE, Topic, TopicTree, Unit, is_error, iter_blocks, parse_topic,
                             topic_sort_key)
from ..store.txcache import WorkspaceCache
from ..switches import Switches
from .context import Context
from .result import raise_first
from .stage import Stage

MAX_REMOVED_LISTED = 5


class Errors:
    """The errors of one validation, gathered across its stages so the owner sees every one
    at once (a dropped block id must not hide the uncited prose beside it). The first error
    found stays the one reported (OpenProgram's, since the stages run in its order); a stage
    whose input an earlier error made meaningless (an unreadable file, text pruning removed)
    ends the gathering with ``stop``."""

    def __init__(self) -> None:
        self.found: list[Problem] = []

    def add(self, problems: Iterable[Problem]) -> None:
        self.found.extend(p for p in problems if is_error(p))

    def stop(self, problems: Iterable[Problem] = ()) -> None:
        self.add(problems)
        raise_first(self.found)


def check_changed(texts: Mapping[str, str], changed: frozenset[str], index: SourceIndex, rule: str) -> Errors:
    """The errors of the changed files' own bytes, found before normalisation rewrites them."""
    errors = Errors()
    problems: list[Problem] = []
    for rel in sorted(changed, key=topic_sort_key):
        if rel in texts:
            problems.extend(_precheck(rel, texts[rel]))
    errors.add(problems)
    errors.add(_missing_sources(texts, changed, index, rule))
    if CORE_TOPIC in changed and CORE_TOPIC in texts:
        errors.add(special_token_errors(texts[CORE_TOPIC]))
    return errors


CORE_TOPIC = "core.md"  # topics/core.md, relative to topics/ as the stage's texts are


def special_token_errors(text: str) -> list[Problem]:
    """Special-token text (``<|endoftext|>``, ``<|endofprompt|>``: the special tokens of
    ``o200k_base``, the encoding OpenProgram counts core with) in a changed ``topics/core.md``.
    OpenProgram renders core on every transaction and its counter raises on such text, so once
    installed no later OpenProgram transaction (its writer's, its owner's edits) could succeed.
    memory-tui installs nothing OpenProgram's own core rendering cannot pass; elsewhere the
    same text is ordinary text (OpenProgram never counts other topics)."""
    from ..format.views import special_token_problems

    class _Text:
        path = CORE_TOPIC

        def __init__(self, text: str) -> None:
            self.text = text

    out = []
    for p in special_token_problems([_Text(text)]):
        names = p.details.get("tokens", [])
        out.append(Problem(
            "INVALID_TOPIC_FORMAT",
            f"special-token text {', '.join(names)} in topics/core.md: OpenProgram's token counter raises on it "
            f"when it renders core.md, so every later OpenProgram memory transaction would fail; remove it from "
            f"the line (any other topic may hold it)",
            p.path, p.line, p.column, {"tokens": list(names)}))
    return out


def validate(stage: Stage, texts: Mapping[str, str], changed: frozenset[str], ctx: Context, errors: Errors) -> TopicTree:
    """The tree the normalised ``texts`` make, or a refusal with every error found (``errors``:
    those found before): required block ids removed, links to blocks that are gone, the tree's
    own problems, evidence times, and the refs of the units checked."""
    from ..format.linkcheck import check_cross_topic_links, check_cross_topic_links_incremental, scheme_block_links

    cache, baseline, index = stage.cache, stage.baseline, stage.index
    tree = cache.tree(texts, index, stage.token, switches=stage.switches)
    missing = _missing_ids(ctx, tree, baseline, stage.switches)
    if missing:
        errors.add([_removed_error(missing, baseline).as_problem()])
    errors.add(stage.switches.choose("cross-topic link check", lambda: check_cross_topic_links_incremental(
                                        tree, committed=baseline, summary=_link_summaries(cache)),
                                    lambda: check_cross_topic_links(tree, committed=baseline)))
    errors.add(tree.problems)
    errors.add(_non_ascii_times(tree, changed, stage.switches)
               + scheme_block_links(_topics_at(tree, changed, stage.switches), baseline, tree.ids)
               + _check_units(tree, baseline, index, ctx, stage))
    errors.stop()
    return tree


def _precheck(rel: str, text: str) -> list[Problem]:
    """A heading citing a footnote that this file defines: OpenProgram drops the definition
    (and, in a new topic, the heading) while answering ok (pitfall 13); refuse it. A heading
    citation with no definition, or whose definition a record cites too, is kept verbatim by
    OpenProgram (``# Ideas[^e1]``) and loses nothing, so it is accepted (cases 057, 098, 102)."""
    path = "topics/" + rel
    problems: list[Problem] = []
    _, lines, _ = iter_blocks(text)
    defined = {m.group(1) for line in lines if line.kind == "definition" and (m := DEFINITION_RE.match(line.text))}
    by_records = {fid for line in lines if line.kind == "text" for fid in CITATION_RE.findall(line.text)}
    for line in lines:
        if line.kind != "heading" or "[^" not in line.text:
            continue
        for m in CITATION_RE.finditer(line.text):
            if m.group(1) in defined and m.group(1) not in by_records:
                problems.append(
                    Problem(
                        "INVALID_TOPIC_FORMAT",
                        f"citation [^{m.group(1)}] in a heading is not a record: its definition would be "
                        f"dropped: {path}",
                        path,
                        line.number,
                        m.start() + 1,
                    )
                )
                break
    return problems


def _missing_sources(texts: Mapping[str, str], changed: frozenset[str], index: SourceIndex, rule: str) -> list[Problem]:
    """Definitions in changed files naming a source the archives do not hold, located on the
    definition line (before normalisation turns a plain handle into an unresolvable link)."""
    problems: list[Problem] = []
    for rel in sorted(changed, key=topic_sort_key):
        if rel not in texts:
            continue
        topic = parse_topic(rel, texts[rel], resolve=index.resolve_target, strict=False)
        for ev in topic.evidence:
            for link in ev.links:
                if not link.source_id:
                    continue
                found = index.validate_ref(link.source_id, rule=rule)
                if found is None:
                    continue
                column = ev.text.find(link.target) + 1 if link.target in ev.text else 1
                problems.append(
                    Problem("INVALID_TOPIC_FORMAT", f"{found.message} ({rule})", "topics/" + rel, ev.line, column,
                            dict(found.details))
                )
    return problems


def _removed_error(missing: set[str], baseline: TopicTree) -> MemoryError:
    ordered = sorted(missing)
    shown = ", ".join(ordered[:MAX_REMOVED_LISTED]) + ("…" if len(ordered) > MAX_REMOVED_LISTED else "")
    first = baseline.by_id(ordered[0])
    return MemoryError(
        "INVALID_TOPIC_FORMAT",
        f"block ID must not be removed: {shown}",
        path=first.path if first is not None else None,
        line=first.line if first is not None else None,
        column=1 if first is not None else None,
        details={"removed": ordered},
    )


def _check_units(tree: TopicTree, baseline: TopicTree, index: SourceIndex, ctx: Context,
                 stage: Stage | None = None) -> list[Problem]:
    problems: list[Problem] = []
    # refs each committed block already had (ids are unique in an assembled tree), looked up
    # only for the units checked below, not built for the whole baseline
    def known_refs(memory_id: str) -> frozenset[str]:
        unit = baseline.by_id(memory_id)
        return frozenset(unit.source_refs) if unit is not None else frozenset()
    # A topic that is the very committed one (same bytes, same archives) has no ref new to its
    # blocks; if every ref it cites exists (cached per deps signature) it needs no check.
    checked: Iterable[Unit]
    if stage is None:
        checked = [u for topic in tree.topics for u in topic.units] if tree.dupfree else tree.units
    else:
        cache = stage.cache

        def full() -> set[str]:  # the paths of the topics whose units are checked
            return {t.path for t in tree.topics if not (baseline.topic(t.path) is t and cache.refs_ok(t, index))}

        def incremental() -> set[str]:
            diff = differing(tree, baseline)
            if diff is None:
                return full()
            made = {t.path for t in diff[0]}
            return made | cache.refs_unfine(tree.topics, made, index)

        check = stage.switches.choose("topics whose refs are checked", incremental, full)
        if tree.dupfree:  # its units are its topics' units in order: whole topics
            checked = [u for topic in _topics_at(tree, check, stage.switches) for u in topic.units]
        else:
            checked = [u for u in tree.units if u.topic_path in check]
    for unit in checked:
        known = known_refs(unit.memory_id)
        for ref in unit.source_refs:
            new = ref not in known
            found = index.validate_ref(ref, new=new, allowed=ctx.allowed_refs, rule=ctx.rule)
            if found is None:
                continue
            line, column = unit.line, 1
            for ev in unit.evidence:
                if ref in ev.source_ids:
                    line, column = ev.line, 1
                    break
            message = found.message
            if "not evidence of this transaction" in message or "not trusted" in message:
                message = f"{message} ({ctx.rule})"
            problems.append(Problem("INVALID_TOPIC_FORMAT", message, unit.path, line, column, dict(found.details)))
    return problems


def differing(tree: TopicTree, baseline: TopicTree) -> tuple[list[Topic], list[Topic]] | None:
    """``(made, gone)``: the topics of ``tree`` that are not the very parse ``baseline`` holds
    at their path, and the topics of ``baseline`` that ``tree`` does not hold as the very same
    parse, both in tree order -- found by one C-level identity pass when both trees list the
    same paths in the same order (every edit that adds or drops no file), else ``None``.
    Equal objects at a position mean equal paths there, so only the differing positions are
    compared by path."""
    global _LAST_DIFF
    last = _LAST_DIFF
    if last[0] is tree and last[1] is baseline:
        return last[2]
    a, b = tree.topics, baseline.topics
    if len(a) != len(b):
        return None
    at = list(compress(range(len(a)), map(is_not, a, b)))
    made = [a[i] for i in at]
    gone = [b[i] for i in at]
    out = None if any(x.path != y.path for x, y in zip(made, gone)) else (made, gone)
    _LAST_DIFF = (tree, baseline, out)
    return out


# (tree, baseline, ``differing(tree, baseline)``) of the last call: a transaction asks it of
# the same two trees three times (the lists answered are never changed)
_LAST_DIFF: tuple[Any, Any, Any] = (None, None, None)


def _missing_ids(ctx: Context, tree: TopicTree, baseline: TopicTree, switches: Switches) -> set[str]:
    """The required block ids ``tree`` lacks."""
    excluded = ctx.required_except
    if excluded is None:
        return set(ctx.required_ids) - set(tree.id_view)

    def full() -> set[str]:
        return (set(baseline.id_view) - excluded) - set(tree.id_view)

    def incremental() -> set[str]:
        # every unit id of a topic is an id of its tree, so an id of a baseline topic that the
        # new tree holds unchanged (the same parse) cannot be missing
        out: set[str] = set()
        diff = differing(tree, baseline)
        for topic in (diff[1] if diff is not None else baseline.topics):
            if tree.topic(topic.path) is topic:
                continue
            out.update(u.memory_id for u in topic.units if u.memory_id not in excluded and not tree.has_id(u.memory_id))
        return out

    return switches.choose("missing ids", incremental, full)


def _topics_at(tree: TopicTree, paths: Iterable[str], switches: Switches) -> list[Topic]:
    """The topics of ``tree`` at ``paths`` (those it holds), in tree order: each looked up by
    path instead of a pass over every topic. ``tree.topic`` takes a leading ``topics/`` off,
    so paths that start with one are found by the pass."""
    paths = set(paths)

    def every() -> list[Topic]:
        return [t for t in tree.topics if t.path in paths]

    def looked_up() -> list[Topic]:
        return [t for t in map(tree.topic, sorted(paths, key=topic_sort_key)) if t is not None]

    if any(path.startswith("topics/") for path in paths):
        return every()
    return switches.choose("topics at paths", looked_up, every, lambda a, b: len(a) == len(b) and all(map(is_, a, b)))


def _non_ascii_times(tree: TopicTree, changed: frozenset[str], switches: Switches) -> list[Problem]:
    out = []
    for topic in _topics_at(tree, changed, switches):
        for unit in topic.units:
            for ev in unit.evidence:
                if ev.non_ascii_time:
                    out.append(
                        Problem(
                            "INVALID_TOPIC_FORMAT",
                            f"invalid evidence date: {ev.raw_when} (times are written with ASCII digits YYYY[-MM[-DD]])",
                            unit.path,
                            ev.line,
                            1,
                        )
                    )
    return out


def _is_link_summary(value: object) -> bool:
    return (type(value) is tuple and len(value) == 2 and type(value[0]) is bool and type(value[1]) is tuple
            and all(type(b) is str for b in value[1]))


def _link_summaries(cache: WorkspaceCache):
    """``normalize.topic_link_summary`` of a topic, kept by its path and bytes in the parse
    cache: a fresh process checks the links of the topics it did not change without building
    their units (the check builds a topic only when its summary names an id the tree lacks)."""
    from ..format.linkcheck import topic_link_summary

    def summary(topic: Topic) -> tuple[bool, tuple[str, ...]]:
        return cache.kept("blinks", topic.path, topic.text, lambda: topic_link_summary(topic), _is_link_summary)
    return summary
