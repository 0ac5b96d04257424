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

import stat as stat_mod
from dataclasses import dataclass
from pathlib import Path

from .topics import is_mem_id, iter_blocks, paragraph_shape, read_topic_file, topic_sort_key


@dataclass(frozen=True)
class TopicOutline:
    path: str  # relative to topics/, e.g. "people/ada.md"
    title: str  # the first level-1 heading, else the file stem
    records: int  # record paragraphs (one per id suffix, plus legacy mem_ citations)
    readable: bool  # False when the file could not be read or decoded


def topic_outline(memory_root: Path) -> tuple[TopicOutline, ...]:
    """Every topic file under ``memory_root/topics`` (the engine's file set: ``rglob("*.md")``
    that are regular files), sorted as the engine sorts topics."""
    topics_dir = Path(memory_root) / "topics"
    if not topics_dir.is_dir():
        return ()
    rels = []
    for file in topics_dir.rglob("*.md"):
        try:
            if stat_mod.S_ISREG(file.stat().st_mode):
                rels.append(file.relative_to(topics_dir).as_posix())
        except OSError:
            continue
    out = []
    for rel in sorted(rels, key=topic_sort_key):
        stem = Path(rel).stem
        text, _data, problem = read_topic_file(topics_dir, rel)
        if text is None or problem is not None:
            out.append(TopicOutline(rel, stem, 0, False))
            continue
        out.append(_outline_of(rel, text, stem))
    return tuple(out)


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
