"""Everything memory-tui installs passes OpenProgram's own strict parse and its core rendering.

Generated hand edits of the fixture's topics, built from the pieces that have separated the two
before (footnote definitions in shapes OpenProgram does not read, special-token text, ``^word``
at line ends, fences, headings, no-break spaces, citations and block links), go through the
one transaction. For every edit memory-tui installs, the installed ``topics/`` tree is read the
way the spec says OpenProgram reads it (written here from the rules, memory-format.md §3):

* a paragraph is a run of lines that are not blank, not a heading, not a fence line or inside a
  fence, not an HTML line, and not a definition **in OpenProgram's shape**;
* every citation of a record paragraph names a definition of the same file in that shape, and
  every such definition is cited; a paragraph that cites ends with its block id;
* ``topics/core.md`` holds none of ``o200k_base``'s special tokens (OpenProgram renders core with
  that encoding on every transaction and its counter raises on them).

Edits memory-tui refuses must leave every file as it was, and an accepted edit never turns a
line OpenProgram reads as text into the definition it might have meant (no silent repair).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.tx import api

_WHEN = r"(?:\d{4}(?:-\d{2}(?:-\d{2})?)?|undated)"
OP_DEFINITION = re.compile(rf"^\[\^([A-Za-z0-9_-]+)\]:\s*Time:\s*(?:`{_WHEN}`|{_WHEN})\s*;\s*Sources:\s*(.+?)\s*$")
CITATION = re.compile(r"\[\^([A-Za-z0-9_-]+)\]")
BLOCK_SUFFIX = re.compile(r"(?:\s+\^[A-Za-z0-9-]+)*\s+\^([A-Za-z0-9-]+)\s*$")
SPECIAL_O200K = ("<|endoftext|>", "<|endofprompt|>")

PIECES = [
    " ", "\t", "\u00a0", "word", "Ada", ".", "`", "``", "` 2026-11 `", "`2026-11`", "Time: ", "; Sources: ",
    "^abc12345", " ^fa3c8017", "^n", "[^e1]", "[^e-d6cb4b50f2]", "[^e3]", "<|endoftext|>", "<|endofprompt|>",
    "<|fim_middle|>", "[x](../projects/kyoto-trip.md#^fa3c8017)", "[y](kyoto-trip.MD)", "#", "# ", "```",
    "<!-- c -->", "[](x)",
]


def op_reading_errors(path: str, text: str) -> list[str]:
    """What OpenProgram's strict read of one topic, as the spec states it, finds wrong."""
    lines = text.splitlines()
    defined = {m.group(1) for line in lines if (m := OP_DEFINITION.match(line))}
    errors: list[str] = []
    cited: set[str] = set()
    paragraph: list[str] = []
    fenced = False

    def close() -> None:
        if not paragraph:
            return
        body = "\n".join(paragraph).strip()
        paragraph.clear()
        ids = CITATION.findall(body)
        if not BLOCK_SUFFIX.search(body):
            if ids and all(i.startswith("mem_") for i in ids):
                cited.update(ids)
                return
            errors.append(f"{path}: paragraph without block id: {body[:60]!r}")
            return
        for fid in ids:
            cited.add(fid)
            if fid not in defined:
                errors.append(f"{path}: undefined footnote: {fid}")

    for line in lines + [""]:
        if line.lstrip().startswith("```"):
            close()
            fenced = not fenced
            continue
        if fenced or OP_DEFINITION.match(line) or re.match(r"\s*(?:<!--|<a\s)", line) \
                or re.match(r"^(#{1,6})\s+(.+?)\s*$", line) or not line.strip():
            close()
            continue
        paragraph.append(line)
    errors.extend(f"{path}: unused footnote definition: {fid}" for fid in sorted(defined - cited))
    if path == "topics/core.md":
        errors.extend(f"{path}: special-token text {tok}" for tok in SPECIAL_O200K if tok in text)
    return errors


def _topics(state: Path) -> dict[str, str]:
    root = state / "memory" / "topics"
    return {p.relative_to(root.parent).as_posix(): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.md"))}


@settings(max_examples=int(os.environ.get("MEMORY_TUI_FUZZ_EXAMPLES", "25")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_every_install_passes_openprogram_strict_read_and_core_render(_fixture_master, data):
    topics = _topics(_fixture_master)
    path = data.draw(st.sampled_from(sorted(topics)), label="topic")
    lines = topics[path].split("\n")
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        at = data.draw(st.integers(0, len(lines) - 1), label="line")
        piece = "".join(data.draw(st.lists(st.sampled_from(PIECES), min_size=1, max_size=4), label="piece"))
        how = data.draw(st.sampled_from(["insert", "append", "new line", "replace time"]), label="how")
        if how == "insert":
            cut = data.draw(st.integers(0, len(lines[at])), label="cut")
            lines[at] = lines[at][:cut] + piece + lines[at][cut:]
        elif how == "append":
            lines[at] += piece
        elif how == "new line":
            lines.insert(at, piece)
        elif "`2026-11`" in lines[at]:
            lines[at] = lines[at].replace("`2026-11`", piece, 1)
    state = Path(tempfile.mkdtemp(prefix="op-rule-")) / "state"
    shutil.copytree(_fixture_master, state, symlinks=True)
    before = _topics(state)
    try:
        res = api.staged_edit(state, path, "\n".join(lines), git_commit="off")
        after = _topics(state)
        if not res.ok:
            assert after == before, (res.code, res.message)
            return
        errors = [e for p, text in after.items() for e in op_reading_errors(p, text)]
        assert not errors, (res.message, errors)
        # No silent repair: a line OpenProgram does not read as a definition is the owner's
        # text; normalisation never rewrites it into the definition it might have meant.
        unread = [line for line in lines if re.match(r"^\[\^[A-Za-z0-9_-]+\]:", line) and not OP_DEFINITION.match(line)]
        installed = after[path].split("\n") if path in after else []
        assert all(line.rstrip() in installed for line in unread), (res.message, unread)
    finally:
        shutil.rmtree(state.parent, ignore_errors=True)
