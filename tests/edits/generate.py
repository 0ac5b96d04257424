"""Generate the hand-edit corpus ``tests/edits/cases/*.json`` from the fixture's topics.

Run once (``python tests/edits/generate.py``); the data files are committed and are what the
runner reads. Every expectation (code, path, line, column) is derived from how the case text is
*constructed* (where the defect was put), never from running the transaction.

Case file: {"name", "path", "text" | "delete": true, "extra_files": {rel: text},
            "expect": {"ok", "code", "path", "line", "column", "message_contains", "ids_survive"}}
"""

from __future__ import annotations

import json
import re
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))

from memory_tui.core.format.sources import SourceRecord, render_archive, render_frame  # noqa: E402

FIXTURE = REPO.parent / "shared" / "fixtures" / "openprogram-state.tgz"
TRUSTED = "openprogram/local_a1b2c3d4e5/a00000000002"
PENDING_FILE = "sources/openprogram/_v2/local_pending.md"
PENDING = "openprogram/local_pending/p1"
NO_META = "openprogram/local_pending/p2"


def pending_archive() -> str:
    p1 = SourceRecord("openprogram", "local_pending", "p1", 1, "user", "a pending remark",
                      timestamp="2026-11-30T05:00:00+00:00", trust_state="pending", speaker_kind="human")
    p2 = SourceRecord("openprogram", "local_pending", "p2", 2, "user", "a frame without meta",
                      timestamp="2026-11-30T05:00:01+00:00")
    frame2 = render_frame(p2)
    frame2 = "\n".join(l for l in frame2.split("\n") if not l.startswith("<!-- source-meta:"))
    return render_archive([render_frame(p1), frame2])


def load_topics() -> dict[str, str]:
    tmp = Path(tempfile.mkdtemp())
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp, filter="tar")
    topics = tmp / ".openprogram" / "memory" / "topics"
    return {p.relative_to(topics).as_posix(): p.read_text(encoding="utf-8") for p in sorted(topics.rglob("*.md"))}


def paragraphs_with_ids(text: str) -> list[tuple[str, int, int]]:
    """(block id, first line, last line incl. following definition) for each record."""
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        m = re.search(r"\^([A-Za-z0-9-]+)\s*$", line)
        if m and not line.startswith("[^"):
            end = i
            j = i + 1
            while j < len(lines) and (lines[j].strip() == "" or lines[j].startswith("[^")):
                if lines[j].startswith("[^"):
                    end = j
                j += 1
            out.append((m.group(1), i + 1, end + 1))
    return out


def n_lines(text: str) -> int:
    return len(text.rstrip("\n").split("\n"))


def main() -> None:
    topics = load_topics()
    cases: list[dict] = []

    def add(name, target, text=None, *, delete=False, extra=None, **expect):
        case = {"name": name, "path": target}
        if delete:
            case["delete"] = True
        else:
            case["text"] = text
        if extra:
            case["extra_files"] = extra
        expect.setdefault("ok", False)
        case["expect"] = expect
        cases.append(case)

    rec = "[^e1]: Time: `2026-11`; Sources: [note]({ref})"

    for rel, text in topics.items():
        wpath = "topics/" + rel
        end = n_lines(text)
        # -- valid -----------------------------------------------------------------------
        add(f"noop-{rel}", wpath, text, ok=True, changed_files=[], revision_unchanged=True)
        new = text.rstrip("\n") + f"\n\nA new remembered fact.[^e1]\n\n{rec.format(ref=TRUSTED)}\n"
        add(f"append-record-{rel}", wpath, new, ok=True, ids_survive=True, new_blocks=1)
        new = text.rstrip("\n") + f"\n\nOne fact.[^e1]\n\n{rec.format(ref=TRUSTED)}\n\nAnother fact.[^e2]\n\n" + \
            rec.replace("e1", "e2").format(ref=TRUSTED) + "\n"
        add(f"append-two-records-{rel}", wpath, new, ok=True, ids_survive=True, new_blocks=2)
        # -- invalid: appended defects, located on the appended lines ---------------------
        base = text.rstrip("\n")
        add(f"uncited-paragraph-{rel}", wpath, base + "\n\nJust some prose without a citation.\n",
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 2, column=1, message_contains="memory block ID required")
        add(f"missing-source-{rel}", wpath,
            base + "\n\nA fact.[^e1]\n\n" + rec.format(ref="openprogram/local_a1b2c3d4e5/nope") + "\n",
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 4, column=rec.index("{ref}") + 1, message_contains="missing source reference")
        add(f"untrusted-source-{rel}", wpath,
            base + "\n\nA fact.[^e1]\n\n" + rec.format(ref=PENDING) + "\n", extra={PENDING_FILE: pending_archive()},
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 4, column=1, message_contains="not trusted; promote it first")
        add(f"no-meta-source-{rel}", wpath,
            base + "\n\nA fact.[^e1]\n\n" + rec.format(ref=NO_META) + "\n", extra={PENDING_FILE: pending_archive()},
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 4, column=1, message_contains="not trusted; promote it first")
        add(f"dangling-link-{rel}", wpath,
            base + "\n\nSee [that](people/ada.md#^deadbeef) again.[^e1]\n\n" + rec.format(ref=TRUSTED) + "\n",
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 2, column=5, message_contains="dangling block link: deadbeef")
        add(f"undefined-footnote-{rel}", wpath, base + "\n\nA fact with a broken footnote.[^e7]\n",
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 2, message_contains="footnote")
        add(f"bad-date-{rel}", wpath,
            base + "\n\nA fact.[^e1]\n\n[^e1]: Time: `2026-13`; Sources: [note](" + TRUSTED + ")\n",
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 4, message_contains="invalid evidence date")
        add(f"non-ascii-date-{rel}", wpath,
            base + "\n\nA fact.[^e1]\n\n[^e1]: Time: `٢٠٢٦-١١`; Sources: [note](" + TRUSTED + ")\n",
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 4, message_contains="ASCII")
        add(f"heading-citation-{rel}", wpath, base + "\n\n## Heading[^e1]\n\n" + rec.format(ref=TRUSTED) + "\n",
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 2, column=11, message_contains="heading")
        add(f"topic-link-without-block-{rel}", wpath,
            base + "\n\nSee [Ada](people/ada.md) for more.[^e1]\n\n" + rec.format(ref=TRUSTED) + "\n",
            code="INVALID_TOPIC_FORMAT", path=wpath, line=end + 2, column=5, message_contains="Topic-to-Topic link")
        # -- invalid: every committed block id removed, one at a time ------------------------
        lines = text.split("\n")
        for bid, first, last in paragraphs_with_ids(text):
            kept = lines[: first - 1] + lines[last:]
            add(f"drop-{bid}", wpath, "\n".join(kept), code="INVALID_TOPIC_FORMAT", path=wpath, line=first,
                column=1, message_contains=f"block ID must not be removed: {bid}")
        # -- valid: reword every record, keeping its id --------------------------------------
        for bid, first, _ in paragraphs_with_ids(text)[:4]:
            reworded = list(lines)
            reworded[first - 1] = "Reworded: " + reworded[first - 1]
            add(f"reword-{bid}", wpath, "\n".join(reworded), ok=True, ids_survive=True)

    # -- whole-file cases -------------------------------------------------------------------
    for rel in topics:
        if rel == "projects/kyoto-trip.md":  # people/ada.md links to its block fa3c8017 (line 3, the link)
            link_col = topics["people/ada.md"].split("\n")[2].index("[Kyoto plan]") + 1
            add(f"delete-{rel}", "topics/" + rel, delete=True, code="INVALID_TOPIC_FORMAT", path="topics/people/ada.md",
                line=3, column=link_col, message_contains="dangling block link: fa3c8017")
        elif rel != "core.md":
            add(f"delete-{rel}", "topics/" + rel, delete=True, ok=True)
    add("delete-core", "topics/core.md", delete=True, code="INVALID_ARGUMENT", path="topics/core.md",
        message_contains="cannot be deleted")
    add("delete-missing", "topics/nowhere.md", delete=True, code="MEMORY_NOT_FOUND", path="topics/nowhere.md")
    valid_new = "# New\n\nA brand new fact.[^e1]\n\n" + rec.format(ref=TRUSTED) + "\n"
    for rel in ("new.md", "places/kyoto.md", "a/b/c/deep.md"):
        add(f"new-topic-{rel}", "topics/" + rel, valid_new, ok=True, new_blocks=1)
    add("new-topic-only-prose", "topics/prose.md", "# Prose\n\nOnly uncited prose here.\n",
        code="INVALID_TOPIC_FORMAT", path="topics/prose.md", line=3, column=1, message_contains="memory block ID required")
    add("new-topic-only-prose-no-heading", "topics/prose2.md", "Only uncited prose here.\n",
        code="INVALID_TOPIC_FORMAT", path="topics/prose2.md", line=1, column=1, message_contains="memory block ID required")
    add("new-topic-only-heading", "topics/heading.md", "# Just a heading\n",
        code="INVALID_TOPIC_FORMAT", path="topics/heading.md", line=1, column=1, message_contains="would be deleted")
    add("new-topic-only-fence", "topics/fence.md", "```\nsome code\n```\n",
        code="INVALID_TOPIC_FORMAT", path="topics/fence.md", line=1, column=1, message_contains="would be deleted")
    for bad in ("../escape.md", "topics/../../escape.md", "/etc/passwd.md", "topics/../../../x.md"):
        add(f"path-escape-{bad}", bad, valid_new, code="PATH_OUTSIDE_WORKSPACE", message_contains="escapes")
    for bad in ("topics/notes.txt", "core.md", "sources/openprogram/_v2/x.md", "timeline/2026.md", "topics/x.MD",
                "relations.json", "topics/.hidden.md"):
        add(f"read-only-{bad}", bad, valid_new, code="READ_ONLY_PATH", message_contains="only topics/**/*.md is writable")
    # an id copied from another topic is a duplicate
    add("duplicate-id", "topics/new-dup.md", "# Dup\n\nCopied.[^e1] ^fc30e0e0\n\n" + rec.format(ref=TRUSTED) + "\n",
        code="INVALID_TOPIC_FORMAT", line=3, message_contains="duplicate memory_id: fc30e0e0")
    # moving a record to another file keeps its id
    ada = topics["people/ada.md"]
    add("move-out-of-ada", "topics/people/ada.md", "# Ada\n\nAda has a new fact.[^e1]\n\n" + rec.format(ref=TRUSTED) + "\n",
        code="INVALID_TOPIC_FORMAT", path="topics/people/ada.md", line=3, column=1,
        message_contains="block ID must not be removed: fc30e0e0")
    del ada

    out = HERE / "cases"
    out.mkdir(exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    for i, case in enumerate(cases):
        slug = re.sub(r"[^A-Za-z0-9-]+", "-", case["name"]).strip("-")[:60]
        (out / f"{i:03d}-{slug}.json").write_text(json.dumps(case, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(cases)} cases")


if __name__ == "__main__":
    main()
