"""The organizer's duplicate search finds exactly the folds and the look-alike candidates the
plain all-pairs comparison finds (it only skips pairs that cannot match)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from memory_tui.pipeline import reorganize
from memory_tui.pipeline.reorganize import look_alike, plan, same_thing


@dataclass
class _Unit:
    memory_id: str
    content: str
    source_refs: tuple[str, ...] = ("s-1",)
    aliases: tuple[str, ...] = ()
    legacy: bool = False
    relation_targets: tuple[str, ...] = ()
    annotations: tuple = ()
    when: str = "2026-01-01"


@dataclass
class _Tree:
    units: list = field(default_factory=list)


def _all_pairs(tree, creation_order):
    # the reference: every later unit compared with same_thing, as the rule reads
    units = [u for u in tree.units if not u.legacy and len(u.aliases) <= 1 and u.source_refs]
    targets = {t for u in tree.units for t in u.relation_targets}
    order = {u.memory_id: i for i, u in enumerate(tree.units)}
    units.sort(key=lambda u: (creation_order.get(u.memory_id, 10**9), order[u.memory_id]))
    groups, alike, consumed = [], [], set()
    for i, keep in enumerate(units):
        if keep.memory_id in consumed:
            continue
        group = [o.memory_id for o in units[i + 1:]
                 if o.memory_id not in consumed and o.memory_id not in targets and same_thing(keep.content, o.content)]
        alike += [[keep.memory_id, o.memory_id] for o in units[i + 1:]
                  if o.memory_id not in consumed and o.memory_id not in group and look_alike(keep.content, o.content)]
        if group:
            consumed.update(group)
            consumed.add(keep.memory_id)
            groups.append((keep.memory_id, group))
    return groups, alike


def _groups(ops):
    out = []
    for op in ops:
        if op["op"] == "update_record":
            out.append((op["memory_id"], []))
        else:
            out[-1][1].append(op["memory_id"])
    return out


def test_candidate_search_matches_all_pairs():
    rng = random.Random(7)
    words = "tea kyoto train budget rust python lazy garden cello berlin invoice backup laptop fish".split()
    for _round in range(40):
        units = []
        for n in range(rng.randint(2, 60)):
            k = rng.randint(1, 12)
            text = " ".join(rng.choice(words) for _ in range(k))
            if rng.random() < 0.2:
                text = f'She said "{rng.choice(words)} {rng.choice(words)} again" today'
            if rng.random() < 0.2 and units:
                text = rng.choice(units).content.upper() + "  "
            units.append(_Unit(f"b{n}", text))
        tree = _Tree(units)
        order = {u.memory_id: rng.randint(0, 30) for u in units if rng.random() < 0.7}
        ops, candidates = plan(tree, order)
        assert (_groups(ops), [c["memory_ids"] for c in candidates]) == _all_pairs(tree, order)


def test_candidates_superset_on_near_duplicates():
    # 17 of 18 words shared: Jaccard 17/19 >= 0.85, found through the prefix filter
    base = [f"w{i}" for i in range(18)]
    a = " ".join(base)
    b = " ".join(base[:-1] + ["other"])
    keys = [reorganize._key(a), reorganize._key(b)]
    assert look_alike(a, b) and not same_thing(a, b)
    assert reorganize._candidates(keys)(0) == [1]


def test_a_fold_answer_confirms_only_what_it_names_readably():
    from memory_tui.pipeline.writers.base import FoldCandidate, parse_fold_answer

    cands = [FoldCandidate(1, ("a", "b"), ("x", "y"), ("topics/t.md", "topics/t.md")),
             FoldCandidate(2, ("c", "d"), ("x", "y"), ("topics/t.md", "topics/t.md"))]
    assert parse_fold_answer('thinking…\n{"same": [2, 7, true, "1"]}\n', cands) == {("c", "d")}
    assert parse_fold_answer('{"same": [1]}\nsorry, I meant\n{"same": []}', cands) == frozenset()
    assert parse_fold_answer("pairs 1 and 2 are the same", cands) == frozenset()
    assert parse_fold_answer('{"same": 1}', cands) == frozenset()
