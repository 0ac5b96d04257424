"""Sparse stages (only the files a transaction adds or replaces, plus what it drops): the
plan and the install must reach exactly the state a full stage reaches, one changed file
becomes one atomic rename that leaves every other file's inode alone, and a kill at any
crash point still recovers to exactly the old or the new revision."""

from __future__ import annotations

import os
import stat

import pytest

from memory_tui.core.format.errors import MemoryError

from memory_tui.core import switches
from memory_tui.core.store import install as inst
from memory_tui.core.store.workspace import workspace_revision

from test_install_support import INTERNAL, STATE_A, STATE_B, assert_valid, make_stage, make_workspace, snapshot

ROOT_FILES = (*inst.FILE_TARGETS, ".scriptorium/runtime.json")


def sparse_stage(path, old: dict[str, str], new: dict[str, str]):
    """The sparse stage taking ``old`` to ``new``: tree and root files only where they differ
    (sources whole, as a transaction's stage holds the archives it appends to); and the drops
    per tree and of the root files."""
    files = {rel: text for rel, text in new.items() if rel.startswith("sources/") or old.get(rel) != text}
    drops = {name: frozenset(rel[len(name) + 1:] for rel in old if rel.startswith(name + "/") and rel not in new)
             for name in ("topics", "timeline")}
    drops[inst.ROOT_DROPS] = frozenset(rel for rel in old if rel in ROOT_FILES and rel not in new)
    stage = make_stage(path, files)
    for name in drops:
        (stage / name).mkdir(exist_ok=True)
    return stage, drops


def _stamps(root, rels):
    out = {}
    for rel in rels:
        st = os.stat(root / rel)
        out[rel] = (st.st_ino, st.st_ctime_ns, st.st_nlink)
    return out


def test_sparse_plan_of_a_multi_file_change_equals_the_full_plan(tmp_path):
    root = make_workspace(tmp_path / "m", STATE_A)
    full = inst.plan_install(root, make_stage(tmp_path / "full", STATE_B))
    stage, drops = sparse_stage(tmp_path / "sparse", STATE_A, STATE_B)
    plan = inst.plan_install(root, stage, sparse=drops)
    assert [t.to_json() for t in plan.targets] == [t.to_json() for t in full.targets]
    assert plan.changed_files == full.changed_files
    assert dict(plan.sparse) == {"topics": frozenset({"projects/old.md"}), "timeline": frozenset()}
    inst.install(root, stage, plan)
    assert snapshot(root) == {k: v.encode() for k, v in {**STATE_B, **INTERNAL}.items()}
    assert inst.plan_install(root, make_stage(tmp_path / "again", STATE_B)).empty


def test_one_changed_file_is_one_rename_and_nothing_else_is_touched(tmp_path):
    new = dict(STATE_A, **{"topics/people/ada.md": STATE_A["topics/people/ada.md"].replace("trains", "boats")})
    root = make_workspace(tmp_path / "m", STATE_A)
    os.chmod(root / "topics", 0o755)
    others = ["topics/core.md", "topics/projects/old.md", "timeline/2026/11.md"]
    before = _stamps(root, others)
    stage, drops = sparse_stage(tmp_path / "sparse", STATE_A, new)
    plan = inst.plan_install(root, stage, sparse=drops)
    assert [(t.kind, t.path) for t in plan.targets] == [("file", "topics/people/ada.md")]
    assert plan.changed_files == ("topics/people/ada.md",) and plan.sparse == ()
    inst.install(root, stage, plan)
    assert snapshot(root) == {k: v.encode() for k, v in {**new, **INTERNAL}.items()}
    assert _stamps(root, others) == before  # no link, no copy, no chmod: every stamp stays
    assert stat.S_IMODE((root / "topics/people/ada.md").stat().st_mode) == 0o600
    for rel in ("topics", "topics/people"):
        assert stat.S_IMODE((root / rel).stat().st_mode) == 0o700, rel
    assert inst.plan_install(root, stage, sparse=drops).empty


def test_a_new_file_in_a_new_folder_and_an_unchanged_stage(tmp_path):
    new = dict(STATE_A, **{"topics/fresh/deep/n.md": STATE_B["topics/projects/new/plan.md"]})
    root = make_workspace(tmp_path / "m", STATE_A)
    stage, drops = sparse_stage(tmp_path / "sparse", STATE_A, new)
    plan = inst.plan_install(root, stage, sparse=drops)
    assert [(t.kind, t.path, t.old) for t in plan.targets] == [("file", "topics/fresh/deep/n.md", None)]
    inst.install(root, stage, plan)
    assert snapshot(root) == {k: v.encode() for k, v in {**new, **INTERNAL}.items()}
    assert stat.S_IMODE((root / "topics/fresh/deep").stat().st_mode) == 0o700
    same, same_drops = sparse_stage(tmp_path / "same", new, new)
    assert inst.plan_install(root, same, sparse=same_drops).empty


def test_a_drop_alone_or_a_linked_folder_takes_the_tree_exchange(tmp_path):
    new = {k: v for k, v in STATE_A.items() if k != "topics/projects/old.md"}
    root = make_workspace(tmp_path / "m", STATE_A)
    stage, drops = sparse_stage(tmp_path / "sparse", STATE_A, new)
    plan = inst.plan_install(root, stage, sparse=drops)
    assert [(t.kind, t.path) for t in plan.targets] == [("tree", "topics")]
    inst.install(root, stage, plan)
    assert snapshot(root) == {k: v.encode() for k, v in {**new, **INTERNAL}.items()}
    assert not (root / "topics/projects").exists()  # an emptied folder goes, as with a full stage

    root2 = make_workspace(tmp_path / "m2", STATE_A)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.md").write_text("outside\n")
    os.symlink(tmp_path / "elsewhere", root2 / "topics" / "linked")
    changed = dict(STATE_A, **{"topics/linked/x.md": "changed\n"})
    stage2, drops2 = sparse_stage(tmp_path / "sparse2", STATE_A, changed)
    # never a rename through the link, and never the exchange that would replace it with a
    # real folder: the plan itself is refused, naming the link
    with pytest.raises(MemoryError) as refused:
        inst.plan_install(root2, stage2, sparse=drops2)
    assert refused.value.code == "PATH_OUTSIDE_WORKSPACE" and refused.value.path == "topics/linked"
    assert os.path.islink(root2 / "topics" / "linked")


def test_a_stage_that_both_replaces_and_drops_a_file_is_refused(tmp_path):
    root = make_workspace(tmp_path / "m", STATE_A)
    stage, _ = sparse_stage(tmp_path / "s", STATE_A, dict(STATE_A, **{"topics/core.md": "x\n"}))
    with pytest.raises(ValueError):
        inst.plan_install(root, stage, sparse={"topics": frozenset({"core.md"}), "timeline": frozenset()})


def _count_points(root, stage, drops) -> int:
    seen = []
    orig = inst._crash_point
    inst._crash_point = lambda label: seen.append(label)
    try:
        inst.install(root, stage, inst.plan_install(root, stage, sparse=drops))
    finally:
        inst._crash_point = orig
    return len(seen)


ONE_FILE = dict(STATE_A, **{"topics/people/ada.md": STATE_A["topics/people/ada.md"].replace("trains", "boats")})


@pytest.mark.slow
@pytest.mark.parametrize("new", [ONE_FILE, STATE_B], ids=["one-file", "overlay-tree"])
def test_crash_at_every_step_of_a_sparse_install(tmp_path, new):
    ra = workspace_revision(make_workspace(tmp_path / "ra", STATE_A))
    rb = workspace_revision(make_workspace(tmp_path / "rb", new))
    n = _count_points(make_workspace(tmp_path / "count", STATE_A), *sparse_stage(tmp_path / "count-stage", STATE_A, new))
    assert n >= 5
    outcomes = []
    for step in range(1, n + 2):
        root = make_workspace(tmp_path / f"ws{step}", STATE_A)
        stage, drops = sparse_stage(tmp_path / f"stage{step}", STATE_A, new)
        pid = os.fork()
        if pid == 0:
            try:
                os.environ[switches.CRASH_ENV] = str(step)
                switches.reload()  # this child's own switches: die at crash point ``step``
                inst._crash_counter = 0
                inst.install(root, stage, inst.plan_install(root, stage, sparse=drops))
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        died = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 86
        assert died == (step <= n), (step, status)
        inst.recover(root)
        rev = workspace_revision(root)
        assert rev in (ra, rb), step
        assert not (root / ".scriptorium-txn").exists()
        assert not (root / ".scriptorium" / inst.JOURNAL_NAME).exists()
        assert_valid(root)
        outcomes.append("new" if rev == rb else "old")
    assert outcomes[0] == "old" and outcomes[-1] == "new"
