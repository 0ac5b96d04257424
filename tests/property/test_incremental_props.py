"""Incremental = full: a random sequence of edits through every cache (in-process parses and
proofs, the persistent parse cache) gives exactly the results and bytes of the same sequence
run with every cache dropped before each step (the full-rebuild check mode); and so does the
sequence run as fresh processes would, from the persistent cache alone, with its entries
randomly damaged, stale (an older snapshot of the cache) or from other code before a step."""

from __future__ import annotations

import os
import posixpath
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_tui.core.store import noopcache

from memory_tui.core.store import parsecache

from memory_tui.core.store import revmemo

from memory_tui.core.store import proofs, txcache

from memory_tui.core.store import viewcache
from memory_tui.core.tx import api as tx
from memory_tui.core.format.sources import SourceIndex
from memory_tui.core.format.topics import parse_tree
from switching import set_derive


@pytest.fixture(scope="module")
def master(bench_state_small, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("incr") / "state"
    # without the sessions: the edit path never reads them
    shutil.copytree(bench_state_small, out, symlinks=True,
                    ignore=lambda d, names: ["sessions"] if Path(d) == bench_state_small else [])
    return out


@pytest.fixture(scope="module")
def sources(master) -> list[str]:
    """The trusted source ids the generated records cite: the master's, the same for every
    example (a fresh load of its archives each time was the same list, recomputed)."""
    return sorted(SourceIndex.load(master / "memory").trusted_ids())


def _bytes(mem: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(mem):
        dirnames[:] = [d for d in dirnames if d not in (".git", parsecache.DIR_NAME, viewcache.SNAPSHOT_DIR)]
        for name in filenames:
            p = Path(dirpath, name)
            rel = p.relative_to(mem).as_posix()
            if name in (proofs.CACHE_NAME, proofs.LOG_NAME, noopcache.NAME, revmemo.NAME):  # caches: keyed by this copy's stamps
                continue
            out[rel] = p.read_bytes()
    return out


OPS = st.lists(
    st.tuples(st.sampled_from(["reword", "add", "noop", "drop_record", "broken", "move_text", "link", "unlink",
                               "redate", "new_topic", "delete_topic", "rename_id", "drop_linked", "dangling",
                               "bad_topic_link", "dup_id", "many_errors"]),
              st.integers(min_value=0, max_value=10_000)),
    min_size=1, max_size=5,
)


def _apply(state: Path, op: str, n: int, sources: list[str]):
    mem = state / "memory"
    topics = sorted(p.relative_to(mem).as_posix() for p in (mem / "topics").rglob("*.md"))
    rel = topics[n % len(topics)]
    text = (mem / rel).read_text()
    if op in ("drop_linked", "dangling"):  # the record another topic links to goes, or a link to no record
        linking = [t for t in topics if "#^" in (mem / t).read_text()]
        if linking:
            src = linking[n % len(linking)]
            m = re.search(r"\]\(([^)#]+)#\^([A-Za-z0-9-]+)\)", (mem / src).read_text())
            if m and op == "drop_linked":
                target = posixpath.normpath(posixpath.join(posixpath.dirname(src), m.group(1)))
                rel = target if target in topics else rel
                text = (mem / rel).read_text()
                new = "\n\n".join(p for p in text.split("\n\n") if f"^{m.group(2)}" not in p)
            elif m:
                rel, text = src, (mem / src).read_text()
                new = text.replace(f"#^{m.group(2)})", "#^0badf00d)", 1)
            else:
                new = text
        else:
            new = text
    elif op == "rename_id":  # a committed id renamed: the old one is removed (refused)
        ids = re.findall(r"\^([0-9a-f]{8})\s*$", text, flags=re.M)
        new = text.replace(f"^{ids[n % len(ids)]}", "^feedf00d", 1) if ids else text
    elif op == "bad_topic_link":  # a topic link without #^id in new content
        other = topics[(n + 2) % len(topics)]
        ref = sources[n % len(sources)]
        target = posixpath.relpath(other, posixpath.dirname(rel))
        new = text.rstrip("\n") + (f"\n\nBare link {n}, see [there]({target}).[^e{n}]\n\n"
                                   f"[^e{n}]: Time: `2026-05-0{1 + n % 9}`; Sources: [x]({ref})\n")
    elif op == "dup_id":  # another topic's id written into this one
        other = topics[(n + 1) % len(topics)]
        ids = re.findall(r"\^([0-9a-f]{8})\s*$", (mem / other).read_text(), flags=re.M)
        own = re.findall(r"\^([0-9a-f]{8})\s*$", text, flags=re.M)
        new = text.replace(f"^{own[0]}", f"^{ids[0]}", 1) if ids and own and other != rel else text
    elif op == "many_errors":  # several refusals at once: every error is listed, in the same order
        ids = re.findall(r"\^([0-9a-f]{8})\s*$", text, flags=re.M)
        new = text.replace(f"^{ids[0]}", "^feedf00d", 1) if ids else text
        new += f"\nA claim without a source {n}.[^zz{n}]\n\nSee [nowhere](t9999.md#^0badf00d).\n"
    elif op == "reword":
        new = text.replace("(fact ", "(Fact ", 1) if "(fact " in text else text.replace("(Fact ", "(fact ", 1)
    elif op == "add":
        ref = sources[n % len(sources)]
        new = text.rstrip("\n") + f"\n\nAdded fact number {n}.[^e{n}]\n\n[^e{n}]: Time: `2026-10`; Sources: [x]({ref})\n"
    elif op == "noop":
        new = text
    elif op == "drop_record":  # removing a committed id: refused
        paras = text.split("\n\n")
        new = "\n\n".join(paras[:2] + paras[4:]) if len(paras) > 4 else text
    elif op == "broken":
        new = text + f"\nA claim without a source {n}.[^zz{n}]\n"
    elif op == "link":  # a new record linking to a block of another topic: relations.json changes
        other = topics[(n + 1) % len(topics)]
        ids = re.findall(r"\^([A-Za-z0-9-]+)\s*$", (mem / other).read_text(), flags=re.M)
        target = posixpath.relpath(other, posixpath.dirname(rel))
        ref = sources[n % len(sources)]
        new = text.rstrip("\n") + (f"\n\nLinked fact {n}, see [that]({target}#^{ids[n % len(ids)]}).[^e{n}]\n\n"
                                   f"[^e{n}]: Time: `2026-0{1 + n % 9}-1{n % 10}`; Sources: [x]({ref})\n")
    elif op == "unlink":  # drop the link text of a linking record (its id stays)
        new = re.sub(r", see \[(?:that|next)\]\([^)]*\)", "", text, count=1)
    elif op == "redate":  # a record moves to another day: two timeline files change (a tree install)
        new = re.sub(r"Time: `\d{4}-\d{2}-\d{2}`", f"Time: `2025-0{1 + n % 9}-2{n % 10}`", text, count=1)
    elif op == "new_topic":  # a new file in a new folder: one topics file added
        rel = f"topics/new{n % 3}/fresh{n}.md"
        ref = sources[n % len(sources)]
        new = f"# Fresh {n}\n\nA brand new fact {n}.[^e{n}]\n\n[^e{n}]: Time: `2026-11-0{1 + n % 9}`; Sources: [x]({ref})\n"
    elif op == "delete_topic":  # its ids go with it: refused when another topic links to one
        return _outcome(tx.staged_edit(state, rel, None, git_commit="off"))
    else:  # move a record's text within the file: same ids, new order
        paras = text.split("\n\n")
        new = "\n\n".join(paras[:2] + paras[4:6] + paras[2:4] + paras[6:]) if len(paras) > 6 else text
    return _outcome(tx.staged_edit(state, rel, new, git_commit="off"))


def _outcome(r):
    """What must agree: the verdict, every error (code, message, place, in order) and, when
    installed, the changed files and the revision."""
    errors = tuple((p.code, p.message, p.path, p.line, p.column) for p in r.all_errors())
    return (r.ok, r.code, tuple(r.changed_files), r.revision if r.ok else None, errors)


DAMAGES = st.lists(st.sampled_from(["keep", "old", "garbage", "retype", "other_code"]), min_size=5, max_size=5)


def _cache_dir(mem: Path) -> Path:
    return mem / ".scriptorium" / parsecache.DIR_NAME


def _damage(mem: Path, how: str, old: Path | None, n: int) -> None:
    """Spoil the persistent cache the way a crash, an older copy or other code would."""
    cache = _cache_dir(mem)
    entries = sorted([*cache.rglob("*" + parsecache.ENTRY_SUFFIX), *cache.rglob("*" + parsecache.PACK_SUFFIX)])
    if how == "old" and old is not None:  # every entry from before the previous step: stale keys
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(old, cache)
    elif how == "garbage":
        for p in entries[n % 3::3]:
            p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 2)])
        verdict = mem / ".scriptorium" / noopcache.NAME  # the remembered no-op answer, cut short
        if verdict.is_file() and n % 2:
            verdict.write_bytes(verdict.read_bytes()[:-7])
        snapshot = viewcache.snapshot_dir(mem)  # the combined views, cut short file by file
        for p in sorted(snapshot.iterdir())[n % 4::4] if snapshot.is_dir() else []:
            p.write_bytes(p.read_bytes()[:-3])
    elif how == "retype":  # intact entries holding a value of the wrong type for their kind
        for p in entries[n % 2::2]:
            data = p.read_bytes()
            if p.name.endswith(parsecache.PACK_SUFFIX):  # a pack: every entry of one kind
                kind = p.name[:-len(parsecache.PACK_SUFFIX)]
                table = parsecache.decode_pack(kind, data) if kind in parsecache.PACKED else {}
                if table:
                    p.write_bytes(parsecache.encode_pack(kind, {k: (*v[:-1], 1.5) for k, v in table.items()}))
                continue
            got = parsecache.decode_entry(p.parent.name, data)
            if got is not None and isinstance(got[1], tuple):
                p.write_bytes(parsecache.encode_entry(p.parent.name, got[0], (*got[1][:-1], 1.5)))
    elif how == "other_code":  # a cache made by other code: its own tag, never read
        for tag in [d for d in cache.iterdir() if d.is_dir()] if cache.is_dir() else []:
            tag.rename(tag.with_name("0123456789abcdef"))


def _fresh_matches(master: Path, base: Path, ops, sources, want, want_bytes, damages) -> None:
    """Each step as a new process: nothing in memory, only the (damaged) persistent cache."""
    fresh = base / "fresh"
    shutil.copytree(master, fresh, symlinks=True)
    mem = fresh / "memory"
    got = []
    old = None
    for i, (op, n) in enumerate(ops):
        txcache.clear_caches()
        if i:
            _damage(mem, damages[i % len(damages)], old, n)
        snap = base / f"snap{i}"
        if _cache_dir(mem).is_dir():
            shutil.copytree(_cache_dir(mem), snap)
            old = snap
        got.append(_apply(fresh, op, n, sources))
    assert got == want
    assert _bytes(mem) == want_bytes


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, damages=DAMAGES)
def test_cached_edit_sequence_equals_full_rebuild(master, sources, tmp_path_factory, ops, damages, monkeypatch):
    base = tmp_path_factory.mktemp("seq")
    incr, full = base / "incr", base / "full"
    shutil.copytree(master, incr, symlinks=True)
    shutil.copytree(master, full, symlinks=True)
    txcache.clear_caches()
    got_incr = []
    for op, n in ops:
        got_incr.append(_apply(incr, op, n, sources))
    # the same sequence with every incremental derivation checked against the full one as it
    # runs (IncrementalMismatch names the first that differs)
    checked = base / "checked"
    shutil.copytree(master, checked, symlinks=True)
    txcache.clear_caches()
    set_derive(monkeypatch, "check")
    got_checked = [_apply(checked, op, n, sources) for op, n in ops]
    set_derive(monkeypatch, None)
    got_full = []
    # every view derived from every unit, as build_views does; whole-tree stages, planned by
    # comparing every file; trees, id and link checks, locations from scratch
    set_derive(monkeypatch, "full")
    for op, n in ops:
        txcache.clear_caches()
        parsecache.drop(full / "memory")
        got_full.append(_apply(full, op, n, sources))
    set_derive(monkeypatch, None)
    assert got_incr == got_full
    assert got_checked == got_full
    assert _bytes(incr / "memory") == _bytes(full / "memory")
    assert _bytes(checked / "memory") == _bytes(full / "memory")
    _fresh_matches(master, base, ops, sources, got_full, _bytes(full / "memory"), damages)
    # and what the cache now answers is what a fresh parse says
    parsecache.forget_in_process()
    c_index, c_tree = parsecache.load_tree(incr / "memory")
    p_index = SourceIndex.load(incr / "memory")
    p_tree = parse_tree(incr / "memory" / "topics", resolve=p_index.resolve_target, strict=True)
    assert c_tree.topics == p_tree.topics and c_tree.problems == p_tree.problems
