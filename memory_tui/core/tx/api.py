"""The entry points of the one transaction path every change to the memory workspace goes
through: stage → (change) → normalise → validate → rebuild views → plan → crash-safe install
→ git.

* ``staged_edit``   hand edit / delete of one ``topics/**/*.md`` (editor, CLI ``edit``).
* ``update``        OpenProgram's structured transaction (§5.3): compare-and-set on revision.
* ``open_stage`` + ``commit_edits``   writers (agent commit, §5.5).
* ``rebuild_views`` ``views --rebuild``.
* ``validate_only=True`` on any of them: the same checks, nothing installed.

Each entry point makes a stage and a ``Context`` (its citation rule, see ``context``) and
hands them to ``optimistic.transact``; a writer's stage is prepared and finished directly.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping

from ..format.errors import MemoryError, Problem
from ..format.paths import check_writable
from ..store import gitlog, noopcache
from ..store.lock import TIMEOUT_DEFAULT, TIMEOUT_EDIT, write_lock
from ..switches import Switches, current as current_switches
from .context import (RULE_FILES, RULE_HAND, RULE_ORGANIZE, RULE_RECORDS, RULE_WRITER, Context, counter_or_default,
                      ensure_git, git_mode)
from .noop import NoopMismatch, known_noop
from .result import TxResult
from .roots import memory_root, open_locked

if TYPE_CHECKING:
    from .provenance import Provenance
    from .stage import Stage

# The staging, normalising, validating and installing code is imported where a transaction
# first needs it, not with this module: a hand edit answered from the remembered no-op verdict
# (``noop``) stages nothing, and in a fresh process the imports of that code were most of what
# such an answer cost.


@contextmanager
def open_stage(
    state: Any,
    *,
    restricted: bool = False,
    allowed_refs: Iterable[str] | None = None,
    timeout: float = TIMEOUT_DEFAULT,
    switches: Switches | None = None,
) -> Iterator[Stage]:
    """A stage for a writer: refreshed under the lock (briefly), discarded on exit.

    The writer edits ``stage.topics``; ``commit_edits(stage, ...)`` installs the result.
    ``switches``: the test switches (default: this process's, read from the environment once).
    """
    from .stage import Stage

    root = memory_root(state)
    with write_lock(root, timeout):
        open_locked(root)
        stage = Stage(root, restricted=restricted, allowed_refs=allowed_refs, copy_sources=not restricted,
                      switches=switches or current_switches())
    try:
        yield stage
    finally:
        stage.discard()


def staged_edit(
    state: Any,
    path: str,
    text: str | None,
    *,
    message: str | None = None,
    git_commit: str = "auto",
    validate_only: bool = False,
    timeout: float = TIMEOUT_EDIT,
    git_env: Mapping[str, str] | None = None,
    counter: Any = None,
    base_revision: str | None = None,
    removable_ids: Iterable[str] = (),
    switches: Switches | None = None,
) -> TxResult:
    """Hand edit (``text``) or delete (``text=None``) of one ``topics/**/*.md`` file.

    Every committed block id must survive, except the ids of a topic being deleted and
    ``removable_ids`` (a revert drops the blocks added since; a block someone still links to
    fails the dangling-link check all the same). A new paragraph may cite any existing valid
    source (new-to-block sources must be trusted). With ``base_revision`` the edit is a
    compare-and-set: ``CONCURRENT_UPDATE`` when the workspace has moved on since it was read.
    Never raises for a rejected edit: the result says why, with path/line/column.
    ``switches``: the test switches (default: this process's, read from the environment once).
    """
    try:
        mode = git_mode(git_commit)
        rel = check_writable(path)
        deleting = text is None
        if deleting and rel == _core_master():
            raise MemoryError(
                "INVALID_ARGUMENT",
                "topics/core.md cannot be deleted: it is the core master (remove core records one by one instead)",
                path=rel,
            )
        if not deleting and not isinstance(text, str):
            raise MemoryError("INVALID_ARGUMENT", "text must be a string", path=rel)
        root = memory_root(state)
        if not root.parent.is_dir():
            raise MemoryError("MEMORY_NOT_FOUND", f"state directory not found: {root.parent}")
        remember = not deleting and not validate_only and counter is None
        switches = switches or current_switches()  # once for the whole transaction
        known = None
        if remember:
            assert text is not None
            known = known_noop(root, rel, text, mode, git_env, timeout, base_revision, switches)
            if known is not None and not switches.check:
                return known
        from .optimistic import transact
        from .stage import Stage

        def make() -> tuple[Stage, Context]:
            noop_config = noopcache.config_key(root.parent) if remember else None
            stage = Stage(root, link_topics=True, switches=switches)
            try:
                if base_revision is not None and base_revision != stage.revision:
                    raise MemoryError(
                        "CONCURRENT_UPDATE",
                        "workspace changed since base_revision was read",
                        details={"base_revision": base_revision, "revision": stage.revision},
                    )
                topic_rel = rel[len("topics/"):]
                excluded = set(removable_ids)
                if deleting:
                    if not stage.delete_topic(rel):
                        raise MemoryError("MEMORY_NOT_FOUND", f"topic does not exist: {rel}", path=rel)
                    excluded |= set(stage.baseline.block_ids(topic_rel))
                else:
                    stage.write_topic(rel, text)
            except BaseException:
                stage.discard()
                raise
            return stage, Context(
                required_ids=frozenset(),
                required_except=frozenset(excluded),
                rule=RULE_HAND,
                allowed_refs=None,
                validate_only=validate_only,
                git_commit=mode,
                refuse_drops=True,
                commit_message=message or gitlog.edit_message(rel, deleted=deleting),
                git_env=git_env,
                counter=counter_or_default(counter),
                noop_config=noop_config,
            )

        result = transact(root, make, timeout=timeout, validate_only=validate_only,
                           before_install=lambda: ensure_git(root, mode, git_env))
        if known is not None and result != known:  # check mode: the remembered answer, verified
            raise NoopMismatch(f"the remembered no-op answer differs from the full path's: {known} != {result}")
        return result
    except MemoryError as exc:
        return TxResult.failure(exc, validate_only=validate_only)


def _core_master() -> str:
    from .normal import CORE_MASTER

    return CORE_MASTER


def validate_edit(state: Any, path: str, text: str | None, **kw: Any) -> TxResult:
    """The editor's check: the full transaction path, nothing installed."""
    return staged_edit(state, path, text, validate_only=True, **kw)


def edit_errors(state: Any, path: str, text: str | None, **kw: Any) -> tuple[Problem, ...]:
    """Validate-only API for an editor checking as the owner types: every error the hand edit
    of ``path`` with ``text`` (``None`` = delete) would be refused with, the one OpenProgram
    reports first, the others in file order. Empty when the edit would be accepted. Installs
    nothing, takes no lock; the same checks as ``staged_edit``."""
    return validate_edit(state, path, text, **kw).all_errors()


def commit_edits(
    stage: Stage,
    *,
    git_commit: str = "off",
    commit_message: str | None = None,
    timeout: float = TIMEOUT_EDIT,
    validate_only: bool = False,
    git_env: Mapping[str, str] | None = None,
    counter: Any = None,
    rule: str | None = None,
) -> TxResult:
    """Install a writer's stage (agent commit, §5.5). No git commit unless asked."""
    from ..store.install import plan_install
    from ..store.workspace import workspace_revision
    from . import prepare
    from .finish import finish, validated
    from .stage import unchanged

    root = stage.memory_root
    try:
        mode = git_mode(git_commit)
        if stage.sources_copied:
            committed = root / "sources"
            plan = plan_install(root, stage.path, compare_sources=True)
            if any(t.path.startswith("sources/") for t in plan.targets) or _sources_removed(committed, stage.path / "sources"):
                raise MemoryError("APPEND_ONLY_REQUIRED", "Source Memory is append-only")
        texts, _ = stage.topic_texts()
        staged_ids = set(stage.cache.tree(texts, stage.index, stage.token, switches=stage.switches).ids)
        required = set(stage.baseline.ids) & staged_ids
        if stage.restricted:
            default_rule = RULE_WRITER if stage.allowed_refs else RULE_ORGANIZE
        else:
            default_rule = RULE_HAND
        ctx = Context(
            required_ids=frozenset(required),
            rule=rule or default_rule,
            allowed_refs=stage.allowed_refs,
            validate_only=validate_only,
            git_commit=mode,
            commit_message=commit_message if mode != "off" else None,
            git_env=git_env,
            counter=counter_or_default(counter),
        )

        def changed_error() -> MemoryError:
            return MemoryError(
                "CONCURRENT_UPDATE",
                "workspace changed while the writer was running",
                details={"base_revision": stage.revision, "revision": workspace_revision(root)},
            )

        # Normalise, validate and build views without the lock; install under it.
        if not unchanged(stage):
            raise changed_error()
        prep = prepare.prepare(stage, ctx)
        if validate_only:
            return validated(stage, ctx, prep)
        with write_lock(root, timeout):
            open_locked(root)
            if not unchanged(stage):
                raise changed_error()
            return finish(stage, ctx, prep)
    except MemoryError as exc:
        return TxResult.failure(exc, validate_only=validate_only)


def _sources_removed(committed: Path, staged: Path) -> bool:
    if not committed.is_dir():
        return False
    for dirpath, _, filenames in os.walk(committed):
        for name in filenames:
            rel = Path(dirpath, name).relative_to(committed)
            if not (staged / rel).is_file():
                return True
    return False


def update(
    state: Any,
    base_revision: Any = None,
    *,
    memory_changes: Any = None,
    changes: Any = None,
    patch: Any = None,
    sources: Any = None,
    commit_message: Any = None,
    git_commit: Any = "auto",
    append_only: Any = False,
    validate_only: bool = False,
    timeout: float = TIMEOUT_EDIT,
    git_env: Mapping[str, str] | None = None,
    counter: Any = None,
    provenance: Provenance | None = None,
    switches: Switches | None = None,
) -> TxResult:
    """OpenProgram's structured transaction (§5.3), compare-and-set on ``base_revision``.

    Caller-supplied ``sources`` need complete ``provenance`` (who is speaking, with which
    authority tier, from where); without it they are refused with
    ``WRITER_PRECONDITION_FAILED`` exactly as OpenProgram refuses them. With it, they are
    archived into the stage as trusted ``claude-code`` sources (content addressed, so a retry
    archives the same ids), their ``new-source-…`` labels are replaced by those ids, and
    exactly those ids may be newly cited (plus, for record ops, the refs the ops declare).
    The archives are installed with the topics, or not at all.
    """
    from ..changes.request import validate_request
    from .optimistic import transact
    from .provenance import AUTHORITY_REQUIRED, Provenance, transaction_source_records

    payload = {
        "base_revision": base_revision,
        "memory_changes": memory_changes,
        "changes": changes,
        "patch": patch,
        "sources": sources,
        "commit_message": commit_message,
        "git_commit": git_commit,
        "append_only": append_only,
    }
    try:
        request = validate_request({k: v for k, v in payload.items() if v is not None})
        if request.sources and (not isinstance(provenance, Provenance) or not provenance.complete):
            raise MemoryError("WRITER_PRECONDITION_FAILED", AUTHORITY_REQUIRED)
        declared = transaction_source_records(request.sources, provenance) if request.sources else []
        root = memory_root(state)
        if not root.parent.is_dir():
            raise MemoryError("MEMORY_NOT_FOUND", f"state directory not found: {root.parent}")

        def make() -> tuple[Stage, Context]:
            return _stage_update(root, request, declared, validate_only=validate_only, git_env=git_env,
                                 counter=counter, switches=switches or current_switches())

        result = transact(root, make, timeout=timeout, validate_only=validate_only,
                           before_install=lambda: ensure_git(root, request.git_commit, git_env))
        return _structured_git(result, request.git_commit)
    except MemoryError as exc:
        return TxResult.failure(exc, validate_only=validate_only)
    except (ValueError, TypeError) as exc:  # §5.3 step 9: validation failures keep their text
        return TxResult.failure(MemoryError("INVALID_TOPIC_FORMAT", str(exc)), validate_only=validate_only)


def _stage_update(root: Path, request: Any, declared: list[tuple[str, Any]], *, validate_only: bool,
                  git_env: Mapping[str, str] | None, counter: Any, switches: Switches) -> tuple[Stage, Context]:
    """The stage of a structured transaction at ``request.base_revision``: the declared sources
    archived into it, the request's change applied to its topics."""
    from ..changes.labels import replace_new_source_labels
    from ..changes.request import check_append_only
    from .stage import Stage

    stage = Stage(root, link_topics=True, switches=switches)
    try:
        if request.base_revision != stage.revision:
            raise MemoryError(
                "CONCURRENT_UPDATE",
                "workspace changed since base_revision was read",
                details={"base_revision": request.base_revision, "revision": stage.revision},
            )
        source_ids: dict[str, str] = {}
        if declared:
            stage.stage_sources([record for _, record in declared])
            source_ids = {label: record.source_id for label, record in declared}
        req = replace_new_source_labels(request, source_ids)
        texts, _ = stage.topic_texts()
        outcome, rule, allowed = _apply_change(stage, req, texts, frozenset(source_ids.values()))
        if req.append_only:
            check_append_only(texts, outcome.texts)
        stage.write_texts(outcome.texts, existing=texts)
        # None: nothing required; else every baseline id but the removable ones
        excluded = None if outcome.removable_ids is None else frozenset(outcome.removable_ids)
    except BaseException:
        stage.discard()
        raise
    return stage, Context(
        required_ids=frozenset(),
        required_except=excluded,
        rule=rule,
        allowed_refs=allowed,
        validate_only=validate_only,
        git_commit=req.git_commit,
        commit_message=req.commit_message,
        git_env=git_env,
        counter=counter_or_default(counter),
        reported_changed=outcome.changed_files,
        source_ids=source_ids,
        structured=True,
        refuse_drops=req.form != "memory_changes",
    )


def _apply_change(stage: Stage, req: Any, texts: dict[str, str], archived: frozenset[str]) -> tuple[Any, str, frozenset[str]]:
    """The change of ``req`` applied to the staged ``texts``: its outcome, the citation rule it
    follows and the refs it may newly cite (``archived``: the sources archived with it)."""
    from ..changes.files import apply_file_changes
    from ..changes.patch import apply_patch
    from ..changes.records import apply_memory_changes
    from ..changes.workcopy import is_scan_summary, scan_summary

    if req.form == "changes":
        return apply_file_changes(texts, req.changes), RULE_FILES, archived
    if req.form != "memory_changes":
        return apply_patch(texts, req.patch or ""), RULE_FILES, archived
    cache = stage.cache

    def summaries(path: str, text: str) -> Any:
        return cache.kept("scan", path, text, lambda: scan_summary(path, text), is_scan_summary)

    def owned() -> Any:
        from ..store import recordindex

        return apply_memory_changes(
            texts, stage.baseline, req.memory_changes, link_for=stage.index.link_for,
            summaries=summaries,
            owned=recordindex.owners(stage.memory_root, texts, stage.committed_shas, summaries),
        )

    outcome = stage.switches.choose("record ops", owned, lambda: apply_memory_changes(
        texts, stage.baseline, req.memory_changes, link_for=stage.index.link_for,
        summaries=summaries,
    ))
    return outcome, RULE_RECORDS, archived | outcome.allowed_refs


def _structured_git(result: TxResult, mode: str) -> TxResult:
    """§5.3 step 10: with ``on`` a missing commit is an error, but memory stays committed."""
    if not result.ok or result.validate_only or mode != "on" or result.git_committed:
        return result
    reason = result.git_error or "not a git repository"
    message = (
        "memory committed but there was nothing to commit"
        if reason == gitlog.NOTHING_TO_COMMIT
        else f"memory committed but git commit failed: {reason}"
    )
    return replace(
        result,
        ok=False,
        code="GIT_COMMIT_FAILED",
        message=message,
        details={"memory_committed": True, "git_committed": False, "revision": result.revision},
    )


def rebuild_views(
    state: Any,
    *,
    timeout: float = TIMEOUT_DEFAULT,
    counter: Any = None,
    validate_only: bool = False,
    git_commit: str = "auto",
    git_env: Mapping[str, str] | None = None,
    switches: Switches | None = None,
) -> TxResult:
    """``views --rebuild``: re-derive every view from the committed topics; installs only
    what differs (a workspace whose views are current is left untouched, revision included)
    and commits what it installed (``memory: rebuild derived views``), so git holds the
    installed revision like after every other install."""
    try:
        mode = git_mode(git_commit)
        root = memory_root(state)
        if not root.is_dir():  # nothing to derive from: never create a workspace here
            raise MemoryError("MEMORY_NOT_FOUND", f"no memory workspace at {root}")

        chosen = switches or current_switches()
        from .optimistic import transact
        from .stage import Stage

        def make() -> tuple[Stage, Context]:
            stage = Stage(root, link_topics=True, switches=chosen)
            return stage, Context(
                required_ids=frozenset(),
                required_except=frozenset(),
                rule=RULE_HAND,
                allowed_refs=None,
                validate_only=validate_only,
                git_commit=mode,
                commit_message=gitlog.MSG_REBUILD,
                git_env=git_env,
                counter=counter_or_default(counter),
            )

        return transact(root, make, timeout=timeout, validate_only=validate_only,
                        before_install=lambda: ensure_git(root, mode, git_env))
    except MemoryError as exc:
        return TxResult.failure(exc, validate_only=validate_only)
