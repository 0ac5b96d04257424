"""The symlink suite: every path a user (or an attacker) can make a symbolic link, against
every writing verb, on a state where each verb has real work.

The rule (README, Guarantees): below the workspace root nothing is written through a link or
replaces one -- the verb is refused with ``PATH_OUTSIDE_WORKSPACE`` naming the link, and the
link and everything it points to stay byte for byte. ``memory/`` itself may be a link (a
workspace kept on another disk): it is resolved once when the verb opens it and every write
stays inside the resolved tree.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from memory_tui.cli import main
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.pipeline.write import Context, write
from memory_tui.pipeline.writers.base import WriterOutcome

ADA = "topics/people/ada.md"
ADA_ID = "fc30e0e0"
FOREIGN = "local_9f1e2d3c4b"  # its turns are pending here (marked by another workspace)
PENDING = "local_0c0c0c0c0c"  # turns pending even after the legacy cursors migrate
LEGACY_SID = "local_a1b2c3d4e5"


class _DoesNothing:
    name = "nothing"
    history: list = []

    def write(self, task, port):
        return WriterOutcome(changed_topics=(), summary="nothing")


@pytest.fixture(scope="module")
def busy_master(tmp_path_factory, request):
    """The OpenProgram fixture with real work for every writing verb: uncited archived turns
    (backfill), a duplicate record (reorganize), legacy cursors (migrate), a stale derived
    view (views --rebuild), pending turns (write)."""
    master = request.getfixturevalue("fixture_state_ro")
    root = tmp_path_factory.mktemp("busy") / "state"
    shutil.copytree(master, root, symlinks=True)
    ctx = Context(root, git_env=fixed_env(), clock=lambda: 1796100000.0, writer=_DoesNothing())
    write(ctx, FOREIGN, force=True)  # archived, not cited, not marked: backfill's work, still write's
    from memory_tui.core.tx import api as tx
    from memory_tui.core.store.workspace import workspace_revision

    mem = root / "memory"
    res = tx.update(mem, workspace_revision(mem), memory_changes=[{
        "op": "create_record", "content": "Ada is the traveller behind the Kyoto plan and wants short answers.",
        "time": "2026-11", "source_refs": [f"openprogram/{LEGACY_SID}/a00000000001"],
        "destination": {"topic_path": "topics/people/ada-copy.md", "headings": ["Ada"], "position": "end"},
    }], git_commit="off")
    assert res.ok, res
    rt = mem / ".scriptorium" / "runtime.json"
    data = json.loads(rt.read_text())
    data["cursors"] = {LEGACY_SID: {"message_id": "a00000000009_reply", "ordinal": 17}}
    rt.write_text(json.dumps(data, indent=2) + "\n")
    (mem / "recent_events.jsonl").write_text("")  # a derived view out of date
    return root


@pytest.fixture
def busy(busy_master, tmp_path):
    dest = tmp_path / "state"
    shutil.copytree(busy_master, dest, symlinks=True)
    return dest


def _verb_argv(verb: str, tmp: Path) -> list[str]:
    if verb == "edit":
        src = tmp / "ada-new.md"
        src.write_text("# Ada\n\nAda wants short answers.[^e-1] ^fc30e0e0\n\n"
                       "[^e-1]: Time: `2026-11`; Sources: [s](openprogram/local_a1b2c3d4e5/a00000000001)\n")
        return ["edit", ADA, "--from", str(src)]
    if verb == "apply":
        req = tmp / "req.json"
        req.write_text(json.dumps({"memory_changes": [{
            "op": "create_record", "content": "Ada likes tea.", "time": "2026-11",
            "source_refs": [f"openprogram/{LEGACY_SID}/a00000000001"],
            "destination": {"topic_path": ADA, "headings": ["Ada"], "position": "end"}}]}))
        return ["apply", str(req), "--base-revision", "current"]
    if verb == "record":
        return ["record", "update", ADA_ID, "--text", "Ada wants short answers, always."]
    return {
        "write": ["write", PENDING, "--force"],
        "reorganize": ["reorganize"],
        "backfill": ["backfill"],
        "views": ["views", "--rebuild"],
        "migrate": ["migrate"],
    }[verb]


VERBS = ("edit", "apply", "record", "write", "reorganize", "backfill", "views", "migrate")


def _run(capsys, state: Path, argv: list[str]) -> tuple[int, str]:
    code = main(["--state", str(state), *argv, "--json"])
    out, err = capsys.readouterr()
    return code, out + err


def _snapshot(path: Path) -> dict[str, bytes | None]:
    """Every entry under ``path`` (or the file itself): names and bytes, links as their target."""
    if path.is_file():
        return {"": path.read_bytes()}
    out: dict[str, bytes | None] = {}
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if p.is_symlink():
            out[rel] = os.readlink(p).encode()
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = None
    return out


def _link(state: Path, rel: str, outside: Path) -> Path:
    """Move ``state/rel`` to ``outside`` (or make an empty folder there) and link it back."""
    where = state / rel
    if where.exists():
        shutil.move(str(where), str(outside))
    else:
        outside.mkdir(parents=True)
        (outside / "placed-by-test").write_text("x")
    os.symlink(outside, where)
    return where


# Each entry: the path made a link, relative to the state dir.
LINKED = {
    "topic": f"memory/{ADA}",
    "runtime-dir": "memory/.scriptorium",
    "agent-history": "memory/.scriptorium/agent-history.jsonl",
    "writer-status": "memory/.scriptorium/writer-status.json",
    "workspace-cache": "memory/.scriptorium/memory-tui-cache",
    "git-dir": "memory/.git",
}


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("kind", sorted(LINKED))
def test_no_verb_writes_through_or_replaces_a_link(busy, tmp_path, capsys, kind, verb):
    outside = tmp_path / "outside" / kind
    outside.parent.mkdir()
    link = _link(busy, LINKED[kind], outside)
    target = os.readlink(link)
    before = _snapshot(outside)
    code, said = _run(capsys, busy, _verb_argv(verb, tmp_path))
    assert link.is_symlink() and os.readlink(link) == target, f"{kind}: the link was replaced by {verb}"
    assert _snapshot(outside) == before, f"{verb} wrote through the linked {kind}"
    assert code != 0, f"{verb} with a linked {kind} was not refused: {said[:600]}"
    assert "PATH_OUTSIDE_WORKSPACE" in said, said[:600]
    assert LINKED[kind].removeprefix("memory/") in said, f"the refusal does not name the link: {said[:600]}"


def test_apply_into_a_linked_topic_keeps_its_record_and_commits_nothing(busy, tmp_path, capsys):
    """The reported data loss: the link was replaced by a file holding only the new record."""
    outside = tmp_path / "ada-outside.md"
    link = _link(busy, LINKED["topic"], outside)
    head = (busy / "memory/.git/HEAD").read_text()
    log_before = sorted(p.name for p in (busy / "memory/.git/objects").rglob("*"))
    code, said = _run(capsys, busy, _verb_argv("apply", tmp_path))
    assert code == 1 and '"code": "PATH_OUTSIDE_WORKSPACE"' in said and ADA in said
    assert link.is_symlink() and ADA_ID in outside.read_text()
    assert (busy / "memory/.git/HEAD").read_text() == head
    assert sorted(p.name for p in (busy / "memory/.git/objects").rglob("*")) == log_before


def test_a_linked_memory_folder_is_followed_and_every_write_stays_in_it(busy, tmp_path, capsys):
    """A memory/ kept elsewhere on purpose: resolved once, each verb works on the resolved tree,
    the link stays, and nothing appears beside it in the state dir."""
    real = tmp_path / "disk" / "memory"
    real.parent.mkdir()
    link = _link(busy, "memory", real)
    state_entries = sorted(os.listdir(busy))
    for verb in VERBS:
        code, said = _run(capsys, busy, _verb_argv(verb, tmp_path))
        if verb == "backfill":  # exits 1 while sources stay uncited (the writer declined some)
            assert code in (0, 1) and json.loads(said)["status"] in ("ok", "incomplete"), said[:800]
            assert json.loads(said)["processed"] >= 1, said[:800]
        else:
            assert code == 0, (verb, said[:800])
        if verb == "write":
            assert json.loads(said)["written_batches"] >= 1, said[:800]
        assert link.is_symlink() and Path(os.readlink(link)) == real
        assert sorted(os.listdir(busy)) == state_entries
    text = (real / ADA).read_text()
    assert "Ada likes tea." in text  # apply landed in the resolved tree
    assert json.loads((real / ".scriptorium/runtime.json").read_text()).get("cursors") is None  # migrate too
    assert not (real.parent / ".scriptorium-stage").exists() and not (busy / ".scriptorium-stage").exists()


def test_a_linked_memory_folder_is_resolved_once_per_job(busy, tmp_path, monkeypatch):
    """A link moved while a job runs does not move its writes: the job keeps the tree it
    resolved when it opened."""
    real = tmp_path / "disk" / "memory"
    real.parent.mkdir()
    link = _link(busy, "memory", real)
    ctx = Context(busy, git_env=fixed_env(), clock=lambda: 1796100000.0)
    opened = ctx.memory_root
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    link.unlink()
    os.symlink(decoy, link)
    assert ctx.memory_root == opened == real.resolve()
    report = write(ctx, PENDING, force=True)
    assert report.outcome.failed is False and report.written, report.to_json()
    assert list(decoy.iterdir()) == []


def test_migrate_keeps_cursors_when_a_session_folder_is_a_link(busy, tmp_path, capsys):
    """Cursors stand for marks; a session folder that is a link is never marked, so its cursor stays."""
    outside = tmp_path / "outside-session"
    link = _link(busy, f"sessions/{LEGACY_SID}", outside)
    before = _snapshot(outside)
    code, said = _run(capsys, busy, ["migrate"])
    assert code != 0, said
    assert "PATH_OUTSIDE_WORKSPACE" in said and LEGACY_SID in said
    runtime = json.loads((busy / "memory/.scriptorium/runtime.json").read_text())
    assert LEGACY_SID in runtime.get("cursors", {}), "cursors removed although no mark landed"
    assert _snapshot(outside) == before and link.is_symlink()


@pytest.mark.parametrize("rel,verb", [
    (f"memory/sources/openprogram/_v2/{PENDING}.md", "write"),  # the archive the batch appends to
    ("memory/timeline/2026/11.md", "views"),  # a derived file the rebuild rewrites
    ("memory/recent_events.jsonl", "views"),
])
def test_an_install_never_replaces_or_writes_through_a_linked_file(busy, tmp_path, capsys, rel, verb):
    """Links below a tree memory-tui writes that no folder check sees: the file an operation
    changes is itself a link. The installer (and the archive appender) refuse, naming it."""
    outside = tmp_path / "outside-file"
    link = _link(busy, rel, outside)
    if verb == "views":
        outside.write_text("out of date\n")  # the rebuild must rewrite it
    before = outside.read_bytes()
    code, said = _run(capsys, busy, _verb_argv(verb, tmp_path))
    assert link.is_symlink() and outside.read_bytes() == before
    assert code != 0, said[:800]
    if verb == "write":  # the appender's own refusal, in OpenProgram's words (spec §7.4: APPEND_REFUSED)
        assert "source archive path escapes sources/" in said, said[:800]
    else:
        assert "PATH_OUTSIDE_WORKSPACE" in said and rel.removeprefix("memory/") in said, said[:800]


@pytest.mark.parametrize("writer", ["atomic_write", "replace_cache_file"])
def test_the_shared_file_writers_never_replace_a_link(tmp_path, writer):
    """Below every caller (status files, marks, archives, every cache, the user's cache folder
    included): a target that is itself a link is refused with ELOOP, the link and its target kept."""
    import errno

    from memory_tui.core import fsutil

    target = tmp_path / "elsewhere.json"
    target.write_bytes(b"theirs")
    link = tmp_path / "cache.json"
    os.symlink(target, link)
    with pytest.raises(OSError) as refused:
        getattr(fsutil, writer)(link, b"ours")
    assert refused.value.errno == errno.ELOOP and refused.value.filename == str(link)
    assert link.is_symlink() and target.read_bytes() == b"theirs"
    assert sorted(os.listdir(tmp_path)) == ["cache.json", "elsewhere.json"]  # no temp file left
