"""Two records from sibling branches of one session, side by side, with the fork point and
which side the session's current head is on."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from ..model.insights import AlternativePairVM, AlternativeSideVM


def side_text(side: AlternativeSideVM, label: str, *, ascii: bool = False) -> Text:
    text = Text()
    text.append(f"{label}  ^{side.memory_id}", "bold")
    if side.on_head:
        text.append("  <- head" if ascii else "  \u2190 head", "bold green")
    text.append(f"\n{side.topic_path}\n", "dim")
    text.append(f"branch via {side.node_id}\n\n", "dim")
    text.append(side.content)
    return text


def fork_text(pair: AlternativePairVM, *, ascii: bool = False) -> Text:
    arrow = "->" if ascii else "\u2192"
    text = Text()
    text.append("alternatives", "bold")
    text.append(f"  session {pair.session_id}  fork at {pair.fork_point} {arrow} A | B")
    where = {"a": "on A", "b": "on B", None: "on neither branch"}[pair.head_side]
    text.append(f"  head {pair.head_id or '(none)'} is {where}")
    return text


class AlternativesPair(Vertical):
    DEFAULT_CSS = """
    AlternativesPair { height: auto; border: round $accent; padding: 0 1; }
    AlternativesPair > Horizontal { height: auto; }
    AlternativesPair .alt-side { width: 1fr; padding: 0 1; }
    AlternativesPair .alt-side.on-head { border-left: thick $success; }
    AlternativesPair .alt-side.off-head { border-left: thick $panel; }
    """

    def __init__(self, pair: AlternativePairVM, *, ascii: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pair = pair
        self.ascii = ascii

    def compose(self) -> ComposeResult:
        yield Static(fork_text(self.pair, ascii=self.ascii), id="alt-fork")
        with Horizontal():
            for name, side in (("A", self.pair.a), ("B", self.pair.b)):
                yield Static(side_text(side, name, ascii=self.ascii), id=f"alt-{name.lower()}",
                             classes="alt-side " + ("on-head" if side.on_head else "off-head"))

    def set_pair(self, pair: AlternativePairVM) -> None:
        self.pair = pair
        self.query_one("#alt-fork", Static).update(fork_text(pair, ascii=self.ascii))
        for name, side in (("A", pair.a), ("B", pair.b)):
            widget = self.query_one(f"#alt-{name.lower()}", Static)
            widget.update(side_text(side, name, ascii=self.ascii))
            widget.set_class(side.on_head, "on-head")
            widget.set_class(not side.on_head, "off-head")
