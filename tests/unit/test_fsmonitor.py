"""The file-system monitor (``core.fsmonitor``): a transaction whose workspace nothing touched since
its stamps were true proves it without walking; anything that did touch it -- a write in
place that keeps the size, a new file, a new folder and a file in it, runtime.json, the root
replaced, a lost event -- makes it walk, and the edit answers exactly as a fresh process
would. memory-tui's own caches in the runtime folder are not changes. ``check`` mode walks
as well and fails loudly where the monitor would have missed a change."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memory_tui.core.store import fsmonitor

from memory_tui.core.tx import api as tx
from memory_tui.core.tx import stage as tx_stage
from memory_tui.core.store import txcache
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.switches import IncrementalMismatch
from memory_tui.core.switches import current as current_switches
from switching import set_derive

pytestmark = pytest.mark.skipif(fsmonitor.inotify() is None or fsmonitor.fs_type(os.getcwd()) is None,
                                reason="the file-system monitor needs Linux inotify")

RECORDS = [SourceRecord("openprogram", "sess-j", f"m{i:03d}", i + 1, "user", f"message {i}",
                        timestamp="2026-11-30T05:00:00+00:00") for i in range(4)]
IDS = [r.source_id for r in RECORDS]
CORE = f"# Core\n\nThe user is Ada.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [name]({IDS[0]})\n"
ADA = f"# Ada\n\nAda drinks tea.[^e1]\n\n[^e1]: Time: `2026-11-02`; Sources: [tea]({IDS[1]})\n"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    if fsmonitor.fs_type(os.fspath(tmp_path)) not in fsmonitor.LOCAL_FS:
        pytest.skip("the temp dir is not on a local file system")
    try:  # the machine's per-user inotify instances may all be taken (by other processes)
        fsmonitor.inotify()[0](nonblocking=True).close()
    except OSError as exc:
        pytest.skip(f"no inotify instance to be had on this machine now: {exc}")
    set_derive(monkeypatch, "incremental")
    txcache.clear_caches()
    yield
    txcache.clear_caches()


@pytest.fixture
def ws(tmp_path) -> Path:
    state = tmp_path / "state"
    (state / "memory" / "topics").mkdir(parents=True)
    append_records(state / "memory", RECORDS)
    for rel, text in (("topics/core.md", CORE), ("topics/people/ada.md", ADA)):
        assert tx.staged_edit(state, rel, text, git_commit="off").ok
    return state


def _edit(state: Path, word: str):
    text = (state / "memory/topics/people/ada.md").read_text()
    text = text.replace(text.split("drinks ")[1].split(".")[0], word, 1)
    return tx.staged_edit(state, "topics/people/ada.md", text, git_commit="off")


def _walks(monkeypatch) -> list:
    calls: list = []
    real = tx_stage.revision_walk
    monkeypatch.setattr(tx_stage, "revision_walk", lambda root, **kw: calls.append(root) or real(root, **kw))
    return calls


def _snapshot(mem: Path) -> dict[str, bytes]:
    return {p.relative_to(mem).as_posix(): p.read_bytes() for p in sorted(mem.rglob("*"))
            if p.is_file() and ".scriptorium" not in p.parts and ".git" not in p.parts}


def _settled(state: Path) -> None:
    """Two edits: the monitor watches every folder and the last install's stamps are noted."""
    assert _edit(state, "milk").ok and _edit(state, "water").ok


def test_nothing_touched_no_walk(ws, monkeypatch):
    _settled(ws)
    walks = _walks(monkeypatch)
    for word in ("juice", "soda", "cocoa"):
        result = _edit(ws, word)
        assert result.ok, result
        assert result.revision == workspace_revision(ws / "memory")
    assert walks == []


@pytest.mark.parametrize("change", ["in-place-same-size", "new-file", "new-folder", "runtime-json", "remove",
                                    "symlink", "chmod"])
def test_a_change_by_another_writer_is_seen(ws, tmp_path, monkeypatch, change):
    mem = ws / "memory"
    _settled(ws)
    ada = mem / "topics/people/ada.md"
    if change == "in-place-same-size":  # no size change, no rename: only the file's own events tell
        with open(mem / "topics/core.md", "r+b") as fh:
            fh.write((mem / "topics/core.md").read_bytes().replace(b"Ada.", b"Bea."))
    elif change == "new-file":
        (mem / "topics/people/bob.md").write_text(ADA.replace("Ada", "Bob"))
    elif change == "new-folder":
        (mem / "topics/pets").mkdir()
        (mem / "topics/pets/cat.md").write_text(ADA.replace("Ada", "Cat"))
    elif change == "runtime-json":
        runtime = mem / ".scriptorium/runtime.json"
        runtime.write_text(runtime.read_text() + " ")
    elif change == "remove":
        (mem / "timeline").rename(tmp_path / "timeline-away")
    elif change == "symlink":
        (mem / "topics/people/link.md").symlink_to("ada.md")  # relative: the copy's points into the copy
    elif change == "chmod":
        os.chmod(mem / "topics/core.md", 0o644)
    copy = tmp_path / "copy"
    shutil.copytree(ws, copy, symlinks=True)
    walks = _walks(monkeypatch)
    here = _edit(ws, "juice")
    assert walks, "the monitor saw the change: the transaction walked"
    txcache.clear_caches()
    fresh = _edit(copy, "juice")
    assert (here.ok, here.code, here.revision) == (fresh.ok, fresh.code, fresh.revision)
    assert _snapshot(mem) == _snapshot(copy / "memory")


def test_a_file_in_a_folder_made_since_is_watched_from_then_on(ws, monkeypatch):
    mem = ws / "memory"
    _settled(ws)
    (mem / "topics/pets").mkdir()
    (mem / "topics/pets/cat.md").write_text(ADA.replace("Ada", "Cat"))
    _settled(ws)  # walks once (the new folder), then is quiet again
    walks = _walks(monkeypatch)
    assert _edit(ws, "juice").ok and walks == []
    with open(mem / "topics/pets/cat.md", "r+b") as fh:  # in place, same size, in the new folder
        fh.write(b"# Cow")
    result = _edit(ws, "soda")
    assert walks and result.revision == workspace_revision(mem)


def test_own_caches_in_the_runtime_folder_are_not_changes(ws, monkeypatch):
    mem = ws / "memory"
    _settled(ws)
    (mem / ".scriptorium/some-cache").write_bytes(b"x" * 10)
    (mem / ".scriptorium-scratch").mkdir()  # an internal top-level name (memory spec §2.1)
    walks = _walks(monkeypatch)
    assert _edit(ws, "juice").ok and walks == []


def test_the_root_replaced_by_a_copy_is_seen(ws, tmp_path, monkeypatch):
    """The state folder above the root moved away and a copy put in its place: no watched
    folder had an event (they moved with it), only the root's inode tells."""
    mem = ws / "memory"
    _settled(ws)
    ws.rename(tmp_path / "old-state")
    shutil.copytree(tmp_path / "old-state", ws, symlinks=True)
    (mem / "topics/core.md").write_text(CORE.replace("Ada.", "Eve."))
    walks = _walks(monkeypatch)
    result = _edit(ws, "juice")
    assert walks and result.ok and result.revision == workspace_revision(mem)
    assert "Eve." in (mem / "topics/core.md").read_text()


def test_a_lost_event_makes_it_walk(ws, monkeypatch):
    _settled(ws)
    watch = fsmonitor.monitor_for(ws / "memory", switches=current_switches())
    assert watch is not None
    from inotify_simple import Event
    real = watch._notify.read
    overflow = fsmonitor.inotify()[1].overflow
    monkeypatch.setattr(watch._notify, "read", lambda timeout=0: [*real(timeout=timeout), Event(-1, overflow, 0, "")])
    walks = _walks(monkeypatch)
    assert _edit(ws, "juice").ok and walks


def test_full_mode_walks_every_time(ws, monkeypatch):
    set_derive(monkeypatch, "full")
    txcache.clear_caches()
    _settled(ws)
    walks = _walks(monkeypatch)
    assert _edit(ws, "juice").ok and _edit(ws, "soda").ok
    # no monitor: each edit walks for its stage, again under the lock, and after its install
    assert fsmonitor.monitor_for(ws / "memory", create=True, switches=current_switches()) is None
    assert len(walks) == 6


def test_not_on_a_local_file_system(ws, monkeypatch):
    monkeypatch.setattr(fsmonitor, "fs_type", lambda path: 0x6969)  # NFS
    txcache.clear_caches()
    _settled(ws)
    assert fsmonitor.monitor_for(ws / "memory", create=True, switches=current_switches()) is None


def test_check_mode_catches_a_change_the_monitor_missed(ws, monkeypatch):
    """A monitor that loses an event (here: one made to) is caught by the walk of check mode
    instead of installing over a change it never saw."""
    mem = ws / "memory"
    set_derive(monkeypatch, "check")
    _settled(ws)
    watch = fsmonitor.monitor_for(mem, switches=current_switches())
    assert watch is not None
    (mem / "topics/core.md").write_text(CORE.replace("Ada.", "Eve."))
    watch._notify.read(timeout=0)  # the event is lost
    with pytest.raises(IncrementalMismatch):
        _edit(ws, "juice")


def test_a_fork_never_reads_the_parents_queue(ws):
    _settled(ws)
    parent = fsmonitor.monitor_for(ws / "memory", switches=current_switches())
    assert parent is not None
    pid = os.fork()
    if pid == 0:  # the child: a monitor of its own, never the inherited queue
        child = fsmonitor.monitor_for(ws / "memory", create=True, switches=current_switches())
        os._exit(0 if child is not parent else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_an_install_of_this_process_is_a_change_for_its_other_stages(ws):
    """Only the installing transaction knows what its own writes did: a writer's stage of the
    same process, read before that install, must see the workspace changed."""
    mem = ws / "memory"
    _settled(ws)
    with tx.open_stage(ws) as stage:
        ada = stage.topics / "people/ada.md"
        ada.write_text(ada.read_text().replace("drinks", "sips"))
        assert _edit(ws, "juice").ok  # another transaction of this process, meanwhile
        result = tx.commit_edits(stage)
    assert result.code == "CONCURRENT_UPDATE", result
    assert "juice" in (mem / "topics/people/ada.md").read_text()


def test_no_inotify_instance_free_is_asked_again_later(ws, monkeypatch):
    """The per-user inotify instances can all be taken for a while: that root walks then, and
    gets a monitor once one is free (it is not given up for the rest of the process)."""
    fsmonitor.forget_monitors()  # the fixture's edits started one
    real = fsmonitor.inotify()

    def exhausted(**kw):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(fsmonitor, "inotify", lambda: (exhausted, real[1]))
    assert fsmonitor.monitor_for(ws / "memory", create=True, switches=current_switches()) is None
    monkeypatch.setattr(fsmonitor, "inotify", lambda: real)
    assert fsmonitor.monitor_for(ws / "memory", create=True, switches=current_switches()) is not None
