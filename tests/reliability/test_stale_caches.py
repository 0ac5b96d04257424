"""A cache may make an answer faster, never different: for every cache a file feeds, a
same-size rewrite of that file with its mtime put back (``os.utime(ns=...)``, what an archive
extractor or ``touch -d`` does) must give the answer a cache-free run gives.

Each case first fills the caches (a real install of another topic: parse cache, archive
cache, view parts, revision memo, token memo...), then rewrites one file in place keeping
its size, inode and mtime, and compares the verb's answer with a run that has no cache at all
(a fresh copy of the state and an empty user cache dir). Only the ctime shows such a change;
the cache kit's stamp (``core.cache.stamp``) holds it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ADA = "memory/topics/people/ada.md"
ARCHIVE = "memory/sources/openprogram/_v2/local_a1b2c3d4e5.md"


def _cli(state: Path, cache: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    env = dict(os.environ, MEMORY_TUI_CACHE_DIR=str(cache))
    run = subprocess.run([sys.executable, "-m", "memory_tui", "--state", str(state), *args], env=env,
                         input=stdin, capture_output=True, text=True, timeout=300)
    return run.returncode, run.stdout + run.stderr


def _rewrite_in_place(path: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` (same length) in the file itself, then put its mtime back."""
    assert len(old) == len(new)
    st = os.stat(path)
    text = path.read_text()
    assert old in text
    out = text.replace(old, new, 1)
    with open(path, "r+") as fh:
        fh.write(out)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (st.st_mtime_ns, st.st_size, st.st_ino)


def _flip_trust(path: Path, source_id: str) -> None:
    """Make the frame of ``source_id`` pending (same length: "trusted" -> "pending")."""
    text = path.read_text()
    m = re.search(re.escape(f"source-id:{source_id} -->") + r"\n.*\n<!-- source-meta:(\S+) -->", text)
    b64 = m.group(1)
    meta = json.loads(base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)))
    assert meta["trust_state"] == "trusted"
    meta["trust_state"] = "pending"
    new = base64.urlsafe_b64encode(json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()).decode().rstrip("=")
    st = os.stat(path)
    out = text[:m.start(1)] + new + text[m.end(1):]
    assert len(out) == len(text)
    with open(path, "r+") as fh:
        fh.write(out)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture
def warm(fixture_state, tmp_path):
    """``(state, user cache)`` after an install of another topic filled every cache, old
    enough that no stamp is inside the clock tick."""
    cache = tmp_path / "user-cache"
    cache.mkdir()
    cli_md = fixture_state / "memory/topics/projects/cli-language.md"
    text = cli_md.read_text().replace("# CLI language choice", "# CLI language choices", 1)
    code, out = _cli(fixture_state, cache, "edit", "topics/projects/cli-language.md", "--from", "-", stdin=text)
    assert code == 0, out
    assert list((fixture_state / "memory/.scriptorium/memory-tui-cache").iterdir())  # the parse cache was written
    time.sleep(0.25)
    return fixture_state, cache


def _cold(state: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of ``state`` without any of memory-tui's caches, and an empty user cache."""
    copy = tmp_path / "cold" / state.name
    shutil.copytree(state, copy, symlinks=True)
    rt = copy / "memory/.scriptorium"
    for name in os.listdir(rt):
        if name.startswith("memory-tui-"):
            target = rt / name
            shutil.rmtree(target) if target.is_dir() else target.unlink()
    cache = tmp_path / "cold-cache"
    cache.mkdir(exist_ok=True)
    return copy, cache


def test_show_reads_a_topic_rewritten_with_its_mtime_restored(warm, tmp_path):
    """The parse cache (topics): ``show`` answers the new bytes."""
    state, cache = warm
    _rewrite_in_place(state / ADA, "short answers", "quick answers")
    code, out = _cli(state, cache, "show", "topics/people/ada.md")
    assert code == 0, out
    assert "wants quick answers" in out and "wants short answers" not in out
    cold = _cli(*_cold(state, tmp_path), "show", "topics/people/ada.md")
    assert (code, out.replace(str(state), "S")) == (cold[0], cold[1].replace(str(tmp_path / "cold" / state.name), "S"))


def test_views_check_sees_a_topic_rewritten_with_its_mtime_restored(warm, tmp_path):
    """The view parts and parse cache: ``views --check`` says stale, as a cache-free run does."""
    state, cache = warm
    _rewrite_in_place(state / ADA, "short answers", "quick answers")
    code, out = _cli(state, cache, "views", "--check")
    cold_code, cold_out = _cli(*_cold(state, tmp_path), "views", "--check")
    assert cold_code != 0 and "stale" in cold_out  # what the bytes say
    assert (code, out) == (cold_code, cold_out)


@pytest.mark.parametrize("check", [True, False], ids=["check", "install"])
def test_a_frame_whose_trust_flipped_in_place_is_not_cited(warm, tmp_path, check):
    """The archive cache: a frame made pending in place (same size, mtime restored) is no
    longer trusted, so an edit that newly cites it is refused as a cache-free run refuses it,
    and nothing is installed."""
    state, cache = warm
    _flip_trust(state / ARCHIVE, "openprogram/local_a1b2c3d4e5/a00000000002")
    before = (state / ADA).read_bytes()
    text = before.decode().replace(
        "#source-fc88b9162aa794be)",
        "#source-fc88b9162aa794be), [more](../../sources/openprogram/_v2/local_a1b2c3d4e5.md#source-70e7f66d02bd5858)")
    args = ["edit", "topics/people/ada.md", "--from", "-"] + (["--check"] if check else [])
    cold_code, cold_out = _cli(*_cold(state, tmp_path), *args, stdin=text)
    assert cold_code != 0 and "source reference is not trusted" in cold_out
    code, out = _cli(state, cache, *args, stdin=text)
    assert (code, out) == (cold_code, cold_out)
    assert (state / ADA).read_bytes() == before


def test_a_trust_verdict_rests_on_bytes_not_on_a_kept_entry(fixture_state):
    """Even an archive entry that matches its file's stamp is checked against the file's
    bytes before a new citation is let in on its trust (the persisted cache is another
    process's word; a verdict that installs is decided on bytes this process read)."""
    from memory_tui.core.format.sources import FROM_KEPT, SourceIndex

    mem = fixture_state / "memory"
    index = SourceIndex.load(mem)
    sid = "openprogram/local_a1b2c3d4e5/a00000000002"
    entry = index.files["sources/openprogram/_v2/local_a1b2c3d4e5.md"]
    assert index._check_new(sid, True, None, "", v2=True) is None  # trusted when indexed
    _flip_trust(mem / "sources/openprogram/_v2/local_a1b2c3d4e5.md", sid)
    entry.__dict__[FROM_KEPT] = True  # as if it had come from the parse cache
    problem = index._check_new(sid, True, None, "", v2=True)
    assert problem is not None and "not trusted" in problem.message


def _triple_counts(folder: Path) -> int:
    """Every count in the token memo's files, tripled, each file left well-formed in its own
    syntax (JSON stays JSON; an envelope keeps its header, its crc left as it was)."""
    import marshal
    import struct

    n = 0
    for path in sorted(folder.iterdir()):
        data = path.read_bytes()
        if path.suffix == ".json":
            body = json.loads(data)
            body["counts"] = {k: v * 3 for k, v in body["counts"].items()}
            path.write_text(json.dumps(body))
            n += 1
            continue
        cut = data.index(b"\0", data.index(b"\0") + 1) + 1
        head = struct.Struct(">HIQ")
        version, crc, _length = head.unpack_from(data, cut)
        tag, counts = marshal.loads(data[cut + head.size:])
        payload = marshal.dumps((tag, {k: v * 3 for k, v in counts.items()}), 4)
        path.write_bytes(data[:cut] + head.pack(version, crc, len(payload)) + payload)
        n += 1
    return n


def test_token_counts_changed_in_the_user_cache_do_not_change_what_is_installed(warm, tmp_path):
    """The token memo: an edit of topics/core.md renders core.md from counts the encoder
    made, never from counts edited in the user cache."""
    state, cache = warm
    counts = cache / "o200k-counts"
    assert _triple_counts(counts) > 0
    text = (state / "memory/topics/core.md").read_text().replace("drinks tea.", "drinks tea!", 1)
    cold_state, cold_cache = _cold(state, tmp_path)
    cold = _cli(cold_state, cold_cache, "edit", "topics/core.md", "--from", "-", stdin=text)
    warm_run = _cli(state, cache, "edit", "topics/core.md", "--from", "-", stdin=text)
    assert cold[0] == warm_run[0] == 0, (cold, warm_run)
    assert (state / "memory/core.md").read_bytes() == (cold_state / "memory/core.md").read_bytes()
    assert len((state / "memory/core.md").read_text().splitlines()) > 13


def test_outline_cache_sees_a_topic_rewritten_with_its_mtime_restored(fixture_state, tmp_path, monkeypatch):
    """The Topics outline the app paints first (user cache): a new title is shown."""
    from memory_tui.core.store.outline import OutlineCache, topic_outline

    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "outline"))
    mem = fixture_state / "memory"
    cache = OutlineCache(mem, tmp_path)
    time.sleep(0.25)
    topic_outline(mem, cache=cache)
    cache.save()
    _rewrite_in_place(mem / "topics/people/ada.md", "# Ada", "# Bob")
    again = OutlineCache(mem, tmp_path)
    got = {o.path: o.title for o in topic_outline(mem, cache=again)}
    assert got["people/ada.md"] == {o.path: o.title for o in topic_outline(mem)}["people/ada.md"] == "Bob"


def test_refresh_in_one_process_sees_a_topic_rewritten_with_its_mtime_restored(fixture_state):
    """The app's snapshot reuse (``workspace.refresh``) and the sessions-free topic entries."""
    from memory_tui.core.store.workspace import open_state, refresh

    time.sleep(0.25)
    first = open_state(fixture_state)
    assert "short answers" in first.tree.topic("people/ada.md").text
    time.sleep(0.25)
    _rewrite_in_place(fixture_state / ADA, "short answers", "quick answers")
    second = refresh(first)
    assert "quick answers" in second.tree.topic("people/ada.md").text
    assert second.revision == open_state(fixture_state).revision


def test_session_node_rewritten_with_its_mtime_restored_is_read_again(fixture_state):
    """The per-node-file cache of the session store (a refresh in one process)."""
    from memory_tui.sessions.store import load_sessions

    node = fixture_state / "sessions/local_a1b2c3d4e5/history/0001-u-a00000000001.json"
    m = re.search(r'"output": "Hi, I', node.read_text())
    assert m
    time.sleep(0.25)
    first = load_sessions(fixture_state)
    time.sleep(0.25)
    _rewrite_in_place(node, "short answers", "quick answers")
    again = load_sessions(fixture_state, previous=first)
    fresh = load_sessions(fixture_state)

    def output(snapshot):
        return snapshot.sessions["local_a1b2c3d4e5"].nodes["a00000000001"].output

    assert "quick answers" in output(again) and output(again) == output(fresh)
