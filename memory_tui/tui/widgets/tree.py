"""A Tree whose glyphs follow ASCII mode and whose cursor can be put on a node by value."""

from __future__ import annotations

from typing import Any, Iterator

from textual.widgets import Tree
from textual.widgets.tree import TreeNode

ASCII_TREE_LINES = {
    "default": ("  ", "| ", "`-", "|-"),
    "bold": ("  ", "| ", "`-", "|-"),
    "double": ("  ", "| ", "`-", "|-"),
}


def walk(node: TreeNode[Any]) -> Iterator[TreeNode[Any]]:
    for child in node.children:
        yield child
        yield from walk(child)


class MemoryTree(Tree[Any]):
    def set_ascii(self, on: bool) -> None:
        if on:
            self.LINES = ASCII_TREE_LINES  # type: ignore[misc]
            self.ICON_NODE = "> "  # type: ignore[misc]
            self.ICON_NODE_EXPANDED = "v "  # type: ignore[misc]
        else:
            for name in ("LINES", "ICON_NODE", "ICON_NODE_EXPANDED"):
                self.__dict__.pop(name, None)
        self.refresh()

    def visible_nodes(self) -> Iterator[TreeNode[Any]]:
        """The nodes in the order the tree draws them (collapsed folders hide their children)."""

        def visit(node: TreeNode[Any]) -> Iterator[TreeNode[Any]]:
            for child in node.children:
                yield child
                if child.is_expanded:
                    yield from visit(child)

        if self.show_root:
            yield self.root
            if self.root.is_expanded:
                yield from visit(self.root)
        else:
            yield from visit(self.root)

    def put_cursor(self, node: TreeNode[Any] | None) -> None:
        """Move the cursor to ``node`` right after (re)building the tree.

        ``move_cursor`` needs the node's line, which the tree only knows once it has drawn;
        the line is the node's place among the visible nodes, so it is computed here.
        """
        if node is None:
            return
        for line, candidate in enumerate(self.visible_nodes()):
            if candidate is node:
                self.cursor_line = line
                return
