"""The o200k counter counts a huge text without building its whole token list, and answers
exactly what the encoder answers for the whole text (special-token text as ordinary text)."""

from __future__ import annotations

import hashlib

from memory_tui.core.format import tokens
from memory_tui.core.format.tokens import CountMemo, o200k_encoding


class _Spy:
    """The real encoder, noting the length of every text it is asked to encode."""

    def __init__(self, enc):
        self.enc = enc
        self.lengths: list[int] = []

    def encode(self, text, *a, **kw):
        self.lengths.append(len(text))
        return self.enc.encode(text, *a, **kw)

    def encode_ordinary(self, text):
        self.lengths.append(len(text))
        return self.enc.encode_ordinary(text)

    def __getattr__(self, name):
        return getattr(self.enc, name)


def _fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMORY_TUI_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tokens, "COUNT_MEMO", CountMemo())
    real = o200k_encoding()
    spy = _Spy(real)
    monkeypatch.setattr(tokens, "o200k_encoding", lambda: spy)
    return real, spy


def test_a_huge_turn_is_counted_in_pieces_never_whole(monkeypatch, tmp_path):
    real, spy = _fresh(monkeypatch, tmp_path)
    monkeypatch.setattr(tokens, "CHUNK_CHARS", 4096)
    lines = [f"I prefer build {i} of the deploy window on host {i * 7919 % 100003}. Step {i} ok.\n" for i in range(2000)]
    text = "".join(lines) + "<|endoftext|> and <|endofprompt|> stay text\n" * 50
    assert len(text) > 30 * 4096
    assert tokens.O200kCounter().count(text) == len(real.encode(text, disallowed_special=()))
    assert len(spy.lengths) > 30
    # a piece ends at the first cut at or after the target: within one line of it here
    assert max(spy.lengths) <= 4096 + max(len(line) for line in lines)


def test_a_text_with_no_cut_is_counted_whole_and_exactly(monkeypatch, tmp_path):
    real, spy = _fresh(monkeypatch, tmp_path)
    text = "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8" * 40  # no space, no newline: one piece
    assert tokens.count_ordinary(text, chunk=16) == len(real.encode_ordinary(text))
    assert spy.lengths == [len(text)]


def test_cuts_fall_only_after_a_newline_or_before_a_plain_space():
    text = "alpha beta\n\n gamma\n/x\n delta. epsilon\u3000zeta\u00a0 eta"
    cuts, p = [], 0
    while (p := tokens._split_at(text, p, p + 1)) is not None:
        cuts.append(p)
    for p in cuts:
        before, after = text[p - 1], text[p]
        assert (before == "\n" and not after.isspace() and after != "/") or (after == " " and not before.isspace())
    assert text.index(" beta") in cuts and text.index("gamma") not in cuts and text.index("/x") not in cuts
    assert text.index("delta") not in cuts  # after "\n ": the newline is followed by white space


def test_the_memo_key_of_a_text_read_in_slices_is_the_key_of_its_bytes(monkeypatch):
    monkeypatch.setattr(tokens, "CHUNK_CHARS", 3)
    for text in ["", "ab", "abcdefg", "x\ud83dy\ude00z" * 5, "\ud83d\ude00" * 4, "日本語" * 7]:
        want = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        assert tokens._digest(text) == want
