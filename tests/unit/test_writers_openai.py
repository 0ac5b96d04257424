"""The OpenAI-compatible writer against a local HTTP server (127.0.0.1 only)."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memory_tui.core.format.errors import classify_write_failure
from memory_tui.pipeline.writers.base import WriterFailure
from memory_tui.pipeline.writers.openai import OpenAIWriter, classify_http, parse_changes
from memory_tui.pipeline.writers.base import Rejected


class Handler(BaseHTTPRequestHandler):
    mode = "ok"
    requests: list = []

    def log_message(self, *a):  # quiet
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.requests.append((self.path, self.headers.get("Authorization"), body))
        mode = Handler.mode
        if mode == "timeout":
            time.sleep(2)
        if mode in ("429", "401", "403", "500", "400ctx"):
            status = int(mode[:3])
            payload = b'{"error": {"message": "This model\'s maximum context length is 128000 tokens"}}' if mode == "400ctx" else b'{"error": {}}'
            self.send_response(status)
            self.end_headers()
            self.wfile.write(payload)
            return
        if mode == "malformed":
            content = b"this is not json {"
        else:
            user = body["messages"][1]["content"]
            refs = re.findall(r'"ref": "([^"]+)"', user)
            changes = {"memory_changes": [{
                "op": "create_record", "content": "The owner is planning home NAS backups.", "time": "2026-11-30",
                "source_refs": refs[:1],
                "destination": {"topic_path": "topics/projects/nas.md", "headings": ["NAS"], "position": "end"},
            }]}
            content = json.dumps({"choices": [{"message": {"content": json.dumps(changes)}}], "usage": {"prompt_tokens": 12, "completion_tokens": 34}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(content)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # The timeout case hangs up on purpose; the server's late write then hits a closed
        # socket. That is the scenario under test, not a failure to report.
        pass


@pytest.fixture
def server():
    srv = QuietServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    Handler.requests = []
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def writer(url: str, timeout: float = 5.0) -> OpenAIWriter:
    return OpenAIWriter(url, "test-model", "TEST_KEY", timeout=timeout, env={"TEST_KEY": "sk-test"})


@pytest.mark.parametrize(
    "mode,code,retry",
    [
        ("429", "MODEL_RATE_LIMIT", True),
        ("401", "MODEL_AUTHENTICATION", False),
        ("403", "MODEL_AUTHORIZATION", False),
        ("500", "MODEL_PROVIDER_INTERNAL", True),
        ("400ctx", "MODEL_CONTEXT_LENGTH", False),
        ("malformed", "MODEL_FAILURE_UNKNOWN", True),
        ("timeout", "MODEL_TIMEOUT", True),
    ],
)
def test_http_failures_map_to_model_codes(server, mode, code, retry):
    Handler.mode = mode
    w = writer(server, timeout=0.5)
    with pytest.raises(WriterFailure) as exc:
        w.complete("s", "u")
    assert (exc.value.code, exc.value.retryable) == (code, retry)
    assert classify_write_failure(exc.value) == (code, retry)


def test_malformed_answer_content_is_a_refusal_for_repair():
    # the HTTP envelope is fine but the model's text is not JSON: refused, repaired once
    with pytest.raises(Rejected):
        parse_changes("this is not json {", set())


def test_connection_refused_is_transport():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(WriterFailure) as exc:
        writer(f"http://127.0.0.1:{port}/v1", timeout=1).complete("s", "u")
    assert exc.value.code == "MODEL_TRANSPORT" and exc.value.retryable


def test_missing_key_is_provider_resolution():
    w = OpenAIWriter("http://127.0.0.1:9/v1", "m", "NO_SUCH_KEY_VAR", env={})
    with pytest.raises(WriterFailure) as exc:
        w.complete("s", "u")
    assert exc.value.code == "MEMORY_PROVIDER_RESOLUTION_FAILED" and not exc.value.retryable


def test_classify_http_table():
    assert classify_http(404, "") == ("MODEL_INVALID_REQUEST", False)
    assert classify_http(400, '{"code": "content_policy_violation"}') == ("MODEL_CONTENT_POLICY", False)
    assert classify_http(408, "") == ("MODEL_TIMEOUT", True)


def test_parse_changes_refuses_foreign_refs():
    with pytest.raises(Rejected):
        parse_changes('{"memory_changes": [{"op": "create_record", "source_refs": ["openprogram/x/y"]}]}', {"openprogram/a/b"})
    assert parse_changes('{"memory_changes": []}', set()) == []


def test_openai_writer_through_the_pipeline(server, fixture_state):
    from memory_tui.core.store.gitlog import fixed_env
    from memory_tui.pipeline.write import Context, write

    Handler.mode = "ok"
    ctx = Context(fixture_state, writer=writer(server), git_env=fixed_env(), clock=lambda: 1796100000.0)
    report = write(ctx, "local_9f1e2d3c4b", force=True)
    assert report.outcome.status == "success", report.to_json()
    assert report.batches[0].changed_topics == ["topics/projects/nas.md"]
    path, auth, body = Handler.requests[0]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test" and body["model"] == "test-model"
    hist = (fixture_state / "memory/.scriptorium/agent-history.jsonl").read_text().splitlines()
    last = json.loads(hist[-1])
    assert last["stage"] == "write" and last["input_tokens"] == 12 and last["output_tokens"] == 34
