"""The test switches are handed down, not looked up: a transaction (or a workspace opened for
reading) given ``Switches(derive="full")`` runs the full side in every cache of the storage
layer -- the walk, the committed texts, the parsed tree, the block links, the views, the
revision chain, the retention, the file-system monitor and the remembered no-op -- even
though the process's environment says ``incremental``. Each cache is observed through the
function its shortcut calls and its full side never does; the same steps run with the
environment's switches take the shortcuts, so the spies can tell the two apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_tui.core import switches
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store import committed, fsmonitor, linkcache, noopcache, revision, treecache, txcache, viewcache, walk
from memory_tui.core.store.archives import append_records
from memory_tui.core.store.workspace import open_state, refresh
from memory_tui.core.switches import Switches
from memory_tui.core.tx import api as tx
from switching import set_derive

RECORDS = [SourceRecord("openprogram", "sess-p", f"m{i:03d}", i + 1, "user", f"message {i}",
                        timestamp="2026-11-30T05:00:00+00:00") for i in range(3)]
IDS = [r.source_id for r in RECORDS]
CORE = f"# Core\n\nThe user is Ada.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [name]({IDS[0]})\n"
ADA = f"# Ada\n\nAda drinks tea.[^e1]\n\n[^e1]: Time: `2026-11-02`; Sources: [tea]({IDS[1]})\n"


def _state(at: Path) -> Path:
    (at / "memory" / "topics").mkdir(parents=True)
    append_records(at / "memory", RECORDS)
    for rel, text in (("topics/core.md", CORE), ("topics/people/ada.md", ADA)):
        assert tx.staged_edit(at, rel, text, git_commit="off").ok
    return at


def _spy(monkeypatch, seen: dict, owner, name: str, label: str, result=False):
    """Count the calls of ``owner.name`` under ``label`` (with ``result``: the truthy answers)."""
    real = getattr(owner, name)

    def spy(*a, **k):
        got = real(*a, **k)
        if not result or got:
            seen[label] = seen.get(label, 0) + 1
        return got

    monkeypatch.setattr(owner, name, spy)


def _shortcuts(monkeypatch) -> dict:
    seen: dict = {}
    _spy(monkeypatch, seen, walk, "_walk_listed", "walk reuses listings")
    _spy(monkeypatch, seen, committed.CommittedFiles, "_read_again", "committed texts by stamp")
    _spy(monkeypatch, seen, treecache.TreeCache, "_topics_since_last", "tree from the last parse")
    _spy(monkeypatch, seen, linkcache.BlockLinks, "_full_locations", "block locations kept")
    _spy(monkeypatch, seen, viewcache.ViewCache, "combine", "views from parts")
    _spy(monkeypatch, seen, revision.revmemo, "keep", "revision kept for the next process")
    _spy(monkeypatch, seen, revision.RevisionChain, "can_defer", "revision deferred", result=True)
    _spy(monkeypatch, seen, noopcache, "candidate", "no-op shortcut looked up")
    _spy(monkeypatch, seen, fsmonitor, "enabled", "monitor allowed", result=True)
    retains: list = []
    real_retain = txcache.WorkspaceCache.retain
    monkeypatch.setattr(txcache.WorkspaceCache, "retain", lambda self, *a, **k: retains.append(1) or real_retain(self, *a, **k))
    seen["_retains"] = retains
    return seen


def _steps(state: Path, chosen: Switches | None) -> int:
    """A no-op edit, two real edits and a read (open + refresh) of the workspace; the number of
    installs."""
    kw = {} if chosen is None else {"switches": chosen}
    rel = "topics/people/ada.md"
    path = state / "memory" / rel
    assert tx.staged_edit(state, rel, path.read_text(), git_commit="off", **kw).ok  # makes the no-op verdict
    assert tx.staged_edit(state, rel, path.read_text(), git_commit="off", **kw).ok  # may be answered by it
    for was, word in (("tea", "coffee"), ("coffee", "cocoa")):  # the block ids the install added stay
        assert tx.staged_edit(state, rel, path.read_text().replace(was, word), git_commit="off", **kw).ok
    view = open_state(state, **kw)
    assert view.switches == (chosen or switches.current())
    refresh(view)
    return 2


@pytest.mark.parametrize("kind", ["incremental", "full"])
def test_explicit_switches_win_over_the_environment(kind, tmp_path, monkeypatch):
    set_derive(monkeypatch, "incremental")  # the environment says incremental, whatever the run's
    txcache.clear_caches()
    state = _state(tmp_path / "state")
    txcache.clear_caches()
    seen = _shortcuts(monkeypatch)
    retains = seen.pop("_retains")
    installs = _steps(state, Switches(derive="full") if kind == "full" else None)
    if kind == "full":
        assert seen == {}, f"shortcuts taken by a transaction handed the full switches: {sorted(seen)}"
        assert len(retains) >= installs  # full retains after every install instead of lazily
    else:  # the control: the same steps with the environment's switches take every shortcut
        expected = {"walk reuses listings", "committed texts by stamp", "tree from the last parse",
                    "block locations kept", "views from parts", "no-op shortcut looked up"}
        if fsmonitor.inotify() is not None:
            expected.add("monitor allowed")
        missing = expected - set(seen)
        assert not missing, f"shortcuts the incremental run did not take: {sorted(missing)}"
        assert "revision kept for the next process" in seen or "revision deferred" in seen
        assert len(retains) < installs  # lazily: not after every install


def test_a_refresh_keeps_the_switches_it_was_opened_with(tmp_path, monkeypatch):
    set_derive(monkeypatch, "incremental")
    txcache.clear_caches()
    state = _state(tmp_path / "state")
    view = open_state(state, switches=Switches(derive="check"))
    set_derive(monkeypatch, "full")  # the environment moves on; the snapshot's switches do not
    assert refresh(view).switches == Switches(derive="check")


# Where the process-wide switches may be read: the entry points (the CLI's start; the public
# functions' default argument) and the crash hook, which counts crash points over the whole
# process by design. Everything else is handed the switches by its caller.
READERS = {"cli/__init__.py", "core/tx/api.py", "core/store/workspace.py", "core/store/install.py", "core/switches.py"}


def test_only_the_entry_points_read_the_process_wide_switches():
    root = Path(__file__).resolve().parents[2] / "memory_tui"
    readers = set()
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if "switches.current()" in text or "import current" in text and "switches import" in text \
                or "current_switches()" in text:
            readers.add(path.relative_to(root).as_posix())
    assert readers <= READERS, sorted(readers - READERS)
