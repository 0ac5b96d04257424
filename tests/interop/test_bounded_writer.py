"""A turn far above the trigger (a pasted log, a 50 MB reply) is its own batch, as OpenProgram
makes it: archived whole and marked with its batch. The writer is given only its first
trigger's worth of tokens, told so, and the job report says so; ``status`` then counts it as
written. (How long such a write takes is shown in benchmarks/bench_bigturn.py, not asserted.)"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from memory_tui.cli import main
from memory_tui.core.format.sources import SourceIndex
from memory_tui.core.format.tokens import O200kCounter
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.pipeline.write import Context, write
from memory_tui.pipeline.writers.command import build_prompt
from memory_tui.pipeline.writers.extractive import ExtractiveWriter
from memory_tui.sessions.marks import MARK_KEY, serialize_node

SID = "local_0c0c0c0c0c"
BIG = "c00000000005"
TRIGGER = 8000  # the fixture's config.json


def _big_text() -> str:
    # every line different (the embedded writer's work grows with what it is given)
    return "".join(f"I prefer build {i} of the deploy window on host {i * 7919 % 100003}. Step {i} logged ok.\n"
                   for i in range(2500))


def _add_big_turn(state: Path, text: str) -> None:
    sdir = state / "sessions" / SID
    meta = {"source": "web", "speaker_id": "owner/local", "speaker_display": "Owner", "agent_id": "main",
            "speaker_kind": "owner", "principal_id": "owner/install/ef943b18af0244d0", "authority_tier": "owner",
            "interaction": "interactive", "authority_schema": 1}
    node = {"id": BIG, "created_at": 1796014900.0, "seq": 10, "role": "user", "name": "", "input": None, "output": text,
            "caller": "ROOT", "predecessor": "c00000000004_reply", "reads": [], "metadata": meta}
    (sdir / "history" / f"0010-u-{BIG}.json").write_text(serialize_node(node), encoding="utf-8")
    m = json.loads((sdir / "meta.json").read_text(encoding="utf-8"))
    m["head_id"] = BIG
    (sdir / "meta.json").write_text(json.dumps(m), encoding="utf-8")


class Recording(ExtractiveWriter):
    """The embedded writer, keeping every task it is handed."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks = []

    def write(self, task, tx):
        self.tasks.append(task)
        return super().write(task, tx)


def _status(state: Path) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--state", str(state), "--json", "status"]) == 0
    return json.loads(out.getvalue())


def test_an_oversized_turn_reaches_the_writer_bounded_and_is_archived_and_marked_whole(fixture_state, tmp_path):
    import shutil

    plain = tmp_path / "plain"
    shutil.copytree(fixture_state, plain, symlinks=True)
    text = _big_text()
    counter = O200kCounter()
    full = counter.count(text)
    assert full > 4 * TRIGGER
    _add_big_turn(fixture_state, text)

    writer = Recording()
    report = write(Context(fixture_state, writer=writer, git_env=fixed_env(), clock=lambda: 1796100000.0), force=True)
    assert report.outcome.status == "success", report.to_json()

    # every call got at most one trigger per turn, so at most twice the trigger in all
    assert writer.tasks
    for task in writer.tasks:
        sizes = [counter.count(t.text) for t in task.turns]
        assert all(n <= TRIGGER for n in sizes), sizes
        assert sum(sizes) <= 2 * TRIGGER, sizes
    given = [t for task in writer.tasks for t in task.turns if t.source_id.endswith("/" + BIG)]
    assert len(given) == 1
    turn = given[0]
    assert turn.clipped_from == full and turn.tokens == counter.count(turn.text)
    assert text.startswith(turn.text) and len(turn.text) < len(text) and turn.tokens > TRIGGER // 2
    # a prompt-based writer is told it sees the start of the turn only
    assert f"of {full} tokens; the whole turn is archived" in build_prompt(next(t for t in writer.tasks if turn in t.turns))

    # the batch is OpenProgram's (the big turn and the two before it), archived whole and marked
    batch = next(b for b in report.batches if BIG in b.ids)
    assert batch.result == "written" and batch.ids == ["c00000000004", "c00000000004_reply", BIG]
    assert f"{BIG} ({full} tokens)" in batch.message
    frame = SourceIndex.load(fixture_state / "memory").frame(f"openprogram/{SID}/{BIG}")
    assert frame is not None and frame.text == text
    node = json.loads((fixture_state / "sessions" / SID / "history" / f"0010-u-{BIG}.json").read_text(encoding="utf-8"))
    wid = _status(fixture_state)["workspace_id"]
    assert node["metadata"][MARK_KEY] == wid and node["output"] == text

    # status agrees: the big turn is not pending; what is pending is what the same write leaves
    # on the fixture without it
    write(Context(plain, writer=ExtractiveWriter(), git_env=fixed_env(), clock=lambda: 1796100000.0), force=True)
    assert _status(fixture_state)["status_pending_turns"] == _status(plain)["status_pending_turns"]
