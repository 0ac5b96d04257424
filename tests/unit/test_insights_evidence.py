"""Evidence strength and branch alternatives on a crafted state directory and on the fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_tui.cli import main
from memory_tui.core.store.workspace import open_state
from memory_tui.insights.alternatives import alternatives, group_by_fork
from memory_tui.insights.evidence import SORT_KEYS, evidence_for, sort_evidence
from memory_tui.sessions.store import load_sessions
from insights_world import forked_world


@pytest.fixture()
def world(tmp_path: Path) -> Path:
    return forked_world(tmp_path / "state")


def figures(state: Path) -> dict:
    view = open_state(state)
    assert view.problems == ()
    return {r.memory_id: r for r in evidence_for(view, load_sessions(state))}


def test_repeated_citations_of_one_session_count_once(world):
    r = figures(world)["rep00001"]
    assert len(r.citations) == 3  # three links, all to s1/u1
    assert (r.sessions, r.days, r.branches) == (1, 1, 1)
    assert r.single_episode and r.owner_backed and not r.assistant_only
    assert r.episodes == ("openprogram/s1",)


def test_multi_session_multi_day(world):
    r = figures(world)["multi001"]
    assert (r.sessions, r.days, r.branches) == (2, 2, 2)
    assert r.day_list == ("2026-11-01", "2026-11-03")
    assert not r.single_episode


def test_sibling_branches_of_one_session_are_two_lines_not_two_sessions(world):
    r = figures(world)["both0001"]  # u2, u3 (siblings) and their ancestor u1
    assert (r.sessions, r.days, r.branches) == (1, 2, 2)
    assert not r.single_episode  # two days


def test_assistant_only_pending_and_missing_are_flagged(world):
    f = figures(world)
    assert f["asst0001"].assistant_only and not f["asst0001"].owner_backed
    assert f["asst0001"].branches == 1  # u1_reply is an ancestor of u2_reply: one line
    assert f["pend0001"].pending_sources == 1 and f["pend0001"].untrusted_sources == 1
    assert not f["pend0001"].owner_backed  # an unpaired human, not the owner
    assert f["lost0001"].untrusted_sources == 1 and f["lost0001"].pending_sources == 0
    assert f["lost0001"].days == 0 and f["lost0001"].citations[0].trust == "missing"
    assert all(f[m].pending_sources == 0 for m in ("rep00001", "multi001", "flask001"))


def test_sorting(world):
    rows = list(figures(world).values())
    weakest = sort_evidence(rows, "weakest")
    assert weakest[0].memory_id == "lost0001"  # no day at all
    assert weakest[-1].memory_id == "multi001"
    assert sort_evidence(rows, "pending")[0].memory_id == "pend0001"
    assert [r.memory_id for r in sort_evidence(rows, "id")] == sorted(r.memory_id for r in rows)
    with pytest.raises(ValueError):
        sort_evidence(rows, "nope")
    assert "weakest" in SORT_KEYS


def test_evidence_cli_json_and_text(world, capsys):
    assert main(["--state", str(world), "evidence", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    row = next(r for r in data["records"] if r["memory_id"] == "multi001")
    for key in ("memory_id", "topic_path", "sessions", "days", "branches", "owner_backed", "pending_sources", "single_episode"):
        assert key in row
    assert row["topic_path"] == "topics/projects/web.md" and row["sessions"] == 2
    assert main(["--state", str(world), "evidence", "--sort", "sessions", "--reverse"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("^multi001")
    assert lines[-1].startswith("8 record(s): 6 single-episode, 1 citing pending sources")


def test_alternatives_on_crafted_forks(world, capsys):
    view, sessions = open_state(world), load_sessions(world)
    pairs = alternatives(view, sessions)
    got = {(p.a.memory_id, p.b.memory_id, p.fork_point, p.head_side) for p in pairs}
    # flask001 (u2) vs fast0001 (u3): fork at u1_reply, head on u3's line; asst0001 cites
    # u2_reply, also on the Flask line. both0001 cites both lines, so it is nobody's rival;
    # rep00001 cites only the common ancestor.
    assert got == {("flask001", "fast0001", "u1_reply", "b"), ("asst0001", "fast0001", "u1_reply", "b")}
    groups = group_by_fork(pairs, sessions)
    assert len(groups) == 1 and {b.first_node for b in groups[0].branches} == {"u2", "u3"}
    assert next(b for b in groups[0].branches if b.first_node == "u3").on_head
    assert main(["--state", str(world), "alternatives", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["alternatives"]) == 2 and data["alternatives"][0]["fork_point"] == "u1_reply"


def test_no_alternatives_without_forks(world, capsys):
    # drop the FastAPI line's records: nothing on a sibling line is cited any more
    topic = world / "memory" / "topics" / "projects" / "web.md"
    text = topic.read_text()
    for bid in ("fast0001", "both0001"):
        paras = text.split("\n\n")
        keep = []
        skip_def = None
        for para in paras:
            if para.rstrip().endswith("^" + bid):
                skip_def = para.split("[^", 1)[1].split("]", 1)[0]
                continue
            if skip_def and para.startswith(f"[^{skip_def}]:"):
                skip_def = None
                continue
            keep.append(para)
        text = "\n\n".join(keep)
    topic.write_text(text)
    view = open_state(world)
    assert view.tree.by_id("fast0001") is None and view.tree.by_id("flask001") is not None
    assert alternatives(view, load_sessions(world)) == ()
    assert main(["--state", str(world), "alternatives"]) == 0
    assert "no alternatives" in capsys.readouterr().out


# ------------------------------------------------------------------------------- the fixture


def _raw_chains(state: Path) -> dict[str, dict[str, list[str]]]:
    """An independent ancestry oracle: predecessor chains read straight from the node files."""
    out: dict[str, dict[str, list[str]]] = {}
    for sdir in (state / "sessions").iterdir():
        hist = sdir / "history"
        if not hist.is_dir():
            continue
        preds = {}
        for f in hist.glob("*.json"):
            d = json.loads(f.read_text())
            preds[d["id"]] = d.get("predecessor")
        chains = {}
        for nid in preds:
            chain, cur, seen = [], nid, set()
            while cur and cur not in seen:
                seen.add(cur)
                chain.append(cur)
                cur = preds.get(cur)
            chains[nid] = chain[::-1]
        out[sdir.name] = chains
    return out


def test_fixture_every_block_has_figures(fixture_state_ro):
    view = open_state(fixture_state_ro)
    rows = evidence_for(view, load_sessions(fixture_state_ro))
    assert [r.memory_id for r in rows] == [u.memory_id for u in view.tree.units]
    assert len(rows) == len(view.tree.units) > 0
    for r in rows:
        assert r.citations and r.sessions >= 1 and r.branches >= 1 and r.days >= 1
        assert all(c.trust == "trusted" for c in r.citations)
    # replies are the agent's: a record citing only "_reply" turns is assistant-only
    for r in rows:
        nodes = {c.node_id for c in r.citations}
        assert r.assistant_only == all(n.endswith("_reply") for n in nodes), r.memory_id
        assert r.owner_backed == any(not n.endswith("_reply") for n in nodes), r.memory_id


def test_fixture_alternatives_match_an_independent_walk(fixture_state_ro):
    view = open_state(fixture_state_ro)
    pairs = alternatives(view, load_sessions(fixture_state_ro))
    chains = _raw_chains(fixture_state_ro)

    def sibling(sid, a, b):
        ca, cb = chains[sid].get(a), chains[sid].get(b)
        return ca and cb and a not in cb and b not in ca and ca[0] == cb[0]

    cited = {}
    for u in view.tree.units:
        for ref in u.source_refs:
            _, sid, nid = ref.split("/", 2)
            cited.setdefault(u.memory_id, set()).add((sid, nid))
    expected = set()
    ids = [u.memory_id for u in view.tree.units]
    for i, x in enumerate(ids):
        for y in ids[i + 1:]:
            for sa, na in cited[x]:
                for sb, nb in cited[y]:
                    if sa == sb and sibling(sa, na, nb):
                        fork = [p for p, q in zip(chains[sa][na], chains[sa][nb]) if p == q][-1]
                        depth = chains[sa][fork].__len__()
                        # neither record also cites the other's side of this fork
                        cross = any(
                            len([p for p, q in zip(chains[s][n], chains[sa][other]) if p == q]) > depth
                            for rec, other in ((x, nb), (y, na)) for s, n in cited[rec] if s == sa
                        )
                        if not cross:
                            expected.add((x, y))
    assert {(p.a.memory_id, p.b.memory_id) for p in pairs} == expected
    # the cheap per-record count names exactly the records of the listed pairs
    from memory_tui.insights.alternatives import contested

    assert set(contested(view, load_sessions(fixture_state_ro)).records) == {m for pair in expected for m in pair}
    assert expected  # the fixture's retry fork has records on both lines
    for p in pairs:
        assert p.fork_point in chains[p.session_id][p.a.node_id] and p.fork_point in chains[p.session_id][p.b.node_id]
        head_chain = chains[p.session_id][p.head_id]
        assert (p.head_side == "a") == (p.a.node_id in head_chain)


def test_summary_counts_and_status(world, capsys):
    from memory_tui.insights.summary import summarize

    s = summarize(open_state(world), load_sessions(world))
    assert s.records == 8
    assert set(s.single_episode) == {"lost0001", "asst0001", "pend0001", "rep00001", "flask001", "fast0001"}
    assert s.pending_sources == ("pend0001",) and s.assistant_only == ("asst0001",)
    assert set(s.alternative_records) == {"flask001", "fast0001", "asst0001"} and s.alternative_forks == 1
    assert main(["--state", str(world), "status", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["insights"] == {"records": 8, "single_episode": 6, "alternatives": 3, "alternative_forks": 1,
                                "pending_sources": 1, "assistant_only": 1}
    assert {"state_dir", "revision", "topics", "records", "sessions"} <= set(data)  # existing keys stay
    assert main(["--state", str(world), "status"]) == 0
    assert ("evidence   6 single-episode records, 3 records with an alternative (at 1 forks), 1 citing pending sources"
            in capsys.readouterr().out)


def test_insights_layer_imports_no_textual_tui_or_cli():
    """insights sits above core and sessions and below the faces: a fresh interpreter that
    imports every insights module has loaded neither textual nor memory_tui.tui / .cli."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import memory_tui.insights.evidence, memory_tui.insights.history, memory_tui.insights.alternatives, "
        "memory_tui.insights.summary, memory_tui.insights.lineage\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'textual' or m.startswith(('memory_tui.tui', 'memory_tui.cli')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_contested_count_agrees_with_the_pair_listing_on_random_trees(tmp_path):
    """On random forking sessions and random citations, the per-record count names exactly
    the records :func:`alternatives` puts in a pair."""
    import random
    from types import SimpleNamespace

    from memory_tui.insights.alternatives import contested
    from test_sessions_helpers import make_session, node

    with_pairs = 0
    for seed in range(25):
        rng = random.Random(seed)
        state = tmp_path / f"s{seed}"
        ids = [f"n{i}" for i in range(14)]
        nodes = [node(ids[0], 1, "user", "q", pred=None, caller="ROOT")]
        for i in range(1, len(ids)):
            nodes.append(node(ids[i], i + 1, "user" if i % 2 else "llm", "t", pred=ids[rng.randrange(i)],
                              caller="ROOT" if i % 2 else ""))
        make_session(state, "s", nodes, {"head_id": ids[-1]})
        units = []
        for r in range(10):
            refs = tuple(dict.fromkeys(f"openprogram/s/{rng.choice(ids)}" for _ in range(rng.randint(1, 3))))
            units.append(SimpleNamespace(memory_id=f"r{r}", is_alias=False, source_refs=refs, path="topics/x.md",
                                         line=r + 1, content=f"record {r}"))
        view = SimpleNamespace(tree=SimpleNamespace(units=tuple(units)))
        snap = load_sessions(state)
        pairs = alternatives(view, snap)
        listed = {m for p in pairs for m in (p.a.memory_id, p.b.memory_id)}
        assert set(contested(view, snap).records) == listed, seed
        with_pairs += bool(listed)
    assert with_pairs >= 5  # the random trees do fork under cited turns


@pytest.mark.parametrize("argv", [
    ["evidence"], ["evidence", "--json"], ["alternatives"], ["alternatives", "--json"],
    ["history", "core.md"], ["history", "fc30e0e0", "--json"], ["status"],
])
def test_insight_read_verbs_write_nothing_not_even_in_git(fixture_state, capsys, argv):
    from test_readonly import tree_state

    before = tree_state(fixture_state)  # .git included: history must not touch the index either
    assert main(["--state", str(fixture_state), *argv]) == 0
    capsys.readouterr()
    assert tree_state(fixture_state) == before


def test_lineage_ancestry_matches_the_walked_chains(tmp_path):
    """O(1) ancestry (DFS times) answers as the walked chains do, also with a dangling
    predecessor, a virtual ROOT, and a predecessor cycle (which the DFS never reaches)."""
    import random

    from memory_tui.insights.lineage import SessionLineage
    from test_sessions_helpers import make_session, node

    rng = random.Random(7)
    ids = [f"n{i}" for i in range(30)]
    nodes = [node(ids[0], 1, "user", "q", pred="ROOT", caller="ROOT"), node(ids[1], 2, "user", "q", pred="ROOT", caller="ROOT")]
    for i in range(2, 26):
        nodes.append(node(ids[i], i + 1, "user", "t", pred=ids[rng.randrange(i)], caller="ROOT"))
    nodes.append(node(ids[26], 27, "user", "t", pred="missing", caller="ROOT"))
    nodes.append(node(ids[27], 28, "user", "t", pred=ids[28], caller="ROOT"))  # n27 <-> n28 cycle
    nodes.append(node(ids[28], 29, "user", "t", pred=ids[27], caller="ROOT"))
    nodes.append(node(ids[29], 30, "user", "t", pred=ids[26], caller="ROOT"))
    make_session(tmp_path, "s", nodes, {"head_id": ids[25]})
    session = load_sessions(tmp_path).sessions["s"]
    lineage = SessionLineage(session)
    walked = {n: set(SessionLineage(session).chain(n)) for n in ids}
    for a in ids + ["ROOT"]:
        for n in ids:
            assert lineage.contains(a, n) == (a in walked[n]), (a, n)
    assert lineage.contains("ROOT", "n5") and not lineage.contains("ROOT", "n29")
    assert lineage.siblings("n0", "n1") and lineage.fork_point("n0", "n1") == "ROOT"
