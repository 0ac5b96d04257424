"""TUI tests run on asyncio through anyio's pytest plugin; helpers live in tui_helpers.py."""

from __future__ import annotations

import os

import pytest

os.environ["TEXTUAL_ANIMATIONS"] = "none"


@pytest.fixture
def anyio_backend():
    return "asyncio"
