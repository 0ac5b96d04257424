"""What every job (write, reorganize, backfill, migrate) shares: the injected ``Context``,
typed progress (``JobEvent``), cancellation (``JobCancelled``), the write lock and the
workspace helpers.

Jobs report progress as ``JobEvent``s through ``Context.progress`` (the CLI draws them as a
rich progress display, the app posts them as messages) and call ``Context.checkpoint()``
between batches and before each transaction: when the caller's ``cancelled()`` says so, the
job stops there with ``JobCancelled``, so every transaction already made is whole and none
is begun.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import tzinfo
from enum import StrEnum
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable

from memory_tui.core.store import gitlog
from memory_tui.core.format.config import MemoryConfig, load_memory_config
from memory_tui.core.format.errors import MemoryError
from memory_tui.core.store.confine import workspace_root
from memory_tui.core.store.lock import TIMEOUT_ONLINE, write_lock
from memory_tui.core.format.paths import Layout
from memory_tui.core.format.sources import SourceIndex
from memory_tui.core.format.tokens import DEFAULT_COUNTER, TokenCounter
from memory_tui.core.format.topics import parse_tree
from memory_tui.core.store.workspace import read_workspace_id, workspace_revision
from memory_tui.pipeline import status as st
from memory_tui.pipeline.reports import JobReport
from memory_tui.pipeline.settings import WriterSettings
from memory_tui.pipeline.txport import TransactionPort
from memory_tui.pipeline.writers import make_writer
from memory_tui.pipeline.writers.base import Writer, WriterOutcome, WriteTask
from memory_tui.sessions.store import SessionSnapshot, load_sessions


class JobPhase(StrEnum):
    """The step a job is at. Its value is the plain word, so progress lines, ``--json`` and
    comparisons with a string read as before."""

    STARTING = "starting"  # the app's placeholder until a job's first event
    BATCH = "batch"  # write: one batch of a branch
    WRITER = "writer"  # write: the writer runs on that batch
    ORGANIZE = "organize"
    BACKFILL = "backfill"
    MIGRATE = "migrate"
    WARNING = "warning"  # not a step: something the owner should read


@dataclass(frozen=True)
class JobEvent:
    """One progress step: ``phase``, ``done`` of ``total`` units (``total`` None: not known
    ahead). A phase given as its word is taken as that ``JobPhase`` (an unknown word fails)."""

    phase: JobPhase
    done: int = 0
    total: int | None = None
    message: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "phase", JobPhase(self.phase))


class JobCancelled(BaseException):
    """The caller asked the job to stop; raised at the next safe point (no transaction open).

    A ``BaseException`` like ``KeyboardInterrupt``: the jobs' ``except Exception`` handlers
    classify writer failures and must not turn a cancel into one.
    """

    def __init__(self, phase: JobPhase, done: int = 0, result: JobReport | None = None) -> None:
        super().__init__(f"cancelled during {phase} after {done} step(s)")
        self.phase = JobPhase(phase)
        self.done = done
        self.result = result  # the job's partial report, when it has one


def _never() -> bool:
    return False


@dataclass
class Context:
    """Everything a job needs, injected so tests and the demo are deterministic."""

    state_dir: Path
    counter: TokenCounter = DEFAULT_COUNTER
    clock: Callable[[], float] = time.time
    tz: tzinfo | None = None  # record timestamps' zone; None = the machine's local zone
    settings: WriterSettings = field(default_factory=WriterSettings)
    writer: Writer | None = None
    config: MemoryConfig | None = None
    git_env: dict[str, str] | None = None
    id_factory: Callable[[], str] = lambda: uuid.uuid4().hex[:8]
    progress: Callable[[JobEvent], None] | None = None
    cancelled: Callable[[], bool] = _never
    lock_seconds: float = TIMEOUT_ONLINE
    # sessions this process has just read (a ``SessionSnapshot``): a node file whose stamp has
    # not moved since is taken from it instead of being read and parsed again (the Sessions
    # view's dry run of a 10 000-node session read every node file twice more)
    sessions_read: Any = None

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir)
        if self.config is None:
            self.config = load_memory_config(self.state_dir)
        if self.writer is None:
            self.writer = make_writer(self.settings)

    @property
    def memory_root(self) -> Path:
        # resolved once per job: a linked memory folder is followed on purpose, and every
        # write of the job stays in the tree it resolved to (confine.workspace_root)
        root = self.__dict__.get("_memory_root")
        if root is None:
            root = self.__dict__["_memory_root"] = workspace_root(self.state_dir / "memory")
        return root

    @property
    def layout(self) -> Layout:
        return Layout(self.memory_root)

    @property
    def threshold(self) -> int:
        assert self.config is not None  # set in __post_init__
        return int(self.config.trigger_tokens)

    def emit(self, phase: JobPhase, done: int = 0, total: int | None = None, message: str = "") -> None:
        if self.progress is not None:
            self.progress(JobEvent(phase, done, total, message))

    def checkpoint(self, phase: JobPhase, done: int = 0, result: JobReport | None = None) -> None:
        """A safe point: stop here with ``JobCancelled`` if the caller cancelled."""
        if self.cancelled():
            raise JobCancelled(phase, done, result)


def locked(ctx: Context, seconds: float | None = None) -> ContextManager[Any]:
    """The workspace write lock (``ctx.lock_seconds`` unless told otherwise)."""
    ctx.layout.runtime_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    return write_lock(ctx.memory_root, seconds if seconds is not None else ctx.lock_seconds)


def revision(memory_root: Path) -> str:
    return workspace_revision(memory_root)


def ensure_workspace(ctx: Context) -> str:
    """Create the workspace skeleton and id if needed (call under the lock); returns the id."""
    root = ctx.memory_root
    for d in (ctx.state_dir, root, root / "topics", root / "sources", ctx.layout.runtime_dir):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    wid = read_workspace_id(root)
    if wid is None:
        wid = "w-" + ctx.id_factory()[:8]
        st.atomic_write(ctx.layout.workspace_id_file, (wid + "\n").encode("ascii"))
    try:
        reason = gitlog.ensure_history(root, env=ctx.git_env)
        if reason:
            ctx.emit(JobPhase.WARNING, message=f"git history unavailable: {reason}")
    except MemoryError as exc:
        ctx.emit(JobPhase.WARNING, message=str(exc))
    return wid


def workspace_id_or_none(ctx: Context) -> str | None:
    return read_workspace_id(ctx.memory_root)


def git_commit(ctx: Context, message: str) -> None:
    """Commit, and refuse to call the write a success when git holds nothing of it: the memory
    stays installed (and marked), ``git-pending`` stays, and the next locked open commits it."""
    outcome = gitlog.commit(ctx.memory_root, message, env=ctx.git_env)
    if outcome.committed or outcome.nothing_to_commit or outcome.not_a_repo:
        return
    raise MemoryError("GIT_COMMIT_FAILED", f"memory installed and turns marked, but git refused the commit: {outcome.error}",
                      details={"memory_committed": True, "git_committed": False})


def load_snapshot(ctx: Context, previous: SessionSnapshot | None = None, *, only: Iterable[str] | None = None) -> SessionSnapshot:
    """The sessions (``only``: just those ids, each equal to its counterpart in a full load)."""
    return load_sessions(ctx.state_dir, previous if previous is not None else ctx.sessions_read, only=only)


def topic_tree(memory_root: Path):
    """The parsed topic tree, citations resolved against the source archives."""
    index = SourceIndex.load(memory_root)
    return parse_tree(memory_root / "topics", resolve=index.resolve_target)


def topics_cite_any(memory_root: Path, source_ids: Iterable[str]) -> bool:
    from memory_tui.sessions.marks import batch_cited  # the same test the marks intent uses

    return batch_cited(memory_root, source_ids)


def run_writer(ctx: Context, task: WriteTask, *, restricted: bool = True) -> WriterOutcome:
    """Run ``ctx.writer`` on ``task`` through a transaction port; its runs (and the commit
    audit) always reach ``agent-history.jsonl``, also when it raises."""
    from memory_tui.pipeline.bounded import bound_task

    task = bound_task(task, ctx.threshold, ctx.counter)  # one call never gets an unbounded turn
    port = TransactionPort(ctx.memory_root, restricted=restricted, counter=ctx.counter)
    writer = ctx.writer
    assert writer is not None  # set in __post_init__
    try:
        outcome = writer.write(task, port)
    except BaseException as exc:
        st.append_history(ctx.layout.runtime_dir, _with_audit(list(getattr(writer, "history", None) or []), port, task.stage, exc))
        raise
    st.append_history(ctx.layout.runtime_dir, _with_audit(list(outcome.history or []), port, task.stage))
    return outcome


def _with_audit(history: list[dict[str, Any]], port: TransactionPort, stage: str,
                error: BaseException | None = None) -> list[dict[str, Any]]:
    """Commit audit entries (§5.5) a writer did not put into its own run entries go into the
    ``turns`` of its last run (or a run entry of their own), so agent-history never loses one."""
    left = port.take_audit()
    if not left:
        return history
    if not history:
        if error is not None:
            return [st.history_entry(stage, "", "", error=f"{type(error).__name__}: {error}", turns=left)]
        return [st.history_entry(stage, "", "", reply="", turns=left)]
    last = dict(history[-1])
    last["turns"] = list(last.get("turns") or []) + left
    return history[:-1] + [last]


__all__ = [
    "Context",
    "JobCancelled",
    "JobEvent",
    "JobPhase",
    "ensure_workspace",
    "git_commit",
    "load_snapshot",
    "locked",
    "revision",
    "run_writer",
    "topic_tree",
    "topics_cite_any",
    "workspace_id_or_none",
]
