"""Problems: every problem the app knows (settings, config.json, topics and sources, the
session store, the writer's status), counted for the header, listed by ``!``, and each opened
at its file and line.
"""

from __future__ import annotations

from memory_tui.core.format.errors import Problem

from ..model.data import CORE_TOPIC
from ..model.load import clean_problem, is_error


class Problems:
    """Mixed into the app."""

    def all_problems(self) -> list[Problem]:
        """Every problem: settings, config.json, topics and sources, sessions, writer status."""
        out: list[Problem] = []
        out.extend(self.settings.problems)
        m = self.model
        if m is None:
            return out
        # the model keeps only errors workspace-wide (a warning stays on its topic), but
        # `status` lists warnings too (special-token text in core.md): so does this list
        warnings = [clean_problem(p) for p in getattr(getattr(m, "state", None), "problems", ()) if not is_error(p)]
        for p in (*m.config.problems, *m.problems, *warnings, *self._session_problems()):
            if p not in out:
                out.append(p)
        st = m.status
        if st.last_outcome == "failure":
            out.append(Problem(
                st.last_failure_code or "WRITER_FAILURE_UNKNOWN",
                (f"the last writer run lost the write-lock race{' at ' + st.last_failure_at if st.last_failure_at else ''}"
                 " (another writer held write.lock): nothing was written; retry"
                 if st.last_failure_code == "CONCURRENT_UPDATE" else
                 f"the last writer run failed{' at ' + st.last_failure_at if st.last_failure_at else ''}"),
                "memory/.scriptorium/writer-status.json",
            ))
        return out

    def _session_problems(self) -> list[Problem]:
        """What `status` lists beside the workspace's problems: the session store's (a corrupt
        node file, meta.json or registry) and the writer context's files (writer-status.json,
        session-end.json), read by the same engine functions."""
        m = self.model
        memo = getattr(self, "_session_problems_memo", None)
        if memo is not None and memo[0] is m:
            return memo[1]  # one read per loaded model: the header asks on every redraw
        snap = getattr(m, "session_snapshot", None) if m is not None else None
        out: list[Problem] = list(snap.all_problems()) if snap is not None else []
        try:
            from memory_tui.sessions.reasons import load_context

            out.extend(load_context(self.state_dir, now=0.0, probe=lambda _p: False).problems)
        except OSError:
            pass
        self._session_problems_memo = (m, out)
        return out

    def problem_count(self) -> int:
        m = self.model
        if m is not None and not m.memory_exists:
            return 1 if self.settings.problem else 0  # the notice already says what is missing
        return len(self.all_problems())

    def action_problems(self) -> None:
        from ..screens.problems import ProblemsScreen

        if isinstance(self.screen, ProblemsScreen):
            return
        self.push_screen(ProblemsScreen(self.all_problems(), self.open_problem))

    def open_problem(self, problem: Problem) -> bool:
        """Open ``problem``'s file at its line: a topic in the editor (cursor on the line), a
        session node file as its node in Sessions (its error in the node detail), any other
        file in ``$EDITOR`` at the line. False when nothing could be opened."""
        path = problem.path or ""
        if path.startswith("memory/"):
            path = path[len("memory/"):]
        m = self.model
        if path.startswith("topics/") and m is not None and m.topic(path) is not None:
            if problem.line:
                from ..screens.editor import open_editor

                open_editor(self, path, at=(problem.line, problem.column or 1))
                return True
            view = "core" if path == CORE_TOPIC else "topics"
            self.go_to(view, lambda screen: screen.reveal_topic(path))  # type: ignore[attr-defined]
            return True
        parts = (problem.path or "").split("/")
        if len(parts) == 4 and parts[0] in ("sessions", "sessions-git") and parts[2] == "history":
            sid, name = parts[1], parts[3]
            stem = name[:-5] if name.endswith(".json") else name
            bits = stem.split("-", 2)
            node = bits[2] if len(bits) == 3 else None
            self.go_to("sessions", lambda screen: screen.focus_session(sid, node))  # type: ignore[attr-defined]
            return True
        return self._open_file_in_editor(problem)

    def _open_file_in_editor(self, problem: Problem) -> bool:
        """Any other file with a problem (config.json, meta.json, writer-status.json …):
        ``$EDITOR +LINE FILE`` with the terminal handed over."""
        import subprocess

        from ..model import records as ra
        from ..screens.external_editor import editor_suspend

        target = self.state_dir / (problem.path or "")
        if not problem.path or not target.is_file():
            return False
        try:
            argv = ra.editor_command()
        except ra.EditorUnavailable as exc:
            self.notify(f"{problem.path}:{problem.line or 1}: {exc}", severity="information", timeout=10)
            return False
        argv = [*argv, f"+{problem.line or 1}", str(target)]
        try:
            with editor_suspend(self):
                subprocess.call(argv)
        except Exception as exc:  # noqa: BLE001 - no terminal to hand over: say where it is instead
            self.notify(f"{problem.path}:{problem.line or 1}: cannot start the editor ({exc})", severity="warning")
        self.action_reload()
        return True
