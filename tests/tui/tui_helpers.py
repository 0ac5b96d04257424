"""Helpers shared by the TUI tests (imported by module name: tests dirs are not packages)."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

os.environ["TEXTUAL_ANIMATIONS"] = "none"

from memory_tui.core.format.tokens import O200kCounter  # noqa: E402
from memory_tui.tui.app import create_app  # noqa: E402
from memory_tui.pipeline.settings import Settings  # noqa: E402

FROZEN = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
COUNTER = O200kCounter()


def make_app(
    state_dir: Path, *, watch: bool = False, ascii: bool = False, settings: Settings | None = None, **kw
):
    """The app as a user would see it, with the state dir shown as ``~/<name>``; the model
    is loaded before the first paint unless ``background=True`` is passed (snapshots stay
    deterministic)."""
    kw.setdefault("background", False)
    # insights off by default so older snapshots do not depend on when its worker finishes;
    # tests/tui/test_insights_view.py turns it on.
    kw.setdefault("insights", False)
    return create_app(
        state_dir,
        clock=lambda: FROZEN,
        tokens=COUNTER,
        watch=watch,
        ascii=ascii,
        home=Path(state_dir).parent,
        settings=settings or Settings(),
        **kw,
    )


class Messages:
    """Every message the app and its screens handled, in order: pass it as
    ``app.run_test(message_hook=seen)`` and read what happened with ``of(kind)`` (new models
    applied, jobs finished, reverts done) instead of state kept in the app for tests."""

    def __init__(self) -> None:
        self.seen: list = []
        self._ids: set[int] = set()  # kept alive in ``seen``, so an id is never reused

    def __call__(self, message) -> None:
        # a message that bubbles (a screen's, up to the app) is handled once per node
        # it reaches: it happened once
        if id(message) not in self._ids:
            self._ids.add(id(message))
            self.seen.append(message)

    def of(self, kind: type) -> list:
        return [m for m in self.seen if isinstance(m, kind)]

    def count(self, kind: type) -> int:
        return len(self.of(kind))


async def settle(pilot, app) -> None:
    """Wait for background loads and the resulting refresh."""
    loads = [w for w in app.workers if w.group == "load"]  # never the endless watcher
    if loads:  # an empty list would mean "every worker", the watcher included
        await app.workers.wait_for_complete(loads)
    await pilot.pause()
    await pilot.pause()



async def dry_runs_done(pilot, app) -> None:
    """Wait for the Sessions verdict panel's dry run (a worker started after the panel painted)."""
    await workers_done(pilot, app, "sessions-dry-run")


async def workers_done(pilot, app, group: str) -> None:
    """Wait for the app's workers of ``group`` and what they post."""
    await pilot.pause()
    runs = [w for w in app.workers if w.group == group]
    if runs:
        await app.workers.wait_for_complete(runs)
    await pilot.pause()


def write_minimal_state(root: Path, topics: dict[str, str] | None = None, config: dict | None = None) -> Path:
    """A tiny hand-made state dir (for states the fixture does not show)."""
    import json

    state = root / ".openprogram"
    memory = state / "memory"
    (memory / ".scriptorium").mkdir(parents=True)
    (memory / "topics").mkdir()
    (memory / "sources").mkdir()
    (memory / ".scriptorium" / "workspace-id").write_text("w-0000beef\n")
    for rel, text in (topics or {}).items():
        path = memory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if config is not None:
        (state / "config.json").write_text(json.dumps(config))
    (state / "sessions").mkdir()
    return state


def make_source_pending(state: Path, source_id: str) -> None:
    """Rewrite one archived frame's trust token to ``pending`` (an unconfirmed source)."""
    from memory_tui.core.format.sources import archive_path, encode_meta, normalize_meta

    path = state / "memory" / archive_path(source_id)
    lines = path.read_text(encoding="utf-8").split("\n")
    at = lines.index(f"<!-- source-id:{source_id} -->")
    for i in range(at + 1, at + 4):
        if lines[i].startswith("<!-- source-meta:"):
            lines[i] = f"<!-- source-meta:{encode_meta(normalize_meta('pending', 'user', 'someone/else', None))} -->"
            break
    else:  # pragma: no cover - the fixture's frames all carry a meta line
        raise AssertionError(f"no source-meta line for {source_id}")
    path.write_text("\n".join(lines), encoding="utf-8")


def screen_text(app) -> str:
    """The screen as text rows, read from the app's SVG screenshot (what is drawn)."""
    import html
    import re

    svg = app.export_screenshot()
    rows: dict[float, list[str]] = {}
    for y, t in re.findall(r'<text[^>]*y="([0-9.]+)"[^>]*>([^<]*)</text>', svg):
        rows.setdefault(float(y), []).append(html.unescape(t).replace("\xa0", " "))
    return "\n".join("".join(rows[y]) for y in sorted(rows))


def fake_editor(tmp_path: Path, body: str) -> str:
    """An executable standing in for $EDITOR: ``body`` is Python run on the file it gets."""
    import stat
    import sys

    script = tmp_path / "fake-editor"
    script.write_text(f"#!{sys.executable}\nimport sys, pathlib\np = pathlib.Path(sys.argv[1])\nt = p.read_text()\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def make_job_app(state_dir: Path, **kw):
    """``make_app`` with git's identity and clock pinned for the jobs and record changes it runs."""
    from memory_tui.core.store.gitlog import fixed_env

    app = make_app(state_dir, **kw)
    app.job_context_options = {"git_env": fixed_env()}
    return app


def footer_keys(app) -> tuple[str, list]:
    """The footer's line as drawn and the keys it shows (the palette key apart); every shown
    key is drawn whole, and the palette key ends the line."""
    from memory_tui.tui.widgets.footer import FittedFooter

    line = screen_text(app).splitlines()[-1].rstrip()
    keys = [k for k in app.screen.query_one(FittedFooter).children if hasattr(k, "key_display")]
    shown = [k for k in keys if k.display and not k.has_class("-command-palette")]
    for k in shown:
        assert f"{k.key_display} {k.description}" in line, (type(app.screen).__name__, k.description, line)
    assert line.endswith("^p palette"), (type(app.screen).__name__, line)
    return line, shown


async def close_record_outcome(pilot, app) -> None:
    """A record change has been confirmed: wait for its outcome dialog, check it succeeded,
    close it (esc), then wait until the app has the new revision and the view that acted has
    put its cursor where the record went."""
    from action_harness import until

    from memory_tui.tui.dialogs.record_change import RecordOutcomeDialog

    await until(pilot, lambda: isinstance(app.screen, RecordOutcomeDialog), tries=2000)
    outcome = app.screen.outcome
    assert outcome.ok, outcome.lines()
    await pilot.press("escape")
    await until(pilot, lambda: app.model.revision == outcome.revision
                and not [w for w in app.workers if w.group == "record-follow"], tries=2000)
    await pilot.pause()


async def delete_highlighted_record(pilot, app) -> None:
    """``d`` on the highlighted record, Delete in the confirmation, the outcome closed."""
    from action_harness import until

    from memory_tui.tui.dialogs.record_change import ConfirmRecordDelete

    await pilot.press("d")
    await until(pilot, lambda: isinstance(app.screen, ConfirmRecordDelete) and bool(app.screen.query("#delete")), tries=2000)
    await pilot.click("#delete")
    await close_record_outcome(pilot, app)
