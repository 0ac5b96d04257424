"""Pick where a record moves: topic, heading chain, and position (start, end, before/after a record).

Built from ``core.recordops.destinations(tree)`` (every topic with its heading chains and
their records). A new heading chain can be typed (``A › B`` or ``A / B``): missing heading
levels are created by the move. Dismisses with a ``MoveTarget`` — exactly the arguments of
``core.recordops.move_record`` — or ``None`` when cancelled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from rich.text import Text
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, RadioButton, RadioSet
from textual.widgets.option_list import Option

from memory_tui.core.format.text import sanitize

from .confirm_job import dialog_css

POSITIONS = ("end", "start", "before", "after")
_CHAIN_SPLIT = re.compile(r"\s*(?:›|/|>)\s*")


@dataclass(frozen=True)
class MoveTarget:
    topic: str  # "topics/…md"
    headings: tuple[str, ...]
    position: str  # start | end | before | after
    anchor: str | None = None  # record id, for before/after


def chain_label(headings: tuple[str, ...]) -> str:
    return " › ".join(sanitize(h) for h in headings) if headings else "(before the first heading)"


def parse_chain(text: str) -> tuple[str, ...]:
    return tuple(p for p in _CHAIN_SPLIT.split(text.strip()) if p)


def _row(*parts: tuple[str, str]) -> Text:
    # one line per choice: a narrow column cuts the end ("…") instead of wrapping into two
    return Text.assemble(*parts, no_wrap=True, overflow="ellipsis", end="")


class _TopicOption(Option):
    def __init__(self, choice) -> None:
        # the name first, its folder after it (dim): a cut loses the folder, not the name
        folder, _, name = sanitize(choice.path.removeprefix("topics/")).rpartition("/")
        super().__init__(_row((name.removesuffix(".md"), ""), (f"  {folder}/" if folder else "", "dim")))
        self.choice = choice


class _SectionOption(Option):
    def __init__(self, section) -> None:
        # an outline: the last heading of the chain, indented by its depth (the chain's
        # parents are the rows above it), so a long chain is not cut where it differs
        headings = section.headings
        label = sanitize(headings[-1]) if headings else chain_label(headings)
        indent = "  " * max(0, len(headings) - 1)
        super().__init__(_row((indent + label, ""), (f"  ({len(section.records)})", "dim")))
        self.section = section


class _AnchorOption(Option):
    def __init__(self, memory_id: str, content: str) -> None:
        super().__init__(_row((memory_id, "bold"), ("  " + sanitize(" ".join(content.split())), "")))
        self.memory_id = memory_id


class PositionRadio(RadioButton):
    """A radio whose glyph says whether it is chosen: ``●`` on, ``○`` off.

    Textual's radio draws ``●`` for both and tells them apart by colour alone, which a
    monochrome terminal or ``NO_COLOR`` cannot show (ASCII mode turns them into ``*`` / ``o``).
    """

    @property
    def BUTTON_INNER(self) -> str:  # noqa: N802 - Textual's name for the glyph inside the button
        return "●" if self.value else "○"


NARROW = 100  # columns below which the picker fills the screen, the position row under the lists
TINY = 60  # columns below which everything stacks in one scrolling column


class MovePicker(ModalScreen["MoveTarget | None"]):
    """``MovePicker(choices, memory_id, topic=..., headings=...)``: the record's current place preselected."""

    DEFAULT_CSS = dialog_css("MovePicker") + """
    MovePicker > Vertical { max-width: 120; }
    MovePicker #picker-body { height: auto; }
    MovePicker .columns { height: 16; }
    MovePicker .columns > Vertical { width: 1fr; height: 100%; }
    MovePicker OptionList { height: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    MovePicker #error { color: $error; height: auto; }
    MovePicker RadioSet { width: 100%; }
    MovePicker #position-row { height: auto; layout: vertical; }
    /* 80x24 and smaller — the whole screen, the lists side by side, the position
       radios on one line, the anchors full width under them; the heights are set in fit() */
    MovePicker.-narrow > Vertical { width: 100%; max-width: 100%; height: 100%; max-height: 100%; }
    MovePicker.-narrow .dialog-title { padding: 0; }
    MovePicker.-narrow .dialog-buttons { padding-top: 0; }
    MovePicker.-narrow #picker-body { height: 1fr; }
    MovePicker.-narrow .columns { layout: grid; grid-size: 2; grid-columns: 1fr 1fr; grid-rows: auto; height: auto; }
    MovePicker.-narrow .columns > Vertical { height: auto; }
    MovePicker.-narrow #col-position { column-span: 2; }
    MovePicker.-narrow OptionList { height: auto; }
    MovePicker.-narrow #new-headings { margin: 1 0 0 1; }
    MovePicker.-narrow .wide-only { display: none; }
    MovePicker.-narrow #position-row { height: 1; layout: horizontal; }
    MovePicker.-narrow #position-row Label { width: auto; padding-right: 1; }
    MovePicker.-narrow RadioSet { layout: horizontal; width: 1fr; height: 1; }
    MovePicker.-narrow RadioButton { width: auto; margin-right: 2; }
    MovePicker.-tiny .columns { grid-size: 1; grid-columns: 1fr; }
    MovePicker.-tiny #col-position { column-span: 1; }
    MovePicker.-tiny #position-row { height: auto; layout: vertical; }
    MovePicker.-tiny RadioSet { height: auto; }
    """
    # ctrl+s like the record-text dialog: the picker has a text input, so a letter would type
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="dialog.cancel"),
        Binding("ctrl+s", "move", "Move", id="move.confirm", priority=True),
    ]

    def __init__(self, choices, memory_id: str, *, topic: str | None = None, headings: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.choices = tuple(choices)
        self.memory_id = memory_id
        self.start_topic = topic
        self.start_headings = tuple(headings)
        self.filled_topic: str | None = None  # the topic whose sections are listed

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Move record {sanitize(self.memory_id)}", classes="dialog-title")
            with VerticalScroll(id="picker-body"):
                with Horizontal(classes="columns"):
                    with Vertical(id="col-topic"):
                        yield Label("Topic", classes="wide-only")
                        yield OptionList(*[_TopicOption(c) for c in self.choices], id="topics")
                    with Vertical(id="col-heading"):
                        yield Label("Heading", classes="wide-only")
                        yield OptionList(id="sections")
                        yield Input(placeholder="or a new chain: A › B", id="new-headings")
                    with Vertical(id="col-position"):
                        with Horizontal(id="position-row"):
                            yield Label("Position", classes="position-label")
                            with RadioSet(id="position"):
                                for p in POSITIONS:
                                    yield PositionRadio(p, value=p == "end", id=f"pos-{p}")
                        yield Label("Anchor record (before/after)", classes="wide-only")
                        yield OptionList(id="anchors")
            yield Label("", id="error")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"Cancel ({self._key_of('dialog.cancel')})", id="cancel")
                yield Button(f"Move ({self._key_of('move.confirm')})", id="move", variant="primary")

    def fit(self, width: int, height: int) -> None:
        """Lay the picker out for a ``width`` x ``height`` terminal (every resize)."""
        narrow, tiny = width < NARROW, width < TINY
        self.set_class(narrow, "-narrow")
        self.set_class(tiny, "-tiny")
        lists = {name: self.query_one(f"#{name}", OptionList) for name in ("topics", "sections", "anchors")}
        titles = {"topics": "Topic", "sections": "Heading", "anchors": "Anchor record (before/after)"}
        for name, lst in lists.items():
            lst.border_title = titles[name] if narrow else None
        self.query_one("#new-headings", Input).compact = narrow
        self.query_one("#position", RadioSet).compact = narrow
        if not narrow:
            # The three columns take what the dialog's other rows (title, error line,
            # buttons, borders: 9) leave, so the buttons stay on screen.
            self.query_one(".columns").styles.height = max(8, min(16, int(height * 0.9) - 9))
            for lst in lists.values():
                lst.styles.height = "1fr"
            return
        self.query_one(".columns").styles.height = "auto"
        # The whole screen less border 2, title 1, error 1, buttons 3 is the body; in it the
        # side-by-side lists (the headings' one a row shorter for the blank row and the one-line
        # chain input under it), the position line and the anchors.
        # Below a usable size the lists keep a minimum and the body scrolls (the buttons stay).
        body = height - 7
        if tiny:
            each = max(5, (body - 2) // 3)
            heights = {"topics": each, "sections": each, "anchors": max(4, body - 2 - 2 * each)}
        else:
            top = max(5, (body - 2 + 1) // 2)
            heights = {"topics": top + 1, "sections": top - 1, "anchors": max(4, body - 2 - top)}
        for name, lst in lists.items():
            lst.styles.height = heights[name]

    def shown(self) -> bool:
        """False once dismissed: dismissed before its compose ran (m then esc on a busy
        machine), its lists were never mounted, yet its mount and resize events still come."""
        return self in self.app.screen_stack

    def on_resize(self, event: Resize) -> None:
        if self.shown():
            self.fit(event.size.width, event.size.height)

    def on_mount(self) -> None:
        if not self.shown():
            return
        self.fit(self.app.size.width, self.app.size.height)  # before the first layout, not only on a resize
        topics = self.query_one("#topics", OptionList)
        index = next((i for i, c in enumerate(self.choices) if c.path == self.start_topic), 0)
        if self.choices:
            topics.highlighted = index
            self._fill_sections(self.choices[index], self.start_headings)
        topics.focus()

    # -------------------------------------------------------------- state

    @property
    def topic_choice(self):
        opt = self.query_one("#topics", OptionList).highlighted_option
        return opt.choice if isinstance(opt, _TopicOption) else None

    @property
    def section(self):
        opt = self.query_one("#sections", OptionList).highlighted_option
        return opt.section if isinstance(opt, _SectionOption) else None

    @property
    def position(self) -> str:
        pressed = self.query_one("#position", RadioSet).pressed_button
        return str(pressed.label) if pressed is not None else "end"

    @property
    def headings(self) -> tuple[str, ...]:
        typed = parse_chain(self.query_one("#new-headings", Input).value)
        if typed:
            return typed
        section = self.section
        return section.headings if section is not None else ()

    def _fill_sections(self, choice, prefer: tuple[str, ...] = ()) -> None:
        self.filled_topic = choice.path
        sections = self.query_one("#sections", OptionList)
        sections.clear_options()
        sections.add_options([_SectionOption(s) for s in choice.sections])
        if choice.sections:
            sections.highlighted = next((i for i, s in enumerate(choice.sections) if s.headings == prefer), 0)
        self._fill_anchors()

    def _fill_anchors(self) -> None:
        anchors = self.query_one("#anchors", OptionList)
        anchors.clear_options()
        section = self.section
        if section is None or parse_chain(self.query_one("#new-headings", Input).value):
            return
        anchors.add_options([_AnchorOption(mid, content) for mid, content in section.records if mid != self.memory_id])
        if anchors.option_count:
            anchors.highlighted = 0

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option is not event.option_list.highlighted_option:
            return  # stale: the list's first highlight arrives after on_mount moved it on
        if event.option_list.id == "topics" and isinstance(event.option, _TopicOption):
            # on_mount filled the sections with the record's own chain preselected: refilling
            # them for the same topic would lose that choice
            if event.option.choice.path != self.filled_topic:
                self._fill_sections(event.option.choice)
        elif event.option_list.id == "sections":
            self._fill_anchors()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill_anchors()

    # -------------------------------------------------------------- result

    def target(self) -> MoveTarget | None:
        """The chosen target, or None (and the reason shown) when it is incomplete."""
        error = self.query_one("#error", Label)
        choice = self.topic_choice
        if choice is None:
            error.update("Choose a topic.")
            return None
        position = self.position
        anchor = None
        if position in ("before", "after"):
            opt = self.query_one("#anchors", OptionList).highlighted_option
            if not isinstance(opt, _AnchorOption):
                error.update(f"'{position}' needs an anchor record under that heading.")
                return None
            anchor = opt.memory_id
        error.update("")
        return MoveTarget(choice.path, self.headings, position, anchor)

    def _key_of(self, binding_id: str) -> str:
        """The key that runs ``binding_id`` here (a keymap may have moved it), as shown."""
        keys = getattr(self.app, "keymap", {}).get(binding_id)
        if keys is None:
            keys = next(b.key for b in self.BINDINGS if isinstance(b, Binding) and b.id == binding_id)
        return self.app.get_key_display(Binding(keys.split(",")[0].strip(), ""))

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_move(self) -> None:
        target = self.target()
        if target is not None:
            self.dismiss(target)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "cancel":
            self.dismiss(None)
            return
        self.action_move()
