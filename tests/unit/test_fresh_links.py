"""The cross-topic link check of a fresh process reads a kept per-topic summary
(``linkcheck.topic_link_summary``: any bare topic link, the block ids linked) instead of
building the units of every cached topic, and still reports exactly what the full check
reports: over random trees of topics whose units are never built unless the check needs
them, and through the parse cache across fresh processes, where an unchanged topic holding a
dangling block link must still refuse the edit."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_tui.core.format import linkcheck

from memory_tui.core.store import parsecache

from memory_tui.core.tx import api as tx
from memory_tui.core.tx.result import TxResult
from memory_tui.core.format.linkcheck import check_cross_topic_links, check_cross_topic_links_incremental, topic_link_summary
from memory_tui.core.store import txcache
from memory_tui.core.format.topics import Topic, assemble_tree, parse_topic, topic_sort_key
from switching import set_derive

PATHS = ("a.md", "b.md", "sub/c.md", "sub/d.md", "z.md")
IDS = tuple(f"{n:08x}" for n in range(0x2a2b3c00, 0x2a2b3c00 + 10))


def _record(n: int, own: tuple[str, ...], link: tuple[str, str] | None, bare: bool) -> str:
    tail = f", see [that]({link[0]}#^{link[1]})" if link is not None else ""
    if bare:
        tail += ", also [plain](a.md)"
    ids = " ".join("^" + i for i in own)  # two ids: an alias and its identity
    return (f"Fact {n}{tail}.[^e-{n:010x}] {ids}\n\n"
            f"[^e-{n:010x}]: Time: `2026-01-0{1 + n % 9}`; Sources: [x](D1:{n})\n")


OWN = st.lists(st.sampled_from(IDS), min_size=1, max_size=2, unique=True).map(tuple)
LINK = st.one_of(st.none(), st.tuples(st.sampled_from(PATHS), st.sampled_from(IDS + ("ffffffff",))))
TOPIC = st.lists(st.tuples(OWN, LINK, st.booleans()), min_size=0, max_size=4)
TREE = st.dictionaries(st.sampled_from(PATHS), TOPIC, min_size=1, max_size=len(PATHS))


def _texts(spec: dict[str, list], salt: int) -> dict[str, str]:
    out = {}
    for i, (path, records) in enumerate(sorted(spec.items())):
        body = "\n".join(_record(salt * 100 + i * 10 + j, *r) for j, r in enumerate(records))
        out[path] = f"# Topic {path}\n\n{body}"
    return out


def _deferred(topic: Topic, built: list[str]) -> Topic:
    """``topic`` as the parse cache hands it out: units built on first read, noted in ``built``."""
    def build():
        built.append(topic.path)
        return topic.units, topic.evidence
    return Topic.deferred(topic.path, topic.text, topic.headings, topic.problems, topic.memory_ids, build)


@settings(max_examples=200, deadline=None)
@given(first=TREE, second=TREE, keep=st.sets(st.sampled_from(PATHS)), use_committed=st.booleans())
def test_summaries_report_what_the_full_check_reports_and_build_only_what_they_cannot_clear(
        first, second, keep, use_committed):
    old_texts = _texts(first, 0)
    new_texts = {p: t for p, t in old_texts.items() if p in keep}  # some topics unchanged
    new_texts.update(_texts({p: r for p, r in second.items() if p not in keep}, 1))
    prev = assemble_tree([parse_topic(p, old_texts[p], strict=True) for p in sorted(old_texts, key=topic_sort_key)])
    parsed = {p: parse_topic(p, new_texts[p], strict=True) for p in new_texts}
    full = assemble_tree([parsed[p] for p in sorted(parsed, key=topic_sort_key)])
    built: list[str] = []
    lazy = assemble_tree([_deferred(parsed[p], built) for p in sorted(parsed, key=topic_sort_key)])
    # as kept by another process: a function of the path and text, taken from that text's parse
    kept = {(t.path, t.text): topic_link_summary(t) for t in parsed.values()}
    asked: list[str] = []

    def summary(topic: Topic):
        asked.append(topic.path)
        return kept[(topic.path, topic.text)]

    committed = prev if use_committed else None
    want = check_cross_topic_links(full, committed=committed)
    if not lazy.dupfree:
        return  # the full check itself runs: nothing is skipped
    assert check_cross_topic_links_incremental(lazy, committed=committed, summary=summary) == want
    assert sorted(asked) == sorted(parsed)
    cleared = {p for p, t in parsed.items()
               if not kept[(p, t.text)][0] and all(map(full.has_id, kept[(p, t.text)][1]))}
    assert set(built) == set(parsed) - cleared  # a cleared topic's units are never built


def test_summary_names_every_linked_block_id_and_any_bare_link():
    text = ("# T\n\nOne [x](b.md#^0000000a) and [y](#^0000000b).[^e-0000000001] ^0000000c\n\n"
            "Two [z](b.md).[^e-0000000002] ^0000000d\n\n"
            "[^e-0000000001]: Time: `2026-01-01`; Sources: [s](D1:1)\n"
            "[^e-0000000002]: Time: `2026-01-02`; Sources: [s](D1:2)\n")
    assert topic_link_summary(parse_topic("a.md", text, strict=True)) == (True, ("0000000a", "0000000b"))
    plain = text.replace(" [z](b.md)", "")
    assert topic_link_summary(parse_topic("a.md", plain, strict=True)) == (False, ("0000000a", "0000000b"))


# -- through the parse cache, one fresh process per step -----------------------------------------

ADA = "topics/people/ada.md"
CLI = "topics/projects/cli-language.md"


def _files(mem: Path) -> dict[str, bytes]:
    return {p.relative_to(mem).as_posix(): p.read_bytes() for p in sorted(mem.rglob("*"))
            if p.is_file() and not p.relative_to(mem).as_posix().startswith((".git/", ".scriptorium/memory-tui"))}


def _outcome(r: TxResult) -> tuple:
    return (r.ok, r.code, r.message, tuple(r.changed_files), dict(r.block_ids),
            tuple((p.path, p.line, p.column, p.message) for p in r.problems), r.warnings)


def _session(state: Path, full: bool, monkeypatch, findings: list[str]) -> list[tuple]:
    mem = state / "memory"
    set_derive(monkeypatch, "full" if full else "incremental")

    def fresh() -> None:
        txcache.clear_caches()
        findings.clear()
        if full:
            parsecache.drop(mem)
        time.sleep(0.15)

    def edit(old: str, new: str) -> tuple:
        text = (mem / ADA).read_text(encoding="utf-8")
        assert old in text
        return _outcome(tx.staged_edit(state, ADA, text.replace(old, new, 1), git_commit="off"))

    out = []
    fresh()
    out.append(edit("short answers", "brief answers"))  # every topic parsed and kept
    fresh()
    out.append(edit("brief answers", "short answers"))  # the other topics' links from their summaries
    out.append(("built", sorted(findings)))
    cli = (mem / CLI).read_text(encoding="utf-8")
    assert "#^a058e34e" in cli
    # another tool breaks a block link of a topic no later edit touches
    (mem / CLI).write_text(cli.replace("#^a058e34e", "#^0badf00d", 1), encoding="utf-8")
    fresh()
    out.append(edit("short answers", "brief answers"))  # refused: the dangling link
    fresh()
    out.append(edit("short answers", "brief answers"))  # cli-language.md now from the cache: refused still
    (mem / CLI).write_text(cli, encoding="utf-8")
    fresh()
    out.append(edit("short answers", "brief answers"))
    return out


def test_fresh_processes_with_kept_link_summaries_equal_full_checks(fixture_state, tmp_path, monkeypatch):
    cold = tmp_path / "cold"
    shutil.copytree(fixture_state, cold, symlinks=True)
    findings: list[str] = []
    real = linkcheck.topic_link_findings

    def spy(topic):
        findings.append(topic.path)
        return real(topic)

    monkeypatch.setattr(linkcheck, "topic_link_findings", spy)
    warm = _session(fixture_state, False, monkeypatch, findings)
    cold_out = _session(cold, True, monkeypatch, findings)
    assert [o for o in warm if o[0] != "built"] == [o for o in cold_out if o[0] != "built"]
    assert [o[2] for o in warm if o[0] != "built"] == ["installed", "installed", *[warm[3][2]] * 2, "installed"]
    assert not warm[3][0] and "dangling block link" in warm[3][2] + repr(warm[3][5])
    # the second fresh edit looked into the edited topic only: the others answered from the cache
    assert warm[2] == ("built", ["people/ada.md"])
    assert _files(fixture_state / "memory") == _files(cold / "memory")
