"""Parsed JSON made read-only, and made small: the metadata of every session node.

Why a module of its own: a session's nodes are kept by the tens of thousands (the app, the
shape table), so how their parsed JSON is held decides much of the app's memory: a dict per
node becomes one shared key order plus a tuple (:class:`FrozenMap`), short strings are
interned, and equal metadata within a session is one object. :func:`thaw` gives plain JSON
back for output.
"""

from __future__ import annotations

import sys
from collections import abc
from types import MappingProxyType
from typing import Any, Mapping

from memory_tui.core.cache.registry import keeps


def _freeze(value: Any) -> Any:
    """Read-only views of parsed JSON so frozen dataclasses stay effectively immutable.

    Keys and short string values are interned (peak RSS): each node file
    is decoded on its own, so without this every one of 60 000 nodes holds its own copy of
    the same metadata keys and of values such as speaker ids and sources."""
    kind = type(value)
    if kind is dict:
        return MappingProxyType({(_intern(k) if type(k) is str else k): _freeze(v) for k, v in value.items()})
    if kind is list:
        return tuple(_freeze(v) for v in value)
    if kind is str and len(value) <= _INTERN_MAX:
        return _intern(value)
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


_intern = sys.intern
_INTERN_MAX = 64  # ids, roles, sources, speaker names: repeated across nodes; prose is not


def _intern_short(value: str) -> str:
    return _intern(value) if len(value) <= _INTERN_MAX else value


_LEAVES = (str, int, float, bool, type(None))


class _Shape:
    """The key order of one kind of metadata object, shared by every node that has it."""

    __slots__ = ("keys", "index")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.index = {k: i for i, k in enumerate(keys)}


class FrozenMap(abc.Mapping):
    """A read-only mapping stored as a shared key order plus a tuple of values (issue
    12: peak RSS). Every node's ``metadata`` is such an object: 60 000 nodes hold a
    handful of distinct key orders, so a per-node dict (~500 bytes for 15 keys) becomes one
    tuple. It behaves as the ``mappingproxy`` it replaces: the same ``get``/``in``/iteration
    order, dict equality (order-insensitive) and the same ``repr`` and ``str``."""

    __slots__ = ("_shape", "_values")

    def __init__(self, shape: _Shape, values: tuple[Any, ...]) -> None:
        self._shape = shape
        self._values = values

    def __getitem__(self, key: Any) -> Any:
        return self._values[self._shape.index[key]]

    def get(self, key: Any, default: Any = None) -> Any:
        i = self._shape.index.get(key)
        return default if i is None else self._values[i]

    def __contains__(self, key: Any) -> bool:
        return key in self._shape.index

    def __iter__(self):
        return iter(self._shape.keys)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: Any) -> bool:
        if type(other) is FrozenMap and other._shape is self._shape:
            return self._values == other._values
        if isinstance(other, abc.Mapping):
            return dict(zip(self._shape.keys, self._values)) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like the mappingproxy of a dict

    def __repr__(self) -> str:
        return f"mappingproxy({dict(zip(self._shape.keys, self._values))!r})"

    def __str__(self) -> str:  # a mappingproxy's str is its dict's (``json.dumps(default=str)``)
        return str(dict(zip(self._shape.keys, self._values)))

    def __reduce__(self):
        return (_frozen_map, (dict(zip(self._shape.keys, self._values)),))


_SHAPES: dict[tuple[str, ...], _Shape] = keeps({})
_SHAPES_MAX = 4096  # past this many key orders (odd data), new ones get a plain read-only dict


def _frozen_map(items: dict[str, Any]) -> Mapping[str, Any]:
    """``items`` (keys already interned, values already frozen) as a :class:`FrozenMap`."""
    keys = tuple(items)
    shape = _SHAPES.get(keys)
    if shape is None:
        if len(_SHAPES) >= _SHAPES_MAX or not all(type(k) is str for k in keys):
            return MappingProxyType(items)
        shape = _SHAPES.setdefault(keys, _Shape(keys))
    return FrozenMap(shape, tuple(items.values()))


def frozen_parts(value: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[Any, ...]] | None:
    """``(keys, values)`` of frozen metadata whose values are all scalars or tuples of them
    (what :func:`frozen_from_parts` makes the same object of again), else ``None``."""
    if type(value) is not FrozenMap or not all(map(_plain_frozen, value._values)):
        return None
    return value._shape.keys, value._values


def _plain_frozen(v: Any) -> bool:
    kind = type(v)
    return kind in _SCALARS or (kind is tuple and all(map(_plain_frozen, v)))


_SCALARS = frozenset({str, int, float, bool, type(None)})


def frozen_from_parts(keys: tuple[str, ...], values: tuple[Any, ...]) -> Mapping[str, Any]:
    """The frozen metadata of :func:`frozen_parts`' answer. The parts are taken as they are:
    their strings are interned already when they come from ``marshal`` (it keeps the flag)."""
    shape = _SHAPES.get(keys)
    if shape is not None:
        return FrozenMap(shape, values)
    if not all(type(k) is str for k in keys):
        raise ValueError("metadata keys are not strings")
    return _frozen_map(dict(zip(keys, values)))


def _freeze_metadata(value: dict[str, Any], shared: dict[Any, Mapping[str, Any]] | None = None) -> Mapping[str, Any]:
    """``value`` frozen; with ``shared`` (one table per session load), a node whose metadata
    equals an earlier node's gets that very object: half the nodes of a session (every
    owner turn after the same mark) carry identical metadata."""
    frozen = _frozen_map({(_intern(k) if type(k) is str else k): _freeze(v) for k, v in value.items()})
    if shared is None or type(frozen) is not FrozenMap:
        return frozen
    # Only flat str/int/bool/None values, keyed with their types: ``==`` would call 1, 1.0
    # and True the same value (and 0.0 and -0.0), and they print differently.
    types = tuple(type(v) for v in frozen._values)
    if not all(t in _SHAREABLE for t in types):
        return frozen
    return shared.setdefault((frozen._shape, frozen._values, types), frozen)


_SHAREABLE = frozenset({str, int, bool, type(None)})


def thaw(value: Any) -> Any:
    """The plain-JSON twin of :func:`_freeze` (for projection and JSON output)."""
    # Exact type checks first: ``isinstance(x, typing.Mapping)`` on every leaf of every node,
    # once per tip, was a third of the pending computation.
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is FrozenMap:
        return {k: thaw(v) for k, v in zip(value._shape.keys, value._values)}
    if kind is MappingProxyType or kind is dict:
        return {k: thaw(v) for k, v in value.items()}
    if kind is tuple:
        return [thaw(v) for v in value]
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value
