"""Planning a pipeline run: typed configs, cache keys and what runs vs. what is cached.

Everything here happens before any stage starts, so a bad key or value fails early.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lmforge.pipeline.config import section
from lmforge.pipeline.dag import Dag
from lmforge.pipeline.errors import ConfigError, LmforgeError
from lmforge.pipeline.keys import cache_key
from lmforge.pipeline.store import ArtifactStore


@dataclass(slots=True)
class StagePlan:
    """One stage of a planned run."""

    name: str
    key: str
    sections: dict[str, Any]
    typed_config: Any
    input_keys: dict[str, str]
    action: str  # "run" or "cached"


@dataclass(slots=True)
class Plan:
    stages: dict[str, StagePlan] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)

    def to_run(self) -> list[str]:
        return [name for name in self.order if self.stages[name].action == "run"]


def make_plan(
    dag: Dag,
    config: dict[str, Any],
    store: ArtifactStore,
    *,
    until: str | None = None,
    force: set[str] | frozenset[str] = frozenset(),
) -> Plan:
    """Keys for the selected stages and, for each, whether its artifact is already committed."""
    order = dag.upto(until) if until else list(dag.order)
    plan = Plan(order=order)
    for name in order:
        spec = dag.stages[name]
        sections = {path: section(config, path) for path in spec.config_sections}
        try:
            typed = spec.parse_config(sections)
        except ConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bad config for stage {name!r}: {exc}") from exc
        input_keys = {upstream: plan.stages[upstream].key for upstream in spec.inputs}
        key = cache_key(name, spec.version, sections, input_keys)
        try:
            cached = store.exists(name, key)
        except LmforgeError:
            cached = False  # a corrupt manifest counts as absent; the stage recomputes
        action = "run" if name in force or not cached else "cached"
        plan.stages[name] = StagePlan(name, key, sections, typed, input_keys, action)
    return plan
