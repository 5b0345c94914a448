"""Frozen rule dataclasses to plain JSON values and back, driven by their type hints.

The release records (:mod:`.record`) store every section as the JSON form of the dataclass that
interprets it (``EngineRules``, ``LaunchRules``, ``TargetTable``, ...), so one codec keeps the data
files and the typed rules in step: a field the file lacks takes the dataclass default, a field equal
to its default (or to ``base``'s value) is not written, and a value that does not fit its type
is a ``ValueError`` naming the field. Enums are their string values, tuples and frozensets lists.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from functools import cache
from typing import Any, Union


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _init_fields(cls: type) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def encode(value: Any, base: Any = None, skip: tuple[str, ...] = ()) -> Any:
    """The JSON form of ``value``; for a dataclass only the fields that differ from ``base``'s (or the defaults)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in _init_fields(type(value)):
            if f.name in skip:
                continue
            v = getattr(value, f.name)
            ref = getattr(base, f.name) if base is not None else _default(f)
            if ref is not dataclasses.MISSING and v == ref:
                continue
            out[f.name] = encode(v)
        return out
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, frozenset):
        return sorted(encode(v) for v in value)
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ValueError(f"cannot encode {type(value).__name__} {value!r}")


def decode(cls: type, data: Any, where: str = "", **given: Any) -> Any:
    """An instance of dataclass ``cls`` from its JSON form (``given``: fields supplied by the caller)."""
    if not isinstance(data, dict):
        raise ValueError(f"{where or cls.__name__}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    names = {f.name for f in _init_fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{where or cls.__name__}: unknown fields {sorted(unknown)}")
    kwargs = {k: convert(hints[k], v, f"{where}.{k}") for k, v in data.items() if k not in given}
    try:
        return cls(**kwargs, **given)
    except TypeError as exc:
        raise ValueError(f"{where or cls.__name__}: {exc}") from None


def convert(tp: Any, value: Any, where: str) -> Any:
    """``value`` (JSON) as type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        return convert(rest[0], value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ValueError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value, strict=True)))
    if origin is frozenset:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected a list, got {value!r}")
        return frozenset(convert(args[0], v, where) for v in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where}: expected an object, got {value!r}")
        return {k: convert(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return decode(tp, value, where)
    if isinstance(tp, type) and issubclass(tp, Enum):
        try:
            return tp(value)
        except ValueError:
            raise ValueError(f"{where}: {value!r} is not one of {[m.value for m in tp]}") from None
    if tp in (str, int, float, bool):
        ok = isinstance(value, tp) and not (tp is int and isinstance(value, bool))
        if tp is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not ok:
            raise ValueError(f"{where}: expected {tp.__name__}, got {value!r}")
        return value
    raise ValueError(f"{where}: no decoder for type {tp!r}")


__all__ = ["convert", "decode", "encode"]
