"""The cross-process token-count memo answers exactly what the encoder answers, and a
foreign, corrupt or missing memo file is only a miss."""

from __future__ import annotations

import json

from memory_tui.core.cache import envelope
from memory_tui.core.format import tokens
from memory_tui.core.format.tokens import CountMemo, o200k_encoding

TEXTS = ["hello world", "<|endoftext|> is plain text here", "日本語のテキスト", "x" * 5000, ""]


def _exact(text: str) -> int:
    return len(o200k_encoding().encode(text, disallowed_special=()))


def _saved(tmp_path) -> dict[str, int]:
    """Every count in the shards, each checked to be tagged and in the shard its key names."""
    out: dict[str, int] = {}
    for shard in sorted((tmp_path / "o200k-counts").glob("*" + CountMemo.SUFFIX)):
        tag, counts = envelope.unpack(CountMemo.KIND, shard.read_bytes(), CountMemo.VERSION)
        assert tag == CountMemo.tag()
        assert all(CountMemo.shard_of(k) == shard.stem for k in counts)
        out.update(counts)
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
    """Another tag, another kind, a damaged envelope, a count changed inside an intact-looking
    envelope (its crc no longer matches), a JSON shard of earlier versions: each is a miss,
    answered by the encoder."""
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    key = _key("hello world")
    folder = tmp_path / "o200k-counts"
    folder.mkdir()
    path = folder / f"{CountMemo.shard_of(key)}{CountMemo.SUFFIX}"
    good = envelope.pack(CountMemo.KIND, (CountMemo.tag(), {key: 99}), CountMemo.VERSION)
    tampered = bytearray(good)
    at = bytes(good).rindex(bytes(envelope.packed_value(99))[1:])  # the count's bytes in the payload
    tampered[at] ^= 0x01
    bodies = [
        envelope.pack(CountMemo.KIND, ("other", {key: 99}), CountMemo.VERSION),
        envelope.pack("other-kind", (CountMemo.tag(), {key: 99}), CountMemo.VERSION),
        envelope.pack(CountMemo.KIND, (CountMemo.tag(), {key: 99}), CountMemo.VERSION + 1),
        good[:-1],
        bytes(tampered),
        b"not an envelope",
    ]
    counter = tokens.O200kCounter()
    for body in bodies:
        path.write_bytes(body)
        monkeypatch.setattr(tokens, "COUNT_MEMO", CountMemo())
        assert counter.count("hello world") == _exact("hello world")
    (folder / f"{CountMemo.shard_of(key)}.json").write_text(json.dumps({"tag": CountMemo.tag(), "counts": {key: 99}}))
    path.unlink()
    monkeypatch.setattr(tokens, "COUNT_MEMO", CountMemo())
    assert counter.count("hello world") == _exact("hello world")
    path.write_bytes(good)  # the control: an intact envelope is what answers
    monkeypatch.setattr(tokens, "COUNT_MEMO", CountMemo())
    assert counter.count("hello world") == 99


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


def test_a_fresh_count_reads_one_shard_and_never_a_legacy_memo(tmp_path, monkeypatch):
    """Counting one text reads only its own shard; the single-file JSON memo of earlier
    versions is never read (nothing in it can be told from a count edited in place)."""
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    legacy = tmp_path / "o200k-counts.json"
    wrong = {_key(t): _exact(t) + 1000 for t in TEXTS}
    legacy.write_text(json.dumps({"tag": CountMemo.tag(), "counts": wrong}))
    memo = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", memo)
    counter = tokens.O200kCounter()
    assert [counter.count(t) for t in TEXTS] == [_exact(t) for t in TEXTS]
    memo.save()
    assert _saved(tmp_path) == {_key(t): _exact(t) for t in TEXTS}
    fresh = CountMemo()
    monkeypatch.setattr(tokens, "COUNT_MEMO", fresh)
    assert counter.count(TEXTS[0]) == _exact(TEXTS[0])
    assert list(fresh.shards) == [CountMemo.shard_of(_key(TEXTS[0]))]
    assert not fresh.dirty
