"""The app shell. ``create_app`` is the one factory used by the CLI, the tests and the
screenshot script.

``MemoryApp`` owns the state: the model (a frozen ``WorkspaceModel`` from ``tui/model/data.py``),
the settings, the watcher and the job runner. Each view is a screen of its own
(``tui/screens/``), one Textual mode per view; the app switches modes and hands every screen
the new model. Workers load, watch and run jobs; they never touch widgets, they hand results
back as messages (harlequin's rule).

What the app does is mixed in by responsibility from ``tui/shell/``: ``ModelLoading``
(load, reload, watch, insights), ``JobFlow`` (preview, confirm, run, report),
``Navigation`` (modes and jumps) and ``Problems``; this module keeps the state they share,
the header and the app-wide actions.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, ClassVar

from rich.text import Text
from textual.app import App
from textual.binding import BindingType

from memory_tui.core.store.lockprobe import probe_write_lock
from memory_tui.core.format.tokens import O200kCounter, TokenCounter

from . import commands as registry
from .palette import MemoryCommands
from .model.data import WorkspaceModel
from .model.load import load_model
from .render import Glyphs, glyphs_for
from .screens import MODES as SCREEN_MODES
from .shell.job_flow import JobFlow
from .shell.loading import ModelLoading
from .shell.navigation import Navigation
from .shell.problems import Problems
from .widgets import header_text

# the one loader is the engine's; the app adds the binding ids it knows.
from memory_tui.pipeline.settings import Settings, load_config


class _KnownBindingIds:
    """The ids a ``[keymap]`` entry may name, found only when one is checked: finding them
    imports every screen, widget and dialog module (~0.05-0.1 s before the first frame), and
    a config without a keymap never asks."""

    def __contains__(self, binding_id: object) -> bool:
        from .binding_ids import known_binding_ids

        return binding_id in known_binding_ids()


def load_app_settings(path: Path | None = None) -> Settings:
    return load_config(path, binding_ids=_KnownBindingIds())  # type: ignore[arg-type]


# ASCII mode filters every drawn line; Screenshot saves under the cwd.
from .ascii import AsciiFilter
from .safe_filter import SanitizeFilter

_ASCII_FILTER = AsciiFilter()
_SANITIZE_FILTER = SanitizeFilter()

Clock = Callable[[], datetime]


class MemoryApp(ModelLoading, JobFlow, Navigation, Problems, App[None]):
    TITLE = "memory-tui"
    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {MemoryCommands}
    BINDINGS: ClassVar[list[BindingType]] = registry.app_bindings()
    MODES: ClassVar = dict(SCREEN_MODES)
    DEFAULT_MODE: ClassVar[str] = "topics"

    def __init__(
        self,
        state_dir: Path,
        *,
        clock: Clock | None = None,
        tokens: TokenCounter | None = None,
        watch: bool = True,
        ascii: bool = False,
        home: Path | None = None,
        settings: Settings | None = None,
        background: bool = True,
        session_loader: Callable[..., object] | None = None,
        insights: bool = True,
    ) -> None:
        super().__init__()
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.counter = tokens or O200kCounter()
        self.watch_enabled = watch
        self.ascii_mode = ascii
        self.home = home
        self.settings = settings if settings is not None else load_app_settings()
        self.keymap: dict[str, str] = dict(self.settings.keymap)
        self.filter_text = ""
        self._init_navigation()
        self._init_loading(insights)
        self._init_jobs()
        self.lock_probe = probe_write_lock(self.state_dir / "memory")  # refreshed with every load
        # with ``background`` the app paints at once with no model and a
        # worker streams it in (topics first, then sessions); without it (tests, snapshots)
        # the whole model is loaded before the first screen mounts.
        self.background = background
        self.session_loader = session_loader
        self.model: WorkspaceModel | None = None
        if not background:
            self.model = load_model(self.state_dir, counter=self.counter, home=self.home, session_loader=session_loader)
        if self.settings.theme:
            self.theme = self.settings.theme

    def on_mount(self) -> None:
        self.set_class(self.ascii_mode, "-ascii")
        if self.keymap:
            self.set_keymap(self.keymap)
        if self.model is None:
            self.loading = "workspace"
            self.load_in_background(None)
        if self.watch_enabled:
            self._watch_worker()
        self.compute_insights()  # after the first paint, never before

    # ------------------------------------------------------------------ what screens read
    @property
    def view(self) -> str:
        return self.current_mode

    @property
    def glyphs(self) -> Glyphs:
        return glyphs_for(self.ascii_mode)

    def now(self) -> datetime:
        return self.clock() if self.clock else datetime.now(timezone.utc)





    def lock_label(self) -> str:
        """The header's lock item: who else holds ``write.lock`` ("" when free or ours)."""
        probe = self.lock_probe
        if probe is None or not probe.held or (probe.holder is not None and probe.holder.this_process):
            return ""
        who = probe.holder.describe() if probe.holder else "another program"
        return f"{self.glyphs.bad} locked: {who}"

    def header_line(self, width: int, *, insights: Any = None) -> Text:
        """The header every screen draws: one place, so none forgets an item (the lock)."""
        return header_text(
            self.model, width, self.now(), self.glyphs, problems=self.problem_count(), job=self.job_label(),
            lock=self.lock_label(), insights=self.insights if insights is None else insights,
        )

    def banner_lines(self) -> list[Text]:
        m = self.model
        lines: list[Text] = []
        if m and m.memory_exists:
            if not m.enabled:
                lines.append(Text.assemble(
                    ("Memory is disabled", "bold"),
                    ' (memory.backend = "none" in config.json): OpenProgram neither recalls nor writes memory. Showing the files read-only.',
                ))
            elif not m.writer_enabled:
                lines.append(Text.assemble(("Writing is off", "bold"), " (memory.writer.enabled = false): new turns are not written to memory."))
            if self.settings.problem:
                lines.append(Text(f"Settings: {self.settings.problem}"))
        return lines

    # ------------------------------------------------------------------ screens


    def get_line_filters(self):
        # the sanitiser first, on every line of every widget: nothing from disk reaches the
        # terminal raw, whichever view or library drew it
        filters = [_SANITIZE_FILTER, *super().get_line_filters()]
        return [*filters, _ASCII_FILTER] if self.ascii_mode else filters

    # sessions-done: ASCII footer. Textual shows some keys as symbols (enter as U+23CE) that
    # the one-cell line filter cannot spell; in ASCII mode the footer names the key instead.
    def get_key_display(self, binding):
        shown = super().get_key_display(binding)
        if self.ascii_mode and not shown.isascii():
            return binding.key.split(",")[0].strip()
        return shown

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        # Textual's default saves to ~/Downloads (or serves it); the owner expects the cwd.
        saved = self.save_screenshot(filename, path or os.getcwd())
        self.notify(f"Screenshot saved to {saved}", title="Screenshot")

    def get_system_commands(self, screen):
        for cmd in super().get_system_commands(screen):
            if cmd.title in ("Quit", "Keys"):
                continue  # ours are in the registry
            yield cmd

    def _init_mode(self, mode: str):  # type: ignore[override]
        # Textual (pinned 8.2.8) re-parses and re-applies the whole stylesheet when a mode's
        # screen is first made, then again in switch_mode because that pass did not stamp the
        # new screen; nothing changes in between (the screen's widgets bring their CSS when
        # they mount, later), so the second pass is skipped: ~0.03 s of opening each view.
        new = mode not in self._screen_stacks
        await_mount = super()._init_mode(mode)
        stack = self._screen_stacks.get(mode) if new else None
        if stack:
            stack[0]._css_update_count = self._css_update_count
        return await_mount






    # ------------------------------------------------------------------ model

    # ------------------------------------------------------------------ actions
    def action_toggle_ascii(self) -> None:
        self.ascii_mode = not self.ascii_mode
        self.set_class(self.ascii_mode, "-ascii")
        self.refresh_bindings()  # sessions-done: the footer's key names follow the mode
        screen = self.current_view_screen
        if screen is not None:
            screen.refresh_view()






    # ------------------------------------------------------------------ loading & watching










    # ------------------------------------------------------------------ insights




    # ------------------------------------------------------------------ jobs (actions-ui)







    def _redraw_header(self) -> None:
        screen = self.current_view_screen
        if screen is not None:
            screen.render_header()
        self._redraw_headers_over_views()

    def _redraw_headers_over_views(self) -> None:
        # The screens pushed over a view (History, Evidence, Alternatives) draw the same
        # header; a new model (a revert they ran), a job's progress or the lock changes it
        # under them as much as under the view.
        for screen in self.screen_stack:
            if screen.is_mounted and screen not in self.view_screens.values():
                redraw = getattr(screen, "render_header", None)
                if redraw is not None:
                    redraw()






def create_app(
    state_dir: Path | str,
    *,
    clock: Clock | None = None,
    tokens: TokenCounter | None = None,
    watch: bool = True,
    ascii: bool = False,
    home: Path | None = None,
    settings: Settings | None = None,
    background: bool = True,
    session_loader: Callable[..., object] | None = None,
    insights: bool = True,
) -> MemoryApp:
    """The one factory (CLI, tests, screenshots).

    ``home`` is the folder shown as ``~`` (tests inject one so no absolute path is on screen);
    ``settings`` defaults to the user's config file (tests pass ``Settings()``);
    ``background=False`` loads the whole model before the first paint (deterministic tests);
    ``session_loader`` stands in for ``sessions.store.load_sessions``.
    """
    return MemoryApp(
        Path(state_dir), clock=clock, tokens=tokens, watch=watch, ascii=ascii, home=home, settings=settings,
        background=background, session_loader=session_loader,
        insights=insights,
    )
