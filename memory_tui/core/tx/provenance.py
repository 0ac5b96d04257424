"""Who supplies sources to ``update(..., sources=...)`` (§5.3 step 4): the caller's persisted
authority, the local owner read from ``owner.json``, and the content-addressed source records
a request's declared sources become (the same request archives the same ids)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..format.errors import MemoryError
from ..format.sources import SourceRecord, TrustMeta

TRANSACTION_PROVIDER = "claude-code"  # §4.1: sources supplied to update()
AUTHORITY_REQUIRED = "creating a source requires complete persisted authority"
_SEP = "\x1f"  # U+001F, the field separator of §5.3 step 4


@dataclass(frozen=True)
class Provenance:
    """Who supplies ``update(..., sources=...)`` (§5.3 step 4): the persisted authority of the
    caller. ``origin_id`` names where the request came from (OpenProgram: ``<session>/<turn>``
    for the tool, ``owner-rest/memory-changes`` for the web route; which ``memory-tui apply`` uses too)."""

    principal_id: str
    speaker_kind: str
    speaker_id: str
    authority_tier: str
    origin_id: str
    speaker_display: str | None = None  # the label in the record line; not part of the id seed

    @property
    def complete(self) -> bool:
        fields = (self.principal_id, self.speaker_kind, self.speaker_id, self.authority_tier, self.origin_id)
        return all(isinstance(f, str) and f.strip() for f in fields) and self.authority_tier in ("owner", "paired")

    @property
    def meta(self) -> TrustMeta:
        """The trust fields of the records it declares: trusted, as this caller's."""
        return TrustMeta(trust_state="trusted", speaker_kind=self.speaker_kind, principal_id=self.principal_id,
                         authority_tier=self.authority_tier)

    @property
    def seed(self) -> str:
        return _SEP.join((self.principal_id, self.speaker_kind, self.speaker_id, self.authority_tier, self.origin_id))


OWNER_FILE = "owner.json"
OWNER_SPEAKER_ID = "owner/local"
OWNER_DISPLAY = "Owner"  # OpenProgram labels the owner's own records "Owner (owner/local)" (§4.3, §4.8)


def read_owner_principal(state_dir: Any) -> str:
    """``principal_id`` of ``<state>/owner.json`` (session spec: ``{"version": 1,
    "principal_id": "owner/install/<16 hex>"}``). A missing or unusable file is
    ``WRITER_PRECONDITION_FAILED`` naming the file (and the line of a JSON error)."""
    import json

    path = Path(state_dir) / OWNER_FILE

    def refuse(why: str, line: int | None = None) -> MemoryError:
        return MemoryError(
            "WRITER_PRECONDITION_FAILED",
            f"{AUTHORITY_REQUIRED}: {path}{f':{line}' if line else ''}: {why}",
            details={"file": str(path)},
        )

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise refuse("the owner file is missing (OpenProgram writes it on first start)") from None
    except OSError as exc:
        raise refuse(f"cannot read the owner file: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise refuse("the owner file is not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise refuse(f"invalid JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None
    principal = data.get("principal_id") if isinstance(data, dict) else None
    if not isinstance(principal, str) or not principal.strip() or not principal.isprintable():
        raise refuse("principal_id must be a non-empty printable string")
    return principal


def owner_provenance(state_dir: Any, origin_id: str) -> Provenance:
    """The local owner as the speaker of sources supplied by ``origin_id``."""
    return Provenance(read_owner_principal(state_dir), "owner", OWNER_SPEAKER_ID, "owner", origin_id, OWNER_DISPLAY)


def _hex16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def transaction_source_records(sources: Iterable[Any], provenance: Provenance) -> list[tuple[str, SourceRecord]]:
    """(label, record) for each declared source, content addressed (§5.3 step 4): the thread
    hashes the seed and every (role, content, observed) line, each message hashes the seed,
    thread, 1-based ordinal and its own fields, so the same request archives the same ids."""
    items = list(sources)
    seed = provenance.seed
    lines = [_SEP.join((s.role, s.content, s.observed_at or "")) for s in items]
    thread = _hex16(seed + "\n" + "\n".join(lines))
    out: list[tuple[str, SourceRecord]] = []
    for ordinal, s in enumerate(items, start=1):
        observed = s.observed_at or ""
        message = _hex16(_SEP.join((seed, thread, str(ordinal), s.role, s.content, observed)))
        out.append((s.label, SourceRecord.spoken((TRANSACTION_PROVIDER, thread, message), ordinal, s.role, s.content,
                                                 observed, (provenance.speaker_id, provenance.speaker_display),
                                                 provenance.meta)))
    return out


