"""The workspace's view models: what the app renders, frozen and already sanitised for the
terminal (``WorkspaceModel`` and the rows it holds), and what changed between two of them.

They are built by ``model/load.py``, the one place the app reads the engine from; the screens
only ever see these objects. Everything the app shows comes from one engine snapshot
(``core.workspace.StateView``) and one session snapshot (``sessions.store.SessionSnapshot``),
the same objects the CLI verbs read, so the TUI and the CLI cannot disagree.

View models of unchanged topics are reused as the very same objects across reloads, so
``changed_views(old, new)`` (per-view fingerprints) is cheap and exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from memory_tui.core.format.config import MemoryConfig
from memory_tui.core.format.errors import Problem
from memory_tui.core.format.text import sanitize
from memory_tui.core.format.tokens import TokenCounter

if TYPE_CHECKING:  # pragma: no cover - sessions-ui
    from .sessions import SessionsModel

from ..views import VIEWS as VIEW_NAMES  # noqa: E402 (one list of the view names)
CORE_TOPIC = "topics/core.md"

# ---------------------------------------------------------------------------------------
# View models (what the app renders). Everything textual in them is sanitised.


@dataclass(frozen=True, slots=True)  # 20 000+ of each alive
class SourceLinkVM:
    label: str
    target: str
    source_id: str | None = None


@dataclass(frozen=True, slots=True)  # 20 000+ of each alive
class EvidenceVM:
    id: str
    when: str | None  # the evidence time as written ("2026-11"); None when undated
    links: tuple[SourceLinkVM, ...] = ()


@dataclass(frozen=True, slots=True)  # 20 000+ of each alive
class RecordVM:
    memory_id: str  # the paragraph's identity (its last block id)
    topic_path: str  # "topics/people/ada.md"
    headings: tuple[str, ...]
    body: str  # Markdown of the record paragraph: citations kept, block ids removed
    content: str  # plain content (citations removed)
    evidence: tuple[EvidenceVM, ...]
    when: str | None  # first dated evidence time (never a file time)
    line: int
    tokens: int
    aliases: tuple[str, ...] = ()  # the paragraph's other block ids
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

    @property
    def ids(self) -> tuple[str, ...]:
        return self.aliases + (self.memory_id,)


@dataclass(frozen=True)
class TopicVM:
    path: str  # "topics/people/ada.md"
    title: str
    records: tuple[RecordVM, ...]
    problems: tuple[Problem, ...] = ()  # errors: OpenProgram refuses writes until fixed
    raw: str = ""  # sanitised file text (only kept when there are errors, to show them)
    warnings: tuple[Problem, ...] = ()  # accepted by OpenProgram, refused by our normaliser
    # set only on an outline model's topics (``records`` is empty there).
    outline_records: int | None = None

    @property
    def record_count(self) -> int:
        """How many records the Topics list shows for this file (the outline's preview count
        until the real parse is in)."""
        return len(self.records) if self.outline_records is None else self.outline_records

    @property
    def block_ids(self) -> tuple[str, ...]:
        """Every block id in file order, aliases included (``memory-tui topics`` counts these)."""
        return tuple(i for r in self.records for i in r.ids)


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


@dataclass(frozen=True, slots=True)  # 20 000+ of each alive
class TimelineRowVM:
    when: str  # "2026", "2026-11" or "2026-11-30"
    memory_id: str
    topic_path: str
    text: str  # the annotation the row is about (what the timeline file shows)


@dataclass(frozen=True)
class CoreVM:
    inject: bool  # memory.core.inject
    text: str  # root core.md as it is on disk (sanitised); what OpenProgram injects
    tokens: int  # rendered tokens (engine CoreRender; the injected text when no master)
    budget: int
    kept_ids: tuple[str, ...]
    omitted_ids: tuple[str, ...]  # past the token budget
    records: tuple[RecordVM, ...]  # the source records in topics/core.md
    exists: bool = True
    pending_ids: tuple[str, ...] = ()  # skipped: they cite a source that is not trusted
    injected: bool = False  # does anything reach the system prompt
    injected_tokens: int = 0
    reason: str = ""  # engine's reason when nothing is injected
    stale: bool = False  # root core.md differs from what topics/core.md renders
    master: bool = False  # topics/core.md exists

    def status_of(self, memory_id: str) -> str | None:
        if memory_id in self.kept_ids:
            return "kept"
        if memory_id in self.omitted_ids:
            return "omitted"
        if memory_id in self.pending_ids:
            return "pending"
        return None


@dataclass(frozen=True)
class StatusVM:
    last_outcome: str | None = None
    last_failure_code: str | None = None
    last_failure_at: str | None = None
    last_success_at: str | None = None
    pending_turns: int | None = None  # OpenProgram's count (None where OpenProgram says null)
    pending_lenient: int | None = None  # the same count skipping nodes that make it raise


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
    # False while the app's loader has not read sessions yet; then
    # ``sessions`` is empty and ``status.pending_turns`` is None until ``with_sessions`` runs.
    sessions_loaded: bool = True
    # True for the app's first frame, painted from ``outline_model``: the
    # topic list (paths, titles, record counts) and nothing else; the real model follows.
    outline: bool = False
    problems: tuple[Problem, ...] = ()  # errors only (warnings stay on their topic)
    engine_errors: tuple[str, ...] = ()  # an engine part that raised (should stay empty)
    # Engine snapshots and caches carried to the next reload (never compared).
    state: Any = field(default=None, compare=False, repr=False)  # core.workspace.StateView
    session_snapshot: Any = field(default=None, compare=False, repr=False)  # SessionSnapshot
    fingerprints: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    _records: dict[str, RecordVM] = field(default_factory=dict, compare=False, repr=False)
    _frames: dict[str, FrameVM | Problem] = field(default_factory=dict, compare=False, repr=False)
    _cache: Any = field(default=None, compare=False, repr=False)  # load._Cache (load imports this module)
    # sessions-ui: the Sessions view's explanations, built on first use from this snapshot.
    _sessions_view: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # -- flags -------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self.config.enabled

    @property
    def writer_enabled(self) -> bool:
        return self.config.writer_enabled

    @property
    def empty(self) -> bool:
        return self.memory_exists and not any(t.record_count or t.problems for t in self.topics)

    @property
    def records(self) -> dict[str, RecordVM]:
        """Every record by block id (aliases included), core records too."""
        return self._records

    def topic(self, path: str) -> TopicVM | None:
        for t in self.topics:
            if t.path == path:
                return t
        if self.core and path == CORE_TOPIC:
            return TopicVM(CORE_TOPIC, "Core", self.core.records)
        return None

    def frame(self, source_id: str) -> FrameVM | Problem:
        """The archived turn a citation names, or a Problem saying why there is none."""
        hit = self._frames.get(source_id)
        if hit is not None:
            return hit
        out = _frame_vm(self.state, source_id)
        self._frames[source_id] = out  # a memo on an immutable snapshot
        return out

    # -- sessions-ui: the Sessions view ---------------------------------------------------
    def sessions_view_built(self) -> "SessionsModel | None":
        """The Sessions view's model if ``sessions_view`` has built it already (never builds)."""
        return self._sessions_view.get("model")

    def sessions_view_heavy(self) -> bool:
        """Whether building ``sessions_view`` may take long: sessions held as summaries whose
        nodes are many (it reads every session's files), or a session big enough that its overview is a sweep of
        its whole DAG when the overview table misses (the Sessions screen builds it in a
        worker then)."""
        from memory_tui.sessions.ondemand import is_on_demand
        from memory_tui.sessions.overview_table import MIN_NODES

        snap = self.session_snapshot
        if is_on_demand(snap):
            # the view reads every session's files first: inline only when they are few
            return sum(snap.node_counts().values()) >= MIN_NODES
        return snap is not None and any(len(s.nodes) >= MIN_NODES for s in snap.sessions.values())

    def sessions_view(self, now: float, counter: TokenCounter | None = None) -> "SessionsModel | None":
        """Every session's explanation (``tui.model.sessions``) for this snapshot, built once
        (the reasons engine is the expensive part); ``None`` when sessions/ could not be read.
        ``now`` is fixed by the first call: it decides "idle", and one snapshot tells one story."""
        if self.session_snapshot is None or not self.state_exists:
            return None
        hit = self._sessions_view.get("model")
        if hit is None:
            from memory_tui.sessions.ondemand import full_snapshot

            from .sessions import SessionsModel

            # The model holds the sessions' summaries; the view explains every session's
            # nodes, so it reads them all now and holds them only while it is built.
            hit = SessionsModel.load(
                self.state_dir, now=now, counter=counter, records=self._records.values(),
                snapshot=full_snapshot(self.session_snapshot), frame=self.frame,
            )
            self._sessions_view["model"] = hit
        return hit

    def drop_sessions_view(self) -> None:
        """Forget the Sessions view's model (every session's nodes and explanation): the
        view left the screen; the next ``sessions_view`` reads them again."""
        self._sessions_view.pop("model", None)


# -- sources ------------------------------------------------------------------------------


def _frame_vm(state: Any, source_id: str) -> FrameVM | Problem:
    sources = state.sources if state is not None else None
    frame = sources.frame(source_id) if sources is not None else None
    if frame is not None:
        return FrameVM(
            source_id=sanitize(frame.source_id),
            speaker=sanitize(frame.speaker_label),
            timestamp=sanitize(frame.timestamp),
            text=sanitize(frame.text),
            trusted=bool(frame.trusted),
            pending=bool(frame.pending),
            path=sanitize(frame.path),
            line=frame.line,
        )
    if sources is not None:
        from memory_tui.core.format.sources import archive_path, is_v2_valid_id

        if is_v2_valid_id(source_id):
            rel = archive_path(source_id)
            entry = sources.files.get(rel)
            if entry is not None and entry.problem is not None:
                p = entry.problem
                return Problem(
                    p.code, f"{sanitize(p.message)}; the archive's valid prefix ends before this frame", p.path, p.line, p.column
                )
    return Problem("MISSING_SOURCE", f"source not found in the archive: {sanitize(source_id)}")


# ---------------------------------------------------------------------------------------
# What changed between two models


def _fingerprints(model: WorkspaceModel) -> dict[str, Any]:
    """Per view, the values its rendering depends on (compared with ``==``; unchanged parts
    are the very same objects, so comparing is cheap)."""
    state = model.state
    sources = ()
    if state is not None and state.sources is not None:
        sources = tuple(sorted((k, v.key) for k, v in state.sources.files.items()))
    return {
        "topics": (model.topics, model.problems, sources),
        "timeline": (model.timeline,),
        "recent": (model.recent, sources),
        "core": (model.core, sources),
        "sessions": (model.sessions, sources),
    }


def changed_views(old: WorkspaceModel | None, new: WorkspaceModel) -> set[str]:
    """The views whose data differ between two models (all of them for a first load or a
    change of state, memory folder or config)."""
    if (
        old is None
        or old.state_exists != new.state_exists
        or old.memory_exists != new.memory_exists
        or old.config != new.config
        or not old.fingerprints
        or not new.fingerprints
    ):
        return set(VIEW_NAMES)
    return {v for v in VIEW_NAMES if old.fingerprints.get(v) != new.fingerprints.get(v)}


def header_changed(old: WorkspaceModel | None, new: WorkspaceModel) -> bool:
    """Does the header or banner line need a redraw?"""
    if old is None:
        return True
    return (
        old.revision != new.revision
        or old.workspace_id != new.workspace_id
        or old.status != new.status
        or old.config != new.config
        or old.problems != new.problems
        or old.state_exists != new.state_exists
        or old.memory_exists != new.memory_exists
    )


def core_chunks(text: str) -> list[str]:
    """The blocks of a rendered core.md, as OpenProgram splits them (for the Core filter)."""
    from memory_tui.core.format.views import split_core_chunks

    return [chunk for chunk, _block_id in split_core_chunks(text)]
