"""Reading never writes: every read verb leaves the state directory bit-for-bit (and
mtime-for-mtime) unchanged; core/sessions/pipeline never pull in Textual."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memory_tui.cli import build_parser, main

# verb -> argv after the verb (the fixture's ids). Verbs not registered are skipped.
READ_VERBS = {
    "status": [[]],
    "why": [["local_a1b2c3d4e5"], []],
    "topics": [[]],
    "show": [["people/ada.md"], ["core.md"]],
    "views": [["--check"]],
    "sessions": [[]],
    "log": [[]],
    "timeline": [[]],
    "recent": [[]],
    "core": [[]],
    "sources": [[]],
}


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry under root: type, mode, size, mtime_ns and a content hash / link target."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", st.st_mode, st.st_mtime_ns)
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = ("file", st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


def registered_verbs() -> set[str]:
    parser = build_parser()
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            return set(action.choices)
    return set()


def test_read_verbs_change_nothing(fixture_state, capsys):
    pytest.importorskip("memory_tui.core.format.sources")
    before = tree_state(fixture_state)
    assert any(k.startswith("memory/.git/") for k in before)
    verbs = registered_verbs()
    ran_ok: list[str] = []
    for verb, arg_sets in READ_VERBS.items():
        if verb not in verbs:
            continue
        for args in arg_sets:
            for json_flag in ([], ["--json"]):
                argv = ["--state", str(fixture_state), verb, *args, *json_flag]
                try:
                    code = main(argv)
                except SystemExit as exc:  # argparse usage error for this arg shape
                    code = exc.code
                capsys.readouterr()
                if code == 0:
                    ran_ok.append(" ".join([verb, *args, *json_flag]))
    must = {"topics", "topics --json", "show people/ada.md", "show core.md --json"}
    must |= {m for m in ("status", "status --json", "why", "why local_a1b2c3d4e5", "views --check") if m.split()[0] in verbs}
    assert must <= set(ran_ok), sorted(must - set(ran_ok))

    # and the library read side directly
    from memory_tui.core.store.workspace import check_views
    from memory_tui.core.store.workspace import Workspace

    ws = Workspace(fixture_state)
    snap = ws.snapshot
    ws.refresh()
    snap.core_injection()
    assert check_views(fixture_state / "memory") == []

    assert tree_state(fixture_state) == before


def test_reading_a_bare_state_dir_creates_nothing(tmp_path, capsys):
    (tmp_path / "memory").mkdir()
    before = tree_state(tmp_path)
    for verb in ("topics", "show"):
        argv = ["--state", str(tmp_path), verb] + (["x.md"] if verb == "show" else [])
        main(argv)
    capsys.readouterr()
    from memory_tui.core.store.workspace import open_state

    open_state(tmp_path)
    assert tree_state(tmp_path) == before


def test_core_layers_do_not_import_textual():
    code = r"""
import importlib, pkgutil, sys
failed = []
for pkg_name in ("memory_tui.core", "memory_tui.sessions", "memory_tui.pipeline"):
    pkg = importlib.import_module(pkg_name)
    for info in pkgutil.walk_packages(pkg.__path__, pkg_name + "."):
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # reported below: a module that does not import is a failure
            failed.append(f"{info.name}: {exc!r}")
bad = sorted(m for m in sys.modules if m == "textual" or m.startswith("textual."))
print("FAILED", failed, "TEXTUAL", bad, file=sys.stderr)
sys.exit(2 if failed else 1 if bad else 0)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode != 2, f"an engine module does not import\n{result.stderr}"
    assert result.returncode == 0, f"textual imported by core/sessions/pipeline\n{result.stderr}"
    names = ("memory_tui.core.format.views", "memory_tui.core.store.workspace")
    probe = subprocess.run(
        [sys.executable, "-c", f"import sys; import {', '.join(names)}; print('textual' in sys.modules)"],
        capture_output=True, text=True, timeout=60,
    )
    assert probe.stdout.strip() == "False", probe.stderr
