"""Write the golden parse files of tests/golden/ (``test_golden_parse.py`` compares the
production parsers with them).

Regenerate only when the topic or archive format changes on purpose, and review the diff of
what the parsers now say: these files are the record of what they said before.

    python tests/golden/make_golden.py [--fixture PATH.tgz] [--only texts,fixture,bench]

- ``texts.json.gz``: topic texts and archive bytes (the inputs are kept; only the expected
  parses are recomputed), each topic parsed strict and lenient, with and without the seed
  source index; each archive scanned (``scan_v2``) and indexed (``index_file``); strings
  checked as v2 source ids; link targets resolved by the seed index.
- ``fixture.json.gz``: every topic and source file of OpenProgram's own state directory
  (``../shared/fixtures/openprogram-state.tgz``, see its README).
- ``bench.json.gz``: the same of ``benchmarks/make_state.py``'s state at scale 0.01 (seed 12).

The committed files were made from the round-4 parsers (kept as test oracles until then) with
``--oracle DIR``, DIR holding ``oracle_round4_topics.py`` and ``oracle_round4_sources.py``;
the text inputs are the examples the property tests of ``tests/property/test_parse_fast_props.py``
compared with those parsers on a derandomized run.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import golden_codec as G  # noqa: E402

from memory_tui.core.format import sources as production_sources  # noqa: E402
from memory_tui.core.format import topics as production_topics  # noqa: E402

FIXTURE_TGZ = REPO.parent / "shared" / "fixtures" / "openprogram-state.tgz"
BENCH_SCALE, BENCH_SEED = 0.01, 12


def seed_archives(sources: ModuleType) -> dict[str, str]:
    """The archives the seed index holds (two v2 frames and a D file)."""
    rec = sources.SourceRecord("openprogram", "s", "m1", 1, "user", "tea please", "2026-08-09T10:00:00Z")
    rec2 = type(rec)(**{**vars(rec), "message_id": "m2", "content": "two\nlines [x]", "speaker_id": "ann",
                        "trust_state": "pending"})
    return {
        sources.archive_path(rec.source_id): sources.render_archive([sources.render_frame(rec), sources.render_frame(rec2)]),
        "sources/D1.md": '<a id="d1-2"></a>\n[2024] Ann: hello [D1:2]\n',
    }


def seed_index(sources: ModuleType):
    return sources.SourceIndex.from_files("/m", {rel: sources.index_file(rel, text.encode())
                                                 for rel, text in seed_archives(sources).items()})


def parse_texts(inputs: dict, topics: ModuleType, sources: ModuleType) -> dict:
    """``inputs``: {"topics": [[path, text], ...], "archives": [[rel, data], ...], "ids": [[value], ...],
    "links": [[topic path, target], ...]} (anything after those in a row, an old answer, is ignored)."""
    index = seed_index(sources)
    out_topics = []
    for path, text, *_ in inputs["topics"]:
        parses = [G.encode(topics.parse_topic(path, text, resolve=resolve, strict=strict))
                  for resolve in (None, index.resolve_target) for strict in (True, False)]
        out_topics.append([path, text, parses])
    out_archives = []
    for rel, data, *_ in inputs["archives"]:
        raw = G.decode_input(data)
        out_archives.append([rel, data, G.encode(sources.scan_v2(rel, raw)),
                             G.encode(sources.index_file(rel, raw if isinstance(raw, bytes) else raw.encode()))])
    ids = [[value, sources.is_v2_valid_id(value)] for value, *_ in inputs["ids"]]
    links = [[path, target, index.resolve_target(path, target)] for path, target, *_ in inputs["links"]]
    return {"topics": out_topics, "archives": out_archives, "ids": ids, "links": links}


def _entry(entry) -> list:
    """An archive entry without its stat key (when and where the file was unpacked)."""
    out = G.encode(entry)
    out[1 + [f.name for f in dataclasses.fields(entry)].index("key")] = None
    return out


def parse_state(memory: Path, topics: ModuleType, sources: ModuleType) -> dict:
    """Every topic and source file of a workspace, read as a load reads them."""
    index = sources.SourceIndex.load(memory)
    tree = topics.parse_tree(memory / "topics", resolve=index.resolve_target, strict=True)
    return {
        "topics": G.encode(tree.topics),
        "problems": G.encode(tree.problems),
        "files": [[rel, _entry(index.files[rel])] for rel in sorted(index.files)],
        "index_problems": G.encode(index.problems),
        "events": G.encode(index.events()),
        "trusted": G.encode(index.trusted_ids()),
        "pending": G.encode(index.pending_ids()),
    }


def unpack_fixture(tgz: Path, dest: Path) -> Path:
    with tarfile.open(tgz) as tar:
        tar.extractall(dest, filter="tar")
    return dest / ".openprogram"


def build_bench_state(dest: Path) -> Path:
    spec = importlib.util.spec_from_file_location("bench_make_state", REPO / "benchmarks" / "make_state.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.build(dest, BENCH_SCALE, BENCH_SEED)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixture", type=Path, default=FIXTURE_TGZ)
    ap.add_argument("--only", default="texts,fixture,bench")
    ap.add_argument("--inputs", type=Path, default=HERE / "texts.json.gz", help="where the text inputs are read from")
    ap.add_argument("--oracle", type=Path, help="read with oracle_round4_*.py from this folder instead of production")
    args = ap.parse_args()
    topics, sources = production_topics, production_sources
    if args.oracle is not None:
        sys.path.insert(0, str(args.oracle))
        topics, sources = importlib.import_module("oracle_round4_topics"), importlib.import_module("oracle_round4_sources")
    parts = set(args.only.split(","))
    if "texts" in parts:
        G.write(HERE / "texts.json.gz", parse_texts(G.read(args.inputs), topics, sources))
    with tempfile.TemporaryDirectory() as tmp:
        if "fixture" in parts:
            if not args.fixture.is_file():
                raise SystemExit(f"no fixture at {args.fixture}")
            state = unpack_fixture(args.fixture, Path(tmp) / "fixture")
            G.write(HERE / "fixture.json.gz", parse_state(state / "memory", topics, sources))
        if "bench" in parts:
            state = build_bench_state(Path(tmp) / "bench")
            G.write(HERE / "bench.json.gz", parse_state(state / "memory", topics, sources))


if __name__ == "__main__":
    main()
