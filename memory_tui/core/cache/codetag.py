"""Which code made a cached value: a digest of the source of the modules that compute it.

A cache entry written by other code is a miss, never an answer. Callers name the modules
themselves (module objects, not file names), so a module that moves keeps its tag honest and
a module that is missing fails loudly instead of hashing a placeholder.
"""
from __future__ import annotations

import hashlib
import importlib.util
import sys
from types import ModuleType
from .registry import keeps

_TAGS: dict[tuple, str] = keeps({})


def _source_file(module: ModuleType | str) -> tuple[str, str]:
    """(name, source path) of a module object, or of a dotted name without importing it: a
    cache may depend on code that itself depends on the cache."""
    if isinstance(module, str):
        spec = importlib.util.find_spec(module)
        path = spec.origin if spec is not None else None
        name = module
    else:
        path, name = module.__file__, module.__name__
    if not path or not path.endswith(".py"):
        raise ValueError(f"module {name} has no source file to tag")
    return name, path


def code_tag(*modules: ModuleType | str, salt: str = "", length: int = 32) -> str:
    """A digest of ``salt`` and the source bytes of ``modules`` (module objects or dotted
    names), memoised for the process."""
    key = (salt, length, *(m if isinstance(m, str) else m.__name__ for m in modules))
    tag = _TAGS.get(key)
    if tag is None:
        h = hashlib.sha256(f"{salt}\0{sys.version_info[:2]}".encode())
        for module in modules:
            name, path = _source_file(module)
            with open(path, "rb") as fh:
                h.update(name.encode() + b"\0" + fh.read() + b"\0")
        tag = _TAGS[key] = h.hexdigest()[:length]
    return tag


def package_tag(package: ModuleType, salt: str = "", length: int = 32) -> str:
    """A digest of every module under ``package`` (for a verdict that depends on all of it)."""
    from pathlib import Path

    key = (salt, length, package.__name__, "**")
    tag = _TAGS.get(key)
    if tag is None:
        root = Path(package.__file__).resolve().parent
        h = hashlib.sha256(f"{salt}\0{sys.version_info[:2]}".encode())
        for path in sorted(root.rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        tag = _TAGS[key] = h.hexdigest()[:length]
    return tag
