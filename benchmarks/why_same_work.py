"""``why SESSION`` in one process, imports excluded: the work alone, with and without the sections
that ea12e94 did not print (the records' citations behind the kept verdicts and the drift, and
the spawn links), so a tree of today can be compared with ea12e94 for the same work.

Usage: PYTHONPATH=TREE python benchmarks/why_same_work.py STATE SESSION full|strip
(median and minimum process CPU of 25 calls after one warm-up call)"""
import contextlib
import io
import statistics
import sys
import time

state, sid, strip = sys.argv[1], sys.argv[2], sys.argv[3] == "strip"
from memory_tui.cli import main  # noqa: E402

if strip:
    from memory_tui.sessions import kept, links

    empty = kept.Citations.empty()
    kept.citations_for_state = lambda *a, **k: (empty, None)
    links.SpawnLinks.for_session = classmethod(lambda cls, *a, **k: cls({}))
with contextlib.redirect_stdout(io.StringIO()):
    main(["--state", state, "why", sid])
times = []
for _ in range(25):
    t = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        main(["--state", state, "why", sid])
    times.append(time.process_time() - t)
print(f"median {statistics.median(times) * 1000:.1f} ms  min {min(times) * 1000:.1f} ms")
