"""The engine adapter on OpenProgram's own state dir."""

from __future__ import annotations

import time

from pathlib import Path

from memory_tui.core.format.tokens import O200kCounter
from memory_tui.tui.model.data import FrameVM
from memory_tui.tui.model.load import load_model


def test_model_matches_openprogram_answers(fixture_state_ro, expected):
    m = load_model(fixture_state_ro, counter=O200kCounter(), home=fixture_state_ro.parent)
    assert m.display_dir == "~/.openprogram"
    assert m.workspace_id == expected["workspace_id"]
    assert m.revision == expected["revision"]
    assert list(m.core.omitted_ids) == expected["core"]["omitted_block_ids"]
    assert m.core.tokens == expected["core"]["rendered_tokens"]
    assert m.status.pending_turns == expected["status_pending_turns"]
    assert m.engine_errors == ()
    topic_paths = {t.path for t in m.topics}
    assert "topics/core.md" not in topic_paths  # Core owns it
    for item in expected["topics"]:
        path, ids = item["path"], item["block_ids"]
        topic = m.topic(path)
        assert topic is not None, path
        assert [r.memory_id for r in topic.records] == ids


def test_citations_resolve_to_source_frames(fixture_state_ro, expected):
    m = load_model(fixture_state_ro, counter=O200kCounter())
    for mid, block in expected["blocks"].items():
        rec = m.records[mid]
        resolved = [l.source_id for l in rec.source_links]
        for ref in block["source_refs"]:
            assert ref in resolved
            assert isinstance(m.frame(ref), FrameVM)


def test_missing_state_dir_is_a_state_not_an_exception(tmp_path: Path):
    m = load_model(tmp_path / "nope", counter=O200kCounter())
    assert not m.state_exists and m.problems[0].code == "STATE_NOT_FOUND"


def _bump(path: Path, text: str) -> None:
    """Write and make sure the stamp changes even on a coarse-mtime file system."""
    import os

    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    st = path.stat()
    if st.st_mtime_ns == before:
        os.utime(path, ns=(st.st_atime_ns, before + 1_000_000))


def test_refresh_reparses_only_the_changed_topic_and_reuses_the_rest(fixture_state):
    time.sleep(0.15)  # the copy just made is racy (ctime within a clock tick): reuse starts after it
    from memory_tui.tui.model.data import changed_views

    counter = O200kCounter()
    first = load_model(fixture_state, counter=counter)
    ada = fixture_state / "memory" / "topics" / "people" / "ada.md"
    text = ada.read_text(encoding="utf-8")
    _bump(ada, text.replace("wants short answers", "wants very short answers"))
    second = load_model(fixture_state, counter=counter, previous=first, touched={"memory/topics/people/ada.md"})
    assert second.state.reparsed_topics == ("people/ada.md",)
    assert second.session_snapshot is first.session_snapshot  # nothing under sessions/ was touched
    old = {t.path: t for t in first.topics}
    for topic in second.topics:
        if topic.path == "topics/people/ada.md":
            assert topic is not old[topic.path]
            assert "very short answers" in topic.records[0].content
        else:
            assert topic is old[topic.path], topic.path  # the same object: nothing re-rendered
    assert second.revision != first.revision
    changed = changed_views(first, second)
    assert {"topics", "timeline"} <= changed
    assert "sessions" not in changed and "core" not in changed

    # A watcher event that changed nothing: same snapshot, no view to redraw.
    third = load_model(fixture_state, counter=counter, previous=second, touched={"memory/topics/people/ada.md"})
    assert third.state.reparsed_topics == ()
    assert changed_views(second, third) == set()


def test_refresh_sees_a_new_session_node_and_keeps_memory(fixture_state):
    import json

    from memory_tui.tui.model.data import changed_views

    counter = O200kCounter()
    first = load_model(fixture_state, counter=counter)
    node = fixture_state / "sessions" / "local_0c0c0c0c0c" / "history" / "0099-u-zz0000000001.json"
    node.write_text(json.dumps({"id": "zz0000000001", "role": "user"}))
    second = load_model(fixture_state, counter=counter, previous=first, touched={"sessions/local_0c0c0c0c0c/history/x.json"})
    assert second.state is first.state  # memory/ untouched: the engine snapshot stands
    before = {s.session_id: s for s in first.sessions}
    after = {s.session_id: s for s in second.sessions}
    assert after["local_0c0c0c0c0c"].nodes == before["local_0c0c0c0c0c"].nodes + 1
    assert changed_views(first, second) == {"sessions"}


def test_dates_come_from_evidence_not_file_times(fixture_state, expected):
    import os

    counter = O200kCounter()
    for path in (fixture_state / "memory").rglob("*.md"):
        os.utime(path, (0, 0))  # 1970: a reader that used mtimes would show it
    m = load_model(fixture_state, counter=counter)
    for mid, block in expected["blocks"].items():
        assert m.records[mid].when == block["when"]
    assert all(not row.when.startswith("1970") for row in m.timeline)
    assert {row.when[:4] for row in m.timeline} == {"2026"}


def test_problems_come_from_the_engine(tmp_path):
    from tui_helpers import write_minimal_state

    from memory_tui.core.store.workspace import open_state

    state = write_minimal_state(
        tmp_path,
        {
            "topics/notes.md": "# Notes\n\nUncited prose \x1b[31mhere\x1b[0m.\n",
            "topics/bad.md": b"\xff\xfe not utf-8".decode("latin-1"),
        },
    )
    (state / "memory" / "topics" / "bad.md").write_bytes(b"# Bad\n\n\xff\xfe not utf-8\n")
    m = load_model(state, counter=O200kCounter())
    engine = open_state(state)
    assert [(p.code, p.path, p.line) for p in m.problems] == [(p.code, p.path, p.line) for p in engine.problems]
    notes = m.topic("topics/notes.md")
    assert notes.problems and notes.problems[0].line == 3 and "\x1b" not in notes.raw
    bad = m.topic("topics/bad.md")
    assert bad is not None and bad.problems[0].message == "topic file is not valid UTF-8"


def test_a_reload_after_one_sessions_change_reads_that_session_only(fixture_state, monkeypatch):
    # the watcher names the files that moved (a job's batch marks one session): that session
    # is checked file by file, so a node file rewritten in place is seen, while no node file
    # of any other session is looked at again (their folders' stamps vouch for them)
    import json
    import os

    from memory_tui.sessions import store
    from memory_tui.sessions.marks import MARK_KEY, serialize_node

    counter = O200kCounter()
    old = time.time_ns() - 3_600 * 10**9
    for p in [*(fixture_state / "sessions").rglob("*")]:
        os.utime(p, ns=(old, old), follow_symlinks=False)
    time.sleep(0.15)  # utime moved every ctime: out of the racy window before the first load
    first = load_model(fixture_state, counter=counter)
    sid = "local_0c0c0c0c0c"
    hist = fixture_state / "sessions" / sid / "history"
    path = next(hist.glob("*-c00000000003_reply.json"))
    stamp = hist.stat().st_mtime_ns
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["metadata"][MARK_KEY]
    with open(path, "r+", encoding="utf-8") as f:  # in place: the folder's stamp does not move
        f.write(serialize_node(data))
        f.truncate()
    os.utime(hist, ns=(stamp, stamp))
    time.sleep(0.15)
    read: list[str] = []
    real = store._cached_read
    monkeypatch.setattr(store, "_cached_read", lambda p, rel, *a: read.append(rel) or real(p, rel, *a))
    second = load_model(fixture_state, counter=counter, previous=first, touched={f"sessions/{sid}/history/{path.name}"})
    assert read and all(r.startswith(f"sessions/{sid}/") for r in read)
    # the app holds summaries, not sessions (``sessions.ondemand``): the untouched sessions'
    # rows are carried over as they were, and reading one on demand gives what it gave before
    rows_before = {s.session_id: s for s in first.sessions if s.session_id != sid}
    assert {s.session_id: s for s in second.sessions if s.session_id != sid} == rows_before
    for other in rows_before:
        assert second.session_snapshot.sessions[other] == first.session_snapshot.sessions[other]
    before = {s.session_id: s.pending for s in first.sessions}
    after = {s.session_id: s.pending for s in second.sessions}
    assert after[sid] == before[sid] + 1  # the unmarked turn is pending again
    assert after == {**before, sid: before[sid] + 1}


def test_record_text_from_a_topic_holding_escapes_is_inert(tmp_path):
    # headings, bodies and link labels reach the terminal: a topic with escapes in some of them
    # shows every record inert, and the clean ones (and the clean topic beside it) as written
    from tui_helpers import write_minimal_state

    ev = "[^e-1]: Time: `2026-11`; Sources: [{label}](openprogram/s/m1)\n"
    plain = "# Plain\n\n## Tea\n\nAda drinks green tea.[^e-1] ^ab12cd34\n\n" + ev.format(label="chat")
    hostile = ("# Hostile\n\n## Te\x1b[2Ja\n\nBob \x1b]52;c;ZXZpbA==\x07likes\u202e coffee.[^e-1] ^cd34ef56\n\n"
               "Carol likes water.[^e-1] ^ef56ab12\n\n" + ev.format(label="ch\x1b[1mat"))
    state = write_minimal_state(tmp_path, {"topics/plain.md": plain, "topics/hostile.md": hostile})
    m = load_model(state, counter=O200kCounter())
    rec = m.records["ab12cd34"]
    assert (rec.headings, rec.body, rec.source_links[0].label) == (("Plain", "Tea"), "Ada drinks green tea.[^e-1]", "chat")
    bob, carol = m.records["cd34ef56"], m.records["ef56ab12"]
    assert bob.headings == ("Hostile", "Tea") and bob.content == "Bob likes coffee."
    assert carol.content == "Carol likes water." and carol.source_links[0].label == "chat"
    for r in (bob, carol):
        for text in (*r.headings, r.body, r.content, *(l.label for l in r.source_links)):
            assert text.isprintable(), repr(text)
