"""Ctrl-C on a CLI job verb stops it at a safe point through the Context's ``cancelled()``."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from memory_tui.demo import build_demo

# The child runs the real ``write`` verb; only the snapshot load is made slow (it announces
# itself, then waits for the cancel), so the SIGINT lands while the job is running and
# before its first transaction.
CHILD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import memory_tui.pipeline.write as w
    real = w.load_snapshot
    def slow(ctx, *a, **k):
        Path(sys.argv[2]).write_text("ready")
        deadline = time.monotonic() + 20
        while not ctx.cancelled() and time.monotonic() < deadline:
            time.sleep(0.02)
        return real(ctx, *a, **k)
    w.load_snapshot = slow
    from memory_tui.cli import main
    sys.exit(main(["--state", sys.argv[1], "write"]))
""")


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_sigint_stops_write_at_a_safe_point_and_changes_nothing(tmp_path):
    state = build_demo(tmp_path / "state")
    before = _tree(state)
    ready = tmp_path / "ready"
    env = dict(os.environ, MEMORY_TUI_CONFIG=str(tmp_path / "none.toml"))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(state), str(ready)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(1500):  # wait for the job to be running (a readiness poll, not a timing check)
            if ready.exists() or child.poll() is not None:
                break
            time.sleep(0.02)
        assert ready.exists(), child.communicate()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, (out, err)
    assert "cancelled during batch" in err and "nothing half-written" in err, err
    assert "Traceback" not in err
    assert _tree(state) == before
