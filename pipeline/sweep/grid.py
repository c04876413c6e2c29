"""A sweep's variants: the grid of its swept keys, or N random draws from it.

Overrides are parsed by Hydra's own override grammar, as Hydra's multirun parses them: a value
with a comma at its top level (`train.lr=1e-3,3e-3`), `range(...)` or `choice(...)` is swept;
commas inside `[...]` stay inside a value (`data.paths=[a,b],[c]` is two values). Every other
override is shared by all the variants.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lmforge.pipeline.errors import ConfigError


@dataclass(frozen=True, slots=True)
class SweptKey:
    """One swept config key and its values, each as an override value (`key=value`)."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Variant:
    """One variant: its name and its value of each swept key."""

    name: str
    params: dict[str, str] = field(default_factory=dict)

    def overrides(self) -> list[str]:
        return [f"{key}={value}" for key, value in self.params.items()]


def split_overrides(overrides: Sequence[str]) -> tuple[list[str], list[SweptKey]]:
    """(the overrides every variant shares, the swept keys in the order given)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    shared: list[str] = []
    swept: list[SweptKey] = []
    for text in overrides:
        try:
            override = parser.parse_override(text)
        except HydraException as exc:
            raise ConfigError(f"bad sweep override {text!r}: {_first_line(exc)}") from exc
        if not override.is_sweep_override():
            shared.append(text)
            continue
        key = override.key_or_group
        if override.package or text.startswith(("+", "~")):
            raise ConfigError(f"bad sweep override {text!r}: sweep an existing key, as key=a,b")
        if any(s.key == key for s in swept):
            raise ConfigError(f"{key} is swept twice; give its values once, as {key}=a,b")
        try:
            values = tuple(override.sweep_string_iterator())
        except HydraException as exc:
            raise ConfigError(f"bad sweep values in {text!r}: {_first_line(exc)}") from exc
        if not values:
            raise ConfigError(f"{key} has no value to sweep: give at least one, as {key}=a,b")
        swept.append(SweptKey(key, tuple(dict.fromkeys(values))))
    return shared, swept


def expand(swept: Sequence[SweptKey], draws: int | None = None, seed: int = 0) -> list[Variant]:
    """Every combination of the swept values (the first key varies slowest), or `draws` of
    them drawn at random without replacement (by `seed`); each named after its place in the
    grid (`v0`, `v1`, ...), so a variant keeps its name whatever is drawn."""
    if not swept:
        raise ConfigError("nothing to sweep: give at least one key with several values, as key=a,b")
    grid = list(itertools.product(*(s.values for s in swept)))
    names = [s.key for s in swept]
    variants = [
        Variant(f"v{index}", dict(zip(names, combo, strict=True)))
        for index, combo in enumerate(grid)
    ]
    if draws is None:
        return variants
    if draws < 1:
        raise ConfigError(f"--random {draws}: draw at least one variant")
    if draws > len(variants):
        raise ConfigError(
            f"--random {draws} is more than the {len(variants)} variants of the grid; "
            f"draw at most {len(variants)} or widen the grid"
        )
    chosen = sorted(random.Random(seed).sample(range(len(variants)), draws))
    return [variants[i] for i in chosen]


def unread_keys(swept: Iterable[SweptKey], sections: Iterable[str]) -> list[str]:
    """The swept keys that no stage reads (a change to them would give identical variants):
    a key is read when it lies in a section a stage reads, or holds one."""
    paths = list(sections)

    def read(key: str) -> bool:
        return any(
            key == path or key.startswith(path + ".") or path.startswith(key + ".")
            for path in paths
        )

    return [s.key for s in swept if not read(s.key)]


def sweep_id(
    shared: Sequence[str], variants: Sequence[Variant], early_stop: bool, until: str | None = None
) -> str:
    """The sweep's id, the same for the same sweep asked again (so a rerun resumes it): a hash
    of its shared overrides (the workdir aside), its variants, whether it stops early and the
    stage its variants stop after (when they stop before the end)."""
    payload = {
        "shared": sorted(o for o in shared if not o.startswith("workdir=")),
        "variants": [[v.name, v.params] for v in variants],
        "early_stop": early_stop,
    }
    if until:
        payload["until"] = until
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode("utf-8")).hexdigest()
    return f"sweep-{digest[:10]}"


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
