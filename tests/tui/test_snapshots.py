"""Snapshot tests (pytest-textual-snapshot). Regenerate with ``pytest tests/tui --snapshot-update``
and look at the SVGs under ``__snapshots__/`` before committing them."""

from __future__ import annotations

import json
import shutil

import pytest
from tui_helpers import make_app, settle, write_minimal_state

SIZES = {"wide": (120, 40), "narrow": (80, 24)}


def _keys(*keys):
    async def run_before(pilot):
        await settle(pilot, pilot.app)
        for key in keys:
            await pilot.press(key)
        await pilot.pause()

    return run_before


@pytest.fixture(scope="module")
def fixture_copy(_fixture_master, tmp_path_factory):
    """A private copy, so every snapshot shows the same ``~/.openprogram``."""
    dest = tmp_path_factory.mktemp("snap") / ".openprogram"
    shutil.copytree(_fixture_master, dest, symlinks=True)
    return dest


VIEW_KEYS = {
    "topics": ("down", "down", "enter"),
    "timeline": ("2",),
    "recent": ("3",),
    "core": ("4",),
    "sessions": ("5",),
    "topics_citation": ("down", "down", "enter", "down"),
}


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("view", sorted(VIEW_KEYS))
def test_views(snap_compare, fixture_copy, view, size):
    app = make_app(fixture_copy)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=_keys(*VIEW_KEYS[view]))


def test_core_pending_sources(snap_compare, fixture_copy, tmp_path):
    """Core blocks citing a pending source are skipped, listed on their own and marked."""
    from tui_helpers import make_source_pending

    state = tmp_path / ".openprogram"
    shutil.copytree(fixture_copy, state, symlinks=True)
    make_source_pending(state, "openprogram/local_a1b2c3d4e5/a00000000001")
    assert snap_compare(make_app(state), terminal_size=(120, 40), run_before=_keys("4", "tab", "end"))


def test_core_filter(snap_compare, fixture_copy):
    assert snap_compare(make_app(fixture_copy), terminal_size=(120, 40), run_before=_keys("4", "slash", "t", "e", "a"))


def test_core_sources_toggle(snap_compare, fixture_copy):
    assert snap_compare(make_app(fixture_copy), terminal_size=(120, 40), run_before=_keys("4", "s"))


def test_help(snap_compare, fixture_copy):
    assert snap_compare(make_app(fixture_copy), terminal_size=(120, 40), run_before=_keys("question_mark"))


def test_filter(snap_compare, fixture_copy):
    assert snap_compare(make_app(fixture_copy), terminal_size=(120, 40), run_before=_keys("slash", "t", "e", "a"))


def test_ascii_mode(snap_compare, fixture_copy):
    app = make_app(fixture_copy, ascii=True)
    assert snap_compare(app, terminal_size=(120, 40), run_before=_keys("down", "down", "enter", "down"))


def test_empty_workspace(snap_compare, tmp_path):
    state = write_minimal_state(tmp_path)
    assert snap_compare(make_app(state), terminal_size=(120, 40), run_before=_keys())


def test_no_state_dir(snap_compare, tmp_path):
    assert snap_compare(make_app(tmp_path / ".openprogram"), terminal_size=(80, 24), run_before=_keys())


def test_malformed_topic(snap_compare, tmp_path):
    state = write_minimal_state(
        tmp_path,
        {
            "topics/notes.md": (
                "# Notes\n\nThis line has no citation and no block id.\n\n"
                "Tea.[^e-1] ^ab12cd34\n\n[^e-1]: Time: `2026-11`; Sources: [x](openprogram/s/m1)\n"
            )
        },
    )
    assert snap_compare(make_app(state), terminal_size=(120, 40), run_before=_keys())


def _malformed_state(tmp_path):
    return write_minimal_state(
        tmp_path,
        {
            "topics/notes.md": "# Notes\n\nThis line has no citation and no block id.\n",
            "topics/good.md": "# Good\n\nTea.[^e-1] ^ab12cd34\n\n[^e-1]: Time: `2026-11`; Sources: [x](openprogram/s/m1)\n",
        },
        config={"memory": {"writer": {"trigger_tokens": "lots"}}},
    )


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["wide", "narrow"])
def test_problems_screen(snap_compare, tmp_path, size):
    assert snap_compare(make_app(_malformed_state(tmp_path)), terminal_size=size, run_before=_keys("p"))


def test_tiny_terminal_shows_record_text(snap_compare, tmp_path):
    state = write_minimal_state(
        tmp_path,
        {"topics/good.md": "# Good\n\nAda drinks green tea.[^e-1] ^ab12cd34\n\n[^e-1]: Time: `2026-11`; Sources: [x](openprogram/s/m1)\n"},
    )
    assert snap_compare(make_app(state), terminal_size=(40, 12), run_before=_keys("enter"))


def test_memory_disabled(snap_compare, fixture_copy, tmp_path):
    state = tmp_path / ".openprogram"
    shutil.copytree(fixture_copy, state, symlinks=True)
    (state / "config.json").write_text(json.dumps({"memory": {"backend": "none", "core": {"inject": False}}}))
    assert snap_compare(make_app(state), terminal_size=(120, 40), run_before=_keys("4"))


def test_truncated_archive(snap_compare, fixture_copy, tmp_path):
    state = tmp_path / ".openprogram"
    shutil.copytree(fixture_copy, state, symlinks=True)
    archive = state / "memory" / "sources" / "openprogram" / "_v2" / "local_a1b2c3d4e5.md"
    data = archive.read_bytes()
    # Cut inside the sixth frame's header: five frames stay valid, the rest is past the prefix.
    at = -1
    for _ in range(6):
        at = data.index(b'<a id="source-', at + 1)
    archive.write_bytes(data[: data.index(b"record-lines", at) + 30])
    assert snap_compare(
        make_app(state), terminal_size=(120, 40), run_before=_keys("down", "down", "down", "enter", "down", "down", "down", "down")
    )


@pytest.fixture(scope="module")
def demo_state(tmp_path_factory):
    from tui_helpers import FROZEN

    from memory_tui.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("demo") / ".openprogram", clock=lambda: FROZEN)


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("view", ["topics_citation", "core", "timeline"])
def test_demo_views(snap_compare, demo_state, view, size):
    assert snap_compare(make_app(demo_state), terminal_size=SIZES[size], run_before=_keys(*VIEW_KEYS[view]))
