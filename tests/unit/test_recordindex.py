"""The kept id -> file index of record ops (``recordindex``): ops run from it give exactly the
outcome (or the refusal) of scanning every file, and the entry a later process updates from
the files that changed equals one built from scratch."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.store import recordindex
from memory_tui.core.changes.records import apply_memory_changes
from memory_tui.core.changes.request import validate_memory_changes
from memory_tui.core.changes.workcopy import scan_summary
from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.paths import RUNTIME_DIR
from memory_tui.core.switches import IncrementalMismatch
from switching import set_derive

from test_record_ops_props import DUP, TAKEN, TEXTS, ops, settle

# z.md holds a label a create or an update would otherwise take (only the index knows it)
OWNED_TEXTS = dict(TEXTS, **{"z.md": "# Z\n" + TAKEN, "a/b.md": "# B\n\nBee.[^e-cccccccccc] ^bbbbbbbb\n\n"
                             "[^e-cccccccccc]: Time: `2026`; Sources: [c](p/t/c)\n"})


def _shas(texts):
    return {p: hashlib.sha256(t.encode("utf-8")).hexdigest() for p, t in texts.items()}


# every example's root inside one folder removed with the module (~900 per run were left in the temp dir)
_SCRATCH = tempfile.TemporaryDirectory(prefix="memory-tui-recordindex-")


def _root() -> Path:
    root = Path(tempfile.mkdtemp(dir=_SCRATCH.name))
    (root / RUNTIME_DIR).mkdir()
    return root


def _run(texts, raw, owned):
    try:
        return apply_memory_changes(texts, None, validate_memory_changes(raw), owned=owned)
    except MemoryError as exc:
        return ("refused", exc.code, exc.message, exc.path, exc.line, dict(exc.details))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=5))
def test_ops_from_the_index_give_the_outcome_of_full_scans(raw):
    owned = recordindex.owners(_root(), OWNED_TEXTS, _shas(OWNED_TEXTS))
    assert owned is not None
    assert _run(OWNED_TEXTS, raw, owned) == _run(OWNED_TEXTS, raw, None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=1, max_size=4), st.lists(ops, min_size=1, max_size=4))
def test_an_entry_updated_from_the_changed_files_equals_one_built_from_scratch(first, second):
    root = _root()
    assert recordindex.owners(root, OWNED_TEXTS, _shas(OWNED_TEXTS)) is not None
    out = _run(OWNED_TEXTS, first, None)
    if isinstance(out, tuple):
        return
    after = {p: settle(t) for p, t in out.texts.items() if t}
    updated = recordindex.owners(root, after, _shas(after))  # from the entry of OWNED_TEXTS
    scratch = recordindex.owners(_root(), after, _shas(after))
    if scratch is None:  # an op left one id in two files: the index is not used at all
        assert updated is None
        return
    assert updated is not None
    assert (updated.ids, updated.labels) == (scratch.ids, scratch.labels)
    assert _run(after, second, updated) == _run(after, second, None)
    again = recordindex.owners(root, after, _shas(after))  # written back: read as it is now
    assert (again.ids, again.labels) == (scratch.ids, scratch.labels)


def test_an_id_in_two_files_is_never_indexed():
    texts = dict(TEXTS, **{"a/dup.md": DUP})
    assert recordindex.owners(_root(), texts, _shas(texts)) is None
    root = _root()
    assert recordindex.owners(root, TEXTS, _shas(TEXTS)) is not None
    assert recordindex.owners(root, texts, _shas(texts)) is None  # nor when updating an entry


@pytest.mark.parametrize("damage", ["truncate", "flip", "wrong_kind", "old_version", "other_code", "missing"])
def test_a_damaged_or_foreign_entry_is_rebuilt(damage, monkeypatch):
    root = _root()
    want = recordindex.owners(root, OWNED_TEXTS, _shas(OWNED_TEXTS))
    path = root / RUNTIME_DIR / recordindex.NAME
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[:-5])
    elif damage == "flip":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif damage == "missing":
        path.unlink()
    elif damage in ("wrong_kind", "old_version"):
        from memory_tui.core.cache import envelope

        value = envelope.unpack(recordindex.KIND, data, recordindex.VERSION)
        assert value is not None
        if damage == "wrong_kind":
            path.write_bytes(envelope.pack("revision", value, recordindex.VERSION))
        else:
            path.write_bytes(envelope.pack(recordindex.KIND, value, recordindex.VERSION - 1))
    else:
        monkeypatch.setattr(recordindex, "code_tag", lambda: "0123456789abcdef")
    got = recordindex.owners(root, OWNED_TEXTS, _shas(OWNED_TEXTS))
    assert (got.ids, got.labels) == (want.ids, want.labels)
    assert "new-evidence-record-1" in got.labels


def test_the_summaries_given_build_the_same_entry():
    calls = []

    def summaries(path, text):
        calls.append(path)
        return scan_summary(path, text)

    a = recordindex.owners(_root(), OWNED_TEXTS, _shas(OWNED_TEXTS), summaries)
    b = recordindex.owners(_root(), OWNED_TEXTS, _shas(OWNED_TEXTS))
    assert sorted(calls) == sorted(OWNED_TEXTS)
    assert (a.ids, a.labels) == (b.ids, b.labels)


# --- through the transaction: fresh processes, the kept index against MEMORY_TUI_TEST_DERIVE=full

KYOTO = "topics/projects/kyoto-trip.md"


def _fixture_ops(mem: Path):
    from memory_tui.core.format.sources import SourceIndex
    from memory_tui.core.format.topics import parse_tree

    index = SourceIndex.load(mem)
    tree = parse_tree(mem / "topics", resolve=index.resolve_target)
    kyoto = tree.topic(KYOTO[len("topics/"):]).units
    other = next(t for t in tree.topics if t.path != KYOTO[len("topics/"):] and t.units).units
    return [
        [{"op": "update_record", "memory_id": kyoto[0].memory_id, "content": "Reworded once.", "time": kyoto[0].when,
          "source_refs": list(kyoto[0].source_refs)}],
        [{"op": "update_record", "memory_id": other[0].memory_id, "content": "Reworded elsewhere.",
          "time": other[0].when, "source_refs": list(other[0].source_refs)},
         {"op": "create_record", "content": "A new fact.", "time": None, "source_refs": list(kyoto[0].source_refs),
          "destination": {"topic_path": KYOTO, "headings": [], "position": "end"}}],
        [{"op": "delete_record", "memory_id": kyoto[-1].memory_id}],
        [{"op": "update_record", "memory_id": "ffffffff", "content": "No such id.", "time": None,
          "source_refs": list(kyoto[0].source_refs)}],
    ]


def _session(state: Path, mode: str, monkeypatch) -> list[tuple]:
    from memory_tui.core.tx import api as tx
    from memory_tui.core.store import txcache
    from memory_tui.core.store.workspace import workspace_revision

    set_derive(monkeypatch, mode)
    mem = state / "memory"
    out = []
    for ops_ in _fixture_ops(mem):
        txcache.clear_caches()
        r = tx.update(state, workspace_revision(mem), memory_changes=ops_, git_commit="off")
        out.append((r.ok, r.code, r.message, tuple(r.changed_files), dict(r.block_ids), dict(r.evidence_ids), r.revision))
    return out


def _files(mem: Path) -> dict[str, bytes]:
    return {p.relative_to(mem).as_posix(): p.read_bytes() for p in sorted(mem.rglob("*"))
            if p.is_file() and not p.relative_to(mem).as_posix().startswith((".git/", ".scriptorium/memory-tui"))}


def test_fresh_applies_from_the_kept_index_equal_the_full_path(fixture_state, tmp_path, monkeypatch):
    import shutil

    from memory_tui.core.changes.workcopy import WorkCopy

    full = tmp_path / "full"
    shutil.copytree(fixture_state, full, symlinks=True)
    owned_runs = []
    real = WorkCopy.__init__

    def spy(self, texts, link_for, summaries=None, owned=None):
        owned_runs.append(owned is not None)
        real(self, texts, link_for, summaries, owned)

    monkeypatch.setattr(WorkCopy, "__init__", spy)
    scanned = []
    real_scan = recordindex.scan_summary
    monkeypatch.setattr(recordindex, "scan_summary", lambda path, text: scanned.append(path) or real_scan(path, text))
    got = _session(fixture_state, "incremental", monkeypatch)
    assert owned_runs == [True] * 4  # the index was used by every apply
    # built once from the kept summaries, then updated from just the file each apply changed
    # (the stage's SHA-256s key it across processes)
    # (the first apply changed kyoto-trip.md, the second another file and kyoto-trip.md, the
    # third kyoto-trip.md; the fourth changed nothing)
    assert len(scanned) == 4 and scanned.count(KYOTO[len("topics/"):]) == 3, scanned
    owned_runs.clear()
    want = _session(full, "full", monkeypatch)
    assert owned_runs == [False] * 4
    assert got == want
    assert [r[0] for r in got] == [True, True, True, False] and got[3][1] == "MEMORY_NOT_FOUND"
    assert _files(fixture_state / "memory") == _files(full / "memory")
    assert (fixture_state / "memory" / RUNTIME_DIR / recordindex.NAME).is_file()
    assert not (full / "memory" / RUNTIME_DIR / recordindex.NAME).exists()


def test_check_mode_catches_a_lying_entry(fixture_state, monkeypatch):
    from memory_tui.core.store import txcache
    from memory_tui.core.cache import envelope
    from memory_tui.core.tx import api as tx
    from memory_tui.core.store.workspace import workspace_revision

    mem = fixture_state / "memory"
    ops_ = _fixture_ops(mem)[1]  # a create: its label is checked against the taken ones
    r = tx.update(fixture_state, workspace_revision(mem), memory_changes=_fixture_ops(mem)[0], git_commit="off")
    assert r.ok
    txcache.clear_caches()
    path = mem / RUNTIME_DIR / recordindex.NAME
    from memory_tui.core.changes.request import NEW_EVIDENCE_PREFIX

    # the entry of the current texts, rebuilt, then made to claim the first label is taken
    path.unlink()
    texts = {p.relative_to(mem / "topics").as_posix(): p.read_text(encoding="utf-8") for p in (mem / "topics").rglob("*.md")}
    assert recordindex.owners(mem, texts, _shas(texts)) is not None
    tag, shas, ids, labels = envelope.read(path, recordindex.KIND, recordindex.VERSION)
    labels = dict(labels, **{KYOTO[len("topics/"):]: (NEW_EVIDENCE_PREFIX + "1",)})
    path.write_bytes(envelope.pack(recordindex.KIND, (tag, shas, ids, labels), recordindex.VERSION))
    set_derive(monkeypatch, "check")
    with pytest.raises(IncrementalMismatch):
        tx.update(fixture_state, workspace_revision(mem), memory_changes=ops_, git_commit="off")


def test_never_written_through_a_symlinked_or_into_a_missing_runtime_dir(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / RUNTIME_DIR).symlink_to(elsewhere, target_is_directory=True)
    assert recordindex.owners(linked, OWNED_TEXTS, _shas(OWNED_TEXTS)) is not None  # still answers
    assert list(elsewhere.iterdir()) == []
    missing = tmp_path / "missing"
    missing.mkdir()
    assert recordindex.owners(missing, OWNED_TEXTS, _shas(OWNED_TEXTS)) is not None
    assert list(missing.iterdir()) == []


_ID = st.text(alphabet="ab\n", max_size=3)


@settings(max_examples=400, deadline=None)
@given(files=st.dictionaries(st.sampled_from(["a.md", "b.md", "c/d.md", "e.md"]),
                             st.lists(_ID, max_size=4).map(lambda ids: "\n" + "".join(i + "\n" for i in ids))
                             | st.text(alphabet="ab\n", max_size=6), max_size=4),
       asked=st.lists(_ID, max_size=8))
def test_the_finder_names_the_first_file_holding_an_id_line(files, asked):
    # the one-string search equals asking each file's lines in turn, for files as _entry
    # frames them and for any other strings (which take the per-file loop)
    finder = recordindex._Finder(files)
    for mid in asked + asked:
        want = None
        if mid and "\n" not in mid:
            want = next((path for path, held in files.items() if f"\n{mid}\n" in held), None)
        assert finder.get(mid) == want
