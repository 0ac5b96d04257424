"""Generated mutations of the fixture's topics and record-op requests, each answer held to
OpenProgram's rules as the spec restates them (``../shared/spec/memory-format.md``, facts read
from OpenProgram's behaviour) and to the corpus answers (``openprogram-edits.tgz``).

The oracle below is written from the format's rules, not from memory-tui's code:

* a footnote definition is read only in OpenProgram's shape (§3.4): ``[^id]:`` then
  ``Time:`` and a date shape or ``undated``, bare or in backticks with nothing else inside,
  then ``;`` ``Sources:`` and something; any other line is text, so its citations are
  undefined (class 1);
* nothing installed stops OpenProgram's core render: ``o200k_base``'s special tokens are
  refused in ``topics/core.md`` and ordinary text elsewhere (class 2);
* OpenProgram's path rule on the path as given, ``/`` the only separator, and its topic-link
  rule with the extension compared case-blind (class 3);
* OpenProgram's line rules (§3.8 step 4 and 6) on every line that is not a definition, and a
  timeline row links its topic by the plain path; block links read, rewritten and checked in
  OpenProgram's link shapes, a link to a topic created in the same edit included (class 4);
* record ops: ``changed_files`` in plain string order, the timeline's topic link unencoded, and
  an inserted block joined with exactly one blank line each side (class 6).

Tests named ``test_stricter_row_*`` are the README's "Where memory-tui is stricter" rows.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_tui.core.store.workspace import workspace_revision
from memory_tui.core.tx import api

SHARED_FIXTURES = Path(os.environ.get("MEMORY_TUI_SHARED", Path(__file__).resolve().parents[2].parent / "shared")) / "fixtures"
EDITS_TGZ = SHARED_FIXTURES / "openprogram-edits.tgz"
_SKIP = f"{EDITS_TGZ} (OpenProgram's answers to owner edits) is not present; set MEMORY_TUI_SHARED"

# Each example is a whole transaction on a fresh copy of the fixture (about a second): a few per
# class in the suite, more with MEMORY_TUI_DIFF_EXAMPLES.
SETTINGS = settings(max_examples=int(os.environ.get("MEMORY_TUI_DIFF_EXAMPLES", "6")), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# -- the oracle: OpenProgram's rules as the spec states them ------------------------------------

_WHEN = r"(?:\d{4}(?:-\d{2}(?:-\d{2})?)?|undated)"
OP_DEFINITION = re.compile(rf"^\[\^([A-Za-z0-9_-]+)\]:\s*Time:\s*(?:`{_WHEN}`|{_WHEN})\s*;\s*Sources:\s*(.+?)\s*$")
SPECIAL_O200K = ("<|endoftext|>", "<|endofprompt|>")  # the encoding OpenProgram counts core with


def op_path_code(path: str) -> str | None:
    """OpenProgram's writable-path rule (its ``changes`` route): None when it writes the path."""
    parts = path.split("/")
    if path.startswith("/") or ".." in parts:
        return "PATH_OUTSIDE_WORKSPACE"
    norm = "/".join(p for p in parts if p not in ("", "."))
    if not (norm.startswith("topics/") and norm.endswith(".md")):
        return "READ_ONLY_PATH"
    return None


def op_line(line: str, committed: set[str]) -> str:
    """§3.8 steps 4 and 6 on a line that is not a definition: an uncommitted trailing ``^id``
    goes with the spaces and tabs before it; spaces and tabs before a citation go; the last
    trailing id gets exactly one space before it."""
    m = re.search(r"[ \t]*\^([A-Za-z0-9-]+)(?=\s*$)", line)
    if m and m.group(1) not in committed:
        line = line[: m.start()] + line[m.end():]
    line = re.sub(r"[ \t]+\[\^([A-Za-z0-9_-]+)\]", r"[^\1]", line)
    return re.sub(r"[ \t]*\^([A-Za-z0-9-]+)\s*$", r" ^\1", line)


# -- harness --------------------------------------------------------------------------------------


def _copy(master: Path) -> Path:
    dest = Path(tempfile.mkdtemp(prefix="op-diff-")) / "state"
    shutil.copytree(master, dest, symlinks=True)
    return dest


def _topics(state: Path) -> dict[str, str]:
    root = state / "memory" / "topics"
    return {p.relative_to(root.parent).as_posix(): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.md"))}


def _files(state: Path) -> dict[str, bytes]:
    mem = state / "memory"
    return {p.relative_to(mem).as_posix(): p.read_bytes() for p in mem.rglob("*")
            if p.is_file() and not p.relative_to(mem).parts[0].startswith(".")}


def _edit(state: Path, path: str, text: str | None):
    return api.staged_edit(state, path, text, git_commit="off")


def _committed_ids(text: str) -> set[str]:
    return set(re.findall(r"(?m)\s\^([A-Za-z0-9-]+)\s*$", text))


@pytest.fixture(scope="module")
def master(_fixture_master) -> Path:
    return _fixture_master


def _record_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.split("\n")) if re.search(r"\[\^e-[0-9a-f]{10}\] \^[0-9a-f]{8}$", line)]


def _definition_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.split("\n")) if OP_DEFINITION.match(line)]


# -- class 1: a definition is read only in OpenProgram's shape ------------------------------------

_TIMES = st.one_of(
    st.tuples(st.text(" \t", min_size=0, max_size=3), st.text(" \t", min_size=0, max_size=3)).map(
        lambda ws: f"`{ws[0]}2026-11{ws[1]}`"),
    st.just("``"), st.just("` `"), st.just("2026-11"), st.just("`2026-11"), st.just("`undated`"),
    st.just("`2026-1`"), st.just("`26`"), st.just("`2026-11-01`"),
)


@SETTINGS
@given(data=st.data(), when=_TIMES)
def test_class1_definition_time_is_read_only_in_openprogram_shape(master, data, when):
    topics = _topics(master)
    path = data.draw(st.sampled_from(sorted(topics)))
    text = topics[path]
    lines = text.split("\n")
    at = data.draw(st.sampled_from(_definition_lines(text)))
    fid = OP_DEFINITION.match(lines[at]).group(1)
    lines[at] = lines[at].replace("`2026-11`", when, 1)
    state = _copy(master)
    before = _files(state)
    res = _edit(state, path, "\n".join(lines))
    if OP_DEFINITION.match(lines[at]):
        assert res.ok, (when, res.code, res.message)
        installed = (state / "memory" / path).read_text(encoding="utf-8").split("\n")
        bare = when.strip("`")
        assert installed[at] == lines[at].replace(when, f"`{bare}`", 1).rstrip() or installed[at].startswith(
            f"[^{fid}]: Time: `{bare}`; Sources: "), installed[at]
    else:
        # OpenProgram reads no definition there: the citation is undefined. Never "no change",
        # never the committed line back.
        assert not res.ok and res.code == "INVALID_TOPIC_FORMAT", (when, res.message)
        assert res.message.startswith(f"undefined footnote: {fid}"), res.message
        assert res.line == at + 1 and res.path == path
        assert _files(state) == before


# -- class 2: nothing installed stops OpenProgram's core render -----------------------------------


@SETTINGS
@given(data=st.data(), token=st.sampled_from(SPECIAL_O200K + ("<|fim_middle|>", "<|fim_prefix|>")))
def test_class2_special_tokens_refused_in_core_only(master, data, token):
    topics = _topics(master)
    path = data.draw(st.sampled_from(sorted(topics)))
    text = topics[path]
    lines = text.split("\n")
    at = data.draw(st.sampled_from(_record_lines(text)))
    # between words, outside any link (a block link's path is OpenProgram's to rewrite)
    links = [m.span() for m in re.finditer(r"\[[^\]]*\]\([^)]*\)", lines[at])]
    cuts = [i for i in range(lines[at].index("[^") + 1)
            if (i == 0 or lines[at][i - 1] == " ") and not any(a < i < b for a, b in links)]
    cut = data.draw(st.sampled_from(cuts))
    lines[at] = lines[at][:cut] + token + lines[at][cut:]
    state = _copy(master)
    res = _edit(state, path, "\n".join(lines))
    if path == "topics/core.md" and token in SPECIAL_O200K:
        assert not res.ok and res.code == "INVALID_TOPIC_FORMAT", res.message
        assert token in res.message and (res.path, res.line, res.column) == (path, at + 1, cut + 1)
        assert _topics(state)[path] == text
    else:
        assert res.ok, (path, token, res.message)
        assert token in _topics(state)[path]


# -- class 3: paths and links by OpenProgram's rule ------------------------------------------------

_PATHS = [
    ("topics\\misc.md", "READ_ONLY_PATH"),            # one name outside topics/, not topics/misc.md
    ("topics/notes\\misc.md", "READ_ONLY_PATH"),      # stricter row: backslash inside a name
    ("topics/misc.MD", "READ_ONLY_PATH"),
    ("topics/misc.md", None),
    ("topics/./misc.md", None),
    ("topics//misc.md", None),
    ("topics/a/../misc.md", "PATH_OUTSIDE_WORKSPACE"),
    ("/topics/misc.md", "PATH_OUTSIDE_WORKSPACE"),
    ("sources/misc.md", "READ_ONLY_PATH"),
    ("core.md", "READ_ONLY_PATH"),
]


@pytest.mark.parametrize(("path", "code"), _PATHS)
def test_paths_by_openprogram_rule(master, path, code):
    assert op_path_code(path) == code or "\\" in path  # the oracle agrees, but for the stricter row
    state = _copy(master)
    before = _files(state)
    body = ("# Misc\n\nA misc fact.[^e1]\n\n"
            "[^e1]: Time: `2026-11`; Sources: [note](openprogram/local_a1b2c3d4e5/a00000000001)\n")
    res = _edit(state, path, body)
    if code is None:
        assert res.ok, res.message
        assert (state / "memory" / "topics" / "misc.md").is_file()
    else:
        assert not res.ok and res.code == code, (res.code, res.message)
        assert _files(state) == before
        assert not (state / "memory" / "topics" / "misc.md").exists()


@SETTINGS
@given(data=st.data(), ext=st.sampled_from(["md", "MD", "Md", "mD", "markdown", "txt"]),
       fragment=st.sampled_from(["", "#intro", "#^fa3c8017"]))
def test_class3_topic_link_extension_is_case_blind(master, data, ext, fragment):
    path = "topics/people/ada.md"
    text = _topics(master)[path]
    target = f"../projects/kyoto-trip.{ext}{fragment}"
    new = text.replace("and wants short answers.", f"and wants short answers, see [the plan]({target}).", 1)
    state = _copy(master)
    res = _edit(state, path, new)
    if ext.lower() == "md" and not fragment.startswith("#^"):  # a topic link, whatever the case
        assert not res.ok and res.message.startswith("Topic-to-Topic link must target #^block-id"), res.message
    else:
        assert res.ok, res.message


def test_a_link_within_the_file_is_no_topic_link(master):
    path = "topics/people/ada.md"
    new = _topics(master)[path].replace("and wants short answers.", "and wants short answers (see [below](#notes)).", 1)
    res = _edit(_copy(master), path, new)
    assert res.ok, res.message


# -- class 4: bytes by OpenProgram's line rules ----------------------------------------------------


@SETTINGS
@given(data=st.data(), gap=st.text(" \t", min_size=0, max_size=3), committed=st.booleans(),
       trailing=st.text(" \t", max_size=2))
def test_class4_block_id_on_a_heading_line(master, data, gap, committed, trailing):
    path = "topics/projects/kyoto-trip.md"
    text = _topics(master)[path]
    ids = sorted(_committed_ids(text))
    bid = data.draw(st.sampled_from(ids)) if committed else "abc12345"
    new = text.replace("# Kyoto trip\n", f"# Kyoto trip{gap}^{bid}{trailing}\n", 1)
    state = _copy(master)
    res = _edit(state, path, new)
    got = _topics(state)[path].split("\n")[0]
    assert res.ok, res.message
    assert got == op_line(f"# Kyoto trip{gap}^{bid}{trailing}", set(ids)), got


@SETTINGS
@given(data=st.data(), space=st.sampled_from(["\u00a0", "\u2007", "\u202f", "\u3000"]))
def test_class4_unusual_space_before_a_committed_block_id(master, data, space):
    topics = _topics(master)
    path = data.draw(st.sampled_from(sorted(topics)))
    text = topics[path]
    lines = text.split("\n")
    at = data.draw(st.sampled_from(_record_lines(text)))
    lines[at] = re.sub(r" \^([0-9a-f]{8})$", space + r"^\1", lines[at])
    state = _copy(master)
    res = _edit(state, path, "\n".join(lines))
    assert res.ok, res.message
    assert _topics(state)[path].split("\n")[at] == op_line(lines[at], _committed_ids(text))


_CODE_LINE = st.lists(st.sampled_from(list("abc=+1") + [" ", "\t", "[^e-d6cb4b50f2]", "^", "^fa3c8017"]),
                      max_size=8).map("".join)


@SETTINGS
@given(code=st.lists(_CODE_LINE, min_size=1, max_size=4))
def test_class4_fenced_code_in_a_topic(master, code):
    path = "topics/projects/kyoto-trip.md"
    text = _topics(master)[path]
    committed = _committed_ids(text)
    block = ["```python", *code, "```"]
    new = text.rstrip("\n") + "\n\n" + "\n".join(block) + "\n"
    state = _copy(master)
    res = _edit(state, path, new)
    ends_in_word = [c for c in code if re.search(r"\^([A-Za-z0-9-]+)\s*$", c)
                    and re.search(r"\^([A-Za-z0-9-]+)\s*$", c).group(1) not in committed]
    if ends_in_word:  # the stricter row: OpenProgram would strip the ^word from the code
        assert not res.ok and "malformed id placement" in res.message, res.message
        return
    assert res.ok, res.message
    got = _topics(state)[path].rstrip("\n").split("\n")[-len(block):]
    want = [op_line(line, committed) for line in block]
    want[-1] = want[-1].rstrip()
    assert got == want


@pytest.mark.parametrize("name", ["café", "naïve notes", "日本"])
def test_class4_timeline_links_a_non_ascii_topic_path_as_it_is(master, name):
    state = _copy(master)
    ada = _topics(state)["topics/people/ada.md"]
    res = api.update(state, workspace_revision(state / "memory"), memory_changes=[{
        "op": "create_record", "content": "Ada keeps a tea notebook.", "time": "2026-11",
        "source_refs": ["openprogram/local_a1b2c3d4e5/a00000000001"],
        "destination": {"topic_path": f"topics/people/{name}.md", "headings": [], "position": "end"}}],
        git_commit="off")
    assert res.ok, res.message
    (bid,) = res.block_ids.values()
    day = (state / "memory" / "timeline" / "2026" / "11.md").read_text(encoding="utf-8")
    assert f"[Topic](../../topics/people/{name}.md#^{bid})" in day
    assert _topics(state)["topics/people/ada.md"] == ada


# A link to a topic created in the same edit. OpenProgram's install rewrites every block link
# ``[label](path#^id)`` (label non-empty, path without ``)`` or ``#``, spaces allowed, id a block
# id or a ``mem_`` id) to the file that holds the id now, relative to the linking topic, through
# ``urllib.parse.quote(path, safe="/._-")`` (which also keeps ``~``); relations.json reads the
# same link shape from the record's text, and the timeline row quotes the record's text as
# installed.

_NEW_NAMES = st.lists(st.sampled_from(["trip", "my trip", "a~b", "x+y", "café", "日本", "v1.2", "q&a", "(old)"]),
                      min_size=1, max_size=2).map(lambda parts: "/".join(parts) + ".md")


def op_link_path(target_topic: str, linking_topic: str) -> str:
    """OpenProgram's block-link path: relative to the linking topic's folder, quoted."""
    from urllib.parse import quote
    rel = posixpath.relpath(target_topic, posixpath.dirname(linking_topic) or ".")
    return quote(rel, safe="/._-")


def _assert_link_to_moved_block(state: Path, new_topic: str) -> None:
    ada = _topics(state)["topics/people/ada.md"]
    want = f"[Kyoto plan]({op_link_path(new_topic, 'topics/people/ada.md')}#^fa3c8017)"
    assert want in ada, (want, ada.split("\n")[2])
    relations = json.loads((state / "memory" / "relations.json").read_text(encoding="utf-8"))
    assert relations["outbound"]["fc30e0e0"] == ["fa3c8017"] and relations["backlinks"]["fa3c8017"] == ["fc30e0e0"]
    day = (state / "memory" / "timeline" / "2026" / "11.md").read_text(encoding="utf-8").split("\n")
    (ada_row,) = [row for row in day if "#^fc30e0e0)" in row]
    assert ada_row.startswith("Ada is the traveller behind the " + want + " and wants short answers. [Topic]("), ada_row
    (moved_row,) = [row for row in day if "#^fa3c8017)" in row and "[Topic]" in row and row is not ada_row]
    assert f"[Topic](../../{new_topic}#^fa3c8017)" in moved_row, moved_row


@SETTINGS
@given(name=_NEW_NAMES, folder=st.sampled_from(["", "archive/", "people/", "projects/deep/"]))
@example(name="a~b/my trip.md", folder="")
@example(name="日本/café (old).md", folder="archive/")
def test_class4_moving_a_linked_block_into_a_new_topic(master, name, folder):
    """``move_records`` into a topic the request creates: ada.md's existing link follows."""
    new_topic = f"topics/{folder}{name}"
    state = _copy(master)
    res = api.update(state, workspace_revision(state / "memory"), memory_changes=[{
        "op": "move_records", "memory_ids": ["fa3c8017"],
        "destination": {"topic_path": new_topic, "headings": [], "position": "end"}}], git_commit="off")
    assert res.ok, (new_topic, res.message)
    _assert_link_to_moved_block(state, new_topic)


_LINK_FORMS = ["as before", "plain", "quoted", "dot-slash"]


@SETTINGS
@given(name=_NEW_NAMES.filter(lambda n: ")" not in n and "(" not in n), form=st.sampled_from(_LINK_FORMS),
       folder=st.sampled_from(["projects/", "new/deep/"]))
def test_class4_whole_file_changes_create_a_topic_another_links_to(master, name, form, folder):
    """One ``changes`` request writes a new topic holding fa3c8017 (its definition as it was in
    kyoto-trip.md), kyoto-trip.md without it, and ada.md linking to the new topic in one of the
    ways an owner writes a path: every form ends as OpenProgram's quoted relative path."""
    from urllib.parse import quote
    new_topic = f"topics/{folder}{name}"
    topics = _topics(master)
    kyoto = topics["topics/projects/kyoto-trip.md"].split("\n")
    moved, definition = kyoto[2], kyoto[4]
    rest = "\n".join(kyoto[:2] + kyoto[6:])
    rel = posixpath.relpath(new_topic, "topics/people")
    target = {"as before": "../projects/kyoto-trip.md", "plain": rel, "quoted": quote(rel, safe="/._-"),
              "dot-slash": "./" + rel}[form]
    ada = topics["topics/people/ada.md"].replace("../projects/kyoto-trip.md#^fa3c8017", f"{target}#^fa3c8017")
    state = _copy(master)
    res = api.update(state, workspace_revision(state / "memory"), changes=[
        {"path": new_topic, "action": "write", "content": f"# New\n\n{moved}\n\n{definition}\n"},
        {"path": "topics/projects/kyoto-trip.md", "action": "write", "content": rest},
        {"path": "topics/people/ada.md", "action": "write", "content": ada}], git_commit="off")
    assert res.ok, (new_topic, form, res.message)
    _assert_link_to_moved_block(state, new_topic)


_ADA_LINK = "[Kyoto plan](../projects/kyoto-trip.md#^fa3c8017)"


@pytest.mark.parametrize(("link", "verdict"), [
    # a path with a space is a block link to OpenProgram: the relation holds, the path is redone
    ("[Kyoto plan](../projects/kyoto trip.md#^fa3c8017)", _ADA_LINK),
    # an empty label is no link to OpenProgram: text, no relation, never rewritten
    ("[](../projects/kyoto-trip.md#^fa3c8017)", None),
    ("[](../projects/kyoto trip.md#^fa3c8017)", None),
    # a topic link without a block target, however it is spelled
    ("[plan](../projects/kyoto trip.md)", "Topic-to-Topic link must target #^block-id: people/ada.md -> ../projects/kyoto trip.md"),
    ("![plan](../projects/kyoto-trip.md)", "Topic-to-Topic link must target #^block-id: people/ada.md -> ../projects/kyoto-trip.md"),
    # an underscore makes no block id unless the id is a mem_ id
    ("[plan](../projects/kyoto-trip.md#^fa3c_8017)",
     "Topic-to-Topic link must target #^block-id: people/ada.md -> ../projects/kyoto-trip.md#^fa3c_8017"),
])
def test_class4_link_shapes_as_openprogram_reads_them(master, link, verdict):
    path = "topics/people/ada.md"
    new = _topics(master)[path].replace(_ADA_LINK, link, 1)
    state = _copy(master)
    res = _edit(state, path, new)
    if verdict is not None and not verdict.startswith("["):
        assert not res.ok and res.code == "INVALID_TOPIC_FORMAT" and res.message == verdict, res.message
        assert res.line == 3
        return
    assert res.ok, res.message
    installed = _topics(state)[path].split("\n")[2]
    relations = json.loads((state / "memory" / "relations.json").read_text(encoding="utf-8"))
    if verdict is None:
        assert link in installed
        assert relations["outbound"]["fc30e0e0"] == [] and "fa3c8017" not in relations["backlinks"]
    else:
        assert verdict in installed, installed
        assert relations["outbound"]["fc30e0e0"] == ["fa3c8017"]


@pytest.mark.parametrize("place", ["fenced code", "heading", "comment"])
def test_class4_block_links_on_every_line_follow_their_id(master, place):
    """OpenProgram's install points every block link of a topic file at its id's file, line by
    line, whatever the line is: in fenced code, a heading or a comment too."""
    path = "topics/projects/kyoto-trip.md"
    text = _topics(master)[path]
    link, want = "[x](../people/wrong.md#^fc30e0e0)", "[x](../people/ada.md#^fc30e0e0)"
    new = {"fenced code": text + f"\n```\nsee {link}\n```\n",
           "heading": text.replace("# Kyoto trip\n", f"# Kyoto trip {link}\n", 1),
           "comment": text + f"\n<!-- {link} -->\n"}[place]
    state = _copy(master)
    res = _edit(state, path, new)
    assert res.ok, res.message
    assert _topics(state)[path] == new.replace(link, want)


# -- class 6: record ops ---------------------------------------------------------------------------


# corpus cases memory-tui refuses on purpose (a row of the README's stricter table)
STRICTER_ROWS = {"234-create-special-token-core"}


def _corpus_changes_cases() -> list[dict]:
    if not EDITS_TGZ.is_file():
        return []
    out = []
    with tarfile.open(EDITS_TGZ) as tar:
        index = json.load(tar.extractfile("edits/index.json"))["index"]
        for row in index:
            if (row["kind"] != "changes" or not row["ok"] or row.get("setup") or row.get("pitfall")
                    or row["case_id"] in STRICTER_ROWS):
                continue
            case = json.load(tar.extractfile(f"edits/{row['case_id']}.json"))
            req = case["input"]["request"]
            if case["input"].get("base_revision_mode") == "current" and set(req) <= {"memory_changes", "base_revision"}:
                out.append(case)
    return out


CORPUS_CHANGES = _corpus_changes_cases()


@pytest.mark.skipif(not CORPUS_CHANGES, reason=_SKIP)
def test_class6_changed_files_as_openprogram_lists_them(master):
    """Every accepted corpus request without setup: ``changed_files`` is OpenProgram's list,
    order included."""
    sample = CORPUS_CHANGES[:: max(1, len(CORPUS_CHANGES) // 10)]
    assert sample
    for case in sample:
        state = _copy(master)
        res = api.update(state, workspace_revision(state / "memory"),
                         memory_changes=case["input"]["request"]["memory_changes"], git_commit="off")
        assert res.ok, (case["case_id"], res.message)
        assert list(res.changed_files) == case["openprogram"]["result"]["changed_files"], case["case_id"]


def test_class6_create_record_into_a_path_with_a_space(master):
    state = _copy(master)
    res = api.update(state, workspace_revision(state / "memory"), memory_changes=[{
        "op": "create_record", "content": "A new fact about trips.", "time": "2026",
        "source_refs": ["openprogram/local_a1b2c3d4e5/a00000000001"],
        "destination": {"topic_path": "topics/notes/my trip.md", "headings": [], "position": "end"}}],
        git_commit="off")
    assert res.ok, res.message
    (bid,) = res.block_ids.values()
    year = (state / "memory" / "timeline" / "2026.md").read_text(encoding="utf-8")
    assert f"[Topic](../topics/notes/my trip.md#^{bid})" in year and "%20" not in year
    assert list(res.changed_files) == sorted(res.changed_files)


def test_class6_update_then_move_joins_with_one_blank_line(master):
    """update_record leaves two blank lines where the old definition was; OpenProgram's move
    then inserts the moved block before the anchor by joining the text before and after it
    with exactly one blank line each side."""
    state = _copy(master)
    res = api.update(state, workspace_revision(state / "memory"), memory_changes=[
        {"op": "update_record", "memory_id": "c2a2c020", "content": "Updated packing note.", "time": "2026-11",
         "source_refs": ["openprogram/local_a1b2c3d4e5/a00000000001"]},
        {"op": "move_records", "memory_ids": ["c1619bbc"],
         "destination": {"topic_path": "topics/projects/kyoto-trip.md", "headings": ["Kyoto trip"],
                         "position": "before", "anchor_memory_id": "024689fd"}}], git_commit="off")
    assert res.ok, res.message
    lines = _topics(state)["topics/projects/kyoto-trip.md"].split("\n")
    kinds = ["H" if l.startswith("#") else "D" if OP_DEFINITION.match(l) else "" if not l else "R" for l in lines]
    assert "".join(k or "_" for k in kinds) == "H_R_D_R_D_R_D_R_D_"
    order = [re.search(r"\^([0-9a-f]{8})$", l).group(1) for l in lines if re.search(r" \^[0-9a-f]{8}$", l)]
    assert order == ["fa3c8017", "c2a2c020", "c1619bbc", "024689fd"]


# -- the README's stricter rows --------------------------------------------------------------------


def test_stricter_row_caret_word_in_fenced_code(master):
    path = "topics/projects/kyoto-trip.md"
    new = _topics(master)[path].rstrip("\n") + "\n\n```\ny = 2^n\n```\n"
    res = _edit(_copy(master), path, new)
    assert not res.ok and res.code == "INVALID_TOPIC_FORMAT" and "malformed id placement: ^n" in res.message
    assert res.line == new.split("\n").index("y = 2^n") + 1 and res.column == 6


def test_stricter_row_special_token_text(master):
    """Beyond today's budget (the fixture's last core record is omitted from core.md), where
    OpenProgram's render does not reach it yet: refused all the same."""
    state = _copy(master)
    res = api.update(state, workspace_revision(state / "memory"), memory_changes=[{
        "op": "create_record", "content": "Ada typed <|endofprompt|> into the chat.", "time": "2026-11",
        "source_refs": ["openprogram/local_a1b2c3d4e5/a00000000001"],
        "destination": {"topic_path": "topics/core.md", "headings": ["Core"], "position": "end"}}], git_commit="off")
    assert not res.ok and res.code == "INVALID_TOPIC_FORMAT" and "<|endofprompt|>" in res.message
    assert res.path == "topics/core.md" and res.line


def test_stricter_row_undefined_local_label(master):
    path = "topics/projects/kyoto-trip.md"
    new = _topics(master)[path].replace("Batch 6 discussed:", "New fact about rails.[^e3]\n\nBatch 6 discussed:", 1)
    res = _edit(_copy(master), path, new)
    assert not res.ok and res.message == "undefined footnote: e3"
    assert res.line == new.split("\n").index("New fact about rails.[^e3]") + 1


def test_stricter_row_empty_source_label(master):
    path = "topics/projects/kyoto-trip.md"
    text = _topics(master)[path]
    at = _definition_lines(text)[-1]
    lines = text.split("\n")
    lines[at] += ", [](../../sources/openprogram/_v2/local_a1b2c3d4e5.md#source-fc88b9162aa794be)"
    res = _edit(_copy(master), path, "\n".join(lines))
    assert not res.ok and res.message.startswith("memory source labels required") and res.line == at + 1
    # both refuse: a blank label (OpenProgram's own "labels required"), and an empty label as the
    # only link (OpenProgram reads no link there and says "memory source links required"; the
    # README's Messages paragraph keeps ours, which names what to fix)
    fid = OP_DEFINITION.match(text.split("\n")[at]).group(1)
    for label in ("[ ]", "[]"):
        lines = text.split("\n")
        lines[at] = re.sub(r"Sources: \[[^\]]*\]", f"Sources: {label}", lines[at], count=1)
        lines[at] = lines[at][: lines[at].index(")") + 1]
        res = _edit(_copy(master), path, "\n".join(lines))
        assert not res.ok and res.message == f"memory source labels required: {fid}" and res.line == at + 1, res.message


@pytest.mark.parametrize(("path", "code"), [("topics/.md", "READ_ONLY_PATH"), ("topics/.scriptorium/x.md", "READ_ONLY_PATH"),
                                            ("topics/notes/.hidden.md", "READ_ONLY_PATH"),
                                            ("topics/a/../b.md", "PATH_OUTSIDE_WORKSPACE")])
def test_stricter_row_hidden_paths(master, path, code):
    state = _copy(master)
    before = _files(state)
    res = _edit(state, path, _topics(state)["topics/people/ada.md"])
    assert not res.ok and res.code == code, (res.code, res.message)
    assert _files(state) == before


@pytest.mark.parametrize("address", ["https://example.org/plan", "mailto:ada@example.org"])
def test_stricter_row_scheme_block_link(master, address):
    """OpenProgram's install would replace the address with the block's topic file."""
    path = "topics/people/ada.md"
    new = _topics(master)[path].replace("and wants short answers.", f"and wants short answers (see [the plan]({address}#^c2a2c020)).", 1)
    state = _copy(master)
    before = _files(state)
    res = _edit(state, path, new)
    assert not res.ok and res.code == "INVALID_TOPIC_FORMAT", res.message
    assert res.message.startswith(f"a link with a scheme cannot end in a block id: {address}#^c2a2c020")
    assert (res.line, res.column) == (3, new.split("\n")[2].index("[the plan]") + 1)
    assert _files(state) == before
    # an id no block has is OpenProgram's dangling link, as before; a link without #^id is text
    assert _edit(_copy(master), path, new.replace("#^c2a2c020", "#^0badc0de")).message == "dangling block link: 0badc0de"
    assert _edit(_copy(master), path, new.replace("#^c2a2c020", "")).ok


@pytest.mark.parametrize(("where", "ok"), [("heading", True), ("fenced code", True), ("comment", True),
                                           ("last paragraph", False)])
def test_undefined_label_where_openprogram_reads_it(master, where, ok):
    """``[^e3]`` with no definition anywhere: text to OpenProgram in a heading, fenced code or a
    comment (installed as typed); in the last paragraph, with no definition below to rebind to,
    OpenProgram refuses with ``undefined footnote: e3`` and so does memory-tui."""
    path = "topics/projects/kyoto-trip.md"
    text = _topics(master)[path]
    new = {"heading": text.replace("# Kyoto trip\n", "# Kyoto trip[^e3]\n", 1),
           "fenced code": text + "\n```\nfoo[^e3]\n```\n",
           "comment": text + "\n<!-- foo[^e3] -->\n",
           "last paragraph": text + "\nA new fact about rails.[^e3]\n"}[where]
    state = _copy(master)
    res = _edit(state, path, new)
    if ok:
        assert res.ok, res.message
        assert _topics(state)[path] == new
    else:
        assert not res.ok and res.message == "undefined footnote: e3" and res.line == len(new.split("\n")) - 1
