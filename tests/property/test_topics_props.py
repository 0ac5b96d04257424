"""Random and mutated topic text never breaks the parser; every Problem says where."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.topics import parse_topic, parse_tree, parse_tree_strict

SEED = (
    "# Dave\n\n## Preferences\n\nDave prefers tea.[^e-5bf6e713a0] ^97de5549\n\n"
    "[^e-5bf6e713a0]: Time: `2026-08-09`; Sources: [tea](../../sources/openprogram/_v2/s.md#source-9047c1917b2f0777)\n\n"
    "Links [x](dave.md#^97de5549) daily.[^e1][^mem_a] ^ae99a3a8 ^bbbb\n\n"
    "[^e1]: Time: `2026-08`; Sources: [daily](openprogram/s/m)\n"
    "[^mem_a]: 2024 · Sources: [s](D1:2)\n```\nfenced [^zz]\n```\n<!-- c\n"
)
ALPHABET = st.sampled_from(
    list("abc ^[]()#`:;·,-_.!\n\t") + ["[^", "[^e1]", " ^abcd1234", "\u2029", "٢", "```", "<!--", "Time:", "Sources:"]
)


def _resolver(topic_path, target):
    if "boom" in target:
        raise ValueError("resolver failure must not escape")
    return None


def _check(topic):
    for p in topic.problems:
        assert p.path == "topics/" + topic.path
        assert isinstance(p.line, int) and p.line >= 1
        assert isinstance(p.column, int) and p.column >= 1
        assert p.code == "INVALID_TOPIC_FORMAT"
    for u in topic.units:
        assert 1 <= u.line <= u.end_line
        assert u.memory_id in u.aliases


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALPHABET, max_size=80).map("".join))
def test_random_text_never_raises(text):
    _check(parse_topic("p/x.md", text, resolve=_resolver))
    _check(parse_topic("p/x.md", text, strict=False))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_mutated_seed_never_raises(data):
    text = SEED
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = data.draw(ALPHABET)
        if op == "insert":
            text = text[:pos] + piece + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + len(piece):]
        else:
            text = text[:pos] + piece + text[pos + 1:]
    _check(parse_topic("people/dave.md", text, resolve=_resolver))
    tree = parse_tree({"people/dave.md": text, "b.md": text.encode("utf-8") + b"\xff"})
    for p in tree.problems:
        assert p.path and p.line and p.line >= 1
    try:
        parse_tree_strict({"people/dave.md": text})
    except MemoryError as exc:
        assert exc.path and exc.line


# --- normalisation ---------------------------------------------------------------------------

from memory_tui.core.format.blocklinks import rewrite_block_links  # noqa: E402
from memory_tui.core.format.linkcheck import check_cross_topic_links  # noqa: E402
from memory_tui.core.format.normalize import normalize_tree  # noqa: E402

STAGED_SEED = (
    "# Dave\n\n## Tea\n\nDave likes [x](dave.md#^97de5549) tea.[^e1] ^97de5549\n\n"
    "[^e1]: Time: `2026-08`; Sources: [daily](openprogram/s/m)\n\n"
    "## Empty\n\n<!-- c -->\n\nMore.[^e2][^mem_a]\n\n[^e2]: Time: undated; Sources: p/t/m2, D1:2\n"
    "[^mem_a]: 2024 · Sources: [s](D1:2)\n"
)


def _mutate(data, text):
    for _ in range(data.draw(st.integers(0, 4))):
        pos = data.draw(st.integers(0, len(text)))
        piece = data.draw(ALPHABET)
        if data.draw(st.booleans()):
            text = text[:pos] + piece + text[pos:]
        else:
            text = text[:pos] + text[pos + len(piece):]
    return text


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_normalisation_never_raises_and_is_idempotent(data):
    staged = {"people/dave.md": _mutate(data, STAGED_SEED), "a.md": _mutate(data, STAGED_SEED)}
    committed = {"97de5549"}
    first = normalize_tree(staged, committed_ids=committed)
    for p in (*first.dropped, *first.problems):
        assert p.path and p.path.startswith("topics/") and p.line and p.line >= 1
    for path, text in first.texts.items():
        if text is not None:
            assert text.endswith("\n") and not text.endswith("\n\n")
    if first.errors:  # a transaction would refuse this stage; nothing to install
        return
    # Once installed, the allocated ids are committed; normalising again changes nothing.
    again = normalize_tree(
        {p: t for p, t in first.texts.items() if t is not None},
        committed_ids=committed | set(first.block_ids.values()),
    )
    assert again.changed == {}
    assert again.block_ids == {}
    links = rewrite_block_links(first.texts)
    assert rewrite_block_links(links) == links
    for p in check_cross_topic_links(first.texts):
        assert p.line and p.column


def test_a_glued_uncommitted_caret_word_is_left_as_text_and_normalising_again_changes_nothing():
    # found by the property above: "#^9" at a line's end got a gap on the first pass ("# ^9"),
    # which made it an invented id that the second pass stripped, text and all
    text = STAGED_SEED.replace("(dave.md#^97de5549)", "(dave.md#^9\n7de5549)")
    first = normalize_tree({"a.md": text}, committed_ids={"97de5549"})
    assert not first.errors and "dave.md#^9\n" in first.texts["a.md"]
    again = normalize_tree({p: t for p, t in first.texts.items() if t is not None},
                           committed_ids={"97de5549"} | set(first.block_ids.values()))
    assert again.changed == {}
