"""Writer faults (issue 14): each a MODEL_* code with its retry verdict, no marks, no hang; the
command writer's child is killed with its whole process group. 127.0.0.1 only."""

from __future__ import annotations

import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memory_tui.core.store.gitlog import fixed_env
from memory_tui.pipeline.write import Context, write
from memory_tui.pipeline.writers.base import WriterFailure
from memory_tui.pipeline.writers.openai import MAX_RESPONSE_BYTES, OpenAIWriter

from rel_support import node_marks
from switching import set_derive

SID = "local_9f1e2d3c4b"


class Faulty(BaseHTTPRequestHandler):
    mode = "429"

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        if Faulty.mode == "429":
            self.send_response(429)
            self.send_header("Retry-After", "17")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "slow down"}}')
        elif Faulty.mode == "oversized":
            self.send_response(200)
            self.end_headers()
            chunk = b" " * (1024 * 1024)
            try:
                for _ in range(MAX_RESPONSE_BYTES // len(chunk) + 4):
                    self.wfile.write(chunk)
            except OSError:
                pass
        elif Faulty.mode == "refusal":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"choices": [{"message": {"content": null, "refusal": "I cannot help with that."}}]}')


class Quiet(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass


@pytest.fixture
def url():
    srv = Quiet(("127.0.0.1", 0), Faulty)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("mode,code,retry", [("429", "MODEL_RATE_LIMIT", True), ("oversized", "MODEL_FAILURE_UNKNOWN", True),
                                             ("refusal", "MODEL_CONTENT_POLICY", False)])
def test_openai_faults_map_to_codes_and_mark_nothing(url, fixture_state, mode, code, retry):
    Faulty.mode = mode
    w = OpenAIWriter(url, "m", "K", timeout=5.0, env={"K": "sk"})
    with pytest.raises(WriterFailure) as exc:
        w.complete("s", "u")
    assert (exc.value.code, exc.value.retryable) == (code, retry)
    if mode == "429":
        assert "Retry-After: 17" in str(exc.value)
    before = node_marks(fixture_state)
    report = write(Context(fixture_state, writer=w, git_env=fixed_env(), clock=lambda: 1796100000.0), SID, force=True)
    assert report.outcome.status != "success" and report.outcome.code == code, report.to_json()
    assert node_marks(fixture_state) == before


def test_command_writer_hanging_child_is_killed_with_its_group(fixture_state, tmp_path):
    from memory_tui.pipeline.writers.command import CommandWriter

    pidfile = tmp_path / "grandchild.pid"
    agent = tmp_path / "hang.py"
    agent.write_text(
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(120)\n")
    before = node_marks(fixture_state)
    report = write(Context(fixture_state, writer=CommandWriter((sys.executable, str(agent)), timeout=1.5),
                           git_env=fixed_env(), clock=lambda: 1796100000.0), SID, force=True)
    assert report.outcome.code == "MODEL_TIMEOUT" and report.outcome.status == "retryable", report.to_json()
    assert node_marks(fixture_state) == before
    gpid = int(pidfile.read_text())
    for _ in range(100):  # reaped by init once killed; give the kernel a moment
        try:
            os.kill(gpid, 0)
        except ProcessLookupError:
            break
        if open(f"/proc/{gpid}/stat").read().split()[2] == "Z":
            break
        time.sleep(0.05)
    else:
        pytest.fail("the grandchild survived its writer's timeout")


def test_command_writer_nonzero_exit_marks_nothing(fixture_state, tmp_path):
    from memory_tui.pipeline.writers.command import CommandWriter

    bad = tmp_path / "bad.py"
    bad.write_text("import os\nopen('topics/x.md', 'w').write('# X\\n')\nraise SystemExit(5)\n")
    before = node_marks(fixture_state)
    report = write(Context(fixture_state, writer=CommandWriter((sys.executable, str(bad))), git_env=fixed_env(),
                           clock=lambda: 1796100000.0), SID, force=True)
    assert report.outcome.code == "MODEL_FAILURE_UNKNOWN" and node_marks(fixture_state) == before
    assert not (fixture_state / "memory/topics/x.md").exists()


ESCAPES = {
    "none": "",  # the control: the same child, confined, is installed
    "real-topics": "open(os.path.join(stage, '..', '..', 'topics', 'planted.md'), 'w').write('# Planted\\n')\n",
    "stage-sibling": "open(os.path.join(stage, '..', 'escape.txt'), 'w').write('x')\n",
    "git-config": "open(os.path.join(stage, '..', '..', '.git', 'config'), 'a').write('[core]\\n\\thooksPath = /tmp\\n')\n",
    "archive": "open(glob.glob(os.path.join(stage, '..', '..', 'sources', 'openprogram', '_v2', '*.md'))[0], 'a').write('x')\n",
}


@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_command_writer_writing_outside_its_stage_is_refused(fixture_state, tmp_path, escape):
    from memory_tui.pipeline.writers.command import CommandWriter

    agent = tmp_path / "agent.py"
    agent.write_text(
        "import glob, os\n"
        "stage = os.environ['MEMORY_TUI_STAGE']\n"
        "ref = os.environ['MEMORY_TUI_ALLOWED_REFS'].splitlines()[0]\n"
        "open(os.path.join(stage, 'topics', 'confined.md'), 'w').write("
        "'# Confined\\n\\nThe user asked about tea.[^e1]\\n\\n[^e1]: Time: `2026-11-30`; Sources: [s](' + ref + ')\\n')\n"
        + ESCAPES[escape])
    mem = fixture_state / "memory"
    assert (mem / ".git" / "config").exists(), "the fixture's memory has its git history: the write under test commits to it"
    before = node_marks(fixture_state)
    report = write(Context(fixture_state, writer=CommandWriter((sys.executable, str(agent))), git_env=fixed_env(),
                           clock=lambda: 1796100000.0), SID, force=True)
    if escape == "none":
        assert report.outcome.status == "success", report.to_json()
        assert (mem / "topics/confined.md").is_file() and node_marks(fixture_state) != before
        return
    assert report.outcome.code == "PATH_OUTSIDE_WORKSPACE" and report.outcome.status != "success", report.to_json()
    assert "outside its stage" in report.outcome.message, report.to_json()
    assert not (mem / "topics/confined.md").exists()  # the stage was not installed
    assert node_marks(fixture_state) == before


def test_a_command_writer_checks_its_work_with_memory_tui_inside_its_stage(fixture_state, tmp_path, monkeypatch):
    """A writer command that checks its own work with memory-tui, from inside the stage it is
    handed and with the environment the writer protocol gives it (``MEMORY_TUI_STAGE``, the
    stage path; ``MEMORY_TUI_STAGE_KIND``; ``MEMORY_TUI_ALLOWED_REFS``): that memory-tui reads
    none of them as a switch of its own, and the test switch it inherits works as in any
    process. The outer write then installs what the writer wrote."""
    import json

    from memory_tui.pipeline.writers.command import CommandWriter

    set_derive(monkeypatch, "check")  # inherited by the writer and the memory-tui it runs
    log = tmp_path / "inner.json"
    draft = tmp_path / "draft.md"  # a broken draft, kept outside the workspace
    draft.write_text("# Draft\n\nNo definition for this one.[^e1]\n")
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import json, os, subprocess, sys\n"
        "stage = os.environ['MEMORY_TUI_STAGE']\n"
        "assert os.path.realpath(os.getcwd()) == os.path.realpath(stage), (os.getcwd(), stage)\n"
        "assert os.environ['MEMORY_TUI_STAGE_KIND'] == 'write'\n"
        "ref = os.environ['MEMORY_TUI_ALLOWED_REFS'].splitlines()[0]\n"
        "open(os.path.join('topics', 'checked.md'), 'w').write('# Checked\\n\\nThe user asked about tea.[^e1]\\n\\n"
        "[^e1]: Time: `2026-11-30`; Sources: [s](' + ref + ')\\n')\n"
        f"state = {str(fixture_state)!r}\n"
        "runs = []\n"
        "for argv in (['status', '--state', state],\n"
        "             ['edit', 'topics/checked.md', '--from', 'topics/checked.md', '--create', '--check', '--state', state],\n"
        f"             ['edit', 'topics/draft.md', '--from', {str(draft)!r}, '--create', '--check', '--state', state]):\n"
        "    r = subprocess.run([sys.executable, '-m', 'memory_tui', *argv], capture_output=True, text=True,\n"
        "                       stdin=subprocess.DEVNULL, timeout=120)\n"
        "    runs.append([argv[0], r.returncode, r.stdout, r.stderr])\n"
        f"open({str(log)!r}, 'w').write(json.dumps(runs))\n")
    mem = fixture_state / "memory"
    report = write(Context(fixture_state, writer=CommandWriter((sys.executable, str(agent))), git_env=fixed_env(),
                           clock=lambda: 1796100000.0), SID, force=True)
    runs = json.loads(log.read_text())
    assert report.outcome.status == "success", (report.to_json(), runs)
    assert "The user asked about tea." in (mem / "topics/checked.md").read_text()
    (status, status_rc, status_out, status_err), (ok, ok_rc, ok_out, ok_err), (bad, bad_rc, bad_out, bad_err) = runs
    assert (status, status_rc, status_err) == ("status", 0, ""), runs
    assert f"state      {fixture_state}" in status_out and "4 topics" in status_out, status_out
    assert (ok, ok_rc, ok_out.strip(), ok_err) == ("edit", 0, "valid", ""), runs  # the writer's own file, as staged
    assert (bad, bad_rc) == ("edit", 1), runs
    assert "topics/draft.md:3:" in bad_out + bad_err and "undefined footnote: e1" in bad_out + bad_err, runs
