"""The change verbs (`edit`, `apply`, `views`) end to end through ``memory_tui.cli.main``, on a
small workspace built by the real archive writer and transaction."""

from __future__ import annotations

import io
import json
import stat
import sys
from pathlib import Path

import pytest

from memory_tui.cli import main
from memory_tui.core.tx import api as tx
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records
from memory_tui.core.store.workspace import workspace_revision

EDIT_KEYS = ["ok", "code", "message", "path", "line", "column", "revision", "changed_files", "errors"]


def _records() -> list[SourceRecord]:
    return [
        SourceRecord("openprogram", "sess-cli", f"m{i:03d}", i + 1, "user", f"message {i}: detail {i}",
                     timestamp="2026-11-30T05:00:00+00:00")
        for i in range(6)
    ]


@pytest.fixture
def ws(tmp_path) -> Path:
    state = tmp_path / "state"
    mem = state / "memory"
    (mem / "topics").mkdir(parents=True)
    recs = _records()
    append_records(mem, recs)
    ids = [r.source_id for r in recs]
    core = f"# Core\n\nThe user is Ada.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [name]({ids[0]})\n"
    ada = (f"# Ada\n\nAda drinks tea.[^e1]\n\n[^e1]: Time: `2026-11-02`; Sources: [tea]({ids[1]})\n\n"
           f"Ada walks daily.[^e2]\n\n[^e2]: Time: `2026-11-03`; Sources: [walk]({ids[2]})\n")
    for rel, text in (("topics/core.md", core), ("topics/people/ada.md", ada)):
        r = tx.staged_edit(state, rel, text, git_commit="off")
        assert r.ok, r
    return state


def _ids() -> list[str]:
    return [r.source_id for r in _records()]


def _run(capsys, argv: list[str], stdin: str | None = None, monkeypatch=None) -> tuple[int, str, str]:
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _new_record_text(state: Path, n: int = 3) -> str:
    cur = (state / "memory/topics/people/ada.md").read_text()
    return cur + f"\nAda reads at night.[^e1]\n\n[^e1]: Time: `2026-11-04`; Sources: [read]({_ids()[n]})\n"


# ------------------------------------------------------------------------------------------ edit


def test_edit_from_file_json_shape_and_exit(ws, tmp_path, capsys):
    src = tmp_path / "ada.md"
    src.write_text(_new_record_text(ws))
    before = workspace_revision(ws / "memory")
    code, out, _ = _run(capsys, ["--state", str(ws), "edit", "people/ada.md", "--from", str(src), "--json", "--git-commit", "off"])
    data = json.loads(out)
    assert code == 0
    assert list(data) == EDIT_KEYS
    assert data["ok"] is True and data["code"] is None
    assert data["revision"] == workspace_revision(ws / "memory") != before
    assert "topics/people/ada.md" in data["changed_files"]
    assert "Ada reads at night." in (ws / "memory/topics/people/ada.md").read_text()


def test_edit_from_stdin(ws, capsys, monkeypatch):
    code, out, _ = _run(capsys, ["--state", str(ws), "edit", "topics/people/ada.md", "--from", "-", "--git-commit", "off"],
                        stdin=_new_record_text(ws, 4), monkeypatch=monkeypatch)
    assert code == 0, out
    assert "topics/people/ada.md" in out
    assert "Ada reads at night." in (ws / "memory/topics/people/ada.md").read_text()


def test_check_json_lists_every_error_first_in_the_top_level_fields(ws, tmp_path, capsys):
    src = tmp_path / "bad.md"
    ada = (ws / "memory/topics/people/ada.md").read_text()
    # two uncited paragraphs after the records: both are errors, in file order
    src.write_text(ada + "\nFirst uncited line.\n\nSecond uncited line.\n")
    first = len(ada.splitlines()) + 2
    code, out, _ = _run(capsys, ["--state", str(ws), "edit", "people/ada.md", "--from", str(src),
                                 "--check", "--json"])
    data = json.loads(out)
    assert code == 1 and data["ok"] is False
    errors = data["errors"]
    assert [e["line"] for e in errors] == [first, first + 2]
    assert errors[0] == {k: data[k] for k in ("code", "message", "path", "line", "column")}
    assert all(set(e) == {"code", "message", "path", "line", "column"} for e in errors)
    # the core API the editor calls gives the same list, nothing installed
    problems = tx.edit_errors(ws, "topics/people/ada.md", src.read_text())
    assert [(p.line, p.message) for p in problems] == [(e["line"], e["message"]) for e in errors]
    assert (ws / "memory/topics/people/ada.md").read_text() == ada
    assert tx.edit_errors(ws, "topics/people/ada.md", (ws / "memory/topics/people/ada.md").read_text()) == ()


def test_a_dropped_block_id_does_not_hide_the_other_errors_of_the_edit(ws):
    """Every validation stage still able to run reports its errors: the removed id (the one
    OpenProgram reports, first) and, in file order, the uncited prose and the undefined
    footnote that the strict parse finds after it. A refused save gives the same list."""
    from memory_tui.core.format.rules import rule_of

    ada = (ws / "memory/topics/people/ada.md").read_text()
    first = ada.split("\n")[2]
    assert first.startswith("Ada drinks tea.[^e-") and " ^" in first
    dropped = first[: first.rindex(" ^")]
    bad = ada.replace(first, dropped).rstrip("\n") + "\n\nUncited line.\n\nAda naps.[^e-nowhere]\n"
    lines = bad.split("\n")
    errors = tx.edit_errors(ws, "topics/people/ada.md", bad)
    got = [(p.line, p.message.split(":")[0]) for p in errors]
    assert got == [
        (3, "block ID must not be removed"),
        (lines.index("Uncited line.") + 1, "memory block ID required"),
        (lines.index("Ada naps.[^e-nowhere]") + 1, "undefined footnote"),
    ], errors
    assert all(p.code == "INVALID_TOPIC_FORMAT" for p in errors)
    result = tx.validate_edit(ws, "topics/people/ada.md", bad)
    assert result.message == errors[0].message and result.line == 3  # the first error as before
    assert [rule_of(p.message).split(" ")[0] for p in errors] == ["§5.4", "§3.3", "§3.2"]
    saved = tx.staged_edit(ws, "topics/people/ada.md", bad, git_commit="off")
    assert not saved.ok and saved.all_errors() == errors
    assert (ws / "memory/topics/people/ada.md").read_text() == ada


def test_edit_of_a_missing_topic_needs_create(ws, tmp_path, capsys):
    src = tmp_path / "new.md"
    src.write_text("# Bob\n")
    code, out, _ = _run(capsys, ["--state", str(ws), "edit", "people/nobody.md", "--from", str(src), "--json"])
    data = json.loads(out)
    assert code == 1 and data["code"] == "MEMORY_NOT_FOUND"
    assert data["message"] == "No memory file at 'topics/people/nobody.md'."
    assert not (ws / "memory/topics/people/nobody.md").exists()


def test_edit_rejection_json_non_zero_and_unchanged(ws, tmp_path, capsys):
    src = tmp_path / "bad.md"
    src.write_text("# Bob\n\nBob has no citation at all.\n")
    before = workspace_revision(ws / "memory")
    code, out, _ = _run(capsys, ["--state", str(ws), "edit", "people/bob.md", "--from", str(src), "--create", "--json"])
    data = json.loads(out)
    assert code == 1
    assert list(data) == EDIT_KEYS
    assert data["ok"] is False and data["code"] == "INVALID_TOPIC_FORMAT"
    assert data["path"] == "topics/people/bob.md" and data["line"] == 3 and data["column"] == 1
    assert data["changed_files"] == []
    assert workspace_revision(ws / "memory") == before
    assert not (ws / "memory/topics/people/bob.md").exists()


def test_edit_check_validates_only(ws, tmp_path, capsys):
    src = tmp_path / "ada.md"
    src.write_text(_new_record_text(ws))
    before = workspace_revision(ws / "memory")
    code, out, _ = _run(capsys, ["--state", str(ws), "edit", "people/ada.md", "--from", str(src), "--check"])
    assert code == 0 and out.strip() == "valid"
    assert workspace_revision(ws / "memory") == before


def test_edit_delete(ws, capsys):
    tx.staged_edit(ws, "topics/misc.md", f"# Misc\n\nA stray fact.[^e1]\n\n[^e1]: Time: `2026`; Sources: [x]({_ids()[5]})\n",
                   git_commit="off")
    code, out, _ = _run(capsys, ["--state", str(ws), "edit", "misc.md", "--delete", "--json", "--git-commit", "off"])
    data = json.loads(out)
    assert code == 0 and data["ok"] and "topics/misc.md" in data["changed_files"]
    assert not (ws / "memory/topics/misc.md").exists()


def test_edit_delete_core_refused(ws, capsys):
    code, out, _ = _run(capsys, ["--state", str(ws), "edit", "core.md", "--delete", "--json"])
    data = json.loads(out)
    assert code == 1 and data["code"] == "INVALID_ARGUMENT" and data["path"] == "topics/core.md"
    assert "core master" in data["message"]
    assert (ws / "memory/topics/core.md").is_file()


def test_edit_from_and_delete_exclusive(ws, capsys):
    code, _, err = _run(capsys, ["--state", str(ws), "edit", "people/ada.md", "--delete", "--from", "-"])
    assert code == 2 and "exclusive" in err


def _fake_editor(tmp_path: Path, texts: list[str]) -> str:
    """An $EDITOR that writes texts[i] on its i-th run (the last one from then on)."""
    data = tmp_path / "editor-texts.json"
    data.write_text(json.dumps(texts))
    count = tmp_path / "editor-count"
    script = tmp_path / "fake-editor"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, pathlib\n"
        f"texts = json.loads(pathlib.Path({str(data)!r}).read_text())\n"
        f"c = pathlib.Path({str(count)!r})\n"
        "n = int(c.read_text()) if c.exists() else 0\n"
        "c.write_text(str(n + 1))\n"
        "pathlib.Path(sys.argv[1]).write_text(texts[min(n, len(texts) - 1)])\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def _editor_runs(tmp_path: Path) -> int:
    return int((tmp_path / "editor-count").read_text())


def test_editor_loop_success(ws, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", _fake_editor(tmp_path, [_new_record_text(ws)]))
    code, out, _ = _run(capsys, ["--state", str(ws), "edit", "people/ada.md", "--git-commit", "off"], stdin="", monkeypatch=monkeypatch)
    assert code == 0, out
    assert "Ada reads at night." in (ws / "memory/topics/people/ada.md").read_text()
    assert _editor_runs(tmp_path) == 1


def test_editor_loop_rejection_then_reopen_declined(ws, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", _fake_editor(tmp_path, ["# Ada\n\nUncited prose only.\n"]))
    before = (ws / "memory/topics/people/ada.md").read_bytes()
    code, _, err = _run(capsys, ["--state", str(ws), "edit", "people/ada.md"], stdin="n\n", monkeypatch=monkeypatch)
    assert code == 1
    assert "rejected:" in err and "topics/people/ada.md" in err and "re-open the editor?" in err
    assert _editor_runs(tmp_path) == 1
    assert (ws / "memory/topics/people/ada.md").read_bytes() == before


def test_editor_loop_rejection_then_reopen_fixed(ws, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", _fake_editor(tmp_path, ["# Ada\n\nUncited prose only.\n", _new_record_text(ws)]))
    code, out, err = _run(capsys, ["--state", str(ws), "edit", "people/ada.md", "--git-commit", "off"], stdin="y\n",
                          monkeypatch=monkeypatch)
    assert code == 0, err
    assert _editor_runs(tmp_path) == 2
    assert "Ada reads at night." in (ws / "memory/topics/people/ada.md").read_text()


def test_editor_failure_saves_nothing(ws, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.setenv("EDITOR", "false")
    before = workspace_revision(ws / "memory")
    code, _, err = _run(capsys, ["--state", str(ws), "edit", "people/ada.md"], stdin="", monkeypatch=monkeypatch)
    assert code == 1 and "editor exited" in err
    assert workspace_revision(ws / "memory") == before


# ----------------------------------------------------------------------------------------- apply


def _ops(n: int = 3) -> list[dict]:
    return [{"op": "create_record", "content": "Ada likes rain.", "time": "2026-11", "source_refs": [_ids()[n]],
             "destination": {"topic_path": "topics/people/ada.md", "headings": ["Ada"], "position": "end"}}]


def test_apply_with_base_revision(ws, tmp_path, capsys):
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"memory_changes": _ops(), "git_commit": "off"}))
    base = workspace_revision(ws / "memory")
    code, out, _ = _run(capsys, ["--state", str(ws), "apply", str(req), "--base-revision", base, "--json"])
    data = json.loads(out)
    assert code == 0, data
    assert data["ok"] is True and data["revision"] == workspace_revision(ws / "memory") != base
    # OpenProgram's order: plain string order, so the topic after the derived files it changed
    assert "topics/people/ada.md" in data["changed_files"] and data["changed_files"] == sorted(data["changed_files"])
    assert set(data) >= {"source_ids", "block_ids", "evidence_ids", "memory_committed", "git_committed"}
    assert "Ada likes rain." in (ws / "memory/topics/people/ada.md").read_text()


def test_apply_stale_base_is_concurrent_update(ws, tmp_path, capsys):
    req = tmp_path / "req.json"
    stale = workspace_revision(ws / "memory")
    tx.staged_edit(ws, "topics/people/ada.md", _new_record_text(ws), git_commit="off")
    req.write_text(json.dumps({"base_revision": stale, "memory_changes": _ops(4), "git_commit": "off"}))
    now = workspace_revision(ws / "memory")
    code, out, _ = _run(capsys, ["--state", str(ws), "apply", str(req), "--json"])
    data = json.loads(out)
    assert code == 3
    assert data == {"ok": False, "error": {
        "code": "CONCURRENT_UPDATE", "message": "workspace changed since base_revision was read", "path": None,
        "details": {"base_revision": stale, "revision": now}}}
    assert workspace_revision(ws / "memory") == now


def test_apply_requires_base_revision(ws, tmp_path, capsys):
    req = tmp_path / "req.json"
    req.write_text(json.dumps(_ops()))  # a bare memory_changes list
    before = workspace_revision(ws / "memory")
    code, out, _ = _run(capsys, ["--state", str(ws), "apply", str(req), "--json"])
    data = json.loads(out)
    assert code == 1 and data["error"]["code"] == "INVALID_ARGUMENT"
    assert "--base-revision" in data["error"]["message"]
    assert workspace_revision(ws / "memory") == before


def test_apply_current_says_so(ws, tmp_path, capsys, monkeypatch):
    code, out, err = _run(capsys, ["--state", str(ws), "apply", "-", "--base-revision", "current"],
                          stdin=json.dumps({"memory_changes": _ops(), "git_commit": "off"}), monkeypatch=monkeypatch)
    assert code == 0, err
    assert "no compare-and-set" in err
    assert "Ada likes rain." in (ws / "memory/topics/people/ada.md").read_text()


def test_apply_invalid_json_is_usage_error(ws, tmp_path, capsys):
    req = tmp_path / "req.json"
    req.write_text("{not json")
    code, _, err = _run(capsys, ["--state", str(ws), "apply", str(req)])
    assert code == 2 and "invalid JSON" in err and ":1:2:" in err


def test_apply_check_installs_nothing(ws, tmp_path, capsys):
    req = tmp_path / "req.json"
    base = workspace_revision(ws / "memory")
    req.write_text(json.dumps({"base_revision": base, "memory_changes": _ops(), "git_commit": "off"}))
    code, out, _ = _run(capsys, ["--state", str(ws), "apply", str(req), "--check", "--json"])
    assert code == 0 and json.loads(out)["ok"] is True
    assert workspace_revision(ws / "memory") == base


# ----------------------------------------------------------------------------------------- views


def test_views_check_clean_tampered_rebuild(ws, capsys):
    mem = ws / "memory"
    code, out, _ = _run(capsys, ["--state", str(ws), "views", "--check"])
    assert code == 0 and "current" in out
    good = (mem / "relations.json").read_bytes()
    (mem / "relations.json").write_text('{"backlinks": {}, "outbound": {}}\n')
    code, out, _ = _run(capsys, ["--state", str(ws), "views", "--check", "--json"])
    data = json.loads(out)
    assert code == 1 and data["ok"] is False
    assert data["mismatches"] == [{"path": "relations.json", "kind": "differs", "line": 1}]
    tampered = workspace_revision(mem)
    code, out, _ = _run(capsys, ["--state", str(ws), "views", "--rebuild", "--json"])
    data = json.loads(out)
    assert code == 0 and data["ok"] and data["changed_files"] == ["relations.json"]
    assert (mem / "relations.json").read_bytes() == good
    assert data["revision"] == workspace_revision(mem) != tampered
    code, _, _ = _run(capsys, ["--state", str(ws), "views"])
    assert code == 0


def test_views_rebuild_noop_changes_nothing(ws, capsys):
    mem = ws / "memory"
    before = {p: p.read_bytes() for p in mem.rglob("*") if p.is_file()}
    code, out, _ = _run(capsys, ["--state", str(ws), "views", "--rebuild"])
    assert code == 0 and out.startswith("no change")
    assert {p: p.read_bytes() for p in mem.rglob("*") if p.is_file()} == before
