"""Small crafted state directories for the insights tests: sessions with forks, their v2
source archives (owner and agent turns, trusted or pending), and topic files citing them."""

from __future__ import annotations

from pathlib import Path

from memory_tui.core.format.sources import SourceRecord, archive_path, render_archive, render_frame
from test_sessions_helpers import OWNER, make_session, node

AGENT = {"speaker_kind": "runtime", "speaker_id": "agent/main", "speaker_display": "agent/main",
         "principal_id": "owner/install/0123456789abcdef", "authority_tier": "owner"}


def user(nid: str, seq: int, pred: str | None, text: str = "question", t: float | None = None) -> dict:
    return node(nid, seq, "user", text, pred=pred, caller="ROOT", created_at=t, **OWNER, source="web")


def reply(nid: str, seq: int, pred: str, text: str = "answer", t: float | None = None) -> dict:
    return node(nid, seq, "llm", text, pred=pred, created_at=t, **OWNER, source="web")


def archive(state: Path, sid: str, turns: list[tuple[str, str, str, str]], *, pending: tuple[str, ...] = ()) -> None:
    """``turns`` = (node id, "owner" | "agent", text, ISO timestamp) of session ``sid``."""
    frames = []
    for i, (nid, who, text, ts) in enumerate(turns, 1):
        who_meta = OWNER if who == "owner" else AGENT
        frames.append(render_frame(SourceRecord(
            provider="openprogram", thread_id=sid, message_id=nid, ordinal=i,
            role="user" if who == "owner" else "assistant", content=text, timestamp=ts,
            speaker_id=who_meta["speaker_id"], speaker_display=who_meta["speaker_display"],
            speaker_kind="human" if nid in pending else who_meta["speaker_kind"],
            principal_id="unknown" if nid in pending else who_meta["principal_id"],
            authority_tier=None if nid in pending else "owner",
            trust_state="pending" if nid in pending else "trusted",
        )))
    path = state / "memory" / archive_path(f"openprogram/{sid}/x")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_archive(frames), encoding="utf-8")


def record(text: str, block: str, eid: str, when: str, refs: list[str]) -> str:
    links = ", ".join(f"[{r.rsplit('/', 1)[-1]}]({r})" for r in refs)
    return f"{text}[^{eid}] ^{block}\n\n[^{eid}]: Time: `{when}`; Sources: {links}\n"


def topic(state: Path, rel: str, title: str, records: list[str]) -> Path:
    path = state / "memory" / "topics" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n" + "\n".join(records), encoding="utf-8")
    return path


def forked_world(state: Path, *, lost: bool = True) -> Path:
    """Session ``s1``: u1 → u1_reply, then a retry fork at u1_reply: u2 (Flask) and u3
    (FastAPI), head on u3's reply. Session ``s2`` on another day. Records:

    * ``rep00001`` cites u1 three times (one episode, one day, one line);
    * ``multi001`` cites s1/u1 (2026-11-01) and s2/v1 (2026-11-03);
    * ``asst0001`` cites only agent replies;
    * ``flask001`` cites u2, ``fast0001`` cites u3 (alternatives, fork at u1_reply);
    * ``both0001`` cites u2, u3 and their ancestor u1 (two lines, two days);
    * ``lost0001`` cites a node that was never archived (left out with ``lost=False``, which
      makes the workspace one the transaction accepts);
    * ``pend0001`` cites a pending frame of s2.
    """
    make_session(state, "s1", [
        user("u1", 1, None, "we need a web framework", 1000.0),
        reply("u1_reply", 2, "u1", "which one?", 1001.0),
        user("u2", 3, "u1_reply", "use Flask", 1002.0),
        reply("u2_reply", 4, "u2", "Flask it is", 1003.0),
        user("u3", 5, "u1_reply", "use FastAPI", 1004.0),
        reply("u3_reply", 6, "u3", "FastAPI it is", 1005.0),
    ], {"head_id": "u3_reply"})
    make_session(state, "s2", [
        user("v1", 1, None, "still the web app", 5000.0),
        reply("v1_reply", 2, "v1", "noted", 5001.0),
        user("v2", 3, "v1_reply", "group chatter", 5002.0),
    ], {"head_id": "v2"})
    archive(state, "s1", [
        ("u1", "owner", "we need a web framework", "2026-11-01T10:00:00+00:00"),
        ("u1_reply", "agent", "which one?", "2026-11-01T10:00:05+00:00"),
        ("u2", "owner", "use Flask", "2026-11-01T10:01:00+00:00"),
        ("u2_reply", "agent", "Flask it is", "2026-11-01T10:01:05+00:00"),
        ("u3", "owner", "use FastAPI", "2026-11-02T09:00:00+00:00"),
        ("u3_reply", "agent", "FastAPI it is", "2026-11-02T09:00:05+00:00"),
    ])
    archive(state, "s2", [
        ("v1", "owner", "still the web app", "2026-11-03T08:00:00+00:00"),
        ("v1_reply", "agent", "noted", "2026-11-03T08:00:05+00:00"),
        ("v2", "owner", "group chatter", "2026-11-03T08:05:00+00:00"),
    ], pending=("v2",))
    (state / "memory" / ".scriptorium").mkdir(parents=True, exist_ok=True)
    (state / "memory" / ".scriptorium" / "workspace-id").write_text("w-0000aaaa\n", encoding="utf-8")
    topic(state, "projects/web.md", "Web", [
        "The owner needs a web framework.[^e-0000000001] They asked again.[^e-0000000002] ^rep00001\n\n"
        "[^e-0000000001]: Time: `2026-11-01`; Sources: [ask](openprogram/s1/u1), [ask again](openprogram/s1/u1)\n"
        "[^e-0000000002]: Time: `2026-11-01`; Sources: [ask](openprogram/s1/u1)\n",
        record("The web app spans sessions.", "multi001", "e-0000000003", "2026-11",
               ["openprogram/s1/u1", "openprogram/s2/v1"]),
        record("The agent offered choices.", "asst0001", "e-0000000004", "2026-11",
               ["openprogram/s1/u1_reply", "openprogram/s1/u2_reply"]),
        record("The app uses Flask.", "flask001", "e-0000000005", "2026-11-01", ["openprogram/s1/u2"]),
        record("The app uses FastAPI.", "fast0001", "e-0000000006", "2026-11-02",
               ["openprogram/s1/u3", "openprogram/s1/u3_reply"]),
        record("Both frameworks were considered.", "both0001", "e-0000000008", "2026-11",
               ["openprogram/s1/u2", "openprogram/s1/u3", "openprogram/s1/u1"]),
        *([record("A lost turn said so.", "lost0001", "e-0000000009", "2026-11", ["openprogram/s1/gone"])] if lost else []),
        record("Group chatter mentioned the app.", "pend0001", "e-0000000007", "2026-11-03", ["openprogram/s2/v2"]),
    ])
    return state
