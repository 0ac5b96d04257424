"""Shared test fixtures.

``fixture_state`` unpacks OpenProgram's own state directory from ``../shared/fixtures`` into
a temporary folder (never touching the shared copy); tests that need it skip with a reason
when that folder is absent.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
# Screens show times in the local zone: the run gets one zone, so a machine's own zone cannot
# change a snapshot (a test about zones sets its own and restores this one).
os.environ["TZ"] = "UTC"
time.tzset()

# memory-tui's caches outside the state dir (session summaries, the outline table, the token
# memo, the Sessions layout and overview tables) go to folders of the test run's own: the test states are
# temporary folders, so their entries would pile up in the user's cache, and a test must not depend on what an earlier
# run (or another checkout's) left there. Under pytest-xdist every worker gets its own, so a
# test that counts cache entries never sees another worker's. A folder the caller set is kept.
_OWN_CACHES = "MEMORY_TUI_TEST_OWN_CACHES"  # names the variables below that this file created
_CACHE_VARS = ("MEMORY_TUI_CACHE_DIR",)  # the one root every user-cache folder is under
_made = set(os.environ.get(_OWN_CACHES, "").split())
for _var in _CACHE_VARS:
    # xdist's workers inherit the controller's environment, folders included: make new ones
    if _var not in os.environ or (_var in _made and os.environ.get("PYTEST_XDIST_WORKER")):
        os.environ[_var] = tempfile.mkdtemp(prefix=f"memory-tui-{_var.lower()}-")
        _made.add(_var)
        # the process that made a folder removes it (each run left five per worker behind)
        atexit.register(shutil.rmtree, os.environ[_var], ignore_errors=True)
os.environ[_OWN_CACHES] = " ".join(sorted(_made))

# Where PYTHONDONTWRITEBYTECODE is set (this sandbox sets it) no bytecode is ever cached, so
# every fresh interpreter a test starts (a `memory-tui` verb, a crash child, a worker)
# compiled the package again: ~0.1 s CPU each here. The controller compiles it once into a
# folder of the run's own (PYTHONPYCACHEPREFIX, inherited by the workers and their
# children), which they read; the variable stays set, so nothing is written beside the
# sources. A prefix the caller set is kept.
if sys.flags.dont_write_bytecode and not os.environ.get("PYTHONPYCACHEPREFIX"):
    import compileall

    sys.pycache_prefix = tempfile.mkdtemp(prefix="memory-tui-pycache-")
    # the controller exits after its workers: one run's bytecode must not outlive the run
    atexit.register(shutil.rmtree, sys.pycache_prefix, ignore_errors=True)
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "memory_tui", quiet=1)
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix


def _short_source_index(obj, printer, cycle) -> None:
    printer.text(f"SourceIndex(root={str(obj.root)!r}, {len(obj.files)} archives)")


# Hypothesis pretty-prints every argument of an explicit @example before running it, pytest
# fixtures included (the text is shown only if the example fails). Its generic dataclass
# printer walks a SourceIndex of even the 0.01-scale bench state into ~120 MB of text, three
# minutes per example: a property taking one as a fixture spent nearly all its time there.
try:
    from hypothesis.vendor.pretty import for_type_by_name
except ImportError:  # a Hypothesis that moved its printer: the examples only get slower
    pass
else:
    for_type_by_name("memory_tui.core.format.sources.index", "SourceIndex", _short_source_index)

REPO = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = Path(os.environ.get("MEMORY_TUI_SHARED", REPO.parent / "shared")) / "fixtures"
FIXTURE_TGZ = SHARED_FIXTURES / "openprogram-state.tgz"
FIXTURE_EXPECTED = SHARED_FIXTURES / "openprogram-state.expected.json"

_NO_SHARED = "../shared/fixtures (OpenProgram's generated state directory) is not present next to the repository"


def pytest_configure(config: pytest.Config) -> None:
    # Without ../shared the fixture snapshot tests skip, so their stored SVGs go unused;
    # syrupy would fail the run for that (and offer to delete them). Only then are unused
    # snapshots a warning: with ../shared present an orphaned snapshot still fails the run.
    if not FIXTURE_TGZ.is_file() and hasattr(config.option, "warn_unused_snapshots"):
        config.option.warn_unused_snapshots = True


# Syrupy fails a run that leaves a stored snapshot unused, but not under pytest-xdist (it
# skips the check in the workers and in the controller alike). The controller does it here
# for the SVGs of pytest-textual-snapshot: a stored snapshot whose test no worker collected
# (a renamed or deleted test) fails the run, when the run took whole files.
_COLLECTED = pytest.StashKey[set]()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids) -> None:
    node.config.stash.setdefault(_COLLECTED, set()).update(ids)


def _orphaned_snapshots(config: pytest.Config, collected: set[str]) -> list[str]:
    by_module: dict[str, set[str]] = {}
    for nodeid in collected:
        module, _, name = nodeid.partition("::")
        by_module.setdefault(module, set()).add(name.replace("::", "."))
    orphans = []
    for svg in sorted(REPO.glob("tests/**/__snapshots__/*/*.svg")):
        module = (svg.parent.parent.parent / f"{svg.parent.name}.py").relative_to(config.rootpath).as_posix()
        if module in by_module:  # a module this run did not take is none of its business
            name = re.sub(r"\.\d+$", "", svg.stem)  # a test's second snapshot is <name>.1
            if name not in by_module[module]:
                orphans.append(svg.relative_to(config.rootpath).as_posix())
    return orphans


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    collected = config.stash.get(_COLLECTED, None)
    if collected is None:  # not an xdist controller: syrupy checks for itself
        return
    option = config.option
    if option.keyword or option.markexpr or getattr(option, "deselect", None) or any("::" in a for a in config.args):
        return  # part of a file was taken: its other snapshots are not unused
    orphans = _orphaned_snapshots(config, collected)
    if not orphans:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    warn_only = getattr(option, "warn_unused_snapshots", False)
    if reporter is not None:
        reporter.line("")
        for path in orphans:
            reporter.write_line(f"snapshot without a test (delete it, or bring its test back): {path}",
                                yellow=warn_only, red=not warn_only)
    if not warn_only and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# pytest-xdist hands out tests in collection order, one at a time as a worker runs low. A long
# test collected late (the crash drivers sit in tests/reliability, after most of the suite) kept
# one worker busy for tens of seconds after the other had run out of work. Under xdist the
# tests with a recorded duration run first, longest first (the classic longest-processing-time
# order: the run ends with short tests, so the two workers finish together); every other test
# keeps its collection order after them. Both workers sort the same file the same way, as
# xdist requires. A run without xdist keeps the plain order (module fixtures set up once).
# Tests of an ``xdist_group`` keep their order: a group is handed out whole. Refresh the file
# after a quiet run: ``python tests/durations.py JUNIT.xml`` (see its doc).
DURATIONS = Path(__file__).with_name("durations.json")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    try:
        recorded = json.loads(DURATIONS.read_text(encoding="utf-8"))["seconds"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # no file or a damaged one: the plain order, only slower to finish

    def key(pair):
        i, item = pair
        if item.get_closest_marker("xdist_group") is not None:
            # a group is one unit of work, run in its own order (a summary test comes last)
            return (1, 0.0, i)
        secs = recorded.get(item.nodeid)
        return (0, -float(secs), i) if isinstance(secs, (int, float)) else (1, 0.0, i)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]


def _unpack(dest: Path) -> Path:
    with tarfile.open(FIXTURE_TGZ) as tar:
        tar.extractall(dest, filter="tar")
    return dest / ".openprogram"


@pytest.fixture(scope="session")
def _fixture_master(tmp_path_factory) -> Path:
    if not FIXTURE_TGZ.is_file():
        pytest.skip(_NO_SHARED)
    return _unpack(tmp_path_factory.mktemp("fixture-master"))


@pytest.fixture
def fixture_state(_fixture_master, tmp_path) -> Path:
    """A private, writable copy of the fixture state dir (``.openprogram``)."""
    dest = tmp_path / "state"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    return dest


@pytest.fixture(scope="session")
def fixture_state_ro(_fixture_master) -> Path:
    """The session-wide unpacked fixture; tests must not write to it."""
    return _fixture_master


@pytest.fixture(scope="session")
def expected() -> dict:
    if not FIXTURE_EXPECTED.is_file():
        pytest.skip(_NO_SHARED)
    return json.loads(FIXTURE_EXPECTED.read_text(encoding="utf-8"))


def _load_bench_builder(name: str = "bench_make_state"):
    """``benchmarks/make_state.py`` as a module (benchmarks/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / "make_state.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def bench_state_small(tmp_path_factory) -> Path:
    """``benchmarks/make_state.py``'s state directory at scale 0.01, built once per test run
    (about 9 s of CPU; its output is a function of scale and seed only, which
    tests/unit/test_bench_state.py checks). Read-only: a test that writes copies it first
    (``shutil.copytree(bench_state_small, dest, symlinks=True)``)."""
    from filelock import FileLock

    # pytest-xdist's workers each have a basetemp below one folder of this run: build there once
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "bench-state-0.01"
    with FileLock(str(folder) + ".lock"):
        if not (folder / "built").is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that died half-way
            _load_bench_builder().build(folder / "state", 0.01)
            (folder / "built").touch()
    return folder / "state"


@pytest.fixture(autouse=True)
def _close_fsmonitors():
    """Each workspace a test edits gets an inotify instance (``core.fsmonitor``); they are a
    per-user resource (128 by default, shared with every app's file watcher), so a worker
    closes its own after each test instead of keeping the last few."""
    yield
    from memory_tui.core.store.fsmonitor import forget_monitors

    forget_monitors()


@pytest.fixture(autouse=True)
def _switches_as_started():
    """Every test starts with the switches the run was started with (a test may set its own
    with ``derive``), and leaves them so."""
    from memory_tui.core import switches

    switches.reload()
    yield
    switches.reload()  # after ``monkeypatch`` put the environment back: autouse, so set up first


@pytest.fixture
def derive(monkeypatch):
    """``derive("check")``: this test runs with ``MEMORY_TUI_TEST_DERIVE=check`` (``None``: the
    default), in this process and in the processes it starts."""
    from switching import set_derive

    return lambda mode: set_derive(monkeypatch, mode)
