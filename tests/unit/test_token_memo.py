"""The cross-process token-count memo answers exactly what the encoder answers, and a
foreign, corrupt or missing memo file is only a miss."""

from __future__ import annotations

import json

from memory_tui.core import tokens
from memory_tui.core.tokens import CountMemo, o200k_encoding

TEXTS = ["hello world", "<|endoftext|> is plain text here", "日本語のテキスト", "x" * 5000, ""]


def _exact(text: str) -> int:
    return len(o200k_encoding().encode(text, disallowed_special=()))


def test_memo_round_trip_is_exact(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    memo = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", memo)
    counter = tokens.O200kCounter()
    assert [counter.count(t) for t in TEXTS] == [_exact(t) for t in TEXTS]
    memo.save()
    body = json.loads((tmp_path / "o200k-counts.json").read_text())
    assert body["tag"] == CountMemo.tag() and len(body["counts"]) == len(TEXTS)
    again = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", again)
    assert [counter.count(t) for t in TEXTS] == [_exact(t) for t in TEXTS]
    assert not again.dirty  # every answer came from the file


def test_foreign_or_corrupt_memo_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    path = tmp_path / "o200k-counts.json"
    counter = tokens.O200kCounter()
    key = __import__("hashlib").blake2b(b"hello world", digest_size=16).hexdigest()
    for body in ('{"tag": "other", "counts": {"%s": 99}}' % key, "not json", '{"tag": "%s", "counts": {"%s": "9"}}'
                 % (CountMemo.tag(), key)):
        path.write_text(body)
        monkeypatch.setattr(tokens, "COUNT_MEMO", CountMemo())
        assert counter.count("hello world") == _exact("hello world")


def test_processes_saving_at_once_keep_each_others_counts(tmp_path, monkeypatch):
    """app-rss: two memos loaded before either saved; the second save keeps the first's."""
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    counter = tokens.O200kCounter()
    first, second = CountMemo(), CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", first)
    counter.count(TEXTS[0])
    monkeypatch.setattr(tokens, "COUNT_MEMO", second)
    counter.count(TEXTS[1])
    first.save()
    second.save()
    body = json.loads((tmp_path / "o200k-counts.json").read_text())
    assert len(body["counts"]) == 2
    third = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", third)
    assert [counter.count(t) for t in TEXTS[:2]] == [_exact(t) for t in TEXTS[:2]]
    assert not third.dirty


def test_tiktoken_version_is_what_importlib_metadata_reports():
    from importlib.metadata import version

    from memory_tui.core import tokens

    assert tokens._tiktoken_version() == version("tiktoken")
    assert tokens.CountMemo.tag().endswith("/tiktoken-" + version("tiktoken"))
