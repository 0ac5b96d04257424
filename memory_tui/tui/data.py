"""The one adapter between the TUI and the engine.

Every call into ``memory_tui.core`` / ``memory_tui.sessions`` made by the app lives here, so
when an engine API moves only this module changes. The app itself only sees the small frozen
view models below (``WorkspaceModel`` and friends), already sanitised for the terminal.

While an engine module is not there yet (the engine is written in parallel), a small
read-only *preview reader* in this module fills the gap for that part, so the app always
opens. ``WorkspaceModel.engine`` says which parts came from the engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable

from memory_tui.core.config import MemoryConfig, load_memory_config
from memory_tui.core.errors import Problem
from memory_tui.core.paths import Layout, display_path, is_internal_top
from memory_tui.core.text import sanitize
from memory_tui.core.tokens import O200kCounter, TokenCounter

# ---------------------------------------------------------------------------------------
# View models (what the app renders). Everything textual in them is sanitised.


@dataclass(frozen=True)
class SourceLinkVM:
    label: str
    target: str
    source_id: str | None = None


@dataclass(frozen=True)
class EvidenceVM:
    id: str
    when: str | None  # raw time text ("2026-11", "undated" -> None)
    links: tuple[SourceLinkVM, ...] = ()


@dataclass(frozen=True)
class RecordVM:
    memory_id: str
    topic_path: str  # "topics/people/ada.md"
    headings: tuple[str, ...]
    body: str  # Markdown of the record paragraph: citations kept, block ids removed
    content: str  # plain content (citations removed)
    evidence: tuple[EvidenceVM, ...]
    when: str | None
    line: int
    tokens: int
    aliases: tuple[str, ...] = ()
    relation_targets: tuple[str, ...] = ()
    backlinks: tuple[str, ...] = ()

    @property
    def source_links(self) -> tuple[SourceLinkVM, ...]:
        seen: list[SourceLinkVM] = []
        for ev in self.evidence:
            for link in ev.links:
                if link not in seen:
                    seen.append(link)
        return tuple(seen)


@dataclass(frozen=True)
class TopicVM:
    path: str  # "topics/people/ada.md"
    title: str
    records: tuple[RecordVM, ...]
    problems: tuple[Problem, ...] = ()
    raw: str = ""  # sanitised file text (shown next to a parse error)


@dataclass(frozen=True)
class FrameVM:
    source_id: str
    speaker: str
    timestamp: str
    text: str
    trusted: bool
    pending: bool
    path: str  # workspace-relative archive path
    line: int

    @property
    def session_id(self) -> str | None:
        parts = self.source_id.split("/", 2)
        return parts[1] if len(parts) == 3 else None

    @property
    def node_id(self) -> str | None:
        parts = self.source_id.split("/", 2)
        return parts[2] if len(parts) == 3 else None


@dataclass(frozen=True)
class TimelineRowVM:
    when: str  # "2026", "2026-11" or "2026-11-30"
    memory_id: str
    topic_path: str
    text: str


@dataclass(frozen=True)
class CoreVM:
    inject: bool
    text: str  # the rendered root core.md (sanitised)
    tokens: int
    budget: int
    kept_ids: tuple[str, ...]
    omitted_ids: tuple[str, ...]
    records: tuple[RecordVM, ...]  # the source records in topics/core.md
    exists: bool = True

    @property
    def injected_text(self) -> str:
        """What reaches the system prompt: empty when injection is off or only headings."""
        if not self.inject:
            return ""
        body = self.text.strip()
        if not any(line.strip() and not line.startswith("# ") for line in body.splitlines()):
            return ""
        return body


@dataclass(frozen=True)
class StatusVM:
    last_outcome: str | None = None
    last_failure_code: str | None = None
    last_failure_at: str | None = None
    last_success_at: str | None = None
    pending_turns: int | None = None


@dataclass(frozen=True)
class SessionVM:
    session_id: str
    title: str
    pending: int | None
    nodes: int | None


@dataclass(frozen=True)
class WorkspaceModel:
    state_dir: Path
    display_dir: str
    state_exists: bool
    memory_exists: bool
    config: MemoryConfig
    workspace_id: str
    revision: str
    topics: tuple[TopicVM, ...] = ()
    timeline: tuple[TimelineRowVM, ...] = ()
    recent: tuple[RecordVM, ...] = ()
    core: CoreVM | None = None
    status: StatusVM = StatusVM()
    sessions: tuple[SessionVM, ...] = ()
    sessions_available: bool = False
    problems: tuple[Problem, ...] = ()
    engine: tuple[str, ...] = ()
    engine_errors: tuple[str, ...] = ()
    _frames: dict[str, FrameVM] = field(default_factory=dict, compare=False, repr=False)
    _frame_problems: dict[str, Problem] = field(default_factory=dict, compare=False, repr=False)

    # -- flags -------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self.config.enabled

    @property
    def writer_enabled(self) -> bool:
        return self.config.writer_enabled

    @property
    def empty(self) -> bool:
        return self.memory_exists and not any(t.records or t.problems for t in self.topics)

    @property
    def records(self) -> dict[str, RecordVM]:
        out: dict[str, RecordVM] = {}
        for topic in self.topics:
            for rec in topic.records:
                out.setdefault(rec.memory_id, rec)
                for alias in rec.aliases:
                    out.setdefault(alias, rec)
        if self.core:
            for rec in self.core.records:
                out.setdefault(rec.memory_id, rec)
        return out

    def topic(self, path: str) -> TopicVM | None:
        for t in self.topics:
            if t.path == path:
                return t
        if self.core and path == "topics/core.md":
            return TopicVM("topics/core.md", "Core", self.core.records)
        return None

    def frame(self, source_id: str) -> FrameVM | Problem:
        frame = self._frames.get(source_id)
        if frame is not None:
            return frame
        problem = self._frame_problems.get(source_id)
        if problem is not None:
            return problem
        return Problem("MISSING_SOURCE", f"source not found in the archive: {source_id}")


# ---------------------------------------------------------------------------------------
# Loading


def load_model(
    state_dir: Path,
    *,
    counter: TokenCounter | None = None,
    home: Path | None = None,
) -> WorkspaceModel:
    """Read the whole state directory into a ``WorkspaceModel``. Never raises for bad data."""
    counter = counter or O200kCounter()
    state_dir = Path(state_dir)
    shown = display_path(state_dir, home=home) if home is not None else display_path(state_dir)
    if not state_dir.is_dir():
        return WorkspaceModel(
            state_dir, shown, False, False, MemoryConfig(), "", "",
            problems=(Problem("STATE_NOT_FOUND", f"no OpenProgram state directory at {shown}"),),
        )
    config = load_memory_config(state_dir)
    memory = state_dir / "memory"
    problems: list[Problem] = list(config.problems)
    sessions, sessions_ok = _load_sessions(state_dir)
    status = _load_status(memory)
    if not memory.is_dir():
        return WorkspaceModel(
            state_dir, shown, True, False, config, "", "", status=status,
            sessions=sessions, sessions_available=sessions_ok, problems=tuple(problems),
        )
    layout = Layout(memory)
    frames, frame_problems, archive_problems = _load_sources(memory)
    problems.extend(archive_problems)
    topics, core_topic = _load_topics(memory, counter, frames)
    relations = _read_json(memory / "relations.json")
    backlinks = relations.get("backlinks", {}) if isinstance(relations, dict) else {}
    topics = tuple(_with_backlinks(t, backlinks) for t in topics)
    core_records = _with_backlinks(core_topic, backlinks).records if core_topic else ()
    all_records = {r.memory_id: r for t in topics for r in t.records}
    all_records.update({r.memory_id: r for r in core_records})
    for t in topics + ((core_topic,) if core_topic else ()):
        problems.extend(t.problems)
    model = WorkspaceModel(
        state_dir=state_dir,
        display_dir=shown,
        state_exists=True,
        memory_exists=True,
        config=config,
        workspace_id=_read_text(layout.workspace_id_file).strip(),
        revision=_revision(memory, layout.runtime_name),
        topics=topics,
        timeline=_timeline_rows(list(all_records.values()) ),
        recent=_recent(memory, all_records, config.recent_limit),
        core=_core(memory, config, counter, core_records, core_topic is not None),
        status=status,
        sessions=sessions,
        sessions_available=sessions_ok,
        problems=tuple(problems),
        engine=(),
        _frames=frames,
        _frame_problems=frame_problems,
    )
    return _overlay_engine(model, counter)


def _overlay_engine(model: WorkspaceModel, counter: TokenCounter) -> WorkspaceModel:
    """Replace preview answers with the engine's wherever the engine answers.

    Each part is independent: an engine part that fails keeps the preview's answer and is
    named in ``engine_errors`` (shown nowhere on screen; tests and bug reports read it).
    """
    used: list[str] = []
    errors: list[str] = []
    changes: dict[str, Any] = {}
    state = None
    try:
        from memory_tui.core.workspace import open_state

        state = open_state(model.state_dir, counter=counter)
        used.append("workspace")
        if state.revision:
            changes["revision"] = state.revision
        if state.workspace_id:
            changes["workspace_id"] = sanitize(state.workspace_id)
        topics = []
        for topic in model.topics:
            strict = tuple(p for p in state.problems_for(topic.path) if p.line is not None or p.code)
            topics.append(replace(topic, problems=strict) if strict else replace(topic, problems=()))
        changes["topics"] = tuple(topics)
        other = [p for p in state.problems if not (p.path or "").startswith("topics/") or p.path == "topics/core.md"]
        topic_problems = [p for t in topics for p in t.problems]
        merged: list[Problem] = []
        for p in list(model.config.problems) + other + topic_problems + [p for p in model.problems if p.code == "TRUNCATED_ARCHIVE"]:
            if p not in merged:  # Problems hold a dict, so no set()
                merged.append(p)
        changes["problems"] = tuple(merged)
        core = state.core
        if core is not None and model.core is not None:
            changes["core"] = replace(
                model.core,
                tokens=int(core.rendered_tokens),
                kept_ids=tuple(core.kept_ids),
                omitted_ids=tuple(core.omitted_ids),
                budget=int(core.budget),
            )
            used.append("core")
    except Exception as exc:  # pragma: no cover - depends on engine state
        errors.append(f"workspace: {type(exc).__name__}: {exc}")
    try:
        from dataclasses import replace as dc_replace

        from memory_tui.sessions.records import status_pending_count
        from memory_tui.sessions.store import load_sessions

        wid = changes.get("workspace_id", model.workspace_id)
        snapshot = load_sessions(model.state_dir)
        by_id = {s.session_id: s for s in model.sessions}
        sessions = []
        for sid, session in snapshot.sessions.items():
            one = status_pending_count(dc_replace(snapshot, sessions={sid: session}), wid)
            prev = by_id.get(sanitize(sid))
            title = prev.title if prev else sanitize(str(getattr(session, "title", "") or ""))
            nodes = prev.nodes if prev else None
            sessions.append(SessionVM(sanitize(sid), title, one.value if one.value is not None else one.lenient, nodes))
        changes["sessions"] = tuple(sorted(sessions, key=lambda s: s.session_id))
        changes["sessions_available"] = True
        if model.memory_exists:
            total = status_pending_count(snapshot, wid)
            changes["status"] = replace(model.status, pending_turns=total.value)
        used.append("sessions")
    except Exception as exc:  # pragma: no cover - depends on engine state
        errors.append(f"sessions: {type(exc).__name__}: {exc}")
    return replace(model, engine=tuple(used), engine_errors=tuple(errors), **changes)


# ---------------------------------------------------------------------------------------
# Preview reader (used for any part the engine does not provide yet)

_DEF = re.compile(r"^\[\^([A-Za-z0-9_-]+)\]:\s*(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_ID_SUFFIX = re.compile(r"((?:\s+\^[A-Za-z0-9-]+)+)\s*$")
_ANY_SUFFIX = re.compile(r"\s\^(\S+)\s*$")
_CITE = re.compile(r"\[\^([A-Za-z0-9_-]+)\]")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_TIME = re.compile(r"Time:\s*`?([^`;]*?)`?\s*;")
_BLOCK_LINK = re.compile(r"\]\(([^)#\s]*)#\^([A-Za-z0-9_-]+)\)")


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _revision(memory: Path, runtime_name: str) -> str:
    digest = hashlib.sha256()
    files: list[tuple[tuple[str, ...], Path]] = []
    for path in memory.rglob("*"):
        try:
            if path.is_symlink() or not path.is_file():
                continue
        except OSError:
            continue
        rel = path.relative_to(memory)
        parts = rel.parts
        if is_internal_top(parts[0]) and rel.as_posix() != f"{runtime_name}/runtime.json":
            continue
        files.append((parts, path))
    for parts, path in sorted(files):
        digest.update("/".join(parts).encode("utf-8") + b"\x00")
        try:
            digest.update(path.read_bytes())
        except OSError:
            pass
        digest.update(b"\x00")
    return digest.hexdigest()[:32]


_FRAME_HEAD = re.compile(
    r'<a id="(source-[0-9a-f]{16})"></a>\n<!-- source-id:(.*?) -->\n'
    r"(?:<!-- speaker-id:(.*?) -->\n)?(?:<!-- source-meta:([A-Za-z0-9_-]+) -->\n)?"
    r"<!-- record-lines:(\d{1,9}) -->\n"
)
_RECORD_LINE = re.compile(r"^\[([^\[\]]*)\]\s+(.*?): (.*)$", re.S)


def _decode_meta(token: str | None) -> dict[str, Any]:
    if not token:
        return {}
    import base64

    try:
        return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (ValueError, TypeError):
        return {}


def _load_sources(memory: Path) -> tuple[dict[str, FrameVM], dict[str, Problem], list[Problem]]:
    frames: dict[str, FrameVM] = {}
    frame_problems: dict[str, Problem] = {}
    problems: list[Problem] = []
    root = memory / "sources"
    if not root.is_dir():
        return frames, frame_problems, problems
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(memory).as_posix()
        text = _read_text(path)
        if "/_v2/" not in "/" + rel:
            continue
        pos = text.find("\n\n") + 2 if text.startswith("<!-- openprogram-source-archive:v2 -->") else -1
        if pos < 0:
            problems.append(Problem("TRUNCATED_ARCHIVE", "not a v2 source archive", rel, 1, 1))
            continue
        while pos < len(text):
            m = _FRAME_HEAD.match(text, pos)
            line = text.count("\n", 0, pos) + 1
            if not m:
                problems.append(
                    Problem("TRUNCATED_ARCHIVE", "invalid or truncated v2 archive: the valid prefix ends here", rel, line, 1)
                )
                break
            n = int(m.group(5))
            body_start = m.end()
            lines = text[body_start:].split("\n")
            if len(lines) <= n or n < 1:
                problems.append(Problem("TRUNCATED_ARCHIVE", "frame runs past the end of the file", rel, line, 1))
                frame_problems[m.group(2)] = problems[-1]
                break
            record = "\n".join(lines[:n])
            rm = _RECORD_LINE.match(record)
            meta = _decode_meta(m.group(4))
            trust = meta.get("trust_state", "trusted")
            if rm:
                ts, speaker, content = rm.group(1), rm.group(2), rm.group(3)
            else:
                ts, speaker, content = "", "", record
            frames[m.group(2)] = FrameVM(
                source_id=sanitize(m.group(2)),
                speaker=sanitize(speaker),
                timestamp=sanitize(ts),
                text=sanitize(content),
                trusted=trust == "trusted",
                pending=trust == "pending",
                path=rel,
                line=line,
            )
            pos = body_start + len("\n".join(lines[:n])) + 1
            if text.startswith("\n", pos):
                pos += 1
    return frames, frame_problems, problems


def _anchor_index(frames: dict[str, FrameVM]) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for sid, frame in frames.items():
        anchor = "source-" + hashlib.sha256(sid.encode("utf-8")).hexdigest()[:16]
        out[(frame.path, anchor)] = sid
    return out


def _resolve_target(topic_rel: str, target: str, anchors: dict[tuple[str, str], str]) -> str | None:
    if "#" not in target:
        return target if target.count("/") >= 2 else None
    path, frag = target.split("#", 1)
    base = PurePosixPath(topic_rel).parent
    parts: list[str] = []
    for part in (base / path).parts:
        if part == "..":
            if parts:
                parts.pop()
        elif part != ".":
            parts.append(part)
    return anchors.get(("/".join(parts), frag))


def _parse_evidence(fid: str, rest: str, topic_rel: str, anchors: dict[tuple[str, str], str]) -> EvidenceVM:
    tm = _TIME.search(rest)
    when = tm.group(1).strip() if tm else None
    if when == "undated":
        when = None
    links = tuple(
        SourceLinkVM(sanitize(label), target, _resolve_target(topic_rel, target, anchors))
        for label, target in _LINK.findall(rest)
    )
    return EvidenceVM(fid, when, links)


def parse_topic_preview(
    rel: str, text: str, counter: TokenCounter, anchors: dict[tuple[str, str], str]
) -> TopicVM:
    """A lenient reader of the committed topic grammar (memory spec §3) for display."""
    lines = text.split("\n")
    defs: dict[str, EvidenceVM] = {}
    for line in lines:
        m = _DEF.match(line)
        if m:
            defs[m.group(1)] = _parse_evidence(m.group(1), m.group(2), rel, anchors)
    title = PurePosixPath(rel).stem
    chain: list[str] = []
    records: list[RecordVM] = []
    problems: list[Problem] = []
    fenced = False
    para: list[str] = []
    para_start = 0
    para_chain: tuple[str, ...] = ()

    def flush() -> None:
        nonlocal para
        if not para:
            return
        joined = "\n".join(para)
        m = _ID_SUFFIX.search(joined)
        cites = list(dict.fromkeys(_CITE.findall(joined)))
        if not m:
            bad = _ANY_SUFFIX.search(joined)
            if bad and cites:
                msg = f"invalid block_id: {bad.group(1)}"
            elif cites and all(c.startswith("mem_") for c in cites):
                msg = ""
            else:
                msg = f"memory block ID required: {rel}"
            if msg:
                problems.append(Problem("INVALID_TOPIC_FORMAT", msg, rel, para_start, 1))
            para = []
            return
        ids = re.findall(r"\^([A-Za-z0-9-]+)", m.group(1))
        body = joined[: m.start()].rstrip()
        if not cites:
            problems.append(Problem("INVALID_TOPIC_FORMAT", f"memory source footnote required: {ids[-1]}", rel, para_start, 1))
        for fid in cites:
            if fid not in defs:
                col = lines[para_start - 1].find(f"[^{fid}]") + 1 or 1
                problems.append(Problem("INVALID_TOPIC_FORMAT", f"undefined footnote: {fid}", rel, para_start, col))
        evidence = tuple(defs[c] for c in cites if c in defs)
        content = " ".join(_CITE.sub("", body).split())
        when = next((e.when for e in evidence if e.when), None)
        records.append(
            RecordVM(
                memory_id=ids[-1],
                topic_path=rel,
                headings=para_chain,
                body=sanitize(body),
                content=sanitize(content),
                evidence=evidence,
                when=when,
                line=para_start,
                tokens=counter.count(joined),
                aliases=tuple(ids[:-1]),
                relation_targets=tuple(dict.fromkeys(t for _p, t in _BLOCK_LINK.findall(body))),
            )
        )
        para = []

    for no, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        if _DEF.match(line) or stripped.startswith("<!--") or stripped.startswith("<a ") or not stripped:
            flush()
            continue
        h = _HEADING.match(line)
        if h:
            flush()
            level = len(h.group(1))
            chain = chain[: level - 1] + [sanitize(h.group(2))]
            if level == 1 and not records:
                title = sanitize(h.group(2))
            continue
        if not para:
            para_start = no
            para_chain = tuple(chain)
        para.append(line)
    flush()
    if fenced:
        problems.append(Problem("INVALID_TOPIC_FORMAT", "unclosed code fence", rel, len(lines), 1))
    return TopicVM(rel, title, tuple(records), tuple(problems), sanitize(text))


def _load_topics(
    memory: Path, counter: TokenCounter, frames: dict[str, FrameVM]
) -> tuple[tuple[TopicVM, ...], TopicVM | None]:
    anchors = _anchor_index(frames)
    root = memory / "topics"
    topics: list[TopicVM] = []
    core: TopicVM | None = None
    if not root.is_dir():
        return (), None
    seen: set[str] = set()
    for path in sorted(root.rglob("*.md"), key=lambda p: p.relative_to(root).parts):
        if path.is_symlink() or not path.is_file():
            continue
        rel = path.relative_to(memory).as_posix()
        topic = parse_topic_preview(rel, _read_text(path), counter, anchors)
        dup = [r.memory_id for r in topic.records if r.memory_id in seen]
        seen.update(r.memory_id for r in topic.records)
        if dup:
            rec = next(r for r in topic.records if r.memory_id == dup[0])
            topic = replace(
                topic,
                problems=topic.problems
                + (Problem("INVALID_TOPIC_FORMAT", f"duplicate memory_id: {dup[0]}", rel, rec.line, 1),),
            )
        if rel == "topics/core.md":
            core = topic
        else:
            topics.append(topic)
    return tuple(topics), core


def _with_backlinks(topic: TopicVM, backlinks: dict[str, Any]) -> TopicVM:
    if not isinstance(backlinks, dict) or not backlinks:
        return topic
    recs = tuple(
        replace(r, backlinks=tuple(str(x) for x in backlinks.get(r.memory_id, ()) if isinstance(x, str)))
        for r in topic.records
    )
    return replace(topic, records=recs)


def _timeline_rows(records: Iterable[RecordVM]) -> tuple[TimelineRowVM, ...]:
    rows: list[TimelineRowVM] = []
    for rec in records:
        whens = [e.when for e in rec.evidence if e.when and _valid_when(e.when)]
        if not whens and rec.when and _valid_when(rec.when):
            whens = [rec.when]
        for when in dict.fromkeys(whens):
            rows.append(TimelineRowVM(when, rec.memory_id, rec.topic_path, rec.content))
    first_ref = {r.memory_id: (r.source_links[0].source_id or "") if r.source_links else "" for r in records}
    rows.sort(key=lambda row: (row.when, first_ref.get(row.memory_id, ""), row.memory_id))
    return tuple(rows)


def _valid_when(when: str) -> bool:
    return bool(re.fullmatch(r"[0-9]{4}(-[0-9]{2}(-[0-9]{2})?)?", when))


def _recent(memory: Path, records: dict[str, RecordVM], limit: int) -> tuple[RecordVM, ...]:
    out: list[RecordVM] = []
    try:
        lines = (memory / "recent_events.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        rec = records.get(str(item.get("memory_id"))) if isinstance(item, dict) else None
        if rec is not None:
            out.append(rec)
    out.reverse()  # newest first
    return tuple(out[:limit])


def _core(
    memory: Path, config: MemoryConfig, counter: TokenCounter, records: tuple[RecordVM, ...], master: bool
) -> CoreVM:
    raw = _read_text(memory / "core.md")
    text = sanitize(raw)
    kept: list[str] = []
    omitted: list[str] = []
    used = 0
    if master:
        used, kept, omitted = _core_budget(_read_text(memory / "topics" / "core.md"), config.core_budget_tokens, counter)
    return CoreVM(
        inject=config.core_inject,
        text=text,
        tokens=used if master else (counter.count(raw.strip()) if raw.strip() else 0),
        budget=config.core_budget_tokens,
        kept_ids=tuple(kept),
        omitted_ids=tuple(omitted),
        records=records,
        exists=bool(raw) or master,
    )


def _core_budget(master: str, budget: int, counter: TokenCounter) -> tuple[int, list[str], list[str]]:
    """Memory spec §8.4 on the master text (preview; the engine's CoreRender wins)."""
    master = re.sub(r"\]\(\.\./", "](", master)
    chunks: list[str] = []
    for chunk in re.split(r"\n[ \t]*\n", master):
        chunk = chunk.strip("\n")
        if not chunk:
            continue
        if chunks and _DEF.match(chunk):
            chunks[-1] += "\n\n" + chunk
        else:
            chunks.append(chunk)
    used = 0
    kept: list[str] = []
    omitted: list[str] = []
    stop = False
    for chunk in chunks:
        m = re.search(r"\^([A-Za-z0-9-]+)\s*$", chunk.split("\n\n")[0])
        cid = m.group(1) if m else None
        if stop:
            if cid:
                omitted.append(cid)
            continue
        cost = counter.count(chunk)
        if used + cost <= budget:
            used += cost
            if cid:
                kept.append(cid)
        else:
            stop = True
            if cid:
                omitted.append(cid)
    return used, kept, omitted


def _load_status(memory: Path) -> StatusVM:
    layout = Layout(memory)
    data = _read_json(layout.writer_status) if memory.is_dir() else None
    if not isinstance(data, dict) or data.get("version") != 1:
        return StatusVM()
    failure = data.get("last_failure") if isinstance(data.get("last_failure"), dict) else {}
    return StatusVM(
        last_outcome=data.get("last_outcome") if isinstance(data.get("last_outcome"), str) else None,
        last_failure_code=sanitize(str(failure.get("reason_code"))) if failure.get("reason_code") else None,
        last_failure_at=sanitize(str(failure.get("at"))) if failure.get("at") else None,
        last_success_at=sanitize(str(data.get("last_success_at"))) if data.get("last_success_at") else None,
        pending_turns=None,
    )


def _load_sessions(state_dir: Path) -> tuple[tuple[SessionVM, ...], bool]:
    root = state_dir / "sessions"
    out: list[SessionVM] = []
    if not root.is_dir():
        return (), False
    for d in sorted(root.iterdir()):
        if d.is_symlink() or not (d / "history").is_dir() or not (d / ".git").exists():
            continue
        meta = _read_json(d / "meta.json")
        title = meta.get("title") if isinstance(meta, dict) and isinstance(meta.get("title"), str) else ""
        try:
            nodes = sum(1 for p in (d / "history").iterdir() if p.suffix == ".json")
        except OSError:
            nodes = None
        out.append(SessionVM(sanitize(d.name), sanitize(title), None, nodes))
    return tuple(out), False


# ---------------------------------------------------------------------------------------
# Paths a watcher event touches -> which views to refresh


def affected_views(paths: Iterable[str]) -> set[str]:
    """Map changed paths (relative to the state dir, posix) to view names."""
    views: set[str] = set()
    for p in paths:
        if p.startswith("memory/"):
            views.update({"topics", "timeline", "recent", "core"})
        if p.startswith("sessions/"):
            views.add("sessions")
        if p == "config.json":
            views.update({"topics", "timeline", "recent", "core", "sessions"})
    return views
