"""Property tests: the o200k count made in pieces (cut only where the pre-tokeniser always cuts)
is the count of the whole text, on text built to sit on the pre-tokeniser's edges."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.format import tokens
from memory_tui.core.format.tokens import count_ordinary, o200k_encoding

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Fragments on the edges of o200k's regex: white-space runs of every kind (including what only
# Python, or only Unicode, calls white space), newline runs, contractions in any case,
# digit runs longer than three, letters of each case class and marks, CJK, emoji sequences,
# the punctuation alternative's trailing ``[\r\n/]*``, special-token look-alikes, lone surrogates.
EDGES = [
    " ", "  ", "   ", "\n", "\n\n", "\r\n", "\r", "\t", " \n", "\n ", " \n\n ", "\x0b", "\x0c", "\x1c", "\x1f", "\x85",
    "\xa0", "\u1680", "\u180e", "\u2000", "\u200a", "\u200b", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\ufeff",
    "'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'", "\u2019s", "don't", "I'M",
    "1", "12", "123", "1234", "1234567", "\u0663\u0664", "\u216b", "\u00bd",
    "a", "abc", "A", "ABC", "Ab", "aB", "HTTPServer", "\u01c5", "\u02b0", "e\u0301", "\u0301", "\u00e9",
    "\u65e5\u672c\u8a9e", "\u4e2d\u6587", "\ud55c\uad6d\uc5b4", "\u3042\u3044", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "\U0001f600", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\u2764\ufe0f", "\U0001f1eb\U0001f1f7",
    ".", "...", "!?", "-", "_", "/", "//", "/\n", "./\n/", ".\n", ",\r\n", "#", "`", "```\n", "<", ">", "|", "<|", "|>",
    "<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|endoftext", "endoftext|>", "<||>",
    "\ud83d", "\ude00", "\ud83d\ude00",
]

texts = st.lists(st.one_of(st.sampled_from(EDGES), st.text(max_size=4)), max_size=80).map("".join)


@SETTINGS
@given(text=texts, chunk=st.integers(min_value=1, max_value=48))
def test_the_count_in_pieces_is_the_count_of_the_whole(text, chunk):
    enc = o200k_encoding()
    whole = len(enc.encode_ordinary(text))
    assert count_ordinary(text, chunk=chunk) == whole
    # and what the counter answered before it counted in pieces: special-token text as text
    assert whole == len(enc.encode(text, disallowed_special=()))


@SETTINGS
@given(text=texts, target=st.integers(min_value=0, max_value=400))
def test_every_cut_is_where_the_pieces_of_the_whole_text_break(text, target):
    enc = o200k_encoding()
    p = tokens._split_at(text, 0, target)
    if p is None:
        return
    assert 0 < p < len(text)
    assert len(enc.encode_ordinary(text[:p])) + len(enc.encode_ordinary(text[p:])) == len(enc.encode_ordinary(text))
    # the tokens themselves, not only their number: the two parts decode to the whole
    assert enc.encode_ordinary(text[:p]) + enc.encode_ordinary(text[p:]) == enc.encode_ordinary(text)

