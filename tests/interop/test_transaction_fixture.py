"""The transaction core against OpenProgram's own state directory."""

from __future__ import annotations

import os
import subprocess

from memory_tui.core.store import gitlog
from memory_tui.core.tx import api as tx
from memory_tui.core.tx.stage import source_index
from memory_tui.core.format.normalize import normalize_tree
from memory_tui.core.format.topics import read_topic_texts
from memory_tui.core.store.workspace import check_views
from memory_tui.core.store.workspace import workspace_revision

ENV = gitlog.fixed_env()


def _bytes(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def test_views_rebuild_byte_equal_and_noop(fixture_state, expected):
    root = fixture_state / "memory"
    assert check_views(root, state_dir=fixture_state) == []
    before = _bytes(root)
    result = tx.rebuild_views(fixture_state)
    assert result.ok and result.changed_files == ()
    assert result.revision == expected["revision"] == workspace_revision(root)
    assert result.core.tokens == expected["core"]["rendered_tokens"]
    assert list(result.core.omitted_ids) == expected["core"]["omitted_block_ids"]
    assert _bytes(root) == before


def test_normalising_normal_topics_changes_nothing(fixture_state):
    root = fixture_state / "memory"
    texts, _ = read_topic_texts(root / "topics")
    index = source_index(root)
    result = normalize_tree(texts, committed=texts, resolve=index.resolve_target, link_for=index.link_for)
    assert result.texts == texts and result.block_ids == {} and result.errors == ()


def test_noop_edit_keeps_revision_and_runtime_json(fixture_state, expected):
    root = fixture_state / "memory"
    runtime = (root / ".scriptorium" / "runtime.json").read_bytes()
    # pitfall 1: a legacy key we do not own must survive any transaction
    patched = runtime.replace(b'  "creation_order"', b'  "cursors": {"s": {"message_id": "m", "ordinal": 1}},\n  "creation_order"')
    (root / ".scriptorium" / "runtime.json").write_bytes(patched)
    rev = workspace_revision(root)
    head = gitlog.head(root)
    text = (root / "topics/people/ada.md").read_text()
    result = tx.staged_edit(fixture_state, "topics/people/ada.md", text, git_env=ENV)
    assert result.ok and result.changed_files == () and result.revision == rev
    assert (root / ".scriptorium" / "runtime.json").read_bytes() == patched
    assert gitlog.head(root) == head
    # a real edit keeps the unknown key too
    new = text.rstrip("\n") + "\n\nAda packs light.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [n](openprogram/local_a1b2c3d4e5/a00000000002)\n"
    result = tx.staged_edit(fixture_state, "topics/people/ada.md", new, git_env=ENV)
    assert result.ok, result.message
    assert b'"cursors": {' in (root / ".scriptorium" / "runtime.json").read_bytes()


def test_update_cas_and_result_shape(fixture_state, expected):
    root = fixture_state / "memory"
    stale = tx.update(fixture_state, "0" * 32, memory_changes=[{"op": "delete_record", "memory_id": "c1619bbc"}])
    err = stale.to_json()
    assert err == {"ok": False, "error": {"code": "CONCURRENT_UPDATE", "message": "workspace changed since base_revision was read",
                                          "path": None, "details": {"base_revision": "0" * 32, "revision": expected["revision"]}}}
    ok = tx.update(fixture_state, expected["revision"], memory_changes=[{"op": "delete_record", "memory_id": "c1619bbc"}],
                   git_env=ENV)
    out = ok.to_json()
    assert out["ok"] and out["memory_committed"] and out["git_committed"]
    assert list(out)[:9] == ["ok", "revision", "source_ids", "block_ids", "evidence_ids", "changed_files",
                             "memory_committed", "git_committed", "git_commit"]
    assert "topics/projects/kyoto-trip.md" in out["changed_files"]
    assert out["revision"] == workspace_revision(root)
    # whole-file changes may not newly cite an already archived source (pitfall 5: rule named)
    text = (root / "topics/people/ada.md").read_text()
    new = text + "\nMore.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [n](openprogram/local_a1b2c3d4e5/a00000000002)\n"
    res = tx.update(fixture_state, out["revision"], changes=[{"path": "topics/people/ada.md", "action": "write", "content": new}])
    assert not res.ok and "not evidence of this transaction" in res.message and "whole-file/patch rule" in res.message
    assert res.line is not None


def test_git_on_with_nothing_to_commit_says_so(fixture_state, expected):
    res = tx.update(fixture_state, expected["revision"], changes=[{"path": "topics/people/ada.md", "action": "write",
                    "content": (fixture_state / "memory/topics/people/ada.md").read_text()}], git_commit="on", git_env=ENV)
    assert res.code == "GIT_COMMIT_FAILED" and "nothing to commit" in res.message
    assert res.details["memory_committed"] is True and res.details["git_committed"] is False


def test_git_refusal_is_reported_not_hidden(fixture_state):
    root = fixture_state / "memory"
    # make git refuse the repository (a corrupt HEAD): memory is still installed, git says why
    (root / ".git" / "HEAD").write_text("garbage\n")
    text = (root / "topics/people/ada.md").read_text().replace("wants short answers", "wants very short answers")
    res = tx.staged_edit(fixture_state, "topics/people/ada.md", text, git_env=ENV)
    assert res.ok and res.memory_committed and not res.git_committed
    assert res.git_error and res.warnings and "Git commit failed" in res.warnings[0]
    assert "very short" in (root / "topics/people/ada.md").read_text()


def test_initialises_missing_history_like_openprogram(fixture_state):
    root = fixture_state / "memory"
    subprocess.run(["rm", "-rf", str(root / ".git")], check=True)
    text = (root / "topics/people/ada.md").read_text().replace("short answers", "brief answers")
    res = tx.staged_edit(fixture_state, "topics/people/ada.md", text, git_env=ENV)
    assert res.ok and res.git_committed
    log = subprocess.run(["git", "log", "--format=%an <%ae>|%s"], cwd=root, capture_output=True, text=True).stdout.splitlines()
    assert log == ["OpenProgram Memory <memory@openprogram.local>|memory: edit topics/people/ada.md",
                   "OpenProgram Memory <memory@openprogram.local>|memory: initialize history"]
    assert (root / ".git/openprogram-memory-ready").read_text() == "ready\n"
    exclude = (root / ".git/info/exclude").read_text().splitlines()
    assert "/.scriptorium*" in exclude and "/.nativemem*" in exclude
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True).stdout
    assert ".scriptorium" not in tracked


def test_writer_stage_commit(fixture_state, expected):
    root = fixture_state / "memory"
    with tx.open_stage(fixture_state, restricted=True, allowed_refs={"openprogram/local_a1b2c3d4e5/a00000000002"}) as stage:
        assert not (stage.path / "sources").exists()
        p = stage.topics / "people/ada.md"
        p.write_text(p.read_text() + "\nAda writes.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [n](openprogram/local_a1b2c3d4e5/a00000000002)\n")
        res = tx.commit_edits(stage)
        assert res.ok, res.message
        assert not res.git_committed
    with tx.open_stage(fixture_state, restricted=True, allowed_refs=set()) as stage:
        p = stage.topics / "people/ada.md"
        p.write_text(p.read_text() + "\nMore.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [n](openprogram/local_a1b2c3d4e5/a00000000001_reply)\n")
        res = tx.commit_edits(stage)
        assert not res.ok and "not evidence of this transaction" in res.message
    with tx.open_stage(fixture_state) as stage:
        assert oct((stage.path / "sources/openprogram/_v2/local_a1b2c3d4e5.md").stat().st_mode & 0o777) == "0o444"
        tx.staged_edit(fixture_state, "topics/people/ada.md", (root / "topics/people/ada.md").read_text() + "\nX.[^e1]\n\n[^e1]: Time: `2026`; Sources: [n](openprogram/local_a1b2c3d4e5/a00000000002)\n", git_env=ENV)
        res = tx.commit_edits(stage)
        assert res.code == "CONCURRENT_UPDATE" and res.message == "workspace changed while the writer was running"
