"""Property tests: runtime.json round trips, revision order = pathlib's rglob order, relpath."""

from __future__ import annotations

import hashlib
import json
import posixpath
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.format.views import relpath
from memory_tui.core.store.workspace import dump_runtime_json, parse_agent_history, parse_runtime_state, workspace_revision

json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
json_values = st.recursive(json_scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(
    order=st.dictionaries(st.text("0123456789abcdef", min_size=1, max_size=8), st.integers(0, 10**6), max_size=6),
    extra=st.dictionaries(st.text(max_size=6).filter(lambda k: k not in {
        "creation_order", "write_commits_since_global", "local_batches", "local_tokens", "last_global_at"}), json_values, max_size=4),
    counts=st.tuples(st.integers(0, 10**9), st.integers(0, 10**9), st.integers(0, 10**9)),
    last=st.none() | st.text(max_size=12),
)
def test_runtime_round_trip_keeps_everything(order, extra, counts, last):
    data = {"creation_order": order, "write_commits_since_global": counts[0], "local_batches": counts[1],
            "local_tokens": counts[2], "last_global_at": last, **extra}
    state, problems = parse_runtime_state(data)
    assert problems == ()
    text = dump_runtime_json(state)
    assert json.loads(text) == data
    again, _ = parse_runtime_state(json.loads(text))
    assert dump_runtime_json(again) == text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=8))
def test_agent_history_never_raises_and_accounts_for_every_line(lines):
    text = "\n".join(lines)
    runs, problems = parse_agent_history(text)
    nonblank = {i for i, ln in enumerate(text.split("\n"), start=1) if ln.strip()}
    assert {r.line for r in runs} | {p.line for p in problems} == nonblank
    assert len(runs) + len(problems) == len(nonblank)
    assert all(p.path for p in problems)


segment = st.sampled_from(["a", "b", "a-b", "a.b", "topics", "topics.md", "x", "É", "z_", "A"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(segment, min_size=1, max_size=3), min_size=1, max_size=6))
def test_revision_uses_pathlib_sorted_rglob_order(paths):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        written = []
        for parts in paths:
            target = root.joinpath(*parts)
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.exists():
                    continue
                target.write_text("/".join(parts))
                written.append(target)
            except (FileExistsError, NotADirectoryError, IsADirectoryError):
                continue
        h = hashlib.sha256()
        for p in sorted(root.rglob("*")):
            if p.is_file() and not p.is_symlink():
                h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
        assert workspace_revision(root) == h.hexdigest()[:32]


@settings(max_examples=100, deadline=None)
@given(st.lists(segment, min_size=1, max_size=4), st.lists(segment, max_size=4))
def test_relpath_matches_posixpath(target, start):
    t, s = "/".join(target), "/".join(start)
    assert relpath(t, s) == posixpath.relpath("/r/" + t, "/r/" + s if s else "/r")
