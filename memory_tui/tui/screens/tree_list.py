"""What the two tree views (Topics, Timeline) share: a tree on the left that is rebuilt on
every draw and keeps the owner's place — the node under the cursor and which nodes are open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.widgets.tree import TreeNode

from ..widgets import MemoryTree
from ..widgets.tree import walk


@dataclass(frozen=True)
class TreeState:
    """The place in a tree before it was cleared: ``cursor`` is the data of the node under
    the cursor; ``expanded`` the data of the open nodes (``None``: first build, all open)."""

    cursor: Any
    expanded: frozenset[Any] | None

    def is_open(self, data: Any) -> bool:
        return self.expanded is None or data in self.expanded


class TreeList:
    """Mixin for a view screen whose list is a ``MemoryTree`` with id ``<view>-list``."""

    TREE_TITLE: ClassVar[str] = ""

    def compose_list(self) -> ComposeResult:
        tree = MemoryTree(self.TREE_TITLE, id=f"{self.VIEW}-list", classes="view-list")
        tree.show_root = False
        tree.guide_depth = 2
        yield tree

    @property
    def tree(self) -> MemoryTree:
        return self.query_one(f"#{self.VIEW}-list", MemoryTree)

    def restart_tree(self) -> TreeState:
        """Clear the tree for a rebuild (glyphs as the app's ASCII mode says); the returned
        state tells the rebuild which nodes to open and where the cursor goes."""
        tree = self.tree
        tree.set_ascii(self.shell.ascii_mode)
        cursor = tree.cursor_node.data if tree.cursor_node is not None else None
        expanded = frozenset(n.data for n in walk(tree.root) if n.is_expanded and n.data) if tree.root.children else None
        tree.clear()
        return TreeState(cursor, expanded)

    def land_cursor(self, state: TreeState, fallback: TreeNode[Any] | None) -> None:
        """Put the cursor back on the node it was on, else on ``fallback``."""
        target = next((n for n in walk(self.tree.root) if state.cursor is not None and n.data == state.cursor), None)
        self.tree.put_cursor(target or fallback)
