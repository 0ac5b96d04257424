"""The one-pass readers (``topics.parse_well_formed``, ``sources.scan_well_formed``) and the
cache rows give exactly what the general parser and line scanner give: same units, evidence,
problems (codes, messages, lines, columns), frames. Results are compared field by field as
plain data, so a difference anywhere in a parse fails.

What the general readers themselves read is pinned by the golden files of ``tests/golden``
(the round-4 parsers' answers on these tests' examples, OpenProgram's fixture and a bench
state)."""

from __future__ import annotations

import dataclasses
import marshal
import os
import time
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.cache.stamp import RACY_NS
from memory_tui.core.store import parsecache
from memory_tui.core.format import sources as new_sources
from memory_tui.core.format import topics as new_topics
from memory_tui.core.format.sources import entries as source_entries, index as source_index, scan as source_scan
from memory_tui.core.format.topics import parse as topic_parse
from memory_tui.core.format.fastdata import positional

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SEED = (
    "# Dave\n\n## Preferences\n\nDave prefers tea.[^e-5bf6e713a0] ^97de5549\n\n"
    "[^e-5bf6e713a0]: Time: `2026-08-09`; Sources: [tea](../../sources/openprogram/_v2/s.md#source-9047c1917b2f0777)\n\n"
    "Links [x](dave.md#^97de5549) daily.[^e1][^mem_a] ^ae99a3a8 ^bbbb\n\n"
    "[^e1]: Time: `2026-08`; Sources: [daily](openprogram/s/m), [d](../../sources/D1.md#d1-2)\n"
    "[^mem_a]: 2024 · Sources: [s](D1:2)\n```\nfenced [^zz]\n```\n<!-- c\n"
    "Legacy words.[^mem_b][^mem_c] more\n\n[^mem_b]: Time: undated; Sources: [x](#d3-4)\n"
    "Dup.[^e-5bf6e713a0] ^97de5549\n\n[^e-5bf6e713a0]: Time: `2026-13-01`; Sources: []( )\n"
    "Alias id.[^e2]\n^cafe0001 ^bad_id\n\n[^e2]: Time: `٢٠٢٦`; Sources: [q](../x.md#^y)\n"
)
PIECES = list("abc ^[]()#`:;·,-_.!\n\t") + [
    "[^", "[^e1]", "[^mem_a]", " ^abcd1234", "\u2029", "\r\n", "٢", "```", "<!--", "Time:", "Sources:", "#^", "](",
    "../../sources/openprogram/_v2/s.md#source-9047c1917b2f0777", "\u00a0^",
]
ALPHABET = st.sampled_from(PIECES)


def _plain(value):
    """A parse as nested tuples of its fields (class identity aside, every value compared)."""
    if dataclasses.is_dataclass(value):
        # a cached entry whose frames are built on first use is an ArchiveFile subclass
        name = "ArchiveFile" if isinstance(value, new_sources.ArchiveFile) else type(value).__name__
        return (name, tuple(_plain(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, frozenset):
        return frozenset(_plain(v) for v in value)
    return value


@contextmanager
def general_readers():
    """``parse_topic``, ``scan_v2`` and what calls them, with the one-pass readers declining
    every input: the general parser and the line scanner read everything."""
    # each patched in the room that looks it up
    rooms = ((topic_parse, "parse_well_formed"), (source_scan, "scan_well_formed"), (source_entries, "_well_formed_entry"))
    fast = [getattr(room, name) for room, name in rooms]
    decline = lambda *args, **kwargs: None  # noqa: E731
    for room, name in rooms:
        setattr(room, name, decline)
    try:
        yield
    finally:
        for (room, name), reader in zip(rooms, fast):
            setattr(room, name, reader)


def general_parse(path: str, text: str, **kwargs):
    with general_readers():
        return new_topics.parse_topic(path, text, **kwargs)


def general_scan(rel: str, data):
    with general_readers():
        return new_sources.scan_v2(rel, data)


def general_index_file(rel: str, data: bytes, *args):
    with general_readers():
        return new_sources.index_file(rel, data, *args)


def _index(files: dict[str, str]):
    return new_sources.SourceIndex.from_files("/m", {
        rel: new_sources.index_file(rel, text.encode()) for rel, text in files.items()})


_REC = new_sources.SourceRecord("openprogram", "s", "m1", 1, "user", "tea please", "2026-08-09T10:00:00Z")
_REC2 = dataclasses.replace(_REC, message_id="m2", content="two\nlines [x]", speaker_id="ann", trust_state="pending")
_ARCHIVES = {
    new_sources.archive_path(_REC.source_id): new_sources.render_archive(
        [new_sources.render_frame(_REC), new_sources.render_frame(_REC2)]),
    "sources/D1.md": '<a id="d1-2"></a>\n[2024] Ann: hello [D1:2]\n',
}
NEW_INDEX = _index(_ARCHIVES)


def _same_parse(path: str, text: str) -> None:
    """``parse_topic`` (the one-pass reading where it reads the file) is the general parse."""
    for strict in (True, False):
        assert _plain(new_topics.parse_topic(path, text, strict=strict)) == _plain(
            general_parse(path, text, strict=strict))
        assert _plain(new_topics.parse_topic(path, text, resolve=NEW_INDEX.resolve_target, strict=strict)) == _plain(
            general_parse(path, text, resolve=NEW_INDEX.resolve_target, strict=strict))


def test_seed_parses_alike_and_is_not_trivial():
    _same_parse("people/dave.md", SEED)
    topic = new_topics.parse_topic("people/dave.md", SEED, resolve=NEW_INDEX.resolve_target)
    assert topic.units and topic.errors and any(not new_topics.is_error(p) for p in topic.problems)
    assert any(link.source_id for ev in topic.evidence for link in ev.links)


@SETTINGS
@given(st.lists(ALPHABET, max_size=120).map("".join))
def test_random_text_parses_as_before(text):
    _same_parse("p/x.md", text)


@SETTINGS
@given(st.data())
def test_mutated_seed_parses_as_before(data):
    text = SEED
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, len(text)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = data.draw(ALPHABET)
        if op == "insert":
            text = text[:pos] + piece + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + len(piece):]
        else:
            text = text[:pos] + piece + text[pos + 1:]
    _same_parse("people/dave.md", text)


@SETTINGS
@given(st.data())
def test_v2_scan_as_before(data):
    ids = data.draw(st.lists(st.text(st.sampled_from(list("ab/<>[]\r\n \t%é\x00\u2028")), min_size=1, max_size=6),
                             min_size=1, max_size=3))
    raw = bytearray(_ARCHIVES[new_sources.archive_path(_REC.source_id)].encode())
    for extra in ids:
        rec = dataclasses.replace(_REC, message_id=extra)
        try:
            raw += b"\n" + new_sources.render_frame(rec).encode()
        except (ValueError, UnicodeEncodeError):
            # an id render_frame refuses: write its frame lines by hand so the scanner meets it
            sid = f"openprogram/s/{extra}"
            raw += (f'\n<a id="{new_sources.anchor(sid) if extra.isprintable() else "x"}"></a>\n'
                    f"<!-- source-id:{sid} -->\n<!-- record-lines:1 -->\n[t] u: x\n").encode("utf-8", "surrogatepass")
    for _ in range(data.draw(st.integers(0, 3))):
        pos = data.draw(st.integers(0, max(0, len(raw) - 1)))
        raw[pos:pos + data.draw(st.integers(0, 3))] = data.draw(st.sampled_from([b"", b"\n", b"[", b"x", b"\xff"]))
    rel = new_sources.archive_path(_REC.source_id)
    assert _plain(new_sources.scan_v2(rel, bytes(raw))) == _plain(general_scan(rel, bytes(raw)))
    assert _plain(new_sources.index_file(rel, bytes(raw))) == _plain(general_index_file(rel, bytes(raw)))


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=30), st.sampled_from(["people/ada.md", "a.md", "x/y/z.md"]))
def test_link_file_part_resolves_alike_through_the_file_lookup(rel_part, topic_path):
    target = rel_part + "#source-9047c1917b2f0777"
    assert NEW_INDEX.resolver(topic_path, target) == NEW_INDEX.resolve_target(topic_path, target)


def test_positional_builds_the_class_instance():
    frame = new_sources.scan_v2(*next(iter(_ARCHIVES.items()))).frames[0]
    topic = new_topics.parse_topic("people/dave.md", SEED, resolve=NEW_INDEX.resolve_target)
    for obj in (frame, topic.units[0], topic.evidence[0], topic.evidence[0].links[0], topic.units[0].annotations[0]):
        cls = type(obj)
        values = [getattr(obj, f.name) for f in dataclasses.fields(cls)]
        made = positional(cls)(*values)
        assert made == cls(*values) and made.__dict__ == cls(*values).__dict__ and type(made) is cls
        with pytest.raises(TypeError):
            positional(cls)(*values[:-1])
    with pytest.raises(TypeError):
        positional(new_sources.ArchiveFile)  # __post_init__: must go through the class


# ------------------------------------------------------------------ cache rows == the parse


@pytest.mark.parametrize("variant", ["lf", "crlf", "u2028", "tail"])
def test_rows_round_trip_keeps_sharing_and_equality(variant):
    text = SEED.replace("^bad_id", "")
    # line breaks other than LF: record bodies are then not slices of the text (stored whole)
    text = {"lf": text, "crlf": text.replace("\n", "\r\n"), "u2028": text.replace("\n\n", "\n\u2028", 3),
            "tail": text + "Last words [^e1] here.[^e1] ^deadbeef"}[variant]
    topic = new_topics.parse_topic("people/dave.md", text, resolve=NEW_INDEX.resolve_target)
    assert topic.units and any(not new_topics.is_error(p) for p in topic.problems)
    back = parsecache.topic_from_rows(parsecache.topic_rows(topic))
    assert back == topic and _plain(back) == _plain(topic)
    assert back.units[0].annotations[0].evidence[0] is back.evidence[0]
    aliases = [u for u in back.units if u.is_alias]
    assert aliases and all(
        u.annotations[0] is next(v for v in back.units if v.memory_id == u.identity).annotations[0] for u in aliases)
    assert any(len(fr.lines) > 1 for entry in NEW_INDEX.files.values() for fr in entry.frames)
    for entry in NEW_INDEX.files.values():
        again = parsecache.archive_from_rows(parsecache.archive_rows(entry))
        assert again == entry and again.frames == entry.frames and _plain(again) == _plain(entry)
        assert again.by_anchor == entry.by_anchor
        assert (again.scan is None) == (entry.scan is None)
        if entry.scan is not None:
            assert _plain(again.scan) == _plain(entry.scan)


# topic_rows/archive_rows read every column with C-level maps and fall back to a
# per-item search only where that pass cannot vouch for an item; each case below makes one
# item take one of those fallbacks (or the shortcut's edge), and the rows must still decode
# to exactly the object.

def _topic_with(topic, ev_change=None, unit_change=None):
    """``topic`` with its first definition and/or first unit changed, annotations re-pointed."""
    evs = list(topic.evidence)
    if ev_change:
        evs[0] = dataclasses.replace(evs[0], **ev_change(evs[0]))
    by_id = {ev.id: ev for ev in evs}
    anns: dict[int, object] = {}

    def ann(a):
        if id(a) not in anns:
            anns[id(a)] = dataclasses.replace(a, evidence=tuple(by_id[e.id] for e in a.evidence))
        return anns[id(a)]

    units = [dataclasses.replace(u, annotations=tuple(ann(a) for a in u.annotations)) for u in topic.units]
    if unit_change:
        units[0] = dataclasses.replace(units[0], **unit_change(units[0]))
    return dataclasses.replace(topic, evidence=tuple(evs), units=tuple(units))


_TOPIC_CASES = {
    "as parsed": (None, None),
    "definition line past its text": (lambda ev: {"line": ev.line + 3}, None),
    "definition line 0": (lambda ev: {"line": 0}, None),
    "definition line far before the file": (lambda ev: {"line": -10**6}, None),
    "definition line past the file": (lambda ev: {"line": 10**6}, None),
    "definition text not in the file": (lambda ev: {"text": "[^zz]: nowhere", "raw_sources": "nowhere"}, None),
    "definition text mid-line": (lambda ev: {"text": ev.text[2:]}, None),
    "empty definition text and sources": (lambda ev: {"text": "", "raw_sources": ""}, None),
    "sources not in the definition": (lambda ev: {"raw_sources": "[x](elsewhere)"}, None),
    "body mid-line": (None, lambda u: {"body": u.body[2:], "content": u.body[2:5]}),
    "body not in the file": (None, lambda u: {"body": "never written", "content": "never"}),
    "body line past the file": (None, lambda u: {"line": 10**6}),
    "content not a prefix of the body": (None, lambda u: {"content": "something else"}),
    "empty content": (None, lambda u: {"content": ""}),
}


@pytest.mark.parametrize("case", sorted(_TOPIC_CASES))
def test_topic_rows_fallbacks_decode_to_the_object(case):
    topic = new_topics.parse_topic("people/dave.md", SEED.replace("^bad_id", ""), resolve=NEW_INDEX.resolve_target)
    ev_change, unit_change = _TOPIC_CASES[case]
    changed = _topic_with(topic, ev_change, unit_change)
    assert len(changed.units) > 2 and len(changed.evidence) > 2
    back = parsecache.topic_from_rows(parsecache.topic_rows(changed))
    assert back == changed and _plain(back) == _plain(changed)
    assert back.units[0].annotations[0].evidence[0] is back.evidence[back.evidence.index(
        changed.units[0].annotations[0].evidence[0])]


def test_topic_rows_refuse_what_they_cannot_hold():
    topic = new_topics.parse_topic("people/dave.md", SEED.replace("^bad_id", ""), resolve=NEW_INDEX.resolve_target)
    stranger = dataclasses.replace(topic.evidence[0], id="e-elsewhere")
    cases = [
        dataclasses.replace(topic, evidence=(dataclasses.replace(topic.evidence[0], topic_path="other.md"),
                                             *topic.evidence[1:])),
        dataclasses.replace(topic, units=(*topic.units[:-1], dataclasses.replace(topic.units[-1], topic_path="x.md"))),
        dataclasses.replace(topic, units=(dataclasses.replace(topic.units[0], annotations=(
            new_topics.Annotation("q", (stranger,)),)), *topic.units[1:])),
    ]
    for bad in cases:
        with pytest.raises(parsecache._Unrepresentable):
            parsecache.topic_rows(bad)


_FRAME_CASES = {
    "as scanned": lambda frames: frames,
    "all one line": lambda frames: tuple(fr for fr in frames if len(fr.lines) == 1) * 3,
    "a frame without record lines": lambda frames: (dataclasses.replace(frames[0], lines=()), *frames[1:]),
    "a one-line text that does not end its line": lambda frames: (
        dataclasses.replace(frames[0], text=frames[0].text[:-1]), *frames[1:]),
    "a multi-line frame whose text ends its first line": lambda frames: tuple(
        dataclasses.replace(fr, text=fr.lines[0][-3:]) if len(fr.lines) > 1 else fr for fr in frames),
    "every speaker and token the same object": lambda frames: tuple(
        dataclasses.replace(fr, speaker_id_raw=frames[0].speaker_id_raw, meta_token=frames[0].meta_token,
                            meta=frames[0].meta) for fr in frames),
}


@pytest.mark.parametrize("case", sorted(_FRAME_CASES))
def test_archive_rows_fallbacks_decode_to_the_frames(case):
    entry = next(e for e in NEW_INDEX.files.values() if e.kind == "v2")
    assert any(len(fr.lines) > 1 for fr in entry.frames) and any(len(fr.lines) == 1 for fr in entry.frames)
    frames = _FRAME_CASES[case](entry.frames)
    changed = new_sources.ArchiveFile(entry.path, entry.kind, entry.key, frames, entry.complete, None,
                                      entry.comment_ids, entry.anchor_lines, entry.digest)
    again = parsecache.archive_from_rows(parsecache.archive_rows(changed))
    assert again == changed and again.frames == frames and _plain(again) == _plain(changed)


def test_archive_rows_refuse_a_meta_that_is_not_its_token():
    entry = next(e for e in NEW_INDEX.files.values() if e.kind == "v2")
    other = next(fr.meta for fr in entry.frames if fr.meta != entry.frames[0].meta)
    frames = (dataclasses.replace(entry.frames[0], meta=other), *entry.frames[1:])
    with pytest.raises(parsecache._Unrepresentable):
        parsecache.archive_rows(new_sources.ArchiveFile(entry.path, entry.kind, entry.key, frames))


def _age(root: Path) -> None:
    for p in root.rglob("*.md"):
        stat = p.stat()
        os.utime(p, ns=(stat.st_atime_ns, stat.st_mtime_ns - 5_000_000_000))
    time.sleep(RACY_NS / 1e9)  # the ctime the utime moved cannot be set back


def _cached_equals_fresh(mem: Path, monkeypatch) -> None:
    parsecache.drop(mem)
    _age(mem)
    parsecache.load_tree(mem, persist=True)
    parsecache.forget_in_process()  # a fresh process: everything below comes from the files

    def refuse(*args, **kwargs):
        raise AssertionError("parsed or scanned again: the entry was not used")

    with monkeypatch.context() as patched:
        patched.setattr(parsecache, "parse_topic", refuse)
        patched.setattr(source_index, "index_file", refuse)  # what SourceIndex.load calls
        index, tree = parsecache.load_tree(mem)
    fresh_index = new_sources.SourceIndex.load(mem)
    fresh = new_topics.parse_tree(mem / "topics", resolve=fresh_index.resolve_target, strict=True)
    assert tree.topics == fresh.topics and tree.units == fresh.units and tree.problems == fresh.problems
    assert _plain(tree.topics) == _plain(fresh.topics) and _plain(tree.problems) == _plain(fresh.problems)
    assert sorted(index.files) == sorted(fresh_index.files)
    for rel, entry in fresh_index.files.items():
        assert _plain(index.files[rel]) == _plain(entry)
    assert index.trusted_ids() == fresh_index.trusted_ids() and index.pending_ids() == fresh_index.pending_ids()
    assert len(tree.units) > 0


def test_cached_parse_equals_fresh_on_the_fixture(fixture_state, monkeypatch):
    _cached_equals_fresh(fixture_state / "memory", monkeypatch)


def test_cached_parse_equals_fresh_on_a_bench_state(bench_state_small, tmp_path, monkeypatch):
    shutil.copytree(bench_state_small, tmp_path / "state", symlinks=True)
    _cached_equals_fresh(tmp_path / "state" / "memory", monkeypatch)


# A cold load builds a well-formed topic's units and evidence, and a well-formed
# archive's frames, when they are first read (from the fields the one-pass readers kept);
# the cache is written from those fields without building them.
def _cold_equals_fresh(mem: Path) -> None:
    parsecache.drop(mem)
    _age(mem)
    index, tree = parsecache.load_tree(mem, persist=True)
    lazy_topics = [t for t in tree.topics if "_deferred" in vars(t)]
    lazy_entries = [e for e in index.files.values() if "_build" in vars(e)]
    assert lazy_topics and lazy_entries  # the one-pass readers read these, and built nothing yet
    assert all("units" not in vars(t) and "evidence" not in vars(t) for t in lazy_topics)
    assert all("_frames" not in vars(e) for e in lazy_entries)
    with general_readers():  # a fresh read, by the general readers
        fresh_index = new_sources.SourceIndex.load(mem)
        fresh = new_topics.parse_tree(mem / "topics", resolve=fresh_index.resolve_target, strict=True)
    # archives first: building frames must not need the topics, and the other way round
    assert sorted(index.files) == sorted(fresh_index.files)
    for rel, entry in fresh_index.files.items():
        assert _plain(index.files[rel]) == _plain(entry)
    assert _plain(tree.topics) == _plain(fresh.topics) and _plain(tree.problems) == _plain(fresh.problems)
    assert _plain(tree.units) == _plain(fresh.units)
    assert _plain(index.problems) == _plain(fresh_index.problems)
    assert all("_build" not in vars(e) for e in lazy_entries)  # built once, the builder let go of
    parsecache.forget_in_process()  # what was written without building is the same parse
    c_index, c_tree = parsecache.load_tree(mem)
    assert _plain(c_tree.topics) == _plain(fresh.topics)
    for rel, entry in fresh_index.files.items():
        assert _plain(c_index.files[rel]) == _plain(entry)


def test_a_cold_load_builds_when_read_and_reads_as_before_on_the_fixture(fixture_state):
    _cold_equals_fresh(fixture_state / "memory")


def test_a_cold_load_builds_when_read_and_reads_as_before_on_a_bench_state(bench_state_small, tmp_path):
    shutil.copytree(bench_state_small, tmp_path / "state", symlinks=True)
    _cold_equals_fresh(tmp_path / "state" / "memory")


def test_a_cold_load_still_reports_bad_files_as_before(fixture_state):
    """Strict validation is not deferred: a topic or archive that is not well formed is read
    the general way at load time and reports the same problems (file, line, column)."""
    mem = fixture_state / "memory"
    parsecache.drop(mem)
    _, clean = parsecache.load_tree(mem)
    # each fault in a topic of its own (one would hide the other: either sends its file to
    # the general reader); the topics are ones the one-pass reader reads when clean
    one_pass = [t.path for t in clean.topics if "_deferred" in vars(t)]
    assert len(one_pass) >= 2
    first, second = (mem / "topics" / rel for rel in one_pass[:2])
    first.write_text(first.read_text().replace(" ^", "\nsecond line ^", 1))  # a two-line record paragraph
    second.write_text(second.read_text() + "\n[^zz]: Time: `2026`; Sources: [a](D1:2)\n")  # a definition nobody cites
    archive = next(p for p in sorted((mem / "sources").rglob("*.md")) if "_v2" in p.parts)
    lines = archive.read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("<!-- record-lines:"))
    lines[at] = "<!-- record-lines:x -->"
    archive.write_text("\n".join(lines))
    parsecache.drop(mem)
    index, tree = parsecache.load_tree(mem, persist=True)
    with general_readers():
        old_index = new_sources.SourceIndex.load(mem)
        old = new_topics.parse_tree(mem / "topics", resolve=old_index.resolve_target, strict=True)
    assert _plain(tree.problems) == _plain(old.problems)
    assert {p.path for p in tree.problems} >= {"topics/" + rel for rel in one_pass[:2]}
    rel = archive.relative_to(mem).as_posix()
    assert index.files[rel].problem is not None
    assert _plain(index.files[rel]) == _plain(old_index.files[rel])


def test_a_deferred_archive_builds_its_frames_once():
    """The builder is dropped after the build, and every later read (frames, the scan, the
    anchor map) is of the one tuple it built."""
    rel = new_sources.archive_path(_REC.source_id)
    text = new_sources.render_archive([new_sources.render_frame(_REC), new_sources.render_frame(_REC2)])
    entry = new_sources.index_file(rel, text.encode(), (1, len(text), 2))
    built = []
    build = vars(entry)["_build"]
    vars(entry)["_build"] = lambda: built.append(1) or build()
    frames = entry.frames
    assert entry.frames is frames and entry.scan.frames is frames and built == [1]
    assert list(entry.by_anchor.values()) == list(frames) and entry.sid_at(frames[1].anchor) == frames[1].source_id


HEAD_CHARS = st.sampled_from(list("[]: \t\x0b\x1c\x1f\x85\u2028\u3000a1-") + [
    ": ", "] ", "[2026] ", "\u00a0", "[t]\t", "[t]\x1c", "[t]\u3000", "[t]\u2028", "[t]a", "[t]  "])


PART = st.lists(HEAD_CHARS, max_size=4).map("".join)
SEP = st.sampled_from([" ", "\t", "\x1c", "\u3000", "\u2028", "\x85", "a", "", "  "])
HEADS = st.one_of(
    st.lists(HEAD_CHARS, max_size=14).map("".join),
    st.tuples(PART, SEP, PART, st.sampled_from([": ", ":", " : "]), PART).map(lambda t: f"[{t[0]}]{t[1]}{t[2]}{t[3]}{t[4]}"),
)


@settings(max_examples=400, deadline=None)
@given(HEADS,
       st.sampled_from(["2", "2", "2", "02", "01", "1", "0", "", "٣", "²", "123456789", "1234567890", " 2", "2 "]),
       st.sampled_from(['<a id="{a}"></a>', '<a id="{a}"></a> ', '<a id="x"y"></a>', '<a id="{a}"></a>"']),
       st.sampled_from(["<!-- source-id:{s} -->", "<!-- source-id:{s}  -->", "<!--  source-id:{s} -->"]))
def test_frame_lines_read_as_before(first, count, anchor_line, source_line):
    sid = _REC.source_id
    rel = new_sources.archive_path(sid)
    frame = "\n".join([anchor_line.format(a=new_sources.anchor(sid)), source_line.format(s=sid),
                       f"<!-- record-lines:{count} -->", first, "second line"]) + "\n"
    data = (new_sources.MARKER + "\n\n" + frame).encode("utf-8")
    assert _plain(new_sources.scan_v2(rel, data)) == _plain(general_scan(rel, data))


# A well-formed archive is read by one regex pass over the text
# (``sources.scan_well_formed``); anything else by the line scanner. Well-formed archives
# with every kind of record (several lines, odd whitespace, speakers, pending/trusted meta,
# Unicode line separators that are not LF) must take that pass and read as before.
RECORD_TEXT = st.lists(st.sampled_from(list("ab :[]\t\r\x0b\x1c\x85\u2028\u3000é") + ["\n", ": ", "  ", "[x]"]),
                       max_size=14).map("".join)
RECORDS = st.builds(
    lambda mid, content, ts, speaker, trust: dataclasses.replace(
        _REC, message_id=mid, content=content, timestamp=ts, speaker_id=speaker, trust_state=trust),
    st.text(st.sampled_from(list("ab_-%é ")), min_size=1, max_size=5),
    RECORD_TEXT,
    st.sampled_from(["", "2026-08-09T10:00:00Z", "2026"]),
    st.sampled_from([None, "ann", "owner/local", "runtime/agent%2Fmain", "x y"]),
    st.sampled_from(["trusted", "pending"]),
)


@SETTINGS
@given(st.lists(RECORDS, max_size=6, unique_by=lambda r: r.message_id), st.sampled_from(["", "\n"]))
def test_well_formed_archives_take_the_one_pass_scan_and_read_as_before(records, tail):
    rel = new_sources.archive_path(_REC.source_id)
    frames = []
    for rec in records:
        try:
            frames.append(new_sources.render_frame(rec))
        except ValueError:  # an id or stamp the writer refuses
            continue
    text = new_sources.render_archive(frames) + tail
    fast = new_sources.scan_well_formed(rel, text)
    assert (fast is None) == (not frames and tail == "\n")  # MARKER LF LF LF: the line scanner's special case
    if fast is not None:
        assert _plain(fast) == _plain(general_scan(rel, text.encode()))
    assert _plain(new_sources.index_file(rel, text.encode())) == _plain(general_index_file(rel, text.encode()))
    if fast is not None:
        _handed_archive_rows_are_the_rows(rel, text)


def _unsealed(rows: tuple) -> tuple:
    return rows[:4] + (marshal.loads(rows[4]),) + rows[5:]


def _handed_archive_rows_are_the_rows(rel: str, text: str) -> None:
    """The archive rows made from the fields the one-pass scan handed over are the rows read
    off the frames of another index of the same bytes, their outline is the frames' own, and
    they decode to the very entry. The entry builds no frame until asked, and then the very
    frames the line scanner reads (its builder let go of)."""
    handed_entry = new_sources.index_file(rel, text.encode(), (1, len(text), 2))
    plain_entry = new_sources.index_file(rel, text.encode(), (1, len(text), 2))
    assert new_sources.HANDED in vars(handed_entry) and "_frames" not in vars(handed_entry)
    assert new_sources.take_handed(plain_entry) is not None  # now read off the frames
    rows = parsecache.archive_rows(handed_entry)
    assert "_frames" not in vars(handed_entry)  # the rows were written without a frame
    assert new_sources.take_handed(handed_entry) is None  # taken once
    frames = plain_entry.frames
    assert "_build" not in vars(plain_entry)
    old = general_index_file(rel, text.encode(), (1, len(text), 2))
    assert _plain(plain_entry) == _plain(old)  # (the scan and by_anchor too: they are fields)
    assert rows[3] == (tuple(f.source_id for f in frames), tuple(f.anchor for f in frames),
                       tuple(f.trusted for f in frames))
    assert _unsealed(rows) == _unsealed(parsecache.archive_rows(plain_entry))
    back = parsecache.archive_from_rows(marshal.loads(marshal.dumps(rows, 4)))
    assert back == plain_entry and _plain(back) == _plain(plain_entry)


@SETTINGS
@given(st.lists(RECORDS, min_size=1, max_size=4, unique_by=lambda r: r.message_id), st.data())
def test_damaged_well_formed_archives_read_as_before(records, data):
    """One or two characters changed anywhere: the one-pass scan must give up exactly where
    the line scanner would say something (or read what it reads). Scanned under its own path
    or another one (every frame then belongs elsewhere)."""
    rel = data.draw(st.sampled_from([new_sources.archive_path(_REC.source_id), "sources/openprogram/_v2/t.md"]))
    text = new_sources.render_archive([new_sources.render_frame(r) for r in records if r.timestamp != "2026"])
    for _ in range(data.draw(st.integers(1, 2))):
        if data.draw(st.booleans()):  # a character or two
            pos = data.draw(st.integers(0, max(0, len(text) - 1)))
            cut = data.draw(st.integers(0, 2))
            text = text[:pos] + data.draw(st.sampled_from(["", " ", "\n", "\n\n", "[", "]", "-", "0", "9", "\"", "\r", "é"])) + text[pos + cut:]
        else:  # a whole line replaced, added or dropped (the scanners check line by line)
            lines = text.split("\n")
            blank = [i for i, line in enumerate(lines) if line == ""]  # the separators between frames, say
            # (an earlier edit of this case may have dropped every blank line)
            k = data.draw(st.one_of(st.integers(0, len(lines) - 1), *[st.sampled_from(blank)] * bool(blank)))
            new_line = data.draw(st.sampled_from([" ", "x", "\r", "<!-- record-lines:0 -->", "<!-- record-lines:2 -->",
                                                  "<!-- record-lines:01 -->", "<!-- record-lines:002 -->",
                                                  "<!-- speaker-id:ann -->", "<!-- source-meta:e30 -->", "[t] a: b"]))
            op = data.draw(st.sampled_from(["replace", "insert", "drop"]))
            lines[k:k + (op != "insert")] = [] if op == "drop" else [new_line]
            text = "\n".join(lines)
    assert _plain(new_sources.scan_v2(rel, text)) == _plain(general_scan(rel, text))
    assert _plain(new_sources.scan_v2(rel, text.encode())) == _plain(general_scan(rel, text.encode()))
    if new_sources.HANDED in vars(new_sources.index_file(rel, text.encode())):  # read by the one-pass scan
        _handed_archive_rows_are_the_rows(rel, text)


# A topic file with nothing to report and one-line records is read in
# one pass (``topics.parse_well_formed``); everything else by the general parser.
WORDS = st.lists(st.sampled_from(["tea", "Dave", "likes", "1", "x-y", "é", "(fact 3).", "a:b", "#", "^", "[", "]",
                                  "[x](dave.md#^97de5549)", "[y](z.md)", "<b>", "`c`", "!", "*"]),
                 min_size=1, max_size=6).map(" ".join)
FIDS = st.sampled_from(["e-5bf6e713a0", "e-0123456789", "e1", "e22", "mem_a", "new-evidence-x", "zz"])
TIMES = st.sampled_from(["`2026-08-09`", "`2026`", "`2026-08`", "undated", "`undated`", "2026-08-09", "`2026-02-30`",
                         "`٢٠٢٦`", "``", " `2026-08-09` "])
TARGETS = st.sampled_from(["../../sources/openprogram/_v2/s.md#source-9047c1917b2f0777",
                           "../../sources/openprogram/_v2/s.md#source-222d54fe04a224cf", "openprogram/s/m", "D1:2",
                           "#d3-4", "../../sources/D1.md#d1-2", "../x.md#^y", " openprogram/s/m ", "", "a b"])
LINK = st.tuples(st.sampled_from(["said", "tea", " ", "a]b"]), TARGETS).map(lambda t: f"[{t[0]}]({t[1]})")
SOURCES = st.lists(LINK, min_size=1, max_size=2).map(", ".join)
HEADING = st.tuples(st.integers(1, 6), st.sampled_from(["Facts", "Dave ", "a # b", "x"])).map(
    lambda t: "#" * t[0] + " " + t[1])


@st.composite
def well_formed_topics(draw, clean: bool):
    """(text, True when the file has nothing to report and one-line records)."""
    out: list[str] = []
    defs: dict[str, str] = {}
    ids: set[str] = set()
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 3)) == 0:
            out += [draw(HEADING), ""]
            continue
        fids = draw(st.lists(FIDS, min_size=1, max_size=3))
        words = draw(WORDS) if not clean else draw(st.sampled_from(["Dave likes tea.", "Links [x](dave.md#^97de5549) here",
                                                                     "[y](z.md) and é", "a:b ^ c"]))
        bid = draw(st.sampled_from(["97de5549", "ae99a3a8", "cafe0001", "bbbb", "a-b"]))
        if clean and bid in ids:
            continue
        ids.add(bid)
        out += [words + "".join(f"[^{f}]" for f in fids) + " ^" + bid, ""]
        for f in fids:
            if f not in defs:
                time = draw(TIMES) if not clean else draw(st.sampled_from(["`2026-08-09`", "`2026`", "undated"]))
                sources = draw(SOURCES) if not clean else draw(st.sampled_from([
                    "[tea](../../sources/openprogram/_v2/s.md#source-222d54fe04a224cf)", "[d](D1:2), [s](openprogram/s/m)",
                    "[x](#d3-4)"]))
                defs[f] = f"[^{f}]: Time: {time}; Sources: {sources}"
                out += [defs[f], ""]
    if draw(st.booleans()):
        out = out[:-1]  # no blank line at the end
    return "\n".join(out) + draw(st.sampled_from(["\n", "", "\n\n"]))


def _same_as_before(path: str, text: str) -> None:
    """The one-pass reading, when it reads the file, is what the general parser gives."""
    fast = new_topics.parse_well_formed(path, text, resolve=NEW_INDEX.resolve_target)
    # the index's resolver, whose file_lookup answers a file's links from one lookup, reads alike
    via = new_topics.parse_well_formed(path, text, resolve=NEW_INDEX.resolver)
    assert (via is None) == (fast is None)
    assert _plain(new_topics.parse_topic(path, text, resolve=NEW_INDEX.resolver)) == _plain(
        new_topics.parse_topic(path, text, resolve=NEW_INDEX.resolve_target))
    if fast is not None:
        assert _plain(via) == _plain(fast)
        assert _plain(fast) == _plain(general_parse(path, text, resolve=NEW_INDEX.resolve_target))
        _deps_as_before(fast)
        _handed_rows_are_the_rows(fast)
    _deps_as_before(new_topics.parse_topic(path, text, resolve=NEW_INDEX.resolve_target))
    plain = new_topics.parse_well_formed(path, text)
    if plain is not None:
        assert _plain(plain) == _plain(general_parse(path, text, strict=False))
    _same_parse(path, text)


def _deps_reference(topic) -> tuple[str, ...]:
    """``parsecache.topic_deps`` as it was first written: link by link, off the objects."""
    deps: set[str] = set()
    topic_dir = os.path.dirname("topics/" + topic.path)
    for ev in topic.evidence:
        for link in ev.links:
            rel_part = link.target.strip().partition("#")[0]
            if rel_part and not rel_part.startswith("/") and "\\" not in rel_part:
                joined = os.path.normpath(os.path.join(topic_dir, rel_part))
                if joined.startswith("sources/"):
                    deps.add(joined)
            sid = link.source_id
            if not sid:
                continue
            if sid[0] == "D" and new_sources.parse_d_ref(sid) is not None:
                deps.add(new_sources.d_archive_path(sid))
                continue
            try:
                v2, legacy = new_sources.archive_paths(sid)
            except (ValueError, UnicodeEncodeError):
                continue
            deps.add(v2)
            deps.add(legacy)
    return tuple(sorted(deps))


def _deps_as_before(topic) -> None:
    """The archives a topic depends on, from the fields the one-pass reader kept (when it
    kept them) and from the objects, are the ones the link-by-link reading finds."""
    want = _deps_reference(topic)
    assert parsecache.topic_deps(topic) == want
    kept = vars(topic).pop(new_topics.HANDED, None)
    assert parsecache.topic_deps(topic) == want  # now read off the objects
    if kept is not None:
        vars(topic)[new_topics.HANDED] = kept


@pytest.mark.parametrize("sources", [
    "[a](openprogram/s/m), [b](openprogram/s/n)",  # one place
    "[a](openprogram/s/m), [b](openprogram/t/m), [c](other/s/m)",  # several
    "[a](openprogram/s/m), [b](D1:2), [c](#d3-4)",  # a place and D references
    "[a](openprogram/s/m), [b](openprogram/s/m/deeper)",  # a message holding "/"
    "[a](../../sources/openprogram/_v2/s.md#source-9047c1917b2f0777), [b](../../sources/x/../D1.md#d1-2)",
    "[a](openprogram/s%2Fx/m), [b](op%C3%A9n/s/m)",
])
def test_topic_deps_of_every_kind_of_link(sources):
    text = f"Dave likes tea.[^e1] ^97de5549\n\n[^e1]: Time: `2026`; Sources: {sources}\n"
    for path in ("people/dave.md", "dave.md", "a/b/c.md"):
        # (a link that does not resolve from this path is a problem, and still a dependency)
        _deps_as_before(new_topics.parse_topic(path, text, resolve=NEW_INDEX.resolve_target))


@pytest.mark.parametrize("target", [
    "../../sources/openprogram/_v2/s.md#source-222d54fe04a224cf",  # a frame of a v2 archive
    "../../sources/openprogram/_v2/s.md#source-0000000000000000",  # no such anchor: resolve decides
    "../../sources/openprogram/s.md#source-222d54fe04a224cf",  # a legacy archive's anchor
    "../../sources/openprogram/s.md#nowhere",
    "../../sources/D1.md#d1-2",  # a D file: never answered by the lookup
    "../../sources/none.md#source-222d54fe04a224cf",  # a file not indexed
    "../x.md#source-222d54fe04a224cf",  # outside sources/
    "../../sources/openprogram/_v2/s.md#d1-2",  # the #d fallback after a file that does not answer
])
def test_the_resolvers_file_lookup_reads_as_resolve_target(target):
    legacy = "<!-- openprogram-source-archive -->\n\n" + new_sources.render_frame(_REC)
    index = _index({**_ARCHIVES, "sources/openprogram/s.md": legacy})
    text = f"Dave likes tea.[^e1] ^97de5549\n\n[^e1]: Time: `2026`; Sources: [a]({target}), [b]({target})\n"
    for path in ("people/dave.md", "dave.md"):
        plain = new_topics.parse_topic(path, text, resolve=index.resolve_target)
        assert _plain(new_topics.parse_topic(path, text, resolve=index.resolver)) == _plain(plain)
        assert index.resolver(path, target) == index.resolve_target(path, target)


def _handed_rows_are_the_rows(topic) -> None:
    """The cache rows made from the fields the one-pass reader handed over are the rows read
    off the objects, and decode (after marshal) to the very parse."""
    assert new_topics.HANDED in vars(topic)
    handed = parsecache.topic_rows(topic)
    assert new_topics.take_handed(topic) is None  # taken once; from now on the objects are read
    assert handed == parsecache.topic_rows(topic)
    back = parsecache.topic_from_rows(marshal.loads(marshal.dumps(handed, 4)))
    assert back == topic and _plain(back) == _plain(topic)


@SETTINGS
@given(well_formed_topics(clean=True))
def test_well_formed_topics_take_the_one_pass_reading(text):
    if text:  # the empty file is left to the general parser
        assert new_topics.parse_well_formed("people/dave.md", text, resolve=NEW_INDEX.resolve_target) is not None
    _same_as_before("people/dave.md", text)


@SETTINGS
@given(well_formed_topics(clean=False))
def test_generated_topics_parse_as_before(text):
    _same_as_before("people/dave.md", text)


@SETTINGS
@given(well_formed_topics(clean=True), st.data())
def test_damaged_well_formed_topics_parse_as_before(text, data):
    for _ in range(data.draw(st.integers(1, 2))):
        if data.draw(st.booleans()):
            pos = data.draw(st.integers(0, max(0, len(text) - 1)))
            text = text[:pos] + data.draw(ALPHABET) + text[pos + data.draw(st.integers(0, 2)):]
        else:  # a whole line replaced, added or dropped
            lines = text.split("\n")
            k = data.draw(st.integers(0, len(lines) - 1))
            line = data.draw(st.sampled_from(["", " ", "```", "<!-- x", "# H", "#x", "[^e1]: 2024 · Sources: [s](D1:2)",
                                              "more words", "\tindented[^e1] ^abcd", "x[^e1]  ^abcd", "x[^e1] ^ab ^cd",
                                              "^ab x[^e1] ^cd", "x[^e1]\u00a0^abcd", "[^e1]: Time: `2026`; Sources: [s](D1:2)"]))
            op = data.draw(st.sampled_from(["replace", "insert", "drop"]))
            lines[k:k + (op != "insert")] = [] if op == "drop" else [line]
            text = "\n".join(lines)
    _same_as_before("people/dave.md", text)


@pytest.mark.parametrize("count", ["01", "001", "02", "000000001"])
def test_record_counts_with_leading_zeros_read_as_before(count):
    """A count with leading zeros is still well formed (OpenProgram's reader takes the number)."""
    rel = new_sources.archive_path(_REC.source_id)
    text = new_sources.render_archive([new_sources.render_frame(_REC), new_sources.render_frame(_REC2)])
    text = text.replace("<!-- record-lines:1 -->", f"<!-- record-lines:{count} -->", 1)
    if count.lstrip("0") == "2":  # make the first record two lines long
        text = text.replace("tea please\n", "tea please\nand more\n", 1)
    fast = new_sources.scan_well_formed(rel, text)
    assert fast is not None and len(fast.frames) == 2
    assert _plain(fast) == _plain(general_scan(rel, text.encode()))


@SETTINGS
@given(st.lists(st.sampled_from(["source-a", "source-b", "source-c", ""]), max_size=8))
def test_by_anchor_keeps_the_first_frame_of_each_anchor(anchors):
    """``ArchiveFile.by_anchor`` is built in one pass when the anchors are distinct; with an
    anchor twice (a legacy file may repeat a record) the first frame holding it still wins."""
    base = new_sources.SourceFrame("openprogram/s/m", "", None, None, ("x",), "", "user", "x", True, False,
                                   "sources/openprogram/s.md", 1, "legacy")
    frames = tuple(dataclasses.replace(base, anchor=a, line=i + 1) for i, a in enumerate(anchors))
    want: dict = {}
    for fr in frames:
        want.setdefault(fr.anchor, fr)
    got = new_sources.ArchiveFile("sources/openprogram/s.md", "legacy", (0, 0, 0), frames).by_anchor
    assert list(got.items()) == list(want.items())
    assert all(got[a] is want[a] for a in want)
