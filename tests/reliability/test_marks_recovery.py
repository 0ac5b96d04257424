"""A kill while a batch's marks are written (issue 14) must not stall the session: the next
write finishes the installed batch's marks before reading the sessions."""

from __future__ import annotations

import pytest

from memory_tui.core.store.gitlog import fixed_env
from memory_tui.pipeline.write import Context, write
from memory_tui.sessions import marks as marks_mod

from rel_support import leftovers, node_marks

NOW = 1796100000.0
SID = "local_9f1e2d3c4b"


def _ctx(state):
    return Context(state, git_env=fixed_env(), clock=lambda: NOW)


def test_kill_between_two_marks_is_finished_by_the_next_write(fixture_state, monkeypatch, expected):
    wid = expected["workspace_id"]
    batch_ids = expected["sessions"][SID]["tips"]["f00000000004_reply"]["first_batch_ids"]
    assert len(batch_ids) >= 2

    class Kill(BaseException):
        pass

    real = marks_mod.atomic_write
    calls = []

    def die_after_first(path, data, **kw):
        if path.name == marks_mod.INTENT_NAME:
            return real(path, data, **kw)
        if calls:
            raise Kill()
        calls.append(path)
        real(path, data, **kw)

    before = node_marks(fixture_state)
    monkeypatch.setattr(marks_mod, "atomic_write", die_after_first)
    with pytest.raises(Kill):
        write(_ctx(fixture_state), SID, force=True)
    monkeypatch.undo()
    half = node_marks(fixture_state)
    newly = {k for k, v in half.items() if v == wid and before.get(k) != wid}
    assert len(newly) == 1  # the kill landed between two marks of one batch

    report = write(_ctx(fixture_state), SID, force=True)
    writer_batches = [b.ids for b in report.batches]
    assert report.outcome.status in ("success", "none"), report.to_json()
    assert report.outcome.code != "WRITER_NO_PROGRESS"
    after = node_marks(fixture_state)
    assert all(after[(SID, i)] == wid for i in batch_ids)
    # the tail of the killed batch was never handed to the writer as a batch of its own
    assert not any(set(ids) < set(batch_ids) for ids in writer_batches)
    assert leftovers(fixture_state / "memory") == []
    assert not (fixture_state / "memory/.scriptorium" / marks_mod.INTENT_NAME).exists()


def test_an_unreadable_intent_is_dropped_not_fatal(fixture_state):
    rt = fixture_state / "memory/.scriptorium"
    (rt / marks_mod.INTENT_NAME).write_text('{"session": "../../etc", "ids": ["x"], "workspace_id": "w-1"}')
    assert marks_mod.finish_intent(rt, fixture_state / "sessions") is None
    assert not (rt / marks_mod.INTENT_NAME).exists()


def test_kill_in_the_writer_before_its_install_marks_nothing_and_drops_the_intent(fixture_state, monkeypatch):
    # The intent is written before the writer runs; a batch whose install never landed must
    # not be marked by the next open (the topics do not cite it), only stay pending.
    import memory_tui.pipeline.write as write_mod

    class Kill(BaseException):
        pass

    def die(*a, **k):
        raise Kill()

    before = node_marks(fixture_state)
    monkeypatch.setattr(write_mod, "run_writer", die)
    with pytest.raises(Kill):
        write(_ctx(fixture_state), SID, force=True)
    monkeypatch.undo()
    rt = fixture_state / "memory/.scriptorium"
    assert (rt / marks_mod.INTENT_NAME).exists()
    assert marks_mod.finish_intent(rt, fixture_state / "sessions") is None
    assert not (rt / marks_mod.INTENT_NAME).exists()
    assert node_marks(fixture_state) == before
