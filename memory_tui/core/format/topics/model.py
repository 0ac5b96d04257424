"""Topic Markdown's data model: what a parse of a topic file gives (memory spec §3).

Frozen dataclasses only, and the few facts they answer about themselves (an evidence id that
is a local label, a problem that is only a warning). The rules that read a text into them live
in ``grammar`` (the lexical pieces), ``parse`` (the general parser) and ``fast`` (the
one-pass reader of well-formed files).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import Problem
from ..fastdata import positional

INVALID_TOPIC_FORMAT = "INVALID_TOPIC_FORMAT"

# (topic path relative to topics/, link target as written) -> source id, or None.
SourceResolver = Callable[[str, str], "str | None"]

_SEVERITY_WARNING = "warning"
# A local evidence label, as the writer hands it in before normalisation gives it an id.
LOCAL_LABEL_RE = re.compile(r"(?:e[0-9]+|new-evidence-[A-Za-z0-9-]+)\Z")


def is_local_label(fid: str) -> bool:
    return bool(LOCAL_LABEL_RE.match(fid))


def is_error(problem: Problem) -> bool:
    return problem.details.get("severity") != _SEVERITY_WARNING


# ---------------------------------------------------------------------------------------------
# Data model
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceLink:
    label: str
    target: str
    source_id: str | None  # resolved source id; None when it could not be resolved


@dataclass(frozen=True)
class Evidence:
    """One footnote definition ``[^id]: Time: `WHEN`; Sources: ...``."""

    id: str
    raw_when: str  # time text as written, without backticks ("undated" allowed)
    when: str | None  # "YYYY" / "YYYY-MM" / "YYYY-MM-DD" as written; None when undated/invalid
    links: tuple[SourceLink, ...]
    topic_path: str  # relative to topics/
    line: int  # 1-based
    legacy: bool  # written in the legacy "WHEN · Sources:" shape
    non_ascii_time: bool = False  # time uses non-ASCII digits (OpenProgram accepts, we never write)
    raw_sources: str = ""  # the text after "Sources:"
    text: str = ""  # the whole definition line

    @property
    def source_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(link.source_id for link in self.links if link.source_id))

    @property
    def is_local(self) -> bool:
        return is_local_label(self.id)


@dataclass(frozen=True)
class Annotation:
    """One citation group and the text written before it."""

    quote: str
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class Unit:
    """One memory unit: a record paragraph's identity, one of its aliases, or a legacy mem_ unit."""

    memory_id: str
    topic_path: str  # relative to topics/, e.g. "people/ada.md"
    headings: tuple[str, ...]
    content: str  # body with every [^..] removed, trimmed
    body: str  # raw paragraph text without the id suffix, trimmed
    annotations: tuple[Annotation, ...]
    source_refs: tuple[str, ...]
    relation_targets: tuple[str, ...]
    when: str | None
    line: int  # 1-based first line of the paragraph
    end_line: int  # 1-based last line of the paragraph
    aliases: tuple[str, ...]  # every id of the paragraph, identity last
    legacy: bool  # a legacy mem_ unit
    non_ascii_time: bool = False

    @property
    def identity(self) -> str:
        return self.aliases[-1] if self.aliases else self.memory_id

    @property
    def is_alias(self) -> bool:
        return self.memory_id != self.identity

    @property
    def path(self) -> str:
        """Workspace-relative path of the topic file."""
        return "topics/" + self.topic_path

    @property
    def evidence(self) -> tuple[Evidence, ...]:
        seen: dict[str, Evidence] = {}
        for ann in self.annotations:
            for ev in ann.evidence:
                seen.setdefault(ev.id, ev)
        return tuple(seen.values())

    @property
    def evidence_ids(self) -> tuple[str, ...]:
        return tuple(ev.id for ev in self.evidence)


class Heading(NamedTuple):
    level: int
    title: str
    line: int


@dataclass(frozen=True)
class Topic:
    path: str  # relative to topics/
    text: str
    units: tuple[Unit, ...]
    evidence: tuple[Evidence, ...]
    headings: tuple[Heading, ...]
    problems: tuple[Problem, ...]

    @property
    def workspace_path(self) -> str:
        return "topics/" + self.path

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if is_error(p))

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def block_ids(self) -> tuple[str, ...]:
        return self.memory_ids

    def evidence_by_id(self, eid: str) -> Evidence | None:
        for ev in self.evidence:
            if ev.id == eid:
                return ev
        return None

    # A topic from the persistent parse cache holds its path, text, headings and problems and
    # builds ``units`` and ``evidence`` (~300 objects per file, most of a cached load) the
    # first time either is read: a load of the whole tree then costs what its readers touch.
    # Reached only for a name missing from the instance dict, so a built topic (and every
    # topic the parser made) reads its fields at plain attribute speed.
    def __getattr__(self, name: str):
        if name == "units" or name == "evidence":
            d = self.__dict__
            build = d.get("_deferred")
            if build is not None:
                units, evidence = d.setdefault("_built", build())  # racing threads keep one result
                d.setdefault("evidence", evidence)
                d.setdefault("units", units)
                d.pop("_deferred", None)  # the rows are no longer needed
                d.pop("_built", None)
            if name in d:
                return d[name]
        raise AttributeError(name)

    @classmethod
    def deferred(cls, path: str, text: str, headings: tuple[Heading, ...], problems: tuple[Problem, ...],
                 memory_ids: tuple[str, ...], build: Callable[[], tuple[tuple[Unit, ...], tuple[Evidence, ...]]]
                 ) -> Topic:
        """A topic whose ``units`` and ``evidence`` are ``build()``'s, made on first use;
        ``memory_ids`` must be its units' ids in order (what a tree needs before it builds
        them). Equal to, and pickled as, the topic it stands for."""
        topic = object.__new__(cls)
        d = topic.__dict__
        d["path"], d["text"] = path, text
        d["headings"], d["problems"] = headings, problems
        d["_deferred"], d["_mids"] = build, memory_ids
        return topic

    def __getstate__(self) -> dict:
        self.units  # noqa: B018 - a deferred topic is pickled built
        d = self.__dict__
        return {name: d[name] for name in _TOPIC_FIELDS}

    @property
    def memory_ids(self) -> tuple[str, ...]:
        """Its units' ids in order, without building a deferred topic's units."""
        mids = self.__dict__.get("_mids")
        if mids is None:
            mids = self.__dict__.setdefault("_mids", tuple(map(_MEMORY_ID, self.units)))
        return mids

    def _units_by_id(self) -> dict[str, Unit]:
        d = self.__dict__
        found = d.get("_by_id")
        if found is None:
            units = self.units
            found = d.setdefault("_by_id", dict(zip(map(_MEMORY_ID, units), units)))
        return found


_TOPIC_FIELDS = ("path", "text", "units", "evidence", "headings", "problems")
_MEMORY_ID = operator.attrgetter("memory_id")


_make_link = positional(SourceLink)
_make_evidence = positional(Evidence)
_make_annotation = positional(Annotation)
_make_unit_fields = positional(Unit)
