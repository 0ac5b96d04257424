"""Build small synthetic session directories for the session reader tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OWNER = {
    "speaker_kind": "owner",
    "speaker_id": "owner/local",
    "speaker_display": "Owner",
    "principal_id": "owner/install/0123456789abcdef",
    "authority_tier": "owner",
    "interaction": "interactive",
    "authority_schema": 1,
}


def node(nid: str, seq: int, role: str = "user", output: Any = "hello", *, pred: str | None = None,
         caller: str = "", name: str = "", created_at: float | None = None, extra_meta: dict | None = None,
         **metadata: Any) -> dict:
    metadata.update(extra_meta or {})
    return {
        "id": nid,
        "created_at": created_at if created_at is not None else 1000.0 + seq,
        "seq": seq,
        "role": role,
        "name": name,
        "input": None,
        "output": output,
        "caller": caller,
        "predecessor": pred,
        "reads": [],
        "metadata": metadata,
    }


def write_node(sdir: Path, data: dict) -> Path:
    path = sdir / "history" / f"{data['seq']:04d}-{(data['role'] or 'x')[0]}-{data['id']}.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def make_session(state: Path, sid: str, nodes: list[dict], meta: dict | None = None, *,
                 register: bool = True) -> Path:
    sdir = state / "sessions" / sid
    (sdir / "history").mkdir(parents=True, exist_ok=True)
    (sdir / ".git").mkdir(exist_ok=True)
    for data in nodes:
        write_node(sdir, data)
    if meta is not None:
        full = {"id": sid, "updated_at": 2000.0, **meta}
        (sdir / "meta.json").write_text(json.dumps(full), encoding="utf-8")
    if register:
        idx = state / "sessions" / "index.json"
        reg = json.loads(idx.read_text(encoding="utf-8")) if idx.exists() else {}
        reg[sid] = {"id": sid, "updated_at": (meta or {}).get("updated_at", 2000.0)}
        idx.write_text(json.dumps(reg, indent=2), encoding="utf-8")
    return sdir


def turn(uid: str, seq: int, pred: str | None, text: str = "question", reply: str = "answer", **meta: Any) -> list[dict]:
    """A user node and its reply, with owner authority."""
    m = {**OWNER, "source": "web", **meta}
    return [
        node(uid, seq, "user", text, pred=pred, caller="ROOT", **m),
        node(f"{uid}_reply", seq + 1, "llm", reply, pred=uid, **m),
    ]


ROOT = node("ROOT", 0, "user", "", display="root")
