"""``status`` tells the owner what the app tells them: special-token text in topic files
(pitfall 15) and unknown ``[keymap]`` binding ids, each with file, key and line."""

from __future__ import annotations

import json
import time

import pytest

from memory_tui.cli import main
from memory_tui.demo import build_demo
from memory_tui.pipeline.settings import load_config

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


def test_status_warns_of_special_token_text_in_topics_core_md_only(demo_state, capsys):
    """OpenProgram counts topics/core.md on every install (its counter raises on the text);
    another topic with the same text it accepts and never counts (pitfall 15): no warning there."""
    before = [p for p in _status_json(demo_state, capsys)["problems"] if p["code"] == "SPECIAL_TOKEN_TEXT"]
    assert before == []
    topics = demo_state / "memory" / "topics"
    core_line = _insert(topics / "core.md", "short first", "<|endofprompt|> and " + EOT)
    other = sorted((topics / "conversations").glob("*.md"))[0]
    _insert(other, " said: “", "<|endofprompt|> and " + EOT)
    found = {(p["path"], p["line"]): p for p in _status_json(demo_state, capsys)["problems"]
             if p["code"] == "SPECIAL_TOKEN_TEXT"}
    rel_other = f"topics/conversations/{other.name}"
    assert set(found) == {("topics/core.md", core_line)}  # the other topic holds the same text
    core = found[("topics/core.md", core_line)]
    assert core["details"]["tokens"] == ["<|endofprompt|>", EOT]  # in the order they stand
    assert core["details"]["severity"] == "warning"
    assert core["details"]["blocks_openprogram"] is True and "every OpenProgram memory transaction" in core["message"]
    line_text = (topics / "core.md").read_text(encoding="utf-8").split("\n")[core_line - 1]
    assert core["column"] == line_text.index("<|endofprompt|>") + 1
    # the text form names file and line too, and says nothing of the other topic
    assert main(["--state", str(demo_state), "status"]) == 0
    out = capsys.readouterr().out
    assert f"topics/core.md:{core_line}: SPECIAL_TOKEN_TEXT: special-token text <|endofprompt|>, {EOT}" in out
    assert f"{rel_other}:" not in out


def test_status_reports_unknown_keymap_ids_as_the_app_does(demo_state, tmp_path, monkeypatch, capsys):
    from memory_tui.tui.app import load_app_settings

    cfg = tmp_path / "config.toml"
    cfg.write_text('theme = "nord"\n\n[keymap]\n"view.core" = "c"\n"view.nope" = "f9"\n')
    monkeypatch.setenv("MEMORY_TUI_CONFIG", str(cfg))
    (app_problem,) = load_app_settings().problems
    mine = [p for p in _status_json(demo_state, capsys)["problems"] if p["code"] == "INVALID_SETTINGS"]
    assert mine == [app_problem.to_json()]
    assert (mine[0]["path"], mine[0]["line"], mine[0]["details"]["key"]) == (str(cfg), 5, "keymap.view.nope")
    assert "unknown binding id 'view.nope'" in mine[0]["message"]
    assert main(["--state", str(demo_state), "status"]) == 0
    assert f"{cfg}:5: INVALID_SETTINGS: [keymap] unknown binding id 'view.nope'" in capsys.readouterr().out
    cfg.write_text('[keymap]\n"view.core" = "c"\n')  # every id known: nothing to say
    assert [p for p in _status_json(demo_state, capsys)["problems"] if p["code"] == "INVALID_SETTINGS"] == []


def test_key_lines_follow_dotted_keys_and_sub_tables(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        'theme = "nord"\n'
        'writer.max_tokens = -5\n'         # 2: dotted keys at the top level
        'keymap."view.nope" = "f9"\n'      # 3
        'keymap . "view.core" = "c"\n'
    )
    s = load_config(cfg, binding_ids={"view.core"})
    assert {p.details.get("key"): p.line for p in s.problems} == {"writer.max_tokens": 2, "keymap.view.nope": 3}
    assert s.keymap == {"view.core": "c"}
    cfg.write_text(
        '[keymap]\n'
        '"view.core" = "c"\n'
        'app.filter = "f"\n'                # 3: dots unquoted: a table "app", not the id "app.filter"
        '\n'
        '[keymap."app.quit"]\n'             # 5: a sub-table where a key was meant
        'key = "q"\n'
        '[ keymap . "view.gone" ]\n'        # 7
        'x = 1\n'
        '[writer]\n'
        'name = "extractive"\n'
        '[writer.extra]\n'                  # a sub-table of [writer]: its keys are not [writer]'s
        'max_tokens = 1\n'
    )
    s = load_config(cfg, binding_ids={"view.core", "app.quit"})
    assert {p.details.get("key"): p.line for p in s.problems} == {
        "keymap.app": 3, "keymap.app.quit": 5, "keymap.view.gone": 7, "writer.extra": 11}
    assert s.keymap == {"view.core": "c"}


def test_a_refresh_keeps_warnings_of_unchanged_topics_and_rescans_changed_ones(demo_state):
    from memory_tui.core.store.workspace import open_state, refresh

    def warned(view):
        return sorted((p.path, p.line) for p in view.problems if p.code == "SPECIAL_TOKEN_TEXT")

    topics = demo_state / "memory" / "topics"
    core = topics / "core.md"
    core_line = _insert(core, "short first", EOT)
    # out of the racy window before it is read: a stamp taken within one clock tick of the
    # write proves nothing, and the refresh would rightly parse core.md again
    time.sleep(0.15)
    view = open_state(demo_state)
    assert warned(view) == [("topics/core.md", core_line)]
    other = sorted((topics / "conversations").glob("*.md"))[0]
    _insert(other, " said: “", EOT)  # only this topic changes; it is never warned of
    before = view
    view = refresh(view)
    assert view.tree.topic("core.md") is before.tree.topic("core.md")  # so its warning is the kept one
    assert warned(view) == [("topics/core.md", core_line)]
    lines = core.read_text(encoding="utf-8").split("\n")
    second = next(i for i, line in enumerate(lines) if i + 1 > core_line and "said" in line) + 1
    lines[second - 1] += f" {EOT}"  # a second line of the core: the changed core is rescanned
    core.write_text("\n".join(lines), encoding="utf-8")
    view = refresh(view)
    assert warned(view) == sorted([("topics/core.md", core_line), ("topics/core.md", second)])
    core.write_text(core.read_text(encoding="utf-8").replace(f" {EOT}", ""), encoding="utf-8")
    view = refresh(view)
    assert warned(view) == []
