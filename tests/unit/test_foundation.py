"""Tokens, config, paths and text hygiene: the small modules everything else stands on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory_tui.core.format import config as cfg
from memory_tui.core.format.errors import MemoryError, classify_write_failure
from memory_tui.core.format.paths import Layout, check_writable, discover_state_dir, display_path, is_internal_top
from memory_tui.core.format.text import header_part, sanitize
from memory_tui.core.format.tokens import O200kCounter, o200k_encoding


def test_o200k_counts_match_known_values():
    counter = O200kCounter()
    assert counter.count("") == 0
    assert counter.count("hello world") == 2
    # The o200k_base ids themselves (cl100k_base gives [15339, 1917] and 7 tokens for the
    # sentence): the real o200k table is in use, not a look-alike.
    assert o200k_encoding().encode("hello world") == [24912, 2375]
    assert o200k_encoding().encode("The owner prefers concise answers.") == [976, 8667, 99325, 82463, 14716, 13]
    assert o200k_encoding().n_vocab == 200019


def test_special_token_text_counts_as_ordinary_text():
    counter = O200kCounter()
    text = "please ignore <|endoftext|> here"
    assert counter.count(text) > counter.count("please ignore  here")
    assert counter.special_tokens_in(text) == ["<|endoftext|>"]
    assert counter.special_tokens_in("no specials") == []


def test_tokenizer_builds_without_network(tmp_path):
    # A fresh interpreter with every proxy pointing nowhere and an empty tiktoken cache still counts.
    code = "from memory_tui.core.format.tokens import O200kCounter; print(O200kCounter().count('hello world'))"
    env = {"PATH": "/usr/bin:/bin", "TIKTOKEN_CACHE_DIR": str(tmp_path), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "2"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "data, field, value",
    [
        ({}, "trigger_tokens", 16000),
        ({"memory": {"writer": {"trigger_tokens": 8000}}}, "trigger_tokens", 8000),
        ({"memory": {"writer": {"trigger_tokens": "32000"}}}, "trigger_tokens", 32000),
        ({"memory": {"writer": {"trigger_tokens": 9000}}}, "trigger_tokens", 16000),
        ({"memory": {"writer": {"trigger_tokens": True}}}, "trigger_tokens", 16000),
        ({"memory": {"writer": {"enabled": "false"}}}, "writer_enabled", True),
        ({"memory": {"writer": {"enabled": False}}}, "writer_enabled", False),
        ({"memory": {"recent": {"limit": 0}}}, "recent_limit", 50),
        ({"memory": {"recent": {"limit": 500}}}, "recent_limit", 500),
        ({"memory": {"retrieval": {"top_k": 11}}}, "retrieval_top_k", 5),
        ({"memory": {"core": {"inject": False}}}, "core_inject", False),
        ({"memory": {"backend": "none"}}, "enabled", False),
        ({"memory": "nonsense"}, "backend", "local"),
    ],
)
def test_config_invalid_means_default(data, field, value):
    assert getattr(cfg.parse_memory_config(data), field) == value


def test_corrupt_config_is_reported_not_fatal(tmp_path):
    (tmp_path / "config.json").write_text('{"memory": {\n  "backend": }\n')
    conf = cfg.load_memory_config(tmp_path)
    assert conf.trigger_tokens == 16000
    assert conf.problems and conf.problems[0].path == "config.json" and conf.problems[0].line == 2


def test_state_discovery_order(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert discover_state_dir(None, env=env) == tmp_path / ".openprogram"
    assert discover_state_dir(None, env={**env, "OPENPROGRAM_PROFILE": "work"}) == tmp_path / ".openprogram-work"
    assert discover_state_dir(None, env={**env, "OPENPROGRAM_PROFILE": "  "}) == tmp_path / ".openprogram"
    assert discover_state_dir(tmp_path / "x", env={**env, "OPENPROGRAM_PROFILE": "work"}) == tmp_path / "x"


def test_display_path_is_home_relative(tmp_path):
    assert display_path(tmp_path / ".openprogram", home=tmp_path) == "~/.openprogram"
    assert display_path(Path("/elsewhere/x"), home=tmp_path) == "/elsewhere/x"


@pytest.mark.parametrize(
    "path, code",
    [
        ("/etc/passwd", "PATH_OUTSIDE_WORKSPACE"),
        ("../x.md", "PATH_OUTSIDE_WORKSPACE"),
        ("topics/../../x.md", "PATH_OUTSIDE_WORKSPACE"),
        ("topics/a.txt", "READ_ONLY_PATH"),
        ("core.md", "READ_ONLY_PATH"),
        ("sources/openprogram/_v2/x.md", "READ_ONLY_PATH"),
        ("topics/.hidden/x.md", "READ_ONLY_PATH"),
        ("Topics/a.md", "READ_ONLY_PATH"),
    ],
)
def test_one_writable_path_rule(path, code):
    with pytest.raises(MemoryError) as err:
        check_writable(path)
    assert err.value.code == code


def test_writable_paths_normalise():
    assert check_writable("topics/people/ada.md") == "topics/people/ada.md"
    assert check_writable("topics/./people//ada.md") == "topics/people/ada.md"


def test_internal_names_and_legacy_runtime_dir(tmp_path):
    assert is_internal_top(".git") and is_internal_top(".scriptorium") and is_internal_top(".scriptorium-bm25.json")
    assert is_internal_top(".nativemem-block-backup") and not is_internal_top("topics")
    assert Layout(tmp_path).runtime_name == ".scriptorium"
    (tmp_path / ".nativemem").mkdir()
    assert Layout(tmp_path).runtime_name == ".nativemem"


def test_sanitize_strips_terminal_escapes():
    nasty = "ok\x1b[2J\x1b]0;pwned\x07 done\x1b[31mred\x1b[0m\x07\x00\r\nnext\x9b1m"
    assert sanitize(nasty) == "ok donered\nnext"
    assert sanitize("tab\tand\nnewline") == "tab\tand\nnewline"


def test_header_part_normalisation():
    assert header_part("  Ada\n  [x]: y ") == "Ada (x)\uff1a y"
    assert header_part("a" * 70) == "a" * 64 + "\u2026"
    assert header_part(None) == ""


def test_write_failure_classification():
    assert classify_write_failure(MemoryError("CONCURRENT_UPDATE", "busy")) == ("CONCURRENT_UPDATE", True)
    assert classify_write_failure(MemoryError("GIT_UNAVAILABLE", "no git")) == ("TRANSACTION_FAILURE_UNKNOWN", False)
    assert classify_write_failure(ValueError("x")) == ("WRITER_PRECONDITION_FAILED", False)
    assert classify_write_failure(RuntimeError("x")) == ("WRITER_FAILURE_UNKNOWN", False)


def test_error_json_shape():
    err = MemoryError("INVALID_TOPIC_FORMAT", "undefined footnote: e1", path="topics/a.md", line=3, column=5)
    assert err.to_json() == {
        "ok": False,
        "error": {"code": "INVALID_TOPIC_FORMAT", "message": "undefined footnote: e1", "path": "topics/a.md", "line": 3, "column": 5},
    }
    assert str(err) == "topics/a.md:3:5: INVALID_TOPIC_FORMAT: undefined footnote: e1"
    json.dumps(err.to_json())
