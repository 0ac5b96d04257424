"""Trust metadata of an archived record (memory spec §4.4): the ``source-meta`` token, its
canonical encoding, and the read-only pre-tier shape."""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from ...cache.registry import keeps

TRUST_STATES = ("pending", "trusted")
AUTHORITY_TIERS = (None, "owner", "paired")
LEGACY_ORIGINS = ("legacy-unknown", "local-owner")


# --------------------------------------------------------------------------------------------
# 4.4 Trust metadata
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrustMeta:
    version: int = 1
    trust_state: str = "trusted"
    speaker_kind: str = "unknown"
    principal_id: str = "unknown"
    authority_tier: str | None = None

    @property
    def trusted(self) -> bool:
        return self.trust_state == "trusted"

    @property
    def pending(self) -> bool:
        return self.trust_state == "pending"

    def to_json(self) -> dict[str, Any]:
        return {
            "authority_tier": self.authority_tier,
            "principal_id": self.principal_id,
            "speaker_kind": self.speaker_kind,
            "trust_state": self.trust_state,
            "version": self.version,
        }


def _norm_text(value: object) -> str:
    return value if isinstance(value, str) and value.strip() else "unknown"


def normalize_meta(
    trust_state: object = "trusted",
    speaker_kind: object = None,
    principal_id: object = None,
    authority_tier: object = None,
) -> TrustMeta:
    """Build a normalised ``TrustMeta``; ``ValueError`` for an unknown trust state or tier."""
    if trust_state not in TRUST_STATES:
        raise ValueError(f"invalid trust_state: {trust_state!r}")
    if authority_tier not in AUTHORITY_TIERS:
        raise ValueError(f"invalid authority_tier: {authority_tier!r}")
    return TrustMeta(1, str(trust_state), _norm_text(speaker_kind), _norm_text(principal_id), authority_tier)  # type: ignore[arg-type]


def _b64(obj: Mapping[str, Any]) -> str:
    payload = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(payload).decode("ascii").rstrip("=")


def encode_meta(meta: TrustMeta) -> str:
    """TOKEN = base64url without padding of the sorted compact JSON (non-ASCII kept)."""
    return _b64(meta.to_json())


_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


@keeps
@lru_cache(maxsize=1024)
def decode_meta(token: str) -> TrustMeta | None:
    """Decode a ``source-meta`` token; ``None`` unless it is canonical.

    Accepts the current shape and, read-only, the pre-tier shape with ``origin_scope`` (tier
    ``owner`` iff origin ``local-owner``). Either way the token must re-encode identically.
    """
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        obj = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict) or type(obj.get("version")) is not int or obj["version"] != 1:
        return None
    keys = set(obj)
    base_ok = (
        obj.get("trust_state") in TRUST_STATES
        and isinstance(obj.get("speaker_kind"), str)
        and isinstance(obj.get("principal_id"), str)
    )
    if not base_ok:
        return None
    if keys == {"version", "trust_state", "speaker_kind", "principal_id", "authority_tier"}:
        tier = obj["authority_tier"]
        if tier not in AUTHORITY_TIERS:
            return None
        try:
            meta = normalize_meta(obj["trust_state"], obj["speaker_kind"], obj["principal_id"], tier)
        except ValueError:
            return None
        return meta if encode_meta(meta) == token else None
    if keys == {"version", "trust_state", "speaker_kind", "principal_id", "origin_scope"}:
        scope = obj["origin_scope"]
        if not isinstance(scope, dict) or set(scope) != {"origin", "capabilities"}:
            return None
        origin, caps = scope["origin"], scope["capabilities"]
        if origin not in LEGACY_ORIGINS or not isinstance(caps, list):
            return None
        if not all(isinstance(c, str) and c for c in caps) or caps != sorted(set(caps)):
            return None
        meta = normalize_meta(
            obj["trust_state"], obj["speaker_kind"], obj["principal_id"], "owner" if origin == "local-owner" else None
        )
        canonical = {
            "origin_scope": {"capabilities": caps, "origin": origin},
            "principal_id": meta.principal_id,
            "speaker_kind": meta.speaker_kind,
            "trust_state": meta.trust_state,
            "version": 1,
        }
        return meta if _b64(canonical) == token else None
    return None
