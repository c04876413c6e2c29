"""Build the filters' typed config dataclasses from plain (OmegaConf-converted) dicts.

Unknown keys raise `ValueError` naming the full key (e.g. `data.filters.gopher_quality.min_wrds`),
nested dataclasses are built recursively, and lists become tuples where the field holds tuples.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def config_from_dict(cls: type[T], d: Mapping | None, where: str) -> T:
    """An instance of dataclass `cls` from `d`; `where` is the key path used in error messages.

    `d` may be a plain dict or an OmegaConf DictConfig (any Mapping; lists any Sequence).
    """
    if d is None:
        return cls()
    if not isinstance(d, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {type(d).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in d.items():
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ValueError(f"unknown config key {where}.{key} (known keys: {known})")
        kwargs[key] = _convert(hints[key], value, f"{where}.{key}")
    return cls(**kwargs)


def config_to_dict(config: Any) -> dict:
    """The plain-dict form of a config dataclass (tuples become lists, as YAML would hold them)."""
    return _plain(dataclasses.asdict(config))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _convert(hint: Any, value: Any, where: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return config_from_dict(hint, value, where)
    options = _union_members(hint)
    if value is None:
        if type(None) in options:
            return None
        raise ValueError(f"{where}: null is not allowed here")
    is_sequence = isinstance(value, Sequence) and not isinstance(value, str | bytes)
    for option in options:
        origin = typing.get_origin(option) or option
        if origin is typing.Literal and value in typing.get_args(option):
            return value
        if origin is tuple and is_sequence:
            return _to_tuple(value)
        if origin is list and is_sequence:
            return list(value)
        if origin is bool and isinstance(value, bool):
            return value
        if origin is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if origin is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if origin is str and isinstance(value, str):
            return value
        if origin is dict and isinstance(value, Mapping):
            return dict(value)
    raise ValueError(f"{where}: value {value!r} does not fit the expected type {hint}")


def _union_members(hint: Any) -> tuple:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _to_tuple(value: Sequence) -> tuple:
    return tuple(
        _to_tuple(v) if isinstance(v, Sequence) and not isinstance(v, str | bytes) else v
        for v in value
    )
