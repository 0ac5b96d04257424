"""Cross-topic link checks (memory spec §3.7): in changed record content a relative link to a
topic file must name a block (``#^id``), and every block link's id must exist in the tree.

``check_cross_topic_links_incremental`` gives the full check's answer from per-topic findings
kept across calls (a topic's findings are a function of the topic alone), looking only at the
topics an edit replaced and those linking to an id it removed.
"""

from __future__ import annotations

import posixpath
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from itertools import compress, repeat
from operator import attrgetter, is_not, itemgetter
from urllib.parse import unquote

from .blocklinks import SCHEME_RE
from .errors import Problem
from .topics import BLOCK_LINK_RE, INVALID_TOPIC_FORMAT, Topic, TopicTree, Unit, parse_tree, split_lines
from ..cache.registry import keeps

_BLOCK_FRAGMENT_RE = re.compile(r"\^(?:mem_[A-Za-z0-9_-]+|[A-Za-z0-9-]+)\Z")  # a block id or a mem_ id
# A link as OpenProgram's topic-link rule reads record text: a label of at least one character
# and a target of at least one, on one line. Spaces belong to the target, and an image
# (``![alt](…)``) is a link like any other.
_RULE_LINK_RE = re.compile(r"\[([^\]\n]+)\]\(([^)\n]+)\)")
TOPIC_PATH = attrgetter("path")


def forget_dead_parses(memo: dict[int, tuple], topics: tuple[Topic, ...]) -> None:
    """Drop what a per-parse memo (keyed by ``id(topic)``, the parse first in each value)
    holds for parses no longer in the tree once it is twice the tree's size (an entry keeps
    its parse alive)."""
    if len(memo) > 2 * len(topics) + 64:
        live = {id(t): t for t in topics}
        for key, value in list(memo.items()):  # one C call: safe while another thread adds
            if live.get(key) is not value[0]:
                memo.pop(key, None)


def _link_problem(topic_path: str, message: str, line: int, column: int, target: str) -> Problem:
    return Problem(INVALID_TOPIC_FORMAT, message, "topics/" + topic_path, line, column, {"target": target})


def _suffix(path: str) -> str:
    """The file extension as OpenProgram's rule reads it (``PurePath.suffix``: the last dot of
    the last name, not a leading one, not a trailing one), compared case-blind there: a link to
    ``notes.MD`` is a topic link as much as one to ``notes.md``."""
    name = path.rstrip("/").rpartition("/")[2]
    i = name.rfind(".")
    return name[i:] if 0 < i < len(name) - 1 else ""


def _is_relative_link(path: str) -> bool:
    return not (path.startswith("/") or SCHEME_RE.match(path))


def check_cross_topic_links(
    tree: TopicTree | Mapping[str, str | None],
    *,
    committed: TopicTree | None = None,
    changed_only: bool = True,
) -> list[Problem]:
    """§3.7 rules with positions: in changed record content (units new or whose body differs
    from ``committed``; all units when ``committed`` is None or ``changed_only`` is False) a
    relative link to a ``.md`` inside ``topics/`` must end ``#^<id>``; and every unit's ``#^id``
    targets must exist in the tree (``dangling block link``)."""
    if not isinstance(tree, TopicTree):
        tree = parse_tree({k: v for k, v in tree.items() if v is not None}, strict=False)
    problems: list[Problem] = []
    ids = tree.ids
    seen_paragraphs: set[tuple[str, int]] = set()
    line_cache: dict[str, list[str]] = {}
    for unit in tree.units:
        key = (unit.topic_path, unit.line)
        if key in seen_paragraphs or "](" not in unit.body:
            continue
        seen_paragraphs.add(key)
        if unit.topic_path not in line_cache:
            topic = tree.topic(unit.topic_path)
            line_cache[unit.topic_path] = split_lines(topic.text) if topic else []
        changed = _unit_changed(unit, committed, changed_only)
        for bid, problem in _unit_link_findings(unit, line_cache[unit.topic_path]):
            if bid is not None:
                if bid not in ids:
                    problems.append(problem)
            elif changed:
                problems.append(problem)
    return problems


def _unit_changed(unit: Unit, committed: TopicTree | None, changed_only: bool) -> bool:
    if committed is None or not changed_only:
        return True
    old = committed.by_id(unit.identity)
    return old is None or old.body != unit.body


def _unit_link_findings(unit: Unit, lines: list[str]) -> list[tuple[str | None, Problem]]:
    """What ``check_cross_topic_links`` may report for one unit, in its order: ``(bid,
    problem)`` for a block link (reported when ``bid`` is not in the tree) and ``(None,
    problem)`` for a topic link without ``#^id`` (reported when the unit's content changed)."""
    out: list[tuple[str | None, Problem]] = []
    for m, line_no, col in _links_with_positions(lines, unit):
        target = m.group(2)
        path_part, hash_, fragment = target.partition("#")
        if fragment.startswith("^"):
            bid = fragment[1:]
            if _BLOCK_FRAGMENT_RE.match(fragment):
                out.append((bid, _link_problem(unit.topic_path, f"dangling block link: {bid}", line_no, col, target)))
        if not path_part or not _is_relative_link(path_part):
            continue  # a link within the file (``#heading``) names no other topic: OpenProgram's rule too
        rel = unquote(path_part)
        if _suffix(rel).lower() != ".md":
            continue
        norm = posixpath.normpath(posixpath.join(posixpath.dirname(unit.topic_path), rel))
        if norm == ".." or norm.startswith("../"):
            continue
        if not (hash_ and _BLOCK_FRAGMENT_RE.match(fragment)):
            out.append((None, _link_problem(
                unit.topic_path, f"Topic-to-Topic link must target #^block-id: {unit.topic_path} -> {target}",
                line_no, col, target,
            )))
    return out


# topic (by identity) -> its units' link findings; a function of the topic alone
_TOPIC_FINDINGS: dict[int, tuple[Topic, tuple[tuple[Unit, tuple[tuple[str | None, Problem], ...]], ...]]] = keeps({})


def topic_link_findings(topic: Topic) -> tuple[tuple[Unit, tuple[tuple[str | None, Problem], ...]], ...]:
    """Per unit of ``topic`` holding a link, its ``_unit_link_findings`` (paragraphs once),
    remembered while the topic object lives."""
    hit = _TOPIC_FINDINGS.get(id(topic))
    if hit is not None and hit[0] is topic:
        return hit[1]
    seen: set[int] = set()
    lines: list[str] | None = None
    out = []
    for unit in topic.units:
        if unit.line in seen or "](" not in unit.body:
            continue
        seen.add(unit.line)
        if lines is None:
            lines = split_lines(topic.text)
        out.append((unit, tuple(_unit_link_findings(unit, lines))))
    value = tuple(out)
    _TOPIC_FINDINGS[id(topic)] = (topic, value)
    return value


def topic_link_summary(topic: Topic) -> tuple[bool, tuple[str, ...]]:
    """What the link check needs of ``topic`` besides the tree it is in: whether any of its
    units holds a topic link without ``#^id`` (reported when the unit changed), and the
    sorted block ids its block links name (each reported when the tree lacks it). Like
    ``topic_link_findings``, a function of the topic's path and text, so it can be kept by
    them across processes and answer for a topic whose units were never built."""
    bids: set[str] = set()
    bare = False
    for _unit, findings in topic_link_findings(topic):
        for bid, _problem in findings:
            if bid is None:
                bare = True
            else:
                bids.add(bid)
    return bare, tuple(sorted(bids))


# The last memoised link check: its tree, and per path the topic object found clear in it (no
# bare topic link, every block id it links to in that tree) with those ids; ``_LINKED_BY`` indexes
# the clear topics by the ids they link to. Only those topics' answers carry over to the next
# tree, and only while none of their ids left it. Updated in place under ``_CLEAR_LOCK``.
_CLEAR_LOCK = threading.Lock()
_CLEAR: dict[str, tuple[Topic, tuple[str, ...]]] = keeps({})
_LINKED_BY: dict[str, set[str]] = keeps({})
_CLEAR_TREE: list[TopicTree | None] = [None]
# the positions in ``_CLEAR_TREE[0]`` of the topics the last call looked at
_LOOKED: list[list[int]] = [[]]
# More replaced topics than this since the last check and every topic is looked at again.
CLEAR_MAX_MOVED = 64


def check_cross_topic_links_incremental(
    tree: TopicTree, *, committed: TopicTree | None = None,
    summary: Callable[[Topic], tuple[bool, tuple[str, ...]] | None] | None = None,
) -> list[Problem]:
    """``check_cross_topic_links(tree, committed=committed)`` from per-topic findings kept
    across calls: a topic's findings are a function of the topic alone, and what the tree adds
    (is the id there, did the unit's content change) is looked up for the few units that hold
    a link. Only for a tree free of duplicate ids (its units are its topics' units in order);
    anything else takes the full check. ``summary(topic)``: ``topic_link_summary(topic)``
    (possibly remembered by path and text) or ``None``; a topic it clears is not looked into.

    With ``summary``, a topic found clear by the last call is not asked again while it is the
    very same parse and no id it links to left the tree since: its answer cannot have changed
    (it has no bare link, so the committed tree does not enter it). So an edit looks at the
    topics it replaced, those linking to an id it removed, and the few that are not clear --
    not at every topic of the tree."""
    if not tree.dupfree:
        return check_cross_topic_links(tree, committed=committed)
    forget_dead_parses(_TOPIC_FINDINGS, tree.topics)
    if summary is None:
        return _link_problems(tree, tree.topics, committed, None)
    with _CLEAR_LOCK:
        return _link_problems(tree, _to_look_at(tree), committed, summary)


def _to_look_at(tree: TopicTree) -> Iterable[Topic]:
    """The topics of ``tree`` (in its order) whose answer ``_CLEAR`` does not give; forgets the
    clear answers that no longer hold. Call with ``_CLEAR_LOCK`` held."""
    topics = tree.topics
    last = _CLEAR_TREE[0]
    _CLEAR_TREE[0] = tree
    looked_last = _LOOKED[0]
    if last is None or not last.dupfree or len(last.topics) != len(topics):
        return _looked_at(topics, range(len(topics)), clear=True)
    moved = list(compress(range(len(topics)), map(is_not, topics, last.topics)))
    if len(moved) > CLEAR_MAX_MOVED:
        return _looked_at(topics, range(len(topics)), clear=True)
    old = last.topics
    forgot = False
    for mid in {mid for i in moved for mid in old[i].memory_ids if not tree.has_id(mid)}:
        for path in _LINKED_BY.pop(mid, ()):
            _forget_clear(path)
            forgot = True
    if forgot:  # where the forgotten paths stand is not at hand: every topic is asked
        return _looked_at(topics, range(len(topics)))
    # A topic the last call did not look at was clear in the last tree and nothing forgot it
    # since (only the topics looked at, and the ids that left, change ``_CLEAR``): while it is
    # the very parse at its position it still is.
    return _looked_at(topics, sorted(set(moved).union(looked_last)))


def _looked_at(topics: tuple[Topic, ...], at: Iterable[int], clear: bool = False) -> list[Topic]:
    """The topics at the positions ``at`` that are not their path's clear parse (all of them,
    after forgetting every clear answer, with ``clear``), noted in ``_LOOKED``."""
    if clear:
        _CLEAR.clear()
        _LINKED_BY.clear()
        _LOOKED[0] = list(at)
        return list(topics)
    at = list(at)
    hits = map(_CLEAR.get, map(TOPIC_PATH, map(topics.__getitem__, at)), repeat(_NO_CLEAR))
    looked = list(compress(at, map(is_not, map(topics.__getitem__, at), map(_FIRST, hits))))
    _LOOKED[0] = looked
    return list(map(topics.__getitem__, looked))


def _forget_clear(path: str) -> None:
    hit = _CLEAR.pop(path, None)
    if hit is not None:
        for bid in hit[1]:
            paths = _LINKED_BY.get(bid)
            if paths is not None:
                paths.discard(path)
                if not paths:
                    del _LINKED_BY[bid]


def _link_problems(tree: TopicTree, topics: Iterable[Topic], committed: TopicTree | None,
                   summary: Callable[[Topic], tuple[bool, tuple[str, ...]] | None] | None) -> list[Problem]:
    problems: list[Problem] = []
    has_id = tree.has_id
    for topic in topics:
        if summary is not None:
            known = summary(topic)
            if _CLEAR.get(topic.path, _NO_CLEAR)[0] is not topic:
                _forget_clear(topic.path)
            # no bare topic link and every block link's id in the tree: nothing to report,
            # whatever changed, so a cached topic's units need not be built to know it
            if known is not None and not known[0] and all(map(has_id, known[1])):
                _CLEAR[topic.path] = (topic, known[1])
                for bid in known[1]:
                    _LINKED_BY.setdefault(bid, set()).add(topic.path)
                continue
        for unit, findings in topic_link_findings(topic):
            if not findings:
                continue
            changed = _unit_changed(unit, committed, True)
            for bid, problem in findings:
                if bid is not None:
                    if not has_id(bid):
                        problems.append(problem)
                elif changed:
                    problems.append(problem)
    return problems



_NO_CLEAR = (None, ())
_FIRST = itemgetter(0)


def _links_with_positions(lines: list[str], unit: Unit):
    for index in range(unit.line - 1, min(unit.end_line, len(lines))):
        for m in _RULE_LINK_RE.finditer(lines[index]):
            yield m, index + 1, m.start() + 1



def scheme_block_links(topics: Iterable[Topic], committed: TopicTree, ids: frozenset[str]) -> list[Problem]:
    """A link whose address has a scheme but ends in ``#^id`` of a block in the tree, on a line
    the edit wrote (any line of a changed topic not in its committed text): OpenProgram's
    install points every block link at its id's file whatever the address, so it would replace
    the owner's URL with a topic path under "ok". Refused instead, naming the link."""
    out: list[Problem] = []
    for topic in topics:
        if "#^" not in topic.text:
            continue
        old = committed.topic(topic.path)
        kept = set(split_lines(old.text)) if old is not None else set()
        for n, line in enumerate(split_lines(topic.text), start=1):
            if "#^" not in line or line in kept:
                continue
            for m in BLOCK_LINK_RE.finditer(line):
                target = f"{m.group(2)}#^{m.group(3)}"
                if SCHEME_RE.match(m.group(2)) and m.group(3) in ids:
                    out.append(_link_problem(
                        topic.path, f"a link with a scheme cannot end in a block id: {target} (OpenProgram would "
                        f"replace the address with the topic file of ^{m.group(3)}; drop the #^{m.group(3)} or link "
                        "the block by its topic path)", n, m.start() + 1, target))
    return out


__all__ = ["CLEAR_MAX_MOVED", "TOPIC_PATH", "check_cross_topic_links", "check_cross_topic_links_incremental",
           "forget_dead_parses", "scheme_block_links", "topic_link_findings", "topic_link_summary"]
