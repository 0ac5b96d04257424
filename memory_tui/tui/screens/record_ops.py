"""Record changes, topic delete and ``$EDITOR`` from the record views.

``RecordActions`` is mixed into Topics, Recent and Core. It acts on the record under the
cursor: ``m`` move (``MovePicker``), ``u`` update its text, ``d`` delete it; Topics adds
``D`` (delete the topic) and Topics/Core ``E`` (the topic in ``$EDITOR``). Every change:

1. takes the revision this screen shows (``model.revision``) as the compare-and-set base;
2. runs in a worker through ``tui/model/records.py`` (never the engine directly);
3. reloads the model and shows the outcome (new ids and revision, or the code with its
   meaning); ``CONCURRENT_UPDATE`` offers a retry of the same change on the new revision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from textual import work
from textual.worker import Worker, WorkerState

from ..model.data import CORE_TOPIC, RecordVM
from .citations import selected_record_of

if TYPE_CHECKING:
    from ..model import records as ra

# The adapter (and the engine's record operations under it) and the dialogs are imported
# when a change is first asked for: the screens that mix this in paint without them.
Change = Callable[["str | None"], "ra.ActionOutcome"]  # base revision -> outcome

# What the footer keeps longest when the row is full (``FittedFooter``; higher stays), on top
# of ``APP_RANKS`` (help, back, filter, quit, problems, reload). The record keys come right
# after the filter and show as one set; ``g`` gives way before the topic keys because a
# citation chip's ``enter`` does the same.
FOOTER_RANKS: dict[str, int] = {
    "move_record": 75, "update_record": 74, "delete_record": 73,
    "toggle_core_sources": 72, "open_record": 71, "edit_topic": 70,
    "delete_topic": 62, "external_edit": 62, "goto_session": 58,
}
TOPIC_KEYS = ("edit_topic", "delete_topic", "external_edit")
RECORD_KEYS = ("move_record", "update_record", "delete_record")


class RecordActions:
    """Mixin for a ``CitationScreen``: the record-change actions and their flow."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the rows around a record being moved or deleted, nearest first, so the view
        # it was acted on from can put its cursor on a neighbour when the record leaves it
        self._neighbours: dict[str, tuple[str, ...]] = {}

    # ------------------------------------------------------------------ footer
    FOOTER_SETS = (RECORD_KEYS,)  # m without u and d would read as the only record key

    def footer_ranks(self) -> dict[str, int]:
        """``FittedFooter``'s order of what to keep. Topics with only the tree on screen (the
        narrow list pane): the topic keys matter, the record keys act on a record out of
        sight, so they go before the topic keys. Core has one topic, always topics/core.md:
        its topic keys act on no selection, so they rank with the rarer keys, below quit and
        problems. On a citation chip ``g`` comes first."""
        ranks = {**super().footer_ranks(), **FOOTER_RANKS}  # type: ignore[misc]
        view = getattr(self, "VIEW", "")
        if view == "topics" and getattr(self, "narrow", False) and getattr(self, "pane", "") == "list":
            ranks.update({a: 78 - i for i, a in enumerate(TOPIC_KEYS)})
            ranks.update({a: 42 - i for i, a in enumerate(RECORD_KEYS)})
        elif view == "core":
            # D there only says why topics/core.md cannot be deleted
            ranks.update({"edit_topic": 64, "external_edit": 62, "delete_topic": 30})
        cited = getattr(self, "cited_frame", None)
        if callable(cited) and cited() is not None:
            ranks["goto_session"] = 77  # a citation chip under the cursor: g opens its source
        return ranks

    # ------------------------------------------------------------------ plumbing
    def _tx_options(self) -> dict[str, Any]:
        # the same git settings as the app's jobs (tests pin git's identity and clock)
        opts = getattr(self.app, "job_context_options", {}) or {}
        return {"git_env": opts["git_env"]} if opts.get("git_env") else {}

    def _base_revision(self) -> str | None:
        m = self.model
        return m.revision if m is not None and m.memory_exists else None

    def _record_or_say(self) -> RecordVM | None:
        if self._base_revision() is None:
            self.notify("No memory workspace.", severity="warning")
            return None
        rec = selected_record_of(self)
        if rec is None:
            self.notify("Select a record first.", severity="warning")
        return rec

    @work(thread=True, group="record-op", exit_on_error=False, description="record-op")
    def off_thread(self, fn: Callable[[], Any], then: Callable[[Any], None]) -> None:
        """Run ``fn`` (an adapter call) in a worker, then ``then(result)`` on the UI thread."""
        result = fn()
        self.app.call_from_thread(then, result)

    def run_change(self, change: Change, base: str | None) -> None:
        from ..model import records as ra

        state_dir = self.app.state_dir

        def attempt() -> tuple[ra.ActionOutcome, str | None]:
            outcome = change(base)
            return outcome, ra.current_revision(state_dir) if outcome.concurrent else None

        self.off_thread(attempt, lambda found: self.change_done(change, *found))

    def change_done(self, change: Change | None, outcome: ra.ActionOutcome, fresh: str | None) -> None:
        from ..dialogs.record_change import RecordOutcomeDialog

        if outcome.ok:
            self.app.load_in_background(None)  # the new model (and new revision) for every view
            if outcome.action in ("move", "delete"):
                self.run_worker(self._follow(outcome.action, outcome.target), group="record-follow", exit_on_error=False)

        def chosen(retry: bool | None) -> None:
            if retry and change is not None:
                self.run_change(change, fresh)

        self.app.push_screen(RecordOutcomeDialog(outcome), chosen)

    async def _follow(self, action: str, memory_id: str) -> None:
        """Once the reload is in, keep the cursor of the view the owner acted from on the
        record: Topics shows a moved record where it went (another topic too); Recent and
        Core keep their row on it, or on its nearest neighbour when it left the list; a
        delete puts every view's cursor on the deleted record's nearest neighbour."""
        loads = [w for w in self.app.workers if w.group == "load"]
        if loads:  # each load applies its model (call_from_thread) before it completes
            await self.app.workers.wait_for_complete(loads)
        neighbours = self._neighbours.pop(memory_id, ())
        if getattr(self, "VIEW", "") == "topics" and action == "move":
            m = self.model
            rec = m.records.get(memory_id) if m is not None else None
            if rec is not None:
                self.reveal(rec)  # type: ignore[attr-defined]
            return
        land = getattr(self, "land_on_record", None)
        if land is not None:
            self.refresh_view()  # type: ignore[attr-defined]  # the new model's rows, before the cursor moves
            land((memory_id, *neighbours) if action == "move" else neighbours)

    def remember_neighbours(self, memory_id: str) -> None:
        """Note the rows around ``memory_id`` (the screen's ``row_record_ids``), nearest first."""
        rows = getattr(self, "row_record_ids", None)
        ids = list(rows()) if rows is not None else []
        if memory_id not in ids:
            return
        i = ids.index(memory_id)
        after, before = ids[i + 1:], ids[:i][::-1]
        self._neighbours[memory_id] = tuple(after + before)  # the next row first, as a list closing a gap

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Something an adapter did not expect: say so, never hide it (nothing was shown yet).
        if event.worker.group == "record-op" and event.state == WorkerState.ERROR:
            self.notify(f"record change crashed: {event.worker.error!r}", severity="error", timeout=30)

    # ------------------------------------------------------------------ move
    def action_move_record(self) -> None:
        from ..model import records as ra

        rec = self._record_or_say()
        if rec is None:
            return
        base = self._base_revision()
        state_dir = self.app.state_dir
        self.off_thread(lambda: ra.move_choices(state_dir), lambda choices: self._pick_move(rec, base, choices))

    def _pick_move(self, rec: RecordVM, base: str | None, choices: Any) -> None:
        from ..model import records as ra
        from ..dialogs.move_picker import MovePicker

        state_dir, kw = self.app.state_dir, self._tx_options()

        def picked(target: Any) -> None:
            if target is None:
                return
            self.remember_neighbours(rec.memory_id)
            self.run_change(lambda b: ra.move_record(state_dir, rec.memory_id, target, b, **kw), base)

        self.app.push_screen(MovePicker(choices, rec.memory_id, topic=rec.topic_path, headings=rec.headings), picked)

    # ------------------------------------------------------------------ update text
    def action_update_record(self) -> None:
        from ..model import records as ra
        from ..dialogs.record_change import RecordTextDialog

        rec = self._record_or_say()
        if rec is None:
            return
        state_dir, kw = self.app.state_dir, self._tx_options()
        dialog = RecordTextDialog(
            rec.memory_id, rec.content,
            save=lambda text, base: ra.update_record_text(state_dir, rec.memory_id, text, base, **kw),
            base_revision=self._base_revision(),
            fresh_revision=lambda: ra.current_revision(state_dir),
        )

        def saved(outcome: ra.ActionOutcome | None) -> None:
            if outcome is not None:
                self.change_done(None, outcome, None)  # a refusal stayed in the dialog

        self.app.push_screen(dialog, saved)

    # ------------------------------------------------------------------ delete
    def action_delete_record(self) -> None:
        from ..model import records as ra
        from ..dialogs.record_change import ConfirmRecordDelete

        rec = self._record_or_say()
        if rec is None:
            return
        base = self._base_revision()
        state_dir, kw = self.app.state_dir, self._tx_options()

        def answered(yes: bool | None) -> None:
            if yes:
                self.remember_neighbours(rec.memory_id)
                self.run_change(lambda b: ra.delete_record(state_dir, rec.memory_id, b, **kw), base)

        self.app.push_screen(ConfirmRecordDelete(rec.memory_id, rec.content), answered)

    # ------------------------------------------------------------------ topic delete (Topics)
    def delete_topic_at(self, path: str) -> None:
        from ..model import records as ra
        from ..dialogs.delete_topic import DeleteTopicDialog

        base = self._base_revision()
        state_dir, kw = self.app.state_dir, self._tx_options()

        def decided(decision: Any) -> None:
            if decision is not None and decision.delete:
                self.run_change(lambda b: ra.delete_topic(state_dir, decision.path, b, **kw), base)

        self.off_thread(lambda: ra.topic_delete_check(state_dir, path),
                        lambda check: self.app.push_screen(DeleteTopicDialog(check), decided))

    def action_delete_topic(self) -> None:
        path = selected_topic_path(self)
        if path is None or self._base_revision() is None:
            self.notify("Select a topic in the tree first.", severity="warning")
            return
        self.delete_topic_at(path)

    # ------------------------------------------------------------------ $EDITOR
    async def action_external_edit(self) -> None:
        path = selected_topic_path(self)
        if path is None or self._base_revision() is None:
            self.notify("Select a topic first.", severity="warning")
            return
        await self.edit_outside(path)

    async def edit_outside(self, path: str) -> None:
        """``path`` in ``$EDITOR``; on return the text is validated: valid saves (one
        transaction, compare-and-set on the revision it was read at), invalid opens the
        in-app editor on that text with every error on its line. Nothing typed is lost."""
        from ..model.editor import read_topic_text, save_topic_text, validate_topic_text
        from .external_editor import hand_to_editor

        state_dir, kw = self.app.state_dir, self._tx_options()
        text, revision = read_topic_text(state_dir, path)
        edited = hand_to_editor(self.app, text, path)
        if edited is None:
            return
        if edited == text:
            self.notify(f"{path}: no change.")
            return

        def checked(answer: Any) -> None:
            if answer.ok:
                self.off_thread(lambda: save_topic_text(state_dir, path, edited, base_revision=revision, **kw),
                                lambda saved: self._outside_saved(path, edited, revision, saved))
            else:
                self.app.call_later(self._open_in_editor, path, edited)

        self.off_thread(lambda: validate_topic_text(state_dir, path, edited), checked)

    def _outside_saved(self, path: str, edited: str, revision: str | None, saved: Any) -> None:
        from ..model import records as ra

        result = saved.result
        if saved.ok:
            outcome = ra.ActionOutcome("edit", path, True, revision_before=revision, revision=result.revision,
                                       changed_files=tuple(result.changed_files))
            self.change_done(None, outcome, None)
            return
        # refused at save time (e.g. the file changed meanwhile): keep the text in the editor
        self.notify(f"not saved: {result.code}: {result.message}", severity="error", timeout=15)
        self.app.call_later(self._open_in_editor, path, edited)

    async def _open_in_editor(self, path: str, text: str) -> None:
        from .editor import EditorScreen

        screen = EditorScreen(self.app.state_dir, path, ascii=getattr(self.app, "ascii_mode", False),
                              git_env=self._tx_options().get("git_env"))
        await self.app.push_screen(screen)  # mounted: the editor widget exists now
        screen.editor.text = text  # as if typed: the editor validates it and marks each error
        self.notify(f"{path}: the edited text has errors; they are shown in the editor (nothing is saved yet).",
                    severity="warning", timeout=10)


def selected_topic_path(screen: Any) -> str | None:
    """The topic ``E`` and ``D`` act on: the Topics tree's topic, or topics/core.md in Core."""
    if getattr(screen, "VIEW", "") == "core":
        return CORE_TOPIC
    current = getattr(screen, "current_topic", None)
    topic = current() if current is not None else None
    return topic.path if topic is not None else None
