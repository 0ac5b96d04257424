"""The test switches: one name for the derivation mode, read once, refused when wrong."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memory_tui.core import switches
from memory_tui.core.switches import SwitchError, Switches

from switching import set_derive


@pytest.mark.parametrize("value, want", [(None, "incremental"), ("", "incremental"), ("full", "full"),
                                         (" Check ", "check"), ("incremental", "incremental")])
def test_the_derive_switch_reads_its_three_values(value, want):
    env = {} if value is None else {switches.DERIVE_ENV: value}
    assert switches.from_environ(env).derive == want


def test_a_bad_value_names_the_variable_and_the_values():
    with pytest.raises(SwitchError) as err:
        switches.from_environ({switches.DERIVE_ENV: "sideways"})
    assert str(err.value) == "MEMORY_TUI_TEST_DERIVE must be one of incremental, full, check, not 'sideways'"
    with pytest.raises(SwitchError, match="MEMORY_TUI_TEST_CRASH_AT must be a crash point"):
        switches.from_environ({switches.CRASH_ENV: "soon"})
    with pytest.raises(SwitchError, match="MEMORY_TUI_TEST_CRASH_AT"):
        switches.from_environ({switches.CRASH_ENV: "0"})
    assert switches.from_environ({switches.CRASH_ENV: "3"}).crash_at == 3
    with pytest.raises(SwitchError):
        Switches("sideways")


@pytest.mark.parametrize("old", sorted(switches.RETIRED))
def test_a_retired_name_left_set_is_refused_naming_its_replacement(old):
    with pytest.raises(SwitchError) as err:
        switches.from_environ({old: "full"})
    assert old in str(err.value) and switches.RETIRED[old] in str(err.value)


def test_the_writer_protocol_names_are_not_switches():
    """What a command writer is handed (the stage path among them) never reads as a switch."""
    env = {"MEMORY_TUI_STAGE": "/tmp/x/.scriptorium-stage/stage-1", "MEMORY_TUI_STAGE_KIND": "write",
           "MEMORY_TUI_ALLOWED_REFS": "a\nb"}
    assert switches.from_environ(env) == Switches()


def test_read_once_not_on_every_call(monkeypatch):
    set_derive(monkeypatch, "check")
    first = switches.current()
    monkeypatch.setenv(switches.DERIVE_ENV, "full")  # without reading again: the process keeps its switches
    assert switches.current() is first and first.check
    assert switches.reload().full and switches.current().full


def test_each_side_and_check_mode(monkeypatch):
    calls = []

    def side(name, value):
        return lambda: calls.append(name) or value

    assert Switches("incremental").choose("x", side("inc", 1), side("full", 2)) == 1 and calls == ["inc"]
    calls.clear()
    assert Switches("full").choose("x", side("inc", 1), side("full", 2)) == 2 and calls == ["full"]
    calls.clear()
    assert Switches("check").choose("x", side("inc", 3), side("full", 3)) == 3 and calls == ["inc", "full"]
    with pytest.raises(switches.IncrementalMismatch, match="incremental x differs"):
        Switches("check").choose("x", side("inc", 1), side("full", 2))
    # the full side is the only one: whole-tree stages, no monitor
    assert not Switches("full").sparse_stage and not Switches("full").monitor
    assert Switches("check").sparse_stage and Switches("check").monitor


@pytest.mark.parametrize("env, message", [
    ({switches.DERIVE_ENV: "sideways"}, "MEMORY_TUI_TEST_DERIVE must be one of incremental, full, check, not 'sideways'"),
    ({"MEMORY_TUI_TX": "check"}, "MEMORY_TUI_TX is no longer read: set MEMORY_TUI_TEST_DERIVE instead"),
])
def test_the_cli_stops_on_a_bad_switch_before_any_work(tmp_path, env, message):
    base = {k: v for k, v in os.environ.items() if k not in switches.RETIRED and k != switches.DERIVE_ENV}
    r = subprocess.run([sys.executable, "-m", "memory_tui", "status", "--state", str(tmp_path / "none")],
                       capture_output=True, text=True, env={**base, **env}, stdin=subprocess.DEVNULL, timeout=120)
    assert r.returncode == 2, r
    assert r.stdout == "" and r.stderr.startswith("memory-tui: " + message), r.stderr
