"""A record's or a topic's history from the memory git repository, and reverting to it.

History is read, never rewritten. A record's history is found in two git calls plus one
blob stream, so it stays fast on large workspaces:

1. ``git log -S^<id> --name-only -- topics`` (the pickaxe) names every topic file in which
   the number of ``^<id>`` occurrences ever changed: the files the block was added to,
   removed from or moved between;
2. ``git log --name-only -- <those files>`` lists every commit that touched them;
3. ``git cat-file --batch`` streams those files' blobs, and the block (its paragraph plus
   the footnote definitions it cites) is cut out of each by a local scan around the id.

A version is reported whenever the block's text or file changes. Who made each commit comes
from its message (OpenProgram's fixed messages, memory spec §2.3; memory-tui's own reverts
say so) and, for writer and organizer commits, the matching run in ``agent-history.jsonl``
(runs and commits are paired in order, newest with newest, since neither names the other).

``revert`` restores one record or one whole topic file to its text at an earlier commit
through the one transaction path (``staged_edit``: normalise, validate, install, commit),
as a compare-and-set on the revision the caller read. A revert that would drop a block id
another record links to is refused with the linking record named.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from memory_tui.core.store import gitlog
from memory_tui.core.changes.request import DEFAULT_COMMIT_MESSAGE as DEFAULT_UPDATE_MESSAGE
from memory_tui.core.format.errors import MemoryError
from memory_tui.core.format.topics import DEFINITION_RE, paragraph_shape, parse_topic, topic_sort_key
from memory_tui.core.store.workspace import AgentRun, load_agent_history

INIT, WRITER, ORGANIZER, HAND_EDIT, PROMOTION, MEMORY_TUI, UPDATE, OTHER = (
    "init", "writer", "organizer", "hand-edit", "promotion", "memory-tui", "update", "other",
)
ACTORS = (INIT, WRITER, ORGANIZER, HAND_EDIT, PROMOTION, MEMORY_TUI, UPDATE, OTHER)
REVERT_PREFIX = "memory: revert "
REVERT_SUFFIX = " (memory-tui)"
_SEP = "\x1f"
_FORMAT = "%x1e" + _SEP.join(("%H", "%an", "%ae", "%aI", "%at", "%s"))
_HEADING = re.compile(r"#{1,6}\s+\S")
_HTML_OR_FENCE = re.compile(r"\s*(?:<!--|<a\s|```)")
_CITED = re.compile(r"\[\^([A-Za-z0-9_-]+)\]")
_REL_TARGET = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?\))")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_BLOCK_ID = re.compile(r"[A-Za-z0-9-]+")


# ------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Version:
    """One commit that changed the record (or topic), with the text it left behind."""

    commit: str
    author: str  # "name <email>"
    date: str  # author date, ISO 8601 as git prints it
    timestamp: int
    subject: str
    actor: str  # one of ACTORS
    actor_detail: str | None  # e.g. the matched agent-history run
    topic_path: str | None  # workspace-relative file holding the block after this commit
    text: str | None  # the block (paragraph + its definitions) or the topic text; None = removed

    @property
    def removed(self) -> bool:
        return self.text is None

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "author": self.author,
            "date": self.date,
            "subject": self.subject,
            "actor": self.actor,
            "actor_detail": self.actor_detail,
            "topic_path": self.topic_path,
            "removed": self.removed,
            "text": self.text,
        }


@dataclass(frozen=True)
class History:
    kind: str  # "record" | "topic"
    target: str  # the block id, or the workspace-relative topic path
    versions: tuple[Version, ...]  # newest first
    problems: tuple[str, ...] = ()  # e.g. "not a git repository"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "versions": [v.to_json() for v in self.versions],
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class Commit:
    sha: str
    author: str
    date: str
    timestamp: int
    subject: str
    files: tuple[str, ...]


# ------------------------------------------------------------------------------- git plumbing


def _git(root: Path, args: Sequence[str], stdin: bytes | None = None) -> bytes:
    """Run git read-only in ``root``; a refusal is a ``MemoryError`` carrying git's reason."""
    if gitlog.git_executable() is None:
        raise MemoryError("GIT_UNAVAILABLE", "git executable not found")
    env = {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    proc = subprocess.run(
        ["git", "-C", str(root), *args], input=stdin, capture_output=True, env={**os.environ, **env}, check=False
    )
    if proc.returncode != 0:
        reason = " ".join(proc.stderr.decode("utf-8", "replace").split()) or f"git {args[0]} failed"
        raise MemoryError("GIT_UNAVAILABLE", f"cannot read the memory history: {reason}", path=".git")
    return proc.stdout


def _has_history(root: Path) -> str | None:
    """None when ``root`` has its own repository with a HEAD, else why not."""
    if not (root / ".git").exists():
        return "the memory workspace has no git history (.git is missing)"
    try:
        top = _git(root, ["rev-parse", "--show-toplevel"]).decode().strip()
        _git(root, ["rev-parse", "--verify", "-q", "HEAD"])
    except MemoryError as exc:
        return exc.message
    if Path(top).resolve() != root.resolve():
        return "the memory workspace is not the top of its own git repository"
    return None


def _log(root: Path, args: Sequence[str]) -> list[Commit]:
    out = _git(root, ["log", "--no-renames", "--name-only", f"--format={_FORMAT}", *args]).decode("utf-8", "replace")
    commits: list[Commit] = []
    for chunk in out.split("\x1e"):
        chunk = chunk.strip("\n")
        if not chunk:
            continue
        head, _, rest = chunk.partition("\n")
        parts = head.split(_SEP)
        if len(parts) != 6:
            continue
        sha, an, ae, date, ts, subject = parts
        files = tuple(line for line in rest.splitlines() if line.strip())
        commits.append(Commit(sha, f"{an} <{ae}>", date, int(ts or 0), subject, files))
    return commits


def _blobs(root: Path, specs: Sequence[str]) -> dict[str, str | None]:
    """``{"<commit>:<path>": text or None (absent)}`` through one ``cat-file --batch``."""
    if not specs:
        return {}
    out = _git(root, ["cat-file", "--batch"], stdin="".join(s + "\n" for s in specs).encode("utf-8"))
    result: dict[str, str | None] = {}
    pos = 0
    for spec in specs:
        end = out.index(b"\n", pos)
        header = out[pos:end].decode("utf-8", "replace")
        pos = end + 1
        if header.endswith(" missing") or header.endswith(" ambiguous"):
            result[spec] = None
            continue
        size = int(header.rsplit(" ", 1)[1])
        result[spec] = out[pos:pos + size].decode("utf-8", "replace")
        pos += size + 1  # the blob is followed by one LF
    return result


def resolve_commit(root: Path, ref: str) -> str:
    """A full commit hash for ``ref`` (hash, prefix, or any revision git understands)."""
    if not ref or ref.startswith("-"):
        raise MemoryError("INVALID_ARGUMENT", f"not a commit: {ref!r}")
    try:
        return _git(root, ["rev-parse", "--verify", "-q", f"{ref}^{{commit}}"]).decode().strip()
    except MemoryError:
        raise MemoryError("INVALID_ARGUMENT", f"no such commit in the memory history: {ref}", path=".git") from None


# ------------------------------------------------------------------------------- attribution


def actor_of(subject: str) -> str:
    """Who made a commit, from its message (memory spec §2.3)."""
    s = subject.strip()
    if s == gitlog.INIT_MESSAGE:
        return INIT
    if s == gitlog.MSG_INCREMENTAL:
        return WRITER
    if s == gitlog.MSG_REORGANIZE:
        return ORGANIZER
    if s.startswith(REVERT_PREFIX) and s.endswith(REVERT_SUFFIX):
        return MEMORY_TUI
    if s == gitlog.MSG_EDIT_DEFAULT or s.startswith("memory: edit ") or s.startswith("memory: delete "):
        return HAND_EDIT
    if s.startswith("memory: trust source "):
        return PROMOTION
    if s.startswith("memory: ") or s == DEFAULT_UPDATE_MESSAGE:
        return UPDATE  # update() with the caller's own message, or its default
    return OTHER


def _run_detail(run: AgentRun) -> str:
    data = run.data
    text = data.get("error") if run.failed else data.get("reply")
    text = " ".join(str(text or "").split())
    if len(text) > 80:
        text = text[:79] + "\u2026"
    return f"agent-history.jsonl line {run.line}: {run.stage}" + (f" \u2014 {text}" if text else "")


def pair_runs(commits: Sequence[Commit], runs: Sequence[AgentRun]) -> dict[str, str]:
    """Writer and organizer commits matched with their model runs, newest with newest.

    Only runs that can have produced a commit count: ``write`` / ``organize`` stages that did
    not fail (a ``-repair`` run belongs to the run before it)."""
    details: dict[str, str] = {}
    for actor, stage in ((WRITER, "write"), (ORGANIZER, "organize")):
        mine = [c for c in commits if actor_of(c.subject) == actor]  # newest first
        ok_runs = [r for r in runs if r.stage == stage and not r.failed]
        for c, r in zip(mine, reversed(ok_runs)):
            details[c.sha] = _run_detail(r)
    return details


def _all_commits(root: Path) -> list[Commit]:
    out = _git(root, ["log", f"--format={_FORMAT}"]).decode("utf-8", "replace")
    commits = []
    for chunk in out.split("\x1e"):
        parts = chunk.strip("\n").split(_SEP)
        if len(parts) == 6:
            commits.append(Commit(parts[0], f"{parts[1]} <{parts[2]}>", parts[3], int(parts[4] or 0), parts[5], ()))
    return commits


# ------------------------------------------------------------------------------- block text


def _is_text_line(line: str) -> bool:
    return bool(line.strip()) and not _HEADING.match(line) and not DEFINITION_RE.match(line) and not _HTML_OR_FENCE.match(line)


@dataclass(frozen=True)
class BlockText:
    """A block as it stands in one topic text: the paragraph, and the definitions it cites."""

    paragraph: tuple[str, ...]
    start: int  # 0-based index of the paragraph's first line
    end: int  # 0-based index one past its last line
    ids: tuple[str, ...]  # the suffix ids, identity last
    cited: tuple[str, ...]  # footnote ids the paragraph cites, in order
    definitions: tuple[str, ...]  # the cited footnotes' definition lines, in citation order

    @property
    def text(self) -> str:
        out = "\n".join(self.paragraph)
        if self.definitions:
            out += "\n\n" + "\n".join(self.definitions)
        return out


def find_block(text: str, block_id: str) -> BlockText | None:
    """Cut the paragraph carrying ``^block_id`` in its id suffix out of a topic text."""
    pattern = re.compile(r"(?<![#A-Za-z0-9_-])\^" + re.escape(block_id) + r"(?![A-Za-z0-9-])")
    lines = text.split("\n")
    starts: list[int] = []
    offset = 0
    for line in lines:
        starts.append(offset)
        offset += len(line) + 1
    for m in pattern.finditer(text):
        # the line holding the match
        lo, hi = 0, len(starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= m.start():
                lo = mid
            else:
                hi = mid - 1
        i = lo
        if not _is_text_line(lines[i]):
            continue
        a = i
        while a > 0 and _is_text_line(lines[a - 1]):
            a -= 1
        b = i + 1
        while b < len(lines) and _is_text_line(lines[b]):
            b += 1
        para = tuple(lines[a:b])
        shape = paragraph_shape("\n".join(para))
        if block_id not in shape.ids:
            continue
        cited = tuple(dict.fromkeys(_CITED.findall("\n".join(para))))
        defs: dict[str, str] = {}
        for line in lines:
            d = DEFINITION_RE.match(line)
            if d and d.group(1) in cited and d.group(1) not in defs:
                defs[d.group(1)] = line
        return BlockText(para, a, b, tuple(shape.ids), cited, tuple(defs[c] for c in cited if c in defs))
    return None


# ------------------------------------------------------------------------------- history


def _memory_root(state: Any) -> Path:
    root = getattr(state, "memory_root", None)
    if root is not None:
        return Path(root)
    p = Path(state)
    return p if (p / "topics").is_dir() and not (p / "memory").is_dir() else p / "memory"


def topic_rel(target: str) -> str:
    """``people/ada.md`` / ``topics/people/ada.md`` / ``people/ada`` → ``topics/people/ada.md``."""
    rel = target.strip().replace("\\", "/").removeprefix("./")
    if not rel.startswith("topics/"):
        rel = "topics/" + rel
    return rel if rel.endswith(".md") else rel + ".md"


def is_block_target(target: str) -> bool:
    t = target.strip()
    return t.startswith("^") or ("/" not in t and not t.endswith(".md") and _BLOCK_ID.fullmatch(t) is not None)


def _runs(root: Path, agent_runs: Iterable[AgentRun] | None) -> tuple[AgentRun, ...]:
    if agent_runs is not None:
        return tuple(agent_runs)
    runs, _problems = load_agent_history(root)
    return runs


def record_history(state: Any, block_id: str, *, agent_runs: Iterable[AgentRun] | None = None) -> History:
    """Every commit that changed block ``block_id`` (text or file), newest first."""
    root = _memory_root(state)
    block_id = block_id.strip().removeprefix("^")
    if not _BLOCK_ID.fullmatch(block_id):
        raise MemoryError("INVALID_ARGUMENT", f"not a block id: {block_id!r} (letters, digits and '-')")
    why = _has_history(root)
    if why is not None:
        return History("record", block_id, (), (why,))
    touched = _log(root, [f"-S^{block_id}", "--", "topics"])
    files = sorted({f for c in touched for f in c.files if f.startswith("topics/")}, key=topic_sort_key)
    if not files:
        return History("record", block_id, ())
    commits = _log(root, ["--", *files])  # newest first
    specs = [f"{c.sha}:{f}" for c in commits for f in c.files if f in files]
    blobs = _blobs(root, specs)
    details = pair_runs(_all_commits(root), _runs(root, agent_runs))
    versions: list[Version] = []
    where: str | None = None
    text: str | None = None
    for c in reversed(commits):  # oldest first
        found: tuple[str, str] | None = None
        gone_from_current = False
        for f in c.files:
            if f not in files:
                continue
            blob = blobs.get(f"{c.sha}:{f}")
            block = find_block(blob, block_id) if blob is not None else None
            if block is not None:
                if found is None or f == where:
                    found = (f, block.text)
            elif f == where:
                gone_from_current = True
        if found is not None:
            new_where, new_text = found
        elif gone_from_current:
            new_where, new_text = where, None
        else:
            continue
        if (new_where, new_text) == (where, text):
            continue
        if new_text is None and text is None:
            continue
        where, text = new_where, new_text
        versions.append(Version(c.sha, c.author, c.date, c.timestamp, c.subject, actor_of(c.subject),
                                details.get(c.sha), where, text))
    return History("record", block_id, tuple(reversed(versions)))


def topic_history(state: Any, topic: str, *, agent_runs: Iterable[AgentRun] | None = None) -> History:
    """Every commit that changed one topic file, newest first (``text`` None = deleted)."""
    root = _memory_root(state)
    rel = topic_rel(topic)
    why = _has_history(root)
    if why is not None:
        return History("topic", rel, (), (why,))
    commits = _log(root, ["--", rel])
    blobs = _blobs(root, [f"{c.sha}:{rel}" for c in commits])
    details = pair_runs(_all_commits(root), _runs(root, agent_runs))
    versions = tuple(
        Version(c.sha, c.author, c.date, c.timestamp, c.subject, actor_of(c.subject), details.get(c.sha), rel,
                blobs.get(f"{c.sha}:{rel}"))
        for c in commits
    )
    return History("topic", rel, versions)


def history(state: Any, target: str, *, agent_runs: Iterable[AgentRun] | None = None) -> History:
    """``RECORD`` (``^id`` or a bare block id) or ``TOPIC`` (a path under ``topics/``).

    A bare word that names a topic file in the workspace is a topic; otherwise it is a block id.
    """
    root = _memory_root(state)
    t = target.strip()
    if not t:
        raise MemoryError("INVALID_ARGUMENT", "a record id or topic path is required")
    if is_block_target(t) and not (root / topic_rel(t)).is_file():
        return record_history(state, t, agent_runs=agent_runs)
    return topic_history(state, t, agent_runs=agent_runs)


# ------------------------------------------------------------------------------- revert


@dataclass(frozen=True)
class LinkBlocker:
    dropped_id: str
    linker_id: str
    linker_path: str
    linker_line: int

    def to_json(self) -> dict[str, Any]:
        return {"dropped_id": self.dropped_id, "linked_by": self.linker_id, "path": self.linker_path, "line": self.linker_line}


@dataclass(frozen=True)
class RevertPlan:
    """What a revert would install, before it is installed (the TUI previews this)."""

    kind: str  # "record" | "topic"
    target: str  # block id or workspace-relative topic path
    to_commit: str
    topic_path: str  # the workspace file that changes
    old_text: str | None  # the file now
    new_text: str | None  # the file after the revert (None = the file is deleted)
    dropped_ids: tuple[str, ...]
    blockers: tuple[LinkBlocker, ...]
    base_revision: str | None

    @property
    def noop(self) -> bool:
        return self.old_text == self.new_text


@dataclass(frozen=True)
class RevertResult:
    ok: bool
    kind: str
    target: str
    to_commit: str | None
    code: str | None = None
    message: str = ""
    path: str | None = None
    line: int | None = None
    revision: str | None = None
    git_commit: str | None = None
    changed_files: tuple[str, ...] = ()
    dropped_ids: tuple[str, ...] = ()
    blockers: tuple[LinkBlocker, ...] = ()
    warnings: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def retryable(self) -> bool:
        return self.code == "CONCURRENT_UPDATE"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": self.ok,
            "kind": self.kind,
            "target": self.target,
            "to_commit": self.to_commit,
            "revision": self.revision,
            "git_commit": self.git_commit,
            "changed_files": list(self.changed_files),
            "dropped_ids": list(self.dropped_ids),
        }
        if not self.ok:
            out["error"] = {"code": self.code, "message": self.message, "path": self.path, "line": self.line,
                            "blockers": [b.to_json() for b in self.blockers], **({"details": dict(self.details)} if self.details else {})}
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def _rebase_definition(line: str, old_dir: str, new_dir: str) -> str:
    """Relative link targets of a definition line, re-based from ``old_dir`` to ``new_dir``."""
    if old_dir == new_dir:
        return line

    def fix(m: re.Match[str]) -> str:
        target = m.group(2)
        if target.startswith("/") or _SCHEME.match(target) or "/" not in target and "." not in target:
            return m.group(0)  # absolute, a URL, or a plain handle: nothing to re-base
        joined = posixpath.normpath(posixpath.join(old_dir, target))
        return m.group(1) + posixpath.relpath(joined, new_dir) + m.group(3)

    return _REL_TARGET.sub(fix, line)


def _splice_record(current: str, now: BlockText, old: BlockText, old_dir: str, new_dir: str) -> str:
    """The current topic text with the block's paragraph and definitions taken from ``old``."""
    lines = current.split("\n")
    defined = {m.group(1): i for i, l in enumerate(lines) if (m := DEFINITION_RE.match(l))}
    # definitions only the current paragraph cites go; definitions the old one needs come
    # back right after the paragraph (where the normaliser puts new ones)
    others = "\n".join(lines[:now.start] + lines[now.end:])
    still_cited = set(_CITED.findall("\n".join(l for l in others.split("\n") if not DEFINITION_RE.match(l))))
    drop = {defined[f] for f in now.cited if f in defined and f not in still_cited and f not in old.cited}
    add = [_rebase_definition(d, old_dir, new_dir) for d in old.definitions
           if (m := DEFINITION_RE.match(d)) and m.group(1) not in defined]
    # a definition only this block cites takes its old text back (e.g. a corrected Time);
    # one another block also cites stays as it is, since that block depends on it now
    replace: dict[int, str] = {}
    for d in old.definitions:
        m = DEFINITION_RE.match(d)
        if m and m.group(1) in defined and m.group(1) not in still_cited:
            replace[defined[m.group(1)]] = _rebase_definition(d, old_dir, new_dir)
    out: list[str] = []
    gap = False  # a dropped definition was just left out
    for i, line in enumerate(lines):
        if i in replace:
            out.append(replace[i])
            gap = False
            continue
        if i == now.start:
            out.extend(old.paragraph)
            if add:
                out.append("")
                out.extend(add)
            gap = False
            continue
        if now.start < i < now.end:
            continue
        if i in drop:
            gap = True
            continue
        if not line.strip():
            # the blank line after a dropped definition would double the one before it;
            # every other blank line is the file's own and stays, byte for byte
            if gap and out and not out[-1].strip():
                continue
        else:
            gap = False
        out.append(line)
    return "\n".join(out)


def _ids_in(rel: str, text: str | None) -> set[str]:
    if text is None:
        return set()
    topic = parse_topic(rel[len("topics/"):], text)
    return {a for u in topic.units for a in u.aliases} | {u.memory_id for u in topic.units}


def _blockers(view: Any, rel: str, new_text: str | None, dropped: Iterable[str]) -> tuple[LinkBlocker, ...]:
    dropped = set(dropped)
    if not dropped:
        return ()
    topic_path = rel[len("topics/"):]
    units = [u for u in view.tree.units if u.topic_path != topic_path]
    if new_text is not None:
        units.extend(parse_topic(topic_path, new_text).units)
    out = []
    for u in units:
        if u.memory_id in dropped:
            continue
        for t in u.relation_targets:
            if t in dropped:
                out.append(LinkBlocker(t, u.memory_id, u.path, u.line))
    return tuple(sorted(set(out), key=lambda b: (b.dropped_id, b.linker_path, b.linker_line, b.linker_id)))


def plan_revert(view: Any, target: str, to: str) -> RevertPlan:
    """Work out a revert without installing anything. Raises ``MemoryError`` when it cannot
    be planned (no such commit, the record did not exist then, the record is gone now)."""
    root = _memory_root(view)
    why = _has_history(root)
    if why is not None:
        raise MemoryError("GIT_UNAVAILABLE", why, path=".git")
    commit = resolve_commit(root, to)
    t = target.strip()
    if is_block_target(t) and not (root / topic_rel(t)).is_file():
        bid = t.lstrip("^")
        unit = view.tree.by_id(bid) if view.tree is not None else None
        if unit is None:
            raise MemoryError("MEMORY_NOT_FOUND",
                              f"record ^{bid} is not in the workspace now; revert its topic file to bring it back")
        rel = unit.path
        current = view.tree.topic(unit.topic_path).text
        now = find_block(current, unit.identity)
        if now is None:  # the parser found it, so the scan must too
            raise MemoryError("INVALID_TOPIC_FORMAT", f"cannot locate ^{bid} in {rel}", path=rel, line=unit.line)
        touched = _log(root, [f"-S^{bid}", "--", "topics"])
        candidates = [rel] + sorted({f for c in touched for f in c.files if f != rel}, key=topic_sort_key)
        blobs = _blobs(root, [f"{commit}:{f}" for f in candidates])
        old: BlockText | None = None
        old_rel = rel
        for f in candidates:
            blob = blobs.get(f"{commit}:{f}")
            old = find_block(blob, bid) if blob is not None else None
            if old is not None:
                old_rel = f
                break
        if old is None:
            raise MemoryError("MEMORY_NOT_FOUND", f"record ^{bid} did not exist at commit {commit[:10]}", path=rel)
        new_text = _splice_record(current, now, old, posixpath.dirname(old_rel), posixpath.dirname(rel))
        dropped = tuple(sorted(set(now.ids) - set(old.ids)))
        return RevertPlan("record", bid, commit, rel, current, new_text, dropped,
                          _blockers(view, rel, new_text, dropped), view.revision)
    rel = topic_rel(t)
    topic = view.tree.topic(rel[len("topics/"):]) if view.tree is not None else None
    current = topic.text if topic is not None else None
    new_text = _blobs(root, [f"{commit}:{rel}"]).get(f"{commit}:{rel}")
    if current is None and new_text is None:
        raise MemoryError("MEMORY_NOT_FOUND", f"{rel} exists neither now nor at commit {commit[:10]}", path=rel)
    dropped = tuple(sorted(_ids_in(rel, current) - _ids_in(rel, new_text)))
    return RevertPlan("topic", rel, commit, rel, current, new_text, dropped,
                      _blockers(view, rel, new_text, dropped), view.revision)


def revert_message(plan: RevertPlan) -> str:
    what = plan.topic_path + (f" ^{plan.target}" if plan.kind == "record" else "")
    return f"{REVERT_PREFIX}{what} to {plan.to_commit[:10]}{REVERT_SUFFIX}"


def revert(view: Any, target: str, to: str, *, base_revision: str | None = None,
           git_env: Mapping[str, str] | None = None, counter: Any = None) -> RevertResult:
    """Restore a record or topic to its text at commit ``to``, as a new commit.

    ``base_revision`` defaults to the revision of ``view`` (what the owner looked at); the
    install is refused with ``CONCURRENT_UPDATE`` when the workspace has changed since.
    Never raises for a refusal: the result says why.
    """
    from memory_tui.core.tx.api import staged_edit

    kind = "record" if is_block_target(target) and not (_memory_root(view) / topic_rel(target)).is_file() else "topic"
    name = target.strip().lstrip("^") if kind == "record" else topic_rel(target)
    try:
        plan = plan_revert(view, target, to)
    except MemoryError as exc:
        return RevertResult(False, kind, name, None, exc.code, exc.message, exc.path, exc.line, details=dict(exc.details))
    if plan.blockers:
        first = plan.blockers[0]
        message = (f"revert would drop ^{first.dropped_id}, which ^{first.linker_id} "
                   f"({first.linker_path}:{first.linker_line}) links to; remove or retarget that link first")
        return RevertResult(False, plan.kind, plan.target, plan.to_commit, "INVALID_TOPIC_FORMAT", message,
                            first.linker_path, first.linker_line, dropped_ids=plan.dropped_ids, blockers=plan.blockers,
                            details={"dropped": list(plan.dropped_ids)})
    if plan.noop:
        return RevertResult(True, plan.kind, plan.target, plan.to_commit, message="already at that version",
                            revision=view.revision)
    result = staged_edit(
        _memory_root(view), plan.topic_path, plan.new_text, message=revert_message(plan), git_commit="auto",
        base_revision=base_revision if base_revision is not None else plan.base_revision,
        removable_ids=plan.dropped_ids, git_env=git_env, counter=counter,
    )
    if not result.ok:
        return RevertResult(False, plan.kind, plan.target, plan.to_commit, result.code, result.message, result.path,
                            result.line, dropped_ids=plan.dropped_ids, details=dict(result.details))
    return RevertResult(True, plan.kind, plan.target, plan.to_commit, message=result.message, revision=result.revision,
                        git_commit=result.git_commit, changed_files=tuple(result.changed_files),
                        dropped_ids=plan.dropped_ids, warnings=tuple(result.warnings))
