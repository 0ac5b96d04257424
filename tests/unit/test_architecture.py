"""The architecture rules: import-linter contracts (pyproject.toml), no import cycles, and
every module importable in a fresh interpreter."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))


def _lint(cwd: Path, config: Path, env_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    if env_path is not None:
        env["PYTHONPATH"] = str(env_path)
    return subprocess.run(
        [LINT, "--config", str(config), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def test_import_contracts_hold():
    result = _lint(ROOT, ROOT / "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "9 kept, 0 broken" in result.stdout


def _fake_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.mark.parametrize(
    "bad, broken",
    [
        ({"fake_mt/core/bad.py": "import fake_mt.pipeline\n"}, "core (format"),
        ({"fake_mt/pipeline/bad.py": "import textual\n"}, "The engine"),
        ({"fake_mt/sessions/bad.py": "from fake_mt.tui import app\n"}, "The engine"),
        ({"fake_mt/tui/bad.py": "from fake_mt.cli import common\n"}, "independent"),
        ({"fake_mt/cli/bad.py": "import fake_mt.tui.screens\n"}, "independent"),
        ({"fake_mt/insights/bad.py": "import fake_mt.cli.common\n"}, "insights"),
        ({"fake_mt/tui/model/bad.py": "import textual\n"}, "The app's adapters"),
        ({"fake_mt/tui/model/bad.py": "import fake_mt.tui.screens\n"}, "The app's adapters"),
        ({"fake_mt/core/format/bad.py": "import fake_mt.core.tx\n"}, "core's rooms are layered"),
        ({"fake_mt/core/cache/bad.py": "from fake_mt.core.format import x\n"}, "core's rooms are layered"),
        ({"fake_mt/core/switches.py": "import fake_mt.core.fsutil\n"}, "core's rooms are layered"),
        ({"fake_mt/core/store/bad.py": "import marshal\n"}, "Only the cache kit serializes"),
        ({"fake_mt/sessions/bad.py": "import pickle\n"}, "Only the cache kit serializes"),
        ({"fake_mt/core/format/topics/model.py": "import fake_mt.core.format.topics.parse\n"}, "topic grammar's rooms"),
        ({"fake_mt/core/format/topics/grammar.py": "import fake_mt.core.format.topics.files\n"}, "topic grammar's rooms"),
        ({"fake_mt/core/format/sources/ids.py": "from fake_mt.core.format.sources import index\n"},
         "source archive's rooms"),
    ],
)
def test_the_contracts_fail_on_a_forbidden_import(tmp_path, bad, broken):
    """The project's own contracts, run on a small package shaped like memory_tui with one
    forbidden import: lint-imports must fail and name the contract."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    text = (ROOT / "pyproject.toml").read_text()
    section = text[text.index("[tool.importlinter]"):]
    (tmp_path / "pyproject.toml").write_text(section.replace("memory_tui", "fake_mt"))
    assert config["root_packages"] == ["memory_tui"]
    good = {
        f"fake_mt/{pkg}/__init__.py": "" for pkg in ("core", "sessions", "pipeline", "insights", "tui", "cli")
    } | {
        f"fake_mt/core/{room}/__init__.py": "" for room in ("tx", "store", "changes", "format", "cache")
    } | {
        f"fake_mt/core/format/topics/{room}.py": "" for room in ("__init__", "tree", "parse", "fast", "grammar", "files", "model")
    } | {
        f"fake_mt/core/format/sources/{room}.py": "" for room in ("__init__", "index", "entries", "legacy", "scan", "frames", "trust", "ids")
    } | {
        "fake_mt/core/fsutil.py": "",
        "fake_mt/core/switches.py": "",
        "fake_mt/core/store/x.py": "import fake_mt.core.switches\n",  # any room may read the switches
        "fake_mt/core/cache/codec.py": "import marshal\nimport pickle\n",  # the kit may
        "fake_mt/core/format/x.py": "import fake_mt.core.cache\n",
        "fake_mt/core/tx/x.py": "import fake_mt.core.store\nimport fake_mt.core.format.x\n",
        "fake_mt/__init__.py": "",
        "fake_mt/demo.py": "import fake_mt.pipeline\n",
        "fake_mt/tui/app.py": "import textual\nimport fake_mt.core\n",
        "fake_mt/tui/screens.py": "import fake_mt.tui.app\n",
        "fake_mt/tui/model/__init__.py": "",
        **{f"fake_mt/tui/{room}/__init__.py": "" for room in ("shell", "widgets", "dialogs")},
        "fake_mt/tui/model/data.py": "import fake_mt.core\n",  # the adapters read the engine
        "fake_mt/cli/common.py": "",
        "fake_mt/cli/app.py": "import fake_mt.tui.app\nimport fake_mt.demo\n",  # the one allowed way
    }
    _fake_tree(tmp_path, good)
    clean = _lint(tmp_path, tmp_path / "pyproject.toml", tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr  # the fake tree itself is clean
    _fake_tree(tmp_path, bad)
    result = _lint(tmp_path, tmp_path / "pyproject.toml", tmp_path)
    assert result.returncode != 0, result.stdout
    assert "BROKEN" in result.stdout and broken in result.stdout, result.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    out.append(sorted(group))
    return out


def test_no_import_cycles():
    assert _cycles(grimp.build_graph("memory_tui")) == []


def test_the_cycle_check_finds_a_cycle(tmp_path):
    _fake_tree(tmp_path, {"cyc/__init__.py": "", "cyc/a.py": "import cyc.b\n", "cyc/b.py": "from cyc import a\n", "cyc/c.py": "import cyc.a\n"})
    sys.path.insert(0, str(tmp_path))
    try:
        assert _cycles(grimp.build_graph("cyc")) == [["cyc.a", "cyc.b"]]
    finally:
        sys.path.remove(str(tmp_path))


def test_every_module_imports_in_a_fresh_interpreter():
    code = r"""
import importlib, pkgutil, sys
import memory_tui
failed = []
for info in pkgutil.walk_packages(memory_tui.__path__, "memory_tui."):
    if info.name == "memory_tui.__main__":
        continue  # runs the CLI when imported
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        failed.append(f"{info.name}: {exc!r}")
print("\n".join(failed), file=sys.stderr)
sys.exit(1 if failed else 0)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
