"""Topic Markdown: OpenProgram's memory grammar, read side (memory spec §3).

Everything here is pure: text in, frozen dataclasses out. Files on disk are only read by
``parse_tree`` when it is handed a directory. Source links that point into archive files are
resolved through an injected ``SourceResolver`` (``sources.SourceIndex.resolve_target``); the
parts of §3.5 that need no files live here (``resolve_plain_target``).

The rooms, each importing only the ones listed after it:

* ``tree``: a whole ``topics/`` tree, the cross-file rule, incremental reassembly
* ``parse``: the general parser, every problem found (``parse_topic``, ``raise_for_problems``)
* ``fast``: the one-pass reader of well-formed files (``parse_well_formed``), and the fields
  it hands the parse cache
* ``grammar``: the lexical pieces, line classes, paragraphs, definitions (§3.1-§3.5)
* ``files``: what a topic file on disk reads as
* ``model``: the dataclasses a parse gives

This package re-exports the names the rest of memory-tui uses, so callers import from
``format.topics``; a test that patches a name patches it in the room that looks it up.
"""

from .fast import HANDED, handed_links, parse_well_formed, take_handed
from .files import outside_link_problem, read_topic_file, read_topic_texts
from .grammar import (BLOCK_LINK_RE, CITATION_RE, DEFINITION_RE, HEADING_RE, MARKDOWN_LINK_RE, SOURCE_LINK_RE, Line,
                      Paragraph, ParagraphShape, RawDefinition, SuffixId, block_id, classify_lines, evidence_id,
                      heading_chain, is_ascii_when, is_mem_id, is_v2_source_id, is_valid_block_id, iter_blocks,
                      paragraph_shape, parse_when, read_definition, resolve_plain_target, resolve_source_target,
                      sha256hex, split_bare_sources, split_lines, topic_sort_key)
from .model import (INVALID_TOPIC_FORMAT, Annotation, Evidence, Heading, SourceLink, SourceResolver, Topic, Unit,
                    is_error, is_local_label)
from .parse import parse_topic, parse_topic_strict, raise_for_problems
from .tree import IdOverlay, TopicTree, assemble_tree, parse_tree, parse_tree_strict, reassemble_tree

__all__ = [
    "Annotation", "Evidence", "Heading", "IdOverlay", "Line", "Paragraph", "ParagraphShape", "SourceLink",
    "SourceResolver", "SuffixId", "Topic", "TopicTree", "Unit", "INVALID_TOPIC_FORMAT", "RawDefinition",
    "BLOCK_LINK_RE", "CITATION_RE", "DEFINITION_RE", "HEADING_RE", "MARKDOWN_LINK_RE", "SOURCE_LINK_RE", "HANDED",
    "assemble_tree", "block_id", "evidence_id", "classify_lines", "handed_links", "heading_chain", "iter_blocks",
    "is_ascii_when", "is_error", "is_local_label", "is_mem_id", "is_v2_source_id", "is_valid_block_id",
    "outside_link_problem", "paragraph_shape", "parse_topic", "parse_topic_strict", "parse_tree",
    "parse_well_formed", "parse_tree_strict", "parse_when", "reassemble_tree", "raise_for_problems",
    "read_definition", "read_topic_file", "read_topic_texts", "resolve_plain_target", "resolve_source_target",
    "sha256hex", "split_bare_sources", "split_lines", "take_handed", "topic_sort_key",
]
