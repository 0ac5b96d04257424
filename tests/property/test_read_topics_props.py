"""``WorkspaceCache.read_topics`` from the walk, looking again only at the topic files whose
stamps moved (or that were young or unreadable last time), = a fresh cache reading every
file, after random rewrites (of the same size too), files that become unreadable and
readable again, files created, removed and swapped for others, files coming and going
outside ``topics/``, and time passing. And ``transaction.source_index`` from the walk (the
archives' stamps compared with those it was last found current with) = a fresh load of
``sources/``. Both find their files in the walk by ``walk.stamps_under``, which answers
from its last positions while the walk names the same paths."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_tui.core.tx.stage import source_index
from memory_tui.core.store import committed, txcache
from memory_tui.core.store import walk as walk_mod
from memory_tui.core.store.committed import CommittedFiles
from memory_tui.core.store.walk import revision_walk
from memory_tui.core.format.sources import MARKER, SourceIndex, SourceRecord, archive_path, render_frame
from memory_tui.core.switches import current as current_switches

OPS = st.lists(st.tuples(st.sampled_from(["rewrite", "same_size", "garble", "create", "remove", "swap", "other",
                                          "not_md", "age", "none"]),
                         st.integers(0, 1_000)), min_size=1, max_size=12)
RACY_NS = 20_000_000  # "young" is 20 ms here: the test ages files by sleeping past it


def _text(i: int, n: int) -> str:
    return f"# Topic {i}\n\n## Facts\n\nFact number {n:04d} of topic {i}. ^{i:04d}{n % 10:04d}\n"


def _apply(topics: Path, op: str, n: int) -> None:
    files = sorted(p for p in topics.glob("*.md"))
    path = files[n % len(files)] if files else None
    if op == "rewrite" and path is not None:
        path.write_text(_text(n, n) + "More.\n" * (n % 3))
    elif op == "same_size" and path is not None:  # other bytes, the same length
        data = path.read_bytes()
        path.write_bytes(data.replace(b"Fact", b"FACT", 1) if b"Fact" in data else data.replace(b"FACT", b"Fact", 1))
    elif op == "garble" and path is not None:  # not UTF-8: a problem until rewritten
        path.write_bytes(b"\xff\xfe" + path.read_bytes()[2:])
    elif op == "create":
        (topics / f"t{n:04d}.md").write_text(_text(n, 0))
    elif op in ("remove", "swap") and path is not None and len(files) > 1:
        path.unlink()
        if op == "swap":  # as many files, other names
            (topics / f"t{n + 2_000:04d}.md").write_text(_text(n, 1))
    elif op == "other":  # a file before topics/ in the walk's order comes or goes: every position moves
        other = topics.parent / f"a{n % 2}.md"
        other.unlink() if other.exists() else other.write_text("x")
    elif op == "not_md":  # a file among the topics that is not one: they are no longer one run of the walk
        (topics / f"t{n % 6:04d}.txt").write_text("x")
    elif op == "age":
        time.sleep(RACY_NS * 1.5 / 1e9)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
@example(ops=[("age", 0), ("rewrite", 1), ("age", 0), ("none", 0), ("same_size", 2), ("garble", 3), ("age", 0),
              ("none", 0), ("rewrite", 3), ("age", 0), ("none", 0)])
def test_read_again_equals_reading_every_file(tmp_path_factory, ops, monkeypatch):
    monkeypatch.setattr(committed, "RACY_NS", RACY_NS)
    monkeypatch.setattr(walk_mod, "RACY_NS", RACY_NS)
    root = tmp_path_factory.mktemp("read") / "memory"
    topics = root / "topics"
    topics.mkdir(parents=True)
    for i in range(6):
        (topics / f"t{i:04d}.md").write_text(_text(i, i))
    cache = txcache.WorkspaceCache(root)
    answered = []
    real = CommittedFiles._read_again
    monkeypatch.setattr(CommittedFiles, "_read_again",
                        lambda self, *a: (lambda r: answered.append(r is not None) or r)(real(self, *a)))
    for step, (op, n) in enumerate([("none", 0), *ops]):
        _apply(topics, op, n)
        walk = revision_walk(root, switches=current_switches())
        got = cache.read_topics(topics, walk=walk, switches=current_switches())
        want = txcache.WorkspaceCache(root).read_topics(topics, walk=walk, switches=current_switches())
        assert list(got[0].items()) == list(want[0].items()), (step, op)
        assert got[1] == want[1] and got[2] == want[2], (step, op)
        listed = txcache.WorkspaceCache(root).read_topics(topics, switches=current_switches())  # its own listing, not the walk's
        assert list(listed[0].items()) == list(got[0].items()) and listed[2] == got[2], (step, op)
    if ops and ops[0] == ("age", 0):
        assert any(answered), "the last answer was never reused"



SOURCE_OPS = st.lists(st.tuples(st.sampled_from(["append", "same_size", "create", "remove", "swap", "other", "not_md",
                                                 "none"]),
                                st.integers(0, 1_000)), min_size=1, max_size=12)


def _frame(thread: str, n: int, trust: str = "trusted") -> str:
    return render_frame(SourceRecord("openprogram", thread, f"m{n}", n, "user", f"Message {n:04d}.",
                                     trust_state=trust))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=SOURCE_OPS, handed_on=st.booleans())
def test_source_index_from_the_walk_equals_a_fresh_load(tmp_path_factory, ops, handed_on):
    root = tmp_path_factory.mktemp("sources") / "memory"
    (root / "topics").mkdir(parents=True)
    (root / "topics" / "t.md").write_text(_text(0, 0))
    clock = [1_700_000_000 * 10**9]

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        clock[0] += 10**9  # each write a second later: a same-size rewrite moves the key too
        os.utime(path, ns=(clock[0], clock[0]))

    def archives() -> list[Path]:
        return sorted((root / "sources").rglob("*.md"))

    for i in range(3):
        write(root / archive_path(f"openprogram/th{i}/m0"), f"{MARKER}\n\n" + _frame(f"th{i}", 0))
    last = None
    for step, (op, n) in enumerate([("none", 0), *ops]):
        files = archives()
        path = files[n % len(files)] if files else None
        if op == "append" and path is not None:
            # a message id of its own (an archive holds each once)
            write(path, path.read_text() + "\n" + _frame(path.stem, 1 + step, "pending" if n % 2 else "trusted"))
        elif op == "same_size" and path is not None:  # trusted <-> other bytes of the same length
            write(path, path.read_text().replace("Message", "MESSAGE", 1))
        elif op == "create":
            write(root / archive_path(f"openprogram/new{n}/m0"), f"{MARKER}\n\n" + _frame(f"new{n}", 0))
        elif op in ("remove", "swap") and path is not None:
            path.unlink()
            if op == "swap":  # as many archives, another name
                write(root / archive_path(f"openprogram/sw{n}/m0"), f"{MARKER}\n\n" + _frame(f"sw{n}", 0))
        elif op == "other":  # a file before sources/ in the walk's order: every position moves
            other = root / f"a{n % 2}.md"
            other.unlink() if other.exists() else write(other, "x")
        elif op == "not_md":  # a file under sources/ that is not an archive
            write(root / "sources" / "openprogram" / f"notes{n % 2}.txt", "x")
        stamps = revision_walk(root, switches=current_switches())[0]
        if handed_on and last is not None:  # a remembered walk hands unchanged stamps on as the same objects
            stamps = {rel: last[rel] if last.get(rel) == st else st for rel, st in stamps.items()}
        got = source_index(root, stamps, current_switches())
        want = SourceIndex.load(root)
        assert {rel: e.key for rel, e in got.files.items()} == {rel: e.key for rel, e in want.files.items()}, (step, op)
        assert got.trusted_ids() == want.trusted_ids() and not want.problems, (step, op)
        last = stamps
