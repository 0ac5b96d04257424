"""Record Markdown → Rich ``Text``, built on markdown-it-py + the footnote plugin.

Textual's ``Markdown`` widget does not know footnote tokens, so records are rendered here:
footnote references (named ``[^e-…]`` or inline ``^[…]``) become numbered ``[1]`` markers with
an end list, trailing block ids (``^a058e34e``) are hidden, headings stay structure and links
stay readable (label, plus a short hint where the link goes). Pure functions, no widgets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Iterable

from rich.text import Text

from memory_tui.core.format.text import sanitize

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

_BLOCK_ID_TAIL = re.compile(r"(?:[ \t]+\^[A-Za-z0-9-]+)+[ \t]*$", re.M)
_EVIDENCE_TIME = re.compile(r"^\s*Time:\s*`?([^`;]*)`?\s*;\s*Sources:\s*", re.S)


@dataclass(frozen=True)
class Glyphs:
    bullet: str
    arrow: str
    chip: str
    ok: str
    bad: str
    folder: str
    rule: str
    ellipsis: str
    back: str
    pending: str  # a Core block skipped because it cites a pending (unconfirmed) source
    dot: str = "·"  # separates the fields of a meta line


UNICODE = Glyphs("•", "→", "◆", "✓", "✗", "▸", "─", "…", "←", "○")
ASCII = Glyphs("*", "->", "*", "+", "x", ">", "-", "...", "<-", "~", "-")


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # imported on the first render: the Topics list paints before any record is shown
    from markdown_it import MarkdownIt
    from mdit_py_plugins.footnote import footnote_plugin

    return MarkdownIt("commonmark", {"html": True}).use(footnote_plugin).enable("table")


def strip_block_ids(markdown: str) -> str:
    """Hide trailing ``^id`` block ids (they are identity, not content)."""
    return _BLOCK_ID_TAIL.sub("", markdown)


def _link_hint(href: str) -> str:
    """A short, readable destination for a link."""
    if href.startswith(("http://", "https://", "mailto:")):
        return href
    from urllib.parse import unquote

    path, _, frag = unquote(href).partition("#")
    name = path.rsplit("/", 1)[-1].removesuffix(".md") if path else ""
    if frag.startswith("^"):
        return f"{name}#{frag[1:]}" if name else frag[1:]
    if "/sources/" in "/" + path or path.startswith("sources/") or frag.startswith("source-"):
        return "source"
    return name or frag


class _Renderer:
    def __init__(self, glyphs: Glyphs, width_hint: int | None = None) -> None:
        self.g = glyphs
        self.out = Text()
        self.footnotes: dict[int, Text] = {}
        self.styles: list[str] = []
        self.links: list[str] = []
        self.list_stack: list[list[int | None]] = []  # [start or None for bullets]
        self.quote = 0
        self.pending_prefix = ""

    # -- inline ------------------------------------------------------------------------
    def inline(self, tokens: Iterable[Token], into: Text) -> None:
        for tok in tokens:
            t = tok.type
            if t == "text":
                into.append(sanitize(tok.content), self._style())
            elif t == "softbreak":
                into.append(" ")
            elif t == "hardbreak":
                into.append("\n")
            elif t == "code_inline":
                into.append(sanitize(tok.content), "bold")
            elif t in ("strong_open", "em_open", "s_open"):
                self.styles.append({"strong_open": "bold", "em_open": "italic", "s_open": "strike"}[t])
            elif t in ("strong_close", "em_close", "s_close"):
                if self.styles:
                    self.styles.pop()
            elif t == "link_open":
                href = str(tok.attrs.get("href", ""))
                self.links.append(href)
                self.styles.append("underline")
            elif t == "link_close":
                if self.styles:
                    self.styles.pop()
                href = self.links.pop() if self.links else ""
                hint = _link_hint(href)
                if hint and hint != "source":
                    into.append(f" ({self.g.arrow}{hint})", "dim")
            elif t == "image":
                into.append(f"[image: {sanitize(tok.content)}]", "dim")
            elif t == "footnote_ref":
                n = int(tok.meta.get("id", 0)) + 1
                into.append(f"[{n}]", "bold")
            elif t in ("html_inline",):
                continue
            else:
                if tok.children:
                    self.inline(tok.children, into)
                elif tok.content:
                    into.append(sanitize(tok.content), self._style())

    def _style(self) -> str:
        return " ".join(self.styles)

    # -- blocks ------------------------------------------------------------------------
    def newline_block(self) -> None:
        if self.out.plain and not self.out.plain.endswith("\n\n"):
            self.out.append("\n" if self.out.plain.endswith("\n") else "\n\n")

    def prefix(self) -> str:
        pre = "  " * max(0, len(self.list_stack) - 1)
        pre = ("> " * self.quote) + pre
        return pre

    def render(self, tokens: list[Token]) -> Text:
        i = 0
        in_footnote: int | None = None
        footnote_text = Text()
        while i < len(tokens):
            tok = tokens[i]
            t = tok.type
            if t == "footnote_block_open" or t == "footnote_block_close":
                pass
            elif t == "footnote_open":
                in_footnote = int(tok.meta.get("id", 0)) + 1
                footnote_text = Text()
            elif t == "footnote_close":
                if in_footnote is not None:
                    self.footnotes[in_footnote] = footnote_text
                in_footnote = None
            elif t == "footnote_anchor":
                pass
            elif in_footnote is not None:
                if t == "inline":
                    if footnote_text.plain:
                        footnote_text.append(" ")
                    self.inline(tok.children or [], footnote_text)
            elif t == "heading_open":
                self.newline_block()
                level = int(tok.tag[1:])
                inline = tokens[i + 1]
                line = Text()
                self.inline(inline.children or [], line)
                line.stylize("bold underline" if level == 1 else "bold")
                self.out.append_text(line)
                self.out.append("\n")
                i += 2
            elif t == "paragraph_open":
                if not (self.list_stack and tok.hidden):
                    self.newline_block() if not self.list_stack else None
            elif t == "inline":
                line = Text(self.pending_prefix or self.prefix())
                self.pending_prefix = ""
                self.inline(tok.children or [], line)
                self.out.append_text(line)
            elif t == "paragraph_close":
                self.out.append("\n")
            elif t in ("bullet_list_open", "ordered_list_open"):
                if not self.list_stack:
                    self.newline_block()
                start = int(tok.attrs.get("start", 1)) if t == "ordered_list_open" else None
                self.list_stack.append([start])
            elif t in ("bullet_list_close", "ordered_list_close"):
                self.list_stack.pop()
            elif t == "list_item_open":
                cur = self.list_stack[-1]
                indent = "  " * (len(self.list_stack) - 1)
                if cur[0] is None:
                    self.pending_prefix = ("> " * self.quote) + indent + self.g.bullet + " "
                else:
                    self.pending_prefix = ("> " * self.quote) + indent + f"{cur[0]}. "
                    cur[0] = int(cur[0]) + 1
            elif t == "blockquote_open":
                self.newline_block()
                self.quote += 1
            elif t == "blockquote_close":
                self.quote -= 1
            elif t in ("fence", "code_block"):
                self.newline_block()
                for ln in sanitize(tok.content).rstrip("\n").split("\n"):
                    self.out.append("  " + ln + "\n", "dim")
            elif t == "hr":
                self.newline_block()
                self.out.append(self.g.rule * 20 + "\n", "dim")
            elif t == "html_block":
                pass  # comments and anchors are structure, not content
            elif t == "table_open":
                # Tables are rare in records; show their cells as rows of text.
                self.newline_block()
                j = i + 1
                while j < len(tokens) and tokens[j].type != "table_close":
                    if tokens[j].type == "tr_open":
                        cells: list[str] = []
                    elif tokens[j].type == "inline":
                        cell = Text()
                        self.inline(tokens[j].children or [], cell)
                        cells.append(cell.plain)
                    elif tokens[j].type == "tr_close":
                        self.out.append(" | ".join(cells) + "\n")
                    j += 1
                i = j
            i += 1
        result = self.out
        result.rstrip()
        return result


def footnote_list(footnotes: dict[int, Text]) -> Text:
    out = Text()
    for n in sorted(footnotes):
        body = footnotes[n].copy()
        m = _EVIDENCE_TIME.match(body.plain)
        line = Text(f"[{n}] ", "bold")
        if m:
            when = m.group(1).strip() or "undated"
            line.append(when, "italic")
            line.append(" · ")
            line.append_text(body[m.end():])
        else:
            line.append_text(body)
        if out.plain:
            out.append("\n")
        out.append_text(line)
    return out


def render_markdown(markdown: str, *, glyphs: Glyphs = UNICODE, footnotes: bool = True) -> Text:
    """Render record or topic Markdown. Footnote definitions become an end list."""
    text = strip_block_ids(sanitize(markdown))
    renderer = _Renderer(glyphs)
    body = renderer.render(_parser().parse(text))
    if footnotes and renderer.footnotes:
        body.append("\n\n")
        body.append_text(footnote_list(renderer.footnotes))
    return body


def record_markdown(body: str, evidence: Iterable[tuple[str, str | None, Iterable[tuple[str, str]]]]) -> str:
    """Rebuild a record paragraph with its footnote definitions, for ``render_markdown``."""
    lines = [body]
    for fid, when, links in evidence:
        srcs = ", ".join(f"[{label}]({target})" for label, target in links)
        lines.append(f"[^{fid}]: Time: `{when or 'undated'}`; Sources: {srcs}")
    return "\n\n".join(lines)


def glyphs_for(ascii_mode: bool) -> Glyphs:
    return ASCII if ascii_mode else UNICODE
