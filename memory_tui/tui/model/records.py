"""The app's bridge to the record and topic changes of the core.

Screens never call the engine; they call these functions (from a worker thread: nothing
here touches Textual). Each change is the same call the CLI's ``record move|update|delete``
and ``edit --delete`` make, so app and CLI give the same bytes. Every change takes the
revision the screen showed as ``base_revision`` (compare-and-set): if the workspace moved
on since, the core refuses with ``CONCURRENT_UPDATE`` and nothing changes.

``ActionOutcome`` is what the screens show afterwards: the new ids and revision, or the
outcome code with its plain meaning (``core.outcomes.describe_outcome``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from memory_tui.core.tx import recordops
from memory_tui.core.tx.refusals import Refusal, explain_refusal
from memory_tui.core.format.outcomes import describe_outcome

CONCURRENT = "CONCURRENT_UPDATE"


@dataclass(frozen=True)
class LinkLine:
    """A record that links to the one being changed."""

    memory_id: str
    path: str
    line: int
    content: str


@dataclass(frozen=True)
class ActionOutcome:
    """What one record or topic change did, in terms a screen can show."""

    action: str  # move | update | delete | delete-topic | edit
    target: str  # the record id or topic path
    ok: bool
    code: str | None = None
    message: str = ""
    meaning: str = ""
    retryable: bool = False
    revision_before: str | None = None
    revision: str | None = None
    changed_files: tuple[str, ...] = ()
    block_ids: tuple[str, ...] = ()
    evidence_ids: tuple[str, ...] = ()
    location: str | None = None  # "topics/x.md:12 › A › B" after a move or update
    linked_by: tuple[LinkLine, ...] = ()
    problems: tuple[Any, ...] = ()  # the core's problems (for inline display)
    details: Mapping[str, Any] = field(default_factory=dict)
    refusal: Refusal | None = None  # a refusal explained: what was wrong, the fix, the rule

    @property
    def concurrent(self) -> bool:
        """The revision moved (or the lock was taken) under us: a retry on the new revision may work."""
        return not self.ok and self.code == CONCURRENT

    def lines(self) -> list[str]:
        """The outcome as plain lines (the result dialog and notifications draw these)."""
        verb = {"move": "Moved", "update": "Updated", "delete": "Deleted", "delete-topic": "Deleted topic",
                "edit": "Saved"}.get(self.action, self.action)
        if self.ok:
            out = [f"{verb} {self.target}"]
            if self.location:
                out.append(f"now at {self.location}")
            if self.block_ids:
                out.append("block ids: " + ", ".join("^" + i for i in self.block_ids))
            if self.evidence_ids:
                out.append("evidence ids: " + ", ".join(self.evidence_ids))
            if self.changed_files:
                out.append("changed: " + ", ".join(self.changed_files))
            out.append(f"revision {short(self.revision_before)} → {short(self.revision)}")
            return out
        refusal = self.refusal or explain_refusal(self.code, self.message, action=self.action, target=self.target,
                                                  linked_by=self.linked_by)
        out = [f"{self.action} {self.target} refused: {refusal.heading}"]
        if self.concurrent:
            out.append("The workspace changed since this screen showed it (another write landed). "
                       "Nothing was changed; retry to apply the same change on the new revision.")
        else:
            out.append(f"fix: {refusal.fix}")
        if refusal.rule:
            out.append(f"rule: {refusal.rule}")
        out.append(f"{self.code}: {self.message}" if self.message else f"{self.code}: {self.meaning}")
        if self.linked_by:
            out.append(f"{len(self.linked_by)} record(s) link to it; unlink them first:")
            out.extend(f"  ^{link.memory_id}  {link.path}:{link.line}  {link.content}" for link in self.linked_by)
        return [line for line in out if line]


def short(revision: str | None) -> str:
    return (revision or "none")[:12]


def _outcome(action: str, target: str, result: Any, base: str | None, *, location: Any = None,
             linked_by: tuple[Any, ...] = (), text: str | None = None) -> ActionOutcome:
    links = tuple(LinkLine(l.memory_id, l.path, l.line, l.content) for l in linked_by)
    if result.ok:
        where = None
        block_ids: tuple[str, ...] = tuple(dict.fromkeys(result.block_ids.values()))
        evidence_ids: tuple[str, ...] = tuple(dict.fromkeys(result.evidence_ids.values()))
        if location is not None:
            where = f"{location.path}:{location.line}" + "".join(f" › {h}" for h in location.headings)
            block_ids = block_ids or tuple(location.block_ids)
            evidence_ids = evidence_ids or tuple(location.evidence_ids)
        return ActionOutcome(action, target, True, revision_before=base, revision=result.revision,
                             changed_files=tuple(result.changed_files), block_ids=block_ids,
                             evidence_ids=evidence_ids, location=where)
    described = describe_outcome(result.code or "TRANSACTION_FAILURE_UNKNOWN")
    refusal = explain_refusal(result.code, result.message, action=action, target=target, text=text, linked_by=links)
    return ActionOutcome(action, target, False, code=result.code, message=result.message, meaning=described.meaning,
                         retryable=described.retryable, revision_before=base, linked_by=links,
                         problems=tuple(result.problems), details=dict(result.details), refusal=refusal)


def _from_op(out: recordops.RecordOpResult, base: str | None, text: str | None = None) -> ActionOutcome:
    return _outcome(out.action, out.memory_id, out.result, base, location=out.location, linked_by=out.linked_by,
                    text=text)


# ---------------------------------------------------------------------- reading
def move_choices(state_dir: Path) -> tuple[Any, ...]:
    """Every topic with its heading chains and records (the move picker's choices)."""
    tree, _ = recordops.committed_tree(state_dir)
    return recordops.destinations(tree)


def topic_delete_check(state_dir: Path, path: str) -> Any:
    tree, _ = recordops.committed_tree(state_dir)
    return recordops.topic_delete_check(tree, path)


def current_revision(state_dir: Path) -> str | None:
    """The committed revision now (a retry after ``CONCURRENT_UPDATE`` goes against it)."""
    from memory_tui.core.store.workspace import workspace_revision

    root = Path(state_dir) / "memory"
    return workspace_revision(root) if root.is_dir() else None


# ---------------------------------------------------------------------- changes
def move_record(state_dir: Path, memory_id: str, target: Any, base_revision: str | None, **tx_kw: Any) -> ActionOutcome:
    """``target`` is the picker's ``MoveTarget`` (topic, headings, position, anchor)."""
    out = recordops.move_record(state_dir, memory_id, topic=target.topic, headings=list(target.headings),
                                position=target.position, anchor=target.anchor, base_revision=base_revision, **tx_kw)
    return _from_op(out, base_revision)


def update_record_text(state_dir: Path, memory_id: str, text: str, base_revision: str | None, **tx_kw: Any) -> ActionOutcome:
    return _from_op(recordops.update_record_text(state_dir, memory_id, text, base_revision=base_revision, **tx_kw),
                    base_revision, text)


def delete_record(state_dir: Path, memory_id: str, base_revision: str | None, **tx_kw: Any) -> ActionOutcome:
    return _from_op(recordops.delete_record(state_dir, memory_id, base_revision=base_revision, **tx_kw), base_revision)


def delete_topic(state_dir: Path, path: str, base_revision: str | None, **tx_kw: Any) -> ActionOutcome:
    """Delete the topic file as ``memory-tui edit TOPIC --delete`` does (``staged_edit`` with no text)."""
    from memory_tui.core.tx import api as tx

    check = topic_delete_check(state_dir, path)
    if not check.allowed:
        # topics/core.md (pitfall 10; the transaction refuses it the same way) or a missing topic
        code = "INVALID_ARGUMENT" if check.path == recordops.CORE_MASTER else "MEMORY_NOT_FOUND"
        described = describe_outcome(code)
        return ActionOutcome("delete-topic", check.path, False, code=code, message=check.reason,
                             meaning=described.meaning, revision_before=base_revision)
    result = tx.staged_edit(state_dir, check.path, None, base_revision=base_revision, **tx_kw)
    return _outcome("delete-topic", check.path, result, base_revision,
                    linked_by=check.dangling if not result.ok else ())


# ---------------------------------------------------------------------- $EDITOR
class EditorUnavailable(Exception):
    """$EDITOR is unset, cannot be started, or exited with an error."""


def editor_command(environ: Mapping[str, str] | None = None) -> list[str]:
    """``$VISUAL`` or ``$EDITOR`` split like a shell would; unlike the CLI there is no ``vi``
    fallback: inside the app an editor the owner did not choose would be a surprise."""
    env = os.environ if environ is None else environ
    raw = (env.get("VISUAL") or env.get("EDITOR") or "").strip()
    if not raw:
        raise EditorUnavailable("$EDITOR is not set: set it (e.g. EDITOR=nano) to edit outside the app")
    return shlex.split(raw)


Runner = Callable[[list[str]], int]


def run_external_editor(text: str, *, suffix: str = ".md", runner: Runner | None = None,
                        environ: Mapping[str, str] | None = None) -> str:
    """Hand ``text`` to ``$EDITOR`` in a temporary file and return what it left there.

    Raises ``EditorUnavailable`` (with the reason) when no editor is set, it cannot start or
    it fails; the caller then keeps its buffer as it was."""
    command = editor_command(environ)
    run = runner or (lambda argv: subprocess.call(argv))
    fd, tmp = tempfile.mkstemp(prefix="memory-tui-", suffix=suffix)
    os.close(fd)
    try:
        Path(tmp).write_text(text, encoding="utf-8")
        try:
            rc = run([*command, tmp])
        except OSError as exc:
            raise EditorUnavailable(f"could not start {command[0]}: {exc.strerror or exc}") from exc
        if rc != 0:
            raise EditorUnavailable(f"{command[0]} exited with status {rc}; the text was not taken")
        try:
            return Path(tmp).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise EditorUnavailable(f"{command[0]} left text that is not UTF-8 (byte {exc.start}); it was not taken") from exc
    finally:
        os.unlink(tmp)


__all__ = ["ActionOutcome", "EditorUnavailable", "LinkLine", "current_revision", "delete_record", "delete_topic",
           "editor_command", "move_choices", "move_record", "run_external_editor", "short", "topic_delete_check",
           "update_record_text"]
