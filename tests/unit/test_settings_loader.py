"""One settings loader (issue 8 item 4): one path rule, every bad value a located problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_tui.core.format.config import load_memory_config
from memory_tui.core.format.errors import MemoryError
from memory_tui.demo import build_demo
from memory_tui.pipeline.settings import config_path, load_config, load_settings


def test_one_path_rule():
    assert config_path({"MEMORY_TUI_CONFIG": "/x/my.toml", "XDG_CONFIG_HOME": "/y"}) == Path("/x/my.toml")
    assert config_path({"XDG_CONFIG_HOME": "/y", "HOME": "/h"}) == Path("/y/memory-tui/config.toml")
    assert config_path({"HOME": "/h"}) == Path("/h/.config/memory-tui/config.toml")
    assert load_config(env={"MEMORY_TUI_CONFIG": "/nonexistent/c.toml"}).problems == ()


def _by_key(settings):
    return {p.details.get("key"): p for p in settings.problems}


def test_each_bad_value_names_file_key_and_line_and_falls_back(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        'theme = 7\n'
        '\n'
        '[keymap]\n'
        '"view.core" = "f4"\n'
        '"view.nope" = "f9"\n'
        '"app.quit" = 3\n'
        '\n'
        '[writer]\n'
        'name = "extractive"\n'
        'max_tokens = -5\n'
    )
    s = load_config(cfg, binding_ids={"view.core", "app.quit"})
    probs = _by_key(s)
    assert set(probs) == {"theme", "keymap.view.nope", "keymap.app.quit", "writer.max_tokens"}
    assert {k: p.line for k, p in probs.items()} == {
        "theme": 1, "keymap.view.nope": 5, "keymap.app.quit": 6, "writer.max_tokens": 10}
    assert all(p.path == str(cfg) and p.code == "INVALID_SETTINGS" for p in s.problems)
    # the good values apply; the bad ones are defaults, and said so
    assert s.keymap == {"view.core": "f4"} and s.theme is None
    assert s.writer.max_tokens == 4096 and "default" in probs["writer.max_tokens"].message
    # the engine does not know the app's ids: without them an unknown id is not judged
    assert "keymap.view.nope" not in _by_key(load_config(cfg))


def test_syntax_error_has_its_line(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('theme = "nord"\n[keymap\n')
    (p,) = load_config(cfg).problems
    assert (p.path, p.line) == (str(cfg), 2)


def test_cli_jobs_refuse_a_bad_writer_with_file_key_line(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[writer]\n\n  timeout = "soon"\n')
    with pytest.raises(MemoryError) as exc:
        load_settings(cfg)
    assert (exc.value.path, exc.value.line, exc.value.details["key"]) == (str(cfg), 3, "writer.timeout")


def test_json_settings_next_to_a_missing_toml(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"keymap": {"app.quit": ["q", "ctrl+q"]}, "theme": "nord"}))
    s = load_config(tmp_path / "config.toml")
    assert s.keymap == {"app.quit": "q,ctrl+q"} and s.theme == "nord" and s.path == tmp_path / "config.json"


def test_invalid_config_json_values_default_as_openprogram_does_and_say_so(tmp_path):
    (tmp_path / "config.json").write_text(
        '{\n  "memory": {\n    "writer": {\n      "trigger_tokens": "lots",\n      "enabled": "yes"\n    },\n'
        '    "retrieval": {"top_k": 99}\n  }\n}\n')
    cfg = load_memory_config(tmp_path)
    assert (cfg.trigger_tokens, cfg.writer_enabled, cfg.retrieval_top_k) == (16000, True, 5)
    probs = {p.details["key"]: p for p in cfg.problems}
    assert {k: p.line for k, p in probs.items()} == {
        "memory.writer.trigger_tokens": 4, "memory.writer.enabled": 5, "memory.retrieval.top_k": 7}
    assert all(p.path == "config.json" and p.code == "INVALID_CONFIG" for p in cfg.problems)
    assert '"lots"' in probs["memory.writer.trigger_tokens"].message


def test_valid_config_json_values_are_no_problem(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"memory": {"writer": {"trigger_tokens": "8000", "enabled": False}}}))
    cfg = load_memory_config(tmp_path)
    assert cfg.problems == () and cfg.trigger_tokens == 8000 and cfg.writer_enabled is False


def test_status_tells_the_owner_about_both_files(tmp_path, monkeypatch, capsys):
    from memory_tui.cli import main

    state = tmp_path / "state"
    build_demo(state)
    (state / "config.json").write_text('{"memory": {"writer": {\n"trigger_tokens": "lots"}}}\n')
    cfg = tmp_path / "config.toml"
    cfg.write_text('[writer]\nname = "telepathy"\n')
    monkeypatch.setenv("MEMORY_TUI_CONFIG", str(cfg))
    assert main(["--state", str(state), "status"]) == 0
    out = capsys.readouterr().out
    assert "config.json:2: INVALID_CONFIG: memory.writer.trigger_tokens" in out
    assert f"{cfg}:2: INVALID_SETTINGS: [writer] name" in out
    assert main(["--state", str(state), "status", "--json"]) == 0
    codes = {(p["code"], p.get("line")) for p in json.loads(capsys.readouterr().out)["problems"]}
    assert {("INVALID_CONFIG", 2), ("INVALID_SETTINGS", 2)} <= codes


def test_a_bad_value_is_found_past_multi_line_strings_that_look_like_keys(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[writer]\n'
        'name = "extractive"\n'
        'model = """\n'
        'max_tokens = 1\n'           # content of the string, not a key
        '[writer]\n'
        '"""\n'
        "api_key_env = '''\n"
        'max_tokens = 2 \'\'\' # "\n'  # closes on this line; the text after it is a comment
        'topic = "topics/#x\\" \'\'\'.md"\n'  # quotes inside a one-line string open nothing
        'max_tokens = -5\n'
    )
    (p,) = load_config(cfg).problems
    assert (p.details.get("key"), p.line) == ("writer.max_tokens", 10)
