"""What the next locked open finishes after a job was killed (``install.recover`` calls
:func:`finish_interrupted` through ``core.store.openhooks``).

A write batch is several durable steps: the archive append, the install, one node file per
mark, the counters in ``runtime.json``, an organize pass the counters may call for, the git
commit. Before the writer runs, the batch intent (``marks-pending.json``) names everything
that must follow a landed install: the nodes to mark, the counters the batch leads to (set,
never added, so finishing twice is finishing once) and the organize reason. The next locked
open -- whatever verb it serves -- finishes the intent if and only if the topics cite the batch
(its install landed), else drops it, so the workspace ends exactly as an uninterrupted run
leaves it or as if the batch never ran. The write job finishes its own batches with the same
:func:`finish_batch`.

A migration (legacy cursors → marks) writes ``migrate-pending.json`` with every mark it will
make before the first one; the next open makes the rest and removes the cursors.

Temp files of a killed marking (``history/*.json.*-p<pid>.tmp``) are removed from the sessions
an intent names before it is finished.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memory_tui.core.store.leftovers import remove_dead_temps
from memory_tui.core.store.workspace import load_runtime_state
from memory_tui.pipeline import status as st
from memory_tui.sessions import marks

MIGRATE_INTENT = "migrate-pending.json"
COUNTER_KEYS = ("write_commits_since_global", "local_batches", "local_tokens", "last_global_at")


def _runtime_dir(memory_root: Path) -> Path:
    from memory_tui.core.format.paths import Layout

    return Layout(Path(memory_root)).runtime_dir


def _sessions_dir(memory_root: Path) -> Path:
    return Path(memory_root).parent / "sessions"


def _read(path: Path) -> dict[str, Any] | None:
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError):
        return {}
    return body if isinstance(body, dict) else {}


def _safe_session(name: Any) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name


def _session_dir(memory_root: Path, session: str, where: Any = None) -> Path:
    """A session's folder: where the job found it (``locations.json`` may place it outside
    ``sessions/``), else ``<state>/sessions/<id>``."""
    if isinstance(where, str) and where:
        return Path(where)
    return _sessions_dir(memory_root) / session


def _clean_session_temps(dirs: list[Path]) -> None:
    remove_dead_temps([(d / "history", False) for d in dirs])


# ------------------------------------------------------------------------------ a write batch


def batch_plan(memory_root: Path, tokens: int, now: float) -> dict[str, Any]:
    """The counters one written batch of ``tokens`` leads to and the organize it calls for
    (§7.4 step 8), computed before the writer runs so a kill cannot lose them."""
    state, _ = load_runtime_state(memory_root)
    data, decision = st.bump_counters(state.to_json(), tokens, now)
    return {"counters": {k: data.get(k) for k in COUNTER_KEYS}, "organize": decision.reason if decision.any else None}


def set_counters(memory_root: Path, counters: dict[str, Any]) -> None:
    state, _ = load_runtime_state(memory_root)
    data = state.to_json()
    want = {**data, **{k: counters[k] for k in COUNTER_KEYS if k in counters}}
    if want != data:
        st.save_runtime(_runtime_dir(memory_root) / "runtime.json", want)


def finish_batch(memory_root: Path, body: dict[str, Any], ctx: Any = None) -> tuple[Any, Any]:
    """Marks, counters and organize of an installed batch, then the intent goes. Returns the
    mark result and the organize report (None when none was due). Call under the lock."""
    from memory_tui.pipeline.context import Context
    from memory_tui.pipeline.reorganize import organize_locked

    root = Path(memory_root)
    sdir = _session_dir(root, body["session"], body.get("dir"))
    res = marks.mark_nodes(sdir, body["ids"], body["workspace_id"]) if sdir.is_dir() else marks.MarkResult((), (), tuple(body["ids"]))
    if res.problems:
        return res, None  # the intent stays: the marks are retried at the next open
    organized = None
    if isinstance(body.get("counters"), dict):
        set_counters(root, body["counters"])
        if body.get("organize"):
            organized = organize_locked(ctx if ctx is not None else Context(root.parent), reason=str(body["organize"]))
    marks.clear_intent(_runtime_dir(root))
    return res, organized


def _valid_batch(body: dict[str, Any]) -> bool:
    ids, wid, sources = body.get("ids"), body.get("workspace_id"), body.get("source_ids")
    return (_safe_session(body.get("session")) and isinstance(wid, str) and bool(wid)
            and isinstance(ids, list) and all(isinstance(i, str) for i in ids)
            and (sources is None or (isinstance(sources, list) and all(isinstance(x, str) for x in sources))))


def finish_batch_intent(memory_root: Path) -> None:
    root = Path(memory_root)
    rt = _runtime_dir(root)
    body = _read(rt / marks.INTENT_NAME)
    if body is None:
        return
    if body and _valid_batch(body):
        _clean_session_temps([_session_dir(root, body["session"], body.get("dir"))])
    if not body or not _valid_batch(body):
        marks.clear_intent(rt)  # unreadable: the batch is offered again, as before intents
        return
    sources = body.get("source_ids")
    if sources is not None and not marks.batch_cited(root, sources):
        marks.clear_intent(rt)  # the install never landed: the batch stays pending
        return
    finish_batch(root, body)


# ------------------------------------------------------------------------------ a migration


def write_migrate_intent(memory_root: Path, workspace_id: str, plan: dict[str, list[str]], dirs: dict[str, str]) -> None:
    body = {"version": 1, "workspace_id": workspace_id, "sessions": plan, "dirs": dirs}
    st.atomic_write(_runtime_dir(memory_root) / MIGRATE_INTENT, (json.dumps(body) + "\n").encode("utf-8"))


def finish_migration(memory_root: Path, workspace_id: str, plan: dict[str, list[str]],
                     dirs: dict[str, Any] | None = None) -> list[str]:
    """Every mark of the plan, then ``runtime.json`` without ``cursors``, then the intent goes.
    Returns the problems (cursors and intent kept for a retry when there are any)."""
    root = Path(memory_root)
    problems: list[str] = []
    for sid in sorted(plan):
        res = marks.mark_nodes(_session_dir(root, sid, (dirs or {}).get(sid)), plan[sid], workspace_id)
        problems.extend(str(p) for p in res.problems)
    if problems:
        return problems
    state, _ = load_runtime_state(root)
    data = state.to_json()
    if "cursors" in data:
        data.pop("cursors", None)
        st.save_runtime(_runtime_dir(root) / "runtime.json", data)
    (_runtime_dir(root) / MIGRATE_INTENT).unlink(missing_ok=True)
    return []


def finish_migrate_intent(memory_root: Path) -> None:
    root = Path(memory_root)
    path = _runtime_dir(root) / MIGRATE_INTENT
    body = _read(path)
    if body is None:
        return
    plan, wid = body.get("sessions"), body.get("workspace_id")
    ok = (isinstance(plan, dict) and isinstance(wid, str) and bool(wid)
          and all(_safe_session(k) and isinstance(v, list) and all(isinstance(i, str) for i in v) for k, v in plan.items()))
    if not ok:
        path.unlink(missing_ok=True)  # the cursors are still there: the next write migrates again
        return
    dirs = body.get("dirs") if isinstance(body.get("dirs"), dict) else {}
    _clean_session_temps([_session_dir(root, sid, dirs.get(sid)) for sid in plan])
    finish_migration(root, wid, plan, dirs)


def finish_interrupted(memory_root: Path) -> None:
    """The engine's locked-open step (see the module docstring). Never raises for what a kill
    left: an intent it cannot finish stays for the next open."""
    finish_migrate_intent(memory_root)
    finish_batch_intent(memory_root)
