"""The persistent per-session summary cache (``sessions.cache``) gives
exactly what a full uncached load and analysis give, after any sequence of the changes a
writer (or a hostile neighbour of the cache) makes; an unchanged session is never re-read."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.cache import envelope
from memory_tui.core.format.tokens import CharCounter
from memory_tui.sessions import cache as scache
from memory_tui.sessions.marks import MARK_KEY, mark_nodes
from memory_tui.sessions.records import analyze_session, status_pending_count
from memory_tui.sessions.store import load_sessions

WID = "w-00000001"
COUNTER = CharCounter()
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

OPS = st.lists(
    st.tuples(
        st.sampled_from(["mark", "inplace", "inplace", "inplace_keep_mtime", "delete", "corrupt", "add", "meta", "registry", "garbage_entry",
                         "forged_entry", "threshold", "nothing"]),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=6,
)


class _Clock:
    """Old, distinct file times: a change is outside the racy window at once and never
    shares a stamp with what it replaced; the ctimes utime moved are waited out."""

    def __init__(self) -> None:
        self.t = time.time_ns() - 86_400 * 10**9

    def age(self, *paths: Path) -> None:
        for top in paths:
            for p in [top, *top.rglob("*")] if top.is_dir() else [top]:
                self.t += 10**9
                os.utime(p, ns=(self.t, self.t), follow_symlinks=False)
        time.sleep(0.15)  # utime moved the ctimes: let them leave the racy window


def _uncached(state: Path, threshold: int):
    snap = load_sessions(state)
    an = {sid: analyze_session(s, WID, threshold, COUNTER) for sid, s in snap.sessions.items()}
    return scache.summaries_of(snap, an, WID), status_pending_count(snap, WID, an)


def _json_or_none(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace") or "null")
    except ValueError:
        return None


def _sessions(state: Path) -> list[Path]:
    return sorted(p for p in (state / "sessions").iterdir() if (p / "history").is_dir())


@SETTINGS
@given(ops=OPS)
def test_cached_summaries_equal_a_full_load(fixture_state_ro, ops):
    tmp = Path(tempfile.mkdtemp())
    try:
        state, where = tmp / "state", tmp / "cache"
        shutil.copytree(fixture_state_ro, state, symlinks=True)
        clock = _Clock()
        clock.age(state / "sessions")
        threshold = 2000
        first = scache.load_summaries(state, WID, threshold, COUNTER, directory=where)
        again = scache.load_summaries(state, WID, threshold, COUNTER, directory=where)
        assert again.read == ()  # nothing changed: no session is read
        assert again.summaries == first.summaries and again.pending == first.pending
        for op, n in ops:
            sdirs = _sessions(state)
            sdir = sdirs[n % len(sdirs)]
            nodes = sorted((sdir / "history").glob("*.json"))
            node = nodes[n % len(nodes)] if nodes else None
            touched: set[str] = set()
            if op == "mark" and node is not None:
                data = _json_or_none(node)  # an earlier "corrupt" op may have broken it
                if isinstance(data, dict) and isinstance(data.get("id"), str):
                    mark_nodes(sdir, [data["id"]], WID)
                    touched.add(sdir.name)
            elif op in ("inplace", "inplace_keep_mtime") and node is not None:
                # Toggle the workspace's mark on a node, rewriting the file in place (same inode,
                # the directory's mtime untouched): only the file's own stat shows it.
                users = [p for p in nodes if b'"role": "user"' in p.read_bytes()] or nodes
                node = users[n % len(users)]
                data = _json_or_none(node)
                meta = data.get("metadata") if isinstance(data, dict) else None
                if isinstance(meta, dict):
                    if meta.get(MARK_KEY) == WID:
                        del meta[MARK_KEY]
                    else:
                        meta[MARK_KEY] = WID
                if isinstance(data, dict):
                    before = node.stat()
                    with open(node, "r+b") as f:
                        f.write(json.dumps(data).encode())
                        f.truncate()
                    if op == "inplace":
                        clock.age(node)  # only the file's own time moves: the directory stamps do not
                    else:  # the old mtime put back (cp -p, a sync tool): only the ctime moved
                        os.utime(node, ns=(before.st_atime_ns, before.st_mtime_ns))
            elif op == "delete" and node is not None and len(nodes) > 1:
                node.unlink()
                touched.add(sdir.name)
            elif op == "corrupt" and node is not None:
                node.write_text('{"id": "x", ', encoding="utf-8")
                touched.add(sdir.name)
            elif op == "add" and node is not None and node.name != f"9999-u-added{n}.json":
                # (the node picked can be the copy an earlier "add" of the same n made)
                shutil.copyfile(node, sdir / "history" / f"9999-u-added{n}.json")
                touched.add(sdir.name)
            elif op == "meta" and (sdir / "meta.json").is_file():
                data = json.loads((sdir / "meta.json").read_text(encoding="utf-8"))
                data["title"] = f"renamed {n}"
                (sdir / "meta.json").write_text(json.dumps(data), encoding="utf-8")
                touched.add(sdir.name)
            elif op == "registry":
                reg = state / "sessions" / "index.json"
                index = json.loads(reg.read_text(encoding="utf-8"))
                if sdir.name in index and isinstance(index[sdir.name], dict):
                    index[sdir.name]["updated_at"] = float(n)
                    reg.write_text(json.dumps(index), encoding="utf-8")
                    touched.add(sdir.name)
                clock.age(reg)
            elif op in ("garbage_entry", "forged_entry"):
                index = sorted(where.glob("*.index"))
                if index:
                    victim = index[0]
                    if op == "garbage_entry":  # torn, flipped or foreign bytes: the seal's crc
                        raw = victim.read_bytes()
                        victim.write_bytes([b"\x00not an index" * (n % 3), raw[: n % len(raw)],
                                            raw[:-1] + bytes([raw[-1] ^ 1])][n % 3])
                    else:  # intact seal, the right keys, hostile values: still a miss
                        body = envelope.read(victim, scache.INDEX_KIND, scache.INDEX_VERSION)
                        sid = sorted(body["entries"])[n % len(body["entries"])]
                        row = body["entries"][sid]
                        body["entries"][sid] = (row[0], row[1], -1, row[3], "many", row[5], ((1,),))
                        envelope.write(victim, scache.INDEX_KIND, body, scache.INDEX_VERSION)
            elif op == "threshold":
                threshold = 500 + n % 3000  # every entry's key changes
            if op in ("inplace", "inplace_keep_mtime"):
                touched.add(sdir.name)
            elif touched:
                clock.age(sdir)
            cached = scache.load_summaries(state, WID, threshold, COUNTER, directory=where)
            full, pending = _uncached(state, threshold)
            assert cached.summaries == full.summaries, op
            assert list(cached.summaries) == list(full.summaries), op
            assert cached.pending == pending == full.pending, op
            if op in ("mark", "inplace", "inplace_keep_mtime", "delete", "corrupt", "add", "meta"):
                assert set(cached.read) <= touched, (op, cached.read)
            if op in ("inplace", "inplace_keep_mtime"):
                time.sleep(0.15)  # the rewrite's ctime is racy until a tick has passed: then kept
                scache.load_summaries(state, WID, threshold, COUNTER, directory=where)
            settled = scache.load_summaries(state, WID, threshold, COUNTER, directory=where)
            assert settled.read == () and settled.summaries == full.summaries, op
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_other_code_or_counter_is_a_miss_and_nothing_is_written_into_the_state(fixture_state, tmp_path, monkeypatch):
    _Clock().age(fixture_state / "sessions")
    where = tmp_path / "cache"
    before = sorted(p.relative_to(fixture_state) for p in fixture_state.rglob("*"))
    first = scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where)
    assert first.read and len(list(where.glob("*.index"))) == 1  # one compact index, not a file per session
    assert sorted(p.relative_to(fixture_state) for p in fixture_state.rglob("*")) == before
    assert scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where).read == ()
    assert scache.load_summaries(fixture_state, WID, 2000, CharCounter(3), directory=where).read == first.read
    monkeypatch.setattr(scache, "_CODE_TAG", "other-code")
    assert scache.load_summaries(fixture_state, WID, 2000, COUNTER, directory=where).read == first.read
    # a counter the cache cannot name is never cached
    class Odd(CharCounter):
        pass
    assert scache.load_summaries(fixture_state, WID, 2000, Odd(), directory=where).read == first.read
