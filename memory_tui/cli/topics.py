"""Verbs ``topics`` (every topic file: records, tokens, problems) and ``show TOPIC`` (its
records with ids, headings, content, time and citations resolved to their source frames).

Both only read: no file, lock or git call is made.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from memory_tui.cli.common import CliError, add_common, emit_json
from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.paths import discover_state_dir
from memory_tui.core.format.text import sanitize


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("topics", help="list topic files with record counts, tokens and problems")
    add_common(p)
    p.set_defaults(func=cmd_topics)

    p = subparsers.add_parser("show", help="show one topic's records and their cited sources")
    add_common(p)
    p.add_argument("topic", metavar="TOPIC", help="topic path, e.g. people/ada.md or topics/people/ada.md")
    p.set_defaults(func=cmd_show)


# --------------------------------------------------------------------------------------------


def _open(args: argparse.Namespace):
    from memory_tui.core.store.workspace import open_state

    state_dir = discover_state_dir(getattr(args, "state", None))
    if not state_dir.exists():
        raise CliError(f"state directory not found: {state_dir}")
    if not state_dir.is_dir():
        raise CliError(f"not a state directory (not a folder): {state_dir}")
    try:
        snap = open_state(state_dir)
    except MemoryError as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"cannot read {state_dir}: {exc.strerror or exc}") from exc
    if snap.memory_missing:
        raise CliError(f"no memory workspace in {state_dir} (expected {Path(state_dir) / 'memory'})")
    return snap


def _problem_json(p) -> dict[str, Any]:
    out = p.to_json()
    out["message"] = sanitize(out["message"])
    return out


def _topic_rows(snap) -> list[dict[str, Any]]:
    counter = snap.counter
    rows = []
    for topic in snap.tree.topics:
        wpath = topic.workspace_path
        rows.append({
            "path": wpath,
            "records": len(topic.units),
            "tokens": counter.count(topic.text),
            "problems": [_problem_json(p) for p in snap.problems if p.path == wpath],
        })
    return rows


def cmd_topics(args: argparse.Namespace) -> int:
    snap = _open(args)
    rows = _topic_rows(snap)
    listed = {r["path"] for r in rows}
    # files that could not be read at all have problems but no Topic
    for p in snap.tree.problems:
        if p.path and p.path.startswith("topics/") and p.path not in listed:
            listed.add(p.path)
            rows.append({"path": p.path, "records": 0, "tokens": 0, "problems": [_problem_json(p)]})
    if getattr(args, "json", False):
        emit_json({
            "revision": snap.revision,
            "workspace_id": snap.workspace_id,
            "memory_disabled": snap.memory_disabled,
            "topics": rows,
        })
        return 0
    if not rows:
        print("no topic files")
        return 0
    width = max(len(sanitize(r["path"])) for r in rows)
    print(f"{'TOPIC':<{width}}  {'RECORDS':>7}  {'TOKENS':>7}  PROBLEMS")
    for r in rows:
        n = len(r["problems"])
        print(f"{sanitize(r['path']):<{width}}  {r['records']:>7}  {r['tokens']:>7}  {n if n else '-'}")
    for r in rows:
        for p in r["problems"]:
            where = p["path"] + (f":{p['line']}" if p.get("line") else "")
            print(f"{sanitize(where)}: {p['code']}: {p['message']}")
    total = sum(r["records"] for r in rows)
    print(f"{len(rows)} topic file(s), {total} record(s), revision {snap.revision}")
    return 0


# --------------------------------------------------------------------------------------------


def _find_topic(snap, name: str):
    rel = name.strip().replace("\\", "/")
    if rel.startswith("topics/"):
        rel = rel[len("topics/"):]
    candidates = [rel] if rel.endswith(".md") else [rel + ".md", rel]
    for cand in candidates:
        topic = snap.tree.topic(cand)
        if topic is not None:
            return topic
    for cand in candidates:
        unreadable = [p for p in snap.problems if p.path == f"topics/{cand}"]
        if unreadable:
            raise CliError(f"cannot read topic: {sanitize(str(unreadable[0]))}")
    raise CliError(f"no topic file topics/{candidates[0]} (see `memory-tui topics`)")


def _trust(snap, source_id: str | None, frame) -> str:
    if source_id is None:
        return "unresolved"
    if frame is None:
        return "missing"
    if snap.sources.is_pending(source_id):
        return "pending"
    if snap.sources.is_trusted(source_id):
        return "trusted"
    return "pending" if getattr(frame, "pending", False) else "trusted" if getattr(frame, "trusted", False) else "unknown"


def _citation(snap, ev, link) -> dict[str, Any]:
    frame = snap.sources.frame(link.source_id) if link.source_id else None
    out: dict[str, Any] = {
        "evidence_id": ev.id,
        "time": ev.when if ev.when is not None else ev.raw_when,
        "label": link.label,
        "target": link.target,
        "source_id": link.source_id,
        "trust": _trust(snap, link.source_id, frame),
        "source": None,
    }
    if frame is not None:
        out["source"] = {
            "path": frame.path,
            "line": frame.line,
            "kind": frame.kind,
            "speaker": frame.speaker_label,
            "time": frame.timestamp,
            "text": frame.text,
        }
    return out


def _records(snap, topic) -> list[dict[str, Any]]:
    core = snap.core if topic.path == "core.md" else None
    out = []
    for unit in topic.units:
        citations = []
        for ann in unit.annotations:
            for ev in ann.evidence:
                for link in ev.links:
                    citations.append(_citation(snap, ev, link))
        rec: dict[str, Any] = {
            "memory_id": unit.memory_id,
            "aliases": [a for a in unit.aliases if a != unit.memory_id],
            "line": unit.line,
            "headings": list(unit.headings),
            "content": unit.content,
            "when": unit.when,
            "legacy": unit.legacy,
            "relation_targets": list(unit.relation_targets),
            "citations": citations,
        }
        if core is not None:
            rec["core"] = (
                "kept" if unit.identity in core.kept_ids
                else "omitted" if unit.identity in core.omitted_ids
                else "pending" if unit.identity in core.pending_skipped_ids
                else None
            )
        out.append(rec)
    return out


def cmd_show(args: argparse.Namespace) -> int:
    snap = _open(args)
    topic = _find_topic(snap, args.topic)
    records = _records(snap, topic)
    problems = [_problem_json(p) for p in snap.problems if p.path == topic.workspace_path]
    if getattr(args, "json", False):
        emit_json({
            "path": topic.workspace_path,
            "revision": snap.revision,
            "tokens": snap.counter.count(topic.text),
            "records": records,
            "problems": problems,
        })
        return 0
    print(f"{sanitize(topic.workspace_path)}  ({len(records)} record(s), {snap.counter.count(topic.text)} tokens)")
    for rec in records:
        print()
        head = " > ".join(sanitize(h) for h in rec["headings"]) or "(preamble)"
        ids = rec["memory_id"] + (f" (aliases {', '.join(rec['aliases'])})" if rec["aliases"] else "")
        extra = f"  core: {rec['core']}" if rec.get("core") else ""
        print(f"^{ids}  line {rec['line']}  when {rec['when'] or 'undated'}  [{head}]{extra}")
        print(f"  {sanitize(rec['content'])}")
        for c in rec["citations"]:
            src = c["source"]
            print(f"  - [{sanitize(c['label'])}] {c['time']} {sanitize(c['source_id'] or c['target'])} ({c['trust']})")
            if src is not None:
                first = sanitize(src["text"]).split("\n", 1)[0]
                if len(first) > 160:
                    first = first[:159] + "\u2026"
                print(f"      {sanitize(src['speaker'])} @ {sanitize(src['time']) or 'no time'}: {first}")
    for p in problems:
        where = p["path"] + (f":{p['line']}" if p.get("line") else "")
        print(f"{sanitize(where)}: {p['code']}: {p['message']}")
    return 0
