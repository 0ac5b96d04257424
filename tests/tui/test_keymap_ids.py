"""A ``[keymap]`` entry may rebind any binding the app declares, not only the palette's
commands: the README's Keys table documents screen, widget and dialog ids too."""

from __future__ import annotations

import re
from pathlib import Path

from memory_tui.tui.app import load_app_settings
from memory_tui.tui.binding_ids import known_binding_ids

README = Path(__file__).resolve().parents[2] / "README.md"
_ID = re.compile(r"`([a-z_]+\.[a-z_]+)`")


def _readme_key_ids() -> set[str]:
    text = README.read_text(encoding="utf-8")
    table = text.split("## Keys", 1)[1].split("\n## ", 1)[0]
    ids: set[str] = set()
    for line in table.splitlines():
        cells = line.split("|")
        if len(cells) > 3:
            # Only the binding-id column: the action column names verbs and files too.
            ids.update(_ID.findall(cells[2]))
            ids.update(m for m in _ID.findall(cells[3]) if m.split(".")[0] in {i.split(".")[0] for i in known_binding_ids()})
    return ids


def test_every_binding_id_in_the_readme_is_one_the_keymap_accepts():
    documented = _readme_key_ids()
    assert {"editor.save", "history.revert", "evidence.sort"} <= documented
    assert documented - known_binding_ids() == set()


def test_a_screen_level_id_rebinds_and_an_unknown_one_is_still_a_problem(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[keymap]\n"history.revert" = "V"\n"editor.save" = "ctrl+w"\n"editor.nope" = "f9"\n')
    settings = load_app_settings(cfg)
    assert settings.keymap == {"history.revert": "V", "editor.save": "ctrl+w"}
    (problem,) = settings.problems
    assert (problem.details["key"], problem.line) == ("keymap.editor.nope", 4)
