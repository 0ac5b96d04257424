"""Bad input through the CLI: every failure is one clear line (file and line where one exists)
with a non-zero exit, never a traceback; text output never carries raw terminal controls;
reading never writes; a rejected write leaves every byte as it was; and no write silently
loses a file it did not mean to touch.

Self-contained cases build a small workspace with the real archive writer and transaction;
the matrix cases damage private copies of OpenProgram's fixture (``fixture_state``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from memory_tui.cli import main
from memory_tui.core.tx import api as tx
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records

# ------------------------------------------------------------------------------------ helpers

ESC = "\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07"  # clear screen + OSC 52 clipboard write
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def tree_bytes(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (files by content hash, symlinks by target, dirs by name)."""
    out: dict[str, str] = {}
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _records() -> list[SourceRecord]:
    return [
        SourceRecord("openprogram", "sess-bad", f"m{i:03d}", i + 1, "user", f"message {i}: detail {i}",
                     timestamp="2026-11-30T05:00:00+00:00")
        for i in range(6)
    ]


def _sid(n: int) -> str:
    return _records()[n].source_id


ADA = (f"# Ada\n\nAda drinks tea.[^e1]\n\n[^e1]: Time: `2026-11-02`; Sources: [tea]({_sid(1)})\n")
BOB = (f"# Bob\n\nBob walks daily.[^e1]\n\n[^e1]: Time: `2026-11-03`; Sources: [walk]({_sid(2)})\n")


@pytest.fixture
def ws(tmp_path) -> Path:
    """A small valid state dir: core, ada and bob, built through the real transaction."""
    state = tmp_path / "state"
    mem = state / "memory"
    (mem / "topics").mkdir(parents=True)
    (state / "sessions").mkdir()
    append_records(mem, _records())
    core = f"# Core\n\nThe user is Ada.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [name]({_sid(0)})\n"
    for rel, text in (("topics/core.md", core), ("topics/people/ada.md", ADA), ("topics/people/bob.md", BOB)):
        result = tx.staged_edit(state, rel, text, git_commit="off")
        assert result.ok, result
    return state


def _edited_ada(state: Path) -> Path:
    path = state.parent / "ada-edit.md"
    text = (state / "memory/topics/people/ada.md").read_text().replace("drinks tea", "drinks green tea")
    path.write_text(text)
    return path


# ------------------------------------------------- an unreadable topic is never deleted by an edit


def test_edit_elsewhere_refuses_and_keeps_an_undecodable_topic(ws, capsys):
    bob = ws / "memory/topics/people/bob.md"
    bob.write_bytes(bob.read_bytes().replace(b"walks", b"wa\xfflks"))
    before = tree_bytes(ws)
    code, out, err = run(capsys, "--state", str(ws), "edit", "people/ada.md", "--from", str(_edited_ada(ws)),
                         "--git-commit", "off")
    assert code == 1
    assert "topics/people/bob.md:3:" in err and "not valid UTF-8" in err
    assert tree_bytes(ws) == before  # bob.md is still there, byte for byte


def test_undecodable_topic_can_be_repaired_or_deleted_by_edit(ws, capsys):
    bob = ws / "memory/topics/people/bob.md"
    good = bob.read_text()
    bob.write_bytes(good.encode().replace(b"walks", b"wa\xfflks"))
    src = ws.parent / "bob.md"
    src.write_text(good.replace("walks daily", "walks every day"))
    code, out, err = run(capsys, "--state", str(ws), "edit", "people/bob.md", "--from", str(src), "--git-commit", "off")
    assert code == 0, err
    assert "walks every day" in bob.read_text()
    bob.write_bytes(b"\xff\xfe")
    code, out, err = run(capsys, "--state", str(ws), "edit", "people/bob.md", "--delete", "--git-commit", "off")
    assert code == 0, err
    assert not bob.exists()


# ------------------------------------- committed uncited prose is refused, never silently pruned


@pytest.mark.parametrize("argv", [["edit", "people/ada.md", "--from", "ADA"], ["views", "--rebuild"]])
def test_committed_uncited_topic_is_refused_not_deleted(ws, capsys, argv):
    notes = ws / "memory/topics/notes.md"
    notes.write_text("# Notes\n\nMy own notes, written by hand.\n")
    argv = [str(_edited_ada(ws)) if a == "ADA" else a for a in argv]
    before = tree_bytes(ws)
    code, out, err = run(capsys, "--state", str(ws), *argv, "--json")
    data = json.loads(out)
    assert code == 1 and data["ok"] is False
    err_obj = data.get("error", data)
    assert err_obj["path"] == "topics/notes.md" and err_obj["line"] == 3
    assert "memory block ID required" in err_obj["message"]
    assert tree_bytes(ws) == before
    # deleting it on purpose is still possible
    code, _, err = run(capsys, "--state", str(ws), "edit", "notes.md", "--delete", "--git-commit", "off")
    assert code == 0, err
    assert not notes.exists()


def test_committed_empty_section_is_still_pruned_with_a_note(ws, capsys):
    # headings and comments without records are pruned as OpenProgram prunes them (§3.9)
    ada = ws / "memory/topics/people/ada.md"
    ada.write_text(ada.read_text() + "\n## Empty\n\n<!-- nothing -->\n")
    code, out, err = run(capsys, "--state", str(ws), "views", "--rebuild")
    assert code == 0, err
    assert "## Empty" not in ada.read_text() and "note:" in out


# ------------------------------------------------------------- config.json that cannot be read


@pytest.mark.parametrize("data", [b'{"memory": "\xff"}', b"[" * 100_000], ids=["not-utf8", "too-deep"])
def test_unreadable_config_is_a_problem_not_a_traceback(ws, capsys, data):
    (ws / "config.json").write_bytes(data)
    before = tree_bytes(ws)
    for argv in (["status"], ["status", "--json"], ["topics"], ["why"]):
        code, out, err = run(capsys, "--state", str(ws), *argv)
        assert code == 0, err
        assert "Traceback" not in err and "internal error" not in err
    code, out, _ = run(capsys, "--state", str(ws), "status")
    assert "config.json:1: CORRUPT_FILE" in out
    assert tree_bytes(ws) == before


# ------------------------------------------------------- the CLI's last line of defence


def test_unexpected_exception_is_one_sanitised_line(ws, capsys, monkeypatch):
    import memory_tui.cli.topics as topics_cli

    def boom(args):
        raise RuntimeError("kaput \x1b]52;c;eA==\x07 here")

    monkeypatch.delenv("MEMORY_TUI_DEBUG", raising=False)
    monkeypatch.setattr(topics_cli, "cmd_topics", boom)
    code, out, err = run(capsys, "--state", str(ws), "topics")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "internal error: RuntimeError" in err and "kaput" in err
    assert not RAW_CONTROL.search(err.replace("\n", ""))


# ------------------------------------------------ views on a state with no memory workspace


@pytest.mark.parametrize("kind", ["absent", "file", "no-memory"])
@pytest.mark.parametrize("mode", ["--rebuild", "--check"])
def test_views_never_create_a_workspace(tmp_path, capsys, kind, mode):
    state = tmp_path / "state"
    if kind == "file":
        state.write_text("not a folder")
    elif kind == "no-memory":
        (state / "sessions").mkdir(parents=True)
    before = tree_bytes(tmp_path)
    code, out, err = run(capsys, "--state", str(state), "views", mode)
    assert code == 1
    assert "Traceback" not in err and "internal error" not in err
    assert "state directory not found" in err or "no memory workspace" in err
    assert tree_bytes(tmp_path) == before


# -------------------------------------------------------------- corrupt runtime.json is kept


@pytest.mark.parametrize("data", [b'{"creation_order": {"a": 1', b"[1, 2]"], ids=["invalid", "not-object"])
def test_corrupt_runtime_json_refuses_the_write_and_keeps_its_bytes(ws, capsys, data):
    rt = ws / "memory/.scriptorium/runtime.json"
    rt.write_bytes(data)
    before = tree_bytes(ws)
    code, out, err = run(capsys, "--state", str(ws), "edit", "people/ada.md", "--from", str(_edited_ada(ws)),
                         "--git-commit", "off", "--json")
    result = json.loads(out)
    assert code == 1 and result["code"] == "CORRUPT_FILE"
    assert result["path"] == ".scriptorium/runtime.json" and result["line"] == 1
    assert tree_bytes(ws) == before
    code, out, err = run(capsys, "--state", str(ws), "views", "--rebuild")
    assert code == 1 and ".scriptorium/runtime.json:1" in err
    assert tree_bytes(ws) == before
    rt.unlink()  # the way out the message names: remove it, and memory-tui rebuilds it
    code, out, err = run(capsys, "--state", str(ws), "views", "--rebuild")
    assert code == 0, err
    assert rt.is_file()


# ---------------------------------------------------------------------- topics/ is not a folder


def test_topics_that_is_a_file_is_not_replaced(ws, capsys):
    import shutil

    topics = ws / "memory/topics"
    shutil.rmtree(topics)
    topics.write_text("my precious notes\n")
    src = ws.parent / "ada.md"
    src.write_text(ADA)
    code, out, err = run(capsys, "--state", str(ws), "edit", "people/ada.md", "--from", str(src), "--git-commit", "off")
    assert code == 1 and "topics is not a directory" in err
    assert topics.read_text() == "my precious notes\n"


# ------------------------------------------------- symbolic links under topics/ are never written


def test_topic_symlinks_block_writes_and_survive(ws, capsys, tmp_path):
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "bob.md").write_text(BOB.replace("Bob walks", "Bob runs"))
    (outside / "dir/x.md").write_text(BOB)
    (ws / "memory/topics/people/linked.md").symlink_to(outside / "bob.md")
    (ws / "memory/topics/ext").symlink_to(outside / "dir")
    before, outside_before = tree_bytes(ws), tree_bytes(outside)
    for argv in (["edit", "people/ada.md", "--from", str(_edited_ada(ws)), "--git-commit", "off"],
                 ["views", "--rebuild"]):
        code, out, err = run(capsys, "--state", str(ws), *argv)
        assert code == 1
        assert "topics/ext: PATH_OUTSIDE_WORKSPACE" in err and "topics/people/linked.md: PATH_OUTSIDE_WORKSPACE" in err
        assert tree_bytes(ws) == before and tree_bytes(outside) == outside_before
    # editing the link itself is refused too (issue 14): the link is the owner's, never replaced
    (ws / "memory/topics/ext").unlink()
    src = tmp_path / "linked.md"
    src.write_text(BOB.replace("Bob walks daily", "Bob walks at dawn"))
    code, out, err = run(capsys, "--state", str(ws), "edit", "people/linked.md", "--from", str(src), "--git-commit", "off")
    assert code == 1 and "PATH_OUTSIDE_WORKSPACE" in err, err
    linked = ws / "memory/topics/people/linked.md"
    assert linked.is_symlink() and "at dawn" not in linked.read_text()
    assert tree_bytes(outside) == outside_before


# =========================================================================== the fixture matrix
#
# Each case damages a private copy of OpenProgram's own state dir. For every case: each read
# verb, text and --json, exits 0 or 1 with no traceback, prints no raw terminal control in text
# mode, and leaves every byte of the state dir as it was; ``expect`` (if any) must appear in
# the text output of `status`/`topics`/`why` (the file and line of the damage). Then a valid
# hand edit of another topic and `views --rebuild` either succeed without deleting any file
# they did not mean to touch, or are refused (naming ``refuse`` if given) with nothing changed.

SID = "local_0c0c0c0c0c"
KYOTO = "memory/topics/projects/kyoto-trip.md"
NODE = f"sessions/{SID}/history/0003-u-c00000000002.json"
ARCHIVE = "memory/sources/openprogram/_v2/local_a1b2c3d4e5.md"


def _bytes(rel: str, f):
    def damage(s: Path) -> None:
        p = s / rel
        p.write_bytes(f(p.read_bytes()))
    return damage


def _put(rel: str, data: bytes):
    def damage(s: Path) -> None:
        (s / rel).write_bytes(data)
    return damage


def _line3(f):
    def g(b: bytes) -> bytes:
        lines = b.split(b"\n")
        lines[2] = f(lines[2])
        return b"\n".join(lines)
    return _bytes(KYOTO, g)


def _node_escape(s: Path) -> None:
    p = s / NODE
    d = json.loads(p.read_text())
    d["output"] = "Read the " + ESC + " big log file."
    d["metadata"].pop("memory_written_scriptorium", None)
    p.write_text(json.dumps(d))


def _node_dir(s: Path) -> None:
    (s / NODE).unlink()
    (s / NODE).mkdir()


def _symlink_out(s: Path) -> None:
    outside = s.parent / "outside.md"
    outside.write_text("# Outside\n\nA file outside the workspace.\n")
    (s / "memory/topics/evil.md").symlink_to(outside)


def _escape_session_dir(s: Path) -> None:
    import shutil

    shutil.copytree(s / f"sessions/{SID}", s / "sessions/local_\x1b]52;c;eA==\x07x")


def _escape_topic_name(s: Path) -> None:
    (s / "memory/topics/ev\x1b[2Jil.md").write_text("# E\n\nUncited.\n")


def _rm(rel: str):
    def damage(s: Path) -> None:
        import shutil

        p = s / rel
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return damage


K3 = "topics/projects/kyoto-trip.md:3"
MATRIX = {
    # name: (damage, expect in read output, refuse: text the edit's rejection must hold, or "ok")
    "bad-footnote-ref": (_line3(lambda l: l.replace(b"[^e-d6cb4b50f2]", b"[^e-0000000000]")), K3, K3),
    "uncited-paragraph": (_bytes(KYOTO, lambda b: b + b"\nNo citation here.\n"), "kyoto-trip.md:19", "kyoto-trip.md:19"),
    "invalid-utf8": (_line3(lambda l: l[:10] + b"\xff\xfe" + l[10:]), K3, K3),
    "nul-byte": (_line3(lambda l: l[:10] + b"\x00" + l[10:]), None, "ok"),
    "5mb-line": (_bytes(KYOTO, lambda b: b + b"\n" + b"x" * (5 << 20) + b"\n"), "kyoto-trip.md:19", "kyoto-trip.md:19"),
    "escape-in-record": (_line3(lambda l: l[:10] + ESC.encode() + l[10:]), None, "ok"),
    "escape-in-node": (_node_escape, None, "ok"),
    "escape-in-session-dir-name": (_escape_session_dir, None, "ok"),
    "escape-in-topic-name": (_escape_topic_name, "il.md:3", "il.md:3"),
    "truncated-archive": (_bytes(ARCHIVE, lambda b: b[: b.rfind(b"<!-- record-lines:")]),
                          "sources/openprogram/_v2/local_a1b2c3d4e5.md:", "invalid source target"),
    "config-json": (_put("config.json", b'{"oops": '), "config.json:1", "ok"),
    "runtime-json": (_put("memory/.scriptorium/runtime.json", b'{"oops": '), ".scriptorium/runtime.json:1",
                     ".scriptorium/runtime.json:1"),
    "writer-status-json": (_put("memory/.scriptorium/writer-status.json", b'{"oops": '), "writer-status.json:1", "ok"),
    "session-end-json": (_put("memory/.scriptorium/session-end.json", b'{"oops": '), "session-end.json:1", "ok"),
    "agent-history-line": (_bytes("memory/.scriptorium/agent-history.jsonl", lambda b: b"{broken\n" + b),
                           "agent-history.jsonl:1", "ok"),
    "index-json": (_put("sessions/index.json", b'{"oops": '), "sessions/index.json:1", "ok"),
    "meta-json": (_put(f"sessions/{SID}/meta.json", b'{"oops": '), f"sessions/{SID}/meta.json:1", "ok"),
    "node-json": (_put(NODE, b'{"oops": '), f"{NODE}:1", "ok"),
    "node-is-dir": (_node_dir, NODE, "ok"),
    "deep-node-json": (_put(NODE, b"[" * 100_000), NODE, "ok"),
    "node-not-utf8": (_put(NODE, b'{"a": "\xff"}'), NODE, "ok"),
    "symlink-outside": (_symlink_out, "topics/evil.md: PATH_OUTSIDE_WORKSPACE: symbolic link leads outside", "topics/evil.md: PATH_OUTSIDE_WORKSPACE"),
    "memory-missing": (_rm("memory"), None, None),
    "sessions-missing": (_rm("sessions"), None, "ok"),
}


def _text_outputs(capsys, state: Path, show: str) -> tuple[str, list[str]]:
    texts, failures = [], []
    for argv in (["status"], ["why"], ["topics"], ["show", show], ["views", "--check"]):
        for as_json in (False, True):
            code, out, err = run(capsys, "--state", str(state), *argv, *(["--json"] if as_json else []))
            label = " ".join(argv) + (" --json" if as_json else "")
            if code not in (0, 1):
                failures.append(f"{label}: exit {code}")
            if "Traceback" in err or "internal error" in err:
                failures.append(f"{label}: {err.strip().splitlines()[-1]}")
            if as_json:
                if out.strip():
                    json.loads(out)  # always one JSON document when anything is printed
            else:
                if RAW_CONTROL.search((out + err).replace("\n", "").replace("\t", "")):
                    failures.append(f"{label}: raw control character in text output")
                texts.append(out + err)
    return "\n".join(texts), failures


@pytest.mark.parametrize("case", list(MATRIX))
def test_damaged_fixture_reads_cleanly_and_writes_safely(fixture_state, capsys, case, tmp_path):
    damage, expect, refuse = MATRIX[case]
    damage(fixture_state)
    before = tree_bytes(fixture_state)
    text, failures = _text_outputs(capsys, fixture_state, "projects/kyoto-trip.md")
    assert not failures
    assert tree_bytes(fixture_state) == before, "a read verb wrote"
    if expect is not None:
        assert expect in text

    if refuse is None:
        return
    src = tmp_path / "ada.md"
    src.write_text((fixture_state / "memory/topics/people/ada.md").read_text().replace("short answers", "brief answers"))
    for argv in (["edit", "people/ada.md", "--from", str(src), "--git-commit", "off"], ["views", "--rebuild"]):
        before = tree_bytes(fixture_state)
        code, out, err = run(capsys, "--state", str(fixture_state), *argv)
        assert "Traceback" not in err and "internal error" not in err
        assert not RAW_CONTROL.search((out + err).replace("\n", ""))
        after = tree_bytes(fixture_state)
        if code != 0:
            assert after == before, f"{argv[0]} was refused but changed files"
            if refuse != "ok":
                assert refuse in err
        else:
            assert refuse == "ok", f"{argv[0]} should have been refused: {out}"
            lost = [p for p in before if p not in after and not p.startswith("memory/timeline/")]
            assert lost == [], f"{argv[0]} deleted {lost}"


def test_write_verb_output_is_sanitised(fixture_state, capsys):
    _escape_session_dir(fixture_state)
    code, out, err = run(capsys, "--state", str(fixture_state), "write", "--force")
    assert "Traceback" not in err and "internal error" not in err
    assert not RAW_CONTROL.search((out + err).replace("\n", ""))
    assert "local_x" in out + err
