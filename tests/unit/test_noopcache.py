"""A no-op hand edit answered from the remembered verdict (``core/noopcache.py``) is exactly the
full path's answer, and any change of the workspace, the config or the verdict file itself
sends the edit down the full path again (as a fresh process would meet them)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from memory_tui.core.cache import envelope
from memory_tui.core.store import noopcache

from memory_tui.core.store import txcache

from memory_tui.core.tx import api as tx
from memory_tui.core.tx import prepare as tx_prepare
from memory_tui.core.tx.noop import NoopMismatch
from memory_tui.core.tx.result import TxResult
from switching import set_derive

ADA = "topics/people/ada.md"
KYOTO = "topics/projects/kyoto-trip.md"


def _settle() -> None:
    """Let the stamps of files just written age past the clock tick (``parsecache.is_racy``):
    younger ones prove nothing, so nothing is remembered or reused while they are that young."""
    time.sleep(0.15)


def _files(mem: Path) -> dict[str, bytes]:
    out = {}
    for p in sorted(mem.rglob("*")):
        rel = p.relative_to(mem).as_posix()
        if rel.startswith(".git/") or rel.startswith(".scriptorium/memory-tui") or not p.is_file():
            continue
        out[rel] = p.read_bytes()
    return out


class _Spy:
    """Counts full-path preparations (the remembered answer never prepares a stage)."""

    def __init__(self, monkeypatch) -> None:
        self.calls = 0
        real = tx_prepare.prepare

        def prepare(*a, **kw):
            self.calls += 1
            return real(*a, **kw)

        monkeypatch.setattr(tx_prepare, "prepare", prepare)


def _fresh() -> None:
    txcache.clear_caches()  # nothing in memory: what a new process starts with


def _noop(state: Path, rel: str = ADA, **kw) -> TxResult:
    mem = state / "memory"
    return tx.staged_edit(state, rel, (mem / rel).read_text(encoding="utf-8"), **kw)


@pytest.fixture
def state(fixture_state) -> Path:
    _settle()
    return fixture_state


def test_fresh_noop_answers_from_the_verdict_exactly_as_the_full_path(state, monkeypatch):
    mem = state / "memory"
    before = _files(mem)
    spy = _Spy(monkeypatch)
    full = _noop(state, git_commit="off")
    assert full.ok and full.message == "no change" and spy.calls == 1
    assert (mem / ".scriptorium" / noopcache.NAME).is_file()
    _fresh()
    fast = _noop(state, git_commit="off")
    assert spy.calls == 1, "the remembered verdict was not used"
    assert fast == full
    # the verdict does not depend on which file was submitted with its own bytes
    _fresh()
    assert _noop(state, KYOTO, git_commit="off") == full and spy.calls == 1
    assert _files(mem) == before


def test_a_remembered_noop_walks_the_workspace_once(state, monkeypatch):
    """The answer from the verdict proves the workspace by one walk, under the lock after the
    open's recovery: a walk before the lock and another under it prove nothing more."""
    from memory_tui.core.store import walk

    spy = _Spy(monkeypatch)
    assert _noop(state, git_commit="off").message == "no change"
    walks = []
    for name in ("_walk_listed", "_walk_full"):
        real = getattr(walk, name)
        monkeypatch.setattr(walk, name, lambda *a, _real=real, **kw: walks.append(1) or _real(*a, **kw))
    _fresh()
    fast = _noop(state, git_commit="off")
    assert fast.message == "no change" and spy.calls == 1, "the remembered verdict was not used"
    assert len(walks) == 1


def test_fresh_noop_with_git_matches_the_full_path(state, monkeypatch):
    spy = _Spy(monkeypatch)
    full = _noop(state)
    assert full.ok and full.git_error is not None
    _fresh()
    fast = _noop(state)
    assert spy.calls == 1 and fast == full


def test_full_mode_never_uses_the_verdict(state, monkeypatch):
    spy = _Spy(monkeypatch)
    full = _noop(state, git_commit="off")
    set_derive(monkeypatch, "full")
    _fresh()
    assert _noop(state, git_commit="off") == full and spy.calls == 2


def test_external_change_of_another_file_is_a_miss(state, fixture_state_ro, tmp_path, monkeypatch):
    mem = state / "memory"
    spy = _Spy(monkeypatch)
    assert _noop(state, git_commit="off").message == "no change"
    # another tool rewrites one topic file behind memory-tui's back
    text = (mem / KYOTO).read_text(encoding="utf-8")
    changed = text.replace("Kyoto", "Kioto", 1)
    assert changed != text
    (mem / KYOTO).write_text(changed, encoding="utf-8")
    _settle()
    _fresh()
    got = _noop(state, git_commit="off")
    assert spy.calls == 2
    # the same history from scratch, every view derived from every unit
    twin = tmp_path / "twin"
    shutil.copytree(fixture_state_ro, twin, symlinks=True)
    (twin / "memory" / KYOTO).write_text(changed, encoding="utf-8")
    set_derive(monkeypatch, "full")
    _fresh()
    want = _noop(twin, git_commit="off")
    assert (got.ok, got.message, got.code, got.changed_files) == (want.ok, want.message, want.code, want.changed_files)
    assert _files(mem) == _files(twin / "memory")


def test_same_bytes_new_stamp_is_a_miss_with_the_same_answer(state, monkeypatch):
    mem = state / "memory"
    spy = _Spy(monkeypatch)
    full = _noop(state, git_commit="off")
    data = (mem / KYOTO).read_bytes()
    (mem / KYOTO).write_bytes(data)  # same bytes, new stamp: nothing proves them unchanged
    _settle()
    _fresh()
    again = _noop(state, git_commit="off")
    assert spy.calls == 2 and again == full
    _fresh()
    assert _noop(state, git_commit="off") == full and spy.calls == 2  # remembered under the new stamps


def test_a_different_text_never_uses_the_verdict(state, monkeypatch):
    mem = state / "memory"
    spy = _Spy(monkeypatch)
    _noop(state, git_commit="off")
    _fresh()
    text = (mem / ADA).read_text(encoding="utf-8")
    got = tx.staged_edit(state, ADA, text.replace("short answers", "brief answers", 1), git_commit="off")
    assert spy.calls == 2 and got.ok and got.message == "installed"


def test_config_change_is_a_miss(state, monkeypatch):
    spy = _Spy(monkeypatch)
    _noop(state, git_commit="off")
    config = state / "config.json"
    body = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    body.setdefault("memory", {})["recent"] = {"limit": 1}
    config.write_text(json.dumps(body), encoding="utf-8")
    _settle()
    _fresh()
    got = _noop(state, git_commit="off")
    # the views depend on the config: the same bytes now rewrite recent_events.jsonl
    assert spy.calls == 2 and got.ok and got.message == "installed"
    assert "recent_events.jsonl" in got.changed_files


def _body(path):
    return envelope.read(path, noopcache.KIND, noopcache.VERSION)


def _put(path, body, kind=noopcache.KIND, version=noopcache.VERSION):
    path.write_bytes(envelope.pack(kind, body, version))


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "wrong_kind", "old_version", "wrong_types",
                                    "other_code", "other_workspace"])
def test_damaged_verdict_is_ignored(state, monkeypatch, damage):
    mem = state / "memory"
    spy = _Spy(monkeypatch)
    full = _noop(state, git_commit="off")
    path = mem / ".scriptorium" / noopcache.NAME
    body = _body(path)
    assert body is not None
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"\x00\xff not an envelope")
    elif damage == "truncated":
        path.write_bytes(data[:-5])
    elif damage == "flipped":  # one bit of the payload: the crc no longer holds
        path.write_bytes(data[:-3] + bytes([data[-3] ^ 0x08]) + data[-2:])
    elif damage == "wrong_kind":
        _put(path, body, kind="records")
    elif damage == "old_version":
        _put(path, body, version=noopcache.VERSION - 1)
    elif damage == "wrong_types":
        _put(path, dict(body, core=("many", (), 5), warnings="x"))
    elif damage == "other_code":
        _put(path, dict(body, code="0" * 32))
    else:
        _put(path, dict(body, workspace="0" * 64))
    _fresh()
    assert _noop(state, git_commit="off") == full and spy.calls == 2
    assert _body(path) == body  # written again by the full path


def test_check_mode_catches_a_wrong_verdict(state, monkeypatch):
    mem = state / "memory"
    full = _noop(state, git_commit="off")
    path = mem / ".scriptorium" / noopcache.NAME
    body = _body(path)
    set_derive(monkeypatch, "check")
    _fresh()
    assert _noop(state, git_commit="off") == full  # a true verdict passes the check
    lie = dict(body, warnings=("not what the full path says",))
    _put(path, lie)
    _fresh()
    with pytest.raises(NoopMismatch):
        _noop(state, git_commit="off")


def test_a_refused_noop_is_never_remembered(state, monkeypatch):
    mem = state / "memory"
    text = (mem / KYOTO).read_text(encoding="utf-8")
    # a claim without any source, put there by another tool: every edit is refused until fixed
    (mem / KYOTO).write_text(text.rstrip("\n") + "\n\nAn unsourced claim.\n", encoding="utf-8")
    _settle()
    got = _noop(state, git_commit="off")
    assert not got.ok
    assert not (mem / ".scriptorium" / noopcache.NAME).exists()


def test_racy_stamps_are_not_remembered(fixture_state):
    mem = fixture_state / "memory"
    os.utime(mem / KYOTO)  # just touched: its stamp proves nothing yet
    assert _noop(fixture_state, git_commit="off").message == "no change"
    assert not (mem / ".scriptorium" / noopcache.NAME).exists()


def test_base_revision_is_still_checked(state, monkeypatch):
    full = _noop(state, git_commit="off")
    _fresh()
    assert _noop(state, git_commit="off", base_revision=full.revision) == full
    _fresh()
    stale = _noop(state, git_commit="off", base_revision="0" * 32)
    assert not stale.ok and stale.code == "CONCURRENT_UPDATE"
