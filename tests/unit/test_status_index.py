"""``status`` answers from the sessions' summary index (``sessions.cache``) and the remembered
insight counts: byte for byte what the full path prints (every session loaded and explained,
``status --full``), text and ``--json``, on the shared fixture and on a generated state, after
the workspace changed under a warm index in the ways an index can be fooled."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from aging import age, settle
from memory_tui.cli import main
from memory_tui.sessions import cache as scache
from memory_tui.sessions.store import load_sessions

NOW = "1790000000"


def _out(capsys, state: Path, *argv: str) -> str:
    assert main(["--state", str(state), *argv]) == 0
    return capsys.readouterr().out


def _sessions(state: Path) -> list[Path]:
    return sorted(p for p in (state / "sessions").iterdir() if (p / "history").is_dir())


def _nodes(sdir: Path) -> list[Path]:
    return sorted((sdir / "history").glob("*.json"))


def _rewrite_in_place(state: Path) -> None:
    """A node's mark flipped, same size, same inode, its mtime put back (``cp -p``, a sync tool)."""
    from memory_tui.sessions.marks import MARK_KEY

    wid = (state / "memory" / ".scriptorium" / "workspace-id").read_text().strip()
    for sdir in _sessions(state):
        for node in _nodes(sdir):
            data = json.loads(node.read_text(encoding="utf-8"))
            if data.get("id") == "ROOT" or data.get("role") not in ("user", "llm", "assistant"):
                continue
            old = node.read_bytes()
            meta = data.setdefault("metadata", {})
            meta[MARK_KEY] = "w-0000000x" if meta.get(MARK_KEY) == wid else wid
            raw = json.dumps(data, separators=(",", ":")).encode()
            if len(raw) > len(old):
                continue
            st = node.stat()
            with open(node, "r+b") as f:
                f.write(raw + b" " * (len(old) - len(raw)))
            os.utime(node, ns=(st.st_atime_ns, st.st_mtime_ns))
            assert node.stat().st_mtime_ns == st.st_mtime_ns and node.stat().st_size == st.st_size
            return
    raise AssertionError("no node to rewrite")


def _damage(state: Path, how: str) -> None:
    sessions = _sessions(state)
    if how == "rewritten_in_place":
        _rewrite_in_place(state)
    elif how == "truncated_node":
        node = _nodes(sessions[-1])[len(_nodes(sessions[-1])) // 2]
        raw = node.read_bytes()
        node.write_bytes(raw[: len(raw) // 2])
    elif how == "new_session":
        shutil.copytree(sessions[0], sessions[0].with_name(sessions[0].name + "n"), symlinks=True)
    elif how == "deleted_session":
        shutil.rmtree(sessions[-1])
    elif how == "racy_node":  # rewritten and read at once, inside the clock tick: no key vouches for it
        _rewrite_in_place(state)
        return
    elif how == "dangling_link":  # a node name that leads nowhere: a problem of that session, and a stable key
        (sessions[0] / "history" / "zz-gone.json").symlink_to(state / "nowhere.json")
    elif how == "topic_edited":  # the records move, the sessions do not: the insight counts must follow
        topic = sorted((state / "memory" / "topics").rglob("*.md"))[0]
        topic.write_text(topic.read_text(encoding="utf-8") + "\nA new paragraph, cited by nobody.\n", encoding="utf-8")
    settle()


def _compare(capsys, state: Path) -> None:
    for fmt in ((), ("--json",)):
        full = _out(capsys, state, *fmt, "status", "--now", NOW, "--full")
        for _ in range(2):  # the run that updates the index, then one from it alone
            got = _out(capsys, state, *fmt, "status", "--now", NOW)
            assert got == full, (fmt, _first_difference(got, full))


def _first_difference(a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}: {x!r} != {y!r}"
    return "lengths differ"


DAMAGE = ["none", "rewritten_in_place", "racy_node", "dangling_link", "truncated_node", "new_session",
          "deleted_session", "topic_edited"]


@pytest.mark.parametrize("damage", DAMAGE)
def test_status_from_the_index_equals_the_full_path_on_the_fixture(fixture_state, capsys, damage):
    age(fixture_state)
    _compare(capsys, fixture_state)  # also fills the index and the insight counts
    _damage(fixture_state, damage)
    _compare(capsys, fixture_state)


@pytest.mark.parametrize("damage", DAMAGE)
def test_status_from_the_index_equals_the_full_path_on_a_generated_state(bench_state_small, tmp_path, capsys, damage):
    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    age(state)
    _compare(capsys, state)
    _damage(state, damage)
    _compare(capsys, state)


def test_status_clock_reasons_are_worded_at_read_time(fixture_state, capsys):
    """An entry made at one time answers another: the idle reasons follow the clock."""
    age(fixture_state)
    sdir = _sessions(fixture_state)[0]
    meta = json.loads((sdir / "meta.json").read_text(encoding="utf-8"))
    updated = meta.get("updated_at")
    assert isinstance(updated, (int, float))
    for now in (str(updated + 5), str(updated + 10_000)):
        full = _out(capsys, fixture_state, "--json", "status", "--now", now, "--full")
        assert _out(capsys, fixture_state, "--json", "status", "--now", now) == full


def test_a_parallel_cold_build_equals_a_serial_one(bench_state_small, tmp_path, monkeypatch):
    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    age(state)
    wid = (state / "memory" / ".scriptorium" / "workspace-id").read_text().strip()
    serial = scache.load_summaries(state, wid, 2000, directory=tmp_path / "a", workers=1)
    monkeypatch.setattr(scache, "PARALLEL_MIN_SESSIONS", 1)
    calls: list[int] = []
    real = scache._read_serial

    def counted(*args, **kwargs):
        calls.append(len(args[1]))  # in this process's memory: a forked worker appends to its own copy
        return real(*args, **kwargs)

    monkeypatch.setattr(scache, "_read_serial", counted)
    parallel = scache.load_summaries(state, wid, 2000, directory=tmp_path / "b", workers=2)
    assert calls == []  # the workers read every session: this process read none (no serial fallback)
    assert parallel.read == serial.read and len(serial.read) == len(load_sessions(state).sessions)
    assert parallel.summaries == serial.summaries and list(parallel.summaries) == list(serial.summaries)
    assert parallel.pending == serial.pending
    again = scache.load_summaries(state, wid, 2000, directory=tmp_path / "b", workers=2)
    assert again.read == () and again.summaries == serial.summaries


def test_a_cold_status_reads_the_sessions_once_in_its_workers(bench_state_small, tmp_path, capsys, monkeypatch):
    """A cold ``status`` builds the summary index in worker processes, which keep each session's
    shape; the insight counts are then made over those shapes, as the app makes them: this
    process reads no node file (before, it read every one for the insights, serially, before
    the build). What it prints is what the full path prints."""
    from aging import session_reads

    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    age(state)
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(scache, "PARALLEL_MIN_SESSIONS", 1)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # a one-core runner builds serially
    reads = session_reads(monkeypatch)
    got = _out(capsys, state, "--json", "status", "--now", NOW)
    assert [r for r in reads if "/history/" in r] == []
    assert json.loads(got)["insights"] is not None
    assert got == _out(capsys, state, "--json", "status", "--now", NOW, "--full")


def test_the_insight_counts_leave_no_shape_of_a_session_that_is_gone(bench_state_small, tmp_path, capsys,
                                                                     monkeypatch):
    """The shapes the summary build keeps are read by the insight counts (``summarize``), which
    leave the table holding only the sessions still in the state."""
    from memory_tui.sessions import shapes

    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    age(state)
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    _out(capsys, state, "--json", "status", "--now", NOW)
    table = shapes.state_dir_of(state)
    before = len(list(table.iterdir()))
    assert before == len(_sessions(state))
    shutil.rmtree(_sessions(state)[-1])
    settle()
    _out(capsys, state, "--json", "status", "--now", NOW)
    assert len(list(table.iterdir())) == before - 1


def test_the_workers_of_a_parallel_build_keep_their_token_counts(bench_state_small, tmp_path, monkeypatch):
    """A pool's worker exits without exit hooks: the counts it made must still reach the memo."""
    from memory_tui.core.format.tokens import COUNT_MEMO

    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    age(state)
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.setattr(scache, "PARALLEL_MIN_SESSIONS", 1)
    COUNT_MEMO.forget()
    wid = (state / "memory" / ".scriptorium" / "workspace-id").read_text().strip()
    got = scache.load_summaries(state, wid, 2000, directory=tmp_path / "index", workers=2)
    assert got.pending.lenient > 0  # there was pending text to count
    assert any(COUNT_MEMO.path().glob("*")), "no token count was saved by the workers"
    COUNT_MEMO.forget()


def _reader_parses(monkeypatch) -> list[str]:
    """The topics a reading command parses from their text (not from a cache entry)."""
    import memory_tui.core.format.topics as topics
    from memory_tui.core.store import parsecache

    seen: list[str] = []
    real = topics.parse_topic

    def spy(path, *args, **kwargs):
        seen.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(topics, "parse_topic", spy)
    monkeypatch.setattr(parsecache, "parse_topic", spy)  # load_tree's own name for it
    return seen


def _fresh_process() -> None:
    from memory_tui.core.cache.registry import forget

    forget()  # every in-process cache gone: what the next process starts from is on disk


def _break_a_citation_in_place(state: Path) -> Path:
    """One record's source link made to name no frame: same size, same inode, the mtime put
    back, so only the ctime tells the file changed."""
    for topic in sorted((state / "memory" / "topics").rglob("*.md")):
        raw = topic.read_bytes()
        at = raw.find(b"#source-")
        if at < 0:
            continue
        start = at + len(b"#source-")
        end = raw.index(b")", start)
        new = raw[:start] + b"f" * (end - start) + raw[end:]
        assert len(new) == len(raw) and new != raw
        st = topic.stat()
        with open(topic, "r+b") as f:
            f.write(new)
        os.utime(topic, ns=(st.st_atime_ns, st.st_mtime_ns))
        after = topic.stat()
        assert (after.st_mtime_ns, after.st_size, after.st_ino) == (st.st_mtime_ns, st.st_size, st.st_ino)
        return topic
    raise AssertionError("no topic cites a frame")


def test_a_reader_starts_from_the_last_readers_parses_kept_outside_the_state(bench_state_small, tmp_path, capsys,
                                                                            monkeypatch):
    """``status`` keeps what it parsed in the user cache (never in the state dir, whose own
    parse cache only transactions write): the next process parses no topic again."""
    from memory_tui.core.store import parsecache

    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    age(state)
    assert not (state / "memory" / ".scriptorium" / parsecache.DIR_NAME).exists()
    first = _out(capsys, state, "status", "--now", NOW)
    _fresh_process()
    parsed = _reader_parses(monkeypatch)
    assert _out(capsys, state, "status", "--now", NOW) == first
    assert parsed == []
    assert not (state / "memory" / ".scriptorium" / parsecache.DIR_NAME).exists()


def test_a_topic_rewritten_in_place_with_its_mtime_put_back_is_seen_by_a_warm_reader(bench_state_small, tmp_path,
                                                                                    capsys, monkeypatch):
    """A reader's kept parse (user cache) is keyed by the topic's full stamp: a same-size
    rewrite with the mtime restored moves the ctime, and ``status`` then equals the full path
    (text and ``--json``), not what the kept parse said."""
    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    age(state)
    before = {fmt: _out(capsys, state, *fmt, "status", "--now", NOW) for fmt in ((), ("--json",))}
    _fresh_process()
    topic = _break_a_citation_in_place(state)
    settle()
    parsed = _reader_parses(monkeypatch)
    for fmt in ((), ("--json",)):
        _fresh_process()
        full = _out(capsys, state, *fmt, "status", "--now", NOW, "--full")
        _fresh_process()
        del parsed[:]
        got = _out(capsys, state, *fmt, "status", "--now", NOW)
        assert got == full, (fmt, _first_difference(got, full))
        assert got != before[fmt]  # the damage shows: a stale parse would have hidden it
        assert parsed == [topic.relative_to(state / "memory" / "topics").as_posix()]


def test_status_builds_no_derived_view_and_parses_each_topic_once(fixture_state, capsys, monkeypatch):
    """``status`` prints none of the derived views (core, timeline, recent), so its open
    builds none; the kept counts take the records' citations from that same parse."""
    import memory_tui.core.store.viewcache as viewcache

    built: list[int] = []
    real = viewcache.ViewCache.build

    def spy(self, *args, **kwargs):
        built.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(viewcache.ViewCache, "build", spy)
    age(fixture_state)
    _fresh_process()
    parsed = _reader_parses(monkeypatch)
    full = _out(capsys, fixture_state, "status", "--now", NOW, "--full")
    del built[:]
    _fresh_process()
    del parsed[:]
    assert _out(capsys, fixture_state, "status", "--now", NOW) == full
    assert built == []
    assert sorted(parsed) == sorted(set(parsed))  # no topic parsed twice in one process


def test_a_warm_status_builds_no_record(fixture_state, capsys, monkeypatch):
    """A warm ``status`` counts the records and reads their citations (from the per-session
    index) without building a record: at scale 4 building them was ~0.8 s of CPU."""
    import traceback

    from memory_tui.core.format.topics import tree as tree_mod

    age(fixture_state)
    full = _out(capsys, fixture_state, "status", "--now", NOW, "--full")
    full_json = _out(capsys, fixture_state, "--json", "status", "--now", NOW, "--full")
    _fresh_process()
    assert _out(capsys, fixture_state, "status", "--now", NOW) == full  # fills the index
    built: list[int] = []
    real = tree_mod.TopicTree.__getattr__

    def spy(self, name):
        if name == "units":
            built.append("".join(traceback.format_stack(limit=9)))
        return real(self, name)

    monkeypatch.setattr(tree_mod.TopicTree, "__getattr__", spy)
    _fresh_process()
    assert _out(capsys, fixture_state, "status", "--now", NOW) == full
    assert _out(capsys, fixture_state, "--json", "status", "--now", NOW) == full_json
    assert built == [], built[0]


def test_the_readers_parse_is_kept_when_the_user_cache_does_not_exist_yet(bench_state_small, tmp_path, monkeypatch):
    """A first run on a machine: the user cache root is made (as every user cache is), not
    skipped, so the next reading process starts from this one's parse."""
    from memory_tui.core.store import parsecache

    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "not" / "yet"))
    _fresh_process()
    memory = bench_state_small / "memory"
    parsecache.load_tree(memory)
    parsecache.keep_for_readers(memory)
    _fresh_process()
    parsed = _reader_parses(monkeypatch)
    parsecache.load_tree(memory)
    assert parsed == []
    assert parsecache.reader_dir(memory).is_dir()


class _CapturedStderr:
    """What Textual puts in ``sys.stderr`` while the app runs: writable, but no real fd."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return -1


def test_a_parallel_cold_build_inside_the_app_reads_in_workers(bench_state_small, tmp_path, monkeypatch):
    """In the app a thread is running (so the pool spawns) and Textual's capture stands in for
    stderr: the pool's resource tracker could not start, and the build lost every session."""
    import threading

    state = tmp_path / "state"
    shutil.copytree(bench_state_small, state, symlinks=True)
    age(state)
    wid = (state / "memory" / ".scriptorium" / "workspace-id").read_text().strip()
    serial = scache.load_summaries(state, wid, 2000, directory=tmp_path / "a", workers=1)
    monkeypatch.setattr(scache, "PARALLEL_MIN_SESSIONS", 1)
    calls: list[int] = []
    real = scache._read_serial

    def counted(*args, **kwargs):
        calls.append(len(args[1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(scache, "_read_serial", counted)
    from multiprocessing import resource_tracker

    resource_tracker._resource_tracker._stop()  # as in a fresh app: no tracker running yet
    stop = threading.Event()
    ui = threading.Thread(target=stop.wait)  # the app's other threads: fork is unsafe, spawn is used
    ui.start()
    monkeypatch.setattr(sys, "stderr", _CapturedStderr())
    try:
        parallel = scache.load_summaries(state, wid, 2000, directory=tmp_path / "b", workers=2)
    finally:
        stop.set()
        ui.join()
    assert calls == []  # read by the spawned workers, not by the serial fallback
    assert parallel.summaries == serial.summaries and parallel.pending == serial.pending


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_the_workers_of_a_cold_build_end_with_a_parent_killed_outright(tmp_path, method):
    """A parent killed by ``kill -9`` (or a timeout) cannot shut its pool down; its workers,
    asleep on a pipe they hold both ends of, must not outlive it."""
    import signal
    import subprocess

    script = (
        "import os, sys, time\n"
        "from memory_tui.sessions.cache import worker_pool\n"
        f"pool = worker_pool(2, {method!r})\n"
        "pids = {pool.submit(os.getpid).result() for _ in range(8)}\n"
        "print(' '.join(map(str, pids)), flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in parent.stdout.readline().split()]
        assert workers and parent.pid not in workers
        assert all(_alive(p) for p in workers)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 30  # a liveness bound, not a timing: the signal is immediate
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [p for p in workers if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"workers {left} outlived their parent"


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie waiting for a parent that is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
