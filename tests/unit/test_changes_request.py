"""validate_request: §5.3 steps 1-2 and the argument rules of §6."""

from __future__ import annotations

import pytest

from memory_tui.core.changes.labels import replace_new_source_labels
from memory_tui.core.changes.request import (
    CONTENT_RULE,
    Destination,
    FileChange,
    Request,
    SourceRef,
    check_append_only,
    validate_request,
)
from memory_tui.core.format.errors import MemoryError

REV = "770a6d9353e3913cc767d8c393d504d2"
DEST = {"topic_path": "topics/people/dave.md", "headings": ["Dave", "Preferences"], "position": "end"}


def create(**over):
    op = {"op": "create_record", "content": "Dave likes tea.", "time": "2026-08", "source_refs": ["openprogram/s/m"], "destination": dict(DEST)}
    op.update(over)
    return op


def req(*ops, **top):
    payload = {"base_revision": REV, "memory_changes": list(ops)}
    payload.update(top)
    return payload


def err(payload) -> MemoryError:
    with pytest.raises(MemoryError) as info:
        validate_request(payload)
    return info.value


# --- top level (§5.3 step 1) -----------------------------------------------------------------


def test_spec_example_request_validates():
    r = validate_request(
        {
            "base_revision": REV,
            "memory_changes": [
                {
                    "op": "update_record",
                    "memory_id": "97de5549",
                    "content": "Dave now prefers coffee.",
                    "time": "2026-09",
                    "sources": [{"source": "openprogram/sess-7f2a/msg_2fa0", "label": "switched"}],
                }
            ],
        }
    )
    assert isinstance(r, Request)
    assert r.form == "memory_changes" and r.git_commit == "auto" and r.commit_message == "Update memory"
    (op,) = r.memory_changes
    assert op.op == "update_record" and op.memory_id == "97de5549" and op.time == "2026-09"
    assert op.refs == (SourceRef("openprogram/sess-7f2a/msg_2fa0", "switched"),)


@pytest.mark.parametrize(
    "payload,message",
    [
        ({"base_revision": REV, "patch": "x", "git_commit": "yes"}, "git_commit must be auto, on or off"),
        ({"patch": "x"}, "base_revision is required"),
        ({"base_revision": "  ", "patch": "x"}, "base_revision is required"),
        ({"base_revision": REV, "patch": "x", "commit_message": 5}, "commit_message must be a string"),
        ({"base_revision": REV}, "exactly one of patch, changes or memory_changes is required"),
        ({"base_revision": REV, "patch": "x", "changes": []}, "exactly one of patch, changes or memory_changes is required"),
        ({"base_revision": REV, "patch": "x" * 512_001}, "patch exceeds 512000 bytes"),
        ({"base_revision": REV, "patch": ""}, "patch must be a non-empty string"),
        ({"base_revision": REV, "patch": "x", "append_only": "yes"}, "append_only must be a boolean"),
        ({"base_revision": REV, "patch": "x", "bogus": 1}, "unknown request field: bogus"),
    ],
)
def test_top_level_argument_checks(payload, message):
    e = err(payload)
    assert e.code == "INVALID_ARGUMENT"
    assert message in e.message


def test_commit_message_normalised():
    r = validate_request({"base_revision": REV, "patch": "x", "commit_message": " a\nb\x07 " + "c" * 600})
    assert r.commit_message.startswith("a b")
    assert len(r.commit_message) == 500 and "\x07" not in r.commit_message


# --- record ops: limits, op names, keys ------------------------------------------------------------


def test_memory_changes_limits():
    assert "1 to 64" in err(req()).message
    assert "1 to 64" in err(req(*[create()] * 65)).message
    big = create(content="x" * 300_000)
    e = err(req(big, create(content="y" * 250_000)))
    assert "512000" in e.message


def test_unknown_op_and_unknown_key():
    e = err(req({"op": "rename"}))
    assert e.details == {"op_index": 0, "field": "op"}
    e = err(req(create(), create(colour="red")))
    assert e.code == "INVALID_ARGUMENT" and e.details["op_index"] == 1 and e.details["field"] == "colour"
    e = err(req({"op": "delete_record", "memory_id": "a", "content": "x"}))
    assert e.details["field"] == "content"


def test_create_memory_id_is_runtime_assigned():
    e = err(req(create(memory_id="abc")))
    assert "memory_id is Runtime-assigned" in e.message


def test_legacy_aliases():
    r = validate_request(
        req(
            {"op": "create", "content": "A.", "time": None, "source_refs": ["p/t/m"], "topic_path": "topics/a.md", "headings": ["A"]},
            {"op": "update", "memory_id": "x", "content": "B.", "time": "undated", "source_refs": ["p/t/m"]},
            {"op": "delete", "memory_id": "y"},
        )
    )
    c, u, d = r.memory_changes
    assert c.op == "create_record" and c.destination == Destination("a.md", ("A",), "end", None)
    assert c.time == "undated" and c.legacy_name == "create"
    assert u.op == "update_record" and u.time == "undated"
    assert d.op == "delete_record" and d.memory_id == "y"
    e = err(req({"op": "create", "content": "A.", "time": None, "source_refs": ["p/t/m"], "destination": DEST}))
    assert e.details["field"] == "destination"


# --- content ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "two\n\nparagraphs",
        "# heading",
        "line\n## heading",
        "cites[^e1]",
        "has id ^abc123",
        "has id\n^abc123",
        "```\ncode",
        "<!-- comment -->",
    ],
)
def test_content_must_be_one_final_paragraph(content):
    e = err(req(create(content=content)))
    assert CONTENT_RULE in e.message
    assert e.details == {"op_index": 0, "field": "content"}


@pytest.mark.parametrize("content", ["", "   ", None, 7])
def test_content_non_blank(content):
    e = err(req(create(content=content)))
    assert e.details["field"] == "content"


def test_content_trimmed_and_multiline_ok():
    r = validate_request(req(create(content="  line one\nline two ^ not an id at end.  ")))
    assert r.memory_changes[0].content == "line one\nline two ^ not an id at end."


# --- time ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value,stored", [(None, "undated"), ("undated", "undated"), ("2026", "2026"), ("2026-02", "2026-02"), ("2024-02-29", "2024-02-29")])
def test_time_valid(value, stored):
    assert validate_request(req(create(time=value))).memory_changes[0].time == stored


@pytest.mark.parametrize("value", ["2026-13", "2023-02-29", "26", "yesterday", "2026-08-09T10:00", "\u0662\u0660\u0662\u0666", 2026, ""])
def test_time_invalid(value):
    e = err(req(create(time=value)))
    assert e.details == {"op_index": 0, "field": "time"}


def test_time_key_required():
    op = create()
    del op["time"]
    e = err(req(op))
    assert e.details["field"] == "time" and "required" in e.message


# --- sources / source_refs --------------------------------------------------------------------------


def test_exactly_one_of_source_refs_or_sources():
    both = create(sources=[{"source": "p/t/m", "label": "x"}])
    assert "exactly one of source_refs or sources" in err(req(both)).message
    neither = create()
    del neither["source_refs"]
    assert "exactly one of source_refs or sources" in err(req(neither)).message


@pytest.mark.parametrize(
    "refs",
    [
        {"source_refs": []},
        {"source_refs": ["  "]},
        {"source_refs": ["p/t/m", "p/t/m"]},
        {"source_refs": ["p/t/\nm"]},
        {"source_refs": None, "sources": [{"source": "p/t/m"}]},
        {"source_refs": None, "sources": [{"source": "p/t/m", "label": "x", "extra": 1}]},
        {"source_refs": None, "sources": [{"source": "p/t/m", "label": " "}]},
        {"source_refs": None, "sources": [{"source": "p/t/m", "label": "a"}, {"source": "p/t/m", "label": "b"}]},
    ],
)
def test_bad_refs(refs):
    e = err(req(create(**refs)))
    assert e.code == "INVALID_ARGUMENT" and e.details["op_index"] == 0


def test_label_that_breaks_the_link_is_a_topic_format_error():
    # OpenProgram renders such a label and its strict parse fails (corpus cases 245, 246)
    e = err(req(create(source_refs=None, sources=[{"source": "p/t/m", "label": "a]b"}])))
    assert e.code == "INVALID_TOPIC_FORMAT" and e.details["op_index"] == 0 and "label" in e.message


def test_sources_label_kept_verbatim():
    r = validate_request(req(create(source_refs=None, sources=[{"source": " p/t/m ", "label": "  Tea talk "}])))
    assert r.memory_changes[0].refs == (SourceRef("p/t/m", "  Tea talk "),)


# --- destination -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dest,code,field",
    [
        ({**DEST, "topic_path": "../etc/passwd.md"}, "PATH_OUTSIDE_WORKSPACE", "destination.topic_path"),
        ({**DEST, "topic_path": "/abs/topics/a.md"}, "PATH_OUTSIDE_WORKSPACE", "destination.topic_path"),
        ({**DEST, "topic_path": "sources/a.md"}, "READ_ONLY_PATH", "destination.topic_path"),
        ({**DEST, "topic_path": "topics/a.txt"}, "READ_ONLY_PATH", "destination.topic_path"),
        ({**DEST, "topic_path": "people/dave.md"}, "READ_ONLY_PATH", "destination.topic_path"),
        ({**DEST, "headings": ["a"] * 7}, "INVALID_ARGUMENT", "destination.headings"),
        ({**DEST, "headings": ["a\nb"]}, "INVALID_ARGUMENT", "destination.headings"),
        ({**DEST, "headings": [" "]}, "INVALID_ARGUMENT", "destination.headings"),
        ({**DEST, "headings": "Dave"}, "INVALID_ARGUMENT", "destination.headings"),
        ({k: v for k, v in DEST.items() if k != "headings"}, "INVALID_ARGUMENT", "destination.headings"),
        ({**DEST, "position": "middle"}, "INVALID_ARGUMENT", "destination.position"),
        ({**DEST, "position": "before"}, "INVALID_ARGUMENT", "destination.anchor_memory_id"),
        ({**DEST, "position": "end", "anchor_memory_id": "abc"}, "INVALID_ARGUMENT", "destination.anchor_memory_id"),
        ({**DEST, "where": 1}, "INVALID_ARGUMENT", "destination.where"),
    ],
)
def test_destination_rules(dest, code, field):
    e = err(req(create(destination=dest)))
    assert e.code == code
    assert e.details["op_index"] == 0 and e.details["field"] == field


def test_destination_parsed():
    r = validate_request(req(create(destination={"topic_path": "topics/a/b.md", "headings": [" X "], "position": "after", "anchor_memory_id": "k1"})))
    assert r.memory_changes[0].destination == Destination("a/b.md", ("X",), "after", "k1")


# --- cross-op rules that need no workspace -----------------------------------------------------------


def upd(mid):
    return {"op": "update_record", "memory_id": mid, "content": "x.", "time": None, "source_refs": ["p/t/m"]}


def dele(mid):
    return {"op": "delete_record", "memory_id": mid}


def mov(ids, **dest):
    return {"op": "move_records", "memory_ids": ids, "destination": {**DEST, **dest}}


def test_same_id_in_two_content_ops():
    for pair in ((upd("a"), dele("a")), (upd("a"), upd("a")), (dele("a"), dele("a"))):
        e = err(req(*pair))
        assert e.details == {"op_index": 1, "field": "memory_id", "memory_id": "a"}


def test_move_of_deleted_id():
    e = err(req(dele("a"), mov(["b", "a"])))
    assert "cannot move memory_id a" in e.message and e.details["op_index"] == 1


def test_delete_of_moved_id():
    e = err(req(mov(["a"]), dele("a")))
    assert "cannot delete memory_id a" in e.message and e.details["op_index"] == 1


def test_duplicate_ids_within_and_among_moves():
    e = err(req(mov(["a", "b", "a"])))
    assert "duplicate memory_id: a" in e.message
    e = err(req(mov(["a"]), mov(["b", "a"])))
    assert e.details == {"op_index": 1, "field": "memory_ids", "memory_id": "a"}


def test_anchor_among_moved_ids():
    e = err(req(mov(["a", "b"], position="before", anchor_memory_id="b")))
    assert e.details["field"] == "destination.anchor_memory_id"


def test_update_then_move_same_id_allowed():
    r = validate_request(req(upd("a"), mov(["a"])))
    assert [o.op for o in r.memory_changes] == ["update_record", "move_records"]


# --- request-level sources (§5.3 step 2) ------------------------------------------------------------


def src(**over):
    s = {"label": "new-source-1", "role": "user", "content": "I like tea."}
    s.update(over)
    return s


def test_sources_valid_and_observed_at_reserialised():
    r = validate_request({"base_revision": REV, "patch": "x", "sources": [src(observed_at="2026-08-09T10:11:12+08:00"), src(label="new-source-b", role="tool")]})
    assert r.sources[0].observed_at == "2026-08-09T10:11:12+08:00"
    r = validate_request({"base_revision": REV, "patch": "x", "sources": [src(observed_at="2026-08-09 10:11:12Z")]})
    assert r.sources[0].observed_at == "2026-08-09T10:11:12+00:00"


@pytest.mark.parametrize(
    "sources,field",
    [
        ([src(label="source-1")], "label"),
        ([src(label="new-source-A")], "label"),
        ([src(), src()], "label"),
        ([src(role="owner")], "role"),
        ([src(content="  ")], "content"),
        ([src(observed_at="yesterday")], "observed_at"),
        ([src(extra=1)], "extra"),
        ([src(label=f"new-source-{i}") for i in range(65)], None),
        ([src(label="new-source-a", content="x" * 200_000), src(label="new-source-b", content="y" * 60_000)], "content"),
    ],
)
def test_sources_rules(sources, field):
    e = err({"base_revision": REV, "patch": "x", "sources": sources})
    assert e.code == "INVALID_ARGUMENT"
    if field:
        assert e.details["field"] == field


# --- whole-file changes shape (§6.2) ----------------------------------------------------------------


def test_changes_shape():
    r = validate_request({"base_revision": REV, "changes": [{"path": "topics/a.md", "action": "write", "content": "x"}, {"path": "topics/b.md", "action": "delete"}]})
    assert r.changes == (FileChange(0, "a.md", "write", "x"), FileChange(1, "b.md", "delete", None))


@pytest.mark.parametrize(
    "changes,code,message",
    [
        ([], "INVALID_ARGUMENT", "1 to 64"),
        ([{"path": "topics/a.md", "action": "write", "content": "x"}] * 65, "INVALID_ARGUMENT", "1 to 64"),
        ([{"path": "topics/a.md", "action": "write", "content": "x"}, {"path": "topics/./a.md", "action": "delete"}], "INVALID_ARGUMENT", "duplicate change path"),
        ([{"path": "topics/a.md", "action": "write"}], "INVALID_ARGUMENT", "must be a string"),
        ([{"path": "topics/a.md", "action": "delete", "content": "x"}], "INVALID_ARGUMENT", "not allowed for delete"),
        ([{"path": "topics/a.md", "action": "move"}], "INVALID_ARGUMENT", "write or delete"),
        ([{"path": "topics/a.md", "action": "write", "content": "x", "mode": 1}], "INVALID_ARGUMENT", "unknown field"),
        ([{"path": "topics/notes.txt", "action": "write", "content": "x"}], "READ_ONLY_PATH", "only topics/**/*.md"),
        ([{"path": "../x.md", "action": "write", "content": "x"}], "PATH_OUTSIDE_WORKSPACE", "escapes"),
        ([{"path": "topics/core.md", "action": "delete"}], "INVALID_ARGUMENT", "topics/core.md cannot be deleted"),
    ],
)
def test_changes_rules(changes, code, message):
    e = err({"base_revision": REV, "changes": changes})
    assert e.code == code and message in e.message


# --- new-source labels (§5.3 step 5) ----------------------------------------------------------------


def test_replace_labels_in_record_refs_longest_token():
    r = validate_request(req(create(source_refs=["new-source-a", "new-source-ab"])))
    r2 = replace_new_source_labels(r, {"new-source-a": "claude-code/t/1", "new-source-ab": "claude-code/t/2"})
    assert [x.source for x in r2.memory_changes[0].refs] == ["claude-code/t/1", "claude-code/t/2"]
    # record content is not rewritten
    r = validate_request(req(create(content="about new-source-a", source_refs=["new-source-a"])))
    r2 = replace_new_source_labels(r, {"new-source-a": "claude-code/t/1"})
    assert r2.memory_changes[0].content == "about new-source-a"


def test_replace_labels_in_patch_and_changes():
    r = validate_request({"base_revision": REV, "patch": "+[x](new-source-1), [y](new-source-12)\n"})
    assert replace_new_source_labels(r, {"new-source-1": "A", "new-source-12": "B"}).patch == "+[x](A), [y](B)\n"
    r = validate_request({"base_revision": REV, "changes": [{"path": "topics/a.md", "action": "write", "content": "[s](new-source-x)"}, {"path": "topics/b.md", "action": "delete"}]})
    out = replace_new_source_labels(r, {"new-source-x": "claude-code/t/m"})
    assert out.changes[0].content == "[s](claude-code/t/m)" and out.changes[1].content is None


def test_undeclared_label_is_missing_source():
    r = validate_request(req(create(), create(source_refs=["new-source-zz"])))
    with pytest.raises(MemoryError) as info:
        replace_new_source_labels(r, {"new-source-z": "x/y/z"})
    assert info.value.code == "MISSING_SOURCE"
    assert info.value.details == {"label": "new-source-zz", "op_index": 1, "field": "source_refs"}
    r = validate_request({"base_revision": REV, "patch": "+new-source-q\n"})
    with pytest.raises(MemoryError) as info:
        replace_new_source_labels(r, {})
    assert info.value.code == "MISSING_SOURCE"


# --- append_only (§5.3 step 7) ---------------------------------------------------------------------


def test_check_append_only():
    check_append_only({"a.md": "x\n"}, {"a.md": "x\ny\n", "new.md": "z\n"})
    check_append_only({"a.md": "x\n"}, {"a.md": "x\n"})
    with pytest.raises(MemoryError) as info:
        check_append_only({"a.md": "x\n"}, {"a.md": "y\nx\n"})
    assert info.value.code == "APPEND_ONLY_REQUIRED" and info.value.path == "topics/a.md"
    with pytest.raises(MemoryError) as info:
        check_append_only({"a.md": "x\n"}, {})
    assert info.value.code == "APPEND_ONLY_REQUIRED"
