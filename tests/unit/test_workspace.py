"""Revision (§2.6) and the runtime state files (§7.7, §7.9, §7.10)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memory_tui.core.store.workspace import (
    EMPTY_REVISION,
    RuntimeState,
    dump_runtime_json,
    dump_session_end,
    load_agent_history,
    load_runtime_state,
    load_session_end,
    load_writer_status,
    parse_runtime_state,
    parse_writer_status,
    read_workspace_id,
    workspace_revision,
)


def write(root: Path, rel: str, data: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- revision


def test_empty_and_missing_workspace_revision(tmp_path):
    assert EMPTY_REVISION == "e3b0c44298fc1c149afbf4c8996fb924"
    assert workspace_revision(tmp_path) == EMPTY_REVISION
    assert workspace_revision(tmp_path / "absent") == EMPTY_REVISION


def test_spec_example_revision_ignores_locks_caches_and_git(tmp_path):
    write(tmp_path, "topics/a.md", "x\n")
    write(tmp_path, ".scriptorium/runtime.json", "{}\n")
    assert workspace_revision(tmp_path) == "8867a8ae8d5cf844496ead11e91249c0"
    write(tmp_path, ".scriptorium/write.lock", "")
    write(tmp_path, ".scriptorium/workspace-id", "w-0123abcd\n")
    write(tmp_path, ".scriptorium-bm25.json", "{}")
    write(tmp_path, ".scriptorium-block-backup/topics/a.md", "old\n")
    write(tmp_path, ".git/HEAD", "ref: refs/heads/main\n")
    write(tmp_path, ".nativemem-x/foo", "bar")
    assert workspace_revision(tmp_path) == "8867a8ae8d5cf844496ead11e91249c0"


def test_revision_counts_both_runtime_dirs(tmp_path):
    write(tmp_path, "topics/a.md", "x\n")
    write(tmp_path, ".scriptorium/runtime.json", "{}\n")
    before = workspace_revision(tmp_path)
    write(tmp_path, ".nativemem/runtime.json", "{}\n")
    assert workspace_revision(tmp_path) != before


def _manual(entries: list[tuple[str, bytes]]) -> str:
    import hashlib

    h = hashlib.sha256()
    for rel, data in entries:
        h.update(rel.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:32]


def test_revision_sorts_component_wise(tmp_path):
    write(tmp_path, "topics.md", "3")
    write(tmp_path, "topics/a-b.md", "2")
    write(tmp_path, "topics/a/x.md", "1")
    expected = _manual([("topics/a/x.md", b"1"), ("topics/a-b.md", b"2"), ("topics.md", b"3")])
    assert workspace_revision(tmp_path) == expected
    # whole-string order would differ, so this test can fail
    assert expected != _manual([("topics.md", b"3"), ("topics/a-b.md", b"2"), ("topics/a/x.md", b"1")])


def test_revision_skips_symlinks(tmp_path):
    write(tmp_path, "topics/a.md", "x\n")
    before = workspace_revision(tmp_path)
    os.symlink(tmp_path / "topics/a.md", tmp_path / "topics/link.md")
    os.symlink(tmp_path / "topics", tmp_path / "linkdir")
    assert workspace_revision(tmp_path) == before


def test_revision_changes_with_content_and_name(tmp_path):
    write(tmp_path, "topics/a.md", "x\n")
    r1 = workspace_revision(tmp_path)
    write(tmp_path, "topics/a.md", "y\n")
    r2 = workspace_revision(tmp_path)
    (tmp_path / "topics/a.md").rename(tmp_path / "topics/b.md")
    assert len({r1, r2, workspace_revision(tmp_path)}) == 3


# ---------------------------------------------------------------- workspace-id


@pytest.mark.parametrize(
    "content,expected",
    [("w-0123abcd\n", "w-0123abcd"), ("  w-0123abcd  \n", "w-0123abcd"), ("w-0123ABCD\n", None), ("w-0123abc\n", None), ("", None)],
)
def test_workspace_id(tmp_path, content, expected):
    write(tmp_path, ".scriptorium/workspace-id", content)
    assert read_workspace_id(tmp_path) == expected


def test_workspace_id_absent_is_none_and_nothing_is_created(tmp_path):
    assert read_workspace_id(tmp_path) is None
    assert list(tmp_path.iterdir()) == []


def test_legacy_runtime_dir_is_used(tmp_path):
    write(tmp_path, ".nativemem/workspace-id", "w-aaaaaaaa\n")
    assert read_workspace_id(tmp_path) == "w-aaaaaaaa"


# ---------------------------------------------------------------- runtime.json


SPEC_RUNTIME = """{
  "creation_order": {
    "97de5549": 0,
    "ae99a3a8": 1
  },
  "write_commits_since_global": 0,
  "local_batches": 0,
  "local_tokens": 0,
  "last_global_at": null
}
"""


def test_runtime_round_trip_is_byte_exact(tmp_path):
    write(tmp_path, ".scriptorium/runtime.json", SPEC_RUNTIME)
    state, problems = load_runtime_state(tmp_path)
    assert problems == ()
    assert state.creation_order == {"97de5549": 0, "ae99a3a8": 1}
    assert dump_runtime_json(state) == SPEC_RUNTIME


def test_runtime_defaults_and_key_order():
    assert dump_runtime_json(RuntimeState()) == (
        '{\n  "creation_order": {},\n  "write_commits_since_global": 0,\n  "local_batches": 0,\n'
        '  "local_tokens": 0,\n  "last_global_at": null\n}\n'
    )


def test_runtime_keeps_cursors_and_unknown_keys_after_owned_keys():
    data = {"zz": {"é": "ü"}, "cursors": {"s": {"message_id": "m", "ordinal": 3}}, "local_tokens": 7, "creation_order": {"b": 1}}
    state, problems = parse_runtime_state(data)
    assert problems == ()
    assert state.has_legacy_cursors and state.cursors == {"s": {"message_id": "m", "ordinal": 3}}
    text = dump_runtime_json(state)
    assert list(json.loads(text)) == [
        "creation_order", "write_commits_since_global", "local_batches", "local_tokens", "last_global_at", "zz", "cursors",
    ]
    assert '"é": "ü"' in text  # non-ASCII kept
    assert text.endswith("}\n")


def test_runtime_corrupt_gives_defaults_and_a_problem_with_line(tmp_path):
    write(tmp_path, ".scriptorium/runtime.json", '{\n  "creation_order": {\n    "a": 0,\n  }\n}\n')
    state, problems = load_runtime_state(tmp_path)
    assert state.creation_order == {} and state.exists
    assert len(problems) == 1
    p = problems[0]
    assert p.code == "CORRUPT_FILE" and p.path == ".scriptorium/runtime.json" and p.line == 4


def test_runtime_bad_field_types_default_with_problems():
    state, problems = parse_runtime_state({"creation_order": {"a": "x", "b": 2}, "local_batches": -1, "last_global_at": 5})
    assert state.creation_order == {"b": 2}
    assert state.local_batches == 0 and state.last_global_at is None
    assert len(problems) == 3


def test_runtime_creation_order_refuses_bools_and_floats():
    # ``True`` is an ``int`` to ``isinstance``, never a position; an all-int order is taken whole
    for bad in (True, 2.0):
        state, problems = parse_runtime_state({"creation_order": {"a": bad, "b": 1}})
        assert state.creation_order == {"b": 1}
        assert [p.message for p in problems] == ["creation_order['a'] is not an integer; ignored"]
    state, problems = parse_runtime_state({"creation_order": {"b": 1, "a": 0}})
    assert problems == () and list(state.creation_order.items()) == [("b", 1), ("a", 0)]


def test_creation_order_only_grows():
    state = RuntimeState(creation_order={"a": 0, "b": 4})
    grown = state.with_creation_order(["b", "c", "a", "d"])
    assert grown.creation_order == {"a": 0, "b": 4, "c": 5, "d": 6}
    assert state.with_creation_order(["a"]) is state


# ---------------------------------------------------------------- writer-status / history / session-end


def test_writer_status_version_rule_and_enum():
    ok = parse_writer_status(
        {"version": 1, "last_outcome": "failure", "last_success_at": "t0",
         "last_failure": {"at": "t1", "reason_code": "CONCURRENT_UPDATE", "retryable": True}}
    )
    assert ok.last_failure.reason_code == "CONCURRENT_UPDATE" and ok.last_failure.retryable
    assert ok.to_json()["last_failure"] == {"at": "t1", "reason_code": "CONCURRENT_UPDATE", "retryable": True}
    other = parse_writer_status({"version": 2, "last_outcome": "success"})
    assert other.last_outcome is None and other.last_failure is None
    assert parse_writer_status({"version": True, "last_outcome": "success"}).last_outcome is None
    unknown = parse_writer_status({"version": 1, "last_failure": {"reason_code": "BOGUS"}})
    assert unknown.last_failure.reason_code == "WRITER_FAILURE_UNKNOWN" and unknown.raw_reason_code == "BOGUS"


def test_writer_status_corrupt(tmp_path):
    write(tmp_path, ".scriptorium/writer-status.json", "{")
    status, problems = load_writer_status(tmp_path)
    assert status.last_outcome is None and problems[0].path == ".scriptorium/writer-status.json"


def test_agent_history_keeps_good_lines_and_reports_bad_ones(tmp_path):
    lines = [
        json.dumps({"stage": "write", "reply": "ok", "turns": 2}),
        "{not json",
        json.dumps({"stage": "organize-repair", "error": "boom"}),
        "[1, 2]",
        "",
        json.dumps({"no": "stage"}),
    ]
    write(tmp_path, ".scriptorium/agent-history.jsonl", "\n".join(lines) + "\n")
    runs, problems = load_agent_history(tmp_path)
    assert [(r.line, r.stage) for r in runs] == [(1, "write"), (3, "organize-repair")]
    assert runs[1].failed and runs[1].is_repair and runs[1].error == "boom"
    assert [p.line for p in problems] == [2, 4, 6]
    assert all(p.path == ".scriptorium/agent-history.jsonl" for p in problems)


def test_session_end(tmp_path):
    text = dump_session_end({"sess-7f2a": 1786240000.5})
    assert text == '{\n  "sess-7f2a": 1786240000.5\n}'
    write(tmp_path, ".scriptorium/session-end.json", text)
    se, problems = load_session_end(tmp_path)
    assert se.handled == {"sess-7f2a": 1786240000.5} and problems == () and not se.corrupt
    write(tmp_path, ".scriptorium/session-end.json", "[")
    se, problems = load_session_end(tmp_path)
    assert se.corrupt and problems[0].line == 1
