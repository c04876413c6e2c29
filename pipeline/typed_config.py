"""Turn a config mapping into a typed dataclass, naming the exact key that is wrong, and back."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from lmforge.pipeline.errors import ConfigError

T = TypeVar("T")


def from_mapping(cls: type[T], values: Mapping[str, Any] | None, where: str) -> T:
    """Build dataclass `cls` from `values` (None: its defaults); `where` is the config path used
    in messages.

    Unknown keys, values of the wrong type and values the dataclass rejects in `__post_init__`
    all raise ConfigError naming `where.key`. Lists become tuples where the field holds tuples.
    """
    if values is None:
        return cls()
    if not isinstance(values, Mapping):
        raise ConfigError(f"'{where}' must be a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(
                f"unknown config key '{where}.{key}'; valid keys: {', '.join(sorted(known))}"
            )
        kwargs[key] = _coerce(value, hints[key], f"{where}.{key}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad value in '{where}': {exc}") from exc


def _coerce(value: Any, hint: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(value, option, path)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"'{path}' must not be null")
    if origin is typing.Literal:
        if value not in typing.get_args(hint):
            choices = ", ".join(map(str, typing.get_args(hint)))
            raise ConfigError(f"'{path}' is {value!r}; choose one of: {choices}")
        return value
    if origin in (list, tuple) or hint in (list, tuple):
        if not _is_sequence(value):
            raise ConfigError(f"'{path}' must be a list, got {value!r}")
        return _coerce_sequence(value, hint, path)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"'{path}' must be a mapping, got {value!r}")
        return dict(value)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, Mapping):
            raise ConfigError(f"'{path}' must be a mapping, got {value!r}")
        own_parser = getattr(hint, "from_dict", None)
        if callable(own_parser):  # a component that validates its own nested config
            try:
                return own_parser(dict(value), path)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"bad value in '{path}': {exc}") from exc
        return from_mapping(hint, value, path)
    return _coerce_scalar(value, hint, path)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _coerce_sequence(value: Sequence, hint: Any, path: str) -> list | tuple:
    args = typing.get_args(hint)
    if (typing.get_origin(hint) or hint) is list:
        item = args[0] if args else Any
        return [_coerce(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
    if len(args) == 2 and args[1] is Ellipsis:  # tuple[X, ...]
        items = [args[0]] * len(value)
    elif args:  # tuple[A, B]: exactly these
        if len(args) != len(value):
            raise ConfigError(f"'{path}' must have {len(args)} items, got {value!r}")
        items = list(args)
    else:
        items = [Any] * len(value)
    pairs = enumerate(zip(value, items, strict=True))
    return tuple(_coerce(v, t, f"{path}[{i}]") for i, (v, t) in pairs)


def config_to_dict(config: Any) -> dict:
    """The plain-dict form of a config dataclass (tuples become lists, as YAML would hold them)."""
    return _plain(dataclasses.asdict(config))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _coerce_scalar(value: Any, hint: Any, path: str) -> Any:
    if hint is Any:
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"'{path}' must be true or false, got {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"'{path}' must be an integer, got {value!r}")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"'{path}' must be a number, got {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"'{path}' must be a string, got {value!r}")
    return value
