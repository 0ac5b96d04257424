"""A cheap first look at the topic tree: which topic files exist, their titles and how many
record paragraphs each holds, without the strict parse, the archive scan or the views.

The app paints its Topics list from this before ``workspace.open_state`` has finished (issue
12: first paint in a second); the full snapshot replaces it moments later. It is a preview,
never an answer: nothing is validated here, citations are not resolved, and the counts are
those of the paragraphs' id suffixes (duplicate ids, which the strict parse drops with a
problem, still count). Every CLI verb and every write reads the real parse.

The line classification it uses (``topics.iter_blocks``) is memoised by text; the strict
parse that follows reads a well-formed file in its own single pass (``topics.parse_well_formed``)
and classifies through the same memo only the files it reads the general way.
"""

from __future__ import annotations

import hashlib
import stat as stat_mod
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..cache.stamp import Stamp, stamp_of, stamp_racy
from ..cache import envelope
from ..fsutil import user_cache_dir
from ..format.topics import is_mem_id, iter_blocks, paragraph_shape, read_topic_file, topic_sort_key
from ..cache.registry import keeps


@dataclass(frozen=True)
class TopicOutline:
    path: str  # relative to topics/, e.g. "people/ada.md"
    title: str  # the first level-1 heading, else the file stem
    records: int  # record paragraphs (one per id suffix, plus legacy mem_ citations)
    readable: bool  # False when the file could not be read or decoded


def topic_outline(memory_root: Path, *, cache: "OutlineCache | None" = None) -> tuple[TopicOutline, ...]:
    """Every topic file under ``memory_root/topics`` (the engine's file set: ``rglob("*.md")``
    that are regular files), sorted as the engine sorts topics.

    With ``cache`` a file whose stamp (``cache.stamp``) is the one an entry was made from
    is not read: its outline is the entry's (see :class:`OutlineCache`)."""
    topics_dir = Path(memory_root) / "topics"
    if not topics_dir.is_dir():
        return ()
    rels: dict[str, Stamp] = {}
    for file in topics_dir.rglob("*.md"):
        try:
            st = file.stat()
        except OSError:
            continue
        if stat_mod.S_ISREG(st.st_mode):
            rels[file.relative_to(topics_dir).as_posix()] = stamp_of(st)
    out = []
    for rel in sorted(rels, key=topic_sort_key):
        hit = cache.get(rel, rels[rel]) if cache is not None else None
        if hit is not None:
            out.append(hit)
            continue
        stem = Path(rel).stem
        text, _data, problem = read_topic_file(topics_dir, rel)
        if text is None or problem is not None:
            found = TopicOutline(rel, stem, 0, False)
        else:
            found = _outline_of(rel, text, stem)
        if cache is not None:
            cache.put(rel, rels[rel], found)
        out.append(found)
    if cache is not None:
        cache.retain(rels)
    return tuple(out)


# -- the persistent outline ----------------------------------------------------------------
# The outline of 300 topic files is ~0.3-0.5 s of reading and line classification, before
# the app can paint its Topics list at all; a start on an unchanged workspace (the usual
# one) needs only the files' stats and this small table.

OUTLINE_FORMAT = 3  # 3: an envelope of the cache kit (2 was JSON)
KIND = "outline"
SUFFIX = ".outline"


@keeps
@lru_cache(maxsize=1)
def outline_code_tag() -> str:
    """A digest of the code an outline comes from: other code's entries are never read."""
    from ..cache.codetag import code_tag
    from ..format import topics
    from . import outline

    return code_tag(outline, topics, salt=f"outline {OUTLINE_FORMAT}", length=16)


def outline_cache_dir() -> Path:
    """``outline/`` in memory-tui's cache dir (``$MEMORY_TUI_CACHE_DIR``)."""
    return user_cache_dir("outline")


class OutlineCache:
    """Per memory root, one table ``rel -> (mtime_ns, size, inode, ctime_ns, title, records,
    readable)`` (an envelope of the cache kit) outside the state dir (a reader never writes there), named by a digest of the
    root's resolved path.

    Exactness as the parse cache's: an entry is used only for the very stat key it was made
    from, and a stamp younger than the clock tick (``is_racy``) is never stored, so a file
    rewritten within one tick cannot hide behind an old entry. The outline is a preview the
    strict parse replaces moments later; a wrong or lost table only costs time: unreadable,
    foreign-format, other-code or other-root tables are empty."""

    def __init__(self, memory_root: Path, folder: Path | None = None) -> None:
        root = str(Path(memory_root).resolve())
        self.root = root
        self.path = (folder or outline_cache_dir()) / (hashlib.sha256(root.encode()).hexdigest()[:24] + SUFFIX)
        self.entries: dict[str, tuple] = {}
        self.changed = False
        data = envelope.read(self.path, KIND, OUTLINE_FORMAT)
        if (isinstance(data, dict) and data.get("code") == outline_code_tag() and data.get("root") == root
                and isinstance(data.get("files"), dict)):
            self.entries = {rel: e for rel, e in data["files"].items() if type(rel) is str and _entry_ok(e)}

    def get(self, rel: str, key: Stamp) -> TopicOutline | None:
        e = self.entries.get(rel)
        if e is None or e[:4] != key:
            return None
        return TopicOutline(rel, e[4], e[5], e[6])

    def put(self, rel: str, key: Stamp, outline: TopicOutline) -> None:
        if stamp_racy(key):
            if self.entries.pop(rel, None) is not None:
                self.changed = True
            return
        self.entries[rel] = (*key, outline.title, outline.records, outline.readable)
        self.changed = True

    def retain(self, live) -> None:
        for rel in [r for r in self.entries if r not in live]:
            del self.entries[rel]
            self.changed = True

    def save(self) -> None:
        """Write the table if anything changed (best effort: a cache that cannot be written
        only costs the next start its time)."""
        if not self.changed:
            return
        data = {"code": outline_code_tag(), "root": self.root, "files": dict(self.entries)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            return
        if envelope.write(self.path, KIND, data, OUTLINE_FORMAT):
            self.changed = False


def _entry_ok(e: object) -> bool:
    return (type(e) is tuple and len(e) == 7 and all(type(v) is int for v in e[:4]) and isinstance(e[4], str)
            and type(e[5]) is int and type(e[6]) is bool)


def _outline_of(rel: str, text: str, stem: str) -> TopicOutline:
    paragraphs, _lines, headings = iter_blocks(text)
    title = next((h.title for h in headings if h.level == 1), None) or stem
    count = 0
    for para in paragraphs:
        shape = paragraph_shape(para.text)
        if shape.invalid_ids:
            continue  # the strict parse refuses the paragraph: no record
        if shape.suffix:
            count += 1
        else:
            count += sum(1 for _s, _e, fids in shape.groups if all(is_mem_id(f) for f in fids) for _f in fids)
    return TopicOutline(rel, title, count, True)
