"""Random and mutated topic text never breaks the parser; every Problem says where."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.errors import MemoryError
from memory_tui.core.topics import parse_topic, parse_tree, parse_tree_strict

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
