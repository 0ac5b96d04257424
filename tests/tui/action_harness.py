"""A tiny standalone app that hosts one action widget or dialog, for Pilot tests and snapshots."""

from __future__ import annotations

from typing import Any, Callable

async def until(pilot, condition, tries: int = 500) -> None:
    """Let the app process messages until ``condition()`` holds (bounded; never a timing assertion).

    A condition that queries a screen just pushed may run before its widgets are mounted (on
    a busy machine, or beside other pytest-xdist workers, it does): ``NoMatches`` then means
    "not yet", and only a condition that never holds fails."""
    from textual.css.query import NoMatches

    for _ in range(tries):
        try:
            if condition():
                return
        except NoMatches:
            pass
        await pilot.pause(0.02)
    raise AssertionError("condition never held")

from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.widgets import Label

from memory_tui.core.format.outcomes import describe_outcome
from memory_tui.core.tx.recordops import SectionChoice, TopicChoice
from memory_tui.pipeline.jobresult import JobSummary
from memory_tui.pipeline.preview import JobPreview, PreviewBatch
from memory_tui.tui.model.editor import Diagnostic
from memory_tui.tui.widgets.diagnostics_list import DiagnosticsList
from memory_tui.tui.widgets.topic_editor import TopicEditor

TOPIC_TEXT = """# Ada

Ada drinks tea.[^e1] ^1a2b3c4d

[^e1]: Time: `2026-11`; Sources: [tea](openprogram/s/m1)

Ada likes long walks without a citation.

Ada visited Kyoto.[^e9]
"""

THREE = (
    Diagnostic(3, 21, "INVALID_TOPIC_FORMAT", "block ID must not be removed: 5e6f7a8b"),
    Diagnostic(7, 1, "INVALID_TOPIC_FORMAT", "uncited prose: a paragraph needs an evidence citation (hand-edit rule)"),
    Diagnostic(9, 19, "INVALID_TOPIC_FORMAT", "undefined footnote [^e9]"),
)


class EditorHarness(App):
    """A ``TopicEditor`` above its ``DiagnosticsList``, wired the way a screen will wire them."""

    CSS = "TopicEditor { height: 1fr; }"

    def __init__(self, text: str = TOPIC_TEXT, diagnostics=THREE, debounce: float = 0.3, *, state_dir=None,
                 path: str = "topics/people/ada.md") -> None:
        super().__init__()
        self.text, self.initial, self.debounce = text, diagnostics, debounce
        self.state_dir, self.path = state_dir, path
        self.requests: list[TopicEditor.ValidateRequested] = []
        self.saves: list[TopicEditor.SaveRequested] = []
        self.applied: list[int] = []  # seqs whose validation answer was accepted

    def compose(self) -> ComposeResult:
        with Vertical():
            yield TopicEditor(self.text, path=self.path, diagnostics=self.initial, debounce=self.debounce, id="editor")
            yield DiagnosticsList(self.initial, id="diagnostics")

    def on_mount(self) -> None:
        editor = self.query_one(TopicEditor)
        editor.cursor_blink = False
        editor.focus()

    def on_topic_editor_validate_requested(self, event: TopicEditor.ValidateRequested) -> None:
        self.requests.append(event)
        if self.state_dir is not None:  # the screen will do this in a worker; inline is enough here
            from memory_tui.tui.model.editor import validate_topic_text

            answer = validate_topic_text(self.state_dir, self.path, event.text, event.seq)
            if event.editor.apply_validation(answer.seq, answer.diagnostics):
                self.applied.append(answer.seq)

    def on_topic_editor_save_requested(self, event: TopicEditor.SaveRequested) -> None:
        self.saves.append(event)

    def on_topic_editor_diagnostics_changed(self, event: TopicEditor.DiagnosticsChanged) -> None:
        self.query_one(DiagnosticsList).set_diagnostics(event.diagnostics)

    def on_diagnostics_list_jump(self, event: DiagnosticsList.Jump) -> None:
        self.query_one(TopicEditor).goto_diagnostic(event.diagnostic)


class DialogHarness(App):
    """Pushes ``make_dialog()`` on mount and records what it dismisses with."""

    def __init__(self, make_dialog: Callable[[], Any]) -> None:
        super().__init__()
        self.make_dialog = make_dialog
        self.results: list[Any] = []

    def compose(self) -> ComposeResult:
        yield Label("memory-tui")

    def on_mount(self) -> None:
        self.push_screen(self.make_dialog(), self.results.append)


def sample_preview(**kw) -> JobPreview:
    base = dict(
        job="write", title="write local_a1b2c3d4e5 (forced)", writer="extractive", unit="turns", count=10, tokens=95,
        batches=(PreviewBatch(("a1", "a1_reply", "a2", "a2_reply"), 60, "local_a1b2c3d4e5", "a2_reply"),
                 PreviewBatch(("b1", "b1_reply"), 35, "local_a1b2c3d4e5", "b1_reply")),
        files=("memory/sources/openprogram/_v2/local_a1b2c3d4e5.md", "memory/topics/conversations/plan-a-trip.md",
               "memory/timeline/", "memory/core.md", "sessions/local_a1b2c3d4e5/history/0003-l-a1.json"),
        revision="bdd78b97de90417245d3a252c2d9108f", notes=("1 turn below threshold on a2_reply",),
    )
    base.update(kw)
    return JobPreview(**base)


def sample_summary(code: str = "CONCURRENT_UPDATE", **kw) -> JobSummary:
    base = dict(
        job="write", title="write local_a1b2c3d4e5 (forced)", outcome=describe_outcome(code),
        changed_files=("topics/conversations/plan-a-trip.md", "timeline/2026/11.md", "core.md"), marks_added=6,
        revision_before="bdd78b97de90417245d3a252c2d9108f", revision="9d213e6697ff2639f59196e6b1b14795",
        git_commit="0525eb9d8a82ed08000005f33b09dfdf94f0f067", message="",
    )
    base.update(kw)
    return JobSummary(**base)


def sample_choices() -> tuple[TopicChoice, ...]:
    return (
        TopicChoice("topics/core.md", (SectionChoice(("Core",), (("845c11f8", "The user packs light."),)),)),
        TopicChoice("topics/people/ada.md", (
            SectionChoice(("Ada",), (("fc30e0e0", "Ada is the traveller."), ("c2a2c020", "Ada wants short answers."))),
            SectionChoice(("Ada", "Drinks"), (("1a2b3c4d", "Ada drinks tea."),)),
        )),
        TopicChoice("topics/projects/kyoto-trip.md", (SectionChoice(("Kyoto trip",), (("fa3c8017", "The Kyoto plan."),)),)),
    )
