"""The source archive against OpenProgram's own state directory (../shared/fixtures)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memory_tui.core.format.sources import (
    SourceIndex,
    record_from_frame,
    render_archive,
    render_frame,
    scan_v2,
)
from memory_tui.core.store.archives import append_records

V2_FILES = (
    "sources/openprogram/_v2/local_0c0c0c0c0c.md",
    "sources/openprogram/_v2/local_a1b2c3d4e5.md",
    "sources/openprogram/_v2/local_f6e5d4c3b2.md",
)


def _mem(state: Path) -> Path:
    return state / "memory"


def test_fixture_v2_archives_scan_complete(fixture_state_ro):
    mem = _mem(fixture_state_ro)
    found = sorted(p.relative_to(mem).as_posix() for p in (mem / "sources").rglob("*.md"))
    assert found == list(V2_FILES)
    for rel in V2_FILES:
        scan = scan_v2(rel, (mem / rel).read_bytes())
        assert scan.complete, scan.problem
        assert scan.problem is None
        assert scan.frames
        assert all(fr.trusted and not fr.pending for fr in scan.frames)
        assert all(fr.meta is not None and fr.meta.trust_state == "trusted" for fr in scan.frames)


def test_rerender_from_parsed_fields_is_byte_exact(fixture_state_ro):
    mem = _mem(fixture_state_ro)
    for rel in V2_FILES:
        data = (mem / rel).read_bytes()
        frames = scan_v2(rel, data).frames
        assert render_archive(fr.render() for fr in frames).encode("utf-8") == data
        # and through a SourceRecord, i.e. the writer's own rendering path
        rebuilt = render_archive(render_frame(record_from_frame(fr, i)) for i, fr in enumerate(frames))
        assert rebuilt.encode("utf-8") == data


def test_speaker_fields_decode(fixture_state_ro):
    mem = _mem(fixture_state_ro)
    idx = SourceIndex.load(mem)
    owner = idx.frame("openprogram/local_a1b2c3d4e5/a00000000001")
    assert owner is not None
    assert owner.speaker_id_raw == "owner/local"
    assert owner.speaker_label == "Owner (owner/local)"
    assert owner.meta.authority_tier == "owner" and owner.meta.speaker_kind == "owner"
    agent = idx.frame("openprogram/local_a1b2c3d4e5/a00000000001_reply")
    assert agent.speaker_id_raw == "runtime/agent%2Fmain"
    assert agent.speaker_label == "agent/main (runtime/agent%2Fmain)"
    assert agent.text == "Noted, Ada: tea, short answers."


def test_append_rebuilds_fixture_archives_byte_for_byte(fixture_state_ro, tmp_path):
    mem = _mem(fixture_state_ro)
    idx = SourceIndex.load(mem)
    records = []
    for rel in V2_FILES:
        for i, fr in enumerate(idx.files[rel].frames):
            records.append(record_from_frame(fr, i))
    out = tmp_path / "memory"
    out.mkdir()
    # reverse the input: the appender sorts by (provider, thread, ordinal)
    res = append_records(out, list(reversed(records)), runtime_dir=out / ".scriptorium")
    assert sorted(res.changed_paths) == list(V2_FILES)
    assert len(res.written_ids) == len(records) and not res.skipped_ids
    for rel in V2_FILES:
        assert (out / rel).read_bytes() == (mem / rel).read_bytes()
        assert (out / rel).stat().st_mode & 0o777 == 0o600
    assert (out / "sources").stat().st_mode & 0o777 == 0o700
    assert not list((out / ".scriptorium").iterdir())  # no temp file left behind


def test_replaying_the_fixture_is_idempotent(fixture_state):
    mem = _mem(fixture_state)
    idx = SourceIndex.load(mem)
    records = [record_from_frame(fr, i) for rel in V2_FILES for i, fr in enumerate(idx.files[rel].frames)]
    before = {rel: (mem / rel).read_bytes() for rel in V2_FILES}
    res = append_records(mem, records)
    assert res.written_ids == () and res.changed_paths == ()
    assert len(res.skipped_ids) == len(records)
    assert {rel: (mem / rel).read_bytes() for rel in V2_FILES} == before


_PARA_ID = re.compile(r"\s\^([A-Za-z0-9-]+)\s*$")
_CITE = re.compile(r"\[\^([A-Za-z0-9_-]+)\](?!:)")
_DEF = re.compile(r"^\[\^([A-Za-z0-9_-]+)\]:(.*)$")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)]+)\)")


def _topic_refs(text: str) -> dict[str, list[str]]:
    """block id -> link targets of its cited definitions (enough grammar for the fixture)."""
    defs: dict[str, list[str]] = {}
    paras: list[str] = []
    for chunk in re.split(r"\n\s*\n", text):
        chunk = chunk.strip("\n")
        m = _DEF.match(chunk)
        if m:
            defs[m.group(1)] = [t for _, t in _LINK.findall(m.group(2))]
        elif not chunk.startswith("#"):
            paras.append(chunk)
    out: dict[str, list[str]] = {}
    for para in paras:
        m = _PARA_ID.search(para)
        if not m:
            continue
        targets: list[str] = []
        for fid in _CITE.findall(para):
            targets.extend(defs.get(fid, []))
        out[m.group(1)] = targets
    return out


def test_every_fixture_link_target_resolves_to_expected_refs(fixture_state_ro, expected):
    mem = _mem(fixture_state_ro)
    idx = SourceIndex.load(mem)
    checked = 0
    for topic in sorted((mem / "topics").rglob("*.md")):
        rel = topic.relative_to(mem / "topics").as_posix()
        for block_id, targets in _topic_refs(topic.read_text(encoding="utf-8")).items():
            want = expected["blocks"][block_id]["source_refs"]
            got: list[str] = []
            for target in targets:
                sid = idx.resolve_target(rel, target)
                assert sid is not None, (rel, target)
                if sid not in got:
                    got.append(sid)
                # the canonical form the runtime writes is what the fixture holds
                assert idx.link_for(sid, posixpath_dir(rel)) == target
                assert idx.validate_ref(sid) is None
                assert idx.validate_ref(sid, new=True) is None
            assert got == want, block_id
            checked += 1
    assert checked == len(expected["blocks"])


def posixpath_dir(topic_rel: str) -> str:
    parent = topic_rel.rpartition("/")[0]
    return f"topics/{parent}" if parent else "topics"


def test_fixture_index_trust_sets(fixture_state_ro):
    idx = SourceIndex.load(_mem(fixture_state_ro))
    assert len(idx.all_ids()) == 22
    assert idx.trusted_ids() == idx.all_ids()
    assert idx.pending_ids() == frozenset()
    assert idx.problems == ()
    assert idx.is_trusted("openprogram/local_0c0c0c0c0c/c00000000003_reply")
    assert not idx.is_trusted("openprogram/local_0c0c0c0c0c/nope")


def test_truncating_a_fixture_archive_reports_and_refuses(fixture_state):
    mem = _mem(fixture_state)
    rel = V2_FILES[1]
    path = mem / rel
    data = path.read_bytes()
    # cut the file inside the last frame's header
    cut = data.rfind(b"<!-- record-lines:")
    path.write_bytes(data[:cut])
    scan = scan_v2(rel, path.read_bytes())
    assert not scan.complete
    assert scan.problem.path == rel and scan.problem.line is not None
    assert len(scan.frames) == 11
    idx = SourceIndex.load(mem)
    assert [p.path for p in idx.problems] == [rel]
    rec = record_from_frame(scan.frames[0], 99)
    from dataclasses import replace

    from memory_tui.core.format.errors import MemoryError

    with pytest.raises(MemoryError) as err:
        append_records(mem, [replace(rec, message_id="new-one")])
    assert err.value.message == f"invalid or truncated v2 archive: {rel}"
    assert err.value.path == rel and err.value.line == scan.problem.line
    assert path.read_bytes() == data[:cut]
