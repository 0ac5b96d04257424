"""SourceIndex: trust sets, §3.5 link targets, §5.4 reference checks, incremental re-index."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory_tui.core.format.sources import (
    MARKER,
    SourceIndex,
    SourceRecord,
    anchor,
    archive_path,
    render_archive,
    render_frame,
)
from memory_tui.core.store.archives import append_records

TRUSTED = "openprogram/s1/m1"
PENDING = "channel-telegram/bot1%3A-100/abc"
NO_META = "openprogram/s1/m2"
LEGACY = "openprogram/sess-old/m1"
LEGACY_ONLY_ANCHOR = "openprogram/sess-old/m9"
BOTH = "openprogram/s2/x"


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def _no_meta_frame(sid: str, content: str) -> str:
    return f'<a id="{anchor(sid)}"></a>\n<!-- source-id:{sid} -->\n<!-- record-lines:1 -->\n[] user: {content}\n'


@pytest.fixture
def mem(tmp_path) -> Path:
    root = tmp_path / "memory"
    (root / "topics" / "people").mkdir(parents=True)
    rec = SourceRecord("openprogram", "s1", "m1", 0, "user", "hi", "2026-01-01", "owner/local", "Owner", "owner", "o", "owner")
    _write(root, archive_path(TRUSTED), render_archive([render_frame(rec), _no_meta_frame(NO_META, "old turn")]))
    prov, thread, msg = PENDING.split("/", 2)
    pend = SourceRecord(prov, thread, msg, 0, "user", "group talk", "", "u-1", "Bob", "human", trust_state="pending")
    _write(root, archive_path(PENDING), render_archive([render_frame(pend)]))
    _write(
        root,
        "sources/openprogram/sess-old.md",
        f'# sess-old\n\n<a id="{anchor(LEGACY)}"></a>\n<!-- source-id:{LEGACY} -->\n[2026-01-01] user: remember this\n\n'
        f'<a id="{anchor(LEGACY_ONLY_ANCHOR)}"></a>\n[2026-01-01] user: an anchor without a header\n',
    )
    both = SourceRecord("openprogram", "s2", "x", 0, "user", "v2 copy", "", trust_state="pending")
    _write(root, archive_path(BOTH), render_archive([render_frame(both)]))
    _write(root, "sources/openprogram/s2.md", f'<a id="{anchor(BOTH)}"></a>\n<!-- source-id:{BOTH} -->\n[] user: legacy copy\n')
    _write(root, "sources/D18.md", '# D18\n\n<a id="d18-11"></a>\n[2023-05-01] Ann: hello [D18:11]\n')
    return root


def test_trust_sets(mem):
    idx = SourceIndex.load(mem)
    assert idx.problems == ()
    assert idx.is_trusted(TRUSTED) and idx.is_trusted(NO_META) and idx.is_trusted(LEGACY)
    assert idx.is_trusted("D18:11")
    assert not idx.is_trusted(PENDING) and PENDING in idx.pending_ids()
    # a legacy source-id comment makes an id trusted even if its v2 frame is pending
    assert idx.is_trusted(BOTH) and BOTH not in idx.pending_ids()
    assert LEGACY_ONLY_ANCHOR not in idx.all_ids()
    assert idx.all_ids() == {TRUSTED, NO_META, PENDING, LEGACY, BOTH, "D18:11"}


def test_frame_prefers_v2(mem):
    idx = SourceIndex.load(mem)
    assert idx.frame(BOTH).kind == "v2" and idx.frame(BOTH).text == "v2 copy"
    assert idx.frame(LEGACY).kind == "legacy" and idx.frame(LEGACY).text == "remember this"
    d = idx.frame("D18:11")
    assert d.kind == "d" and d.text == "hello" and d.speaker_label == "Ann" and d.timestamp == "2023-05-01"
    assert idx.frame("openprogram/none/x") is None
    fr = idx.frame(PENDING)
    assert fr.speaker_id_raw == "u-1" and fr.speaker_label == "Bob (u-1)" and fr.pending
    events = idx.events()
    assert [e.source_id for e in events].count(BOTH) == 1
    assert events == sorted(events, key=lambda e: (e.path, e.line, e.source_id))


@pytest.mark.parametrize(
    "topic, target, want",
    [
        ("people/ada.md", TRUSTED, TRUSTED),
        ("people/ada.md", "D18:11", "D18:11"),
        ("people/ada.md", "D7:1", "D7:1"),  # plain handles resolve without existing
        ("people/ada.md", "openprogram/none/x", "openprogram/none/x"),
        ("people/ada.md", f"../../sources/openprogram/_v2/s1.md#{anchor(TRUSTED)}", TRUSTED),
        ("people/ada.md", f"  ../../sources/openprogram/_v2/s1.md#{anchor(NO_META)}  ", NO_META),
        ("ada.md", f"../sources/openprogram/_v2/s1.md#{anchor(TRUSTED)}", TRUSTED),
        ("people/ada.md", f"../../sources/channel-telegram/_v2/bot1%253A-100.md#{anchor(PENDING)}", PENDING),
        ("people/ada.md", f"../../sources/openprogram/sess-old.md#{anchor(LEGACY)}", LEGACY),
        ("people/ada.md", f"../../sources/openprogram/../openprogram/_v2/s1.md#{anchor(TRUSTED)}", TRUSTED),
        # legacy anchor with no source-id header below it is not a link target
        ("people/ada.md", f"../../sources/openprogram/sess-old.md#{anchor(LEGACY_ONLY_ANCHOR)}", None),
        # fragment of another frame's file / unknown anchor / wrong dir depth
        ("people/ada.md", f"../../sources/openprogram/_v2/s1.md#{anchor(PENDING)}", None),
        ("people/ada.md", f"../sources/openprogram/_v2/s1.md#{anchor(TRUSTED)}", None),
        ("people/ada.md", f"/sources/openprogram/_v2/s1.md#{anchor(TRUSTED)}", None),
        ("people/ada.md", f"../../topics/x.md#{anchor(TRUSTED)}", None),
        # D refs: the file itself is no v2/legacy target; the #d fallback applies to any path
        ("people/ada.md", "../../sources/D18.md#d18-11", "D18:11"),
        ("people/ada.md", "whatever.md#D18-11", "D18:11"),
        ("people/ada.md", "x#d1-2-3", None),
        ("people/ada.md", "sources/openprogram/_v2/s1.md", "sources/openprogram/_v2/s1.md"),  # a valid id!
        ("people/ada.md", "../../sources/openprogram/_v2/s1.md", None),
        ("people/ada.md", "", None),
        ("people/ada.md", "p/t/m]", None),
    ],
)
def test_resolve_target(mem, topic, target, want):
    assert SourceIndex.load(mem).resolve_target(topic, target) == want


def test_resolve_target_rejects_symlinks(mem, tmp_path):
    link = mem / "sources" / "openprogram" / "_v2" / "alias.md"
    os.symlink(mem / archive_path(TRUSTED), link)
    outside = tmp_path / "outside.md"
    outside.write_text(render_archive([_no_meta_frame("openprogram/outside/x", "x")]))
    os.symlink(outside, mem / "sources" / "openprogram" / "_v2" / "outside.md")
    idx = SourceIndex.load(mem)
    assert "sources/openprogram/_v2/alias.md" not in idx.files
    assert idx.resolve_target("people/a.md", f"../../sources/openprogram/_v2/alias.md#{anchor(TRUSTED)}") is None
    assert idx.resolve_target("people/a.md", f"../../sources/openprogram/_v2/outside.md#{anchor('openprogram/outside/x')}") is None


def test_link_for(mem):
    idx = SourceIndex.load(mem)
    assert idx.link_for(TRUSTED, "topics/people") == f"../../sources/openprogram/_v2/s1.md#{anchor(TRUSTED)}"
    assert idx.link_for(TRUSTED, "topics") == f"../sources/openprogram/_v2/s1.md#{anchor(TRUSTED)}"
    assert idx.link_for(TRUSTED, "timeline/2026/08") == f"../../../sources/openprogram/_v2/s1.md#{anchor(TRUSTED)}"
    assert idx.link_for(TRUSTED, "") == f"sources/openprogram/_v2/s1.md#{anchor(TRUSTED)}"
    assert idx.link_for(LEGACY, "topics/people") == f"../../sources/openprogram/sess-old.md#{anchor(LEGACY)}"
    assert idx.link_for(BOTH, "topics") == f"../sources/openprogram/_v2/s2.md#{anchor(BOTH)}"
    assert idx.link_for("D18:11", "topics/a") == "../../sources/D18.md#d18-11"
    assert idx.link_for(PENDING, "topics") == f"../sources/channel-telegram/_v2/bot1%253A-100.md#{anchor(PENDING)}"
    # the link written for a source resolves back to it
    for sid in (TRUSTED, NO_META, PENDING, LEGACY, BOTH, "D18:11"):
        assert idx.resolve_target("people/x.md", idx.link_for(sid, "topics/people")) == sid


def test_validate_ref(mem):
    idx = SourceIndex.load(mem)
    for ok in (TRUSTED, NO_META, PENDING, LEGACY, BOTH, "D18:11", LEGACY_ONLY_ANCHOR):
        assert idx.validate_ref(ok) is None, ok
    missing = idx.validate_ref("openprogram/s1/nope")
    assert missing.message == "missing source reference: openprogram/s1/nope"
    assert missing.code == "INVALID_TOPIC_FORMAT"
    assert idx.validate_ref("D18:12").message == "missing source reference: D18:12"
    assert idx.validate_ref("D19:1").message == "missing source reference: D19:1"
    assert idx.validate_ref("not-a-ref").message == "invalid source reference: not-a-ref"
    assert idx.validate_ref("../t/m").message == "invalid source reference: ../t/m"
    # new references must be trusted v2 frames (frames without meta are refused too)
    assert idx.validate_ref(TRUSTED, new=True) is None
    for untrusted in (PENDING, NO_META, BOTH):
        p = idx.validate_ref(untrusted, new=True, rule="hand edit: any valid source")
        assert p.message == f"source reference is not trusted; promote it first: {untrusted}"
        assert p.details["rule"] == "hand edit: any valid source"
    assert idx.validate_ref(LEGACY, new=True) is None
    p = idx.validate_ref(TRUSTED, new=True, allowed=["x/y/z"], rule="whole-file change")
    assert p.message == f"source reference is not evidence of this transaction: {TRUSTED}"
    assert p.details == {"ref": TRUSTED, "rule": "whole-file change"}
    assert idx.validate_ref(TRUSTED, new=True, allowed=[TRUSTED]) is None
    assert idx.validate_ref(TRUSTED, new=False, allowed=[]) is None


def test_truncated_archive_problem_and_valid_prefix(mem):
    rel = archive_path(TRUSTED)
    data = (mem / rel).read_text()
    (mem / rel).write_text(data[: data.rindex("[] user: old turn")])
    idx = SourceIndex.load(mem)
    (problem,) = idx.problems
    assert problem.path == rel and problem.line == 10 and "past end" in problem.message
    assert not idx.complete(rel) and idx.complete(archive_path(PENDING))
    assert idx.is_trusted(TRUSTED) and NO_META not in idx.all_ids()
    assert idx.validate_ref(NO_META).message == f"missing source reference: {NO_META}"


def test_incremental_reindex_reuses_unchanged_files(mem):
    import time

    from memory_tui.core.cache.stamp import RACY_NS

    time.sleep(RACY_NS / 1e9)  # files written just now are read again until their stamps age
    first = SourceIndex.load(mem)
    same = SourceIndex.load(mem, previous=first)
    assert all(same.files[rel] is first.files[rel] for rel in first.files)
    rec = SourceRecord("openprogram", "s1", "m3", 5, "assistant", "new turn", "")
    append_records(mem, [rec])
    second = SourceIndex.load(mem, previous=same)
    changed = [rel for rel in second.files if second.files[rel] is not same.files.get(rel)]
    assert changed == [archive_path(TRUSTED)]
    assert second.is_trusted("openprogram/s1/m3") and not first.is_trusted("openprogram/s1/m3")
    (mem / "sources/D18.md").unlink()
    third = SourceIndex.load(mem, previous=second)
    assert "D18:11" not in third.all_ids()


def test_missing_sources_dir(tmp_path):
    idx = SourceIndex.load(tmp_path)
    assert idx.all_ids() == frozenset() and idx.problems == ()
    assert idx.resolve_target("a.md", "../sources/x.md#source-0") is None


def test_v2_dir_file_without_marker_is_not_trusted(mem):
    _write(mem, "sources/openprogram/_v2/bad.md", _no_meta_frame("openprogram/bad/x", "x"))
    idx = SourceIndex.load(mem)
    assert "openprogram/bad/x" not in idx.all_ids()
    assert [p.path for p in idx.problems] == ["sources/openprogram/_v2/bad.md"]
    assert idx.problems[0].line == 1
    assert MARKER not in (mem / "sources/openprogram/_v2/bad.md").read_text()


def test_reindex_resumes_appends_and_rescans_rewrites(mem):
    rel = archive_path(TRUSTED)
    first = SourceIndex.load(mem)
    assert first.files[rel].scan.resumable
    append_records(mem, [SourceRecord("openprogram", "s1", "m3", 5, "user", "three", "")])
    resumed = SourceIndex.load(mem, previous=first)
    cold = SourceIndex.load(mem)
    assert resumed.files[rel].frames == cold.files[rel].frames
    assert resumed.files[rel].digest == cold.files[rel].digest
    assert resumed.files[rel].scan == cold.files[rel].scan
    # an in-place rewrite of earlier bytes (e.g. a promotion) must not be resumed
    data = (mem / rel).read_bytes()
    (mem / rel).write_bytes(data.replace(b"[] user: old turn", b"[] user: OLD turn") + b"\n" + _no_meta_frame("openprogram/s1/m4", "x").encode())
    again = SourceIndex.load(mem, previous=resumed)
    assert again.frame(NO_META).text == "OLD turn"
    assert again.files[rel].scan == SourceIndex.load(mem).files[rel].scan
    # a broken tail is reported at its real line number
    (mem / rel).write_bytes((mem / rel).read_bytes() + b"\ngarbage\n")
    broken = SourceIndex.load(mem, previous=again)
    (problem,) = broken.problems
    assert problem == SourceIndex.load(mem).problems[0]
    assert problem.line == len((mem / rel).read_bytes().split(b"\n")) - 1


def test_append_with_index_skips_rescan_but_keeps_checks(mem):
    idx = SourceIndex.load(mem)
    res = append_records(mem, [SourceRecord("openprogram", "s1", "m1", 0, "user", "dup", "")], index=idx)
    assert res.skipped_ids == (TRUSTED,) and res.changed_paths == ()
    # a file changed behind the index's back is scanned again, and refused when truncated
    rel = archive_path(TRUSTED)
    data = (mem / rel).read_bytes()
    (mem / rel).write_bytes(data[: data.rindex(b"<!-- record-lines")])
    with pytest.raises(Exception) as err:
        append_records(mem, [SourceRecord("openprogram", "s1", "m9", 9, "user", "x", "")], index=idx)
    assert "invalid or truncated v2 archive" in str(err.value)
