"""polish (session 5 leftovers): the move picker's chosen position by glyph, the footers at
every size, Topics' cursor after a delete, editor messages where the line leaves no room,
the Sessions placeholder in ASCII.

Each test drives the app (or one dialog) and reads what is drawn.
"""

from __future__ import annotations

from functools import partial

import pytest
from action_harness import DialogHarness, sample_choices
from action_harness import until as until_held
from tui_helpers import screen_text

from memory_tui.tui.dialogs.move_picker import MovePicker

pytestmark = pytest.mark.anyio
until = partial(until_held, tries=2000)


# ---------------------------------------------------------------------- 1. the move picker's positions
def _position_row(text: str) -> str:
    return next(row for row in text.splitlines() if "end" in row and "start" in row and "before" in row)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_chosen_position_has_its_own_glyph_not_only_a_colour(monkeypatch, size):
    """Monochrome (NO_COLOR): only the chosen radio draws ``●``, the others ``○``."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = DialogHarness(lambda: MovePicker(sample_choices(), "845c11f8", topic="topics/people/ada.md", headings=("Ada",)))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: isinstance(app.screen, MovePicker) and app.screen.section is not None)
        await pilot.pause()
        picker = app.screen
        for p in ("end", "start", "before", "after"):
            radio = picker.query_one(f"#pos-{p}")
            assert str(radio.render()).lstrip("▐").startswith("●" if p == "end" else "○"), (p, str(radio.render()))
        if size[0] < 100:  # one line: the row as drawn shows one ● and three ○
            row = _position_row(screen_text(app))
            assert row.count("●") == 1 and row.count("○") == 3 and row.index("●") < row.index("end"), row
        picker.query_one("#pos-after").value = True  # the choice moves: so does the glyph
        await pilot.pause()
        assert picker.position == "after"
        glyphs = {p: str(picker.query_one(f"#pos-{p}").render()).lstrip("▐")[0] for p in ("end", "start", "before", "after")}
        assert glyphs == {"end": "○", "start": "○", "before": "○", "after": "●"}
