"""``WorkspaceCache.read_topics`` from the walk, looking again only at the topic files whose
stamps moved (or that were young or unreadable last time), = a fresh cache reading every
file, after random rewrites (of the same size too), files that become unreadable and
readable again, files created and removed, and time passing."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_tui.core import txcache

OPS = st.lists(st.tuples(st.sampled_from(["rewrite", "same_size", "garble", "create", "remove", "age", "none"]),
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
    elif op == "remove" and path is not None and len(files) > 1:
        path.unlink()
    elif op == "age":
        time.sleep(RACY_NS * 1.5 / 1e9)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
@example(ops=[("age", 0), ("rewrite", 1), ("age", 0), ("none", 0), ("same_size", 2), ("garble", 3), ("age", 0),
              ("none", 0), ("rewrite", 3), ("age", 0), ("none", 0)])
def test_read_again_equals_reading_every_file(tmp_path_factory, ops, monkeypatch):
    monkeypatch.setattr(txcache, "RACY_NS", RACY_NS)
    root = tmp_path_factory.mktemp("read") / "memory"
    topics = root / "topics"
    topics.mkdir(parents=True)
    for i in range(6):
        (topics / f"t{i:04d}.md").write_text(_text(i, i))
    cache = txcache.WorkspaceCache(root)
    answered = []
    real = txcache.WorkspaceCache._read_again
    monkeypatch.setattr(txcache.WorkspaceCache, "_read_again",
                        lambda self, *a: (lambda r: answered.append(r is not None) or r)(real(self, *a)))
    for step, (op, n) in enumerate([("none", 0), *ops]):
        _apply(topics, op, n)
        walk = txcache.revision_walk(root)
        got = cache.read_topics(topics, walk=walk)
        want = txcache.WorkspaceCache(root).read_topics(topics, walk=walk)
        assert list(got[0].items()) == list(want[0].items()), (step, op)
        assert got[1] == want[1] and got[2] == want[2], (step, op)
    if ops and ops[0] == ("age", 0):
        assert any(answered), "the last answer was never reused"

