"""Why a change was refused, in the owner's terms, and what to do about it.

The core's codes and messages are OpenProgram's, kept byte for byte so that scripts
comparing the two keep working (``dangling block link: fa3c8017``, ``content must be one
final paragraph without Runtime IDs``). They say which check failed, not what the owner did
or how to put it right, and a code such as ``INVALID_TOPIC_FORMAT`` covers a refused delete
of a linked record as well as a typo in a footnote. This is the one place that turns a
refusal into a heading (what was wrong with what the owner asked), a fix and the format rule
it broke: the app's dialogs, its editor and the CLI's verbs all print these, so the two
never explain the same refusal differently. Codes and messages are left as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from memory_tui.core.changes.request import _FENCE_OR_HTML_RE, _TRAILING_ID_RE, CONTENT_RULE
from memory_tui.core.format.outcomes import describe_outcome
from memory_tui.core.format.rules import rule_of

_DANGLING = re.compile(r"dangling block link: (?P<id>[A-Za-z0-9_-]+)")
_DROPPED_ID = re.compile(r"block ID must not be removed\W*(?P<id>[A-Za-z0-9_-]+)?")
_CITATION = re.compile(r"\[\^[^\]\s]*\]?")
_ONE_PARAGRAPH = "§3.2 record: a record's text is one paragraph of prose; its citations and ^id are written for it"


@dataclass(frozen=True)
class Refusal:
    """One refusal explained: ``heading`` (what was wrong, one line), ``fix`` (what to do),
    ``rule`` (the format rule, when one applies), beside the core's own ``code``."""

    code: str
    heading: str
    fix: str
    rule: str | None = None

    def lines(self) -> list[str]:
        out = [self.heading, f"fix: {self.fix}"]
        if self.rule:
            out.append(f"rule: {self.rule}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "heading": self.heading, "fix": self.fix, "rule": self.rule}


def content_problems(text: str) -> list[tuple[str, str]]:
    """Why ``text`` is not one plain paragraph, each as ``(what is wrong, how to fix it)``, in
    the order the owner reads the text. The same checks as the core's content rule."""
    out: list[tuple[str, str]] = []
    lines = text.strip().split("\n")
    for m in dict.fromkeys(_CITATION.findall(text)):
        out.append((f"it contains the citation {m}: citations are written from the record's sources, never typed",
                    f"remove {m}; the record keeps its sources and their labels"))
    trailing = _TRAILING_ID_RE.search(text.strip())
    if trailing:
        mark = trailing.group(0).strip()
        out.append((f"it ends in {mark}, a block id", f"remove {mark}; the record keeps its own id"))
    for n, line in enumerate(lines, 1):
        if not line.strip():
            out.append((f"line {n} is blank, which would split it into two paragraphs",
                        "join the lines into one paragraph (or add the rest as a record of its own)"))
            break
    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith("#"):
            out.append((f"line {n} starts with #, which reads as a heading", f"reword line {n} so it does not start with #"))
    for n, line in enumerate(lines, 1):
        if _FENCE_OR_HTML_RE.match(line):
            out.append((f"line {n} opens a code fence or an HTML block, which would not stay one paragraph",
                        f"write line {n} as plain text"))
    if "\r" in text:
        out.append(("it contains a carriage return (\\r)", "use plain line breaks"))
    return out


def explain_refusal(code: str | None, message: str = "", *, action: str | None = None, target: str | None = None,
                    text: str | None = None, linked_by: Iterable[Any] = ()) -> Refusal:
    """The refusal of ``action`` (move, update, delete, delete-topic, edit, apply, revert) on
    ``target``: ``text`` is the record text an update sent, ``linked_by`` the records that
    link to a record a delete was refused for."""
    code = code or "TRANSACTION_FAILURE_UNKNOWN"
    message = message or ""
    links = list(linked_by)
    rule = rule_of(message)
    name = f"^{target}" if target and action in ("move", "update", "delete", "revert") else (target or "")

    dangling = _DANGLING.search(message)
    if dangling:
        bid = dangling.group("id")
        who = f"{len(links)} record(s) link to it" if links else "another record links to it"
        if action == "delete":
            return Refusal(code, f"^{bid} cannot be deleted: {who} (#^{bid})",
                           f"remove or retarget the #^{bid} link in each record listed, then delete ^{bid} again", rule)
        if action == "delete-topic":
            return Refusal(code, f"{target or 'the topic'} cannot be deleted: records elsewhere link to ^{bid} in it",
                           f"remove or retarget the #^{bid} links listed (or move ^{bid} to another topic first), "
                           "then delete the topic", rule)
        if action == "revert":
            return Refusal(code, f"the revert would drop ^{bid}, which another record links to",
                           f"remove or retarget the #^{bid} link first, or revert to a version that keeps ^{bid}", rule)
        return Refusal(code, f"a link points at ^{bid}, which no record carries after this change",
                       f"keep the record ^{bid}, or remove or retarget every #^{bid} link", rule)

    if CONTENT_RULE in message:
        found = content_problems(text) if text is not None else []
        if found:
            what = "; ".join(w for w, _ in found)
            fix = "; ".join(dict.fromkeys(f for _, f in found))
            return Refusal(code, f"the new text of {name or 'the record'} is not one plain paragraph: {what}", fix,
                           _ONE_PARAGRAPH)
        return Refusal(code, "a record's text must be one plain paragraph, without citations ([^…]), a trailing ^id, "
                             "blank lines, headings, code fences or HTML",
                       "write the text as one paragraph of prose; its sources and id are kept for it", _ONE_PARAGRAPH)

    dropped = _DROPPED_ID.search(message)
    if dropped:
        bid = dropped.group("id")
        mark = f"^{bid}" if bid else "a block id"
        return Refusal(code, f"the edit removes {mark}, which a committed record carries",
                       f"put {mark} back at the end of its paragraph; to remove the record, delete it "
                       f"(d in the app, memory-tui record delete {bid or 'ID'})", rule)

    if message.startswith("memory block ID required"):
        return Refusal(code, "a paragraph is prose without a citation and a ^id (uncited prose, which OpenProgram would drop)",
                       "make it a record (text, a citation [^e-…] with its definition, then ^id) or remove the paragraph",
                       rule)
    undefined = re.match(r"undefined footnote: (?P<id>\S+)", message)
    if undefined:
        fid = undefined.group("id")
        return Refusal(code, f"the citation [^{fid}] has no definition in this file",
                       f"add its definition below the paragraph ([^{fid}]: Time: `YYYY-MM-DD`; Sources: [label](target)) "
                       f"or remove [^{fid}]", rule)
    if message.startswith("unused footnote definition"):
        return Refusal(code, f"{message}: a definition no record of the file cites",
                       "remove the definition, or cite it from the record it belongs to", rule)
    if code == "CONCURRENT_UPDATE":
        return Refusal(code, "the workspace changed since it was read (another write landed first, or holds the lock)",
                       "nothing was changed: read it again and retry on the new revision", rule)
    if code == "MEMORY_NOT_FOUND":
        return Refusal(code, message or "no such record or topic",
                       "check the id or path (memory-tui topics lists the topics, memory-tui show TOPIC their records)", rule)
    if rule is not None:
        return Refusal(code, f"the text breaks a rule of the topic format: {message}",
                       "change the text where the message points so that it follows the rule, and save again", rule)
    meaning = describe_outcome(code).meaning
    heading = meaning.rstrip(".") if not message else f"{meaning.rstrip('.')}: {message}"
    fix = "try again" if describe_outcome(code).retryable else "correct what the message names and try again"
    return Refusal(code, heading, fix, None)


__all__ = ["Refusal", "content_problems", "explain_refusal"]
