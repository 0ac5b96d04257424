"""A reading process keeps each topic's Timeline part in the readers' copy beside its parses
(the user cache, never the state dir): the next fresh reader derives the views only for the
topics whose parse changed, and its views are byte for byte a full derivation's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from aging import age
from memory_tui.core import switches
from memory_tui.core.store import parsecache, viewcache
from memory_tui.core.store.workspace import open_state


def _fresh_process() -> None:
    from memory_tui.core.cache.registry import forget

    forget()  # every in-process cache gone: what the next process starts from is on disk


def _derived(monkeypatch) -> list[str]:
    made: list[str] = []
    real = viewcache.topic_part

    def spy(topic, link_for):
        made.append(topic.path)
        return real(topic, link_for)

    monkeypatch.setattr(viewcache, "topic_part", spy)
    return made


def _views(state: Path) -> tuple:
    v = open_state(state).views
    return v.files


@pytest.fixture
def state(bench_state_small, tmp_path, monkeypatch) -> Path:
    out = tmp_path / "state"
    shutil.copytree(bench_state_small, out, symlinks=True)
    shutil.rmtree(parsecache.Layout(out / "memory").runtime_dir / parsecache.DIR_NAME, ignore_errors=True)
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path / "user-cache"))
    age(out)
    _fresh_process()
    return out


def test_a_fresh_reader_derives_no_part_a_reader_before_it_kept(state, monkeypatch):
    made = _derived(monkeypatch)
    first = _views(state)
    topics = sorted(p.relative_to(state / "memory" / "topics").as_posix()
                    for p in (state / "memory" / "topics").rglob("*.md"))
    assert sorted(made) == topics  # cold: every topic's part derived
    parsecache.keep_for_readers(state / "memory")
    assert not (state / "memory" / ".scriptorium" / parsecache.DIR_NAME).exists()  # never in the state dir
    _fresh_process()
    made.clear()
    assert _views(state) == first
    assert made == []


def test_a_changed_topic_alone_is_derived_again_and_the_views_equal_a_full_derivation(state, monkeypatch):
    _views(state)
    parsecache.keep_for_readers(state / "memory")
    topic = sorted((state / "memory" / "topics").rglob("*.md"))[1]
    text = topic.read_text(encoding="utf-8")
    topic.write_text(text + "\nA line the owner added.\n", encoding="utf-8")
    age(state)
    _fresh_process()
    made = _derived(monkeypatch)
    got = _views(state)
    assert made == [topic.relative_to(state / "memory" / "topics").as_posix()]
    monkeypatch.setenv(switches.DERIVE_ENV, "full")
    switches.reload()
    _fresh_process()
    assert _views(state) == got


def test_check_mode_compares_the_kept_parts_with_a_full_derivation(state, monkeypatch):
    """A kept part that differs from what the topic derives (what a wrong key would give) is
    caught by ``check``, never shown."""
    _views(state)
    parsecache.keep_for_readers(state / "memory")
    _fresh_process()
    real = parsecache.ParseStore.derived

    def lying(self, kind, rel, key):
        value = real(self, kind, rel, key)
        if kind == "views" and value is not None and value[0]:
            rows = list(value[0])
            rows[0] = (*rows[0][:5], "- forged")  # the line the day file prints
            value = (tuple(rows), *value[1:])
        return value

    monkeypatch.setattr(parsecache.ParseStore, "derived", lying)
    monkeypatch.setenv(switches.DERIVE_ENV, "check")
    switches.reload()
    with pytest.raises(viewcache.ViewsMismatch):
        _views(state)


def test_a_later_build_in_the_same_process_does_not_read_the_copy_again(state, monkeypatch):
    """Once turned into parts the copy's rows are let go; a reload's changed topic is derived,
    not looked up by reading the whole copy again (at scale 4 that read was 0.1 s a reload)."""
    _views(state)
    parsecache.keep_for_readers(state / "memory")
    _fresh_process()
    _views(state)  # parts from the copy
    packs: list[str] = []
    real = parsecache.ParseStore._load_pack

    def counting(self, kind, folder=None):
        packs.append(kind)
        return real(self, kind, folder)

    monkeypatch.setattr(parsecache.ParseStore, "_load_pack", counting)
    topic = next(p for p in sorted((state / "memory" / "topics").rglob("*.md")) if " (fact " in p.read_text("utf-8"))
    text = topic.read_text(encoding="utf-8")
    topic.write_text(text.replace(" (fact ", " (a reworded fact ", 1), encoding="utf-8")  # still a valid record
    age(topic)  # this file alone: the others keep their stamps, so their parses are the same objects
    made = _derived(monkeypatch)
    _views(state)
    assert made == [topic.relative_to(state / "memory" / "topics").as_posix()]
    assert "views" not in packs
    parsecache.keep_for_readers(state / "memory")  # a write reads the copy again, to keep its entries
    assert packs.count("views") == 1
    _fresh_process()
    made.clear()
    _views(state)
    assert made == []
