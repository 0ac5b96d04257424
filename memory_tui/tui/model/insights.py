"""The insight widgets' adapter: engine results (memory_tui.insights) to frozen, sanitised view
models. Text that came from disk passes through ``sanitize`` here, once, so no widget ever
draws a terminal control sequence; diffs are computed here with ``difflib`` so widgets only
draw lines.

The entry points at the end (``load_insights``, ``record_alternatives``, ``target_history``,
the revert) run the insights engine on a loaded ``WorkspaceModel``'s snapshots, in workers:
the figures follow the first paint, never delay it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from memory_tui.core.format.text import sanitize
from memory_tui.insights.alternatives import AlternativePair, AlternativeSide
from memory_tui.insights.evidence import COUNT_FIELDS, SORT_KEYS, EvidenceFigures, sort_evidence
from memory_tui.insights.history import History, Version
from memory_tui.insights.summary import InsightSummary

if TYPE_CHECKING:  # pragma: no cover
    from .data import WorkspaceModel

EVIDENCE_SORTS = tuple(SORT_KEYS)  # "weakest", "sessions", "days", "branches", "pending", "topic", "id"


def one_line(text: str | None, width: int | None = None) -> str:
    line = " ".join(sanitize(text or "").split())
    if width is not None and len(line) > width:
        line = line[: max(width - 1, 0)] + "\u2026"
    return line


# ------------------------------------------------------------------------------- evidence


_COUNTS = attrgetter(*COUNT_FIELDS)


@dataclass(frozen=True, slots=True)
class EvidenceRowVM(EvidenceFigures):
    """The engine's figures of one record, its text sanitised (``content`` on one line); the
    engine's sort keys and ``strength`` apply as they are."""

    @classmethod
    def of(cls, r: EvidenceFigures) -> "EvidenceRowVM":
        return cls(sanitize(r.memory_id), sanitize(r.topic_path), r.line, one_line(r.content), *_COUNTS(r))


def evidence_rows(rows: Iterable[EvidenceFigures]) -> tuple[EvidenceRowVM, ...]:
    return tuple(EvidenceRowVM.of(r) for r in rows)


def sort_rows(rows: Iterable[EvidenceRowVM], key: str = "weakest", *, reverse: bool = False) -> list[EvidenceRowVM]:
    """The engine's orders (:data:`memory_tui.insights.evidence.SORT_KEYS`) over view rows."""
    return sort_evidence(rows, key, reverse=reverse)  # type: ignore[arg-type] - the same figures


# ------------------------------------------------------------------------------- history


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "hunk" | "add" | "remove" | "context"
    text: str


def diff_lines(old: str | None, new: str | None, *, context: int = 3) -> tuple[DiffLine, ...]:
    """A unified diff of two texts as typed lines (no file headers). ``None`` = absent.

    Built on ``model.diff.unified_rows``: the app has one diff computation."""
    from .diff import unified_rows

    kinds = {"@": "hunk", "+": "add", "-": "remove", " ": "context"}
    a = sanitize(old) if old is not None else ""
    b = sanitize(new) if new is not None else ""
    return tuple(DiffLine(kinds[r.kind], r.text) for r in unified_rows(a, b, context=context) if r.kind != "=")


@dataclass(frozen=True)
class VersionVM:
    commit: str
    short: str
    date: str  # YYYY-MM-DD HH:MM
    actor: str
    actor_detail: str | None
    subject: str
    topic_path: str | None
    text: str | None  # sanitised; None = removed at this commit

    @property
    def removed(self) -> bool:
        return self.text is None

    @classmethod
    def of(cls, v: Version) -> "VersionVM":
        date = v.date.replace("T", " ")[:16]
        return cls(v.commit, v.commit[:10], date, v.actor, one_line(v.actor_detail) or None, one_line(v.subject),
                   sanitize(v.topic_path) if v.topic_path else None, sanitize(v.text) if v.text is not None else None)


@dataclass(frozen=True)
class HistoryVM:
    kind: str  # "record" | "topic"
    target: str
    versions: tuple[VersionVM, ...]  # newest first
    problems: tuple[str, ...] = ()

    @classmethod
    def of(cls, h: History) -> "HistoryVM":
        return cls(h.kind, sanitize(h.target), tuple(VersionVM.of(v) for v in h.versions),
                   tuple(one_line(p) for p in h.problems))

    def texts(self, index: int) -> tuple[str | None, str | None]:
        """(the next older version's text, version ``index``'s text); ``None`` = absent."""
        new = self.versions[index]
        old = self.versions[index + 1] if index + 1 < len(self.versions) else None
        return (old.text if old is not None else None), new.text

    def diff(self, index: int) -> tuple[DiffLine, ...]:
        """What version ``index`` changed against the one before it (the next older)."""
        new = self.versions[index]
        old = self.versions[index + 1] if index + 1 < len(self.versions) else None
        return diff_lines(old.text if old is not None else None, new.text)


# ------------------------------------------------------------------------------- alternatives


@dataclass(frozen=True)
class AlternativeSideVM:
    memory_id: str
    topic_path: str
    content: str
    node_id: str
    on_head: bool

    @classmethod
    def of(cls, s: AlternativeSide) -> "AlternativeSideVM":
        return cls(sanitize(s.memory_id), sanitize(s.topic_path), one_line(s.content), sanitize(s.node_id), s.on_head)


@dataclass(frozen=True)
class AlternativePairVM:
    session_id: str
    fork_point: str
    head_id: str | None
    head_side: str | None  # "a" | "b" | None
    a: AlternativeSideVM
    b: AlternativeSideVM

    @classmethod
    def of(cls, p: AlternativePair) -> "AlternativePairVM":
        return cls(sanitize(p.session_id), sanitize(p.fork_point), sanitize(p.head_id) if p.head_id else None,
                   p.head_side, AlternativeSideVM.of(p.a), AlternativeSideVM.of(p.b))


def alternative_pairs(pairs: Iterable[AlternativePair]) -> tuple[AlternativePairVM, ...]:
    return tuple(AlternativePairVM.of(p) for p in pairs)


# ------------------------------------------------------------------------------- header


@dataclass(frozen=True)
class InsightCountsVM:
    """The header's three counts; each names the list it opens (``EvidenceList`` sort key or
    the alternatives list)."""

    records: int
    single_episode: int
    alternatives: int  # records that have an alternative
    pending_sources: int

    @classmethod
    def of(cls, s: InsightSummary) -> "InsightCountsVM":
        return cls(s.records, len(s.single_episode), len(s.alternative_records), len(s.pending_sources))

    def phrases(self) -> tuple[tuple[str, str], ...]:
        """(text, target) pairs for the header; target: "single" | "alternatives" | "pending"."""
        def n(count: int, one: str, many: str) -> str:
            return f"{count} {one if count == 1 else many}"

        return (
            (n(self.single_episode, "single-episode record", "single-episode records"), "single"),
            (n(self.alternatives, "record with an alternative", "records with alternatives"), "alternatives"),
            (n(self.pending_sources, "record citing pending sources", "records citing pending sources"), "pending"),
        )


def view_models(summary: InsightSummary) -> tuple[tuple[EvidenceRowVM, ...], InsightCountsVM]:
    """What the Evidence list and the header need, from one
    :func:`memory_tui.insights.summary.summarize` call (the alternatives list is built on
    demand with :func:`alternative_pairs` over :func:`memory_tui.insights.alternatives.alternatives`)."""
    return evidence_rows(summary.evidence), InsightCountsVM.of(summary)


# ---------------------------------------------------------------------------------------
# evidence, history + revert, alternatives. Computed off the first
# paint (``summarize`` costs ~1.5 s on 20 000 records): the app calls ``load_insights`` in a
# worker after a model lands, and the header/badges appear when it is ready.


@dataclass(frozen=True)
class InsightsVM:
    revision: str  # the model revision the figures belong to
    rows: tuple[Any, ...]  # insights_model.EvidenceRowVM, one per record
    counts: Any  # insights_model.InsightCountsVM
    lists: Mapping[str, frozenset[str]] = field(default_factory=dict)  # "single" | "pending" | "alternatives" -> ids
    by_id: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def row(self, memory_id: str) -> Any:
        return self.by_id.get(memory_id)

    def rows_in(self, which: str | None) -> tuple[Any, ...]:
        """The rows of one header list (``None``: every record)."""
        if which is None:
            return self.rows
        ids = self.lists.get(which, frozenset())
        return tuple(r for r in self.rows if r.memory_id in ids)


def insights_key(model: WorkspaceModel) -> tuple[Any, ...]:
    """What a model's insight figures depend on: its memory revision and its sessions (the
    first stage's model has none yet; turns can arrive without a new revision)."""
    return (model.revision, model.sessions_loaded, model.fingerprints.get("sessions"))


def load_insights(model: WorkspaceModel) -> InsightsVM | None:
    """The insight figures of ``model``'s snapshot; ``None`` when there is no memory. (The
    app takes them through ``kept_insights.load_insights``, which keeps them across starts.)"""
    if model.state is None or not model.memory_exists:
        return None
    from memory_tui.insights.summary import summarize

    summary = summarize(model.state, model.session_snapshot)
    rows, counts = view_models(summary)
    lists = {
        "single": frozenset(summary.single_episode),
        "pending": frozenset(summary.pending_sources),
        "alternatives": frozenset(summary.alternative_records),
    }
    return InsightsVM(model.revision, rows, counts, lists, {r.memory_id: r for r in rows})


def record_alternatives(model: WorkspaceModel, memory_id: str | None = None) -> tuple[Any, ...]:
    """The alternative pairs (``AlternativePairVM``) that ``memory_id`` is in (every pair with
    ``None``). Built on demand: the full pair list can be large, the header only counts."""
    if model.state is None or not model.memory_exists:
        return ()
    from memory_tui.insights.alternatives import alternatives

    pairs = alternatives(model.state, model.session_snapshot)
    if memory_id is not None:
        pairs = tuple(p for p in pairs if memory_id in (p.a.memory_id, p.b.memory_id))
    return alternative_pairs(pairs)


def target_history(model: WorkspaceModel, target: str) -> Any:
    """``HistoryVM`` of a record (``^id`` or ``id``) or topic path; raises ``MemoryError``."""
    from memory_tui.insights.history import history

    return HistoryVM.of(history(model.state, target))


def plan_target_revert(model: WorkspaceModel, target: str, commit: str) -> Any:
    """``RevertPlan`` for the confirm dialog; raises ``MemoryError`` when it cannot be planned."""
    from memory_tui.insights.history import plan_revert

    return plan_revert(model.state, target, commit)


def revert_target(model: WorkspaceModel, target: str, commit: str, base_revision: str | None,
                  git_env: Mapping[str, str] | None = None) -> Any:
    """Install the revert through the transactional core (``RevertResult``; never raises for a
    refusal). ``base_revision`` is the revision the owner confirmed against."""
    from memory_tui.insights.history import revert

    return revert(model.state, target, commit, base_revision=base_revision, git_env=git_env)
