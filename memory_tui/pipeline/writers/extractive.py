"""The embedded default writer: offline, deterministic, no model.

It keeps what a person would want remembered and drops the rest. Rules (simple on purpose):

1. **Sentences.** Each turn's text is split into sentences (on ``.``, ``!``, ``?`` and line
   breaks); code fences and markdown links are flattened, whitespace is collapsed.
2. **Dropped**: questions (ending ``?``), greetings and chit-chat (``hi``, ``thanks``,
   ``ok``, ``sure``, …), fragments under four words.
3. **Kept** from the person's turns (``user`` role): an explicit decision (``decided``,
   ``agreed``, ``settled on``, ``chose``, ``going with``) is a *decision*; otherwise the first class that matches:
   *preference* (``I prefer``, ``I like``, ``I love``, ``I hate``, ``always``, ``never``,
   ``favourite``…), *decision* (``decided``, ``let's``, ``we will``, ``I'll``, ``going
   with``, ``agreed``…), *plan* (``plan``, ``going to``, ``tomorrow``, ``next week``,
   ``deadline``, ``trip``…), *fact* (``I am``, ``my name is``, ``I live``, ``I work``,
   ``my <relation>``, ``is called``, ``works at``…).
4. **Kept** from assistant turns: decisions and confirmations only (``decided``,
   ``confirmed``, ``booked``, ``scheduled``, ``noted``, ``will``…). Such a record cites the
   assistant turn and the person's turn just before it, which is what it confirms.
5. **Fallback** so a batch is never silently ignored: when no sentence qualifies, the
   person's most substantive statement is kept (as a *note*), or, if they only asked
   questions, their longest question is kept as *asked*.
6. **Records.** One paragraph per kept sentence: ``<Name> said: “…”`` (``<Name>`` is a
   name the person gave in the batch — ``I'm Ada`` — else their speaker display, else
   ``The owner``); assistant records read ``The assistant confirmed: “…”``. Each cites
   footnote ``e<n>`` whose definition carries ``Time:`` = the turn's date and ``Sources:``
   = the plain source ids of the turns it rests on.
7. **Where.** The configured topic (``[writer] topic``) if set; otherwise
   ``topics/conversations/<slug of the session title>.md`` (slug = lowercase ASCII words
   joined by ``-``, at most 60 characters; the session id when the title gives nothing).
   The file starts with ``# <title>`` and holds one ``## <Class>`` section per class
   (Preferences, Decisions, Plans, Facts, Notes, Questions asked); a new record goes to
   the end of its section.
8. **Repeats.** A sentence whose text is already a record in that file is not added again:
   if the record already cites one of the same turns nothing changes; otherwise the new
   turn is added as further evidence of the existing record.

A rejected commit gets one repair attempt in *safe mode*: only new records, no evidence
added to existing paragraphs, text restricted to plain characters.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_tui.pipeline.writers.base import (
    Rejected,
    Turn,
    TxPort,
    WriterOutcome,
    WriteTask,
    run_with_repair,
    take_commit_audit,
)
from memory_tui.pipeline.status import history_entry

NAME = "extractive"
SYSTEM_NOTE = "memory-tui extractive writer (embedded, deterministic, no model)"

CLASS_HEADINGS = {
    "preference": "Preferences",
    "decision": "Decisions",
    "plan": "Plans",
    "fact": "Facts",
    "note": "Notes",
    "asked": "Questions asked",
}
CLASS_ORDER = tuple(CLASS_HEADINGS)

_W = r"(?<![A-Za-z])"
PREFERENCE = re.compile(
    _W + r"(?:i\s+(?:really\s+|much\s+|strongly\s+)?(?:prefer|like|love|hate|dislike|enjoy|avoid|can't stand|cannot stand|don't like|do not like|don't want|do not want|want)|"
    r"always|never|favou?rite|rather than|instead of|over coffee|i'm allergic|i am allergic)(?![A-Za-z])",
    re.I,
)
DECISION = re.compile(
    _W + r"(?:decided|decide|let's|let us|we will|we'll|i will|i'll|going with|go with|chose|choose|settled on|agreed|we're using|we are using|switch(?:ed)? to)(?![A-Za-z])",
    re.I,
)
PLAN = re.compile(
    _W + r"(?:plan|plans|planning|going to|tomorrow|next (?:week|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"deadline|due|schedule[d]?|trip|travel(?:l?ing)?|visit(?:ing)?|meeting|launch|release|book(?:ing)?)(?![A-Za-z])",
    re.I,
)
FACT = re.compile(
    _W + r"(?:i am|i'm|my name is|call me|i live|i work|i've been|i have|i own|my (?:wife|husband|partner|son|daughter|kids?|children|mother|father|mum|mom|dad|brother|sister|team|boss|manager|friend|dog|cat|project|company|job|birthday)|"
    r"our (?:project|team|company|repo|product)|is called|works at|works on|lives in|was born|born in|uses|is written in|we use)(?![A-Za-z])",
    re.I,
)
# An explicit decision outranks the preference words it often contains ("we decided to take
# the express instead of a taxi" is a decision, not a taste).
EXPLICIT_DECISION = re.compile(
    _W + r"(?:decided|agreed|settled on|chose|going with|we'll go with|let's go with)(?![A-Za-z])",
    re.I,
)
CONFIRM = re.compile(
    _W + r"(?:decided|confirmed|booked|scheduled|noted|will|agreed|saved|settled|reserved|set up|chosen|going with|plan is)(?![A-Za-z])",
    re.I,
)
CHITCHAT = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|thx|ok|okay|sure|great|cool|nice|bye|goodbye|good (?:morning|night|evening|afternoon)|"
    r"yes|no|yep|nope|sounds good|got it|perfect|awesome|welcome|you're welcome|np|lol)\b[\s,!.]*",
    re.I,
)
NAME_RE = re.compile(r"(?:\bI'm|\bI am|\bmy name is|\bcall me)\s+([A-Z][a-z]{1,30})\b")
_NOT_NAMES = {"Not", "So", "Very", "Just", "Going", "Here", "Sure", "Happy", "Glad", "Sorry", "Back", "Done", "The", "A", "In", "At", "On", "Working", "Trying", "Looking", "Planning", "Thinking"}

_SPLIT = re.compile(r"(?<=[.!?…])[\"”')\]]*\s+|\n+")
_FENCE = re.compile(r"```.*?(?:```|$)", re.S)
_MDLINK = re.compile(r"!?\[([^\]\n]*)\]\(([^)\n]*)\)")
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_ID_SUFFIX = re.compile(r"(\])((?:[ \t]+\^[A-Za-z0-9-]+)+)[ \t]*$")
_DEF_RE = re.compile(r"^\[\^([A-Za-z0-9_-]+)\]:")
_CITE = re.compile(r"\[\^[A-Za-z0-9_-]+\]")


def slug(text: str, fallback: str = "conversation") -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    words = re.findall(r"[a-z0-9]+", ascii_text)
    out = ""
    for w in words:
        cand = f"{out}-{w}" if out else w
        if len(cand) > 60:
            break
        out = cand
    if out:
        return out
    fb = re.findall(r"[a-z0-9]+", fallback.lower())
    return "-".join(fb)[:60] or "conversation"


def topic_for(task: WriteTask, turn: Turn) -> str:
    if task.topic:
        return task.topic
    title = turn.session_title or task.session_title
    sid = turn.session_id or task.session_id or "conversation"
    return f"topics/conversations/{slug(title, sid)}.md"


def title_for(task: WriteTask, turn: Turn) -> str:
    title = " ".join((turn.session_title or task.session_title or "").split())
    if task.topic:
        stem = Path(task.topic).stem.replace("-", " ").replace("_", " ").strip()
        return stem[:1].upper() + stem[1:] if stem else "Memory"
    return clean_text(title).rstrip(" .!?:;,") or f"Conversation {turn.session_id or task.session_id}".strip()


def clean_text(text: str) -> str:
    """One safe paragraph line: no footnote syntax, no ids, no headings, no links."""
    text = _FENCE.sub(" ", text)
    text = _MDLINK.sub(lambda m: m.group(1) or m.group(2), text)
    text = text.replace("[^", "[").replace("^", "ˆ")
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    text = " ".join(text.split())
    text = text.lstrip("#>-*+|` ").strip()
    if text.startswith("<"):
        text = text.lstrip("<").strip()
    return text


def sentences(text: str) -> list[str]:
    text = _FENCE.sub("\n", text)
    out = []
    for part in _SPLIT.split(text):
        s = clean_text(part)
        if s:
            out.append(s)
    return out


def _words(s: str) -> int:
    return len(re.findall(r"[\w']+", s))


def is_chitchat(s: str) -> bool:
    rest = CHITCHAT.sub("", s, count=1).strip()
    if rest != s.strip() and _words(rest) < 4:
        return True
    return _words(s) < 4


def classify_user(s: str) -> str | None:
    if s.endswith("?") or is_chitchat(s):
        return None
    if EXPLICIT_DECISION.search(s):
        return "decision"
    for kind, rx in (("preference", PREFERENCE), ("decision", DECISION), ("plan", PLAN), ("fact", FACT)):
        if rx.search(s):
            return kind
    return None


def classify_assistant(s: str) -> str | None:
    if s.endswith("?") or is_chitchat(s) and not CONFIRM.search(s):
        return None
    if _words(s) < 3:
        return None
    return "decision" if CONFIRM.search(s) else None


@dataclass(frozen=True)
class Candidate:
    kind: str
    text: str
    turns: tuple[Turn, ...]  # the turns it rests on, oldest first
    date: str
    topic: str
    title: str
    speaker: str

    @property
    def content(self) -> str:
        if self.kind == "asked":
            return f"{self.speaker} asked: “{self.text}”"
        verb = "confirmed" if self.speaker == "The assistant" else "said"
        return f"{self.speaker} {verb}: “{self.text}”"


def person_name(turns: tuple[Turn, ...]) -> str | None:
    for t in turns:
        if t.role != "user":
            continue
        m = NAME_RE.search(t.text)
        if m and m.group(1) not in _NOT_NAMES:
            return m.group(1)
    return None


def _speaker_name(turn: Turn, name: str | None) -> str:
    if name:
        return name
    disp = clean_text(turn.speaker_display or "")
    if disp and disp.lower() not in ("user", "owner"):
        return disp
    return "The owner"


def extract(task: WriteTask) -> list[Candidate]:
    """Every record the rules keep for this batch, in turn order."""
    name = person_name(task.turns)
    out: list[Candidate] = []
    seen: set[tuple[str, str]] = set()
    prev_user: Turn | None = None
    for turn in task.turns:
        topic, title = topic_for(task, turn), title_for(task, turn)
        if turn.role == "user":
            who = _speaker_name(turn, name)
            for s in sentences(turn.text):
                kind = classify_user(s)
                if kind and (topic, s.lower()) not in seen:
                    seen.add((topic, s.lower()))
                    out.append(Candidate(kind, s, (turn,), turn.date, topic, title, who))
            prev_user = turn
        elif turn.role == "assistant":
            for s in sentences(turn.text):
                if classify_assistant(s) and (topic, s.lower()) not in seen:
                    seen.add((topic, s.lower()))
                    basis = (prev_user, turn) if prev_user is not None else (turn,)
                    out.append(Candidate("decision", s, basis, turn.date, topic, title, "The assistant"))
    if out:
        return out
    # Fallback (rule 5): never ignore a batch silently.
    best: tuple[int, int, str, Turn] | None = None
    for idx, turn in enumerate(task.turns):
        if turn.role != "user":
            continue
        for s in sentences(turn.text):
            if _words(s) < 3 or (CHITCHAT.match(s) and _words(CHITCHAT.sub("", s, count=1)) < 3):
                continue
            score = (0 if s.endswith("?") else 1, _words(s))
            if best is None or score > best[:2]:
                best = (score[0], score[1], s, turn)
    if best is None:
        return []
    kind = "note" if best[0] == 1 else "asked"
    turn = best[3]
    return [Candidate(kind, best[2], (turn,), turn.date, topic_for(task, turn), title_for(task, turn), _speaker_name(turn, name))]


# ------------------------------------------------------------------------------ file edits


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def _paragraphs(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) line index ranges of text paragraphs (not headings/defs/blank)."""
    out = []
    start = None
    fenced = False
    for i, line in enumerate(lines + [""]):
        is_text = bool(line.strip()) and not _HEADING_RE.match(line) and not _DEF_RE.match(line) and not fenced
        if line.lstrip().startswith("```"):
            fenced = not fenced
            is_text = False
        if is_text and start is None:
            start = i
        elif not is_text and start is not None:
            out.append((start, i))
            start = None
    return out


def _record_content(par: str) -> str:
    body = _ID_SUFFIX.sub(r"\1", par.rstrip())
    return _CITE.sub("", body).strip()


def _defs(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines:
        m = _DEF_RE.match(line)
        if m:
            out[m.group(1)] = line
    return out


@dataclass
class FileEdit:
    path: str
    title: str
    lines: list[str]
    existed: bool
    changed: bool = False
    added: int = 0
    evidence_added: int = 0


def _definition(label: str, cand: Candidate) -> str:
    links = []
    for t in cand.turns:
        lab = clean_text(cand.text if len(cand.turns) == 1 else ("request" if t.role == "user" else "confirmation"))
        words = lab.replace("]", ")").replace("[", "(").replace("“", "").replace("”", "").split()
        short = " ".join(words[:6]).strip(".,;:!") or "turn"
        links.append(f"[{short}]({t.source_id})")
    return f"[^{label}]: Time: `{cand.date}`; Sources: " + ", ".join(links)


def _insert_record(edit: FileEdit, heading: str, paragraph: str, definition: str) -> None:
    lines = edit.lines
    # Find "## heading" (below the title); insert before the next heading of any level.
    sec = None
    for i, line in enumerate(lines):
        m = _HEADING_RE.match(line)
        if m and len(m.group(1)) == 2 and m.group(2).strip() == heading:
            sec = i
            break
    block = [paragraph, "", definition]
    if sec is None:
        while lines and not lines[-1].strip():
            lines.pop()
        if lines:
            lines.append("")
        lines.extend([f"## {heading}", ""] + block)
        return
    end = len(lines)
    for j in range(sec + 1, len(lines)):
        if _HEADING_RE.match(lines[j]):
            end = j
            break
    k = end
    while k > sec + 1 and not lines[k - 1].strip():
        k -= 1
    new = [""] + block
    if end < len(lines):
        new = new + [""]
    lines[k:end] = new


def plan_edits(task: WriteTask, candidates: list[Candidate], read, *, safe: bool, anchor_of) -> tuple[dict[str, FileEdit], int]:
    """Apply candidates to in-memory copies of the staged topic files."""
    edits: dict[str, FileEdit] = {}
    counter = 0
    for cand in candidates:
        edit = edits.get(cand.topic)
        if edit is None:
            old = read(cand.topic)
            if old is None:
                edit = FileEdit(cand.topic, cand.title, [f"# {cand.title}"], existed=False)
            else:
                edit = FileEdit(cand.topic, cand.title, old.split("\n"), existed=True)
                while edit.lines and not edit.lines[-1].strip():
                    edit.lines.pop()
            edits[cand.topic] = edit
        content = cand.content
        if safe:
            content = "".join(ch for ch in content if ch.isalnum() or ch in " .,;:!?'’“”\"()-–—/&%€$£@+=") or "Record."
        wanted = _norm(content)
        quoted = _norm(f"“{cand.text}”")
        # Rule 8: repeated text (the same quote, whoever it was attributed to).
        existing = None
        for a, b in _paragraphs(edit.lines):
            par = "\n".join(edit.lines[a:b])
            have = _norm(_record_content(par))
            if have == wanted or (not safe and have.endswith(quoted)):
                existing = (a, b, par)
                break
        if existing is not None:
            a, b, par = existing
            cited_labels = re.findall(r"\[\^([A-Za-z0-9_-]+)\]", par)
            defs = _defs(edit.lines)
            cited_text = " ".join(defs.get(lab, "") for lab in cited_labels)
            if any(t.source_id in cited_text or anchor_of(t.source_id) in cited_text for t in cand.turns):
                continue
            if safe:
                continue
            m = _ID_SUFFIX.search(edit.lines[b - 1])
            if not m:
                continue
            counter += 1
            label = f"e{counter}"
            last = edit.lines[b - 1]
            edit.lines[b - 1] = last[: m.start(2)] + f"[^{label}]" + last[m.start(2):]
            edit.lines[b:b] = ["", _definition(label, cand)]
            edit.changed = True
            edit.evidence_added += 1
            continue
        counter += 1
        label = f"e{counter}"
        _insert_record(edit, CLASS_HEADINGS[cand.kind], f"{content}[^{label}]", _definition(label, cand))
        edit.changed = True
        edit.added += 1
    return edits, counter


def render_prompt(task: WriteTask) -> str:
    """What this writer was asked (for agent-history): the batch, in our own words."""
    import json

    lines = [f"Extract durable memory from the turns below (stage {task.stage}).", "", f"## Observed {task.observed}"]
    for t in task.turns:
        obj = {"ref": t.source_id, "speaker": t.speaker, "content": t.text}
        lines.append(json.dumps(obj, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return "\n".join(lines)


def source_anchor(source_id: str) -> str:
    return "source-" + hashlib.sha256(source_id.encode("utf-8")).hexdigest()[:16]


@dataclass
class ExtractiveWriter:
    name: str = NAME
    history: list[dict[str, Any]] = field(default_factory=list)

    def write(self, task: WriteTask, tx: TxPort) -> WriterOutcome:
        candidates = extract(task)
        prompt = render_prompt(task)
        stage_name = task.stage

        def attempt(rejection: str | None) -> WriterOutcome:
            stage_label = stage_name if rejection is None else f"{stage_name}-repair"
            stage = tx.open_stage(task.allowed_refs)
            try:

                def read(rel: str) -> str | None:
                    p = Path(stage.path) / rel
                    try:
                        return p.read_text(encoding="utf-8")
                    except FileNotFoundError:
                        return None

                edits, _ = plan_edits(task, candidates, read, safe=rejection is not None, anchor_of=source_anchor)
                changed = [e for e in edits.values() if e.changed]
                if not changed:
                    tx.discard(stage)
                    entry = history_entry(stage_label, SYSTEM_NOTE, prompt, reply="nothing new to record", turns=take_commit_audit(tx))
                    return WriterOutcome((), None, [entry], "nothing new to record", 0)
                for e in changed:
                    p = Path(stage.path) / e.path
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_text("\n".join(e.lines).rstrip("\n") + "\n", encoding="utf-8")
            except BaseException:
                tx.discard(stage)
                raise
            try:
                info = tx.commit_edits(stage)
            except Exception as exc:
                self.history.append(history_entry(stage_label, SYSTEM_NOTE, prompt, error=f"{type(exc).__name__}: {exc}", turns=take_commit_audit(tx)))
                raise
            records = sum(e.added for e in changed)
            evidence = sum(e.evidence_added for e in changed)
            summary = f"{records} record(s) added, {evidence} existing record(s) given more evidence in " + ", ".join(
                sorted(e.path for e in changed)
            )
            entry = history_entry(stage_label, SYSTEM_NOTE, prompt, reply=summary, turns=take_commit_audit(tx))
            return WriterOutcome(info.changed_topics, info.revision, [entry], summary, records)

        self.history = []
        outcome = run_with_repair(attempt)
        outcome.history = self.history + outcome.history
        return outcome


def writer_from_settings(settings: Any = None) -> ExtractiveWriter:
    return ExtractiveWriter()


__all__ = ["ExtractiveWriter", "extract", "Candidate", "slug", "sentences", "classify_user", "classify_assistant", "Rejected"]
