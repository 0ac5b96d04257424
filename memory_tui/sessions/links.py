"""What ties a session to others, and what a compaction summary restates.

* **Cross-session spawns.** A sub-agent session's branch root (``metadata.spawn_branch_root``
  or ``source: agent_spawn``, no predecessor) names its spawning node in ``caller``; when that
  node is in another session, the two halves belong together. :class:`SpawnLinks` finds both
  directions over a snapshot, so each half can draw and name the other.
* **Compaction summaries.** A summary node (``metadata.covers_ids``) restates turns. While it
  hangs off the graph it is never memory; once the head's line runs through it, the next pass
  would hand it to the writer as an assistant turn that repeats turns memory may already hold.
  :func:`summary_facts` names the covered turns and whether each is written and kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .dag import walk_chain
from .kept import Citations, kept_states
from .records import MARK_KEY
from .reasons import Evidence, Reason, is_compaction_summary
from .store import Session, SessionSnapshot


@dataclass(frozen=True)
class SpawnLink:
    child_session: str
    child_node: str  # the branch root in the sub-agent's session
    parent_session: str
    parent_node: str  # the node that spawned it
    child_file: str

    def to_json(self) -> dict[str, Any]:
        return {"child_session": self.child_session, "child_node": self.child_node,
                "parent_session": self.parent_session, "parent_node": self.parent_node,
                "evidence": {"file": self.child_file, "field": "caller", "value": self.parent_node}}


_SPAWN_WORD = b"agent_spawn"


def is_sub_agent_session(session: Session) -> bool:
    """A session OpenProgram made for a sub-agent (``meta.json`` ``source: agent_spawn``): the
    only kind whose branch root may name a node of another session."""
    return session.meta.get("source") == "agent_spawn"


class SpawnLinks:
    """Every cross-session spawn among ``sessions``, by either half. The spawning node is
    found by its node file's name (``<seq>-<role>-<id>.json``) in the other sessions'
    ``history/`` folders, so the parent session need not be read: ``why SESSION`` reads the
    session, the sub-agent sessions (their ``meta.json`` says so) and nothing else."""

    def __init__(self, sessions: Mapping[str, Session], holders: Any = None) -> None:
        self.links: list[SpawnLink] = []
        roots = [(s, n) for s in sessions.values() if is_sub_agent_session(s) for n in s.nodes.values()
                 if n.is_spawn_root and not n.predecessor and n.caller not in ("", "ROOT") and n.caller not in s.nodes]
        if roots:
            if holders is None:
                owner: dict[str, list[str]] = {}
                for s in sessions.values():
                    for nid in s.nodes:
                        owner.setdefault(nid, []).append(s.id)

                def holders(nid: str) -> list[str]:
                    return owner.get(nid, [])
            for s, n in roots:
                for other in holders(n.caller):
                    if other != s.id:
                        self.links.append(SpawnLink(s.id, n.id, other, n.caller, n.file))
        self.by_session: dict[str, list[SpawnLink]] = {}
        for link in self.links:
            self.by_session.setdefault(link.child_session, []).append(link)
            if link.parent_session != link.child_session:
                self.by_session.setdefault(link.parent_session, []).append(link)

    @classmethod
    def of(cls, snapshot: SessionSnapshot) -> "SpawnLinks":
        return cls(snapshot.sessions)

    @classmethod
    def for_session(cls, state_dir: Any, sid: str, loaded: Mapping[str, Session] | None = None,
                    discovered: Any = None) -> "SpawnLinks":
        """The links of one session, reading only it and the sub-agent sessions (their
        ``meta.json`` first) plus the other sessions' ``history/`` listings: what
        ``why SESSION`` needs. Equal to the links of a full snapshot, for that session.
        ``loaded``: sessions the caller has already read (not read again); ``discovered``: the
        session folders its snapshot found (``SessionSnapshot.discovered``), else discovered here."""
        import json
        import os
        from pathlib import Path

        from .store import discover, load_sessions

        found = discovered if discovered else discover(Path(state_dir))[0]
        wanted = [sid]
        for other, sdir in found:
            if other == sid:
                continue
            try:
                with open(os.path.join(sdir, "meta.json"), "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            # Only a meta.json holding the words (or a JSON escape that could spell them) can
            # say ``source: agent_spawn``; most sessions are not sub-agents, and decoding each
            # one's meta.json (kilobytes of JSON) was most of this walk's cost.
            if _SPAWN_WORD not in data and b"\\" not in data:
                continue
            try:
                meta = json.loads(data.decode("utf-8"))
            except ValueError:
                continue
            if isinstance(meta, dict) and meta.get("source") == "agent_spawn":
                wanted.append(other)

        def holders(nid: str) -> list[str]:
            out = []
            suffix = f"-{nid}.json"
            for other, sdir in found:
                try:
                    names = os.listdir(sdir / "history")
                except OSError:
                    continue
                if any(n.endswith(suffix) and n.split("-", 2)[-1] == f"{nid}.json" for n in names):
                    out.append(other)
            return out

        have = dict(loaded or {})
        missing = [w for w in wanted if w not in have]
        if missing:
            have.update(load_sessions(Path(state_dir), only=missing).sessions)
        return cls({w: have[w] for w in wanted if w in have}, holders)

    def of_session(self, sid: str) -> tuple[SpawnLink, ...]:
        return tuple(self.by_session.get(sid, ()))

    def links_in(self, sid: str) -> tuple[tuple[str, str, str], ...]:
        """(local branch root, parent session, parent node) of the branches spawned from elsewhere."""
        return tuple((x.child_node, x.parent_session, x.parent_node) for x in self.of_session(sid) if x.child_session == sid)

    def links_out(self, sid: str) -> tuple[tuple[str, str, str], ...]:
        """(local spawning node, child session, child root) of the branches spawned from here."""
        return tuple((x.parent_node, x.child_session, x.child_node) for x in self.of_session(sid) if x.parent_session == sid)

    def reasons(self, sid: str) -> tuple[Reason, ...]:
        out = []
        for x in self.of_session(sid):
            if x.child_session == sid:
                msg = (f"branch root {x.child_node} was spawned from node {x.parent_node} of session {x.parent_session}: "
                       f"the sub-agent's work continues that conversation")
            else:
                msg = (f"node {x.parent_node} spawned a sub-agent branch in session {x.child_session} "
                       f"(its root {x.child_node}); that session's turns are written there")
            out.append(Reason("cross_session_spawn", (Evidence(x.child_file, "caller", x.parent_node),), msg))
        return tuple(out)


def summaries_on_head(session: Session) -> frozenset[str]:
    """The compaction summaries the head's line runs through."""
    if session.head_id is None or session.get(session.head_id) is None:
        return frozenset()
    if not any(n.covers_ids is not None for n in session.nodes.values()):
        return frozenset()
    return frozenset(n.id for n in walk_chain(session, session.head_id).nodes if is_compaction_summary(n))


@dataclass(frozen=True)
class SummaryFacts:
    node_id: str
    file: str
    on_head_line: bool
    uncommitted: bool  # meta's _last_summary_id names it, but the head's line does not run through it
    covers: tuple[tuple[str, str], ...]  # (turn id, its state: kept | dropped | unmarked_kept | unwritten | missing)
    meta_file: str = ""
    head_id: str | None = None

    def evidence(self) -> list[tuple[str, str, Any]]:
        out: list[tuple[str, str, Any]] = [(self.file, "metadata.covers_ids", [i for i, _ in self.covers])]
        if self.on_head_line:
            out.append((self.meta_file, "head_id", self.head_id))
        elif self.uncommitted:
            out.append((self.meta_file, "_last_summary_id", self.node_id))
        return out

    @property
    def written(self) -> int:
        return sum(1 for _, st in self.covers if st in ("kept", "dropped"))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.node_id, "on_head_line": self.on_head_line, "uncommitted": self.uncommitted,
                "covers": [{"id": i, "state": st} for i, st in self.covers],
                "evidence": [{"file": f, "field": k, "value": v} for f, k, v in self.evidence()]}

    def message(self) -> str:
        n = len(self.covers)
        states = ", ".join(f"{i} {st.replace('_', ' ')}" for i, st in self.covers)
        if self.on_head_line:
            head = (f"on the head's line: the next pass offers it as an unwritten assistant turn restating {n} turn(s), "
                    f"{self.written} of them already written")
        elif self.uncommitted:
            head = f"uncommitted (meta.json _last_summary_id), off the head's line: it restates {n} turn(s)"
        else:
            head = f"off the head's line: it restates {n} turn(s)"
        return f"{head} ({states})"


def summary_facts(session: Session, citations: Citations, workspace_id: str) -> tuple[SummaryFacts, ...]:
    on_head = summaries_on_head(session)
    kept = None
    out = []
    for nid in session.order:
        node = session.nodes[nid]
        covers = node.covers_ids
        if covers is None:
            continue
        if kept is None:
            kept = kept_states(session, citations, workspace_id)
        states = []
        for c in covers:
            if not isinstance(c, str):
                continue
            other = session.get(c)
            if other is None:
                st = "missing"
            else:
                st = kept.get(c) or ("unwritten" if other.metadata.get(MARK_KEY) != workspace_id else "kept")
            states.append((c, st))
        last = session.meta.get("_last_summary_id")
        out.append(SummaryFacts(nid, node.file, nid in on_head, last == nid and nid not in on_head, tuple(states),
                                session.meta_file, session.head_id))
    return tuple(out)


def summary_reason(facts: SummaryFacts, session: Session) -> Reason:
    ev = [Evidence(f, k, v) for f, k, v in facts.evidence()]
    code = "summary_on_head_line" if facts.on_head_line else "compaction_summary"
    return Reason(code, tuple(ev), facts.message())


def session_decorations(session: Session, citations: Citations, workspace_id: str, links: SpawnLinks) -> Any:
    """What the graph draws beyond the session's files (``graph.Decorations``): the one
    recipe the Sessions view and ``why --graph`` share."""
    from .graph import Decorations

    return Decorations(kept=kept_states(session, citations, workspace_id), links_in=links.links_in(session.id),
                       links_out=links.links_out(session.id), summaries_on_head=summaries_on_head(session))
