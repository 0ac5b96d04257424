"""Written versus kept, and the drift between the two pending sets, on OpenProgram's fixture.

The oracle is read from the fixture's files here, independently of the engine: a turn is
*marked* when its node file's JSON carries this workspace's id in
``metadata.memory_written_scriptorium``; it is *cited* when a topic file links to an archive
anchor whose frame (``<a id="source-…">`` then ``<!-- source-id:… -->``) names
``openprogram/<session>/<node>``. The pending set by the marks is OpenProgram's own
(``openprogram-state.expected.json``). Other states are made from the fixture with the
project's own verbs (``record delete``) and the session node writer the tests use.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from aging import age
from memory_tui.cli import main
from memory_tui.sessions.marks import serialize_node

WS = "w-01760fa0"
MARK = "memory_written_scriptorium"
_LINK = re.compile(r"\]\(([^)#\s]+\.md)#(source-[0-9a-f]+)\)")
_ANCHOR = re.compile(r'<a id="(source-[0-9a-f]+)"></a>\n<!-- source-id:([^ ]+) -->')


def _run(capsys, *argv) -> tuple[int, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return rc, out


def _cited_from_files(state: Path) -> dict[str, set[str]]:
    """source id -> block ids of the records citing it, read from the raw topic and archive text."""
    anchors: dict[Path, dict[str, str]] = {}
    out: dict[str, set[str]] = {}
    for topic in (state / "memory" / "topics").rglob("*.md"):
        text = topic.read_text(encoding="utf-8")
        paras = text.split("\n\n")
        # footnote label -> record block id (the paragraph citing it ends in ^id)
        label_to_block: dict[str, str] = {}
        for para in paras:
            m = re.search(r"\^([0-9a-f]{8})\s*$", para.strip())
            if m:
                for lab in re.findall(r"\[\^(e-[0-9a-z]+)\]", para):
                    label_to_block[lab] = m.group(1)
        for para in paras:
            d = re.match(r"\[\^(e-[0-9a-z]+)\]:", para.strip())
            if not d:
                continue
            block = label_to_block.get(d.group(1))
            for rel, anchor in _LINK.findall(para):
                archive = (topic.parent / rel).resolve()
                if archive not in anchors:
                    anchors[archive] = dict(_ANCHOR.findall(archive.read_text(encoding="utf-8")))
                sid = anchors[archive].get(anchor)
                if sid and block:
                    out.setdefault(sid, set()).add(block)
    return out


def _expected_kept(state: Path) -> dict[str, dict[str, str]]:
    cited = _cited_from_files(state)
    out: dict[str, dict[str, str]] = {}
    for sdir in sorted((state / "sessions").iterdir()):
        if not (sdir / "history").is_dir():
            continue
        states: dict[str, str] = {}
        for f in sorted((sdir / "history").glob("*.json")):
            node = json.loads(f.read_text(encoding="utf-8"))
            if (node.get("metadata") or {}).get("display") == "root":
                continue
            mine = (node.get("metadata") or {}).get(MARK) == WS
            c = f"openprogram/{sdir.name}/{node['id']}" in cited
            if mine:
                states[node["id"]] = "kept" if c else "dropped"
            elif c:
                states[node["id"]] = "unmarked_kept"
        out[sdir.name] = states
    return out


def _why(capsys, state: Path) -> dict:
    _rc, out = _run(capsys, "--state", str(state), "why", "--json", "--now", "1796100000")
    return json.loads(out)


def test_kept_states_match_the_files(fixture_state_ro, capsys):
    data = _why(capsys, fixture_state_ro)
    expected = _expected_kept(fixture_state_ro)
    cited = _cited_from_files(fixture_state_ro)
    for sid, exp in expected.items():
        kept = data["sessions"][sid]["kept"]
        got = {t["id"]: t["state"] for t in kept["turns"]}
        assert got == exp, sid
        assert kept["counts"] == {k: sum(1 for v in exp.values() if v == k) for k in ("kept", "dropped", "unmarked_kept")}
        for t in kept["turns"]:
            # each verdict names its records (the same blocks the files show) and proves the mark
            assert {r["memory_id"] for r in t["records"]} == cited.get(f"openprogram/{sid}/{t['id']}", set())
            assert t["evidence"][0]["field"] == f"metadata.{MARK}"
            node_file = fixture_state_ro / t["evidence"][0]["file"]
            assert json.loads(node_file.read_text())["metadata"].get(MARK) == t["evidence"][0]["value"]
            if t["records"]:
                assert t["archive"] is not None
                archive = (fixture_state_ro / "memory" / t["archive"]["path"]).read_text().splitlines()
                assert f"source-id:openprogram/{sid}/{t['id']} " in archive[t["archive"]["line"]]
        # every turn of every tip carries its kept state (null when neither marked nor cited)
        for tip in data["sessions"][sid]["tips"].values():
            for turn in tip["turns"]:
                assert turn["kept"] == exp.get(turn["id"])
    # what the fixture holds: the stranded turn is cited though its mark was removed
    assert expected["local_a1b2c3d4e5"]["a00000000007_reply"] == "unmarked_kept"
    # the foreign-marked session: marked, but by another workspace, and cited by nothing
    assert expected["local_9f1e2d3c4b"] == {}


def _expected_drift(expected_json: dict, cited: dict[str, set[str]]) -> dict[str, tuple[set[str], set[str]]]:
    out = {}
    for sid, s in expected_json["sessions"].items():
        live = {t: v for t, v in s["tips"].items() if not v["archived"] or v["is_head"]}
        records = {r for v in live.values() for r in v["record_ids"]}
        pending = {p for v in live.values() for p in v["pending_ids"]}
        c = {r for r in records if f"openprogram/{sid}/{r}" in cited}
        out[sid] = ({r for r in records if r not in pending and r not in c}, {r for r in records if r in pending and r in c})
    return out


def _drift(capsys, state: Path) -> dict:
    _rc, out = _run(capsys, "--state", str(state), "why", "--drift", "--json", "--now", "1796100000")
    return json.loads(out)["sessions"]


def test_drift_on_the_fixture_matches_openprograms_pending_and_the_files(fixture_state_ro, expected, capsys):
    got = _drift(capsys, fixture_state_ro)
    want = _expected_drift(expected, _cited_from_files(fixture_state_ro))
    for sid, (done_not_cited, cited_pending) in want.items():
        assert {i["id"] for i in got[sid]["marks_done_not_cited"]} == done_not_cited, sid
        assert {i["id"] for i in got[sid]["cited_but_pending"]} == cited_pending, sid
        pend = {p for v in expected["sessions"][sid]["tips"].values() if not v["archived"] or v["is_head"] for p in v["pending_ids"]}
        assert set(got[sid]["mark_pending_ids"]) == pend


def _sole_citer(state: Path) -> tuple[str, str, str]:
    """(session, node, block) of a marked turn cited by exactly one record that no other record links to."""
    cited = _cited_from_files(state)
    expected = _expected_kept(state)
    texts = "\n".join(p.read_text() for p in (state / "memory" / "topics").rglob("*.md"))
    for sid, states in expected.items():
        for nid, st in states.items():
            blocks = cited.get(f"openprogram/{sid}/{nid}", set())
            if st == "kept" and len(blocks) == 1:
                (block,) = blocks
                if f"#^{block}" not in texts:
                    # the block must cite nothing else that would then lose its only citer
                    return sid, nid, block
    raise AssertionError("no turn with a single citing record")


def test_deleting_the_only_record_leaves_written_nothing_kept_and_drift(fixture_state, capsys):
    sid, nid, block = _sole_citer(fixture_state)
    _run(capsys, "--state", str(fixture_state), "record", "delete", block)
    expected = _expected_kept(fixture_state)  # re-read from the files after the delete
    assert expected[sid][nid] == "dropped"
    data = _why(capsys, fixture_state)
    got = {t["id"]: t for t in data["sessions"][sid]["kept"]["turns"]}
    assert {k: v["state"] for k, v in got.items()} == expected[sid]
    assert "no record cites it" in got[nid]["message"]
    assert got[nid]["archive"] is not None  # archived, marked, but nothing kept
    drift = _drift(capsys, fixture_state)[sid]
    assert nid in {i["id"] for i in drift["marks_done_not_cited"]}
    _rc, out = _run(capsys, "--state", str(fixture_state), "status", "--now", "1796100000")
    line = next(ln for ln in out.splitlines()[out.splitlines().index(next(x for x in out.splitlines() if x.startswith(f"session {sid}"))):]
                if ln.strip().startswith("kept"))
    assert "1 written but nothing kept" in line and "drift" in line


def test_a_cited_turn_whose_mark_is_gone_is_drift_the_other_way(fixture_state, capsys):
    # the newest marked turn of the sub-agent session loses its mark: the marks now call it
    # pending, while a record already holds it
    sid, nid = "local_0c0c0c0c0c", "c00000000003_reply"
    path = next((fixture_state / "sessions" / sid / "history").glob(f"*-{nid}.json"))
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["metadata"][MARK]
    path.write_text(serialize_node(data), encoding="utf-8")
    drift = _drift(capsys, fixture_state)[sid]
    assert [i["id"] for i in drift["cited_but_pending"]] == [nid]
    assert drift["cited_but_pending"][0]["records"]
    why = _why(capsys, fixture_state)
    assert {t["id"]: t["state"] for t in why["sessions"][sid]["kept"]["turns"]}[nid] == "unmarked_kept"
    assert _expected_kept(fixture_state)[sid][nid] == "unmarked_kept"
    _rc, out = _run(capsys, "--state", str(fixture_state), "why", "--drift", sid, "--now", "1796100000")
    assert f"session {sid}  drift 1" in out and nid in out and "evidence" in out


def test_cross_session_spawn_is_named_from_both_halves(fixture_state_ro, capsys):
    child, parent = "local_0c0c0c0c0c", "local_f6e5d4c3b2"
    root = json.loads(next((fixture_state_ro / "sessions" / child / "history").glob("*-c00000000001.json")).read_text())
    assert root["metadata"]["spawn_branch_root"] and root["predecessor"] is None
    spawner = root["caller"]
    assert list((fixture_state_ro / "sessions" / parent / "history").glob(f"*-{spawner}.json"))  # the other half
    data = _why(capsys, fixture_state_ro)
    for sid in (child, parent):
        (link,) = data["sessions"][sid]["links"]
        assert link == {"child_session": child, "child_node": "c00000000001", "parent_session": parent,
                        "parent_node": spawner, "evidence": {"file": f"sessions/{child}/history/0001-u-c00000000001.json",
                                                             "field": "caller", "value": spawner}}
        other = parent if sid == child else child
        assert other in data["sessions"][sid]["link_reasons"][0]["message"]
    for sid in ("local_a1b2c3d4e5", "local_9f1e2d3c4b"):
        assert data["sessions"][sid]["links"] == []
    # one session asked for alone still names the other half
    _rc, out = _run(capsys, "--state", str(fixture_state_ro), "why", child, "--now", "1796100000")
    assert f"spawned from node {spawner} of session {parent}" in out
    _rc, out = _run(capsys, "--state", str(fixture_state_ro), "why", child, "--graph", "--ascii", "--width", "200")
    assert f"& @{parent}/{spawner}" in out


def test_the_uncommitted_compaction_summary_names_what_it_covers(fixture_state_ro, capsys):
    sid = "local_a1b2c3d4e5"
    node = json.loads(next((fixture_state_ro / "sessions" / sid / "history").glob("*-summary_*.json")).read_text())
    meta = json.loads((fixture_state_ro / "sessions" / sid / "meta.json").read_text())
    expected = _expected_kept(fixture_state_ro)[sid]
    (summary,) = _why(capsys, fixture_state_ro)["sessions"][sid]["summaries"]
    assert summary["id"] == node["id"] == meta["_last_summary_id"]
    assert summary["uncommitted"] and not summary["on_head_line"]
    assert [c["id"] for c in summary["covers"]] == node["metadata"]["covers_ids"]
    assert all(c["state"] == expected.get(c["id"], "unwritten") for c in summary["covers"])
    assert {"file": f"sessions/{sid}/meta.json", "field": "_last_summary_id", "value": node["id"]} in summary["evidence"]


def test_a_summary_on_the_heads_line_is_flagged(fixture_state, capsys):
    """The owner continues from the compaction summary: the head's line now runs through it."""
    sid = "local_a1b2c3d4e5"
    sdir = fixture_state / "sessions" / sid
    summary = json.loads(next((sdir / "history").glob("*-summary_*.json")).read_text())
    seq = max(json.loads(p.read_text())["seq"] for p in (sdir / "history").glob("*.json")) + 1
    turn = {"id": "a0000000000a", "created_at": 1796014900.0, "seq": seq, "role": "user", "name": "", "input": None,
            "output": "Continue from the summary.", "caller": "", "predecessor": summary["id"], "reads": [],
            "metadata": {"source": "web"}}
    reply = {**turn, "id": "a0000000000a_reply", "seq": seq + 1, "role": "llm", "output": "Continuing.",
             "predecessor": "a0000000000a", "metadata": {"source": "web", "status": "completed"}}
    for data in (turn, reply):
        (sdir / "history" / f"{data['seq']:04d}-{data['role'][0]}-{data['id']}.json").write_text(serialize_node(data))
    meta = json.loads((sdir / "meta.json").read_text())
    meta["head_id"] = reply["id"]
    (sdir / "meta.json").write_text(json.dumps(meta))
    data = _why(capsys, fixture_state)
    (facts,) = data["sessions"][sid]["summaries"]
    assert facts["on_head_line"] and not facts["uncommitted"]
    assert "unwritten assistant turn restating 4 turn(s), 4 of them already written" in facts["message"]
    assert {"file": f"sessions/{sid}/meta.json", "field": "head_id", "value": reply["id"]} in facts["evidence"]
    _rc, out = _run(capsys, "--state", str(fixture_state), "why", sid, "--graph", "--ascii", "--width", "200")
    line = next(ln for ln in out.splitlines() if summary["id"] in ln)
    assert " F " in line and "on the head's line" in line


def test_next_write_of_every_pending_branch_follows_openprograms_figures(fixture_state_ro, expected, capsys):
    data = _why(capsys, fixture_state_ro)
    threshold = expected["trigger_tokens"]
    seen = 0
    for sid, exp in expected["sessions"].items():
        index = json.loads((fixture_state_ro / "sessions" / "index.json").read_text())
        ends = json.loads((fixture_state_ro / "memory" / ".scriptorium" / "session-end.json").read_text())
        handled = ends.get(sid) == index[sid]["updated_at"]
        for tip, t in exp["tips"].items():
            nw = data["sessions"][sid]["tips"][tip].get("next_write")
            if not t["pending_ids"]:
                assert nw is None, (sid, tip)
                continue
            seen += 1
            if t["archived"] and not t["is_head"]:
                assert nw["rule"] == "never" and "archived" in nw["text"]
                assert nw["command"] == f"memory-tui write {sid} --branch {tip} --force"
            elif t["is_head"]:
                # the fixture's pending head turns are a day old: the per-turn path takes them at the next turn
                assert nw["rule"] == "per_turn" and "at the next turn on the head" in nw["text"], (sid, nw)
            elif t["pending_tokens"] < threshold:
                assert nw["rule"] == "never" and f"({t['pending_tokens']} < {threshold} tokens)" in nw["text"]
                assert {"file": "config.json", "field": "memory.writer.trigger_tokens", "value": threshold} in nw["evidence"]
            else:
                assert nw["rule"] == ("never" if handled else "idle_pass")
    assert seen >= 4


def _drift_of_a_full_load(state: Path) -> dict:
    """Every session's drift from a full load and a fresh analysis (no index involved)."""
    from memory_tui.sessions.kept import citations_for_state, session_drift
    from memory_tui.sessions.reasons import load_context
    from memory_tui.sessions.records import analyze_session
    from memory_tui.sessions.store import load_sessions

    ctx = load_context(state, now=1796100000)
    citations, _missing = citations_for_state(state)
    return json.loads(json.dumps({sid: {"drift": d.count, **d.to_json()} for sid, d in (
        (sid, session_drift(analyze_session(s, ctx.workspace_id, ctx.config.trigger_tokens), citations))
        for sid, s in load_sessions(state).sessions.items())}))


def test_drift_of_every_session_reads_only_the_sessions_that_changed(fixture_state, capsys, monkeypatch):
    # `why --drift` over every session takes the turns a live tip reaches from the session
    # summary index: a warm run reads no node file, a changed session alone is read again,
    # and the answer is always the one of a full load
    from memory_tui.sessions import store

    age(fixture_state / "sessions")
    first = _drift(capsys, fixture_state)
    assert first == _drift_of_a_full_load(fixture_state)
    read: list[str] = []
    real = store.load_session_dir
    monkeypatch.setattr(store, "load_session_dir", lambda sid, *a, **k: read.append(sid) or real(sid, *a, **k))
    assert _drift(capsys, fixture_state) == first
    assert read == []
    # one turn of the sub-agent session loses its mark (the session writer the tests use)
    sid, nid = "local_0c0c0c0c0c", "c00000000003_reply"
    path = next((fixture_state / "sessions" / sid / "history").glob(f"*-{nid}.json"))
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["metadata"][MARK]
    path.write_text(serialize_node(data), encoding="utf-8")
    age(fixture_state / "sessions" / sid)
    changed = _drift(capsys, fixture_state)
    assert read == [sid]
    monkeypatch.setattr(store, "load_session_dir", real)
    assert changed == _drift_of_a_full_load(fixture_state)
    assert [i["id"] for i in changed[sid]["cited_but_pending"]] == [nid]


def test_why_session_reads_the_session_once(fixture_state_ro, capsys, monkeypatch):
    # the links of a session are found from the session already read for its verdicts (and
    # the sub-agent sessions): reading it a second time doubled the cost of `why SESSION`
    from memory_tui.sessions import store

    read: list[str] = []
    real = store.load_session_dir
    monkeypatch.setattr(store, "load_session_dir", lambda sid, *a, **k: read.append(sid) or real(sid, *a, **k))
    for sid in ("local_a1b2c3d4e5", "local_0c0c0c0c0c"):
        read.clear()
        _run(capsys, "--state", str(fixture_state_ro), "why", sid, "--now", "1796100000")
        assert read.count(sid) == 1, read
