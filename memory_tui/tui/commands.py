"""One command registry: it feeds the key bindings, the command palette and the help screen.

Every command has a stable id (also the ``Binding.id``), so a keymap file can rebind it:

    # ~/.config/memory-tui/config.toml
    [keymap]
    "view.topics" = "f2"
    "app.reload" = "ctrl+r,f5"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from textual.binding import Binding

from .views import VIEW_TITLES, VIEWS

__all__ = ["COMMANDS", "Command", "VIEWS", "VIEW_TITLES", "app_bindings",
           "screen_bindings"]


@dataclass(frozen=True)
class Command:
    id: str  # binding id, used by the keymap file
    key: str  # default key(s), comma separated
    action: str  # Textual action string, run on the app (scope "app") or the view's screen
    title: str  # palette / help title
    help: str
    views: tuple[str, ...] = ()  # empty: everywhere
    footer: bool = True  # shown in the footer
    key_display: str | None = None
    priority: bool = False
    palette: bool = True
    scope: str = "app"  # "screen": the action lives on the view screens (``views`` or all)
    footer_label: str | None = None  # a shorter footer label than the palette's title

    def binding(self) -> Binding:
        return Binding(
            self.key,
            self.action,
            self.footer_label or self.title,
            show=self.footer,
            key_display=self.key_display,
            priority=self.priority,
            id=self.id,
        )


COMMANDS: tuple[Command, ...] = (
    Command("view.topics", "1", "switch_view('topics')", "Topics", "Show the Topics view", footer=False),
    Command("view.timeline", "2", "switch_view('timeline')", "Timeline", "Show the Timeline view", footer=False),
    Command("view.recent", "3", "switch_view('recent')", "Recent", "Show the Recent view", footer=False),
    Command("view.core", "4", "switch_view('core')", "Core", "Show the Core view", footer=False),
    Command("view.sessions", "5", "switch_view('sessions')", "Sessions", "Show the Sessions view", footer=False),
    Command(
        "app.filter", "slash", "filter", "Filter", "Filter the list (all topics and records)",
        key_display="/", scope="screen",
    ),
    Command("app.back", "escape", "back", "Back", "Close the filter or go back to the list", key_display="esc", scope="screen"),
    Command(
        "topics.source", "g", "goto_session", "Go to node",
        "Open the cited source node in the Sessions view", views=("topics", "recent", "core"), scope="screen",
    ),
    Command(
        "record.open", "o", "open_record", "Open in Topics",
        "Show the selected record in its topic", views=("timeline", "recent", "core"), scope="screen",
    ),
    # the Sessions view
    Command("sessions.sort", "s", "cycle_sort", "Sort", "Sort sessions by pending, drift, recency or title", views=("sessions",), scope="screen"),
    Command(
        "sessions.node", "d", "toggle_node_detail", "Node detail",
        "Show the selected node's detail in place of the graph (a short screen has no room for both)",
        views=("sessions",), scope="screen",
    ),
    Command(
        "sessions.cross", "g", "cross_link", "Other session",
        "Cross a cross-session spawn: from either half to the other session's node", views=("sessions",), scope="screen",
    ),
    Command(
        "sessions.write", "w", "write_branch", "Write branch",
        "Write the selected branch now (asks first, shows the dry run)", views=("sessions",), scope="screen",
    ),
    Command("core.sources", "s", "toggle_core_sources", "Source records", "Toggle the topics/core.md records", views=("core",), scope="screen"),
    Command("view.evidence", "i", "open_evidence", "Evidence", "Every record's evidence strength, sortable", footer=False),
    Command(
        "record.history", "h", "history", "History",
        "Commits of the selected record (or topic in the tree), with diffs and revert", views=("topics", "recent", "core"), scope="screen",
        footer=False,  # in the palette and help; the footers of the views stay as they were
    ),
    Command(
        "record.alternatives", "b", "alternatives", "Alternatives",
        "Records on sibling branches of the selected record's session", views=("topics", "recent", "core"), scope="screen",
        footer=False,
    ),
    Command("app.reload", "ctrl+r", "reload", "Reload", "Re-read the state directory now"),
    Command("app.ascii", "a", "toggle_ascii", "ASCII", "Toggle ASCII glyphs", footer=False),
    Command("app.problems", "p", "problems", "Problems", "List every problem with its file and line"),
    Command("app.help", "question_mark,f1", "help", "Help", "Show the keys of every view", key_display="?"),
    Command("job.cancel", "x", "cancel_job", "Cancel job", "Stop the running job at its next safe point", footer=False),
    # owner jobs, each previewed and confirmed (MemoryApp.start_job)
    Command("job.write", "", "run_job('write')", "Write pending turns", "Preview, then run `memory-tui write` (per-turn rule)"),
    Command("job.write_all_forced", "", "run_job('write-all-forced')", "Write all sessions (forced)",
            "Preview, then write every session's pending turns now, below the token threshold too"),
    Command("job.reorganize", "R", "run_job('reorganize')", "Reorganize topics", "Preview, then run `memory-tui reorganize`", footer=False),
    Command("job.backfill", "B", "run_job('backfill')", "Backfill sources", "Preview, then run `memory-tui backfill`", footer=False),
    Command("topic.edit", "e", "edit_topic", "Edit topic", "Edit the selected topic's Markdown, checked as you type",
            views=("topics", "core"), scope="screen"),  # in the footer
    Command("job.migrate", "", "run_job('migrate')", "Migrate legacy cursors", "Preview, then run `memory-tui migrate`"),
    # record changes, topic delete, $EDITOR. In the footers too,
    # with short labels; at 80 columns the footer keeps m/u/d and gives up app-wide keys first
    # (RecordActions.footer_ranks)
    Command("record.move", "m", "move_record", "Move record",
            "Move the selected record: topic, heading, start/end or before/after a record (one transaction)",
            views=("topics", "recent", "core"), scope="screen", footer_label="Move"),
    Command("record.update", "u", "update_record", "Edit record text",
            "Rewrite the selected record's text; its sources and time are kept", views=("topics", "recent", "core"),
            scope="screen", footer_label="Edit text"),
    Command("record.delete", "d", "delete_record", "Delete record",
            "Delete the selected record (asks first; refused while records link to it)", views=("topics", "recent", "core"),
            scope="screen", footer_label="Delete"),
    Command("topic.delete", "D", "delete_topic", "Delete topic",
            "Delete the selected topic (asks first, lists the links it would leave dangling); Core says why topics/core.md cannot go",
            views=("topics", "core"), scope="screen", footer_label="Del topic"),
    Command("topic.external_edit", "E", "external_edit", "Edit in $EDITOR",
            "Open the selected topic (Core: topics/core.md) in $EDITOR; checked on return, saved when valid",
            views=("topics", "core"), scope="screen", footer_label="$EDITOR"),
    # the job-history panel (this run's jobs + writer-status / agent-history)
    Command("job.history", "J", "job_history", "Job history", "This run's jobs, then the persisted writer history",
            footer=False),
    Command("app.quit", "q", "quit", "Quit", "Quit memory-tui"),
)


def app_bindings() -> list[Binding]:
    return [cmd.binding() for cmd in COMMANDS if cmd.scope == "app" and cmd.key]


def screen_bindings(view: str | None) -> list[Binding]:
    """The screen-scoped bindings of one view (``None``: those every view screen has)."""
    return [
        cmd.binding()
        for cmd in COMMANDS
        if cmd.scope == "screen" and cmd.key and ((not cmd.views) if view is None else (view in cmd.views))
    ]


def commands_for(view: str | None) -> tuple[Command, ...]:
    """What the palette and the help offer in ``view``."""
    return tuple(c for c in COMMANDS if not c.views or (view is not None and view in c.views))


def effective_keys(cmd: Command, keymap: Mapping[str, str]) -> str:
    return keymap.get(cmd.id, cmd.key)


KEY_NAMES = {
    "slash": "/", "question_mark": "?", "escape": "esc", "right_square_bracket": "]", "left_square_bracket": "[",
    "pageup": "pgup", "pagedown": "pgdn",
}


def _key_name(key: str) -> str:
    key = key.strip()
    if key.startswith("ctrl+"):
        return "^" + KEY_NAMES.get(key[5:], key[5:])
    return KEY_NAMES.get(key, key)


def key_label(keys: str) -> str:
    """``keys`` (a binding's comma-separated keys) as the help and palette show them;
    "palette" for a command with no key."""
    return " ".join(_key_name(k) for k in keys.split(",") if k.strip()) or "palette"
