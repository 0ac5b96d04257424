"""The demo state dir: deterministic bytes, readable by the rest of the tool."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from memory_tui.core.store import revmemo
from memory_tui.demo import build_demo

NOW = 1796000000.0


def files(root: Path) -> dict[str, bytes]:
    # the kept revision names this copy's inodes and times (a cache, like git's index)
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts and p.name != revmemo.NAME
    }


def head(repo: Path) -> str:
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def test_build_twice_gives_identical_bytes_and_status_works(tmp_path, capsys):
    a = build_demo(tmp_path / "a", now=NOW)
    b = build_demo(tmp_path / "b", now=NOW)
    fa, fb = files(a), files(b)
    assert fa.keys() == fb.keys()
    assert [k for k in fa if fa[k] != fb[k]] == []
    assert head(a / "memory") == head(b / "memory")
    assert head(a / "sessions/local_d3a0000001") == head(b / "sessions/local_d3a0000001")

    # what the demo promises to show
    assert (a / "memory/.scriptorium/workspace-id").read_text() == "w-d3a0c0de\n"
    assert "memory/topics/core.md" in fa and "memory/topics/conversations/kyoto-trip-in-spring.md" in fa
    history = "".join(k for k in fa if k.startswith("sessions/"))
    assert "-c-" in history  # tool rows
    nodes = [json.loads(v) for k, v in fa.items() if "/history/" in k]
    meta = [n["metadata"] for n in nodes]
    assert any(m.get("rewound") for m in meta)
    assert any(m.get("edit_of") for m in meta) and any(m.get("forked_from") and not m.get("edit_of") for m in meta)
    assert any(m.get("spawn_branch_root") for m in meta)
    assert any(m.get("memory_written_scriptorium") == "w-0fe1a7b0" for m in meta)
    assert any(m.get("memory_written_scriptorium") == "w-d3a0c0de" for m in meta)

    from memory_tui.cli import main

    capsys.readouterr()
    assert main(["--state", str(a), "status", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["workspace_id"] == "w-d3a0c0de"

    from memory_tui.core.format.views import render_core

    core = render_core((a / "memory/topics/core.md").read_text(encoding="utf-8"))
    assert core.omitted_ids  # over the 2 000-token Core budget
