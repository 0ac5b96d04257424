"""Two synthetic workspace states A and B (each a valid OpenProgram workspace) for install tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from memory_tui.core.format.topics import parse_tree_strict
from memory_tui.core.store.workspace import workspace_revision


def record(title: str, body: str, bid: str, eid: str, ref: str, when: str = "2026-11") -> str:
    return (
        f"# {title}\n\n{body}[^{eid}] ^{bid}\n\n"
        f"[^{eid}]: Time: `{when}`; Sources: [note]({ref})\n"
    )


STATE_A = {
    "topics/core.md": record("Core", "The owner drinks tea.", "aaaa0001", "e-000000000a", "openprogram/s1/m1"),
    "topics/people/ada.md": record("Ada", "Ada likes trains.", "aaaa0002", "e-000000000b", "openprogram/s1/m2"),
    "topics/projects/old.md": record("Old", "An old plan.", "aaaa0003", "e-000000000c", "openprogram/s1/m3"),
    "sources/openprogram/_v2/s1.md": "<!-- openprogram-source-archive:v2 -->\n\nframe-a\n",
    "timeline/2026/11.md": "# 2026-11\n\nA row\n",
    "recent_events.jsonl": '{"memory_id": "aaaa0001"}\n',
    "relations.json": '{"backlinks": {}, "outbound": {}}\n',
    "commitments.jsonl": "legacy\n",
    "core.md": "The owner drinks tea.\n",
    ".scriptorium/runtime.json": '{\n  "creation_order": {},\n  "cursors": {"s": 1}\n}\n',
}

STATE_B = {
    "topics/core.md": record("Core", "The owner drinks green tea.", "aaaa0001", "e-000000000a", "openprogram/s1/m1"),
    "topics/people/ada.md": STATE_A["topics/people/ada.md"],
    "topics/projects/new/plan.md": record("Plan", "A new plan.", "bbbb0004", "e-000000000d", "openprogram/s2/m1"),
    "sources/openprogram/_v2/s1.md": STATE_A["sources/openprogram/_v2/s1.md"] + "\nframe-b\n",
    "sources/openprogram/_v2/s2.md": "<!-- openprogram-source-archive:v2 -->\n\nframe-c\n",
    "timeline/2026/11.md": "# 2026-11\n\nA row\n\nB row\n",
    "timeline/2026/12.md": "# 2026-12\n\nC row\n",
    "recent_events.jsonl": '{"memory_id": "aaaa0001"}\n{"memory_id": "bbbb0004"}\n',
    "commitments.jsonl": "legacy\n",
    "core.md": "The owner drinks green tea.\n",
    ".scriptorium/runtime.json": '{\n  "creation_order": {"bbbb0004": 0},\n  "cursors": {"s": 1}\n}\n',
}

# Internal files that exist in every state and must never be touched by an install.
INTERNAL = {
    ".scriptorium/workspace-id": "w-0123abcd\n",
    ".scriptorium/write.lock": "",
    ".scriptorium/agent-history.jsonl": "{}\n",
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def make_workspace(root: Path, state: dict[str, str]) -> Path:
    write_tree(root, {**state, **INTERNAL})
    return root


def make_stage(root: Path, state: dict[str, str]) -> Path:
    return write_tree(root, state)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every regular file outside .git, as bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = Path(dirpath) / name
            out[full.relative_to(root).as_posix()] = full.read_bytes()
    return out


def revisions(tmp: Path, state_a: dict[str, str] = STATE_A, state_b: dict[str, str] = STATE_B) -> tuple[str, str]:
    a = make_workspace(tmp / "rev-a", state_a)
    b = make_workspace(tmp / "rev-b", state_b)
    ra, rb = workspace_revision(a), workspace_revision(b)
    shutil.rmtree(a)
    shutil.rmtree(b)
    return ra, rb


def assert_valid(root: Path) -> None:
    parse_tree_strict(root / "topics")
