"""Writer that runs an external agent command (``[writer] command``) inside the stage.

The command runs with its working directory set to a restricted stage (a private copy of
``topics/`` and the derived files; ``sources/`` is absent) and receives the task on stdin:
the batch of turns and a description of the topic format, in memory-tui's own words. It
edits files under ``topics/`` and exits. Its edits are then committed through the same
``commit_edits`` path as every other writer; a refused commit gets one repair run whose
prompt starts with the refusal text.

Failures (closed codes, retry verdict):
* command missing / not executable → ``MEMORY_PROVIDER_RESOLUTION_FAILED`` (not retryable)
* runs longer than ``timeout`` → ``MODEL_TIMEOUT`` (retryable)
* exits non-zero → ``MODEL_FAILURE_UNKNOWN`` (not retryable; stderr tail in the message)
* changed anything in the memory workspace outside its stage (the real ``topics/``, the
  archives, the views, ``.scriptorium/``, ``.git/``, a sibling of the stage) →
  ``PATH_OUTSIDE_WORKSPACE`` (not retryable): nothing is installed, nothing marked, and the
  message names what it touched. Under the write lock nobody else writes there, so any change
  is the child's. (A write elsewhere on the machine is beyond what a writer can see.)

Environment given to the command: ``MEMORY_TUI_STAGE`` (the stage path),
``MEMORY_TUI_STAGE_KIND`` (write/backfill/organize, or ``fold`` when the organizer asks it which
fold candidates state the same fact: ``confirm_folds``) and ``MEMORY_TUI_ALLOWED_REFS`` (the
source ids it may cite, one per line). memory-tui itself never reads them (its own test
switches are ``MEMORY_TUI_TEST_*``), so the command may run memory-tui inside its stage, say
``memory-tui edit --check`` on what it wrote.
"""

from __future__ import annotations

import json
import os
import stat as stat_mod
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from memory_tui.core.store.lock import held_by_this_thread
from memory_tui.pipeline.status import history_entry
from memory_tui.pipeline.writers.base import (
    REPAIR_PREFIX,
    FoldCandidate,
    FoldVerdict,
    TxPort,
    WriterFailure,
    WriterOutcome,
    WriteTask,
    describe_format,
    fold_prompt,
    parse_fold_answer,
    run_with_repair,
    take_commit_audit,
)

NAME = "command"


def build_prompt(task: WriteTask, rejection: str | None = None) -> str:
    parts: list[str] = []
    if rejection:
        parts += [f"{REPAIR_PREFIX} {rejection}", "Fix the problem and do the task below again from scratch.", ""]
    if task.stage == "organize":
        parts += [
            "Tidy the memory in this directory: merge paragraphs that say the same thing, remove "
            "repeated paragraphs, and move paragraphs to the file they belong in. Keep every "
            "citation that a kept paragraph needs. Do not add new facts.",
        ]
    else:
        parts += [
            "You are keeping the long-term memory of a person who talks with an AI assistant. "
            "Read the conversation turns below and record what is worth remembering later: "
            "preferences, decisions, plans, facts about people and projects. Skip greetings, "
            "questions and small talk. Put each memory in the topic file where it belongs "
            "(one file per person, project or theme, e.g. topics/people/<name>.md); update an "
            "existing paragraph rather than repeating it.",
        ]
    parts += ["", describe_format(), ""]
    if task.turns:
        parts.append(f"Turns (observed {task.observed}); cite them by their ref:")
        for t in task.turns:
            obj = {"ref": t.source_id, "time": t.timestamp or "undated", "speaker": t.speaker, "text": t.text}
            if t.clipped_from:  # the writer sees that it has the start of the turn only
                obj["shown"] = f"the first {t.tokens} of {t.clipped_from} tokens; the whole turn is archived under this ref"
            parts.append(json.dumps(obj, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return "\n".join(parts) + "\n"


def fingerprint(root: Path, skip: Path) -> dict[str, tuple[int, int, int, int]]:
    """Every entry under ``root`` except ``skip`` (the stage), by relative path: mode, size,
    mtime and inode, without following symlinks. Two equal fingerprints mean nothing was
    created, removed, replaced or rewritten there."""
    out: dict[str, tuple[int, int, int, int]] = {}
    skip_s = os.fspath(skip)

    def walk(d: str, rel: str) -> None:
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            if e.path == skip_s:
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            key = f"{rel}{e.name}"
            out[key] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)
            if stat_mod.S_ISDIR(st.st_mode):
                walk(e.path, key + "/")

    walk(os.fspath(root), "")
    return out


def _touched(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    # a directory's own stamp moves whenever an entry in it changes: name the entries
    files = sorted(k for k in changed if not any(o.startswith(k + "/") for o in changed))
    return files


def _kill_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError):
        pass


@dataclass
class CommandWriter:
    argv: tuple[str, ...]
    timeout: float = 600.0
    env: Mapping[str, str] | None = None
    name: str = NAME
    history: list[dict[str, Any]] = field(default_factory=list)

    def _run(self, task: WriteTask, cwd: str, prompt: str) -> str:
        env = dict(os.environ if self.env is None else self.env)
        env["MEMORY_TUI_STAGE"] = cwd
        env["MEMORY_TUI_STAGE_KIND"] = task.stage
        env["MEMORY_TUI_ALLOWED_REFS"] = "\n".join(task.allowed_refs)
        try:
            # its own session: on timeout (and after it exits) the whole process group is
            # killed, so no grandchild keeps writing into the stage or holds our pipes open
            proc = subprocess.Popen(list(self.argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=cwd, env=env, start_new_session=True)
        except FileNotFoundError:
            raise WriterFailure("MEMORY_PROVIDER_RESOLUTION_FAILED", f"writer command not found: {self.argv[0]}") from None
        except PermissionError:
            raise WriterFailure("MEMORY_PROVIDER_RESOLUTION_FAILED", f"writer command not executable: {self.argv[0]}") from None
        try:
            stdout, stderr = proc.communicate(prompt.encode("utf-8"), timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise WriterFailure("MODEL_TIMEOUT", f"writer command ran longer than {self.timeout:g} s", retryable=True) from None
        except BaseException:
            _kill_group(proc)
            raise
        _kill_group(proc)
        proc.stdout, proc.stderr = None, None
        proc = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        out = proc.stdout.decode("utf-8", "replace")
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise WriterFailure(
                "MODEL_FAILURE_UNKNOWN",
                f"writer command exited with status {proc.returncode}" + (f": {' / '.join(tail)}" if tail else ""),
            )
        return out

    def write(self, task: WriteTask, tx: TxPort) -> WriterOutcome:
        if not self.argv:
            raise WriterFailure("MEMORY_PROVIDER_RESOLUTION_FAILED", "no writer command configured ([writer] command)")
        self.history = []

        def attempt(rejection: str | None) -> WriterOutcome:
            stage_label = task.stage if rejection is None else f"{task.stage}-repair"
            prompt = build_prompt(task, rejection)
            stage = tx.open_stage(task.allowed_refs)
            root = getattr(tx, "memory_root", None)
            before = None
            if root is not None and held_by_this_thread(Path(root)):  # unlocked, others may write there
                before = fingerprint(Path(root), Path(stage.path))
            try:
                reply = self._run(task, str(stage.path), prompt)
                if before is not None:
                    touched = _touched(before, fingerprint(Path(root), Path(stage.path)))
                    if touched:
                        shown = ", ".join(touched[:5]) + (f" and {len(touched) - 5} more" if len(touched) > 5 else "")
                        raise WriterFailure("PATH_OUTSIDE_WORKSPACE",
                                            f"writer command wrote outside its stage (refused, nothing installed): {shown}")
            except BaseException as exc:
                tx.discard(stage)
                self.history.append(history_entry(stage_label, "", prompt, error=f"{type(exc).__name__}: {exc}", turns=take_commit_audit(tx)))
                raise
            try:
                info = tx.commit_edits(stage)
            except Exception as exc:
                self.history.append(history_entry(stage_label, "", prompt, error=f"{type(exc).__name__}: {exc}", turns=take_commit_audit(tx)))
                raise
            self.history.append(history_entry(stage_label, "", prompt, reply=reply[-4000:], turns=take_commit_audit(tx)))
            return WriterOutcome(info.changed_topics, info.revision, [], reply.strip()[-200:])

        outcome = run_with_repair(attempt)
        outcome.history = list(self.history)
        return outcome

    def confirm_folds(self, candidates: Sequence[FoldCandidate], memory_root: Path) -> FoldVerdict:
        """Ask the command which fold candidates state the same fact (``MEMORY_TUI_STAGE_KIND``
        ``fold``, the pairs on stdin, its answer on stdout: see ``base.fold_prompt``). It runs in
        an empty scratch folder; touching the workspace, failing or answering unreadably folds
        nothing, and the run is kept in the history either way."""
        prompt = fold_prompt(candidates)
        task = WriteTask(stage="fold", turns=())
        root = Path(memory_root)
        with tempfile.TemporaryDirectory(prefix="memory-tui-fold-") as scratch:
            before = fingerprint(root, Path(scratch)) if held_by_this_thread(root) else None
            try:
                reply = self._run(task, scratch, prompt)
                if before is not None and _touched(before, fingerprint(root, Path(scratch))):
                    raise WriterFailure("PATH_OUTSIDE_WORKSPACE",
                                        "writer command changed the memory workspace while judging fold candidates")
            except WriterFailure as exc:
                entry = history_entry("fold", "", prompt, error=f"{exc.code}: {exc.message}")
                return FoldVerdict(frozenset(), [entry])
        confirmed = parse_fold_answer(reply, candidates)
        return FoldVerdict(confirmed, [history_entry("fold", "", prompt, reply=reply[-4000:])])


def writer_from_settings(settings: Any) -> CommandWriter:
    return CommandWriter(tuple(settings.command), float(settings.timeout))
