"""The revision kept between processes (``core.revmemo``): used only for the very files it
was computed from, young files checked by their bytes; damage, other paths or a symlinked
runtime dir are misses."""

from __future__ import annotations

import os
import time

from memory_tui.core.store import revmemo

from memory_tui.core.store import revstream, txcache
from memory_tui.core.format.paths import RUNTIME_DIR
from memory_tui.core.store.parsecache import RACY_NS
from memory_tui.core.cache import envelope
from memory_tui.core.store.txcache import WorkspaceCache
from memory_tui.core.store.walk import revision_walk
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.switches import IncrementalMismatch
from memory_tui.core.switches import current as current_switches
from switching import set_derive


def _workspace(tmp_path):
    root = tmp_path / "memory"
    (root / ".scriptorium").mkdir(parents=True)
    (root / "topics").mkdir()
    (root / "core.md").write_text("# Core\n")
    (root / "topics" / "a.md").write_text("# A\n\nOne.\n")
    (root / "topics" / "b.md").write_text("# B\n\nTwo.\n")
    return root


def _age() -> None:
    time.sleep(RACY_NS / 1e9 + 0.02)


def _feeds(monkeypatch) -> list:
    calls: list = []
    real = revstream.feed_stream

    def counted(*args, **kwargs):
        calls.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(revstream, "feed_stream", counted)
    return calls


def test_a_fresh_process_takes_the_kept_revision_without_hashing(tmp_path, monkeypatch):
    set_derive(monkeypatch, "incremental")  # ``check`` hashes as well, to compare
    root = _workspace(tmp_path)
    _age()
    stamps, _ = revision_walk(root, switches=current_switches())
    first = WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches())
    assert first == workspace_revision(root)
    assert (root / ".scriptorium" / revmemo.NAME).is_file()
    feeds = _feeds(monkeypatch)
    assert WorkspaceCache(root).revision(revision_walk(root, switches=current_switches())[0], installed=True, switches=current_switches()) == first
    assert feeds == []  # nothing read or hashed


def test_only_an_installing_transaction_keeps_it(tmp_path):
    root = _workspace(tmp_path)
    _age()
    WorkspaceCache(root).revision(revision_walk(root, switches=current_switches())[0], switches=current_switches())  # a stage's, a reader's: nothing written
    assert not (root / ".scriptorium" / revmemo.NAME).exists()


def test_a_changed_file_is_a_miss(tmp_path):
    root = _workspace(tmp_path)
    _age()
    WorkspaceCache(root).revision(revision_walk(root, switches=current_switches())[0], installed=True, switches=current_switches())
    (root / "topics" / "a.md").write_text("# A\n\nOne!\n")  # same size, new stamp
    assert revmemo.lookup(root, revision_walk(root, switches=current_switches())[0]) is None
    assert WorkspaceCache(root).revision(revision_walk(root, switches=current_switches())[0], installed=True, switches=current_switches()) == workspace_revision(root)


def test_a_young_file_is_checked_by_its_bytes(tmp_path):
    root = _workspace(tmp_path)
    stamps, _ = revision_walk(root, switches=current_switches())  # just written: every stamp younger than the tick
    value = WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches())
    assert revmemo.lookup(root, stamps) == value  # the same bytes: the kept value holds
    # a write inside the tick can leave a file's stamp as it was: the walk would list these
    # very stamps, and only the bytes tell
    (root / "topics" / "b.md").write_text("# B\n\nTwO.\n")
    assert revmemo.lookup(root, stamps) is None


def test_an_old_file_is_proven_by_its_stamp_and_other_paths_miss(tmp_path):
    root = _workspace(tmp_path)
    _age()
    stamps, _ = revision_walk(root, switches=current_switches())
    value = WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches())
    assert revmemo.lookup(root, stamps) == value
    moved = {("topics/c.md" if rel == "topics/b.md" else rel): st for rel, st in stamps.items()}
    assert revmemo.lookup(root, moved) is None  # same stamps, another file: another revision
    fewer = dict(list(stamps.items())[:-1])
    assert revmemo.lookup(root, fewer) is None
    bumped = dict(stamps)
    rel = "topics/a.md"
    bumped[rel] = bumped[rel][:3] + (bumped[rel][3] + 1,)
    assert revmemo.lookup(root, bumped) is None  # an old file's stamp moved: never trusted


def test_damaged_or_foreign_entries_are_misses(tmp_path):
    root = _workspace(tmp_path)
    _age()
    stamps, _ = revision_walk(root, switches=current_switches())
    WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches())
    path = root / ".scriptorium" / revmemo.NAME
    good = path.read_bytes()
    for bad in (good[:-3], good[:-1] + bytes([good[-1] ^ 1]), envelope.pack("records", envelope.unpack(revmemo.KIND, good, revmemo.VERSION), revmemo.VERSION),
                envelope.pack(revmemo.KIND, envelope.unpack(revmemo.KIND, good, revmemo.VERSION), revmemo.VERSION - 1), b""):
        path.write_bytes(bad)
        assert revmemo.lookup(root, stamps) is None
        assert WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches()) == workspace_revision(root)  # and written again
        assert envelope.read(path, revmemo.KIND, revmemo.VERSION) == envelope.unpack(revmemo.KIND, good, revmemo.VERSION)


def test_full_mode_neither_reads_nor_writes_it_and_check_mode_compares(tmp_path, monkeypatch):
    root = _workspace(tmp_path)
    _age()
    stamps, _ = revision_walk(root, switches=current_switches())
    set_derive(monkeypatch, "full")
    WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches())
    path = root / ".scriptorium" / revmemo.NAME
    assert not path.exists()
    set_derive(monkeypatch, "incremental")
    WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches())
    revision, paths, kept, young = envelope.read(path, revmemo.KIND, revmemo.VERSION)
    path.write_bytes(envelope.pack(revmemo.KIND, ("0" * 32, paths, kept, young), revmemo.VERSION))  # a lie
    set_derive(monkeypatch, "full")
    assert WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches()) == revision
    set_derive(monkeypatch, "check")
    try:
        WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches())
    except IncrementalMismatch:
        pass
    else:
        raise AssertionError("check mode took the kept revision without comparing it")


def test_never_written_through_a_symlinked_runtime_dir(tmp_path):
    root = _workspace(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    (root / ".scriptorium").rename(elsewhere)
    os.symlink(elsewhere, root / ".scriptorium")
    _age()
    stamps, _ = revision_walk(root, switches=current_switches())
    WorkspaceCache(root).revision(stamps, installed=True, switches=current_switches())
    assert not (elsewhere / revmemo.NAME).exists()


def _cli_session(state, mode: str, monkeypatch, capsys, tmp_path, taken: list) -> list[tuple]:
    """Fresh ``apply`` processes (every in-process cache dropped first), each at the revision
    ``status`` reads, as the owner runs them; what each one's first ``revmemo.lookup``
    answered (the stage's revision) is added to ``taken``."""
    import json

    from memory_tui.cli import main
    from tests.unit.test_recordindex import _fixture_ops

    set_derive(monkeypatch, mode)
    mem = state / "memory"
    out = []
    for n, ops_ in enumerate(_fixture_ops(mem)):
        request = tmp_path / f"req-{mode}-{n}.json"
        request.write_text(json.dumps({"memory_changes": ops_, "git_commit": "off"}))
        _age()  # the last install's stamps grow old, as between an owner's commands
        base = workspace_revision(mem)
        txcache.clear_caches()
        capsys.readouterr()
        before = len(taken)
        code = main(["--state", str(state), "--json", "apply", "--base-revision", base, str(request)])
        result = json.loads(capsys.readouterr().out)
        held = [e for e in txcache.cache_for(mem).revisions._chain if e[4] is not None]
        taken[before + 1:] = []  # later lookups: the post-install revision's
        out.append((code, result.get("ok"), result.get("code"), result.get("revision"), tuple(result.get("changed_files", ())),
                    workspace_revision(mem), held == []))
    return out


def test_fresh_cli_applies_take_the_kept_revision_and_equal_the_full_path(fixture_state, tmp_path, monkeypatch, capsys):
    import shutil

    from tests.unit.test_recordindex import _files

    full = tmp_path / "full"
    shutil.copytree(fixture_state, full, symlinks=True)
    taken: list = []
    real = revmemo.lookup
    monkeypatch.setattr(revmemo, "lookup", lambda root, stamps: taken.append(real(root, stamps)) or taken[-1])
    got = _cli_session(fixture_state, "incremental", monkeypatch, capsys, tmp_path, taken)
    # every stage after the first starts from the revision the previous apply installed and kept
    assert len(taken) == len(got) and taken[0] is None and all(taken[1:]), taken
    assert taken[1:] == [g[5] for g in got[:-1]]
    taken.clear()
    want = _cli_session(full, "full", monkeypatch, capsys, tmp_path, taken)
    assert taken == []  # the full mode never reads it
    assert [g[:6] for g in got] == [w[:6] for w in want]
    assert all(g[3] == g[5] for g in got if g[1])  # the revision reported is the workspace's
    assert all(g[6] for g in got)  # a one-shot apply holds no file bytes for a next feed
    assert _files(fixture_state / "memory") == _files(full / "memory")
    assert not (full / "memory" / RUNTIME_DIR / revmemo.NAME).exists()


def test_a_reader_keeps_the_revision_it_hashed_in_the_user_cache_not_in_the_state(tmp_path, monkeypatch):
    set_derive(monkeypatch, "incremental")
    root = _workspace(tmp_path)
    _age()
    stamps, _ = revision_walk(root, switches=current_switches())
    value = WorkspaceCache(root).revision(stamps, switches=current_switches())  # a reader: nothing kept in the state
    assert value == workspace_revision(root)
    assert not (root / ".scriptorium" / revmemo.NAME).exists()
    assert revmemo.reader_lookup(root, stamps) == value
    feeds = _feeds(monkeypatch)
    assert WorkspaceCache(root).revision(stamps, switches=current_switches()) == value  # the next reader
    assert feeds == []
    # a changed file: the readers' memo proves nothing, the next reader hashes and keeps again
    (root / "topics" / "a.md").write_text("# A\n\nOne!\n")
    _age()
    stamps, _ = revision_walk(root, switches=current_switches())
    assert revmemo.reader_lookup(root, stamps) is None
    assert WorkspaceCache(root).revision(stamps, switches=current_switches()) == workspace_revision(root)
    assert len(feeds) == 1 and revmemo.reader_lookup(root, stamps) == workspace_revision(root)


def test_the_readers_memo_is_not_taken_in_full_mode_and_compared_in_check_mode(tmp_path, monkeypatch):
    root = _workspace(tmp_path)
    _age()
    stamps, _ = revision_walk(root, switches=current_switches())
    set_derive(monkeypatch, "full")
    WorkspaceCache(root).revision(stamps, switches=current_switches())
    assert revmemo.reader_lookup(root, stamps) is None  # nothing written
    set_derive(monkeypatch, "incremental")
    value = WorkspaceCache(root).revision(stamps, switches=current_switches())
    where = revmemo._reader_file(root)
    _revision, paths, kept, young = envelope.read(where, revmemo.KIND, revmemo.VERSION)
    where.write_bytes(envelope.pack(revmemo.KIND, ("0" * 64, paths, kept, young), revmemo.VERSION))  # a lie
    set_derive(monkeypatch, "full")
    assert WorkspaceCache(root).revision(stamps, switches=current_switches()) == value
    set_derive(monkeypatch, "check")
    try:
        WorkspaceCache(root).revision(stamps, switches=current_switches())
    except IncrementalMismatch:
        pass
    else:
        raise AssertionError("check mode took the readers' revision without comparing it")
