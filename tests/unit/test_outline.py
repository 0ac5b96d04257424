"""The app's first-frame topic outline (issue 12) agrees with the strict parse on
every file the parse accepts."""

from __future__ import annotations

from pathlib import Path

from memory_tui.core.outline import topic_outline
from memory_tui.core.workspace import open_state


def _records(topic) -> int:
    return sum(1 for u in topic.units if not u.is_alias)


def test_outline_matches_the_parse_on_the_fixture(fixture_state_ro):
    view = open_state(fixture_state_ro)
    outline = {t.path: t for t in topic_outline(fixture_state_ro / "memory")}
    parsed = {t.path: t for t in view.tree.topics}
    assert set(parsed) <= set(outline)
    clean = [p for p, t in parsed.items() if not any(q.details.get("severity") != "warning" for q in t.problems)]
    assert clean
    for path in clean:
        t = parsed[path]
        title = next((h.title for h in t.headings if h.level == 1), None) or Path(path).stem
        assert (outline[path].records, outline[path].title, outline[path].readable) == (_records(t), title, True), path


def test_outline_counts_aliases_legacy_ids_and_skips_bad_suffixes(tmp_path):
    topics = tmp_path / "memory" / "topics" / "a"
    topics.mkdir(parents=True)
    (topics / "x.md").write_text(
        "# Ex\n\n"
        "One fact.[^e1] ^blk-aaaa1111 ^blk-bbbb2222\n\n"  # one record with an alias
        "Legacy.[^mem_1][^mem_2]\n\n"  # two legacy units
        "Broken.[^e1] ^bad_id!\n\n"  # an invalid suffix: no record
        "[^e1]: 2026-01 [s](../../sources/x.md)\n",
        encoding="utf-8",
    )
    (topics / "y.md").write_bytes(b"\xff\xfe not utf-8")
    (topics / "z.txt").write_text("not a topic", encoding="utf-8")
    out = {t.path: t for t in topic_outline(tmp_path / "memory")}
    assert set(out) == {"a/x.md", "a/y.md"}
    assert (out["a/x.md"].title, out["a/x.md"].records) == ("Ex", 3)
    assert (out["a/y.md"].readable, out["a/y.md"].records, out["a/y.md"].title) == (False, 0, "y")
    assert topic_outline(tmp_path / "nowhere") == ()
