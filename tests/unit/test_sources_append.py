"""append_records: content addressing, idempotency, pre-flight checks, atomic writes (§4.5)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.sources import (
    MARKER,
    SourceRecord,
    archive_path,
    render_frame,
    scan_v2,
)
from memory_tui.core.store.archives import append_records


def rec(thread: str, msg: str, ordinal: int, content: str = "hello", provider: str = "openprogram", **kw) -> SourceRecord:
    return SourceRecord(provider, thread, msg, ordinal, kw.pop("role", "user"), content, kw.pop("timestamp", "2026-01-01T00:00:00+00:00"), **kw)


@pytest.fixture
def mem(tmp_path) -> Path:
    root = tmp_path / "memory"
    root.mkdir()
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_new_file_layout_modes_and_order(mem):
    records = [rec("s", "b", 2, "second"), rec("s", "a", 1, "first"), rec("t", "z", 0, "other thread")]
    res = append_records(mem, records)
    assert res.written_ids == ("openprogram/s/a", "openprogram/s/b", "openprogram/t/z")
    assert res.changed_paths == ("sources/openprogram/_v2/s.md", "sources/openprogram/_v2/t.md")
    text = (mem / "sources/openprogram/_v2/s.md").read_text()
    assert text == MARKER + "\n\n" + render_frame(records[1]) + "\n" + render_frame(records[0])
    for rel in res.changed_paths:
        assert (mem / rel).stat().st_mode & 0o777 == 0o600
    for d in ("sources", "sources/openprogram", "sources/openprogram/_v2", ".scriptorium"):
        assert (mem / d).stat().st_mode & 0o777 == 0o700, d
    assert list((mem / ".scriptorium").iterdir()) == []


def test_idempotent_and_content_addressed(mem):
    records = [rec("s", "a", 0), rec("s", "b", 1, "two\nlines\n")]
    append_records(mem, records)
    before = _snapshot(mem)
    again = append_records(mem, records + [replace(records[0], content="changed text is not compared")])
    assert again.written_ids == () and again.changed_paths == ()
    assert again.skipped_ids == ("openprogram/s/a", "openprogram/s/a", "openprogram/s/b")
    assert _snapshot(mem) == before


def test_duplicate_in_batch_is_written_once(mem):
    res = append_records(mem, [rec("s", "a", 0, "x"), rec("s", "a", 1, "y")])
    assert res.written_ids == ("openprogram/s/a",) and res.skipped_ids == ("openprogram/s/a",)
    scan = scan_v2("sources/openprogram/_v2/s.md", (mem / "sources/openprogram/_v2/s.md").read_bytes())
    assert [f.text for f in scan.frames] == ["x"]


def test_append_to_existing(mem):
    append_records(mem, [rec("s", "a", 0)])
    rel = "sources/openprogram/_v2/s.md"
    old = (mem / rel).read_text()
    append_records(mem, [rec("s", "b", 1)])
    assert (mem / rel).read_text() == old + "\n" + render_frame(rec("s", "b", 1))
    # an existing file ending without LF gets LF LF
    (mem / rel).write_text(old[:-1])
    append_records(mem, [rec("s", "c", 2)])
    assert (mem / rel).read_text() == old[:-1] + "\n\n" + render_frame(rec("s", "c", 2))
    scan = scan_v2(rel, (mem / rel).read_bytes())
    assert scan.complete and [f.source_id.rsplit("/", 1)[1] for f in scan.frames] == ["a", "c"]


def test_append_to_empty_archive_stays_valid(mem):
    rel = "sources/openprogram/_v2/s.md"
    (mem / rel).parent.mkdir(parents=True)
    (mem / rel).write_text(MARKER + "\n\n")
    append_records(mem, [rec("s", "a", 0)])
    scan = scan_v2(rel, (mem / rel).read_bytes())
    assert scan.complete and len(scan.frames) == 1


def test_legacy_copy_is_not_consulted(mem):
    legacy = mem / "sources/openprogram/s.md"
    legacy.parent.mkdir(parents=True)
    legacy.write_text("# s\n\n<a id=\"x\"></a>\n<!-- source-id:openprogram/s/a -->\n[] user: old\n")
    res = append_records(mem, [rec("s", "a", 0)])
    assert res.written_ids == ("openprogram/s/a",)


def test_refuses_truncated_archive_and_writes_nothing(mem):
    append_records(mem, [rec("s", "a", 0), rec("s", "b", 1)])
    rel = "sources/openprogram/_v2/s.md"
    data = (mem / rel).read_bytes()
    (mem / rel).write_bytes(data[: data.rfind(b"<!-- record-lines:")])
    before = _snapshot(mem)
    with pytest.raises(MemoryError) as err:
        append_records(mem, [rec("a-first", "x", 0), rec("s", "c", 2)])
    e = err.value
    assert e.message == f"invalid or truncated v2 archive: {rel}"
    assert e.code == "WRITER_PRECONDITION_FAILED"
    assert e.path == rel and e.line == 9 and "past end" in e.details["reason"]
    assert _snapshot(mem) == before  # the valid file earlier in the batch was not written either


def test_collision_within_batch(mem):
    with pytest.raises(MemoryError) as err:
        append_records(mem, [rec("Sess", "a", 0), rec("sess", "b", 1)])
    assert err.value.message == "source archive path collision"
    assert not (mem / "sources").exists()


def test_collision_with_existing_entries(mem):
    append_records(mem, [rec("Sess", "a", 0)])
    before = _snapshot(mem)
    for bad in (rec("sess", "b", 1), rec("x", "b", 1, provider="OpenProgram")):
        with pytest.raises(MemoryError) as err:
            append_records(mem, [bad])
        assert err.value.message == "source archive path collision"
    assert _snapshot(mem) == before
    # the same spelling is no collision
    assert append_records(mem, [rec("Sess", "b", 1)]).written_ids == ("openprogram/Sess/b",)


def test_collision_is_case_folded(mem):
    with pytest.raises(MemoryError):
        append_records(mem, [rec("STRASSE", "a", 0), rec("strasse", "b", 0)])
    # precomposed and decomposed "é" percent-encode to different ASCII names, which do not fold
    # together: the check compares the names on disk, as OpenProgram does
    assert append_records(mem, [rec("caf\u00e9", "a", 0), rec("cafe\u0301", "b", 0)]).written_ids


def test_refuses_invalid_records(mem):
    for bad in (rec("s", "a]", 0), rec("s", "a", 0, timestamp="[x]"), rec("s", "a", 0, trust_state="maybe"),
                rec("", "a", 0), rec("s", "a", 0, provider="..")):
        with pytest.raises(MemoryError) as err:
            append_records(mem, [rec("ok", "m", 0), bad])
        assert err.value.code == "WRITER_PRECONDITION_FAILED"
    assert not (mem / "sources").exists()


def test_refuses_symlinked_archive(mem, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text(MARKER + "\n\n")
    (mem / "sources/openprogram/_v2").mkdir(parents=True)
    os.symlink(outside, mem / "sources/openprogram/_v2/s.md")
    with pytest.raises(MemoryError):
        append_records(mem, [rec("s", "a", 0)])
    assert outside.read_text() == MARKER + "\n\n"


def test_refuses_symlinked_sources_dir_leaving_workspace(mem, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "_v2").mkdir(parents=True)
    (mem / "sources").mkdir()
    os.symlink(elsewhere, mem / "sources" / "openprogram")
    with pytest.raises(MemoryError) as err:
        append_records(mem, [rec("s", "a", 0)])
    assert "escapes" in err.value.message
    assert list((elsewhere / "_v2").iterdir()) == []


def test_explicit_runtime_dir_and_pending_frames(mem, tmp_path):
    rt = mem / ".nativemem"
    res = append_records(mem, [rec("g", "a", 0, provider="channel-x", trust_state="pending", speaker_kind="human")], runtime_dir=rt)
    rel = archive_path("channel-x/g/a")
    assert res.changed_paths == (rel,)
    fr = scan_v2(rel, (mem / rel).read_bytes()).frames[0]
    assert fr.pending and not fr.trusted and fr.meta.speaker_kind == "human"
    assert rt.is_dir() and list(rt.iterdir()) == []


def test_unencodable_text_is_refused_before_writing(mem):
    with pytest.raises(MemoryError) as err:
        append_records(mem, [rec("ok", "m", 0), rec("s", "a", 1, "bad \udc80 surrogate")])
    assert err.value.code == "WRITER_PRECONDITION_FAILED"
    assert not (mem / "sources").exists()
