"""The serializers of memory-tui's caches, in one place: the only module (with the kit's
envelope and sealed entries) that imports ``marshal`` or ``pickle`` (an import-linter
contract says so), so how a cached value becomes bytes is decided here and nowhere else.

* ``dumps`` / ``loads``: ``marshal`` of plain tuples, lists, dicts, strings, numbers and
  bytes (no class is named in the bytes, so nothing else can come out of them). They are
  marshal's own functions, not wrappers: hot loops map them over thousands of rows.
* ``pickle_seal`` / ``pickle_unseal``: a pickle behind a sha256 of its payload, read back by
  an unpickler that builds only plain data and the data classes / named tuples of the
  modules the caller names (building one runs no code of the file's choosing).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import marshal
import pickle
from typing import Any, Iterable

dumps = marshal.dumps
loads = marshal.loads
DECODE_ERRORS = (EOFError, ValueError, TypeError)  # what ``loads`` raises for bytes it did not write

_SAFE_BUILTINS = frozenset(("builtins", n) for n in ("frozenset", "set", "tuple", "list", "dict", "str", "bytes", "int",
                                                     "float", "bool", "complex", "object"))


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, modules: frozenset[str]) -> None:
        super().__init__(io.BytesIO(data))
        self._modules = modules

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_BUILTINS or (module, name) == ("copyreg", "_reconstructor"):
            return super().find_class(module, name)
        # a package named allows the modules under it (a room of a split grammar)
        if module in self._modules or any(module.startswith(m + ".") for m in self._modules):
            obj = super().find_class(module, name)
            if isinstance(obj, type) and (dataclasses.is_dataclass(obj) or (issubclass(obj, tuple) and hasattr(obj, "_fields"))):
                return obj
        raise pickle.UnpicklingError(f"not allowed in a cache entry: {module}.{name}")


def pickle_seal(magic: bytes, value: Any) -> bytes:
    """``magic``, the sha256 of the payload as hex and LF, then the pickle of ``value``."""
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return magic + hashlib.sha256(payload).hexdigest().encode("ascii") + b"\n" + payload


def pickle_unseal(magic: bytes, data: bytes, modules: Iterable[str]) -> Any:
    """The value of an intact ``pickle_seal`` entry whose classes come from ``modules``;
    ``None`` for anything else (a foreign or damaged pickle is only a cache miss)."""
    head = len(magic) + 65
    if len(data) < head or not data.startswith(magic) or data[head - 1:head] != b"\n":
        return None
    digest, payload = data[len(magic):head - 1], data[head:]
    if hashlib.sha256(payload).hexdigest().encode("ascii") != digest:
        return None
    try:
        return _Unpickler(payload, frozenset(modules)).load()
    except Exception:
        return None


__all__ = ["DECODE_ERRORS", "dumps", "loads", "pickle_seal", "pickle_unseal"]
