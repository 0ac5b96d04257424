"""Terminal safety (issue 14): every class of hostile sequence is inert on every CLI text surface
and escaped (never raw) in --json; the app's view models carry no raw sequence either."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_tui.cli import main
from memory_tui.core.format.text import json_safe, sanitize

from rel_support import make_state

PAYLOADS = {
    "csi-clear": "\x1b[2J\x1b[H",
    "osc52-clipboard": "\x1b]52;c;ZXZpbCBwYXlsb2Fk\x07",
    "osc8-link": "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "title-change": "\x1b]0;pwned\x07",
    "c0": "a\x07b\x08c\rd\x0ee",
    "c1": "a\x9b2Jb\x9d0;t\x9cc\x85d",
    "bidi": "safe\u202eexe.txt\u2066x\u2069",
    "line-sep": "one\u2028two\u2029three",
    "zero-width": "ad\u200bmin\ufeff",
    "del": "x\x7fy",
}

# What a terminal acts on: none of it may reach stdout raw.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u202a-\u202e\u2028\u2029\u2060\u2066-\u2069\ufeff]")


def _clean_text(s: str) -> bool:
    return RAW.search(s) is None


@pytest.mark.parametrize("cls", sorted(PAYLOADS))
def test_sanitize_makes_each_class_inert(cls):
    out = sanitize(PAYLOADS[cls])
    assert _clean_text(out), repr(out)


@pytest.mark.parametrize("cls", sorted(PAYLOADS))
def test_json_safe_escapes_each_class_and_round_trips(cls):
    value = {"v": PAYLOADS[cls]}
    dumped = json_safe(json.dumps(value, ensure_ascii=False))
    assert _clean_text(dumped), repr(dumped)
    assert json.loads(dumped) == value


def _status(capsys, state, *extra):
    code = main(["--state", str(state), *extra, "status"] if not extra else ["--state", str(state), "status", *extra])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("cls", sorted(PAYLOADS))
def test_config_values_in_status_text_and_json(tmp_path, capsys, cls):
    state = make_state(tmp_path)
    (state / "config.json").write_text(json.dumps({"memory": {"backend": "local" + PAYLOADS[cls],
                                                              "writer": {"model": PAYLOADS[cls]}}}), encoding="utf-8")
    code, out, err = _status(capsys, state)
    assert code == 0 and "config" in out
    assert _clean_text(out) and _clean_text(err), repr(out)
    code, out, err = _status(capsys, state, "--json")
    assert code == 0 and _clean_text(out), repr(out)
    assert json.loads(out)["config"]["writer_model"] == PAYLOADS[cls]  # escaped, not altered


@pytest.mark.parametrize("cls", sorted(PAYLOADS))
def test_topic_file_names_in_topics_and_status(tmp_path, capsys, cls):
    state = make_state(tmp_path)
    name = "n" + PAYLOADS[cls].replace("/", "") + ".md"
    (state / "memory" / "topics" / name).write_text("# Broken\n\nuncited prose\n", encoding="utf-8")
    for argv in (["topics"], ["status"], ["topics", "--json"]):
        code = main(["--state", str(state), *argv])
        out, err = capsys.readouterr()
        assert code in (0, 1)
        assert _clean_text(out) and _clean_text(err), (argv, repr(out[:2000]))


@pytest.mark.parametrize("cls", sorted(PAYLOADS))
def test_error_messages_quoting_hostile_text(tmp_path, capsys, cls):
    state = make_state(tmp_path)
    src = tmp_path / "bad.md"
    src.write_text("# T\n\nuncited " + PAYLOADS[cls] + "\n", encoding="utf-8")
    for extra in ([], ["--json"]):
        code = main(["--state", str(state), *extra, "edit", "people/" + PAYLOADS[cls].replace("/", "") + ".md",
                     "--from", str(src), "--check"])
        out, err = capsys.readouterr()
        assert code != 0
        assert _clean_text(out) and _clean_text(err), repr(out + err)


@pytest.mark.parametrize("cls", sorted(PAYLOADS))
def test_app_view_models_carry_no_raw_sequence(tmp_path, cls):
    from memory_tui.tui.model.load import load_model

    state = make_state(tmp_path)
    name = "n" + PAYLOADS[cls].replace("/", "") + ".md"
    (state / "memory" / "topics" / name).write_text("# Title " + PAYLOADS[cls] + "\n\nprose " + PAYLOADS[cls] + "\n",
                                                       encoding="utf-8")
    model = load_model(state)
    assert len(model.topics) >= 2
    for vm in model.topics:  # tree labels and the detail title come from path and title
        for text in (vm.path, vm.title, *(p.message for p in vm.problems), *(p.message for p in vm.warnings), vm.raw):
            assert _clean_text(text), repr(text)


def _sanitize_every_pass(text: str) -> str:
    """``sanitize`` without its fast path: every pass run whatever the text holds."""
    from memory_tui.core.format import text as mod

    if not text:
        return text
    text = mod._ESCAPES.sub("", text)
    text = mod._CONTROLS.sub("", text.replace("\r\n", "\n"))
    text = mod._LINE_BREAKS.sub("\n", text)
    return mod._INVISIBLE.sub("", text)


_NEAR = "".join(PAYLOADS.values()) + "\r\n\t ab\u00e9\u200c\u200d\u4e2d\U0001f600\\[]"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(_NEAR), max_size=40) | st.text(max_size=40))
def test_the_fast_path_answers_as_every_pass_would(text):
    """Text holding none of the characters the passes act on is returned by one scan: for any
    text, the answer is the one every pass gives, and a text left alone is clean."""
    got = sanitize(text)
    assert got == _sanitize_every_pass(text)
    assert _clean_text(got)
