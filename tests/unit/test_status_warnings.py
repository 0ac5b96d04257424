"""``status`` tells the owner what the app tells them: special-token text in topic files
(pitfall 15) and unknown ``[keymap]`` binding ids, each with file, key and line."""

from __future__ import annotations

import json

import pytest

from memory_tui.cli import main
from memory_tui.demo import build_demo

EOT = "<|endoftext|>"


@pytest.fixture()
def demo_state(tmp_path, monkeypatch):
    state = tmp_path / "state"
    build_demo(state)
    monkeypatch.setenv("MEMORY_TUI_CONFIG", str(tmp_path / "absent.toml"))
    return state


def _insert(path, needle: str, token: str) -> int:
    """Put ``token`` into the first line holding ``needle``; that line's number."""
    lines = path.read_text(encoding="utf-8").split("\n")
    n = next(i for i, line in enumerate(lines) if needle in line)
    lines[n] = lines[n].replace(needle, f"{needle} {token}", 1)
    path.write_text("\n".join(lines), encoding="utf-8")
    return n + 1


def _status_json(state, capsys) -> dict:
    assert main(["--state", str(state), "status", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_status_warns_of_special_token_text_in_topics(demo_state, capsys):
    before = [p for p in _status_json(demo_state, capsys)["problems"] if p["code"] == "SPECIAL_TOKEN_TEXT"]
    assert before == []
    topics = demo_state / "memory" / "topics"
    core_line = _insert(topics / "core.md", "short first", EOT)
    other = sorted((topics / "conversations").glob("*.md"))[0]
    other_line = _insert(other, " said: “", "<|endofprompt|> and " + EOT)
    found = {(p["path"], p["line"]): p for p in _status_json(demo_state, capsys)["problems"]
             if p["code"] == "SPECIAL_TOKEN_TEXT"}
    rel_other = f"topics/conversations/{other.name}"
    assert set(found) == {("topics/core.md", core_line), (rel_other, other_line)}
    core = found[("topics/core.md", core_line)]
    assert core["details"]["tokens"] == [EOT] and core["details"]["severity"] == "warning"
    assert core["details"]["blocks_openprogram"] is True and "every OpenProgram memory transaction" in core["message"]
    line_text = (topics / "core.md").read_text(encoding="utf-8").split("\n")[core_line - 1]
    assert core["column"] == line_text.index(EOT) + 1
    plain = found[(rel_other, other_line)]
    assert plain["details"]["tokens"] == ["<|endofprompt|>", EOT]  # in the order they stand
    assert plain["details"]["blocks_openprogram"] is False
    # the text form names file and line too
    assert main(["--state", str(demo_state), "status"]) == 0
    out = capsys.readouterr().out
    assert f"topics/core.md:{core_line}: SPECIAL_TOKEN_TEXT: special-token text {EOT}" in out
    assert f"{rel_other}:{other_line}: SPECIAL_TOKEN_TEXT" in out
