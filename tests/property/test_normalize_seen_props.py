"""Incremental = full for normalisation's passthrough (``passthrough._SEEN``): over random
sequences of calls as a transaction makes them -- the staged texts mostly the very objects of
the last call, the committed tree mostly the very parses, a few texts replaced, copied (equal,
another object), deleted or added, files passing on their own ids or only on the whole tree's,
proofs that grow while the proof key stands and are reset with a new key, paths handed in or
out of tree order -- each call's result equals the one of the same call asked file by file
(``mode="full"``), and ``mode="check"`` finds nothing to object to."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_tui.core.format import passthrough
from memory_tui.core.format.normalize import normalize_tree
from memory_tui.core.format.topics import assemble_tree, parse_topic, topic_sort_key
from test_tree_incremental_props import _parse  # the same parse object for the same text, as a cache keeps them

PATHS = ("a.md", "b.md", "sub/c.md", "sub-x.md", "z.md")
IDS = tuple(f"{n:08x}" for n in range(0x2b3c4d00, 0x2b3c4d00 + 6))

# a topic: the ids of its records (from a small shared pool, so ids also stand in other files),
# whether it cites a local label (never passed through) and the id a heading ends in, if any (a
# line-end id that is not one of its records': the file passes only while another holds it)
TOPIC = st.tuples(st.lists(st.sampled_from(range(len(IDS))), min_size=1, max_size=3, unique=True), st.booleans(),
                  st.one_of(st.none(), st.sampled_from(range(len(IDS)))))
# per path: the committed topic (None: no such file), what is staged ("same": the committed text
# object, "keep": the text object staged last time, whatever is committed now, "copy": an equal
# text, another object, "gone": deleted, "absent": not handed in, or a topic of its own), whether
# its committed parse is made again (another object) and whether the text staged is proven
CHOICE = st.tuples(st.one_of(st.none(), TOPIC),
                   st.one_of(st.sampled_from(["same", "same", "keep", "keep", "copy", "gone", "absent"]), TOPIC),
                   st.booleans(), st.booleans())
STEP = st.tuples(st.dictionaries(st.sampled_from(PATHS), CHOICE, min_size=1, max_size=len(PATHS)),
                 st.booleans(),  # a new proof key
                 st.integers(min_value=0, max_value=3))  # the order the paths are handed in


def _text(path: str, spec) -> str:
    ids, label, stray = spec
    head = "" if stray is None else f"## Part ^{IDS[stray]}\n\n"
    body = "\n\n".join(f"Fact {i} of {path}.[^e-{n:010x}] ^{IDS[i]}\n\n[^e-{n:010x}]: Time: `2026-01-0{1 + i}`; "
                       f"Sources: [x](D1:{i})" for n, i in enumerate(ids))
    extra = "\n\nNew fact.[^e1]\n\n[^e1]: Time: `2026`; Sources: [x](D1:9)" if label else ""
    return f"# Topic {path}\n\n{head}{body}{extra}\n"


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=8), seed=st.integers(0, 2**16))
def test_remembered_passthrough_equals_the_file_by_file_test(steps, seed):
    rnd = random.Random(seed)
    made: dict[tuple[str, object], str] = {}  # the text object each (path, topic) was first given
    parsed: dict[tuple[str, str], object] = {}  # the parse of each (path, text), kept as a cache does
    staged_last: dict[str, str | None] = {}
    committed_last: dict[str, str] = {}
    key = object()
    proofs: set[tuple[str, str]] = set()
    passthrough._SEEN = None
    for choices, new_key, order in steps:
        if new_key:
            key = object()
            proofs = {p for p in proofs if rnd.random() < 0.5}
        committed_texts = dict(committed_last)
        staged = {p: t for p, t in staged_last.items()}
        for path, (committed, staged_as, reparse, proven) in choices.items():
            if committed is None:
                committed_texts.pop(path, None)
            else:
                committed_texts[path] = made.setdefault((path, repr(committed)), _text(path, committed))
            if reparse and path in committed_texts:
                parsed.pop((path, committed_texts[path]), None)
            if staged_as == "keep":
                pass
            elif staged_as == "same":
                staged[path] = committed_texts.get(path, staged.get(path))
            elif staged_as == "copy":
                old = committed_texts.get(path) or staged.get(path)
                staged[path] = None if old is None else "".join(list(old))
            elif staged_as == "gone":
                staged[path] = None
            elif staged_as == "absent":
                staged.pop(path, None)
            else:
                staged[path] = made.setdefault((path, repr(staged_as)), _text(path, staged_as))
            if proven and staged.get(path) is not None:
                proofs.add((path, staged[path]))
        tree = assemble_tree(_parse(committed_texts, parsed))
        paths = sorted(staged, key=topic_sort_key)
        if order == 1:
            paths.reverse()
        elif order == 2:
            rnd.shuffle(paths)
        staged = {p: staged[p] for p in paths}
        asked: list[tuple[str, str]] = []

        def proven_canonical(path: str, text: str) -> bool:
            asked.append((path, text))
            return (path, text) in proofs

        kwargs = dict(committed=tree, assume_committed_normal=True, proven_canonical=proven_canonical, proof_key=key)
        got = normalize_tree(staged, **kwargs)
        seen = passthrough._SEEN
        want = normalize_tree(staged, mode="full", **kwargs)
        passthrough._SEEN = seen  # the full call's snapshot would hide what the incremental one left
        assert got == want
        assert list(got.texts) == list(want.texts) == sorted(got.texts, key=topic_sort_key)
        assert got.passed == want.passed
        # and check mode compares the remembered answer with the file-by-file test
        normalize_tree(staged, mode="check", **kwargs)
        passthrough._SEEN = seen
        staged_last, committed_last = staged, committed_texts


def test_a_file_passed_on_another_files_id_is_asked_again_when_that_id_leaves():
    """b.md's heading ends in a.md's id: it passes on the whole tree's ids, not its own, so
    with the very same text and committed parse it is asked again once a.md drops the id."""
    a_with, a_without = _text("a.md", ([0], False, None)), _text("a.md", ([1], False, None))
    b = _text("b.md", ([2], False, 0))
    b_topic = parse_topic("b.md", b, strict=False)
    key = object()
    passthrough._SEEN = None
    kwargs = dict(assume_committed_normal=True, proof_key=key)
    before = assemble_tree([parse_topic("a.md", a_with, strict=False), b_topic])
    assert normalize_tree({"a.md": a_with, "b.md": b}, committed=before, **kwargs).passed == {"a.md", "b.md"}
    after = assemble_tree([parse_topic("a.md", a_without, strict=False), b_topic])
    again = normalize_tree({"a.md": a_without, "b.md": b}, committed=after, **kwargs)
    assert again.passed == {"a.md"}
    assert again == normalize_tree({"a.md": a_without, "b.md": b}, committed=after, mode="full", **kwargs)


def test_a_file_whose_committed_topic_left_is_asked_again():
    """One committed topic goes and another comes (as many topics as before, the same staged
    paths): the file whose committed topic went is no longer passed through."""
    a, b, c = (_text(p, ([i], False, None)) for i, p in enumerate(("a.md", "b.md", "c.md")))
    ta, tb, tc = (parse_topic(p, t, strict=False) for p, t in (("a.md", a), ("b.md", b), ("c.md", c)))
    passthrough._SEEN = None
    kwargs = dict(assume_committed_normal=True, proof_key=object())
    staged = {"a.md": a, "b.md": b, "c.md": c}
    assert normalize_tree(staged, committed=assemble_tree([ta, tb]), **kwargs).passed == {"a.md", "b.md"}
    again = normalize_tree(staged, committed=assemble_tree([ta, tc]), **kwargs)
    assert again.passed == {"a.md", "c.md"}
    assert again == normalize_tree(staged, committed=assemble_tree([ta, tc]), mode="full", **kwargs)
