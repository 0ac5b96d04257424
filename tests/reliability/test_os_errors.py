"""The OS-error suite: a full disk, a read-only mount and a file name too long, through the CLI
as a user meets them. Each must come back as a code (``NO_SPACE``, ``READ_ONLY``,
``NAME_TOO_LONG``), the file and what was kept -- in ``--json`` too (one object on stdout) --
never as ``internal error: OSError``, and the workspace must be exactly as before.

A full disk is a real one where this machine lets the test mount a small tmpfs (root);
elsewhere the same errno is injected where the first byte of a change is written.
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil
import subprocess
from pathlib import Path

import pytest

from memory_tui.cli import main

from rel_support import ids, leftovers, make_state, topic

ADA = "topics/people/ada.md"


def _tree(root: Path) -> dict[str, bytes]:
    """The workspace as a user sees it (memory-tui's own caches aside)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "memory-tui-" not in p.as_posix() and "/.git/" not in p.as_posix()}


def _mount(where: Path, size: str) -> bool:
    where.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=20)


def _fill(where: Path) -> None:
    """Take every free byte of the file system at ``where``."""
    with open(where / "filler", "wb", buffering=0) as fh:
        chunk = b"\0" * 65536
        while True:
            try:
                fh.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]


def _inject(monkeypatch, state: Path, err: int) -> None:
    """The errno a file system would give, raised where memory-tui creates or writes a file
    under ``state``: ``os.open`` with ``O_CREAT`` (temp files, stage files, the journal) and
    ``Path.write_text`` (staged topic texts)."""
    real_open, real_write_text = os.open, pathlib.Path.write_text
    inside = str(state)

    def failing_open(path, flags, *a, **k):
        if flags & os.O_CREAT and os.fspath(path).startswith(inside) and not os.fspath(path).endswith(".lock"):
            raise OSError(err, os.strerror(err), os.fspath(path))  # open(2) errors name the file
        return real_open(path, flags, *a, **k)

    def failing_write_text(self, *a, **k):
        if str(self).startswith(inside):
            raise OSError(err, os.strerror(err))  # as write(2)/close(2) say it: no file name
        return real_write_text(self, *a, **k)

    monkeypatch.setattr(os, "open", failing_open)
    monkeypatch.setattr(pathlib.Path, "write_text", failing_write_text)


@pytest.fixture(params=["tmpfs", "injected"])
def fs_mode(request):
    return request.param


@pytest.fixture
def small_fs(tmp_path):
    where = tmp_path / "mnt"
    if not _mount(where, "16m"):
        pytest.skip("cannot mount a tmpfs here (needs root); the injected variant covers this")
    try:
        yield where
    finally:
        _umount(where)


def _state_on(where: Path, fixture_state: Path) -> Path:
    state = where / "state"
    shutil.copytree(fixture_state, state, symlinks=True)
    return state


def _edit_argv(tmp: Path) -> list[str]:
    src = tmp / "ada-new.md"
    src.write_text("# Ada\n\nAda wants short answers.[^e-1] ^fc30e0e0\n\n"
                   "[^e-1]: Time: `2026-11`; Sources: [s](openprogram/local_a1b2c3d4e5/a00000000001)\n")
    return ["edit", ADA, "--from", str(src)]


def _apply_argv(tmp: Path, topic_path: str = ADA) -> list[str]:
    req = tmp / "req.json"
    req.write_text(json.dumps({"memory_changes": [{
        "op": "create_record", "content": "Ada likes tea.", "time": "2026-11",
        "source_refs": ["openprogram/local_a1b2c3d4e5/a00000000001"],
        "destination": {"topic_path": topic_path, "headings": ["Ada"], "position": "end"}}]}))
    return ["apply", str(req), "--base-revision", "current"]


def _both(capsys, state: Path, argv: list[str]) -> tuple[tuple[int, str, str], tuple[int, dict]]:
    """The verb as text and as --json: (code, stdout, stderr), (code, the JSON object)."""
    code = main(["--state", str(state), *argv])
    out, err = capsys.readouterr()
    jcode = main(["--state", str(state), *argv, "--json"])
    jout, jerr = capsys.readouterr()
    assert "internal error" not in jerr and "Traceback" not in jerr, jerr
    return (code, out, err), (jcode, json.loads(jout))


def _error_of(obj: dict) -> dict:
    """The error object of an edit (top level) or apply (``error``) answer."""
    return obj["error"] if "error" in obj else obj


@pytest.mark.parametrize("verb", ["edit", "apply"])
def test_full_disk_is_named_and_changes_nothing(fixture_state, tmp_path, capsys, monkeypatch, fs_mode, verb, request):
    if fs_mode == "tmpfs":
        state = _state_on(request.getfixturevalue("small_fs"), fixture_state)
        _fill(state.parent)
    else:
        state = fixture_state
        _inject(monkeypatch, state, errno.ENOSPC)
    mem = state / "memory"
    before = _tree(mem)
    argv = _edit_argv(tmp_path) if verb == "edit" else _apply_argv(tmp_path)
    (code, out, err), (jcode, obj) = _both(capsys, state, argv)
    assert code == 1 and jcode == 1
    assert "NO_SPACE" in out + err and "internal error" not in out + err
    e = _error_of(obj)
    assert e["code"] == "NO_SPACE", obj
    assert e["path"] == ADA, obj  # the file the change was writing, as the workspace names it
    kept = (e.get("details") or {}).get("kept") or e["message"]
    assert "nothing was changed" in kept, obj
    monkeypatch.undo()
    assert _tree(mem) == before
    assert leftovers(mem) == []


def test_full_disk_during_write_says_no_space_not_writer_failure_unknown(fixture_state, capsys, monkeypatch, fs_mode,
                                                                        request):
    if fs_mode == "tmpfs":
        state = _state_on(request.getfixturevalue("small_fs"), fixture_state)
        _fill(state.parent)
    else:
        state = fixture_state
        _inject(monkeypatch, state, errno.ENOSPC)
    mem = state / "memory"
    before = _tree(mem)
    marks_before = {p: p.read_bytes() for p in (state / "sessions").rglob("*.json")}
    code = main(["--state", str(state), "write", "local_9f1e2d3c4b", "--force", "--json"])
    out, err = capsys.readouterr()
    assert "internal error" not in err, err
    report = json.loads(out)
    assert code == 1, report
    assert report["reason_code"] == "NO_SPACE", report
    failed = [b for b in report["batches"] if b["result"] == "failed"]
    assert failed and failed[0]["reason_code"] == "NO_SPACE"
    where, _, rest = failed[0]["message"].partition(": NO_SPACE: ")
    assert rest and (state / "memory" / where).parent.is_dir(), failed[0]  # names the workspace file
    assert "turns stay pending" in rest, failed[0]
    monkeypatch.undo()
    # writer-status.json could not be written either: said, not raised. The empty git-pending
    # marker (made before the batch, so a kill never loses a commit) is the next open's to clear.
    assert {k: v for k, v in _tree(mem).items() if k != ".scriptorium/git-pending"} == before
    assert {p: p.read_bytes() for p in (state / "sessions").rglob("*.json")} == marks_before


def test_read_only_mount_is_named(fixture_state, tmp_path, capsys, monkeypatch, fs_mode, request):
    if fs_mode == "tmpfs":
        where = request.getfixturevalue("small_fs")
        state = _state_on(where, fixture_state)
        (state / "memory/recent_events.jsonl").write_text("")  # views --rebuild has work
        if subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True).returncode != 0:
            pytest.skip("cannot remount read-only here")
    else:
        state = fixture_state
        (state / "memory/recent_events.jsonl").write_text("")
        _inject(monkeypatch, state, errno.EROFS)
    mem = state / "memory"
    before = _tree(mem)
    for argv in (_edit_argv(tmp_path), _apply_argv(tmp_path), ["views", "--rebuild"]):
        (code, out, err), (jcode, obj) = _both(capsys, state, argv)
        assert code == 1 and jcode == 1, (argv, obj)
        assert "READ_ONLY" in out + err
        e = _error_of(obj)
        assert e["code"] == "READ_ONLY" and e["path"], (argv, obj)
    monkeypatch.undo()
    assert _tree(mem) == before


def test_a_file_name_too_long_is_named(tmp_path, capsys):
    state = make_state(tmp_path)
    mem = state / "memory"
    before = _tree(mem)
    long = "topics/" + "n" * 300 + ".md"
    src = tmp_path / "long.md"
    src.write_text(topic("Long", [("A long name.", ids()[3])]))
    (code, out, err), (jcode, obj) = _both(capsys, state, ["edit", long, "--from", str(src), "--create"])
    assert code == 1 and jcode == 1
    assert "NAME_TOO_LONG" in out + err and long in out + err
    assert obj["code"] == "NAME_TOO_LONG" and obj["path"] == long and "nothing was changed" in obj["message"]
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"memory_changes": [{
        "op": "create_record", "content": "A long name.", "time": "2026-11", "source_refs": [ids()[3]],
        "destination": {"topic_path": long, "headings": ["Long"], "position": "end"}}]}))
    (code, out, err), (jcode, obj) = _both(capsys, state, ["apply", str(req), "--base-revision", "current"])
    assert code == 1 and obj["error"]["code"] == "NAME_TOO_LONG" and obj["error"]["path"] == long, obj
    assert _tree(mem) == before and leftovers(mem) == []


def test_any_os_error_reaching_the_cli_is_coded_in_json(tmp_path, capsys, monkeypatch):
    """The CLI's last line of defence: an OSError from any verb is one coded line (one JSON
    object under --json), not ``internal error``."""
    import memory_tui.cli.topics as topics_cli

    state = make_state(tmp_path)

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied", str(state / "memory" / "topics"))

    monkeypatch.setattr(topics_cli, "_open", denied)
    code = main(["--state", str(state), "topics", "--json"])
    out, err = capsys.readouterr()
    assert code == 1 and "internal error" not in err, err
    obj = json.loads(out)
    assert obj["error"]["code"] == "PERMISSION_DENIED" and obj["error"]["path"].endswith("memory/topics")
