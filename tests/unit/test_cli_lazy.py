"""The CLI imports only the verb module a command line names (issue 12: a fresh ``edit``
must not pay for rich, the pipeline and the demo), and parses exactly as the full parser."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time

import pytest

from memory_tui import cli


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_verb_table_matches_the_modules():
    for name in cli.VERB_MODULE_NAMES:
        sub = argparse.ArgumentParser().add_subparsers()
        cli._module(name).register(sub)
        registered = set(sub.choices)
        assert registered, name
        assert {v for v, m in cli.VERB_MODULE.items() if m == name} == registered, name
    assert set(_verbs(cli.build_parser())) == set(cli.VERB_MODULE)


@pytest.mark.parametrize("argv", [
    ["edit", "--git-commit", "off", "--from", "-", "topics/a.md"],
    ["--state", "/x", "--json", "edit", "topics/a.md"],
    ["--state=/x", "apply", "--base-revision", "current", "req.json"],
    ["--json", "status"],
    ["--ascii", "why", "s1"],
    ["record", "update", "abcd1234", "--text", "t"],
    ["views", "--check"],
    ["topics"],
])
def test_lazy_parse_equals_full_parse(argv):
    full = cli.build_parser()
    lazy = cli.build_parser(argv)
    assert cli._named_verb(argv) is not None
    assert len(_verbs(lazy)) < len(_verbs(full))  # really the lazy parser
    try:
        want = vars(full.parse_args(argv))
    except SystemExit as exc:  # an argv the verb refuses: both refuse alike
        with pytest.raises(SystemExit) as got:
            lazy.parse_args(argv)
        assert got.value.code == exc.code
        return
    assert vars(lazy.parse_args(argv)) == want


@pytest.mark.parametrize("argv", [[], ["-h"], ["--st", "/x", "edit"], ["--state"], ["nosuchverb"], ["--", "edit"],
                                  ["--jso", "edit"]])
def test_anything_unusual_takes_the_full_parser(argv):
    assert cli._named_verb(argv) is None
    assert set(_verbs(cli.build_parser(argv))) == set(cli.VERB_MODULE)


def test_edit_imports_no_other_verb_module(tmp_path):
    code = (
        "import sys, json\n"
        "from memory_tui import cli\n"
        "try:\n"
        "    cli.main(['--state', sys.argv[1], 'edit', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('memory_tui.cli.') or m in "
        "('rich.progress', 'memory_tui.demo', 'memory_tui.pipeline.context'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == ["memory_tui.cli.app", "memory_tui.cli.common", "memory_tui.cli.edit"], loaded


def test_one_shot_verbs_run_without_the_cyclic_collector_and_restore_it(monkeypatch, tmp_path):
    import gc

    from memory_tui.cli import read

    seen = []
    monkeypatch.setattr(read, "cmd_status", lambda args: seen.append(gc.isenabled()) or 0)
    assert gc.isenabled()
    assert cli.main(["--state", str(tmp_path), "status"]) == 0
    assert seen == [False]
    assert gc.isenabled()  # main() runs inside other processes too (tests, jobs)
    # every one-shot verb is a verb the CLI knows, and the long-lived ones keep the collector
    assert cli.ONE_SHOT_VERBS <= set(cli.VERB_MODULE)
    assert not cli.ONE_SHOT_VERBS & {"demo", "write", "reorganize", "backfill", "migrate", "jobs", "preview"}


def test_only_the_process_entry_point_freezes_its_objects_for_shutdown(tmp_path):
    # the process's own one-shot run freezes what it built, so shutdown's last
    # collection skips it; main(argv) inside another process (tests, jobs) must not, or that
    # process could never collect those objects again.
    code = (
        "import gc, json, sys\n"
        "from memory_tui import cli\n"
        "rc1 = cli.main(['--state', sys.argv[1], '--json', 'status'])\n"
        "after_call = gc.get_freeze_count()\n"
        "sys.argv = ['memory-tui', '--state', sys.argv[1], '--json', 'status']\n"
        "rc2 = cli.main()\n"
        "print(json.dumps([rc1, after_call, rc2, gc.get_freeze_count(), gc.isenabled()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    rc1, after_call, rc2, frozen, enabled = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc1 == rc2
    assert after_call == 0
    assert frozen > 0
    assert enabled is True


def test_a_fresh_edit_imports_no_module_only_other_paths_need(fixture_state, tmp_path):
    """A whole `edit --from FILE` in a new process (a real change, installed) never
    imports what only the interactive editor, the demo, the encoder build or the renameat2
    fallback use (each cost every fresh edit and apply a few milliseconds of start-up)."""
    mem = fixture_state / "memory"
    topic = sorted(p for p in (mem / "topics").rglob("*.md") if p.name != "core.md")[0]
    rel = topic.relative_to(mem).as_posix()
    text = topic.read_text(encoding="utf-8")
    words = sorted(set(re.findall(r"\b[a-z]{5,}\b", text)))
    assert words, rel
    new = tmp_path / "new.md"
    new.write_text(text.replace(words[0], words[0].upper(), 1), encoding="utf-8")
    # An owner's token memo already knows the Core text (any earlier view build counted it);
    # with an empty memo the edit must build the encoder, which is the one path that imports
    # importlib.resources. Warm it here so the test does not depend on what ran before it.
    warm = subprocess.run(
        [sys.executable, "-m", "memory_tui", "--state", str(fixture_state), "views", "--check"],
        capture_output=True, text=True,
    )
    assert warm.returncode == 0, warm.stdout + warm.stderr
    code = (
        "import sys, json\n"
        "from memory_tui import cli\n"
        "rc = cli.main(['--state', sys.argv[1], '--json', 'edit', '--git-commit', 'off', '--from', sys.argv[2], sys.argv[3]])\n"
        "print(json.dumps([rc, sorted(m for m in ('subprocess', 'tempfile', 'uuid', 'ctypes', 'shlex', "
        "'importlib.resources') if m in sys.modules)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(fixture_state), str(new), rel], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    rc, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert rc == 0 and topic.read_text(encoding="utf-8") == new.read_text(encoding="utf-8"), out.stdout
    assert loaded == [], loaded


def test_a_remembered_noop_imports_none_of_the_staging_code(fixture_state):
    """A fresh `edit` whose text is the file's own bytes, answered from the remembered no-op
    verdict, stages nothing: it imports none of the staging, parsing, normalising, views or
    install-planning code (in a fresh process those imports were most of such an answer's
    cost), and says the same as the full path did."""
    mem = fixture_state / "memory"
    topic = sorted(p for p in (mem / "topics").rglob("*.md") if p.name != "core.md")[0]
    rel = topic.relative_to(mem).as_posix()
    code = (
        "import sys, json\n"
        "from memory_tui import cli\n"
        "rc = cli.main(['--state', sys.argv[1], '--json', 'edit', '--git-commit', 'off', '--from', sys.argv[2], sys.argv[3]])\n"
        "print(json.dumps([rc, sorted(m for m in sys.modules if m.startswith('memory_tui.'))]))\n"
    )
    runs = []
    for _ in range(2):  # the first makes the verdict (the full path), the second is answered from it
        time.sleep(0.15)  # the stamps age past the clock tick: younger ones prove nothing
        out = subprocess.run([sys.executable, "-c", code, str(fixture_state), str(topic), rel],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        lines = out.stdout.strip().splitlines()
        runs.append((json.loads("\n".join(lines[:-1])), json.loads(lines[-1])))
    (full, (rc_full, mods_full)), (fast, (rc_fast, mods_fast)) = runs
    assert rc_full == rc_fast == 0 and full == fast and full["changed_files"] == []
    assert "memory_tui.core.tx.prepare" in mods_full  # the control: the full path staged
    staging = {"memory_tui.core.tx.stage", "memory_tui.core.tx.prepare", "memory_tui.core.tx.finish",
               "memory_tui.core.tx.optimistic", "memory_tui.core.store.workspace", "memory_tui.core.store.viewcache",
               "memory_tui.core.format.views", "memory_tui.core.format.topics", "memory_tui.core.format.sources",
               "memory_tui.core.format.normalize", "memory_tui.core.store.parsecache"}
    assert sorted(staging & set(mods_fast)) == []
