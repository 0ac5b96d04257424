"""The production topic parser and archive scanner read exactly what the golden files say
they read (every field of every unit, definition, problem and frame; see ``golden_codec``):
on a corpus of topic texts and archive bytes, on OpenProgram's own state directory, and on
``benchmarks/make_state.py``'s state. The files record what the round-4 parsers read; they
are regenerated (``make_golden.py``) only when the format changes on purpose.

That the one-pass readers (``topics.parse_well_formed``, ``sources.scan_well_formed``) read
what the general ones do on any input is ``tests/property/test_parse_fast_props.py``'s."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import golden_codec as G  # noqa: E402
import make_golden  # noqa: E402

from memory_tui.core.format import sources, topics  # noqa: E402


def _mismatch(got, want) -> str:
    """Where two encodings first differ (a readable failure for a large parse)."""
    if type(got) is not type(want) or not isinstance(got, (list, dict)):
        return f"{got!r} != {want!r}"
    if isinstance(got, dict):
        for k in sorted(set(got) | set(want)):
            if got.get(k) != want.get(k):
                return f"[{k!r}]" + _mismatch(got.get(k), want.get(k))
    for i, (a, b) in enumerate(zip(got, want)):
        if a != b:
            return f"[{i}]" + _mismatch(a, b)
    return f"length {len(got)} != {len(want)}"


def _check(got, want, what) -> None:
    assert got == want, f"{what}: {_mismatch(got, want)}"


@pytest.fixture(scope="module")
def texts() -> dict:
    return G.read(HERE / "texts.json.gz")


def test_topic_texts_parse_as_recorded(texts):
    index = make_golden.seed_index(sources)
    assert len(texts["topics"]) > 500
    for path, text, want in texts["topics"]:
        got = [G.encode(topics.parse_topic(path, text, resolve=resolve, strict=strict))
               for resolve in (None, index.resolve_target) for strict in (True, False)]
        _check(got, want, f"{path}: {text!r}")


def test_archives_scan_as_recorded(texts):
    assert len(texts["archives"]) > 500
    for rel, data, scan, entry in texts["archives"]:
        raw = G.decode_input(data)
        _check(G.encode(sources.scan_v2(rel, raw)), scan, f"scan_v2 {rel}: {raw!r}")
        _check(G.encode(sources.index_file(rel, raw if isinstance(raw, bytes) else raw.encode())), entry,
               f"index_file {rel}: {raw!r}")


def test_v2_ids_and_links_read_as_recorded(texts):
    index = make_golden.seed_index(sources)
    assert len(texts["ids"]) > 100 and len(texts["links"]) > 50
    for value, valid in texts["ids"]:
        assert sources.is_v2_valid_id(value) is valid, value
    for path, target, resolved in texts["links"]:
        assert index.resolve_target(path, target) == resolved, (path, target)


def _same_state(memory: Path, golden: str) -> None:
    want = G.read(HERE / golden)
    got = make_golden.parse_state(memory, topics, sources)
    assert got.keys() == want.keys()
    for key in want:
        _check(got[key], want[key], f"{golden} {key}")


def test_the_fixture_reads_as_recorded(fixture_state_ro):
    _same_state(fixture_state_ro / "memory", "fixture.json.gz")


def test_a_bench_state_reads_as_recorded(bench_state_small):
    _same_state(bench_state_small / "memory", "bench.json.gz")
