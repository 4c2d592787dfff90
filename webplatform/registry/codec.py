"""The registry's frozen dataclasses as JSON and back, for the disk cache (`cache.py`).

Driven by each dataclass's type hints, so a field added to `ToolSpec` later is carried without
a change here: paths travel as text, tuples as lists, a dataclass as the list of its field
values in order (`schema()` names the order, and a file of another schema is not read), and a
field typed `Any` (an argument's default or enum) only when it is plain JSON that reads back
as the very same value. Anything else raises `Unencodable`, and that entry is not cached.
Lists rather than objects halve the file and the time to read it back.

Decoding rebuilds exactly those types from data that `cache.py` has already authenticated;
nothing in a cache file is ever run.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Union

Convert = Callable[[Any], Any]


class Unencodable(TypeError):
    """A value the cache cannot carry exactly (a YAML date, a set, a mapping with int keys)."""


def encode(value: Any) -> Any:
    """`value` (a registry dataclass, or anything it holds) as plain JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [encode(getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return [encode(item) for item in value]
    return _plain(value)


def _plain(value: Any) -> Any:
    """A value typed `Any`: JSON that decodes to an equal value, or Unencodable."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _plain(v) for k, v in value.items()}
    raise Unencodable(f"cannot cache a value of type {type(value).__name__}")


def decode(kind: Any, data: Any) -> Any:
    """An instance of `kind` (a dataclass, or `X | None`) from what `encode` made of one."""
    return _converter(kind)(data)


@functools.cache
def _converter(kind: Any) -> Convert:
    """How to rebuild a value of type `kind` from JSON data (built once per type)."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return _identity
    if kind is Path:
        return Path
    if kind in (str, int, float, bool):
        return _identity
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return _dataclass_converter(kind)
    if origin is tuple:
        return _tuple_converter(typing.get_args(kind))
    if origin is Literal:
        return _identity
    if origin in (Union, types.UnionType):
        others = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(others) == 1:
            inner = _converter(others[0])
            return lambda data: None if data is None else inner(data)
        if all(_converter(a) is _identity for a in others):
            return _identity
    raise Unencodable(f"the registry cache cannot carry a field of type {kind!r}")


def _identity(data: Any) -> Any:
    return data


def _tuple_converter(args: tuple[Any, ...]) -> Convert:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _converter(args[0])
        if item is _identity:
            return tuple
        return lambda data: tuple(item(x) for x in data)
    items = [_converter(a) for a in args]
    return lambda data: tuple(f(x) for f, x in zip(items, data, strict=True))


def _dataclass_converter(kind: type[Any]) -> Convert:
    """A function that builds a `kind` from the list of its field values, the way pickle
    does (fields set on a bare instance, no frozen __init__ per field): generated once per
    class, as `dataclasses` generates __init__, because a cold start builds some 40,000 of
    them and a generic loop took three times as long. The generated text holds only the
    class's own field names and positions; the cache's data is passed to it, never read as
    code."""
    hints = typing.get_type_hints(kind)
    fields = dataclasses.fields(kind)
    if not all(f.init and f.name.isidentifier() for f in fields) or hasattr(kind, "__post_init__"):
        raise Unencodable(f"the registry cache cannot rebuild a {kind.__name__}")
    scope: dict[str, Any] = {"new": object.__new__, "put": object.__setattr__, "kind": kind}
    items = []
    for i, f in enumerate(fields):
        convert = _converter(hints[f.name])
        if convert is _identity:
            items.append(f"{f.name!r}: data[{i}]")
        else:
            scope[f"convert_{i}"] = convert
            items.append(f"{f.name!r}: convert_{i}(data[{i}])")
    source = (
        "def build(data):\n"
        f"    if len(data) != {len(fields)}:\n"
        "        raise ValueError('a cached value has the wrong number of fields')\n"
        "    obj = new(kind)\n"
        f"    put(obj, '__dict__', {{{', '.join(items)}}})\n"
        "    return obj\n"
    )
    exec(source, scope)  # noqa: S102 - text made above from the class's field names only
    build: Convert = scope["build"]
    return build


@functools.cache
def schema(kind: Any) -> str:
    """The shape `encode` gives instances of `kind`: its fields and their types, nested
    dataclasses included; a cache written for another shape is not read."""
    if not (dataclasses.is_dataclass(kind) and isinstance(kind, type)):
        return repr(kind)
    hints = typing.get_type_hints(kind)
    parts = []
    for f in dataclasses.fields(kind):
        nested = [schema(a) for a in _dataclasses_in(hints[f.name])]
        parts.append(f"{f.name}:{hints[f.name]!r}{nested}")
    return f"{kind.__name__}({', '.join(parts)})"


def _dataclasses_in(kind: Any) -> list[Any]:
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return [kind]
    return [d for a in typing.get_args(kind) for d in _dataclasses_in(a)]
