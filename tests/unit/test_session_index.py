"""The sessions' summary index (``sessions.cache``): one envelope per state dir, keyed by
git-style stat data (ctime included), detected and rebuilt when damaged, and never an answer
different from a full load."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from aging import age
from memory_tui.core.cache import envelope
from memory_tui.core.format.tokens import CharCounter
from memory_tui.sessions import cache as scache
from memory_tui.sessions.marks import MARK_KEY
from memory_tui.sessions.records import analyze_session, status_pending_count
from memory_tui.sessions.store import load_sessions

WID = "w-00000001"
COUNTER = CharCounter()


def _full(state: Path, threshold: int = 2000):
    snap = load_sessions(state)
    an = {sid: analyze_session(s, WID, threshold, COUNTER) for sid, s in snap.sessions.items()}
    return scache.summaries_of(snap, an, WID), status_pending_count(snap, WID, an)


def _a_user_node(state: Path) -> tuple[Path, Path]:
    for sdir in sorted((state / "sessions").iterdir()):
        for node in sorted((sdir / "history").glob("*.json")) if (sdir / "history").is_dir() else ():
            data = json.loads(node.read_text(encoding="utf-8"))
            if data.get("role") == "user" and data.get("id") != "ROOT" and isinstance(data.get("output"), str) \
                    and data["output"]:
                return sdir, node
    raise AssertionError("the fixture has a user turn")


def test_one_index_file_and_a_warm_load_reads_nothing(fixture_state, tmp_path):
    age(fixture_state / "sessions")
    where = tmp_path / "cache"
    first = scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    assert first.read
    assert [p.suffix for p in where.iterdir()] == [".index"]
    again = scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    assert again.read == () and again.summaries == first.summaries and again.pending == first.pending


def test_a_node_rewritten_in_place_with_its_old_mtime_is_seen_by_its_ctime(fixture_state, tmp_path):
    """Same size, same inode, same mtime (put back as ``cp -p`` or a sync tool would): only
    the ctime moved. A key of (mtime, size, inode) would answer from the stale entry."""
    age(fixture_state / "sessions")
    where = tmp_path / "cache"
    sdir, node = _a_user_node(fixture_state)
    scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    st = node.stat()
    data = json.loads(node.read_text(encoding="utf-8"))
    meta = data.setdefault("metadata", {})
    if meta.get(MARK_KEY) == WID:
        meta[MARK_KEY] = "w-0000000x"  # same length: unmark
    else:
        meta[MARK_KEY] = WID
    raw = json.dumps(data).encode()
    old = node.read_bytes()
    # keep the size: pad or trim trailing whitespace JSON ignores
    raw = raw + b" " * (len(old) - len(raw)) if len(raw) <= len(old) else None
    if raw is None:  # the mark made it longer: drop spaces after separators instead
        raw = json.dumps(data, separators=(",", ":")).encode()
        assert len(raw) <= len(old)
        raw += b" " * (len(old) - len(raw))
    with open(node, "r+b") as f:
        f.write(raw)
        f.truncate()
    os.utime(node, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = node.stat()
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (st.st_mtime_ns, st.st_size, st.st_ino)
    cached = scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    full, pending = _full(fixture_state)
    assert sdir.name in cached.read
    assert cached.summaries == full.summaries and cached.pending == pending


def test_a_damaged_index_is_detected_and_rebuilt(fixture_state, tmp_path):
    age(fixture_state / "sessions")
    where = tmp_path / "cache"
    first = scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    (index,) = where.glob("*.index")
    raw = index.read_bytes()
    index.write_bytes(raw[:-7] + bytes([raw[-7] ^ 0x10]) + raw[-6:])  # one flipped bit
    assert envelope.read(index, scache.INDEX_KIND, scache.INDEX_VERSION) is None
    again = scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    full, pending = _full(fixture_state)
    assert set(again.read) == set(first.read)  # every session read for real, none from the damage
    assert again.summaries == full.summaries and again.pending == pending
    assert envelope.read(index, scache.INDEX_KIND, scache.INDEX_VERSION) is not None  # rewritten whole
    assert scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where).read == ()


def test_an_index_of_another_state_dir_is_not_used(fixture_state, tmp_path):
    """The file name is a digest of the state's path; its body names the path too."""
    age(fixture_state / "sessions")
    where = tmp_path / "cache"
    scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    (index,) = where.glob("*.index")
    body = envelope.read(index, scache.INDEX_KIND, scache.INDEX_VERSION)
    body["state"] = "/elsewhere"
    envelope.write(index, scache.INDEX_KIND, body, scache.INDEX_VERSION)
    assert scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where).read


def test_an_index_of_the_previous_row_shape_is_a_miss(fixture_state, tmp_path):
    """Rows once carried the live record ids and their pending share beside the live turns;
    the live turns are now their one source. An index written in the previous shape (envelope
    version 1, format 3, two more fields before the live turns) is read as nothing and rebuilt,
    never taken field by field."""
    age(fixture_state / "sessions")
    where = tmp_path / "cache"
    first = scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    (index,) = where.glob("*.index")
    body = envelope.read(index, scache.INDEX_KIND, scache.INDEX_VERSION)
    old_rows = {}
    for sid, row in body["entries"].items():
        live = row[-1]
        ids = tuple(t[0] for t in live)
        old_rows[sid] = (*row[:-1], ids, tuple(t[0] for t in live if t[4]), live)
    envelope.write(index, scache.INDEX_KIND, {"format": "memory-tui/session-summary/3", "state": body["state"],
                                              "entries": old_rows}, 1)
    again = scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    assert set(again.read) == set(first.read)  # every session read again
    assert again.summaries == first.summaries
    assert envelope.read(index, scache.INDEX_KIND, scache.INDEX_VERSION) is not None  # rewritten in today's shape


def test_the_drift_count_is_the_live_turns_drift(fixture_state):
    """``status``'s drift figure and ``why --drift``'s list come from the same live turns."""
    from memory_tui.sessions.kept import Citations, drift_of, kept_counts, kept_states

    snap = load_sessions(fixture_state)
    # every other node cited, whether marked or not: both kinds of disagreement occur
    cites = Citations([(f"openprogram/{sid}/{nid}", f"m{i}", "topics/x.md", i)
                       for sid, s in snap.sessions.items() for i, nid in enumerate(s.nodes) if i % 2 == 0])
    checked = 0
    for sid, s in snap.sessions.items():
        summary = scache.summarize_session(s, analyze_session(s, WID, 2000, COUNTER), WID)
        assert scache.drift_count_of(summary, cites) == len(drift_of(sid, summary.live, cites).items)
        assert scache.kept_counts_of(summary, cites) == kept_counts(kept_states(s, cites, WID))
        checked += bool(summary.live)
    assert checked


def test_the_keys_stat_each_node_file_once_and_each_session_folder_twice(fixture_state, monkeypatch):
    """``status`` takes every session's key on every run: one ``stat`` per node and commit
    file (``DirEntry.stat`` of the listing), and of the session's own folders only the
    stamp parts (history/, meta.json, context/commits/) before and after the listing."""
    import memory_tui.sessions.store as store

    age(fixture_state / "sessions")
    found, registry, registry_ok, _problems = store.discover(fixture_state)
    assert len(found) >= 2
    calls: list[str] = []
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        calls.append(os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting_stat)
    monkeypatch.setattr(scache, "discover", lambda _state: (found, registry, registry_ok, []))  # its own stats aside
    keys = scache.content_keys(fixture_state)
    assert all(keys.values())
    assert not [p for p in calls if "/history/" in p or "/commits/" in p]  # a node file: its listing's stat only
    # 3 stamp parts, twice, per session; the sessions folder once (where the registry is)
    assert len(calls) <= 6 * len(found) + 1, (len(calls), "\n".join(calls))


def test_keys_follow_every_stamp_field_and_the_racy_rule(fixture_state, tmp_path):
    """A node's size, inode or ctime moved, a node added or removed, a dangling link: each a
    new key; a file inside the clock tick: no key at all."""
    import memory_tui.sessions.store as store

    age(fixture_state / "sessions")
    sdir, node = _a_user_node(fixture_state)
    sid = sdir.name

    def key() -> str | None:
        return scache.content_keys(fixture_state)[sid]

    seen = [key()]
    assert seen[0] is not None and key() == seen[0]
    st = node.stat()
    os.chmod(node, 0o600 if st.st_mode & 0o777 != 0o600 else 0o644)  # the ctime alone moves
    os.utime(node, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert key() is None  # racy: the ctime is now
    time.sleep(0.15)
    seen.append(key())
    raw = node.read_bytes()
    node.unlink()
    node.write_bytes(raw)  # a new inode (and size, mtime put back)
    os.utime(node, ns=(st.st_atime_ns, st.st_mtime_ns))
    time.sleep(0.15)
    seen.append(key())
    link = sdir / "history" / "zz-dangling.json"
    link.symlink_to(tmp_path / "nowhere.json")
    age(sdir)
    seen.append(key())
    assert key() == seen[-1]  # a dangling link is stable
    link.unlink()
    age(sdir)
    assert len(set(seen)) == len(seen) and None not in seen, seen
    assert store.session_content_key(sid, sdir, fixture_state, {}, False) != seen[-1]  # the registry is in it


def test_a_live_turn_of_the_wrong_shape_makes_the_entry_a_miss():
    """The live turns are checked column by column: every wrong field is still caught."""
    good = (("n1", ("t1", "t2"), "history/n1.json", None, True), ("n2", (), "history/n2.json", {"w": 1}, False))
    assert scache._live_ok(good) and scache._live_ok(())
    bad = [
        list(good),  # not a tuple
        (good[0][:4],),  # a field missing
        (("n1", ["t1"], "f", None, True),),  # tips not a tuple
        (("n1", ("t1", 2), "f", None, True),),  # a tip that is not a string
        ((1, ("t1",), "f", None, True),),  # an id that is not a string
        (("n1", ("t1",), None, None, True),),  # a file that is not a string
        (("n1", ("t1",), "f", None, 1),),  # pending not a bool
        (good[0], "n2"),  # a turn that is not a tuple
    ]
    for live in bad:
        assert not scache._live_ok(live), live
