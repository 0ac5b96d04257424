"""One contender for the contention test: ``worker W N STATE`` applies N records with
compare-and-set, retrying refusals; ``holder N STATE`` is a plain flock holder that rewrites its
own topic between holds (as another cooperating program would). Prints one JSON summary."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import sys
import time


def worker(w: str, n: int, state: str) -> dict:
    from memory_tui.cli import main
    from memory_tui.core.store.workspace import workspace_revision

    sys.path.insert(0, os.path.dirname(__file__))
    from rel_support import ids

    from pathlib import Path

    mem = Path(state) / "memory"
    accepted, refusals, failures = [], 0, []
    req = os.path.join(state, f"..{os.sep}req-{w}.json")
    i = 0
    while len(accepted) < n and i < n * 50:
        i += 1
        content = f"Worker {w} fact {len(accepted)}."
        from memory_tui.core.format.errors import MemoryError

        try:
            base = workspace_revision(mem)  # unlocked, as any client reads it
        except MemoryError as exc:
            if exc.code != "CONCURRENT_UPDATE":
                raise
            refusals += 1
            continue
        body = {"base_revision": base, "git_commit": "off", "memory_changes": [
            {"op": "create_record", "content": content, "time": "2026-11", "source_refs": [ids()[3 + len(accepted) % 3]],
             "destination": {"topic_path": "topics/people/ada.md", "headings": ["Ada"], "position": "end"}}]}
        with open(req, "w", encoding="utf-8") as fh:
            json.dump(body, fh)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--state", state, "apply", req, "--json"])
        text = out.getvalue() + err.getvalue()
        if "Traceback" in text or "internal error" in text:
            failures.append(text[-500:])
        elif code == 0:
            accepted.append(content)
        elif code == 3:
            refusals += 1
            try:
                got = json.loads(out.getvalue())
            except ValueError:
                failures.append(text[-500:])
                continue
            if got.get("error", {}).get("code") != "CONCURRENT_UPDATE":
                failures.append(text[-500:])
        else:
            failures.append(f"exit {code}: {text[-500:]}")
    return {"accepted": accepted, "refusals": refusals, "failures": failures}


def holder(n: int, state: str) -> dict:
    import glob

    lock = os.path.join(state, "memory", ".scriptorium", "write.lock")
    path = os.path.join(state, "memory", "topics", "holder.md")
    last = None
    # canonical versions memory-tui itself wrote (what a cooperating program would write)
    versions = [open(p, encoding="utf-8").read() for p in sorted(glob.glob(os.path.join(state, "..", "holder-v*.md")))]
    for i in range(n):
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            last = versions[min(i, len(versions) - 1)]
            tmp = path + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(last)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            time.sleep(0.005)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        time.sleep(0.01)
    return {"last": last}


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "worker":
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
    else:
        print(json.dumps(holder(int(sys.argv[2]), sys.argv[3])))
