"""Both file replacements leave the target as it was and no temp file when they fail."""

from __future__ import annotations

import os

import pytest

from memory_tui.core import fsutil


@pytest.mark.parametrize("replace", [
    lambda path, data: fsutil.atomic_write(path, data),
    lambda path, data: fsutil.replace_cache_file(path, data),
], ids=["atomic_write", "replace_cache_file"])
def test_a_failed_replace_keeps_the_target_and_removes_its_temp_file(tmp_path, monkeypatch, replace):
    target = tmp_path / "file.json"
    target.write_bytes(b"old")

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="No space"):
        replace(target, b"new")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file.json"]
    monkeypatch.undo()
    replace(target, b"new")
    assert target.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["file.json"]


def test_an_interrupt_while_writing_removes_the_temp_file_too(tmp_path, monkeypatch):
    target = tmp_path / "cache.pack"

    def interrupted(fd, data):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fsutil.replace_cache_file(target, (b"a", b"b"))
    assert list(tmp_path.iterdir()) == []
