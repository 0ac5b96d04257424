"""One generated session on disk, read back as the app reads it (the property tests' DAGs)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from memory_tui.sessions.store import load_sessions


def load_one_session(nodes: list[dict], meta: dict, sid: str = "s"):
    """Write ``nodes`` (file names in list order, as the history is numbered) and ``meta`` as
    session ``sid`` of a throwaway state dir and return the loaded ``Session``."""
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp)
        sdir = state / "sessions" / sid
        (sdir / "history").mkdir(parents=True)
        (sdir / ".git").mkdir()
        for i, node in enumerate(nodes):
            (sdir / "history" / f"{i:04d}-{node['role'][0]}-{node['id']}.json").write_text(json.dumps(node))
        (sdir / "meta.json").write_text(json.dumps(meta))
        return load_sessions(state).sessions[sid]
