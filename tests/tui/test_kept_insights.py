"""The header's insight figures kept across processes (``tui.model.kept_insights``): never an
answer other than computing them, and computed again when a topic, an archive or a session
they read changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aging import age
from memory_tui.core import switches
from memory_tui.demo import build_demo
from memory_tui.tui.model import insights as insights_mod, kept_insights
from memory_tui.tui.model.load import load_model, with_session_list
from tui_helpers import COUNTER

real_compute = insights_mod.load_insights  # computes every time


@pytest.fixture
def demo(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "cache"))
    state = build_demo(tmp_path / "demo")
    age(state)
    return state


def _model(state: Path):
    model = load_model(state, counter=COUNTER, home=state.parent)
    return with_session_list(model, counter=COUNTER) or model


def _counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = insights_mod.load_insights

    def counting(model):
        calls.append(1)
        return real(model)

    monkeypatch.setattr(insights_mod, "load_insights", counting)
    return calls


def test_a_second_start_takes_the_figures_kept_and_they_are_the_computed_ones(demo, monkeypatch):
    model = _model(demo)
    assert kept_insights.key_of(model) is not None
    calls = _counting(monkeypatch)
    first = kept_insights.load_insights(model)
    again = kept_insights.load_insights(_model(demo))
    assert calls == [1]
    assert first is not None and first.rows and any(r.sessions for r in first.rows)
    assert again == first and again.by_id.keys() == first.by_id.keys()
    assert again == real_compute(model)


def test_a_changed_session_or_topic_is_computed_again(demo, monkeypatch):
    kept_insights.load_insights(_model(demo))
    calls = _counting(monkeypatch)
    node = sorted((demo / "sessions").rglob("history/*.json"))[-1]
    data = json.loads(node.read_text())
    data["role"] = "llm" if data.get("role") != "llm" else "user"
    node.write_text(json.dumps(data))
    age(demo)
    model = _model(demo)
    assert kept_insights.load_insights(model) == real_compute(model)
    assert calls == [1]
    topic = sorted((demo / "memory" / "topics").rglob("*.md"))[-1]
    topic.write_text(topic.read_text().replace("\n", "\n\n", 1))
    age(demo)
    model = _model(demo)
    kept_insights.load_insights(model)
    assert len(calls) == 2
    kept_insights.load_insights(_model(demo))  # and kept again under the new revision
    assert len(calls) == 2


def test_figures_without_a_full_key_are_not_kept(demo, monkeypatch):
    model = _model(demo)
    sid = next(iter(model.session_snapshot.keys))
    keys = dict(model.session_snapshot.keys, **{sid: None})  # a session read while it was written
    object.__setattr__(model.session_snapshot, "keys", keys)
    assert kept_insights.key_of(model) is None
    calls = _counting(monkeypatch)
    kept_insights.load_insights(model)
    kept_insights.load_insights(model)
    assert calls == [1, 1]


def test_check_mode_catches_figures_that_lie(demo, monkeypatch):
    model = _model(demo)
    kept_insights.load_insights(model)
    real = kept_insights._unpack

    def lying(value):
        vm = real(value)
        row = vm.rows[0]
        forged = type(row)(*(getattr(row, f) + 7 if f == "sessions" else getattr(row, f)
                             for f in kept_insights._ROW_FIELDS))
        return type(vm)(vm.revision, (forged, *vm.rows[1:]), vm.counts, vm.lists, vm.by_id)

    monkeypatch.setattr(kept_insights, "_unpack", lying)
    assert kept_insights.load_insights(model) != real_compute(model)  # the lie goes through
    monkeypatch.setenv(switches.DERIVE_ENV, "check")
    switches.reload()
    try:
        with pytest.raises(switches.IncrementalMismatch):
            kept_insights.load_insights(model)
    finally:
        monkeypatch.delenv(switches.DERIVE_ENV)
        switches.reload()


def test_the_figures_of_the_last_texts_are_kept_so_a_revert_computes_nothing(demo, monkeypatch):
    topic = sorted((demo / "memory" / "topics").rglob("*.md"))[-1]
    original = topic.read_text()
    texts = [original, *(original.replace("\n", "\n" + "\n" * n, 1) for n in range(1, kept_insights.KEEP + 1))]
    calls = _counting(monkeypatch)
    figures = []
    for text in texts:
        topic.write_text(text)
        age(demo / "memory")  # the sessions keep their stamps
        figures.append(kept_insights.load_insights(_model(demo)))
    assert len(calls) == len(texts)
    # the last KEEP texts are answered from the file; the oldest was let go
    for text, want in list(zip(texts, figures))[-kept_insights.KEEP:]:
        topic.write_text(text)
        age(demo / "memory")  # the sessions keep their stamps
        model = _model(demo)
        assert kept_insights.load_insights(model) == want == real_compute(model)
    assert len(calls) == len(texts)
    topic.write_text(texts[0])
    age(demo / "memory")  # the sessions keep their stamps
    kept_insights.load_insights(_model(demo))
    assert len(calls) == len(texts) + 1


def test_a_damaged_figure_is_computed_again(demo, monkeypatch):
    model = _model(demo)
    first = kept_insights.load_insights(model)
    path = kept_insights._path(model)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # inside the one part: its crc fails
    path.write_bytes(bytes(data))
    calls = _counting(monkeypatch)
    assert kept_insights.load_insights(_model(demo)) == first
    assert calls == [1]
    kept_insights.load_insights(_model(demo))
    assert calls == [1]  # written again whole
