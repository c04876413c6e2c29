"""A data mixture's DAG: the stages of `data.sources`, per source where a stage is per source.

Without `data.sources` (the one-source shorthand, `data.paths`) the DAG is the declared stages,
with their names and keys. With it, a stage declared `per_source` becomes one instance per
source, `<stage>[<source>]`, that runs the stage's function on its source's view of the config
(`for_source`) and reads its own source's instance of each per-source input; a stage shared by
the sources reads every source's instance of a per-source input, and its key covers only the
fields of each source it declares (`mixture_fields`), so a setting it does not read leaves it
cached. A stage declared `in_mixture` (the cross-source dedup) exists only in a mixture of two
sources or more that asks for it. Each instance is a stage as far as the plan, the runner, the
store (`store/clean[code]/<key>/`), `status` and MLflow go.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lmforge.pipeline.engine.stage import StageSpec
from lmforge.pipeline.errors import ConfigError

SOURCES = "data.sources"
"""The config list of a mixture's sources, each a mapping with a `name`."""
SOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
INSTANCE = re.compile(r"^(?P<stage>[^\[\]]+)\[(?P<source>[^\[\]]+)\]$")


def base_name(name: str) -> str:
    """The declared stage of an instance name (`clean[code]` -> `clean`)."""
    found = INSTANCE.match(name)
    return found["stage"] if found else name


def source_of(name: str) -> str:
    """The source of an instance name (`clean[code]` -> `code`; "" for a plain stage)."""
    found = INSTANCE.match(name)
    return found["source"] if found else ""


def source_entries(config: Mapping[str, Any]) -> list[dict]:
    """The mixture's sources as the config lists them; checks that each is a mapping with a
    name of its own (one line naming the entry otherwise)."""
    raw = (config.get("data") or {}).get("sources") or []
    if not isinstance(raw, list | tuple):
        raise ConfigError(f"'{SOURCES}' must be a list of sources, got {raw!r}")
    seen: set[str] = set()
    for k, entry in enumerate(raw):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if not isinstance(name, str) or not SOURCE_NAME.match(name):
            raise ConfigError(
                f"'{SOURCES}[{k}]' needs a name of letters, digits, '_', '.' or '-' (got {name!r})"
            )
        if name in seen:
            raise ConfigError(f"'{SOURCES}' names two sources {name!r}; give each its own name")
        seen.add(name)
    return [dict(entry) for entry in raw]


def for_config(stages: Mapping[str, StageSpec], config: Mapping[str, Any]) -> dict[str, StageSpec]:
    """The stages of a run of `config`: the declared ones, or a mixture's instances of them."""
    entries = source_entries(config)
    if not entries:
        return dict(stages)
    names = [e["name"] for e in entries]
    present = {
        name: spec
        for name, spec in stages.items()
        if spec.in_mixture is None or (len(names) > 1 and spec.in_mixture(dict(config)))
    }

    def inputs(spec: StageSpec, source: str | None) -> tuple[str, ...]:
        out: list[str] = []
        for upstream in (*spec.inputs, *spec.mixture_inputs):
            if upstream not in present:
                if upstream in spec.inputs:
                    out.append(upstream)  # an unknown stage: the DAG names it
                continue
            if not present[upstream].per_source:
                out.append(upstream)
            elif source is not None:
                out.append(f"{upstream}[{source}]")
            else:
                out += [f"{upstream}[{s}]" for s in names]
        return tuple(dict.fromkeys(out))

    expanded: dict[str, StageSpec] = {}
    for name, spec in present.items():
        if spec.per_source:
            for rank, source in enumerate(names):
                view = _source_view(spec, rank, name)
                view(dict(config))  # a bad source fails here, before anything runs
                instance = f"{name}[{source}]"
                expanded[instance] = replace(
                    spec, name=instance, base=name, source=source, inputs=inputs(spec, source),
                    view=view,
                )  # fmt: skip
        else:
            extra = (SOURCES,) if spec.mixture_fields is not None else ()
            expanded[name] = replace(
                spec,
                base=name,
                inputs=inputs(spec, None),
                config_sections=(*spec.config_sections, *extra),
                parse_config=_without_sources(spec.parse_config) if extra else spec.parse_config,
                view=_mixture_view(spec.mixture_fields or {}) if extra else None,
            )
    return expanded


def _source_view(spec: StageSpec, rank: int, name: str):
    def view(config: dict[str, Any]) -> dict[str, Any]:
        if spec.for_source is None:
            return config
        try:
            return spec.for_source(config, rank)
        except ConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bad config for stage {name!r}: {exc}") from exc

    return view


def _mixture_view(fields: Mapping[str, Any]):
    def view(config: dict[str, Any]) -> dict[str, Any]:
        projected = [
            {"name": entry["name"], **{f: entry.get(f, d) for f, d in fields.items()}}
            for entry in source_entries(config)
        ]
        return {**config, "data": {**config.get("data", {}), "sources": projected}}

    return view


def _without_sources(parse):
    def parse_shared(sections: dict[str, Any]) -> Any:
        return parse({k: v for k, v in sections.items() if k != SOURCES})

    return parse_shared
