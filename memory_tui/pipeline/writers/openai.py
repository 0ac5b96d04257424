"""Writer that asks an OpenAI-compatible chat-completions endpoint for ``memory_changes``.

Request: ``POST {base_url}/chat/completions`` with ``model``, a system and a user message
(memory-tui's own wording), ``response_format: {"type": "json_object"}``. The key is read
from the environment variable named by ``api_key_env`` (never from the config file).
The reply must be a JSON object ``{"memory_changes": [...]}`` using the record ops of
memory spec §6.1; the ops are applied through ``transaction.update`` with the revision
read before the request. Ops may cite only the batch's source ids (checked here, before
the transaction sees them). An empty list means "nothing worth remembering".

Refusals (bad JSON in the model's answer, ops citing other sources, a transaction
rejection) get exactly one repair request carrying the refusal text; a second refusal is
``COMMIT_REJECTED``.

HTTP / transport failures → closed codes with retry verdicts:

====================================  ==========================  =========
condition                             code                        retryable
====================================  ==========================  =========
no key / no model / no base URL       MEMORY_PROVIDER_RESOLUTION_FAILED  no
connection refused, DNS, reset        MODEL_TRANSPORT             yes
socket timeout, HTTP 408              MODEL_TIMEOUT               yes
HTTP 429                              MODEL_RATE_LIMIT            yes
HTTP 401                              MODEL_AUTHENTICATION        no
HTTP 403                              MODEL_AUTHORIZATION         no
HTTP 400/404/413/422 "context length" MODEL_CONTEXT_LENGTH        no
HTTP 400 content policy / filter      MODEL_CONTENT_POLICY        no
other HTTP 4xx                        MODEL_INVALID_REQUEST       no
HTTP 5xx                              MODEL_PROVIDER_INTERNAL     yes
2xx body that is not the expected     MODEL_FAILURE_UNKNOWN       yes
JSON envelope (malformed JSON, no
choices)
====================================  ==========================  =========
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from memory_tui.pipeline.status import history_entry
from memory_tui.pipeline.writers.base import (
    REPAIR_PREFIX,
    FoldCandidate,
    FoldVerdict,
    Rejected,
    TxPort,
    WriterFailure,
    WriterOutcome,
    WriteTask,
    describe_format,
    fold_prompt,
    parse_fold_answer,
    run_with_repair,
    take_commit_audit,
)

NAME = "openai"

FOLD_SYSTEM_PROMPT = (
    "You check a memory organizer's work. You never edit anything: you read pairs of records and "
    "answer with one JSON object naming the pairs that state the same fact."
)

SYSTEM_PROMPT = (
    "You maintain the long-term memory of one person who talks with an AI assistant. "
    "You never edit files directly: you answer with a JSON object {\"memory_changes\": [...]} "
    "listing record operations, and the runtime applies them. Operations:\n"
    '- {"op": "create_record", "content": "<one paragraph, no footnotes, no ids>", '
    '"time": "YYYY-MM-DD" | "YYYY-MM" | "YYYY" | null, "source_refs": ["<ref>", ...], '
    '"destination": {"topic_path": "topics/<subject>.md", "headings": ["<Title>", "<Section>"], "position": "end"}}\n'
    '- {"op": "update_record", "memory_id": "<id>", "content": "...", "time": ..., "source_refs": [...]}\n'
    '- {"op": "delete_record", "memory_id": "<id>"}\n'
    "Record preferences, decisions, plans and facts about people and projects; skip greetings, "
    "questions and small talk. Cite only refs from the turns you are given. "
    "Answer {\"memory_changes\": []} when nothing is worth keeping.\n\n" + describe_format()
)

_CONTEXT_HINTS = ("context_length", "context length", "maximum context", "too many tokens", "context window")
_POLICY_HINTS = ("content_policy", "content policy", "content_filter", "safety system", "flagged")


def classify_http(status: int, body: str) -> tuple[str, bool]:
    low = body.lower()
    if status == 429:
        return "MODEL_RATE_LIMIT", True
    if status == 408:
        return "MODEL_TIMEOUT", True
    if status == 401:
        return "MODEL_AUTHENTICATION", False
    if status == 403:
        return "MODEL_AUTHORIZATION", False
    if status >= 500:
        return "MODEL_PROVIDER_INTERNAL", True
    if any(h in low for h in _CONTEXT_HINTS):
        return "MODEL_CONTEXT_LENGTH", False
    if any(h in low for h in _POLICY_HINTS):
        return "MODEL_CONTENT_POLICY", False
    if 400 <= status < 500:
        return "MODEL_INVALID_REQUEST", False
    return "MODEL_FAILURE_UNKNOWN", False


def build_user_prompt(task: WriteTask, topics: Mapping[str, str], rejection: str | None) -> str:
    parts: list[str] = []
    if rejection:
        parts += [f"{REPAIR_PREFIX} {rejection}", "Answer again with corrected memory_changes.", ""]
    parts.append("Current topic files (ids after ^ are memory_ids):")
    for path in sorted(topics):
        parts += [f"--- {path}", topics[path].rstrip("\n")]
    parts += ["", f"New conversation turns (observed {task.observed}):"]
    for t in task.turns:
        obj = {"ref": t.source_id, "time": t.timestamp or "undated", "speaker": t.speaker, "text": t.text}
        if t.clipped_from:  # the writer sees that it has the start of the turn only
            obj["shown"] = f"the first {t.tokens} of {t.clipped_from} tokens; the whole turn is archived under this ref"
        parts.append(json.dumps(obj, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    if task.topic:
        parts += ["", f"Put new records in {task.topic}."]
    return "\n".join(parts)


def parse_changes(content: str, allowed: set[str]) -> list[dict[str, Any]]:
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`")
        if text.startswith("json"):
            text = text[4:]
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise Rejected(f"the answer is not valid JSON: {exc}", "INVALID_ARGUMENT") from None
    if not isinstance(data, dict) or not isinstance(data.get("memory_changes"), list):
        raise Rejected('the answer must be a JSON object with a "memory_changes" list', "INVALID_ARGUMENT")
    ops = data["memory_changes"]
    for i, op in enumerate(ops):
        if not isinstance(op, dict):
            raise Rejected(f"memory_changes[{i}] is not an object", "INVALID_ARGUMENT")
        refs = list(op.get("source_refs") or [])
        refs += [s.get("source") for s in op.get("sources") or [] if isinstance(s, dict)]
        for ref in refs:
            if ref not in allowed:
                raise Rejected(f"memory_changes[{i}] cites {ref!r}, which is not one of this batch's refs", "INVALID_ARGUMENT")
    return ops


MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # far above any completion; an endless body is refused, not buffered


def _read_bounded(resp: Any, timeout: float) -> bytes:
    """The body, refused past ``MAX_RESPONSE_BYTES`` and past an overall deadline: the socket
    timeout alone lets a server that trickles a byte at a time hold the writer forever."""
    deadline = time.monotonic() + max(1.0, timeout) * 2
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = resp.read(64 * 1024)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise WriterFailure("MODEL_FAILURE_UNKNOWN", f"the model endpoint sent more than {MAX_RESPONSE_BYTES} bytes",
                                retryable=True)
        if time.monotonic() > deadline:
            raise WriterFailure("MODEL_TIMEOUT", f"the answer did not finish within {2 * max(1.0, timeout):g} s",
                                retryable=True)
        chunks.append(chunk)


@dataclass
class OpenAIWriter:
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 120.0
    max_tokens: int = 4096
    env: Mapping[str, str] | None = None
    name: str = NAME
    history: list[dict[str, Any]] = field(default_factory=list)

    def _key(self) -> str:
        env = os.environ if self.env is None else self.env
        key = (env.get(self.api_key_env) or "").strip()
        if not key:
            raise WriterFailure("MEMORY_PROVIDER_RESOLUTION_FAILED", f"environment variable {self.api_key_env} is not set")
        return key

    def complete(self, system: str, user: str) -> tuple[str, dict[str, Any]]:
        if not self.base_url or not self.model:
            raise WriterFailure("MEMORY_PROVIDER_RESOLUTION_FAILED", "[writer] base_url and model are required for the openai writer")
        body = json.dumps(
            {
                "model": self.model,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                "response_format": {"type": "json_object"},
                "max_tokens": self.max_tokens,
                "temperature": 0,
            }
        ).encode("utf-8")
        req = urllib.request.Request(
            self.base_url.rstrip("/") + "/chat/completions",
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._key()}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = _read_bounded(resp, self.timeout)
        except urllib.error.HTTPError as exc:
            try:
                detail = exc.read(64 * 1024).decode("utf-8", "replace")
            except Exception:  # pragma: no cover - broken socket while reading the error
                detail = ""
            code, retry = classify_http(exc.code, detail)
            after = (exc.headers.get("Retry-After") or "").strip() if exc.headers is not None else ""
            wait = f" (Retry-After: {after[:40]})" if after else ""
            raise WriterFailure(code, f"HTTP {exc.code} from the model endpoint{wait}: {detail[:300]}", retryable=retry) from None
        except (socket.timeout, TimeoutError):
            raise WriterFailure("MODEL_TIMEOUT", f"no answer within {self.timeout:g} s", retryable=True) from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (socket.timeout, TimeoutError)):
                raise WriterFailure("MODEL_TIMEOUT", f"no answer within {self.timeout:g} s", retryable=True) from None
            raise WriterFailure("MODEL_TRANSPORT", f"cannot reach the model endpoint: {exc.reason}", retryable=True) from None
        except (ConnectionError, OSError) as exc:
            raise WriterFailure("MODEL_TRANSPORT", f"connection to the model endpoint failed: {exc}", retryable=True) from None
        try:
            data = json.loads(raw.decode("utf-8"))
            message = data["choices"][0]["message"]["content"]
            refusal = data["choices"][0]["message"].get("refusal")
            if message is None and isinstance(refusal, str) and refusal:
                raise WriterFailure("MODEL_CONTENT_POLICY", f"the model refused: {refusal[:300]}", retryable=False)
            if not isinstance(message, str):
                raise TypeError("content is not a string")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise WriterFailure("MODEL_FAILURE_UNKNOWN", f"the model endpoint sent an unreadable answer: {exc}", retryable=True) from None
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return message, usage

    def write(self, task: WriteTask, tx: TxPort) -> WriterOutcome:
        self.history = []
        allowed = set(task.allowed_refs)

        def attempt(rejection: str | None) -> WriterOutcome:
            stage_label = task.stage if rejection is None else f"{task.stage}-repair"
            base = tx.revision()
            user = build_user_prompt(task, tx.topic_texts(), rejection)
            reply, usage = self.complete(SYSTEM_PROMPT, user)
            try:
                ops = parse_changes(reply, allowed)
                if not ops:
                    info = None
                else:
                    info = tx.update(base, ops)
            except Exception as exc:
                self.history.append(history_entry(stage_label, SYSTEM_PROMPT, user, error=f"{type(exc).__name__}: {exc}", turns=take_commit_audit(tx)))
                raise
            self.history.append(
                history_entry(
                    stage_label,
                    SYSTEM_PROMPT,
                    user,
                    reply=reply,
                    input_tokens=int(usage.get("prompt_tokens") or 0),
                    output_tokens=int(usage.get("completion_tokens") or 0),
                    turns=take_commit_audit(tx),
                )
            )
            if info is None:
                return WriterOutcome((), None, [], "nothing to record")
            return WriterOutcome(info.changed_topics, info.revision, [], f"{len(ops)} change(s)", len(ops))

        outcome = run_with_repair(attempt)
        outcome.history = list(self.history)
        return outcome

    def confirm_folds(self, candidates: Sequence[FoldCandidate], memory_root: Path) -> FoldVerdict:
        """Ask the endpoint which fold candidates state the same fact (``base.fold_prompt``);
        a failed call or an unreadable answer folds nothing."""
        user = fold_prompt(candidates)
        try:
            reply, usage = self.complete(FOLD_SYSTEM_PROMPT, user)
        except WriterFailure as exc:
            return FoldVerdict(frozenset(), [history_entry("fold", FOLD_SYSTEM_PROMPT, user, error=f"{exc.code}: {exc.message}")])
        entry = history_entry("fold", FOLD_SYSTEM_PROMPT, user, reply=reply, input_tokens=int(usage.get("prompt_tokens") or 0),
                              output_tokens=int(usage.get("completion_tokens") or 0))
        # the endpoint answers one JSON object (response_format): the same shape on one line
        return FoldVerdict(parse_fold_answer(" ".join(reply.split()), candidates), [entry])


def writer_from_settings(settings: Any) -> OpenAIWriter:
    return OpenAIWriter(settings.base_url, settings.model, settings.api_key_env, float(settings.timeout), int(settings.max_tokens))
