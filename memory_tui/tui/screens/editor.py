"""The topic editor screen: edit a topic's Markdown with the core checking it.

Every buffer change is validated in a worker against the core's full-list validate API
(``model.editor`` → ``transaction.edit_errors`` semantics), so all errors of every validation
stage show (a dropped block id no longer hides the others), each naming its rule, on its
line; an answer for an older buffer version is dropped by ``TopicEditor.apply_validation``.
``ctrl+s`` saves through ``staged_edit`` (one transaction); a refused save keeps the buffer
and shows why. Leaving with unsaved changes asks first.
"""

from __future__ import annotations

from pathlib import Path

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Label, TextArea

from ..dialogs.unsaved import UnsavedDialog
from ..model.editor import Validation, read_topic_text, save_topic_text, validate_topic_text
from ..widgets.diagnostics_list import DiagnosticsList
from ..widgets.footer import FittedFooter
from ..widgets.topic_editor import TopicEditor


class EditorScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "leave", "Back", id="editor.back"),
        # ``[``/``]`` type text inside the editor (footnotes ``[^e1]``); outside it they jump.
        Binding("right_square_bracket", "next_error", "Next error", id="editor.next_error_outside", show=False),
        Binding("left_square_bracket", "previous_error", "Previous error", id="editor.previous_error_outside", show=False),
        # E hands the buffer to $EDITOR (outside the text area, where E
        # types). ctrl+o does it from inside the text area too, so the footer can show it
        Binding("ctrl+o,E", "external_edit", "$EDITOR", id="editor.external_edit"),
    ]
    # what the footer keeps when 80 columns cannot hold every key (FittedFooter)
    FOOTER_RANKS = {"help": 100, "save": 95, "leave": 90, "next_diagnostic": 85, "external_edit": 80,
                    "previous_diagnostic": 70, "reload": 20, "quit": 10}
    DEFAULT_CSS = """
    EditorScreen #editor-title { height: 1; text-style: bold; padding: 0 1; }
    EditorScreen Horizontal { height: 1fr; }
    EditorScreen TopicEditor { width: 2fr; }
    EditorScreen DiagnosticsList { width: 1fr; max-height: 100%; height: 1fr; }
    /* narrow terminal: the list goes under the text, so neither wraps into a column of words */
    EditorScreen.-narrow Horizontal { layout: vertical; }
    /* the text keeps three rows (and its border) whatever the list holds */
    EditorScreen.-narrow TopicEditor { width: 1fr; height: 1fr; min-height: 5; }
    EditorScreen.-narrow DiagnosticsList { width: 1fr; height: auto; max-height: 8; }
    EditorScreen.-narrow.-short DiagnosticsList { height: 1; max-height: 1; }
    """
    NARROW = 100  # columns below which the diagnostics list goes under the editor
    # Under the editor, the list may take LIST_ROWS rows while the text keeps TEXT_ROWS rows
    # (and its border), between the title and the footer; a shorter screen folds the list
    # to one line.
    TEXT_ROWS = 3
    LIST_ROWS = 8
    SHORT = 1 + (TEXT_ROWS + 2) + LIST_ROWS + 1

    def __init__(self, state_dir: Path, path: str, *, ascii: bool = False, git_env=None,
                 at: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.at = at  # (line, column), 1-based: where the cursor starts (a problem's location)
        self.state_dir = Path(state_dir)
        self.path = path
        self.ascii = ascii
        self.git_env = git_env
        self.last_save: Validation | None = None
        self.conflict_open = False
        self.conflicts: list = []  # every ConflictResolution (or None) chosen here
        self._text, self._revision = read_topic_text(self.state_dir, path)

    def compose(self) -> ComposeResult:
        yield Label(self.title_text(self.app.size.width), id="editor-title")
        with Horizontal():
            yield TopicEditor(self._text, path=self.path, ascii=self.ascii, id="topic-editor")
            yield DiagnosticsList(id="diagnostics")
        yield FittedFooter()

    def footer_ranks(self) -> dict[str, int]:
        return self.FOOTER_RANKS

    def on_mount(self) -> None:
        self.editor.mark_saved(self._text, self._revision)
        self.editor.focus()
        if self.at is not None:
            line, col = self.at
            self.editor.move_cursor((max(0, line - 1), max(0, col - 1)), center=True)
        # A file can be invalid before the owner types a key (a hand edit outside, a
        # writer's bug): its errors show from the start, not after the first change.
        self.editor.request_validation()

    def title_text(self, width: int) -> str:
        """The title line, whole: the key hint goes first when the line cannot hold it (the
        footer lists the same keys), then the path is cut at its start (its name is the end)."""
        room = max(8, (width or 120) - 2)  # the label's padding
        title = f"Edit {self.path}"
        full = f"{title}  (ctrl+s save · f8/shift+f8 errors · esc back)"
        if len(full) <= room:
            return full
        if len(title) <= room:
            return title
        return "Edit …" + self.path[len(self.path) - (room - 6):]

    def on_resize(self, event) -> None:
        narrow = event.size.width < self.NARROW
        self.set_class(narrow, "-narrow")
        short = narrow and event.size.height < self.SHORT
        self.set_class(short, "-short")
        self.diagnostics_list.set_folded(short)
        self.query_one("#editor-title", Label).update(self.title_text(event.size.width))

    @property
    def editor(self) -> TopicEditor:
        return self.query_one(TopicEditor)

    @property
    def diagnostics_list(self) -> DiagnosticsList:
        return self.query_one(DiagnosticsList)

    # ------------------------------------------------------------------ validation
    def on_topic_editor_validate_requested(self, message: TopicEditor.ValidateRequested) -> None:
        message.stop()
        self._validate(message.text, message.seq)

    @work(thread=True, group="validate", exit_on_error=False, description="validate")
    def _validate(self, text: str, seq: int) -> None:
        answer = validate_topic_text(self.state_dir, self.path, text, seq)
        self.app.call_from_thread(self._validated, answer)

    def _validated(self, answer: Validation) -> None:
        if self.editor.apply_validation(answer.seq, answer.diagnostics):
            self.diagnostics_list.set_diagnostics(answer.diagnostics)
            self._follow_cursor()

    # the list highlights the error under the cursor (f8, a click, arrow keys), so
    # a message cut at the end of its line is there in full
    def on_text_area_selection_changed(self, event: TextArea.SelectionChanged) -> None:
        if event.text_area is self.editor:
            self._follow_cursor()

    def _follow_cursor(self) -> None:
        here = self.editor.cursor_diagnostics
        if here:
            self.diagnostics_list.show_diagnostic(here[0])

    def on_diagnostics_list_jump(self, message: DiagnosticsList.Jump) -> None:
        message.stop()
        self.editor.goto_diagnostic(message.diagnostic)
        self.editor.focus()

    def _outside_editor(self) -> bool:
        return not isinstance(self.focused, TextArea)

    def action_next_error(self) -> None:
        if self._outside_editor():
            self.editor.next_diagnostic()

    def action_previous_error(self) -> None:
        if self._outside_editor():
            self.editor.previous_diagnostic()

    # the buffer through $EDITOR; what comes back is validated as if typed
    async def action_external_edit(self) -> None:
        from .external_editor import edit_buffer_outside

        await edit_buffer_outside(self)

    # ------------------------------------------------------------------ save / leave
    def on_topic_editor_save_requested(self, message: TopicEditor.SaveRequested) -> None:
        message.stop()
        self.save(message.text)

    def save(self, text: str) -> bool:
        kw = {"git_env": self.git_env} if self.git_env else {}
        answer = save_topic_text(self.state_dir, self.path, text, **kw)
        self.last_save = answer
        if answer.ok:
            self.editor.mark_saved(text, answer.result.revision)
            self.editor.set_diagnostics(())
            self.diagnostics_list.set_diagnostics(())
            self.notify(f"saved {self.path} (revision {(answer.result.revision or '')[:8]})")
            reload = getattr(self.app, "load_in_background", None)
            if reload is not None:
                reload(None)
            return True
        # refused: the buffer stays as typed, the reasons show beside it
        self.editor.set_diagnostics(answer.diagnostics)
        self.diagnostics_list.set_diagnostics(answer.diagnostics)
        from memory_tui.core.format.text import sanitize
        from memory_tui.core.tx.refusals import explain_refusal

        result = answer.result
        refusal = explain_refusal(getattr(result, "code", None), getattr(result, "message", "") or "", action="edit",
                                  target=self.path)
        # the same explanation the CLI's `edit` prints: what was wrong and the fix
        self.notify(f"not saved: {len(answer.diagnostics)} problem(s). {sanitize(refusal.heading)}. "
                    f"Fix: {sanitize(refusal.fix)}", severity="error")
        return False

    # ------------------------------------------------------------------ conflicts
    def workspace_changed(self, paths: frozenset[str]) -> None:
        """The watcher saw ``paths`` change (relative to the state dir)."""
        if self.conflict_open:
            return
        if f"memory/{self.path}" in paths:
            self._follow_disk()
        # The buffer is checked against the rest of the workspace (the topics it links to,
        # the sources it cites, the ids other files hold), so a change to any of them can
        # add or clear an error: check again. Our own caches and lock under .scriptorium
        # are not memory.
        if any(p.startswith("memory/") and not p.startswith("memory/.scriptorium/") for p in paths):
            self.editor.request_validation()

    def reload_requested(self) -> None:
        """``ctrl+r`` (the app re-reads the state dir): re-read the file as a change on disk
        would be, and check the buffer against what is on disk now."""
        if not self.conflict_open:
            self._follow_disk()
        self.editor.request_validation()

    def _follow_disk(self) -> None:
        """The file on disk may differ from what the buffer was opened from: follow it when
        nothing of ours would be lost, else ask (the conflict dialog)."""
        theirs, revision = read_topic_text(self.state_dir, self.path)
        editor = self.editor
        if theirs == editor.base_text:
            return  # our own save, or a touch that changed nothing
        if not editor.is_dirty:
            editor.load_text(theirs)  # nothing of ours to lose: follow the file
            editor.mark_saved(theirs, revision)
            return
        from ..dialogs.conflict import ConflictDialog

        self.conflict_open = True

        def resolved(answer) -> None:
            self.conflict_open = False
            self.conflicts.append(answer)
            if answer is None:
                return  # decide later: the buffer stays, still based on what it opened from
            if answer.choice == "take_theirs":
                editor.load_text(theirs)
            # both choices now build on what is on disk, so a save goes against the new revision
            editor.mark_saved(theirs, revision)
            if answer.choice == "keep_mine" and editor.text != answer.text:
                editor.load_text(answer.text)
            editor.request_validation()  # the buffer against the file it now builds on

        self.app.push_screen(ConflictDialog(self.path, editor.text, theirs), resolved)

    def action_leave(self) -> None:
        if not self.editor.is_dirty:
            self.dismiss(None)
            return

        def chosen(choice) -> None:
            if choice is None or choice.action == "cancel":
                return
            if choice.action == "save" and not self.save(self.editor.text):
                return  # refused: stay, with the errors shown
            self.dismiss(None)

        self.app.push_screen(UnsavedDialog(self.path), chosen)


def open_editor(app, path: str, at: tuple[int, int] | None = None) -> EditorScreen:
    """Push the editor on ``path`` (the view screens' ``e``), the cursor at ``at`` (line, column)."""
    opts = getattr(app, "job_context_options", {}) or {}
    screen = EditorScreen(app.state_dir, path, ascii=getattr(app, "ascii_mode", False), git_env=opts.get("git_env"), at=at)
    app.push_screen(screen)
    return screen
