"""DAG semantics over a parsed :class:`Session` (session spec §2.4, §3.4, §3.5, §4.7).

Pure functions: the branch walk, live tips (``list_branches``), the trunk tip, the order a
forced (session-boundary) pass visits tips, and the projection of nodes to message dicts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from .store import ROOT_ID, Node, Session, thaw

CONVERSATIONAL_ROLES = ("user", "llm")


@dataclass(frozen=True)
class Branch:
    """One ``list_branches`` row (session spec §3.5)."""

    head_msg_id: str
    name: Any
    created_at: Any
    updated_at: Any
    archived: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "head_msg_id": self.head_msg_id,
            "name": self.name,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "archived": self.archived,
        }


@dataclass(frozen=True)
class Chain:
    """The raw predecessor walk from a head, root→head, before filtering.

    ``broken`` names the node where the walk ended on a predecessor-less node that is not a
    legal terminus (OpenProgram raises ``BrokenPredecessorChainError`` there; we stop).
    ``dangling`` names a node whose predecessor id is unknown; ``cycle`` one that repeats.
    """

    nodes: tuple[Node, ...]
    broken: str | None = None
    dangling: str | None = None
    cycle: str | None = None


# --------------------------------------------------------------------------- walk


def is_first_root_level(session: Session, node: Node) -> bool:
    for other in session.order:
        cand = session.nodes[other]
        if cand.seq >= node.seq:
            break
        if cand.role in CONVERSATIONAL_ROLES and cand.root_level and not cand.is_root and cand.id != ROOT_ID:
            return False
    return True


def legal_terminus(session: Session, node: Node) -> bool:
    """§3.4 step 3: may this node end the walk without a predecessor?"""
    if node.is_spawn_root or node.is_root or node.role not in CONVERSATIONAL_ROLES:
        return True
    if node.covers_ids is not None:
        return True
    return node.root_level and is_first_root_level(session, node)


Walked = dict[str, tuple[tuple[Node, ...], int, "str | None", "str | None"]]


def walk_chain(session: Session, head: str | None = None, known: Walked | None = None) -> Chain:
    """§3.4 steps 1-3: the predecessor walk from ``head`` (the session's head by default).

    ``known`` (only for a session without predecessor cycles, see :func:`acyclic`): the walks
    of earlier heads, node id -> (walk, the node's index in it, broken, dangling); a walk that
    reaches a node walked before takes that walk's root side and end instead of walking it
    again (branches share their prefix with the trunk), and records its own nodes there.
    """
    node = session.get(head if head is not None else session.head_id)
    if node is None:
        return Chain(())
    fresh: list[Node] = []
    seen: set[str] = set()
    prefix: tuple[Node, ...] = ()
    broken = dangling = cycle = None
    while True:
        hit = known.get(node.id) if known is not None else None
        if hit is not None and hit[0][hit[1]] is node:
            walked, at, broken, dangling = hit
            prefix = walked[: at + 1]
            break
        fresh.append(node)
        seen.add(node.id)
        pred = node.predecessor
        if not pred:
            if not legal_terminus(session, node):
                broken = node.id
            break
        nxt = session.get(pred)
        if nxt is None:
            dangling = node.id
            break
        if nxt.id in seen:
            cycle = node.id
            break
        node = nxt
    fresh.reverse()
    nodes = prefix + tuple(fresh)
    if known is not None:
        for i in range(len(prefix), len(nodes)):
            known[nodes[i].id] = (nodes, i, broken, dangling)
    return Chain(nodes, broken, dangling, cycle)


def acyclic(session: Session) -> bool:
    """No predecessor cycle anywhere in the session (each node has at most one predecessor)."""
    state: dict[str, bool] = {}  # False: on the path being followed, True: known to end
    for nid in session.nodes:
        path: list[str] = []
        cur: str | None = nid
        while cur is not None and cur not in state:
            state[cur] = False
            path.append(cur)
            node = session.get(cur)
            nxt = node.predecessor if node is not None else None
            cur = nxt if nxt and session.get(nxt) is not None else None
        if cur is not None and state[cur] is False:
            return False
        for p in path:
            state[p] = True
    return True


def get_branch(session: Session, head: str | None = None) -> tuple[Node, ...]:
    """§3.4: walk, reverse, drop ``display:"root"`` and rewound nodes."""
    return tuple(n for n in walk_chain(session, head).nodes if not n.is_root and not n.rewound)


# --------------------------------------------------------------------------- tips


def children_map(session: Session) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for nid in session.order:
        pred = session.nodes[nid].predecessor
        if pred:
            children.setdefault(pred, []).append(nid)
    return children


def is_subcall(session: Session, node: Node) -> bool:
    """A sub-call internal: a code node with a real caller, or anything a local code node called."""
    if node.caller not in ("", ROOT_ID) and node.role == "code":
        return True
    caller = session.get(node.caller) if node.caller not in ("", ROOT_ID) else None
    return caller is not None and caller.role == "code"


def is_conversational_child(session: Session, node: Node) -> bool:
    return (
        node.role in CONVERSATIONAL_ROLES
        and node.display not in ("root", "runtime")
        and not node.is_attach
        and not node.is_context
        and not is_subcall(session, node)
    )


def tip_exclusion(session: Session, node: Node, children: Mapping[str, list[str]]) -> str | None:
    """Why a node is not a live tip candidate (None when it is one)."""
    if is_subcall(session, node):
        return "subcall"
    if node.is_root:
        return "root"
    if node.is_context:
        return "context"
    if node.is_attach:
        return "attach"
    for child in children.get(node.id, ()):
        if is_conversational_child(session, session.nodes[child]):
            return "has_child"
    if session.unreadable and node.id in session.unreadable_predecessors:
        return "unreadable_child"  # its child's file exists but does not parse: not the end of a branch
    if node.id in session.merged_heads:
        return "merged_head"
    if node.id in session.commit_parent_heads:
        return "merged_commit_parent"
    return None


def trunk_tip(session: Session, children: Mapping[str, list[str]] | None = None) -> str | None:
    """§3.5: from the earliest-created ROOT-level start node follow the first child to the end."""
    children = children_map(session) if children is None else children
    starts = [
        n
        for n in (session.nodes[i] for i in session.order)
        if n.root_level and n.predecessor in (None, "", ROOT_ID) and n.id != ROOT_ID and not n.is_root and not n.is_spawn_root
    ]
    if not starts:
        return None
    node = min(starts, key=lambda n: (n.created_at, n.seq))
    seen = {node.id}
    while True:
        kids = children.get(node.id)
        if not kids or kids[0] in seen:
            return node.id
        node = session.nodes[kids[0]]
        seen.add(node.id)


def branch_row(session: Session, tip: str) -> Branch:
    entry = session.branches_meta.get(tip)
    if isinstance(entry, Mapping):
        return Branch(tip, entry.get("name"), entry.get("created_at"), entry.get("updated_at"), bool(entry.get("archived", False)))
    node = session.get(tip)
    created = node.created_at if node is not None else None
    return Branch(tip, None, created, created, False)


def _sort_key(row: Branch) -> float:
    value = row.updated_at
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value)


def list_branches(session: Session) -> tuple[Branch, ...]:
    """§3.5: live tips, newest ``updated_at`` first (null counts as 0)."""
    children = children_map(session)
    tips = [nid for nid in session.order if tip_exclusion(session, session.nodes[nid], children) is None]
    trunk = trunk_tip(session, children)
    if trunk is not None and trunk not in tips:
        tips.append(trunk)
    tips = [t for t in tips if not t.startswith("summary_")]
    rows = [branch_row(session, t) for t in tips]
    rows.sort(key=_sort_key, reverse=True)
    return tuple(rows)


def forced_pass_branch_order(session: Session, rows: tuple[Branch, ...] | None = None) -> tuple[str, ...]:
    """§4.7: the current head first, then every non-archived listed tip, in list order."""
    rows = list_branches(session) if rows is None else rows
    order: list[str] = []
    if session.head_id:
        order.append(session.head_id)
    for row in rows:
        if not row.archived and row.head_msg_id not in order:
            order.append(row.head_msg_id)
    return tuple(order)


def tips_of(session: Session, rows: tuple[Branch, ...] | None = None) -> tuple[str, ...]:
    """Every tip worth explaining: the listed tips, then the head if it is not listed."""
    rows = list_branches(session) if rows is None else rows
    out = [r.head_msg_id for r in rows]
    if session.head_id and session.head_id not in out and session.get(session.head_id) is not None:
        out.append(session.head_id)
    return tuple(out)


# --------------------------------------------------------------------------- projection


def to_message(session: Session, node: Node) -> dict[str, Any]:
    """§2.4: the message dict OpenProgram's ``get_branch`` returns for a node."""
    meta = {k: v for k, v in thaw(node.metadata).items() if k != "predecessor"}
    output = thaw(node.output)
    msg: dict[str, Any] = {
        "id": node.id,
        "session_id": session.id,
        "role": "user",
        "content": output or "",
        "predecessor": node.predecessor or "",
        "caller": node.caller,
        "timestamp": node.created_at,
    }
    if node.role == "llm":
        msg["role"] = "assistant"
        msg["token_model"] = node.name
        msg.update(meta)
        msg["role"] = meta.get("role") if isinstance(meta.get("role"), str) and meta.get("role") else "assistant"
        msg["caller"] = node.caller
    elif node.role == "code":
        msg["role"] = "tool"
        msg["function"] = node.name
        if not isinstance(output, str):
            msg["content"] = json.dumps(output, ensure_ascii=False, default=str)
        msg["extra"] = json.dumps(
            {
                "tool_use": {
                    "name": node.name,
                    "arguments": thaw(node.input),
                    "caller": node.caller,
                    "tool_call_id": meta.get("tool_call_id"),
                }
            },
            ensure_ascii=False,
            default=str,
        )
        msg.update(meta)
        msg["role"] = "tool"
    else:
        msg.update(meta)
        msg["role"] = "user" if node.role == "user" else node.role
    msg.setdefault("status", "done")
    return msg


# The keys ``to_message`` sets itself; any other key of a message comes from the metadata.
_BASE_KEYS = frozenset({"id", "session_id", "role", "content", "predecessor", "caller", "timestamp", "token_model",
                        "function", "extra", "status"})
_ABSENT = object()


class MessageView:
    """``to_message(session, node)`` read one key at a time: ``view.get(k, d)`` equals
    ``to_message(session, node).get(k, d)``. Deciding whether a node is a record reads a dozen
    keys; building the whole message thaws every metadata value and, for a tool row, dumps its
    output and arguments as JSON, on every node of a session each time it is opened."""

    __slots__ = ("session", "node", "_full")

    def __init__(self, session: Session, node: Node) -> None:
        self.session = session
        self.node = node
        self._full: dict[str, Any] | None = None

    def get(self, key: str, default: Any = None) -> Any:
        node = self.node
        meta = node.metadata
        if key not in _BASE_KEYS:
            value = meta.get(key, _ABSENT)
            return default if value is _ABSENT else thaw(value)
        if key == "role":  # set after the metadata is merged in, as to_message does
            if node.role == "llm":
                role = meta.get("role")
                return role if isinstance(role, str) and role else "assistant"
            return "tool" if node.role == "code" else node.role
        if key == "caller" and node.role == "llm":
            return node.caller
        if key != "predecessor" and key in meta:
            return thaw(meta[key])
        if key == "id":
            return node.id
        if key == "timestamp":
            return node.created_at
        if key == "content" and node.role != "code":
            return thaw(node.output) or ""
        if self._full is None:
            self._full = to_message(self.session, node)
        return self._full.get(key, default)
