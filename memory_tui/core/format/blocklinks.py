"""Block links (memory spec §3.7): where each block id lives, and every ``[text](path#^id)``
pointed at the file that holds ``id`` now.

``rewrite_block_links`` keeps its last answer: a file whose text is the very object it was and
none of whose linked ids moved keeps its rewrite, so an edit asks only the changed files and
those linking to a moved id (``mode="check"`` compares with asking every file).
"""

from __future__ import annotations

import posixpath
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from itertools import compress
from operator import is_not
from typing import NamedTuple, Protocol

from .topics import BLOCK_LINK_RE, classify_lines, is_mem_id, iter_blocks, paragraph_shape, topic_sort_key
from ..cache.registry import keeps

SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # a link with a scheme is never a topic link


class LinkedIdsMemo(Protocol):
    """A caller's memo of ``linked_ids`` per file (``memos.TextMemos`` is one)."""

    def linked_ids(self, path: str, text: str) -> tuple[str, ...] | None: ...


def _pct_block_path(path: str) -> str:
    """``urllib.parse.quote(path, safe="/._-")``, which is what OpenProgram writes: ASCII letters
    and digits, ``/._-`` and the always-safe ``~`` stay, every other byte of the UTF-8 is %XX."""
    out = []
    for ch in path:
        if ch.isascii() and (ch.isalnum() or ch in "/._-~"):
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def file_block_ids(text: str) -> tuple[str, ...]:
    """The block / mem_ ids of one topic text, in order (what ``_id_locations`` uses)."""
    out: list[str] = []
    paragraphs, _, _ = iter_blocks(text)
    for para in paragraphs:
        shape = paragraph_shape(para.text)
        if shape.invalid_ids:
            continue
        out.extend(shape.ids or tuple(
            fid for _, _, fids in shape.groups if all(is_mem_id(f) for f in fids) for fid in fids
        ))
    return tuple(out)


def block_id_locations(texts: Mapping[str, str], file_ids: Callable[[str, str], Iterable[str]] | None = None,
                       ) -> dict[str, str]:
    """Where ``rewrite_block_links`` points each id: block id / mem_ id -> the topic path of
    its first occurrence in tree order (live texts only)."""
    return _id_locations(texts, file_ids)


def _id_locations(texts: Mapping[str, str], file_ids: Callable[[str, str], Iterable[str]] | None = None) -> dict[str, str]:
    """Block id / mem_ id -> topic path, first occurrence in tree order (cheap: no evidence).
    ``file_ids(path, text)``: a caller's (cached) ``file_block_ids``."""
    where: dict[str, str] = {}
    for path in sorted(texts, key=topic_sort_key):
        ids = file_ids(path, texts[path]) if file_ids is not None else file_block_ids(texts[path])
        for bid in ids:
            where.setdefault(bid, path)
    return where


def rewrite_block_links(
    texts: Mapping[str, str | None], *, file_ids: Callable[[str, str], Iterable[str]] | None = None,
    rewritten: Callable[[str, str, tuple, Callable[[], str]], str] | None = None,
    locations: Mapping[str, str] | None = None,
    memo: LinkedIdsMemo | None = None,
    mode: str = "incremental",
) -> dict[str, str | None]:
    """Point every ``[text](path#^id)`` at the current file holding ``id`` (relative to the
    linking topic, percent-encoding all but ``/._-~``; same file -> ``<file>.md#^id``).
    Links to unknown ids are left alone (``check_cross_topic_links`` reports them).

    ``rewritten(path, text, locations, compute)``: a caller's memo of one file's result. The
    result is a function of the path, the text and where each id it could link to lives:
    ``locations`` is ``((id, path or None), ...)`` for every ``#^id)`` in the text (a superset
    of the ids of its block links), so equal arguments always mean an equal result.

    ``locations``: ``block_id_locations`` of the live texts, when the caller has it (kept up
    to date from the previous call's); ``memo``: a caller's memo of per-text facts (its
    ``linked_ids(path, text)``).
    With ``locations``, the last such call's answer is kept (``_REWRITTEN``): a file whose text
    is the very object it was and none of whose linked ids moved keeps its rewrite, so only
    the changed files and those linking to a moved id are asked. ``mode`` (the transaction's
    ``MEMORY_TUI_TEST_DERIVE``): ``full`` asks every file, ``check`` both, comparing them."""
    if locations is None:
        where = _id_locations({(k[7:] if k.startswith("topics/") else k): v for k, v in texts.items() if v is not None},
                              file_ids)
        return _rewrite_all(texts, where, rewritten, memo)[0]
    if mode == "full":
        return _rewrite_all(texts, locations, rewritten, memo)[0]
    with _REWRITTEN_LOCK:
        last, _REWRITTEN[0] = _REWRITTEN[0], None  # taken: a failure below leaves none
        out = _rewrite_since(last, texts, locations, rewritten, memo) if last is not None else None
        if out is None:
            out, linking = _rewrite_all(texts, locations, rewritten, memo)
            _REWRITTEN[0] = _Rewritten(tuple(texts), list(texts.values()), out, locations, linking)
        else:
            _REWRITTEN[0] = last._replace(keys=tuple(texts), values=list(texts.values()), out=out, where=locations)
    if mode == "check":
        full = _rewrite_all(texts, locations, rewritten, memo)[0]
        if full != out or list(full) != list(out):
            raise RewriteMismatch(f"incremental block-link rewrite differs: "
                                  f"{sorted(k for k in full if full[k] != out.get(k))[:10]}")
    return dict(out)


class RewriteMismatch(AssertionError):
    """``mode="check"``: the kept block-link rewrite differs from asking every file."""


class _Rewritten(NamedTuple):
    """The last ``rewrite_block_links`` call with ``locations``: its texts, its answer, the
    locations it was given and, per id, the keys of the texts that link to it."""

    keys: tuple[str, ...]
    values: list[str | None]
    out: dict[str, str | None]  # never handed out (the caller gets a copy)
    where: Mapping[str, str]
    linking: dict[str, set[str]]  # id -> keys whose ``linked_ids`` hold it; changed in place


_REWRITTEN_LOCK = threading.Lock()
_REWRITTEN: list[_Rewritten | None] = [None]
# More changed texts or files to ask again than this and every file is asked.
REWRITE_MAX_CHANGED = 64


def _rewrite_one(key: str, value: str | None, where: Mapping[str, str],
                 rewritten: Callable[[str, str, tuple, Callable[[], str]], str] | None,
                 memo: LinkedIdsMemo | None,
                 ) -> tuple[str | None, tuple[str, ...] | None]:
    """One text's rewrite and its ``linked_ids``."""
    if value is None:
        return None, None
    path = key[7:] if key.startswith("topics/") else key
    fast = _LINKED.get(path)
    if fast is not None and fast[0] is value:  # a pure function of the very text
        linked = fast[1]
    else:
        linked = memo.linked_ids(path, value) if memo is not None else linked_ids(value)
        _LINKED[path] = (value, linked)
    if linked is None:
        return value, None
    if rewritten is None:
        return _rewrite_file(path, value, where), linked
    found = tuple((bid, where.get(bid)) for bid in linked)
    return rewritten(path, value, found, lambda: _rewrite_file(path, value, where)), linked


def _rewrite_all(texts: Mapping[str, str | None], where: Mapping[str, str],
                 rewritten: Callable[[str, str, tuple, Callable[[], str]], str] | None,
                 memo: LinkedIdsMemo | None,
                 ) -> tuple[dict[str, str | None], dict[str, set[str]]]:
    """Every text's rewrite, and per id the keys of the texts linking to it."""
    out: dict[str, str | None] = {}
    linking: dict[str, set[str]] = {}
    for key, value in texts.items():
        out[key], linked = _rewrite_one(key, value, where, rewritten, memo)
        for bid in linked or ():
            linking.setdefault(bid, set()).add(key)
    return out, linking


def _rewrite_since(last: _Rewritten, texts: Mapping[str, str | None], where: Mapping[str, str],
                   rewritten: Callable[[str, str, tuple, Callable[[], str]], str] | None,
                   memo: LinkedIdsMemo | None,
                   ) -> dict[str, str | None] | None:
    """``last.out`` with the texts that are other objects and those linking to an id whose
    location moved asked again (``last.linking`` updated in place); None when that cannot
    be told here: other keys, other locations, too many changes."""
    keys = tuple(texts)
    if keys != last.keys:
        return None
    moved = _moved_ids(last.where, where)
    if moved is None:
        return None
    values = list(texts.values())
    at = list(compress(range(len(values)), map(is_not, values, last.values)))
    if len(at) > REWRITE_MAX_CHANGED:
        return None
    again = set(map(keys.__getitem__, at))
    linking = last.linking
    for bid in moved:
        again.update(linking.get(bid, ()))
    if len(again) > REWRITE_MAX_CHANGED:
        return None
    out = dict(last.out)
    for i in at:  # their linked ids as they were, taken out of the index
        key, before = keys[i], last.values[i]
        if before is not None:
            old = _linked_of(key, before)
            for bid in old or ():
                paths = linking.get(bid)
                if paths is not None:
                    paths.discard(key)
                    if not paths:
                        del linking[bid]
    for key in again:
        value = texts[key]
        out[key], linked = _rewrite_one(key, value, where, rewritten, memo)
        for bid in linked or ():
            linking.setdefault(bid, set()).add(key)
    return out


def _linked_of(key: str, text: str) -> tuple[str, ...] | None:
    path = key[7:] if key.startswith("topics/") else key
    fast = _LINKED.get(path)
    return fast[1] if fast is not None and fast[0] is text else linked_ids(text)


def _moved_ids(old: Mapping[str, str], new: Mapping[str, str]) -> set[str] | None:
    """The ids whose location may differ between two ``block_id_locations`` maps, when both
    are the same plain map with (``linkcache.Locations``) a few ids laid over it; else None."""
    if new is old:
        return set()
    old_base, old_delta = _laid_over(old)
    new_base, new_delta = _laid_over(new)
    if old_base is not new_base:
        return None
    return {bid for bid in old_delta.keys() | new_delta.keys() if old.get(bid) != new.get(bid)}


def _laid_over(where: Mapping[str, str]) -> tuple[Mapping[str, str], Mapping[str, str]]:
    """``(base, delta)``: a ``linkcache.Locations``'s shared plain map and what is laid over it
    (any other map is its own base)."""
    if type(where) is dict:
        return where, {}
    base, delta = getattr(where, "base", None), getattr(where, "delta", None)
    if isinstance(base, dict) and isinstance(delta, dict):
        return base, delta
    return where, {}


# path -> (the last text object seen there, its ``linked_ids``): asked of every file per edit
_LINKED: dict[str, tuple[str, tuple[str, ...] | None]] = keeps({})


def linked_ids(text: str) -> tuple[str, ...] | None:
    """Every id some ``#^id)`` of ``text`` ends in, sorted (the ids of its block links are
    among them); None when it has no ``#^`` at all (it is then its own rewrite)."""
    if "#^" not in text:
        return None
    return tuple(sorted(set(_LINKED_ID_RE.findall(text))))


# Every id a block link can end in: BLOCK_LINK_RE's last group is followed by ")" and preceded
# by "#^", and no "#^id)" can overlap another (ids hold neither "#" nor ")").
_LINKED_ID_RE = re.compile(r"#\^([A-Za-z0-9_-]+)\)")


def _rewrite_file(path: str, value: str, where: Mapping[str, str]) -> str:
    here = posixpath.dirname(path) or "."

    def fix(m: re.Match) -> str:
        label, target_path, bid = m.group(1), m.group(2), m.group(3)
        # An absolute path (``/core.md#^id``) is re-pointed too: OpenProgram rewrites every
        # block link by its id (corpus cases 010, 094, 139), so keeping it would leave a file
        # that OpenProgram's next no-op edit rewrites. Only links with a scheme stay.
        if SCHEME_RE.match(target_path) or bid not in where:
            return m.group(0)
        dest = where[bid]
        rel = posixpath.basename(dest) if dest == path else posixpath.relpath(dest, here)
        return f"[{label}]({_pct_block_path(rel)}#^{bid})"

    # Every line, as OpenProgram's install does: a block link in a heading, a comment or fenced
    # code is pointed at its id's file like one in a record.
    new_lines = []
    for line in classify_lines(value):
        new_lines.append(BLOCK_LINK_RE.sub(fix, line.text) if "#^" in line.text else line.text)
    new = "\n".join(new_lines)
    if value.endswith("\n"):
        new += "\n"
    return new



__all__ = ["REWRITE_MAX_CHANGED", "RewriteMismatch", "SCHEME_RE", "block_id_locations", "file_block_ids", "linked_ids",
           "rewrite_block_links"]
