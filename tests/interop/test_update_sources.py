"""``update(..., sources=[...])`` with provenance (memory spec §5.3 steps 2, 4, 5): sources are
archived into the stage as trusted ``claude-code`` frames with content-addressed ids, labels are
replaced, exactly those ids may be newly cited, and the archive lands with the topics or not at
all. Runs on a private copy of OpenProgram's fixture state dir (skips when it is absent)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from memory_tui.cli import main
from memory_tui.core.tx import api as tx
from memory_tui.core.tx.provenance import Provenance, transaction_source_records
from memory_tui.core.changes.request import NewSource
from memory_tui.core.format.sources import SourceIndex, archive_path, decode_meta
from memory_tui.core.format.topics import parse_tree
from memory_tui.core.store.workspace import workspace_revision

US = "\x1f"
PROV = Provenance("owner/install/ef943b18af0244d0", "owner", "owner/local", "owner", "memory-tui/apply")
TEA = {"label": "new-source-tea", "role": "user", "content": "I drink genmaicha now.",
       "observed_at": "2026-11-02T10:00:00+01:00"}
RAIN = {"label": "new-source-rain", "role": "assistant", "content": "Noted: rain walks.\nEvery day."}


def _create(label: str, content: str = "Ada drinks genmaicha.", headings=("Ada", "Drinks")) -> dict:
    return {"op": "create_record", "content": content, "time": "2026-11", "source_refs": [label],
            "destination": {"topic_path": "topics/people/ada.md", "headings": list(headings), "position": "end"}}


def _expected_ids(prov: Provenance, sources: list[dict]) -> list[str]:
    """The §5.3 step 4 formula, written out independently of the implementation."""
    seed = US.join([prov.principal_id, prov.speaker_kind, prov.speaker_id, prov.authority_tier, prov.origin_id])
    rows = [US.join([s["role"], s["content"], s.get("observed_at") or ""]) for s in sources]
    thread = hashlib.sha256((seed + "\n" + "\n".join(rows)).encode()).hexdigest()[:16]
    out = []
    for n, s in enumerate(sources, start=1):
        msg = US.join([seed, thread, str(n), s["role"], s["content"], s.get("observed_at") or ""])
        out.append(f"claude-code/{thread}/{hashlib.sha256(msg.encode()).hexdigest()[:16]}")
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------ ids


def test_ids_follow_the_formula_and_are_deterministic():
    sources = [NewSource(**TEA), NewSource(**RAIN)]
    first = [r.source_id for _, r in transaction_source_records(sources, PROV)]
    assert first == _expected_ids(PROV, [TEA, RAIN])
    assert [r.source_id for _, r in transaction_source_records(sources, PROV)] == first
    other = Provenance(PROV.principal_id, "owner", "owner/local", "owner", "owner-rest/memory-changes")
    assert [r.source_id for _, r in transaction_source_records(sources, other)][0].split("/")[1] != first[0].split("/")[1]
    label, rec = transaction_source_records(sources, PROV)[0]
    assert label == "new-source-tea" and rec.ordinal == 1 and rec.timestamp == TEA["observed_at"]
    assert rec.trust_state == "trusted" and rec.authority_tier == "owner" and rec.speaker_id == "owner/local"


# ----------------------------------------------------------------------------- the transaction


def test_cited_new_source_is_installed_trusted_and_resolvable(fixture_state):
    root = fixture_state / "memory"
    rev = workspace_revision(root)
    result = tx.update(fixture_state, rev, memory_changes=[_create("new-source-tea")], sources=[TEA, RAIN],
                       git_commit="off", provenance=PROV)
    assert result.ok, result
    tea, rain = _expected_ids(PROV, [TEA, RAIN])
    assert dict(result.source_ids) == {"new-source-tea": tea, "new-source-rain": rain}
    archive = archive_path(tea)
    assert archive in result.changed_files
    assert (root / archive).stat().st_mode & 0o777 == 0o600
    index = SourceIndex.load(root)
    assert index.is_trusted(tea) and index.is_trusted(rain) and index.complete(archive)
    frame = index.v2_frame(tea)
    assert frame.text == TEA["content"] and frame.timestamp == TEA["observed_at"]
    meta = decode_meta(frame.meta_token)
    assert (meta.trust_state, meta.speaker_kind, meta.principal_id, meta.authority_tier) == (
        "trusted", "owner", PROV.principal_id, "owner")
    assert index.v2_frame(rain).lines == ("[] owner/local: Noted: rain walks.", "Every day.")
    tree = parse_tree(root / "topics", resolve=index.resolve_target)
    assert tree.ok, tree.errors
    unit = tree.by_id(result.block_ids["topics/people/ada.md#0"])
    assert unit.source_refs == (tea,) and index.validate_ref(tea) is None
    # the other committed archives were not touched
    assert sorted(p.name for p in (root / "sources/openprogram/_v2").iterdir()) == sorted(
        p.name for p in (fixture_state / "memory/sources/openprogram/_v2").iterdir())


def test_retry_archives_the_same_ids_once(fixture_state):
    root = fixture_state / "memory"
    first = tx.update(fixture_state, workspace_revision(root), memory_changes=[_create("new-source-tea")],
                      sources=[TEA], git_commit="off", provenance=PROV)
    assert first.ok, first
    archive = root / archive_path(first.source_ids["new-source-tea"])
    before = archive.read_bytes()
    checked = tx.update(fixture_state, workspace_revision(root), sources=[TEA], git_commit="off", provenance=PROV,
                        memory_changes=[_create("new-source-tea", "Ada likes genmaicha hot.", ("Ada", "Habits"))],
                        validate_only=True)
    again = tx.update(fixture_state, workspace_revision(root), sources=[TEA], git_commit="off", provenance=PROV,
                      memory_changes=[_create("new-source-tea", "Ada likes genmaicha hot.", ("Ada", "Habits"))])
    assert again.ok, again
    assert checked.source_ids == again.source_ids == first.source_ids
    assert archive.read_bytes() == before  # the frame is already there: skipped, not duplicated
    assert not any(f.startswith("sources/") for f in again.changed_files)
    assert before.count(b"<!-- source-id:") == 1


def test_whole_file_change_may_cite_the_new_source_only(fixture_state):
    root = fixture_state / "memory"
    text = (root / "topics/people/ada.md").read_text()
    new = text + "\nAda drinks genmaicha.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [tea](new-source-tea)\n"
    result = tx.update(fixture_state, workspace_revision(root), sources=[TEA, RAIN], git_commit="off",
                       provenance=PROV, changes=[{"path": "topics/people/ada.md", "action": "write", "content": new}])
    assert result.ok, result
    sid, rain = result.source_ids["new-source-tea"], result.source_ids["new-source-rain"]
    index = SourceIndex.load(root)
    cited = [u for u in parse_tree(root / "topics", resolve=index.resolve_target).units if sid in u.source_refs]
    assert [u.content for u in cited] == ["Ada drinks genmaicha."] and index.is_trusted(sid)
    # the rain source is archived now but uncited; a later whole-file change may not cite it
    # (only sources archived in the same transaction, pitfall 5), even when it declares others
    text = (root / "topics/people/ada.md").read_text()
    bad = text + f"\nAda walks in the rain.[^e9]\n\n[^e9]: Time: `2026-11`; Sources: [rain]({rain})\n"
    before = _files(root)
    refused = tx.update(fixture_state, workspace_revision(root), sources=[{**TEA, "content": "Other."}],
                        git_commit="off", provenance=PROV,
                        changes=[{"path": "topics/people/ada.md", "action": "write", "content": bad}])
    assert not refused.ok and "same transaction" in refused.message, refused
    assert _files(root) == before


def test_undeclared_label_is_missing_source_and_changes_nothing(fixture_state):
    root = fixture_state / "memory"
    before = _files(root)
    result = tx.update(fixture_state, workspace_revision(root), memory_changes=[_create("new-source-coffee")],
                       sources=[TEA], git_commit="off", provenance=PROV)
    assert not result.ok and result.code == "MISSING_SOURCE"
    assert "new-source-coffee" in result.message
    assert _files(root) == before


def test_rejected_change_leaves_no_archive(fixture_state):
    root = fixture_state / "memory"
    before = _files(root)
    bad = _create("new-source-tea")
    bad["destination"]["topic_path"] = "notes/ada.txt"
    result = tx.update(fixture_state, workspace_revision(root), memory_changes=[bad], sources=[TEA],
                       git_commit="off", provenance=PROV)
    assert not result.ok
    assert _files(root) == before and not (root / "sources/claude-code").exists()


def test_without_provenance_sources_are_refused(fixture_state):
    root = fixture_state / "memory"
    before = _files(root)
    for prov in (None, Provenance(PROV.principal_id, "owner", "owner/local", "", "x"),
                 Provenance("", "owner", "owner/local", "owner", "x")):
        result = tx.update(fixture_state, workspace_revision(root), memory_changes=[_create("new-source-tea")],
                           sources=[TEA], git_commit="off", provenance=prov)
        assert not result.ok and result.code == "WRITER_PRECONDITION_FAILED"
        assert result.message == "creating a source requires complete persisted authority"
    assert _files(root) == before


# ---------------------------------------------------------------------------------------- CLI


def test_cli_apply_archives_sources_as_the_owner(fixture_state, tmp_path, capsys):
    root = fixture_state / "memory"
    principal = json.loads((fixture_state / "owner.json").read_text())["principal_id"]
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"memory_changes": [_create("new-source-tea")], "sources": [TEA], "git_commit": "off"}))
    code = main(["--state", str(fixture_state), "apply", str(req), "--base-revision", workspace_revision(root), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0, data
    owner = Provenance(principal, "owner", "owner/local", "owner", "owner-rest/memory-changes")
    (sid,) = _expected_ids(owner, [TEA])
    assert data["source_ids"] == {"new-source-tea": sid}
    frame = SourceIndex.load(root).v2_frame(sid)
    assert frame.trusted and frame.meta.principal_id == principal and frame.speaker_label == "Owner (owner/local)"
    assert "Ada drinks genmaicha." in (root / "topics/people/ada.md").read_text()


def test_cli_apply_without_owner_file_names_it(fixture_state, tmp_path, capsys):
    root = fixture_state / "memory"
    before = _files(root)
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"memory_changes": [_create("new-source-tea")], "sources": [TEA], "git_commit": "off"}))
    (fixture_state / "owner.json").unlink()
    code = main(["--state", str(fixture_state), "apply", str(req), "--base-revision", "current"])
    err = capsys.readouterr().err
    assert code == 1 and "WRITER_PRECONDITION_FAILED" in err and "owner.json" in err and "missing" in err
    (fixture_state / "owner.json").write_text('{"version": 1, "principal_id": ""}\n')
    code = main(["--state", str(fixture_state), "apply", str(req), "--base-revision", "current", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["error"]["code"] == "WRITER_PRECONDITION_FAILED"
    assert "owner.json" in data["error"]["message"] and "principal_id" in data["error"]["message"]
    assert _files(root) == before
