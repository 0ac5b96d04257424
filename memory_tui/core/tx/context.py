"""What an entry point asks of the transaction (``Context``): the citation rule and the refs it
allows, the block ids that must survive, git and the token counter. Every rejection names its
rule (pitfall 5):

* hand edit: a paragraph may cite any existing, valid source; a source new to a block must
  be trusted;
* ``memory_changes`` record ops: any trusted source declared in the ops or archived now;
* whole-file ``changes`` / ``patch``: only sources archived in this same transaction;
* writers (restricted stage): only the batch's source ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..format.errors import MemoryError
from ..store import gitlog

GIT_MODES = ("auto", "on", "off")

RULE_HAND = "hand-edit rule: a paragraph may cite any existing valid source; a source new to a block must be trusted"
RULE_RECORDS = "memory_changes rule: new citations must be trusted sources declared in the ops or archived now"
RULE_FILES = "whole-file/patch rule: new citations must be sources archived in this same transaction"
RULE_WRITER = "writer rule: new citations must be source ids of this batch"
RULE_ORGANIZE = "organize rule: no new citations are allowed"


@dataclass
class Context:
    """One transaction's request, as the entry point made it (the stage holds the texts)."""

    required_ids: frozenset[str]  # block ids the result must still hold ...
    rule: str
    allowed_refs: frozenset[str] | None
    validate_only: bool
    git_commit: str
    commit_message: str | None
    git_env: Mapping[str, str] | None
    counter: Any
    reported_changed: tuple[str, ...] = ()
    source_ids: Mapping[str, str] = field(default_factory=dict)
    structured: bool = False
    refuse_drops: bool = False  # the owner's own texts: nothing may be pruned away (pitfall 13)
    # ... or, when set, every block id of the baseline except these (``required_ids`` is then
    # not used): what a hand edit requires, without a set of every id of the workspace
    required_except: frozenset[str] | None = None
    # a hand edit with the default counter; its ``no change`` answer is remembered
    # (``noopcache``) under this config key, read before the transaction read the config
    noop_config: str | None = None


def git_mode(value: Any) -> str:
    if value not in GIT_MODES:
        raise MemoryError("INVALID_ARGUMENT", "git_commit must be auto, on or off")
    return value


def ensure_git(root: Path, mode: str, env: Mapping[str, str] | None) -> str | None:
    if mode == "off":
        return None
    return gitlog.ensure_history(root, env=env)


def counter_or_default(counter: Any) -> Any:
    if counter is not None:
        return counter
    from ..format.tokens import DEFAULT_COUNTER

    return DEFAULT_COUNTER
