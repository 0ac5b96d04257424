"""``why SESSION`` answers from the per-session citations index (``sessions/citeindex``)
exactly as from a parse of every topic, and parses nothing while the index holds.

The oracle is the full path: ``MEMORY_TUI_TEST_DERIVE=full`` parses the topics and keeps no
index. A warm run is then made to fail loudly if it parses anything (``load_tree`` raises),
so an equal answer proves it came from the index. The index must miss -- never answer wrongly
-- after an edit, after a same-size rewrite whose mtime was put back (only the ctime moved),
and when its file is damaged, truncated or another workspace's.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from aging import age
from memory_tui.cli import main
from memory_tui.core.store import parsecache
from memory_tui.sessions import citeindex
from memory_tui.sessions.kept import Citations, citations_for_state

NOW = "1796100000"
SUB_AGENT, PARENT = "local_0c0c0c0c0c", "local_f6e5d4c3b2"


def _run(capsys, *argv) -> str:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return out


def _sessions(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "sessions").iterdir() if p.is_dir())


def _answers(capsys, state: Path, sids: list[str]) -> dict[tuple[str, str], str]:
    out = {}
    for sid in sids:
        out[sid, "json"] = _run(capsys, "--state", str(state), "why", sid, "--json", "--now", NOW)
        out[sid, "text"] = _run(capsys, "--state", str(state), "why", sid, "--now", NOW)
    out["*", "drift"] = _run(capsys, "--state", str(state), "why", "--drift", SUB_AGENT, "--json", "--now", NOW)
    return out


class _Parses:
    """Counts the topic tree's parses; ``forbid`` makes one fail the test."""

    def __init__(self, monkeypatch) -> None:
        self.calls = 0
        self.forbidden = False
        real = parsecache.load_tree

        def load_tree(*a, **k):
            self.calls += 1
            if self.forbidden:
                raise AssertionError("the topics were parsed although the citations index holds")
            return real(*a, **k)

        monkeypatch.setattr(parsecache, "load_tree", load_tree)


def _full(capsys, derive, state: Path, sids: list[str]) -> dict:
    derive("full")
    try:
        return _answers(capsys, state, sids)
    finally:
        derive(None)


def test_why_session_from_the_index_is_the_full_answer_byte_for_byte(fixture_state, capsys, derive, monkeypatch):
    age(fixture_state)
    sids = _sessions(fixture_state)
    full = _full(capsys, derive, fixture_state, sids)
    assert not citeindex.index_path(fixture_state / "memory").exists()  # `full` keeps nothing
    parses = _Parses(monkeypatch)
    _run(capsys, "--state", str(fixture_state), "why", sids[0], "--now", NOW)  # makes the index
    assert parses.calls == 1 and citeindex.index_path(fixture_state / "memory").is_file()
    parses.forbidden = True
    decoded: list[str] = []
    real_entry = citeindex.Stored.entry
    monkeypatch.setattr(citeindex.Stored, "entry", lambda self, sid: decoded.append(sid) or real_entry(self, sid))
    assert _answers(capsys, fixture_state, sids) == full
    # each run decoded only the session it was asked about
    assert sorted(set(decoded)) == sids and decoded.count(PARENT) == 2


def test_an_edited_state_is_answered_from_a_new_parse_then_a_new_index(fixture_state, capsys, derive, monkeypatch):
    age(fixture_state)
    sids = _sessions(fixture_state)
    _run(capsys, "--state", str(fixture_state), "why", SUB_AGENT, "--now", NOW)  # the index of the old topics
    before = _full(capsys, derive, fixture_state, sids)
    # a record citing a turn of the sub-agent session is deleted (the project's own verb)
    topic = fixture_state / "memory" / "topics" / "projects" / "cli-language.md"
    assert "[^e-184754ca31] ^302a9bb2" in topic.read_text(encoding="utf-8")
    _run(capsys, "--state", str(fixture_state), "record", "delete", "302a9bb2")
    parses = _Parses(monkeypatch)
    after = _answers(capsys, fixture_state, sids)  # stamps moved: parsed again (racy ones: every time)
    assert parses.calls >= 1
    assert after != before
    assert after == _full(capsys, derive, fixture_state, sids)
    time.sleep(0.15)  # out of the racy window: the next run keeps a new index, the one after uses it
    _run(capsys, "--state", str(fixture_state), "why", SUB_AGENT, "--now", NOW)
    parses.forbidden = True
    assert _answers(capsys, fixture_state, sids) == after


def test_a_same_size_rewrite_with_its_mtime_put_back_is_seen(fixture_state, capsys, derive, monkeypatch):
    # a record's citation moves from one turn to another of the same archive: the same
    # bytes count, and the mtime restored; only the ctime tells the file changed
    age(fixture_state)
    sids = _sessions(fixture_state)
    parses = _Parses(monkeypatch)
    _run(capsys, "--state", str(fixture_state), "why", SUB_AGENT, "--now", NOW)
    before = _answers(capsys, fixture_state, sids)
    assert parses.calls == 1  # the first run parsed and kept the index; the rest read it
    topic = fixture_state / "memory" / "topics" / "projects" / "cli-language.md"
    st = topic.stat()
    text = topic.read_text(encoding="utf-8")
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("[^e-184754ca31]:"))
    assert "#source-eb4a7473c6aeaaa9" in lines[at]
    lines[at] = lines[at].replace("#source-eb4a7473c6aeaaa9", "#source-7457d949d31d7b06")
    topic.write_text("\n".join(lines), encoding="utf-8")
    os.utime(topic, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert topic.stat().st_size == st.st_size and topic.stat().st_mtime_ns == st.st_mtime_ns
    time.sleep(0.15)
    after = _answers(capsys, fixture_state, sids)
    assert parses.calls == 2  # the stamp's ctime moved: parsed once, and the new index kept
    assert after[SUB_AGENT, "json"] != before[SUB_AGENT, "json"]
    assert after == _full(capsys, derive, fixture_state, sids)


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "another workspace's", "another version", "not an index"])
def test_a_damaged_or_foreign_index_is_a_miss(fixture_state, tmp_path, capsys, derive, monkeypatch, damage):
    age(fixture_state)
    path = citeindex.index_path(fixture_state / "memory")
    if damage == "another workspace's":
        # another copy of the same files, whose index is intact: its path is not this one's
        other = tmp_path / "other"
        shutil.copytree(fixture_state, other, symlinks=True)
        age(other)
        _run(capsys, "--state", str(other), "why", SUB_AGENT, "--now", NOW)
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(citeindex.index_path(other / "memory"), path)
    else:
        _run(capsys, "--state", str(fixture_state), "why", SUB_AGENT, "--now", NOW)
        data = bytearray(path.read_bytes())
        if damage == "flipped byte":
            data[len(data) // 2] ^= 0x40
        elif damage == "cut short":
            del data[len(data) - 7:]
        elif damage == "another version":
            import struct

            from memory_tui.core.cache import envelope

            # the same bytes, labelled as the next version of the format
            struct.pack_into(">H", data, len(envelope.MAGIC) + len(citeindex.KIND) + 1, citeindex.VERSION + 1)
        else:
            data = bytearray(b'{"entries": {}}')
        path.write_bytes(bytes(data))
    sids = _sessions(fixture_state)
    parses = _Parses(monkeypatch)
    assert citeindex.read(fixture_state / "memory", *citeindex.stamps_now(fixture_state / "memory")) is None
    got = _answers(capsys, fixture_state, sids)
    assert parses.calls >= 1  # a miss: parsed, and the index made again
    assert got == _full(capsys, derive, fixture_state, sids)
    parses.forbidden = True
    assert _answers(capsys, fixture_state, sids) == got


def _tamper(memory: Path, sid: str) -> None:
    """Rewrite the (valid) index with one citing record of ``sid`` dropped, under the stamps of
    the files as they are: an index that holds by its key but answers wrongly."""
    topics, archives = citeindex.stamps_now(memory)
    stored = citeindex.read(memory, topics, archives)
    assert stored is not None
    entries = {s: stored.entry(s) for s in stored.sessions()}
    groups, frames = entries[sid]
    assert groups
    entries[sid] = (groups[1:], frames)
    assert citeindex.write(memory, topics, archives, stored.reason, entries)


def test_check_mode_compares_the_indexed_and_the_full_answer(fixture_state, capsys, derive):
    from memory_tui.core.switches import IncrementalMismatch

    age(fixture_state)
    memory = fixture_state / "memory"
    _run(capsys, "--state", str(fixture_state), "why", SUB_AGENT, "--now", NOW)
    derive("check")
    # a sound index: both sides agree, and the full one is the answer
    citations, reason = citations_for_state(fixture_state, sessions=(SUB_AGENT,))
    assert reason is None and citations.parsed
    _tamper(memory, SUB_AGENT)
    with pytest.raises(IncrementalMismatch):
        citations_for_state(fixture_state, sessions=(SUB_AGENT,))
    _tamper(memory, SUB_AGENT)
    with pytest.raises(IncrementalMismatch):
        citations_for_state(fixture_state)  # every session
    # the wrong index is what the default mode would have answered: the check is what catches it
    _tamper(memory, SUB_AGENT)
    derive(None)
    wrong, _ = citations_for_state(fixture_state, sessions=(SUB_AGENT,))
    derive("full")
    right, _ = citations_for_state(fixture_state, sessions=(SUB_AGENT,))
    nids = {n for s, n in right._raw if s == SUB_AGENT}
    assert wrong.session_answers(SUB_AGENT, nids) != right.session_answers(SUB_AGENT, nids)


def test_one_sessions_citations_refuse_a_question_about_another(fixture_state, capsys):
    age(fixture_state)
    _run(capsys, "--state", str(fixture_state), "why", SUB_AGENT, "--now", NOW)
    citations, _ = citations_for_state(fixture_state, sessions=(SUB_AGENT,))
    assert not citations.parsed and citations.sessions == {SUB_AGENT}
    with pytest.raises(KeyError, match=PARENT):
        citations.cited(PARENT, "anything")
    whole, _ = citations_for_state(fixture_state)
    assert whole.sessions is None
    full, _ = citations_for_state(fixture_state, sessions=(SUB_AGENT,), switches=_switches("full"))
    nids = {n for s, n in full._raw if s == SUB_AGENT} | {"c00000000001", "no-such-node"}
    assert citations.session_answers(SUB_AGENT, nids) == full.session_answers(SUB_AGENT, nids)
    assert isinstance(Citations.empty(), Citations)


def _switches(mode: str):
    from memory_tui.core.switches import Switches

    return Switches(mode)


def test_a_sub_agent_meta_json_spelled_with_escapes_is_still_found(fixture_state, capsys):
    # `why SESSION` skips decoding a meta.json that cannot say agent_spawn; one that spells it
    # with JSON escapes still says it
    meta = fixture_state / "sessions" / SUB_AGENT / "meta.json"
    before = json.loads(_run(capsys, "--state", str(fixture_state), "why", PARENT, "--json", "--now", NOW))
    assert before["sessions"][PARENT]["links"]
    text = meta.read_text(encoding="utf-8")
    assert '"agent_spawn"' in text
    meta.write_text(text.replace('"agent_spawn"', '"\\u0061gent_spawn"'), encoding="utf-8")
    after = json.loads(_run(capsys, "--state", str(fixture_state), "why", PARENT, "--json", "--now", NOW))
    assert after["sessions"][PARENT]["links"] == before["sessions"][PARENT]["links"]


def test_a_folder_the_walk_cannot_read_uses_no_index(fixture_state, capsys, derive, monkeypatch):
    """An I/O error while the stamps are taken leaves nothing to key by: the answer comes from
    a parse, and the index is neither trusted nor rewritten."""
    import errno

    from memory_tui.core import fsutil

    age(fixture_state)
    sids = _sessions(fixture_state)
    want = _full(capsys, derive, fixture_state, sids)
    assert _answers(capsys, fixture_state, sids) == want  # the index made
    path = citeindex.index_path(fixture_state / "memory")
    before = path.stat()
    real = fsutil.md_file_stats

    def failing(top, prefix=""):
        if Path(top).name == "sources":
            raise OSError(errno.EIO, "Input/output error", str(top))
        return real(top, prefix)

    monkeypatch.setattr(citeindex, "md_file_stats", failing)
    assert citeindex.stamps_now(fixture_state / "memory") is None
    parses = _Parses(monkeypatch)
    assert _answers(capsys, fixture_state, sids) == want
    assert parses.calls >= 1
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
