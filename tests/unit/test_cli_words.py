"""The CLI says what happened in plain words: a check says "would", an unchanged evidence id
is not called new, an unchanged edit names its revision, history shows the text, ``why``
prints a shared history once, and every refusal says what was wrong and how to fix it."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

from memory_tui.cli import main
from memory_tui.core.store.workspace import workspace_revision

ADA = "topics/people/ada.md"


def _run(capsys, argv, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_apply_check_says_would_and_a_real_apply_says_what_it_did(fixture_state, capsys, tmp_path):
    req = tmp_path / "req.json"
    req.write_text(json.dumps([{"op": "update_record", "memory_id": "fc30e0e0", "content": "Ada likes green tea.",
                                "time": None, "sources": [{"source": "openprogram/local_a1b2c3d4e5/a00000000001",
                                                           "label": "hi"}]}]))
    rev = workspace_revision(fixture_state / "memory")
    code, out, _ = _run(capsys, ["--state", str(fixture_state), "apply", str(req), "--base-revision", rev, "--check"])
    assert code == 0 and workspace_revision(fixture_state / "memory") == rev
    lines = out.splitlines()
    assert re.match(r"valid: would change \d+ file\(s\) \(at revision " + rev + r"\)$", lines[0])
    assert "  would change topics/people/ada.md" in lines
    assert not any(line.startswith("revision ") for line in lines)
    code, out, _ = _run(capsys, ["--state", str(fixture_state), "apply", str(req), "--base-revision", rev])
    assert code == 0 and out.startswith("revision ") and "would" not in out


def test_record_update_keeping_its_sources_does_not_call_the_evidence_id_new(fixture_state, capsys):
    text = (fixture_state / "memory" / ADA).read_text()
    old = re.search(r"\[\^(e-[0-9a-f]+)\]: ", text).group(1)
    code, out, _ = _run(capsys, ["--state", str(fixture_state), "record", "update", "fc30e0e0", "--text",
                                 "Ada is the traveller who wants short answers."])
    assert code == 0
    assert f"  evidence id {old} (unchanged)" in out.splitlines()
    assert "new-evidence-record" not in out and "new evidence id" not in out


def test_edit_without_a_change_names_the_revision(fixture_state, capsys, monkeypatch):
    rev = workspace_revision(fixture_state / "memory")
    monkeypatch.setenv("EDITOR", "true")  # the editor leaves the text as it was
    monkeypatch.delenv("VISUAL", raising=False)
    code, out, _ = _run(capsys, ["--state", str(fixture_state), "edit", "people/ada.md"])
    assert code == 0 and out == f"no change (revision {rev})\n"


def test_plain_history_shows_the_text_of_each_version(fixture_state, capsys):
    assert main(["--state", str(fixture_state), "record", "update", "fc30e0e0", "--text", "Ada wants short answers."]) == 0
    capsys.readouterr()
    code, out, _ = _run(capsys, ["--state", str(fixture_state), "history", "fc30e0e0"])
    assert code == 0
    lines = out.splitlines()
    assert "    Ada wants short answers.[^" in "\n".join(lines)
    newest = next(i for i, l in enumerate(lines) if l.startswith("    Ada wants short answers."))
    older = next(i for i, l in enumerate(lines) if l.startswith("    Ada is the traveller behind the [Kyoto plan]"))
    assert newest < older  # newest first, each under its own commit line


def test_why_session_prints_a_shared_prefix_once(fixture_state_ro, capsys):
    code, out, _ = _run(capsys, ["--state", str(fixture_state_ro), "why", "local_a1b2c3d4e5"])
    assert code == 0
    turn_lines = [l for l in out.splitlines() if re.match(r"    [+~\-!] (written|pending|never) ", l)]
    ids = [l.split()[2] for l in turn_lines]
    assert ids.count("a00000000001") == 1 and ids.count("a00000000002_reply") == 1
    shared = [l for l in out.splitlines() if l.startswith("    = ")]
    assert shared and all("shared with tip" in l for l in shared)
    data = json.loads(_run(capsys, ["--state", str(fixture_state_ro), "why", "local_a1b2c3d4e5", "--json"])[1])
    tips = data["sessions"]["local_a1b2c3d4e5"]["tips"]
    # every tip is still there, each with its own summary line
    assert all(f"  tip {tip}" in out for tip in tips)


def test_cli_record_refusals_say_what_was_wrong_and_the_fix(fixture_state, capsys):
    code, _, err = _run(capsys, ["--state", str(fixture_state), "record", "update", "fc30e0e0", "--text",
                                 "Ada likes tea.[^e-bogus]"])
    assert code == 1
    assert "INVALID_ARGUMENT: memory_changes[0].content must be one final paragraph without Runtime IDs" in err  # code kept
    assert "it contains the citation [^e-bogus]" in err and "fix: remove [^e-bogus]" in err
    code, _, err = _run(capsys, ["--state", str(fixture_state), "record", "delete", "fa3c8017"])
    assert code == 1 and "INVALID_TOPIC_FORMAT: dangling block link: fa3c8017" in err
    assert "^fa3c8017 cannot be deleted: 1 record(s) link to it" in err and "fix: remove or retarget the #^fa3c8017" in err


def test_cli_edit_refusal_names_the_rule_and_the_fix(fixture_state, capsys, monkeypatch):
    code, _, err = _run(capsys, ["--state", str(fixture_state), "edit", "people/ada.md", "--from", "-"],
                        stdin="# People\n\nUncited prose here.\n", monkeypatch=monkeypatch)
    assert code == 1
    assert "rule: §3.3 uncited prose" in err and "fix: " in err
