"""Build a big, realistic OpenProgram state directory for the benchmarks (issue 12).

Usage: python benchmarks/make_state.py --scale N --out DIR [--seed S] [--variant]

At ``--scale 1``: 200 sessions x ~300 nodes (a trunk with tool rows, a rewound pair, a
retry and an edit fork: 4 live tips each), most turns marked by this
workspace and ~22 000 records still pending; every marked record archived as a v2 frame
(one archive per session, ~200 archives); ~300 topic files holding ~20 000 records, each
citing one of those frames, with cross-topic block links, the derived views and a git
history of five commits. ``--scale 2`` / ``4`` multiply sessions, archives, topic files and
records; a fractional scale (``0.01``) makes a tiny state for tests.

Everything is written by the project's own writers: sessions with the demo's
:class:`~memory_tui.demo.SessionBuilder` (OpenProgram's node encoding), sources with
``store.archives.append_records``, topics, views and git through the real transaction. The output
is a function of ``--scale`` and ``--seed`` only (fixed clocks, fixed git identities).

``--variant`` builds a second, independently shaped workspace of about the same weight, so no
figure depends on one generator's shape: fewer but longer sessions (~600 nodes, six to ten
forks each, a rewound pair, spawned sub-agents), topic files of very unequal sizes (a few
hundred records in some, one or two in many, nested two folders deep), records of varied,
realistic prose (punctuation, numbers, non-ASCII names) and more, smaller transactions.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memory_tui.core.store import gitlog

from memory_tui.core.store import parsecache
from memory_tui.core.tx import api as tx
from memory_tui.core.fsutil import atomic_write
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records
from memory_tui.demo import OWNER_PRINCIPAL, SessionBuilder
from memory_tui.sessions.marks import MARK_KEY

WORKSPACE_ID = "w-be0c4000"
T0 = 1_790_000_000.0  # 2026-09-21, a fixed clock
SESSIONS_PER_SCALE = 200
TOPIC_FILES_PER_SCALE = 300
CITED_PER_SESSION = 100  # topic records per session's archive: 200 x 100 = 20 000 at scale 1

# Per session: trunk turns, of which the first TRUNK_MARKED are marked; two forks of
# FORK_TURNS turns each, the first FORK_MARKED marked; with the rewound pair, 4 live tips.
TRUNK_TURNS = 100
TRUNK_MARKED = 72
FORK_TURNS = 19
FORK_MARKED = 5

WORDS = (
    "kyoto ryokan train budget rust python lazy imports garden tea bouldering berlin notebook "
    "cello concert school invoice postgres migration backup sunday laptop fish shell dotfiles "
    "server recipe vegetarian allergy peanut flight booking april june proposal review meeting "
    "deadline metric calendar reminder subscription photo library japanese kana sentence"
).split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


def _counts(scale: float) -> tuple[int, int]:
    sessions = max(1, round(SESSIONS_PER_SCALE * scale))
    files = max(2, round(TOPIC_FILES_PER_SCALE * scale))
    return sessions, files


# --------------------------------------------------------------------------------- sessions


def build_session(sid: str, t0: float, rng: random.Random) -> tuple[SessionBuilder, list[dict[str, Any]]]:
    """One session; returns the builder and its marked record nodes (oldest first)."""
    b = SessionBuilder(sid, _sentence(rng, 4)[:-1], t0)
    trunk: list[str] = []  # reply ids on the trunk, in order
    for i in range(TRUNK_TURNS):
        tools = [("bash", {"command": f"ls notes/{i}"}, _sentence(rng, 8))] if i % 5 == 2 else None
        trunk.append(b.turn(_sentence(rng, 14), _sentence(rng, 22), tools=tools))
        if i == 40:
            # a pair the owner rewound: hidden, neither a tip nor pending
            undo = b.turn(_sentence(rng, 10), _sentence(rng, 12), uid=f"{sid}-rw{i}")
            b.rewind_to(b.get(undo)["predecessor"])
    head = b.head

    def fork(at_reply: str, turns: int, **user_meta: Any) -> str:
        after = b.get(b.get(at_reply)["predecessor"])["predecessor"]  # the turn's parent
        rid = b.turn(_sentence(rng, 14), _sentence(rng, 22), after=after, move_head=False,
                     user_meta={"forked_from": b.get(at_reply)["predecessor"], **user_meta})
        for _ in range(turns - 1):
            rid = b.turn(_sentence(rng, 14), _sentence(rng, 22), after=rid, move_head=False)
        return rid

    fork(trunk[45], FORK_TURNS, edit_of=b.get(trunk[45])["predecessor"])  # an edit fork
    side = fork(trunk[60], FORK_TURNS)  # a retry, later named
    b.branches[side].update({"name": "side-notes", "created_at": b.t, "updated_at": b.t})
    b.head = head

    # Marks: the trunk's first TRUNK_MARKED turns and each fork's first FORK_MARKED turns.
    by_id = {n["id"]: n for n in b.nodes}
    marked: list[dict[str, Any]] = []

    def mark_turn(reply_id: str) -> None:
        for nid in (by_id[reply_id]["predecessor"], reply_id):
            node = by_id[nid]
            node["metadata"][MARK_KEY] = WORKSPACE_ID
            marked.append(node)

    for rid in trunk[:TRUNK_MARKED]:
        mark_turn(rid)
    fork_starts = [n for n in b.nodes if n["role"] == "user" and "forked_from" in n["metadata"]]
    for start in fork_starts:
        rid = f"{start['id']}_reply"
        for _ in range(FORK_MARKED):
            mark_turn(rid)
            nxt = [n for n in b.nodes if n["predecessor"] == rid and n["role"] == "user"]
            if not nxt:
                break
            rid = f"{nxt[0]['id']}_reply"
    return b, marked


def _source_record(sid: str, node: dict[str, Any], ordinal: int) -> SourceRecord:
    meta = node["metadata"]
    user = node["role"] == "user"
    return SourceRecord(
        provider="openprogram", thread_id=sid, message_id=node["id"], ordinal=ordinal,
        role="user" if user else "assistant", content=node["output"], timestamp=_iso(node["created_at"]),
        speaker_id=meta.get("speaker_id"), speaker_display=meta.get("speaker_display"),
        speaker_kind=meta.get("speaker_kind", "unknown"), principal_id=meta.get("principal_id", "unknown"),
        authority_tier=meta.get("authority_tier"), trust_state="trusted",
    )


def _git_init(d: Path) -> None:
    subprocess.run(["git", "init", "-q", "--initial-branch=main", str(d)], check=True, capture_output=True)


# ----------------------------------------------------------------------------------- memory


def _topic_texts(cited: list[list[str]], files: int, rng: random.Random) -> dict[str, str]:
    """``files`` topic files sharing the cited source ids round robin (local labels: the
    normaliser allocates the block ids)."""
    flat = [sid for per in cited for sid in per]
    slots = files - 1
    assert len(flat) >= slots, "more topic files than cited records"
    out: dict[str, str] = {}
    k = 0
    for f in range(slots):
        group = f"area{f % 12}"
        parts = [f"# Area {f % 12} notes {f}\n", "## Facts\n"]
        for j, ref in enumerate(flat[f * len(flat) // slots:(f + 1) * len(flat) // slots]):
            parts.append(
                f"{_sentence(rng, 12)[:-1]} (fact {k}).[^e{j}]\n\n"
                f"[^e{j}]: Time: `2026-{1 + k % 12:02d}-{1 + k % 28:02d}`; Sources: [said]({ref})\n"
            )
            k += 1
        out[f"topics/{group}/t{f:04d}.md"] = "\n".join(parts)
    out["topics/core.md"] = ("# Core\n\nThe user is called Bench and prefers short answers.[^c1]\n\n"
                             f"[^c1]: Time: `2026-09`; Sources: [name]({flat[0]})\n")
    return out


def _empty_state(out: Path, *, trigger_tokens: int) -> tuple[Path, Path]:
    """The skeleton both generators start from: config, owner, an empty sessions/ and memory/."""
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"output directory is not empty: {out}")
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "config.json",
                 json.dumps({"memory": {"writer": {"trigger_tokens": trigger_tokens}}}, indent=2) + "\n")
    atomic_write(out / "owner.json", json.dumps({"version": 1, "principal_id": OWNER_PRINCIPAL}, indent=2) + "\n")
    sroot = out / "sessions"
    sroot.mkdir()
    mem = out / "memory"
    for d in (mem, mem / "topics", mem / "sources", mem / ".scriptorium"):
        d.mkdir(exist_ok=True, mode=0o700)
    atomic_write(mem / ".scriptorium" / "workspace-id", (WORKSPACE_ID + "\n").encode("ascii"))
    return sroot, mem


def build(out: Path, scale: float, seed: int = 12) -> dict[str, int]:
    rng = random.Random(seed)
    n_sessions, n_files = _counts(scale)
    sroot, mem = _empty_state(out, trigger_tokens=8000)

    registry: dict[str, Any] = {}
    cited: list[list[str]] = []
    records: list[SourceRecord] = []
    nodes = 0
    for s in range(n_sessions):
        sid = f"local_{s:010x}"
        b, marked = build_session(sid, T0 + s * 3600.0, rng)
        d = b.save(sroot)
        _git_init(d)
        registry[sid] = b.registry_entry()
        nodes += len(b.nodes)
        recs = [_source_record(sid, n, i + 1) for i, n in enumerate(marked)]
        records.extend(recs)
        cited.append([r.source_id for r in recs[:CITED_PER_SESSION]])
    registry = dict(sorted(registry.items(), key=lambda kv: -kv[1]["updated_at"]))
    atomic_write(sroot / "index.json", json.dumps(registry, indent=2, ensure_ascii=False))

    # Memory: a history of five commits, the way a writer and an owner would leave it.
    env = gitlog.fixed_env(_iso(T0 + n_sessions * 3600.0))
    reason = gitlog.ensure_history(mem, env=env)
    if reason:
        raise SystemExit(f"git: {reason}")
    append_records(mem, records)
    texts = _topic_texts(cited, n_files, rng)
    names = sorted(texts)
    for part in range(4):  # four writer-style transactions, a quarter of the topics each
        with tx.open_stage(out) as stage:
            for rel in names[part::4]:
                stage.write_topic(rel, texts[rel])
            r = tx.commit_edits(stage, git_commit="on", commit_message=gitlog.MSG_INCREMENTAL, git_env=env, timeout=600)
        if not r.ok:
            raise SystemExit(f"transaction failed: {r.code} {r.message} {r.path}:{r.line}")
    _cross_links(out, env)
    parsecache.drop(mem)  # its entries name inodes and mtimes: the output stays a function of the seed
    return {"sessions": n_sessions, "nodes": nodes, "sources": len(records), "topic_files": n_files}


def _cross_links(out: Path, env: dict[str, str]) -> None:
    """Every tenth topic links the first record of the next topic (relations, rebased links)."""
    from memory_tui.core.format.topics import parse_tree

    tree = parse_tree(out / "memory" / "topics")
    paths = sorted(t.path for t in tree.topics if t.path != "core.md" and t.units)
    with tx.open_stage(out) as stage:
        for i in range(0, len(paths) - 1, 10):
            here, there = tree.topic(paths[i]), tree.topic(paths[i + 1])
            assert here is not None and there is not None
            target = there.units[0].memory_id
            rel = "../" * here.path.count("/") + there.path
            text = here.text.replace(").[^", f"), see [next]({rel}#^{target}).[^", 1)
            stage.write_topic("topics/" + here.path, text)
        r = tx.commit_edits(stage, git_commit="on", commit_message="memory: edit topics", git_env=env, timeout=600)
    if not r.ok:
        raise SystemExit(f"cross links failed: {r.code} {r.message} {r.path}:{r.line}")


# ---------------------------------------------------------------------------------- variant

V_SESSIONS_PER_SCALE = 110
V_TOPIC_FILES_PER_SCALE = 220
V_TRUNK_TURNS = (150, 230)  # per session, drawn uniformly
V_FORKS = (6, 10)
V_FORK_TURNS = (4, 16)

_V_SUBJECTS = ("Mira", "the user", "Jörg from the bike club", "her sister Ana", "the landlord", "Dr. Okafor",
               "the team at Lindqvist & Sons", "Zoë", "the cat (Pixel)", "Søren", "the accountant", "Hiroshi")
_V_VERBS = ("prefers", "asked about", "switched to", "is allergic to", "booked", "cancelled", "wants to learn",
            "keeps forgetting", "recommended", "is saving for", "moved", "complained about", "finished")
_V_OBJECTS = ("oat milk in coffee", "the 07:42 train to Lyon", "a standing desk (about 140 cm)", "Rust's borrow checker",
              "the dentist on Friday", "café crème, not espresso", "a 3-day hike near Tromsø", "PostgreSQL 16's MERGE",
              "the €1,200 laptop", "weekly piano lessons", "tickets for the Ghibli exhibition", "a Kindle Paperwhite",
              "the quarterly VAT return", "sourdough with 78% hydration", "a flat in Neukölln", "Spanish verbs")
_V_TAILS = ("because the old one broke", "after the meeting on the 14th", "if it stays under budget",
            "but only on weekends", "— said twice, so it matters", "and wants a reminder in March",
            "since moving to Berlin", "for the kids, mostly", "until the contract ends", "")


def _v_sentence(rng: random.Random) -> str:
    tail = rng.choice(_V_TAILS)
    s = f"{rng.choice(_V_SUBJECTS)} {rng.choice(_V_VERBS)} {rng.choice(_V_OBJECTS)}"
    return (s[0].upper() + s[1:] + (f", {tail}" if tail else "")).rstrip() + "."


def _v_paragraph(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(_v_sentence(rng) for _ in range(rng.randint(lo, hi)))


def build_variant_session(sid: str, t0: float, rng: random.Random) -> tuple[SessionBuilder, list[dict[str, Any]]]:
    """A long session: a trunk, many forks (edits and retries) from random turns, one rewound
    pair and a spawned sub-agent; about three quarters of the trunk marked, forks partly."""
    b = SessionBuilder(sid, _v_sentence(rng)[:48].rstrip(" ."), t0)
    by_id: dict[str, dict[str, Any]] = {}

    def index() -> None:
        for n in b.nodes[len(by_id):]:
            by_id[n["id"]] = n

    trunk: list[str] = []
    turns = rng.randint(*V_TRUNK_TURNS)
    for i in range(turns):
        tools = None
        if rng.random() < 0.3:
            tools = [(rng.choice(("bash", "read_file", "web_search")), {"q": _v_sentence(rng)}, _v_paragraph(rng, 2, 6))
                     for _ in range(rng.randint(1, 3))]
        trunk.append(b.turn(_v_paragraph(rng, 1, 3), _v_paragraph(rng, 2, 7), tools=tools))
        if i == turns // 3:
            index()
            undo = b.turn(_v_sentence(rng), _v_sentence(rng), uid=f"{sid}-rw{i}")
            index()
            b.rewind_to(by_id[undo]["predecessor"])
        if i == turns // 2:
            b.spawn(trunk[-1], _v_sentence(rng), _v_paragraph(rng, 1, 3))
    index()
    head = b.head
    fork_tips: list[list[str]] = []
    for k in range(rng.randint(*V_FORKS)):
        at = trunk[rng.randrange(2, len(trunk) - 1)]
        parent = by_id[by_id[at]["predecessor"]]["predecessor"]
        meta: dict[str, Any] = {"forked_from": by_id[at]["predecessor"]}
        if k % 2 == 0:
            meta["edit_of"] = by_id[at]["predecessor"]
        rid = b.turn(_v_paragraph(rng, 1, 3), _v_paragraph(rng, 2, 6), after=parent, move_head=False, user_meta=meta)
        chain = [rid]
        for _ in range(rng.randint(*V_FORK_TURNS) - 1):
            rid = b.turn(_v_paragraph(rng, 1, 3), _v_paragraph(rng, 2, 6), after=rid, move_head=False)
            chain.append(rid)
        if k == 1:
            b.branches[rid].update({"name": "plan-b", "created_at": b.t, "updated_at": b.t})
        fork_tips.append(chain)
    b.head = head
    index()
    marked: list[dict[str, Any]] = []

    def mark_turn(reply_id: str) -> None:
        for nid in (by_id[reply_id]["predecessor"], reply_id):
            by_id[nid]["metadata"][MARK_KEY] = WORKSPACE_ID
            marked.append(by_id[nid])

    for rid in trunk[: int(len(trunk) * rng.uniform(0.6, 0.85))]:
        mark_turn(rid)
    for chain in fork_tips:
        for rid in chain[: rng.randint(0, len(chain))]:
            mark_turn(rid)
    return b, marked


def _v_topic_texts(cited: list[str], files: int, rng: random.Random) -> dict[str, str]:
    """Topic files of Pareto-distributed sizes over ``cited`` source ids, nested two deep."""
    weights = [rng.paretovariate(1.1) for _ in range(files - 1)]
    total = sum(weights)
    sizes = [max(1, int(len(cited) * w / total)) for w in weights]
    out: dict[str, str] = {}
    k = 0
    domains = ("home", "work", "health", "travel", "people", "projects", "money", "hobbies")
    for f, size in enumerate(sizes):
        refs = cited[k % len(cited):][:size] or cited[:size]
        domain = domains[f % len(domains)]
        rel = f"topics/{domain}/{rng.choice(('notes', 'log', 'facts', 'misc'))}-{f % 7}/n{f:04d}.md"
        parts = [f"# {domain.title()}: {_v_sentence(rng)[:40].rstrip(' .')}\n"]
        for j, ref in enumerate(refs):
            if j % 40 == 0:
                parts.append(f"## Part {j // 40 + 1}\n")
            parts.append(f"{_v_paragraph(rng, 1, 3)[:-1]} (fact {k}).[^e{j}]\n\n"
                         f"[^e{j}]: Time: `20{24 + k % 3}-{1 + k % 12:02d}`; Sources: [turn]({ref})\n")
            k += 1
        out[rel] = "\n".join(parts)
    out["topics/core.md"] = ("# Core\n\nThe user is called Mira Lindqvist and writes in English and Swedish.[^c1]\n\n"
                             f"[^c1]: Time: `2026-09`; Sources: [name]({cited[0]})\n")
    return out


def build_variant(out: Path, scale: float, seed: int = 31) -> dict[str, int]:
    rng = random.Random(seed)
    n_sessions = max(1, round(V_SESSIONS_PER_SCALE * scale))
    n_files = max(2, round(V_TOPIC_FILES_PER_SCALE * scale))
    sroot, mem = _empty_state(out, trigger_tokens=16000)
    registry: dict[str, Any] = {}
    cited: list[str] = []
    records: list[SourceRecord] = []
    nodes = 0
    for s in range(n_sessions):
        sid = f"local_{0xa000000000 + s * 7919:010x}"
        b, marked = build_variant_session(sid, T0 + s * 5400.0 + rng.random() * 600, rng)
        d = b.save(sroot)
        _git_init(d)  # a session folder without .git is not a session (session spec §1.2)
        registry[sid] = b.registry_entry()
        nodes += len(b.nodes)
        recs = [_source_record(sid, n, i + 1) for i, n in enumerate(marked)]
        records.extend(recs)
        cited.extend(r.source_id for r in recs[: rng.randint(40, 200)])
    rng.shuffle(cited)
    registry = dict(sorted(registry.items(), key=lambda kv: -kv[1]["updated_at"]))
    atomic_write(sroot / "index.json", json.dumps(registry, indent=2, ensure_ascii=False))
    env = gitlog.fixed_env(_iso(T0 + n_sessions * 5400.0))
    reason = gitlog.ensure_history(mem, env=env)
    if reason:
        raise SystemExit(f"git: {reason}")
    append_records(mem, records)
    texts = _v_topic_texts(cited, n_files, rng)
    names = sorted(texts)
    for part in range(8):
        with tx.open_stage(out) as stage:
            for rel in names[part::8]:
                stage.write_topic(rel, texts[rel])
            r = tx.commit_edits(stage, git_commit="on", commit_message=gitlog.MSG_INCREMENTAL, git_env=env, timeout=900)
        if not r.ok:
            raise SystemExit(f"transaction failed: {r.code} {r.message} {r.path}:{r.line}")
    _cross_links(out, env)
    parsecache.drop(mem)
    return {"sessions": n_sessions, "nodes": nodes, "sources": len(records), "topic_files": len(texts),
            "records": sum(t.count("(fact ") for t in texts.values())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--variant", action="store_true", help="the second, independently shaped generator")
    args = ap.parse_args(argv)
    if args.variant:
        counts = build_variant(args.out, args.scale, 31 if args.seed is None else args.seed)
    else:
        counts = build(args.out, args.scale, 12 if args.seed is None else args.seed)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
