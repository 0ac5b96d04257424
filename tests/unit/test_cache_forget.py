"""``cache.registry.forget()`` reaches every per-process cache of memory-tui.

A fresh interpreter imports every module, notes each module-level dict / set / list that is
empty at import (a cache: constants are filled when their module loads) and every
``lru_cache`` defined in the package, runs the work that fills them (open a state, a no-op
and a reword edit, the sessions, their overview and layout, the Topics outline), puts a
sentinel into every such container the work left empty, and calls ``forget()``. Every one of
them must then be empty, and every ``lru_cache`` registered with the kit (so one the work did
not reach is forgotten too).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

# Not caches of derived data, so deliberately left out of ``forget()``:
EXEMPT = {
    # whether the inotify module imports at all: a fact of this machine, not of any workspace
    "memory_tui.core.store.fsmonitor._INOTIFY",
    # the test switches, read once per process: settings, not derived data (tests re-read them)
    "memory_tui.core.switches._CURRENT",
    # the app's own classes and the key bindings they declare: facts of the code
    "memory_tui.tui.binding_ids._classes",
    "memory_tui.tui.binding_ids.declared_bindings",
    "memory_tui.tui.binding_ids.known_binding_ids",
    # the Markdown parser object, configured once
    "memory_tui.tui.render._parser",
}

_PROBE = textwrap.dedent('''
    import collections, functools, importlib, json, pkgutil, sys, time
    from pathlib import Path

    import memory_tui

    modules = [importlib.import_module(m.name) for m in pkgutil.walk_packages(memory_tui.__path__, "memory_tui.")
               if not m.name.endswith("__main__")]
    CONTAINERS = (dict, set, list, collections.OrderedDict)
    empty_at_import = {}
    lrus = {}
    for mod in modules:
        for name, obj in vars(mod).items():
            if type(obj) in CONTAINERS and not obj:
                empty_at_import.setdefault(id(obj), (f"{mod.__name__}.{name}", obj))
            elif isinstance(obj, functools._lru_cache_wrapper) and obj.__module__ == mod.__name__:
                lrus[f"{mod.__name__}.{name}"] = obj

    state = Path(sys.argv[1])
    mem = state / "memory"
    from memory_tui.core.store.outline import OutlineCache, topic_outline
    from memory_tui.core.store.workspace import open_state
    from memory_tui.core.tx import api as tx
    from memory_tui.sessions import graph as G
    from memory_tui.sessions.overview import session_overview
    from memory_tui.sessions.store import load_sessions

    time.sleep(0.15)  # past the racy window of the copy: stamps are kept
    open_state(state)
    rel = "topics/people/ada.md"
    text = (mem / rel).read_text(encoding="utf-8")
    tx.staged_edit(state, rel, text, git_commit="off")
    tx.staged_edit(state, rel, text.replace("short answers", "brief answers", 1), git_commit="off")
    topic_outline(mem, cache=OutlineCache(mem, Path(sys.argv[2])))
    snapshot = load_sessions(state)
    sessions = snapshot.sessions
    for session in sessions.values() if hasattr(sessions, "values") else sessions:
        ov = session_overview(session, "ws")
        if ov is not None:
            G.layout_overview(ov)
    G.cached_layout("s", [G.LayoutNode(f"n{i}", (f"n{i - 1}",) if i else (), seq=i) for i in range(5)])

    filled = sorted(name for name, obj in empty_at_import.values() if obj)
    filled += sorted(name for name, fn in lrus.items() if fn.cache_info().currsize)
    for name, obj in empty_at_import.values():  # what the work did not reach gets a sentinel
        if not obj:
            if isinstance(obj, dict):
                obj[("sentinel",)] = "sentinel"
            elif isinstance(obj, set):
                obj.add("sentinel")
            else:
                obj.append("sentinel")

    from memory_tui.core.cache import registry

    registry.forget()
    left = sorted(name for name, obj in empty_at_import.values() if obj)
    left += sorted(name for name, fn in lrus.items() if fn.cache_info().currsize)
    registered = {id(getattr(f, "__self__", None)) for f in registry._FORGETTERS}
    unregistered = sorted(name for name, fn in lrus.items() if id(fn) not in registered)
    print(json.dumps({"filled": filled, "left": left, "unregistered": unregistered}))
''')


def test_forget_empties_every_process_cache(fixture_state, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    out = subprocess.run([sys.executable, "-c", _PROBE, str(fixture_state), str(tmp_path / "outline")],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # the work reached the caches this test is about (else it would prove nothing of them)
    for name in ("memory_tui.core.tx.stage._INDEX_CACHE", "memory_tui.core.store.install._HASHES",
                 "memory_tui.core.store.parsecache._STORES", "memory_tui.core.store.txcache._CACHES",
                 "memory_tui.core.store.viewcache._CACHES", "memory_tui.sessions.graph._CACHE",
                 "memory_tui.sessions.graph._NODES"):
        assert name in got["filled"], name
    assert [n for n in got["left"] if n not in EXEMPT] == []
    assert [n for n in got["unregistered"] if n not in EXEMPT] == []
