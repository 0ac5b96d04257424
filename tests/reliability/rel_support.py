"""Shared builders for the reliability tests: a small real workspace made by the archive
writer and the transaction, and helpers that check the invariants every test cares about."""

from __future__ import annotations

import json
import os
from pathlib import Path

from memory_tui.core.tx import api as tx
from memory_tui.core.format.sources import SourceRecord
from memory_tui.core.store.archives import append_records


def records(n: int = 6, thread: str = "sess-rel") -> list[SourceRecord]:
    return [
        SourceRecord("openprogram", thread, f"m{i:03d}", i + 1, "user", f"message {i}: detail {i}",
                     timestamp="2026-11-30T05:00:00+00:00")
        for i in range(n)
    ]


def ids(n: int = 6) -> list[str]:
    return [r.source_id for r in records(n)]


def topic(title: str, facts: list[tuple[str, str]]) -> str:
    body = [f"# {title}", ""]
    for i, (fact, sid) in enumerate(facts, 1):
        body += [f"{fact}[^e{i}]", "", f"[^e{i}]: Time: `2026-11-0{i}`; Sources: [s]({sid})", ""]
    return "\n".join(body)


def make_state(root: Path, *, git: str = "off") -> Path:
    """``root/state`` with two topics citing a real archive."""
    state = root / "state"
    mem = state / "memory"
    (mem / "topics").mkdir(parents=True)
    recs = records()
    append_records(mem, recs)
    s = [r.source_id for r in recs]
    for rel, text in (("topics/core.md", topic("Core", [("The user is Ada.", s[0])])),
                      ("topics/people/ada.md", topic("Ada", [("Ada drinks tea.", s[1]), ("Ada walks daily.", s[2])]))):
        r = tx.staged_edit(state, rel, text, git_commit=git)
        assert r.ok, r
    return state


def leftovers(mem: Path) -> list[str]:
    """Everything a finished (or recovered) operation must not leave behind."""
    out = []
    for rt in (".scriptorium", ".nativemem"):
        for name in (f"{rt}-txn",):
            if (mem / name).exists():
                out.append(name)
        area = mem / f"{rt}-stage"
        if area.is_dir():
            out += [f"{rt}-stage/{n}" for n in os.listdir(area)]
        if (mem / rt / "install-journal.json").exists():
            out.append(f"{rt}/install-journal.json")
        if (mem / rt / "install-journal.json.tmp").exists():
            out.append(f"{rt}/install-journal.json.tmp")
    from memory_tui.core.store.gitlog import stale_locks

    out += [p.relative_to(mem).as_posix() for p in stale_locks(mem)]
    return out


def node_marks(state: Path, key: str = "memory_written_scriptorium") -> dict[tuple[str, str], object]:
    out = {}
    for f in sorted((state / "sessions").glob("*/history/*.json")):
        node = json.loads(f.read_text(encoding="utf-8"))
        out[(f.parts[-3], node["id"])] = (node.get("metadata") or {}).get(key)
    return out
