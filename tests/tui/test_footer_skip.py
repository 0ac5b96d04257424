"""The footer skips a recompose whose inputs are those of the keys on screen: the keys it
keeps must be the keys a recompose would build, on every view, at every width, in both
glyph modes, with the model streamed in (``background=True``) as an owner's start does."""

from __future__ import annotations

import pytest
from tui_helpers import make_app, settle

from memory_tui.tui.widgets.footer import FittedFooter

pytestmark = pytest.mark.anyio


def _shown(footer: FittedFooter) -> list[tuple[str, str, str, bool, bool]]:
    return [(k.key, k.key_display, k.description, k.display, k.has_class("-disabled"))
            for k in footer.children if hasattr(k, "key_display")]


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (40, 12)])
async def test_the_kept_footer_is_what_a_recompose_builds(fixture_state_ro, size):
    app = make_app(fixture_state_ro, background=True)
    async with app.run_test(size=size) as pilot:
        while app.model is None or app.loading:
            await pilot.pause(0.02)
        await settle(pilot, app)
        for keys in ("", "2", "3", "4", "5", "1", "ctrl+a"):  # ctrl+a: no binding, nothing changes
            if keys:
                await pilot.press(keys)
                await pilot.pause()
                await pilot.pause()
            footer = app.screen.query_one(FittedFooter)
            kept = _shown(footer)
            footer.refresh(recompose=True)  # in the footer's own context, as Textual does
            await pilot.pause()
            await pilot.pause()
            assert _shown(footer) == kept, (size, keys)
        app.action_toggle_ascii()  # the key names change: the footer must follow
        await pilot.pause()
        await pilot.pause()
        footer = app.screen.query_one(FittedFooter)
        kept = _shown(footer)
        footer.refresh(recompose=True)
        await pilot.pause()
        await pilot.pause()
        assert _shown(footer) == kept
