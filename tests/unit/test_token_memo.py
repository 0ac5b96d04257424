"""The cross-process token-count memo answers exactly what the encoder answers, and a
foreign, corrupt or missing memo file is only a miss."""

from __future__ import annotations

import json

from memory_tui.core.format import tokens
from memory_tui.core.format.tokens import CountMemo, o200k_encoding

TEXTS = ["hello world", "<|endoftext|> is plain text here", "日本語のテキスト", "x" * 5000, ""]


def _exact(text: str) -> int:
    return len(o200k_encoding().encode(text, disallowed_special=()))


def _saved(tmp_path) -> dict[str, int]:
    """Every count in the shards, each checked to be tagged and in the shard its key names."""
    out: dict[str, int] = {}
    for shard in sorted((tmp_path / "o200k-counts").glob("*.json")):
        body = json.loads(shard.read_text())
        assert body["tag"] == CountMemo.tag()
        assert all(CountMemo.shard_of(k) == shard.stem for k in body["counts"])
        out.update(body["counts"])
    return out


def _key(text: str) -> str:
    return __import__("hashlib").blake2b(text.encode(), digest_size=16).hexdigest()


def test_memo_round_trip_is_exact(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    memo = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", memo)
    counter = tokens.O200kCounter()
    assert [counter.count(t) for t in TEXTS] == [_exact(t) for t in TEXTS]
    memo.save()
    assert len(_saved(tmp_path)) == len(TEXTS)
    again = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", again)
    assert [counter.count(t) for t in TEXTS] == [_exact(t) for t in TEXTS]
    assert not again.dirty  # every answer came from the file


def test_foreign_or_corrupt_memo_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    key = _key("hello world")
    path = tmp_path / "o200k-counts" / f"{CountMemo.shard_of(key)}.json"
    path.parent.mkdir()
    counter = tokens.O200kCounter()
    for body in ('{"tag": "other", "counts": {"%s": 99}}' % key, "not json", '{"tag": "%s", "counts": {"%s": "9"}}'
                 % (CountMemo.tag(), key)):
        path.write_text(body)
        monkeypatch.setattr(tokens, "COUNT_MEMO", CountMemo())
        assert counter.count("hello world") == _exact("hello world")


def test_processes_saving_at_once_keep_each_others_counts(tmp_path, monkeypatch):
    """Two memos loaded before either saved (two processes): the second save keeps the first's counts."""
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    counter = tokens.O200kCounter()
    first, second = CountMemo(), CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", first)
    counter.count(TEXTS[0])
    monkeypatch.setattr(tokens, "COUNT_MEMO", second)
    counter.count(TEXTS[1])
    first.save()
    second.save()
    assert len(_saved(tmp_path)) == 2
    third = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", third)
    assert [counter.count(t) for t in TEXTS[:2]] == [_exact(t) for t in TEXTS[:2]]
    assert not third.dirty


def test_tiktoken_version_is_what_importlib_metadata_reports():
    from importlib.metadata import version

    from memory_tui.core.format import tokens

    assert tokens._tiktoken_version() == version("tiktoken")
    assert tokens.CountMemo.tag().endswith("/tiktoken-" + version("tiktoken"))


def test_a_fresh_count_reads_one_shard_and_a_legacy_memo_is_folded_in(tmp_path, monkeypatch):
    """Counting one text reads only its own shard; the single-file memo of earlier
    versions is read when there are no shards yet, its counts answered and written into them
    (the file itself is left for older copies), and not read again once they exist."""
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    legacy = tmp_path / CountMemo.LEGACY_NAME
    wrong = {_key(t): _exact(t) + 1000 for t in TEXTS}  # counts the encoder would never give: they must come from the file
    legacy.write_text(json.dumps({"tag": CountMemo.tag(), "counts": wrong}))
    memo = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", memo)
    counter = tokens.O200kCounter()
    assert [counter.count(t) for t in TEXTS] == [wrong[_key(t)] for t in TEXTS]
    memo.save()
    assert legacy.exists() and _saved(tmp_path) == wrong
    legacy.write_text(json.dumps({"tag": CountMemo.tag(), "counts": {k: 0 for k in wrong}}))
    fresh = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", fresh)
    assert counter.count(TEXTS[0]) == wrong[_key(TEXTS[0])]
    assert list(fresh.shards) == [CountMemo.shard_of(_key(TEXTS[0]))]
