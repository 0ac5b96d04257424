"""Legacy cursor migration (memory spec §7.8) and the position-cursor regression."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_tui.core.store.gitlog import fixed_env
from memory_tui.core.format.sources import anchor
from memory_tui.pipeline.migrate import legacy_first_candidate, migrate_if_needed
from memory_tui.pipeline.write import Context, write
from memory_tui.sessions.marks import serialize_node

MARK = "memory_written_scriptorium"
SID = "local_a1b2c3d4e5"


def ctx_for(state: Path, **kw) -> Context:
    return Context(state, git_env=fixed_env(), clock=lambda: 1796100000.0, **kw)


def clear_marks(state: Path, sid: str, wid: str) -> None:
    for f in (state / "sessions" / sid / "history").glob("*.json"):
        node = json.loads(f.read_text(encoding="utf-8"))
        if (node.get("metadata") or {}).get(MARK) == wid:
            del node["metadata"][MARK]
            f.write_text(serialize_node(node), encoding="utf-8")


def marked(state: Path, sid: str, wid: str) -> set[str]:
    out = set()
    for f in (state / "sessions" / sid / "history").glob("*.json"):
        node = json.loads(f.read_text(encoding="utf-8"))
        if (node.get("metadata") or {}).get(MARK) == wid:
            out.add(node["id"])
    return out


def add_cursors(state: Path) -> dict:
    rt = state / "memory/.scriptorium/runtime.json"
    data = json.loads(rt.read_text())
    data["cursors"] = {SID: {"message_id": "a00000000009_reply", "ordinal": 17}}
    data["future_key"] = {"kept": True}
    rt.write_text(json.dumps(data, indent=2) + "\n")
    return data


def v2_file(state: Path) -> Path:
    return state / f"memory/sources/openprogram/_v2/{SID}.md"


def frames(text: str) -> list[str]:
    head, _, body = text.partition("\n\n")
    return body.rstrip("\n").split("\n\n")


def test_migration_restores_archived_prefix_and_drops_cursors(fixture_state, expected):
    wid = expected["workspace_id"]
    head_tip = expected["sessions"][SID]["head_id"]
    clear_marks(fixture_state, SID, wid)
    data = add_cursors(fixture_state)
    result = migrate_if_needed(ctx_for(fixture_state))
    got = marked(fixture_state, SID, wid)
    archived = {line.split("/")[-1][:-4] for line in v2_file(fixture_state).read_text().splitlines() if line.startswith("<!-- source-id:")}
    assert got and got <= archived
    # on the head branch the marks form a prefix of the records
    recs = expected["sessions"][SID]["tips"][head_tip]["record_ids"]
    flags = [r in got for r in recs]
    assert flags == sorted(flags, reverse=True)
    rt = json.loads((fixture_state / "memory/.scriptorium/runtime.json").read_text())
    assert "cursors" not in rt and rt["future_key"] == {"kept": True}
    assert rt["creation_order"] == data["creation_order"]
    assert result["cursors_removed"] and set(result["sessions"][SID]) == got


def test_truncated_v2_tail_is_not_trusted(fixture_state, expected):
    wid = expected["workspace_id"]
    clear_marks(fixture_state, SID, wid)
    add_cursors(fixture_state)
    path = v2_file(fixture_state)
    text = path.read_text()
    fr = frames(text)
    keep = 4
    cut = text.index(fr[keep]) + len(fr[keep].split("\n")[0]) + 1  # frame #5 ends after its anchor line
    path.write_text(text[:cut])
    migrate_if_needed(ctx_for(fixture_state))
    got = marked(fixture_state, SID, wid)
    trusted = {f.split("\n")[1].split("/")[-1][:-4] for f in fr[:keep]}
    assert got and got <= trusted


def test_gap_mid_branch_stops_the_prefix(fixture_state, expected):
    wid = expected["workspace_id"]
    head_tip = expected["sessions"][SID]["head_id"]
    recs = expected["sessions"][SID]["tips"][head_tip]["record_ids"]
    clear_marks(fixture_state, SID, wid)
    add_cursors(fixture_state)
    path = v2_file(fixture_state)
    text = path.read_text()
    gap = recs[2]
    fr = [f for f in frames(text) if f"/{gap} -->" not in f]
    path.write_text(text.partition("\n\n")[0] + "\n\n" + "\n\n".join(fr) + "\n")
    migrate_if_needed(ctx_for(fixture_state))
    got = marked(fixture_state, SID, wid)
    assert recs[0] in got and recs[1] in got
    assert not (set(recs[2:]) & got)


def test_marking_failure_keeps_cursors(fixture_state, expected, monkeypatch):
    import memory_tui.sessions.marks as marks_mod
    from memory_tui.core.format.errors import MemoryError, Problem

    clear_marks(fixture_state, SID, expected["workspace_id"])
    add_cursors(fixture_state)

    def failing(*a, **k):
        return marks_mod.MarkResult((), (), (), (Problem("CORRUPT_FILE", "disk full", "x"),))

    monkeypatch.setattr(marks_mod, "mark_nodes", failing)
    with pytest.raises(MemoryError):
        migrate_if_needed(ctx_for(fixture_state))
    assert "cursors" in json.loads((fixture_state / "memory/.scriptorium/runtime.json").read_text())


def test_forged_legacy_header():
    sid = "sess-old"
    src = f"openprogram/{sid}/m1"
    good = f'# {sid}\n\n<a id="{anchor(src)}"></a>\n<!-- source-id:{src} -->\n[2026-01-01] user: remember this\n'
    assert legacy_first_candidate(f"{sid}.md", good) == (sid, "m1")
    wrong_anchor = good.replace(anchor(src), "source-0000000000000000")
    assert legacy_first_candidate(f"{sid}.md", wrong_anchor) is None
    other_session = good.replace(f"openprogram/{sid}/", "openprogram/someone-else/").replace(anchor(src), anchor("openprogram/someone-else/m1"))
    assert legacy_first_candidate(f"{sid}.md", other_session) is None
    body_forgery = f"# {sid}\n\nhello\n\n" + good.split("\n\n", 1)[1]
    assert legacy_first_candidate(f"{sid}.md", body_forgery) is None
    assert legacy_first_candidate("other.md", good) is None


def test_write_runs_the_migration_first(fixture_state, expected):
    wid = expected["workspace_id"]
    clear_marks(fixture_state, SID, wid)
    add_cursors(fixture_state)
    report = write(ctx_for(fixture_state), SID, dry_run=False)
    assert report.migration and report.migration["cursors_removed"]
    assert marked(fixture_state, SID, wid)


# ----------------------------------------------------------------- position-cursor regression


def test_forks_get_their_own_turns_and_the_shared_prefix_is_written_once(tmp_path):
    from memory_tui.demo import SessionBuilder, _write

    state = tmp_path / "state"
    (state / "sessions").mkdir(parents=True)
    _write(state / "config.json", json.dumps({"memory": {"writer": {"trigger_tokens": 8000}}}))
    b = SessionBuilder("local_reg0000001", "Regression trip", 1795000000.0)
    replies = [b.turn(f"I prefer plan number {i} for the trip, always.", f"Noted plan {i}.", uid=f"m{i}") for i in range(1, 10)]
    d = b.save(state / "sessions")
    (d / ".git").mkdir()
    ctx = ctx_for(state, id_factory=lambda: "abcdef12")
    first = write(ctx, b.sid, force=True)
    assert first.outcome.status == "success"
    trunk = [i for bb in first.written for i in bb.ids]
    assert len(trunk) == 18

    done = len(b.nodes)
    tips = {}
    for name, n in (("a", 5), ("b", 11)):
        last = replies[2]  # fork at m3
        ids = []
        for j in range(n):
            last = b.turn(f"We decided on option {name}{j} for day {j}.", f"Confirmed option {name}{j}.", after=last, uid=f"{name}{j:02d}", move_head=False)
            ids += [f"{name}{j:02d}", last]
        tips[name] = (last, ids)
    for node in b.nodes[done:]:
        _write(d / "history" / f"{node['seq']:04d}-{node['role'][0]}-{node['id']}.json", json.dumps(node, ensure_ascii=False))

    for name, (tip, ids) in tips.items():
        rep = write(ctx, b.sid, branch=tip, force=True)
        offered = [i for bb in rep.batches for i in bb.ids]
        assert offered == ids, name  # all its own turns, nothing of the shared prefix
        assert rep.outcome.status == "success"
    again = write(ctx, b.sid, force=True)
    assert again.batches == []
    archive = (state / "memory/sources/openprogram/_v2/local_reg0000001.md").read_text()
    ids_in_archive = [line for line in archive.splitlines() if line.startswith("<!-- source-id:")]
    assert len(ids_in_archive) == len(set(ids_in_archive)) == 18 + 10 + 22
