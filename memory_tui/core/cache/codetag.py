"""Which code made a cached value: a digest of the source of the modules that compute it.

A cache entry written by other code is a miss, never an answer. Callers name the modules
themselves (module objects, not file names), so a module that moves keeps its tag honest and
a module that is missing fails loudly instead of hashing a placeholder.
"""
from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from .registry import keeps

_TAGS: dict[tuple, str] = keeps({})


def _source_files(module: ModuleType | str) -> tuple[str, list[str]]:
    """(name, source paths) of a module object, or of a dotted name without importing it: a
    cache may depend on code that itself depends on the cache. A package stands for every
    module under it (its rooms are one piece of code to the caches that name it), in path
    order."""
    if isinstance(module, str):
        spec = importlib.util.find_spec(module)
        path = spec.origin if spec is not None else None
        folders = spec.submodule_search_locations if spec is not None else None
        name = module
    else:
        path, name = module.__file__, module.__name__
        folders = getattr(module, "__path__", None)
    if not path or not path.endswith(".py"):
        raise ValueError(f"module {name} has no source file to tag")
    if not folders:
        return name, [path]
    return name, sorted(str(p) for folder in folders for p in Path(folder).rglob("*.py"))


def code_tag(*modules: ModuleType | str, salt: str = "", length: int = 32) -> str:
    """A digest of ``salt`` and the source bytes of ``modules`` (module objects or dotted
    names), memoised for the process."""
    key = (salt, length, *(m if isinstance(m, str) else m.__name__ for m in modules))
    tag = _TAGS.get(key)
    if tag is None:
        h = hashlib.sha256(f"{salt}\0{sys.version_info[:2]}".encode())
        for module in modules:
            name, paths = _source_files(module)
            for path in paths:
                with open(path, "rb") as fh:
                    h.update(name.encode() + b"\0" + fh.read() + b"\0")
        tag = _TAGS[key] = h.hexdigest()[:length]
    return tag


def package_tag(package: ModuleType, salt: str = "", length: int = 32) -> str:
    """A digest of every module under ``package`` (for a verdict that depends on all of it)."""
    key = (salt, length, package.__name__, "**")
    tag = _TAGS.get(key)
    if tag is None:
        root = Path(package.__file__).resolve().parent
        h = hashlib.sha256(f"{salt}\0{sys.version_info[:2]}".encode())
        for path in sorted(root.rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        tag = _TAGS[key] = h.hexdigest()[:length]
    return tag
