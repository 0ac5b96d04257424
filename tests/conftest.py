"""Shared test fixtures.

``fixture_state`` unpacks OpenProgram's own state directory from ``../shared/fixtures`` into
a temporary folder (never touching the shared copy); tests that need it skip with a reason
when that folder is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
# The persistent session-summary cache of every test run goes to a folder of its own
# (the test states are temporary folders: their entries would pile up in the user's cache).
os.environ.setdefault("MEMORY_TUI_SESSION_CACHE_DIR", tempfile.mkdtemp(prefix="memory-tui-session-cache-"))
os.environ.setdefault("MEMORY_TUI_OUTLINE_CACHE_DIR", tempfile.mkdtemp(prefix="memory-tui-outline-cache-"))
os.environ.setdefault("MEMORY_TUI_LAYOUT_CACHE_DIR", tempfile.mkdtemp(prefix="memory-tui-layout-cache-"))

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
