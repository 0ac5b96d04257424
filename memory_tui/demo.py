"""A realistic, deterministic demo state directory (``memory-tui demo``).

``build_demo(path, now=...)`` writes an OpenProgram state dir in OpenProgram's exact on-disk
format (``sessions/index.json``; per session ``meta.json``, ``history/NNNN-R-<id>.json``, a
git repository, ``context/``, ``workdir/.gitkeep``) and then writes memory through the REAL
pipeline (extractive writer, real transaction, real marks). What it shows:

* ``local_d3a0000001`` "Kyoto trip in spring": tool rows, a retry, an edit fork, a rewind
  (hidden pair), and one late turn left pending on the head;
* ``local_d3a0000002`` "Rewrite the CLI in Rust?": a same-session spawn and a long
  abandoned branch that stays below the 8 000-token threshold;
* ``local_d3a0000003`` "About me": many standing preferences, written to ``topics/core.md``
  so rendered ``core.md`` exceeds the 2 000-token Core budget;
* ``local_d3a0000004`` "Copied from the laptop": marks that name another workspace, so its
  turns count as unwritten here.

Every byte outside ``.git/`` directories is a function of ``now`` (fixed git identities and
dates make the commit ids deterministic too).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

WORKSPACE_ID_HEX = "d3a0c0de"
FOREIGN_WORKSPACE = "w-0fe1a7b0"
OWNER_PRINCIPAL = "owner/install/d3a0d3a0d3a0d3a0"
DEFAULT_NOW = 1796000000.0  # 2026-11-29T...Z

OWNER_META = {
    "source": "web",
    "speaker_id": "owner/local",
    "speaker_display": "Owner",
    "agent_id": "main",
    "speaker_kind": "owner",
    "principal_id": OWNER_PRINCIPAL,
    "authority_tier": "owner",
    "interaction": "interactive",
    "authority_schema": 1,
}


def _reply_meta(started: float, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = {
        "source": "web",
        "status": "completed",
        "worker_id": "4242-d3a0d3",
        "started_at": started,
        "speaker_kind": "runtime",
        "speaker_id": "runtime/agent%2Fmain",
        "speaker_display": "agent/main",
        "principal_id": OWNER_PRINCIPAL,
        "authority_tier": "owner",
        "interaction": "non-interactive",
        "agent_id": "main",
        "execution_kind": "agent",
        "authority_schema": 1,
        "completed_at": round(started + 2.5, 6),
    }
    meta.update(extra or {})
    return meta


def _hex(seed: str, n: int = 12) -> str:
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()[:n]


def _dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False)


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text, encoding="utf-8")
    os.chmod(path, mode)


class SessionBuilder:
    def __init__(self, sid: str, title: str, t0: float) -> None:
        self.sid = sid
        self.title = title
        self.t = t0
        self.created_at = t0
        self.nodes: list[dict[str, Any]] = []
        self.seq = 0
        self.head: str | None = None
        self.branches: dict[str, Any] = {}
        self.node("ROOT", "user", "", caller="", predecessor=None, metadata={"display": "root"})

    def tick(self, dt: float = 7.25) -> float:
        self.t = round(self.t + dt, 6)
        return self.t

    def node(self, nid: str, role: str, output: Any, *, caller: str = "", predecessor: str | None = None,
             metadata: dict[str, Any] | None = None, name: str = "", inp: Any = None) -> dict[str, Any]:
        n = {
            "id": nid, "created_at": self.tick(), "seq": self.seq, "role": role, "name": name, "input": inp,
            "output": output, "caller": caller, "predecessor": predecessor, "reads": [], "metadata": dict(metadata or {}),
        }
        self.seq += 1
        self.nodes.append(n)
        return n

    def get(self, nid: str) -> dict[str, Any]:
        return next(n for n in self.nodes if n["id"] == nid)

    def turn(self, text: str, reply: str, *, after: str | None = "__head__", uid: str | None = None,
             user_meta: dict[str, Any] | None = None, tools: list[tuple[str, dict[str, Any], str]] | None = None,
             move_head: bool = True, caller: str = "ROOT") -> str:
        pred = self.head if after == "__head__" else after
        uid = uid or _hex(f"{self.sid}/{self.seq}/{text}")
        meta = dict(OWNER_META)
        meta.update(user_meta or {})
        self.node(uid, "user", text, caller=caller, predecessor=pred or "ROOT", metadata=meta)
        rid = f"{uid}_reply"
        started = self.t
        rmeta = _reply_meta(started, {"predecessor": uid})
        self.node(rid, "llm", reply, caller="", predecessor=uid, metadata=rmeta)
        for i, (tool, args, out) in enumerate(tools or []):
            self.node(f"{rid}_t_toolu_{i + 1:02d}", "code", out, caller=rid, predecessor=None,
                      metadata={"tool_call_id": f"toolu_{i + 1:02d}", "is_error": False}, name=tool, inp=args)
        self.branches[rid] = {"turns": 1}
        if move_head:
            self.head = rid
        return rid

    def spawn(self, caller_id: str, text: str, reply: str) -> str:
        sid = _hex(f"{self.sid}/spawn/{text}")
        self.node(sid, "user", text, caller=caller_id, predecessor=None,
                  metadata={**OWNER_META, "source": "agent_spawn", "spawn_branch_root": True})
        rid = f"{sid}_reply"
        self.node(rid, "llm", reply, caller="", predecessor=sid,
                  metadata=_reply_meta(self.t, {"source": "agent_spawn", "predecessor": sid}))
        self.branches[rid] = {"turns": 1, "name": "sub-agent", "created_at": self.t, "updated_at": self.t}
        return rid

    def rewind_to(self, uid: str) -> None:
        """Rewind to user node ``uid`` (on the head chain): stamp the chain, head = its predecessor."""
        chain = []
        cur = self.head
        while cur:
            chain.append(cur)
            if cur == uid:
                break
            cur = self.get(cur)["predecessor"]
        at = self.tick(1.0)
        for nid in chain:
            n = self.get(nid)
            if n["role"] == "llm":
                n["metadata"].update({"reverted": True, "reverted_at": at, "reverted_paths": []})
            n["metadata"].update({"rewound": True, "rewound_at": round(at + 0.1, 6)})
            for child in self.nodes:
                if child["caller"] == nid and child["role"] == "code":
                    child["metadata"].update({"rewound": True, "rewound_at": round(at + 0.1, 6)})
        self.head = self.get(uid)["predecessor"]

    # -- output ------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {
            "id": self.sid, "agent_id": "main", "title": self.title, "source": "web",
            "created_at": self.created_at, "updated_at": self.t, "project_id": "default", "status": "idle",
            "head_id": self.head, "_auto_titled": True, "_title_gen_count": 1, "branches": self.branches,
        }

    def preview(self) -> str:
        users = [n for n in self.nodes if n["role"] == "user" and n["id"] != "ROOT" and isinstance(n["output"], str)]
        text = " ".join(users[-1]["output"].split()) if users else ""
        return text if len(text) <= 80 else text[:77] + "…"

    def registry_entry(self) -> dict[str, Any]:
        return {
            "id": self.sid, "status": "idle", "pinned": False, "archived": False, "unread": False,
            "agent_id": "main", "title": self.title, "source": "web", "created_at": self.created_at,
            "updated_at": self.t, "channel": None, "peer_display": None, "peer_id": None, "preview": self.preview(),
        }

    def save(self, sessions_root: Path) -> Path:
        d = sessions_root / self.sid
        (d / "history").mkdir(parents=True, exist_ok=True, mode=0o700)
        (d / "context").mkdir(exist_ok=True, mode=0o700)
        _write(d / "workdir" / ".gitkeep", "", 0o644)
        for n in self.nodes:
            _write(d / "history" / f"{n['seq']:04d}-{n['role'][0]}-{n['id']}.json", _dumps(n))
        _write(d / "meta.json", _dumps(self.meta()))
        return d


def _git(cwd: Path, args: list[str], when: str) -> None:
    env = dict(os.environ)
    env.update({
        "GIT_AUTHOR_NAME": "OpenProgram", "GIT_AUTHOR_EMAIL": "openprogram@local",
        "GIT_COMMITTER_NAME": "OpenProgram", "GIT_COMMITTER_EMAIL": "openprogram@local",
        "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd),
    })
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _git_session(d: Path, title: str, when: str) -> None:
    _git(d, ["init", "-q", "--initial-branch=main"], when)
    _git(d, ["config", "user.email", "openprogram@local"], when)
    _git(d, ["config", "user.name", "OpenProgram"], when)
    _git(d, ["commit", "-q", "--allow-empty", "-m", "session init"], when)
    _git(d, ["add", "-A"], when)
    _git(d, ["commit", "-q", "-m", f"turn: {title[:60]}"], when)


# ------------------------------------------------------------------------------ content

KYOTO = [
    ("Hi! I'm Ada. We're planning a trip to Kyoto in early April.",
     "Lovely, Ada. Early April is cherry blossom season, so book early."),
    ("I prefer small ryokans over big hotels, and I never want rooms above the third floor.",
     "Noted: small ryokans, low floors only."),
    ("Can you check which temples open before 8 am?",
     "Kiyomizu-dera opens at 6 am and Fushimi Inari never closes; most others open at 8 or 9."),
    ("Let's book the Gion ryokan for three nights from April 3.",
     "Booked: Gion ryokan, three nights from April 3. Confirmation saved to trip.md."),
    ("My sister Mei lives in Osaka and will join us on the second day.",
     "Great, I will plan day two around Osaka pickup for Mei."),
    ("We decided to take the Haruka express from Kansai airport instead of a taxi.",
     "Confirmed: Haruka express from Kansai airport; tickets can be bought on arrival."),
]
RUST = [
    ("Our CLI is written in Python and startup takes 900 ms. Should we rewrite it in Rust?",
     "Measure first: most of the 900 ms is probably imports. Lazy imports could cut it in half."),
    ("I prefer keeping one language in the repo unless the gain is large.",
     "Understood: one language unless the gain is large."),
    ("We decided to try lazy imports first and revisit Rust in June.",
     "Decision noted: lazy imports now, Rust review scheduled for June."),
]
ABANDONED = [
    "What would a Rust port of the config loader look like, with serde and toml?",
    "And the plugin system: could we keep Python plugins via pyo3 while the core is Rust?",
    "How would we ship wheels for macOS, Linux and Windows from one CI matrix?",
    "What about error messages: can we keep the same wording and exit codes?",
    "List the crates we would need for argument parsing, colours and progress bars.",
]
ABOUT = [
    "I always want answers short first, with details only when I ask for them.",
    "I prefer metric units, 24-hour times and ISO dates like 2026-04-03 in everything you write for me.",
    "I never drink coffee after noon; tea is fine at any hour, green tea most of all.",
    "I work as a backend engineer on a payments team, mostly Python and Postgres, with some Go.",
    "I live in Berlin and my working hours are 9 to 17 Central European Time, Monday to Thursday.",
    "I prefer plain text emails without images or tracking pixels, and I never want marketing copy.",
    "My partner Jonas is a cellist; his concert season runs from October to May.",
    "I always keep a paper notebook for plans, so please give me lists I can copy by hand.",
    "I hate meetings before 10 am and I prefer asynchronous updates in writing.",
    "I like long walks, bouldering on Wednesdays and reading science fiction on weekends.",
    "I am allergic to peanuts, so always flag peanut oil in restaurant suggestions.",
    "I prefer trains over flights for anything under six hours of travel.",
    "My daughter Lena starts primary school in August and her school day ends at 13:30.",
    "I want code reviews to focus on correctness first, then naming, then style.",
    "I prefer dark themes, monospace fonts and no animations in any tool I use.",
    "I always back up my laptop on Sundays to the home NAS and an offsite disk.",
    "I never want auto-renewing subscriptions without a reminder a week before.",
    "I am learning Japanese and I like short example sentences with readings in kana.",
    "I prefer budget summaries in euros, rounded to whole numbers, with the total first.",
    "My manager Priya prefers decisions written as one-page proposals with a clear recommendation.",
    "I prefer vegetarian restaurants with quiet rooms, booked for 19:00 when possible.",
    "I like to keep Fridays free of meetings for deep work and family errands.",
    "I always want the source of a fact when you tell me something surprising.",
    "I prefer to pay by card, never by bank transfer to a private person.",
    "I decided that family photos stay off cloud services that train models on them.",
]
LAPTOP = [
    ("I prefer the laptop's fish shell config: abbreviations, no autosuggestions, vi keys.",
     "Noted: fish with abbreviations, no autosuggestions, vi keys."),
    ("We will move the dotfiles repository to the home server next month.",
     "Plan noted: dotfiles move to the home server next month."),
]


def _pad(text: str, n: int) -> str:
    """Longer deterministic turn text (for the abandoned branch and the core)."""
    extra = (
        " Please think about maintenance cost, the team's experience, the build time on CI, how"
        " we would test it, and what would happen to users who rely on the current behaviour."
    )
    return text + extra * n


def _second_person(text: str) -> str:
    words = []
    for w in text.split():
        low = w.lower()
        words.append({"i": "you", "my": "your", "i'm": "you're", "am": "are"}.get(low, w) if low in ("i", "my", "i'm", "am") else w)
    out = " ".join(words)
    return out[:1].lower() + out[1:]


def _now_value(now: Any, clock: Callable[[], Any] | None) -> float:
    value = now if now is not None else (clock() if clock is not None else None)
    if value is None:
        return DEFAULT_NOW
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value)


def build_demo(path: Path | str, *, now: float | datetime | None = None, clock: Callable[[], Any] | None = None) -> Path:
    """Build the demo state dir at ``path`` (created; must be empty or absent). Returns it."""
    from memory_tui.core.store.gitlog import fixed_env
    from memory_tui.pipeline.settings import WriterSettings
    from memory_tui.pipeline.context import Context
    from memory_tui.pipeline.write import write

    state = Path(path)
    if state.exists() and any(state.iterdir()):
        raise FileExistsError(f"demo target is not empty: {state}")
    t_now = round(_now_value(now, clock), 6)
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    _write(state / "config.json", json.dumps({"memory": {"writer": {"trigger_tokens": 8000}}}, indent=2) + "\n")
    _write(state / "owner.json", json.dumps({"version": 1, "principal_id": OWNER_PRINCIPAL}, indent=2) + "\n")
    sroot = state / "sessions"
    sroot.mkdir(mode=0o700)
    base = t_now - 3 * 86400

    # 1. Kyoto: tools, retry, edit fork, rewind, a late pending turn.
    k = SessionBuilder("local_d3a0000001", "Kyoto trip in spring", base)
    k.turn(*KYOTO[0])
    k.turn(*KYOTO[1])
    k.turn(*KYOTO[2], tools=[("web_search", {"query": "Kyoto temples opening hours"}, "Kiyomizu-dera 6:00; Fushimi Inari 24h; Kinkaku-ji 9:00")])
    first_try = k.turn("Book the Gion ryokan for three nights.", "Which dates?")
    orig_user = k.get(first_try)["predecessor"]
    # Retry with new wording: a sibling of the first try (Web UI retry ids are 8 hex).
    k.turn(*KYOTO[3], after=k.get(orig_user)["predecessor"], uid="e7a1c0de", user_meta={"forked_from": orig_user})
    kobe = k.turn("My sister lives in Kobe and will join us.", "Noted, Kobe.")
    k.turn("Add a tea ceremony on day two.", "Added a tea ceremony on day two.", uid="f1d2e3a4")
    k.turn("Actually, skip the tea ceremony.", "Removed it.")
    k.rewind_to("f1d2e3a4")  # the tea-ceremony pair and what followed are rewound (hidden)
    kobe_user = k.get(kobe)["predecessor"]
    # Edit fork: the Kobe message edited into the right city.
    k.turn(*KYOTO[4], after=k.get(kobe_user)["predecessor"], uid="0ed17a11",
           user_meta={"forked_from": kobe_user, "edit_of": kobe_user})
    k.turn(*KYOTO[5])

    # 2. Rust: spawn + long abandoned branch below threshold.
    r = SessionBuilder("local_d3a0000002", "Rewrite the CLI in Rust?", base + 3600)
    r1 = r.turn(*RUST[0], tools=[("bash", {"command": "python -X importtime cli.py --help"}, "import time: 612 ms in 41 modules")])
    r.spawn(r1, "Sub-agent: list the slowest imports of the CLI.", "The slowest imports are pandas (310 ms), requests (90 ms) and rich (70 ms).")
    fork_at = r.head
    for q in ABANDONED:
        r.turn(_pad(q, 3), _pad("Here is a sketch of how that could work.", 2))
    r.branches[r.head].update({"name": "rust-port-ideas", "created_at": r.t, "updated_at": r.t})
    r.head = fork_at
    r.turn(*RUST[1], after=fork_at)
    r.turn(*RUST[2])

    # 3. About me: standing preferences → topics/core.md (over the 2 000-token budget).
    a = SessionBuilder("local_d3a0000003", "About me", base + 7200)
    for i, line in enumerate(ABOUT):
        a.turn(line + " Please remember: " + line, "Noted, I will remember that " + _second_person(line))

    # 4. Copied from another machine: marks name another workspace.
    lap = SessionBuilder("local_d3a0000004", "Copied from the laptop", base + 10800)
    for q, ans in LAPTOP:
        lap.turn(q, ans)
    for n in lap.nodes:
        if n["id"] != "ROOT" and n["role"] in ("user", "llm"):
            n["metadata"]["memory_written_scriptorium"] = FOREIGN_WORKSPACE

    builders = [k, r, a, lap]
    when = datetime.fromtimestamp(base + 11000, tz=timezone.utc).isoformat()
    for b in builders:
        d = b.save(sroot)
        _git_session(d, b.title, when)
    registry = {b.sid: b.registry_entry() for b in sorted(builders, key=lambda b: -b.t)}
    _write(sroot / "index.json", json.dumps(registry, indent=2, ensure_ascii=False))

    # Memory, through the real pipeline.
    ids = iter([WORKSPACE_ID_HEX])
    mem_when = datetime.fromtimestamp(t_now - 86400, tz=timezone.utc).isoformat()
    common = dict(tz=timezone.utc, git_env=fixed_env(mem_when), clock=lambda: t_now - 86400, id_factory=lambda: next(ids))
    core_ctx = Context(state, settings=WriterSettings(topic="topics/core.md"), **common)
    write(core_ctx, "local_d3a0000003", force=True)
    ctx = Context(state, **{**common, "id_factory": lambda: WORKSPACE_ID_HEX})
    for sid in ("local_d3a0000001", "local_d3a0000002"):
        write(ctx, sid, force=True)

    # A turn after the write: pending on the head of the Kyoto session.
    done = len(k.nodes)
    k.t = round(t_now - 5 * 3600, 6)
    k.turn("Please also find a vegetarian dinner place near Gion for April 4.", "I'll look for quiet vegetarian places near Gion.")
    d = sroot / k.sid
    for n in k.nodes[done:]:
        _write(d / "history" / f"{n['seq']:04d}-{n['role'][0]}-{n['id']}.json", _dumps(n))
    meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    meta.update({"updated_at": k.t, "head_id": k.head, "branches": k.branches})
    _write(d / "meta.json", _dumps(meta))
    registry[k.sid].update({"updated_at": k.t, "preview": k.preview()})
    registry = dict(sorted(registry.items(), key=lambda kv: -kv[1]["updated_at"]))
    _write(sroot / "index.json", json.dumps(registry, indent=2, ensure_ascii=False))
    from memory_tui.core.store import parsecache

    parsecache.drop(state / "memory")  # its entries name inodes and mtimes: not a function of ``now``
    return state


__all__ = ["build_demo"]
