"""A check (``edit --check``) writes nothing into the workspace: not a file, not a folder, not
even a scratch folder created and removed again (a writer command that checks its work with
``memory-tui edit --check`` is watched for writes outside its stage, and one made there by the
check itself would refuse the writer's whole run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _listing(root: Path) -> dict[str, tuple[int, int, int, int]]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames, ""]:
            path = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def test_edit_check_leaves_every_entry_of_the_workspace_as_it_was(fixture_state, tmp_path):
    ada = fixture_state / "memory/topics/people/ada.md"
    text = ada.read_text().replace("short answers", "brief answers")
    before = _listing(fixture_state)
    env = dict(os.environ, MEMORY_TUI_CACHE_DIR=str(tmp_path / "cache"))
    for _ in range(2):  # cold, then with whatever the first run kept in this user's cache
        run = subprocess.run([sys.executable, "-m", "memory_tui", "--state", str(fixture_state), "edit",
                              "topics/people/ada.md", "--check", "--from", "-"],
                             input=text, capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0 and run.stdout.strip() == "valid", run.stdout + run.stderr
        assert _listing(fixture_state) == before
