"""The writers' door to the workspace: ``core.transaction`` behind the ``TxPort`` protocol.

Writers never import the transaction themselves, so a writer can be tested against a fake
port and the pipeline can hold the write lock around the whole batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from memory_tui.pipeline.status import commit_audit_error, commit_audit_ok
from memory_tui.pipeline.writers.base import CommitInfo


def _changed_topics(result: Any) -> tuple[str, ...]:
    files = getattr(result, "changed_files", None) or ()
    return tuple(sorted({f for f in files if isinstance(f, str) and f.startswith("topics/")}))


def _info(result: Any) -> CommitInfo:
    if not getattr(result, "ok", False):
        raise result.error()
    return CommitInfo(_changed_topics(result), getattr(result, "revision", None), dict(getattr(result, "block_ids", {}) or {}))


class StageHandle:
    """An entered ``transaction.open_stage`` context; ``close`` discards the stage."""

    def __init__(self, cm: Any) -> None:
        self._cm = cm
        self.stage = cm.__enter__()
        self.path = Path(self.stage.path)
        self.closed = False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._cm.__exit__(None, None, None)


@dataclass
class TransactionPort:
    """``TxPort`` over ``memory_tui.core.tx.api`` for one memory workspace."""

    memory_root: Path
    restricted: bool = True
    counter: Any = None
    git_commit: str = "off"  # the pipeline commits once per batch (memory: incremental transaction)
    commit_message: str | None = None
    # agent-history audit entries of the commits since the last ``take_audit`` (§5.5)
    audit: list[dict[str, Any]] = field(default_factory=list)

    def take_audit(self) -> list[dict[str, Any]]:
        """The commit audit entries recorded since the last call (for the run's ``turns``)."""
        out, self.audit = self.audit, []
        return out

    def _audited(self, run: Any) -> CommitInfo:
        try:
            result = run()
            info = _info(result)
        except Exception as exc:
            self.audit.append(commit_audit_error(exc))
            raise
        self.audit.append(commit_audit_ok(len(getattr(result, "block_ids", None) or {}), info.changed_topics))
        return info

    def revision(self) -> str:
        from memory_tui.core.store.workspace import workspace_revision

        return workspace_revision(self.memory_root)

    def open_stage(self, allowed_refs: Sequence[str]) -> StageHandle:
        from memory_tui.core.tx import api as transaction

        return StageHandle(transaction.open_stage(self.memory_root, restricted=self.restricted, allowed_refs=tuple(allowed_refs)))

    def commit_edits(self, stage: StageHandle) -> CommitInfo:
        from memory_tui.core.tx import api as transaction

        def run() -> Any:
            try:
                return transaction.commit_edits(stage.stage, counter=self.counter)
            finally:
                stage.close()

        return self._audited(run)

    def discard(self, stage: StageHandle) -> None:
        stage.close()

    def update(self, base_revision: str, memory_changes: list[dict[str, Any]]) -> CommitInfo:
        from memory_tui.core.tx import api as transaction

        # a writer's structured commit: audited like commit_edits
        return self._audited(
            lambda: transaction.update(
                self.memory_root,
                base_revision,
                memory_changes=memory_changes,
                git_commit=self.git_commit,
                commit_message=self.commit_message,
                counter=self.counter,
            )
        )

    def topic_texts(self) -> dict[str, str]:
        root = self.memory_root / "topics"
        out: dict[str, str] = {}
        if root.is_dir():
            for p in sorted(root.rglob("*.md")):
                if p.is_file() and not p.is_symlink():
                    try:
                        out[p.relative_to(self.memory_root).as_posix()] = p.read_text(encoding="utf-8")
                    except (OSError, UnicodeDecodeError):
                        continue
        return out
