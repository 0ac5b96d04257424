"""Backfill's legacy core step (memory spec §7.6 first bullet): with no ``topics/core.md``, a
non-blank root ``core.md`` is promoted when it parses, else archived as one trusted
``openprogram-migration/legacy-core`` source that backfill then hands to the writer."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from memory_tui.core.tx import api as tx
from memory_tui.core.store import gitlog
from memory_tui.core.store.gitlog import fixed_env
from memory_tui.core.format.sources import SourceIndex, SourceRecord, decode_meta
from memory_tui.core.store.archives import append_records
from memory_tui.pipeline.backfill import BACKFILL_MESSAGE, backfill, candidates, migrate_legacy_core
from memory_tui.core.store.lock import TIMEOUT_EDIT
from memory_tui.pipeline.context import Context, locked

PRINCIPAL = "owner/install/0123456789abcdef"
RECORDS = [SourceRecord("openprogram", "sess-bf", f"m{i}", i + 1, "user", f"message {i}",
                        timestamp="2026-11-30T05:00:00+00:00") for i in range(3)]
IDS = [r.source_id for r in RECORDS]
ADA = f"# Ada\n\nAda drinks tea.[^e1]\n\n[^e1]: Time: `2026-11-02`; Sources: [tea]({IDS[0]})\n"
UNPARSEABLE = "# Core\n\nThe user prefers short answers and green tea.\n"


def _state(tmp_path: Path, core: str | None, owner: bool = True) -> Path:
    state = tmp_path / "state"
    mem = state / "memory"
    (mem / "topics").mkdir(parents=True)
    append_records(mem, RECORDS)
    assert tx.staged_edit(state, "topics/people/ada.md", ADA, git_commit="off").ok
    if owner:
        (state / "owner.json").write_text(json.dumps({"version": 1, "principal_id": PRINCIPAL}, indent=2) + "\n")
    if core is not None:
        (mem / "core.md").write_text(core)
    return state


def _ctx(state: Path) -> Context:
    return Context(state, git_env=fixed_env(), clock=lambda: 1796100000.0)


def _legacy_id(text: str) -> str:
    return "openprogram-migration/legacy-core/" + hashlib.sha256(text.encode()).hexdigest()[:24]


def test_unparseable_root_core_is_archived_as_a_trusted_candidate(tmp_path):
    state = _state(tmp_path, UNPARSEABLE)
    mem = state / "memory"
    ctx = _ctx(state)
    with locked(ctx, TIMEOUT_EDIT):
        assert migrate_legacy_core(ctx) == "archived"
    sid = _legacy_id(UNPARSEABLE)
    assert (mem / "sources/openprogram-migration/_v2/legacy-core.md").is_file()
    frame = SourceIndex.load(mem).v2_frame(sid)
    assert frame is not None and frame.trusted and not frame.pending
    assert frame.text == UNPARSEABLE and frame.timestamp == ""
    assert frame.speaker_id_raw == "runtime:legacy-core"
    assert frame.speaker_label.startswith("Legacy core migration (")
    meta = decode_meta(frame.meta_token)
    assert (meta.trust_state, meta.speaker_kind, meta.principal_id, meta.authority_tier) == (
        "trusted", "runtime", PRINCIPAL, "owner")
    assert sid in [fr.source_id for fr in candidates(mem)]
    assert (mem / "core.md").read_text() == UNPARSEABLE  # the root file itself is left alone
    before = (mem / "sources/openprogram-migration/_v2/legacy-core.md").read_bytes()
    with locked(ctx, TIMEOUT_EDIT):
        assert migrate_legacy_core(ctx) is None  # content addressed: not archived twice
    assert (mem / "sources/openprogram-migration/_v2/legacy-core.md").read_bytes() == before


def test_backfill_reports_and_processes_the_archived_core(tmp_path):
    state = _state(tmp_path, UNPARSEABLE)
    assert gitlog.ensure_history(state / "memory", env=fixed_env()) is None
    out = backfill(_ctx(state))
    assert out.legacy_core == "archived" and out.to_json()["legacy_core"] == "archived"
    assert out.candidates == 3  # two uncited turns + the legacy core
    # OpenProgram's count: processed = candidates a topic cites after the run (this writer
    # cited none of the three), and the three are declined, each with the writer's answer
    assert out.processed == 0 and out.outcome.status == "incomplete" and len(out.declined) == 3
    # the changed topic files ride beside the spec's keys, not in them; this writer
    # cited nothing (all 3 remain), so none is listed
    assert out.remaining == 3 and out.changed_files == () and "changed_files" not in out.to_json()
    # what backfill installed is committed at once, not left for the next writer's `git add -A`
    import subprocess

    log = subprocess.run(["git", "-C", str(state / "memory"), "log", "-1", "--format=%s"], capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "-C", str(state / "memory"), "status", "--porcelain"], capture_output=True, text=True).stdout
    assert log.strip() == BACKFILL_MESSAGE and dirty == "", (log, dirty)
    assert backfill(_ctx(state)).legacy_core is None


def test_parseable_root_core_is_promoted_not_archived(tmp_path):
    # what an older OpenProgram rendered: committed form, block id included
    anchor = "source-" + hashlib.sha256(IDS[1].encode()).hexdigest()[:16]
    core = ("# Core\n\nThe user is Ada.[^e-1111111111] ^abcd1234\n\n[^e-1111111111]: Time: `2026-11`; "
            f"Sources: [name](sources/openprogram/_v2/sess-bf.md#{anchor})\n")
    state = _state(tmp_path, core)
    mem = state / "memory"
    out = backfill(_ctx(state))
    assert out.legacy_core == "promoted"
    assert "The user is Ada." in (mem / "topics/core.md").read_text()
    assert "topics/core.md" in out.changed_files  # the job result lists the promoted file
    assert not (mem / "sources/openprogram-migration").exists()


def test_blank_or_superseded_root_core_is_ignored(tmp_path):
    state = _state(tmp_path, "  \n\n")
    assert backfill(_ctx(state)).legacy_core is None
    assert not (state / "memory/sources/openprogram-migration").exists()
    other = _state(tmp_path / "b", UNPARSEABLE)
    core = f"# Core\n\nThe user is Ada.[^e1]\n\n[^e1]: Time: `2026-11`; Sources: [name]({IDS[1]})\n"
    assert tx.staged_edit(other, "topics/core.md", core, git_commit="off").ok
    (other / "memory/core.md").write_text(UNPARSEABLE)  # a master exists: the root file is derived
    assert backfill(_ctx(other)).legacy_core is None
    assert not (other / "memory/sources/openprogram-migration").exists()


def test_missing_owner_file_stops_before_archiving(tmp_path):
    state = _state(tmp_path, UNPARSEABLE, owner=False)
    out = backfill(_ctx(state))
    assert out.outcome.status == "incomplete" and out.outcome.code == "WRITER_PRECONDITION_FAILED"
    assert "owner.json" in out.outcome.message
    assert out.remaining == 3  # two uncited turns + the core still waiting
    assert not (state / "memory/sources/openprogram-migration").exists()
