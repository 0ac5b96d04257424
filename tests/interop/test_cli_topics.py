"""`memory-tui topics` and `memory-tui show` against OpenProgram's fixture."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("memory_tui.core.format.sources")

from memory_tui.cli import main  # noqa: E402


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_topics_json_matches_expected(capsys, fixture_state_ro, expected):
    code, out, err = run(capsys, "--state", str(fixture_state_ro), "topics", "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert data["revision"] == expected["revision"]
    assert [t["path"] for t in data["topics"]] == [t["path"] for t in expected["topics"]]
    assert [t["records"] for t in data["topics"]] == [len(t["block_ids"]) for t in expected["topics"]]
    assert all(t["tokens"] > 0 and t["problems"] == [] for t in data["topics"])


def test_topics_text(capsys, fixture_state_ro):
    code, out, _ = run(capsys, "topics", "--state", str(fixture_state_ro))
    assert code == 0
    assert "topics/people/ada.md" in out and "31 record(s)" in out


def test_show_json_resolves_citations(capsys, fixture_state_ro, expected):
    code, out, _ = run(capsys, "--state", str(fixture_state_ro), "--json", "show", "people/ada.md")
    assert code == 0
    data = json.loads(out)
    (rec,) = data["records"]
    block = expected["blocks"]["fc30e0e0"]
    assert rec["memory_id"] == "fc30e0e0"
    assert rec["headings"] == block["headings"] and rec["when"] == block["when"]
    assert rec["relation_targets"] == block["relation_targets"]
    (cit,) = rec["citations"]
    assert cit["source_id"] == block["source_refs"][0]
    assert cit["trust"] == "trusted"
    assert cit["source"]["speaker"] and cit["source"]["text"].startswith("Hi, I'm Ada")
    assert cit["source"]["path"] == "sources/openprogram/_v2/local_a1b2c3d4e5.md"


def test_show_core_marks_budget_status(capsys, fixture_state_ro, expected):
    code, out, _ = run(capsys, "--state", str(fixture_state_ro), "show", "topics/core.md", "--json")
    assert code == 0
    recs = json.loads(out)["records"]
    omitted = [r["memory_id"] for r in recs if r["core"] == "omitted"]
    assert omitted == expected["core"]["omitted_block_ids"]


def test_show_accepts_path_without_extension(capsys, fixture_state_ro):
    code, out, _ = run(capsys, "--state", str(fixture_state_ro), "show", "projects/kyoto-trip")
    assert code == 0 and "^fa3c8017" in out


@pytest.mark.parametrize("verb", [["topics"], ["show", "people/ada.md"]])
def test_missing_empty_and_malformed_state_dirs(capsys, tmp_path, verb):
    code, out, err = run(capsys, "--state", str(tmp_path / "absent"), *verb)
    assert code != 0 and out == "" and len(err.strip().splitlines()) == 1 and "not found" in err
    code, out, err = run(capsys, "--state", str(tmp_path), *verb)  # empty: no memory/
    assert code != 0 and len(err.strip().splitlines()) == 1 and "no memory workspace" in err
    afile = tmp_path / "file"
    afile.write_text("x")
    code, out, err = run(capsys, "--state", str(afile), *verb)
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_show_unknown_topic(capsys, fixture_state_ro):
    code, out, err = run(capsys, "--state", str(fixture_state_ro), "show", "nope.md")
    assert code == 1 and "no topic file topics/nope.md" in err


def test_malformed_topic_reported_with_line(capsys, fixture_state):
    bad = fixture_state / "memory" / "topics" / "bad.md"
    bad.write_text("# Bad\n\nUncited prose.\n", encoding="utf-8")
    (fixture_state / "memory" / "topics" / "bin.md").write_bytes(b"# x\n\xff\xfe\n")
    code, out, _ = run(capsys, "--state", str(fixture_state), "topics", "--json")
    assert code == 0
    rows = {t["path"]: t for t in json.loads(out)["topics"]}
    (p,) = rows["topics/bad.md"]["problems"]
    assert p["code"] == "INVALID_TOPIC_FORMAT" and p["line"] == 3
    assert rows["topics/bin.md"]["problems"][0]["line"] == 2
    code, out, _ = run(capsys, "--state", str(fixture_state), "topics")
    assert "topics/bad.md:3: INVALID_TOPIC_FORMAT" in out
    code, out, err = run(capsys, "--state", str(fixture_state), "show", "bin.md")
    assert code == 1 and "topics/bin.md:2" in err and len(err.strip().splitlines()) == 1


def test_escape_sequences_are_stripped(capsys, fixture_state):
    ada = fixture_state / "memory" / "topics" / "people" / "ada.md"
    ada.write_text(ada.read_text(encoding="utf-8").replace("wants short", "wants \x1b[31mshort"), encoding="utf-8")
    code, out, _ = run(capsys, "--state", str(fixture_state), "show", "people/ada.md")
    assert code == 0 and "\x1b" not in out and "wants short" in out
