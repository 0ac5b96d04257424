"""Transaction guards and caches: topics/core.md can never be removed (pitfall 10), legacy root
core.md promotion (§5.4 step 4 / §8.4), canonical-proof cache stays byte-compatible with a
full re-normalisation, and a stage prepared outside the lock is redone when the workspace
moved meanwhile."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from memory_tui.core.tx import api as tx
from memory_tui.core.tx import prepare as tx_prepare, stage as tx_stage
from memory_tui.core.tx.stage import source_index
from memory_tui.core.cache import envelope
from memory_tui.core.store import proofs, revision, revstream, txcache, walk
from memory_tui.core.format.normalize import normalize_tree
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records
from memory_tui.core.format.topics import parse_tree
from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.switches import current as current_switches
from switching import set_derive


def _records() -> list[SourceRecord]:
    return [
        SourceRecord("openprogram", "sess-tx", f"m{i:03d}", i + 1, "user", f"message {i}",
                     timestamp="2026-11-30T05:00:00+00:00")
        for i in range(8)
    ]


IDS = [r.source_id for r in _records()]
CORE = f"# Core\n\nThe user is Ada.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [name]({IDS[0]})\n"
ADA = f"# Ada\n\nAda drinks tea.[^e1]\n\n[^e1]: Time: `2026-11-02`; Sources: [tea]({IDS[1]})\n"


def _empty(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    (state / "memory" / "topics").mkdir(parents=True)
    append_records(state / "memory", _records())
    return state


@pytest.fixture
def ws(tmp_path) -> Path:
    state = _empty(tmp_path)
    for rel, text in (("topics/core.md", CORE), ("topics/people/ada.md", ADA)):
        r = tx.staged_edit(state, rel, text, git_commit="off")
        assert r.ok, r
    return state


def _cur(state: Path, rel: str) -> str:
    return (state / "memory" / rel).read_text()


def _snapshot(mem: Path) -> dict[str, bytes]:
    return {p.relative_to(mem).as_posix(): p.read_bytes() for p in sorted(mem.rglob("*"))
            if p.is_file() and ".scriptorium" not in p.parts}


# ------------------------------------------------------------------------------- core master


def _core_ids(state: Path) -> list[str]:
    tree = parse_tree(state / "memory/topics")
    return list(tree.block_ids("core.md"))


def test_record_ops_deleting_every_core_record_refused(ws):
    mem = ws / "memory"
    before = _snapshot(mem)
    ops = [{"op": "delete_record", "memory_id": bid} for bid in _core_ids(ws)]
    result = tx.update(ws, workspace_revision(mem), memory_changes=ops, git_commit="off")
    assert not result.ok
    assert result.code == "INVALID_TOPIC_FORMAT" and result.path == "topics/core.md"
    assert "topics/core.md cannot be removed" in result.message
    assert _snapshot(mem) == before


def test_hand_edit_emptying_core_refused(ws):
    mem = ws / "memory"
    before = _snapshot(mem)
    for text in ("", "# Core\n", "# Core\n\nJust prose, no citation.\n"):
        result = tx.staged_edit(ws, "topics/core.md", text, git_commit="off")
        assert not result.ok and result.path == "topics/core.md", (text, result)
        assert result.code in ("INVALID_TOPIC_FORMAT",)
    assert _snapshot(mem) == before


def test_writer_stage_removing_core_refused(ws):
    mem = ws / "memory"
    before = _snapshot(mem)
    with tx.open_stage(ws) as stage:
        (stage.topics / "core.md").unlink()
        result = tx.commit_edits(stage)
    assert not result.ok and result.code == "INVALID_ARGUMENT" and result.path == "topics/core.md"
    assert "core master" in result.message
    assert _snapshot(mem) == before


def test_core_records_can_still_be_removed_one_by_one(ws):
    mem = ws / "memory"
    text = _cur(ws, "topics/core.md") + f"\nThe user likes tea.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [tea]({IDS[2]})\n"
    assert tx.staged_edit(ws, "topics/core.md", text, git_commit="off").ok
    first = _core_ids(ws)[0]
    result = tx.update(ws, workspace_revision(mem), memory_changes=[{"op": "delete_record", "memory_id": first}],
                       git_commit="off")
    assert result.ok, result
    assert _core_ids(ws) and first not in _core_ids(ws)


# --------------------------------------------------------------------------- legacy promotion


def test_legacy_root_core_promoted_with_rebased_links(tmp_path):
    state = _empty(tmp_path)
    mem = state / "memory"
    # what an older OpenProgram left: a root core.md (links relative to the root), no master
    (mem / "core.md").write_text(
        "# Core\n\nThe user is Ada.[^e-1111111111] ^abcd1234\n\n"
        "[^e-1111111111]: Time: `2026-11`; Sources: [name](sources/openprogram/_v2/sess-tx.md#source-"
        + __import__("hashlib").sha256(IDS[0].encode()).hexdigest()[:16] + ")\n"
    )
    result = tx.staged_edit(state, "topics/people/ada.md", ADA, git_commit="off")
    assert result.ok, result
    assert "promoted the legacy root core.md to topics/core.md" in result.warnings
    master = (mem / "topics/core.md").read_text()
    assert "](../sources/openprogram/_v2/sess-tx.md#source-" in master
    assert "^abcd1234" in master
    tree = parse_tree(mem / "topics", resolve=source_index(mem).resolve_target)
    assert tree.ok and tree.by_id("abcd1234").source_refs == (IDS[0],)
    # core.md is now rendered from the master, links re-based back to the root
    assert "](sources/openprogram/_v2/sess-tx.md#source-" in (mem / "core.md").read_text()
    assert "topics/core.md" in result.changed_files


def test_unparseable_legacy_root_core_left_alone(tmp_path):
    state = _empty(tmp_path)
    mem = state / "memory"
    legacy = "# Core\n\nHand-written notes without any citation.\n"
    (mem / "core.md").write_text(legacy)
    result = tx.staged_edit(state, "topics/people/ada.md", ADA, git_commit="off")
    assert result.ok, result
    assert any("not promoted" in w for w in result.warnings)
    assert not (mem / "topics/core.md").exists()
    assert (mem / "core.md").read_text() == legacy  # §8.4: no master -> root core.md untouched


# ------------------------------------------------------------------------- canonical proofs


def test_unproven_committed_file_is_still_normalised(ws, tmp_path):
    """A committed file nobody proved canonical (hand-written on disk) is normalised by the next
    transaction exactly as without any cache, even when the edit is elsewhere."""
    mem = ws / "memory"
    raw = ADA.replace("tea.[^e", "tea.   [^e").rstrip("\n") + "\n\n\n"
    (mem / "topics/people/bob.md").write_text(raw.replace("Ada", "Bob"))
    twin = tmp_path / "twin"
    shutil.copytree(ws, twin / "state", symlinks=True)
    edit = _cur(ws, "topics/core.md") + f"\nThe user likes rain.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [rain]({IDS[3]})\n"
    a = tx.staged_edit(ws, "topics/core.md", edit, git_commit="off")
    txcache.clear_caches()
    for p in (twin / "state/memory/.scriptorium").glob(proofs.CACHE_NAME):
        p.unlink()
    b = tx.staged_edit(twin / "state", "topics/core.md", edit, git_commit="off")
    assert a.ok and b.ok
    assert _snapshot(mem) == _snapshot(twin / "state/memory")
    assert "   [^" not in (mem / "topics/people/bob.md").read_text()


def test_proofs_persist_and_foreign_cache_is_ignored(ws):
    mem = ws / "memory"
    path = mem / ".scriptorium" / proofs.CACHE_NAME
    edit = _cur(ws, "topics/people/ada.md") + f"\nAda walks.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [walk]({IDS[4]})\n"
    assert tx.staged_edit(ws, "topics/people/ada.md", edit, git_commit="off").ok
    body = envelope.read(path, proofs.KIND, proofs.CACHE_VERSION)
    assert body[0] == proofs.code_tag() and "core.md" in body[1]
    # a cache made by other code, claiming a non-canonical text is canonical, is not believed
    (mem / "topics/misc.md").write_text(f"# Misc\n\nStray.   [^e-0000000000]\n\n[^e-0000000000]: Time: `2026`; Sources: [x]({IDS[5]})\n")
    forged = ("someone-else", {"misc.md": {"0" * 64: "x"}})
    path.write_bytes(envelope.pack(proofs.KIND, forged, proofs.CACHE_VERSION))
    txcache.clear_caches()
    result = tx.rebuild_views(ws)
    assert result.ok, result
    assert "topics/misc.md" in result.changed_files  # re-normalised: whitespace before [^ removed


def test_cached_tree_equals_parse_tree(ws):
    mem = ws / "memory"
    texts = {p.relative_to(mem / "topics").as_posix(): p.read_text() for p in (mem / "topics").rglob("*.md")}
    texts["dup.md"] = texts["people/ada.md"]  # cross-file duplicate ids
    index = source_index(mem)
    cache = txcache.WorkspaceCache(mem)
    token = cache.observe_index(index)
    mine = cache.tree(texts, index, token, switches=current_switches())
    ref = parse_tree(texts, resolve=index.resolve_target)
    assert mine.problems == ref.problems and mine.ids == ref.ids
    assert [u.memory_id for u in mine.units] == [u.memory_id for u in ref.units]
    assert cache.tree(texts, index, token, switches=current_switches()).topics[0] is mine.topics[0]  # reused


def test_runtime_json_rewritten_between_edits_is_read_again(ws, monkeypatch):
    """The committed runtime.json is taken from memory while its walk stamp is the one it was
    read under (``WorkspaceCache.by_stamp``); rewritten by another writer in between, of the
    same size too, it is read again: the edit gives what a fresh process gives."""
    from memory_tui.core.store import parsecache

    monkeypatch.setattr(parsecache, "RACY_NS", 20_000_000)
    mem = ws / "memory"
    runtime = mem / ".scriptorium" / "runtime.json"

    def add(state: Path, n: int) -> None:
        text = _cur(state, "topics/people/ada.md") + (f"\nAda walks {n}.[^w{n}]\n\n"
                                                       f"[^w{n}]: Time: `2026-11`; Sources: [walk]({IDS[2]})\n")
        assert tx.staged_edit(state, "topics/people/ada.md", text, git_commit="off").ok

    for n in range(3):  # the last two read runtime.json under an old stamp, so it is remembered by it
        add(ws, n)
        time.sleep(0.03)
    body = json.loads(runtime.read_text())
    order = body["creation_order"]
    first, second = sorted(order, key=order.get)[:2]
    order[first], order[second] = order[second], order[first]  # the same bytes, but two values swapped
    data = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    assert len(data) == runtime.stat().st_size and data != runtime.read_text()
    runtime.write_text(data)
    time.sleep(0.03)  # its new stamp older than the clock tick too
    fresh = ws.parent / "fresh"
    shutil.copytree(ws, fresh, symlinks=True)
    add(ws, 7)
    add(fresh, 7)  # another root: nothing of it in memory
    assert runtime.read_bytes() == (fresh / "memory" / ".scriptorium" / "runtime.json").read_bytes()
    assert json.loads(runtime.read_text())["creation_order"][first] == order[first]


def test_normalize_passthrough_needs_proof():
    staged = {"a.md": "# A\n\nFact.   [^e-0000000000] ^abcd1234\n\n[^e-0000000000]: Time: `2026`; Sources: [x](openprogram/s/m)\n"}
    full = normalize_tree(staged, committed=staged, committed_ids={"abcd1234"})
    trusting = normalize_tree(staged, committed=staged, committed_ids={"abcd1234"}, assume_committed_normal=True)
    careful = normalize_tree(staged, committed=staged, committed_ids={"abcd1234"}, assume_committed_normal=True,
                             proven_canonical=lambda p, t: False)
    assert trusting.texts == staged != full.texts
    assert careful.texts == full.texts


# -------------------------------------------------------------------------- lock narrowing


def test_workspace_moving_during_prepare_is_redone_under_lock(ws, monkeypatch):
    mem = ws / "memory"
    calls = []
    real = tx_prepare.prepare

    def racing(stage, ctx):
        if not calls:  # another process installs while we prepare outside the lock
            other = _cur(ws, "topics/people/ada.md") + f"\nAda sings.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [sing]({IDS[6]})\n"
            monkeypatch.setattr(tx_prepare, "prepare", real)
            assert tx.staged_edit(ws, "topics/people/ada.md", other, git_commit="off").ok
            monkeypatch.setattr(tx_prepare, "prepare", racing)
        calls.append(stage.revision)
        return real(stage, ctx)

    monkeypatch.setattr(tx_prepare, "prepare", racing)
    edit = _cur(ws, "topics/core.md") + f"\nThe user likes rain.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [rain]({IDS[3]})\n"
    result = tx.staged_edit(ws, "topics/core.md", edit, git_commit="off")
    assert result.ok, result
    assert len(calls) == 2 and calls[0] != calls[1]  # redone on the new revision
    assert "Ada sings." in (mem / "topics/people/ada.md").read_text()  # the other install survived
    assert "The user likes rain." in (mem / "topics/core.md").read_text()
    assert result.revision == workspace_revision(mem)


# ------------------------------------- one walk: the stage starts from the last install's stamps


def test_a_hand_edit_between_transactions_is_seen(ws, monkeypatch):
    """The next optimistic stage starts from the stamps the last install left; a writer that
    takes no lock changing a file in place right after (same size, inside the clock tick) is
    caught by the walk under the lock, and the edit is redone on the workspace as it is."""
    mem = ws / "memory"
    edit = _cur(ws, "topics/core.md") + f"\nThe user likes rain.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [rain]({IDS[3]})\n"
    assert tx.staged_edit(ws, "topics/core.md", edit, git_commit="off").ok
    reword = _cur(ws, "topics/core.md").replace("likes rain", "likes hail")  # one file per target
    assert tx.staged_edit(ws, "topics/core.md", reword, git_commit="off").ok
    ada = mem / "topics/people/ada.md"
    with open(ada, "r+b") as fh:  # in place: same inode, same size
        fh.write(ada.read_bytes().replace(b"drinks tea", b"drinks tee"))
    calls = []
    real = tx_prepare.prepare
    monkeypatch.setattr(tx_prepare, "prepare", lambda stage, ctx: calls.append(stage.revision) or real(stage, ctx))
    result = tx.staged_edit(ws, "topics/core.md", _cur(ws, "topics/core.md").replace("likes hail", "likes snow"), git_commit="off")
    assert result.ok, result
    assert len(calls) == 2 and calls[0] != calls[1]  # the pass on the remembered stamps was refused
    assert "drinks tee" in ada.read_text()
    assert "Ada drinks tee." in (mem / "timeline/2026/11/02.md").read_text()  # views of the hand-edited text
    assert result.revision == workspace_revision(mem)


def test_a_base_revision_read_after_a_hand_edit_is_current(ws):
    """A refusal is never decided on remembered stamps: the caller's revision, read after a
    hand edit, is the workspace's."""
    mem = ws / "memory"
    edit = _cur(ws, "topics/core.md") + f"\nThe user likes rain.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [rain]({IDS[3]})\n"
    assert tx.staged_edit(ws, "topics/core.md", edit, git_commit="off").ok
    reword = _cur(ws, "topics/core.md").replace("likes rain", "likes hail")  # one file per target
    assert tx.staged_edit(ws, "topics/core.md", reword, git_commit="off").ok
    with open(mem / "topics/people/ada.md", "a", encoding="utf-8") as fh:
        fh.write(f"\nAda sings.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [sing]({IDS[6]})\n")
    rev = workspace_revision(mem)
    result = tx.staged_edit(ws, "topics/core.md", _cur(ws, "topics/core.md").replace("likes hail", "likes snow"),
                            git_commit="off", base_revision=rev)
    assert result.ok, result
    assert result.revision == workspace_revision(mem) != rev
    stale = tx.staged_edit(ws, "topics/core.md", _cur(ws, "topics/core.md"), git_commit="off", base_revision=rev)
    assert not stale.ok and stale.code == "CONCURRENT_UPDATE"


def test_a_symlink_appearing_between_transactions_is_seen(ws, tmp_path):
    """Links are not part of the revision, so the walk under the lock compares them too: the
    edit after a link appeared answers as a fresh process would."""
    mem = ws / "memory"
    edit = _cur(ws, "topics/core.md") + f"\nThe user likes rain.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [rain]({IDS[3]})\n"
    assert tx.staged_edit(ws, "topics/core.md", edit, git_commit="off").ok
    outside = tmp_path / "outside.md"
    outside.write_text(ADA.replace("Ada", "Bob"))
    (mem / "topics" / "bob.md").symlink_to(outside)
    copy = tmp_path / "copy"
    shutil.copytree(ws, copy, symlinks=True)
    again = _cur(ws, "topics/core.md").replace("likes rain", "likes snow")
    here = tx.staged_edit(ws, "topics/core.md", again, git_commit="off")
    txcache.clear_caches()
    fresh = tx.staged_edit(copy, "topics/core.md", again, git_commit="off")
    assert (here.ok, here.code, here.message) == (fresh.ok, fresh.code, fresh.message)
    assert {p: b for p, b in _snapshot(mem).items()} == {p: b for p, b in _snapshot(copy / "memory").items()}


# ------------------------- inside the clock tick: the files young then are read again, not the stream


def _reword_twice(ws: Path) -> None:
    edit = _cur(ws, "topics/core.md") + f"\nThe user likes rain.[^e2]\n\n[^e2]: Time: `2026-11`; Sources: [rain]({IDS[3]})\n"
    assert tx.staged_edit(ws, "topics/core.md", edit, git_commit="off").ok
    reword = _cur(ws, "topics/core.md").replace("likes rain", "likes hail")  # one file per target
    assert tx.staged_edit(ws, "topics/core.md", reword, git_commit="off").ok


def test_an_edit_inside_the_clock_tick_does_not_hash_the_stream_again(ws, monkeypatch):
    """Right after an install every stamp it left is young; the walk under the lock then proves
    the workspace unchanged by reading again only the young files, not by re-hashing the
    revision stream from the first of them to the end (what made a one-record edit grow with
    the workspace)."""
    from memory_tui.core.store import parsecache
    monkeypatch.setattr(parsecache, "RACY_NS", 10**15)  # every stamp young, however slow the machine
    _reword_twice(ws)
    hashed = []
    real = revision.RevisionChain.revision
    monkeypatch.setattr(revision.RevisionChain, "revision", lambda self, *a, **k: hashed.append(a) or real(self, *a, **k))
    calls = []
    real_prepare = tx_prepare.prepare
    monkeypatch.setattr(tx_prepare, "prepare", lambda stage, ctx: calls.append(1) or real_prepare(stage, ctx))
    result = tx.staged_edit(ws, "topics/core.md", _cur(ws, "topics/core.md").replace("likes hail", "likes snow"),
                            git_commit="off")
    assert result.ok, result
    assert len(calls) == 1 and hashed == []  # one optimistic pass, accepted without a revision hash
    assert result.revision == workspace_revision(ws / "memory")


def test_a_same_stamp_write_inside_the_clock_tick_is_still_seen(ws, tmp_path, monkeypatch):
    """A writer without the lock rewriting a young file in place inside the tick can leave its
    stamp as it was; the walk under the lock then finds every stamp unchanged, and only the
    young file's bytes, read again, show the change: the optimistic pass is refused and the
    edit answers as a fresh process would."""
    mem = ws / "memory"
    _reword_twice(ws)
    remembered = txcache.cache_for(mem).revisions._walk
    assert remembered is not None
    core = mem / "topics/core.md"
    with open(core, "r+b") as fh:  # same size, in place
        fh.write(core.read_bytes().replace(b"likes hail", b"likes gale"))
    copy = tmp_path / "copy"
    shutil.copytree(ws, copy)
    walks = []
    real_walk = tx_stage.revision_walk

    def same_stamps(root, **kw):  # the first walk under the lock: as if the write kept core.md's stamp
        if not walks:
            walks.append(root)
            return dict(remembered[0]), remembered[1]
        return real_walk(root, **kw)

    monkeypatch.setattr(tx_stage, "revision_walk", same_stamps)
    calls = []
    real_prepare = tx_prepare.prepare
    monkeypatch.setattr(tx_prepare, "prepare", lambda stage, ctx: calls.append(1) or real_prepare(stage, ctx))
    ada = _cur(ws, "topics/people/ada.md").replace("drinks tea", "drinks milk")
    here = tx.staged_edit(ws, "topics/people/ada.md", ada, git_commit="off")
    assert here.ok, here
    assert walks and len(calls) == 2  # the pass on the unchanged stamps was refused, and redone
    assert here.revision == workspace_revision(mem)
    monkeypatch.setattr(tx_stage, "revision_walk", real_walk)
    txcache.clear_caches()
    fresh = tx.staged_edit(copy, "topics/people/ada.md", ada, git_commit="off")
    assert fresh.ok and fresh.revision == here.revision
    assert _snapshot(mem) == _snapshot(copy / "memory")


def _root_files(memory: Path) -> dict[str, bytes]:
    names = ("recent_events.jsonl", "commitments.jsonl", "relations.json", "core.md", ".scriptorium/runtime.json")
    return {n: (memory / n).read_bytes() for n in names if (memory / n).is_file()}


@pytest.mark.parametrize("derive", ["incremental", "full"])
def test_a_sparse_stage_copies_no_root_file_and_installs_what_a_full_stage_does(ws, tmp_path, monkeypatch, derive):
    """A hand edit's stage reads the committed root files instead of copying them in (they
    grow with the workspace) and holds only those it writes; the bytes installed are those a
    full stage (every root file copied, every one compared) installs."""
    other = tmp_path / "other"
    shutil.copytree(ws, other)
    copied: list[str] = []
    real_copy = tx_stage._copy_entry

    def spy(src: Path, dst: Path) -> None:
        copied.append(src.name)
        real_copy(src, dst)

    monkeypatch.setattr(tx_stage, "_copy_entry", spy)
    set_derive(monkeypatch, derive)  # ``full``: whole-tree stages, every root file copied
    committed = (ws / "memory" / "topics" / "people" / "ada.md").read_text()
    new = committed.replace("Ada drinks tea.", "Ada drinks green tea.") + (
        f"\nAda rows a boat.[^e2]\n\n[^e2]: Time: `2026-11-03`; Sources: [row]({IDS[2]})\n")
    memory = ws / "memory"
    before = _root_files(memory)
    inodes = {n: (memory / n).stat().st_ino for n in before}
    r = tx.staged_edit(ws, "topics/people/ada.md", new, git_commit="off")
    assert r.ok, r
    after = _root_files(memory)
    assert after[".scriptorium/runtime.json"] != before[".scriptorium/runtime.json"]  # the new record's order
    kept = [n for n in before if after.get(n) == before[n]]
    assert "core.md" in kept  # not the core's record: the rendered core is the same
    assert all((memory / n).stat().st_ino == inodes[n] for n in kept)  # not installed again
    if derive == "incremental":
        assert copied == []
    else:
        assert {"relations.json", "runtime.json"} <= set(copied)
    # the other copy, edited with every root file staged, ends with the same bytes
    set_derive(monkeypatch, "full")
    txcache.clear_caches()
    r2 = tx.staged_edit(other, "topics/people/ada.md", new, git_commit="off")
    assert r2.ok, r2
    assert _root_files(other / "memory") == after
    assert workspace_revision(other / "memory") == workspace_revision(ws / "memory") == r.revision



# ------------------------- the new revision is hashed when it is read, not by the edit itself


@pytest.mark.parametrize("young", [True, False])
def test_an_edit_leaves_its_revision_to_its_first_reader_and_it_is_exact(ws, monkeypatch, young):
    """The revision stream is hashed from the first changed file to the end, so an edit that
    hashed it would cost O(workspace). A run of edits whose results nobody reads hashes
    nothing; each result read afterwards -- after later edits, and after a writer without the
    lock changed a file -- is the revision that very edit left, as a fresh hash of the files
    right after it gave; a reader of the workspace now gets the current one."""
    from memory_tui.core.store import parsecache
    if young:  # every stamp inside the clock tick: the young files' bytes prove the next pass
        monkeypatch.setattr(parsecache, "RACY_NS", 10**15)
    mem = ws / "memory"
    _reword_twice(ws)
    hashed = []
    real = revstream.feed_planned
    monkeypatch.setattr(revstream, "feed_planned", lambda *a, **k: hashed.append(1) or real(*a, **k))
    prepares = []
    real_prepare = tx_prepare.prepare
    monkeypatch.setattr(tx_prepare, "prepare", lambda stage, ctx: prepares.append(1) or real_prepare(stage, ctx))
    results, truths = [], []
    for word in ("sleet", "mist", "fog", "dew"):
        text = re.sub(r"likes \w+", "likes " + word, _cur(ws, "topics/core.md"))
        result = tx.staged_edit(ws, "topics/core.md", text, git_commit="off")
        assert result.ok, result
        truths.append(workspace_revision(mem))  # from the files, by the reference code
        results.append(result)
    assert hashed == [] and len(prepares) == 4  # one optimistic pass each, and no hash
    (mem / "topics/people/ada.md").write_text(_cur(ws, "topics/people/ada.md").replace("tea", "tee"))
    assert [r.revision for r in results] == truths
    assert tx.staged_edit(ws, "topics/people/ada.md", _cur(ws, "topics/people/ada.md"), git_commit="off").revision \
        == workspace_revision(mem)


def test_the_installs_own_result_keeps_the_revision_for_the_next_process_a_reader_does_not(ws):
    """The revision memo (``revmemo``) is written by an install, never by a reader: a deferred
    install writes it when its own result is read, for the files as it left them."""
    from memory_tui.core.store import revmemo

    mem = ws / "memory"
    _reword_twice(ws)
    edit = re.sub(r"likes \w+", "likes frost", _cur(ws, "topics/core.md"))
    result = tx.staged_edit(ws, "topics/core.md", edit, git_commit="off")
    assert result.ok, result
    stamps = walk.revision_walk(mem, switches=current_switches())[0]
    assert revmemo.lookup(mem, stamps) is None  # not hashed yet, so not kept
    assert txcache.cache_for(mem).revision(stamps, switches=current_switches()) == workspace_revision(mem)  # a reader hashes it ...
    assert revmemo.lookup(mem, stamps) is None  # ... and writes nothing
    assert result.revision == workspace_revision(mem)  # the install's own result
    assert revmemo.lookup(mem, stamps) == result.revision
