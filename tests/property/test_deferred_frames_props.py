"""An index built from cached archive rows, whose frames are decoded on first use, answers
every question exactly as the index of a fresh scan does, whatever is asked first.

The lazy index is ``SourceIndex.from_files`` over ``parsecache.archive_from_rows(archive_rows(e))``
of each scanned entry (what a cached load builds); the full one is over the scanned entries.
"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.store import parsecache
from memory_tui.core.format import sources as S

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _plain(value):
    """Fields all the way down (an entry with deferred frames is an ArchiveFile subclass)."""
    if dataclasses.is_dataclass(value):
        name = "ArchiveFile" if isinstance(value, S.ArchiveFile) else type(value).__name__
        return (name, tuple(_plain(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, frozenset):
        return frozenset(_plain(v) for v in value)
    return value


RECORDS = st.builds(
    S.SourceRecord,
    provider=st.sampled_from(["openprogram", "slack"]),
    thread_id=st.sampled_from(["s", "t2"]),
    message_id=st.sampled_from(["m1", "m2", "m3", "m4", "x y"]),
    ordinal=st.integers(0, 3),
    role=st.sampled_from(["user", "assistant"]),
    content=st.text(st.sampled_from(list("ab \n[]:é")), max_size=12),
    timestamp=st.sampled_from(["", "2026-08-09T10:00:00Z"]),
    speaker_id=st.sampled_from([None, "ann", "b%c"]),
    speaker_display=st.sampled_from([None, "Ann"]),
    trust_state=st.sampled_from(["trusted", "pending"]),
)


@st.composite
def workspaces(draw) -> dict[str, bytes]:
    """Archives: v2 files (one per thread), a legacy copy of some records (the same ids), a
    D file, sometimes a v2 file with a damaged tail (kept whole by the index, not cached)."""
    files: dict[str, list[str]] = {}
    legacy: dict[str, list[str]] = {}
    seen: set[str] = set()
    for rec in draw(st.lists(RECORDS, max_size=10)):
        if rec.source_id in seen:
            continue
        seen.add(rec.source_id)
        files.setdefault(S.archive_path(rec.source_id), []).append(S.render_frame(rec))
        if draw(st.booleans()):
            legacy.setdefault(S.archive_path(rec.source_id, legacy=True), []).append(S.render_frame(rec))
    out = {rel: S.render_archive(frames).encode() for rel, frames in files.items()}
    out.update({rel: ("# legacy\n\n" + "\n".join(frames)).encode() for rel, frames in legacy.items()})
    if draw(st.booleans()):
        out["sources/D1.md"] = b'<a id="d1-2"></a>\n[2024] Ann: hello [D1:2]\n\n<a id="d1-3"></a>\n[2024] Bo: x [D1:3]\n'
    if out and draw(st.booleans()):
        rel = draw(st.sampled_from(sorted(out)))
        out[rel] = out[rel] + b"<a id=\"broken\n"
    return out


QUERIES = st.lists(st.tuples(st.sampled_from(
    ["frame", "frame_facts", "v2_frame", "has_v2", "trusted", "pending", "resolve", "resolve_file", "link_for", "validate",
     "validate_new", "events", "entry_frames", "entry_scan", "entry_by_anchor", "entry_ids", "entry_sid_at",
     "entry_frame_of", "entry_facts_of", "entry_eq"]), st.integers(0, 50)), max_size=25)



def _ask(index: S.SourceIndex, op: str, n: int, ids: list[str], rels: list[str]):
    sid = ids[n % len(ids)] if ids else "openprogram/s/none"
    rel = rels[n % len(rels)] if rels else None
    entry = index.files.get(rel) if rel is not None else None
    if op == "frame":
        return _plain(index.frame(sid))
    if op == "frame_facts":
        facts = index.frame_facts(sid)
        frame = index.frame(sid)
        assert facts == (None if frame is None else S.FrameFacts.of(frame))  # what it stands for
        return facts
    if op == "v2_frame":
        return _plain(index.v2_frame(sid))
    if op == "has_v2":
        return index.has_v2(sid)
    if op == "trusted":
        return index.is_trusted(sid)
    if op == "pending":
        return index.is_pending(sid)
    if op == "resolve":
        return index.resolve_target("people/a.md", sid)
    if op == "resolve_file":
        if S.parse_d_ref(sid) is not None:
            target = "../../" + S.d_archive_path(sid) + "#" + S.d_anchor(sid)
        else:
            target = "../../" + S.archive_path(sid, legacy=bool(n % 2)) + "#" + S.anchor(sid)
        return index.resolve_target("people/a.md", target)
    if op == "link_for":
        return index.link_for(sid, "topics/people")
    if op in ("validate", "validate_new"):
        ref = sid if n % 3 else "D1:" + str(n % 4)
        return _plain(index.validate_ref(ref, new=op == "validate_new", allowed=ids[: n % 3] or None))
    if op == "events":
        return _plain(index.events())
    if entry is None:
        return None
    if op == "entry_frames":
        return _plain(entry.frames)
    if op == "entry_scan":
        return _plain(entry.scan)
    if op == "entry_by_anchor":
        return _plain(entry.by_anchor)
    if op == "entry_ids":
        return entry.ids
    if op == "entry_sid_at":
        return entry.sid_at(S.anchor(sid)), entry.has_anchor(S.anchor(sid)), entry.has_anchor("d1-2"), entry.sid_at("d1-3")
    if op == "entry_frame_of":
        return _plain(entry.frame_of(sid))
    if op == "entry_facts_of":
        return entry.facts_of(sid)
    if op == "entry_eq":
        return _plain(entry)
    raise AssertionError(op)


def _indexes(data: dict[str, bytes]) -> tuple[S.SourceIndex, S.SourceIndex, int]:
    scanned = {rel: S.index_file(rel, raw, (1, len(raw), i)) for i, (rel, raw) in enumerate(sorted(data.items()))}
    lazy_files = {}
    deferred = 0
    for rel, entry in scanned.items():
        try:
            rows = parsecache.archive_rows(entry)
        except parsecache._Unrepresentable:  # not stored: a cached load scans it again
            lazy_files[rel] = S.index_file(rel, data[rel], entry.key)
            continue
        lazy_files[rel] = parsecache.archive_from_rows(rows)
        deferred += 1
    return S.SourceIndex.from_files("/m", scanned), S.SourceIndex.from_files("/m", lazy_files), deferred


@SETTINGS
@given(workspaces(), QUERIES)
def test_deferred_frames_answer_as_a_full_scan(data, queries):
    full, lazy, deferred = _indexes(data)
    # building the index decoded no frame
    assert all("_frames" not in e.__dict__ for e in lazy.files.values() if type(e) is not S.ArchiveFile)
    assert sum(type(e) is not S.ArchiveFile for e in lazy.files.values()) == deferred
    ids = sorted(full.all_ids() | {"openprogram/s/none"})
    rels = sorted(full.files)
    for op, n in queries:
        got = _ask(lazy, op, n, ids, rels)
        assert got == _ask(full, op, n, ids, rels), (op, n)
    # whatever was asked before, what is left is what a full build has
    assert lazy.trusted_ids() == full.trusted_ids() and lazy.pending_ids() == full.pending_ids()
    assert lazy.all_ids() == full.all_ids() and lazy.problems == full.problems
    for rel in rels:
        assert lazy.complete(rel) == full.complete(rel)
        assert lazy.files[rel] == full.files[rel] and full.files[rel] == lazy.files[rel]
        assert _plain(lazy.files[rel]) == _plain(full.files[rel])
    assert _plain(lazy.events()) == _plain(full.events())


def test_workspaces_are_not_trivial():
    """The generator reaches what the property is about: deferred v2 entries with several
    frames, legacy copies of v2 ids, a D file and an entry that cannot be cached."""
    rec = S.SourceRecord("openprogram", "s", "m1", 1, "user", "one\ntwo", "2026-08-09T10:00:00Z", trust_state="pending")
    rec2 = dataclasses.replace(rec, message_id="m2", trust_state="trusted", speaker_id="ann")
    v2 = S.archive_path(rec.source_id)
    data = {
        v2: S.render_archive([S.render_frame(rec), S.render_frame(rec2)]).encode(),
        S.archive_path(rec2.source_id, legacy=True): ("# legacy\n\n" + S.render_frame(rec2)).encode(),
        "sources/D1.md": b'<a id="d1-2"></a>\n[2024] Ann: hello [D1:2]\n',
        S.archive_path("slack/t2/m1"): b"not an archive",
    }
    full, lazy, deferred = _indexes(data)
    assert deferred == 3 and len(full.files[v2].frames) == 2
    assert lazy.is_pending(rec.source_id) and lazy.is_trusted(rec2.source_id)
    assert "_frames" not in lazy.files[v2].__dict__
    assert lazy.resolve_target("people/a.md", "../../" + v2 + "#" + S.anchor(rec2.source_id)) == rec2.source_id
    assert "_frames" not in lazy.files[v2].__dict__  # an anchor lookup needs no frame
    assert _plain(lazy.frame(rec.source_id)) == _plain(full.frame(rec.source_id))
    assert "_frames" in lazy.files[v2].__dict__
    assert lazy.validate_ref(rec.source_id, new=True) is not None  # pending: refused as new evidence
    assert lazy.validate_ref(rec2.source_id, new=True) is None


@SETTINGS
@given(workspaces())
def test_frame_facts_of_cached_rows_build_no_frame(data):
    full, lazy, deferred = _indexes(data)
    for sid in sorted(full.all_ids()):
        assert lazy.frame_facts(sid) == full.frame_facts(sid)
    assert all("_frames" not in e.__dict__ for e in lazy.files.values() if type(e) is not S.ArchiveFile)
