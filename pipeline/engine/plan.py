"""Planning a pipeline run: typed configs, cache keys and what runs vs. what is cached.

Everything here happens before any stage starts, so a bad key or value fails early. A cached
artifact counts only if its files match its manifest (sizes always; sha256 with `verify`, or for
files changed after the manifest); a damaged one is reported in one warning line and recomputed,
and the commit keeps the damaged copy under `.replaced/`. Recomputing does not change its key, so
cached descendants stay valid.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from lmforge.pipeline.config_tree import section
from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.keys import cache_key, without_unkeyed
from lmforge.pipeline.engine.stage import StageSpec
from lmforge.pipeline.errors import ConfigError, LmforgeError
from lmforge.pipeline.storage.artifact_store import ArtifactStore

log = logging.getLogger("lmforge")


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
    force: frozenset[str] = frozenset()
    """Stages recomputed even when cached (`rerun`)."""
    verify: bool = False

    def to_run(self) -> list[str]:
        return [name for name in self.order if self.stages[name].action == "run"]


def committed_since(plan: Plan, spec: StageSpec, store: ArtifactStore) -> bool:
    """Whether a stage planned to run finds its artifact committed and usable now, under its
    lease (another run computed it since the plan was made): then it is a cache hit. A damaged
    or too small copy was reported when the plan was made, and is not again."""
    stage_plan = plan.stages[spec.name]
    if spec.name in plan.force:
        return False
    key = stage_plan.key
    return _usable(store, spec.name, key, plan.verify, warn=False) and _covers(
        store, spec, key, stage_plan.typed_config, say=False
    )


def make_plan(
    dag: Dag,
    config: dict[str, Any],
    store: ArtifactStore,
    *,
    until: str | None = None,
    force: set[str] | frozenset[str] = frozenset(),
    verify: bool = False,
) -> Plan:
    """Keys for the selected stages and, for each, whether its artifact is already committed."""
    order = dag.upto(until) if until else list(dag.order)
    plan = Plan(order=order, force=frozenset(force), verify=verify)
    for name in order:
        spec = dag.stages[name]
        seen = spec.view(config) if spec.view else config  # an instance's view of the config
        sections = {path: section(seen, path) for path in spec.config_sections}
        sizing = {path: section(seen, path) for path in spec.sizing}
        try:
            typed = spec.parse_config({**sections, **sizing})
        except ConfigError:
            raise
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bad config for stage {name!r}: {exc}") from exc
        input_keys = {upstream: plan.stages[upstream].key for upstream in spec.inputs}
        key = cache_key(name, spec.version, without_unkeyed(sections, spec.unkeyed), input_keys)
        cached = (
            name not in force
            and _usable(store, name, key, verify)
            and _covers(store, spec, key, typed)
        )
        action = "cached" if cached else "run"
        plan.stages[name] = StagePlan(name, key, sections, typed, input_keys, action)
    return plan


def _usable(store: ArtifactStore, name: str, key: str, verify: bool, warn: bool = True) -> bool:
    """Whether the committed artifact of `name` can be reused; warns when it is damaged."""
    try:
        if not store.exists(name, key):
            return False
        problem = store.verify(name, key, full=verify)
    except LmforgeError as exc:
        problem = str(exc)
    if problem and warn:
        log.warning(
            "lmforge: warning: cached %s artifact %s is corrupt (%s); recomputing it, the damaged "
            "copy is kept under %s/.replaced/",
            name,
            store.path(name, key),
            problem,
            name,
        )
    return problem is None


def _covers(store: ArtifactStore, spec: StageSpec, key: str, typed: Any, say: bool = True) -> bool:
    """Whether a committed artifact holds as much as this run needs (see `StageSpec.covers`)."""
    if spec.covers is None:
        return True
    manifest = store.manifest(spec.name, key) or {}
    if spec.covers(manifest.get("summary", {}), typed):
        return True
    if say:
        log.info(
            "lmforge: %s artifact %s covers less than this run needs (%s); it is rebuilt larger",
            spec.name,
            key,
            ", ".join(spec.sizing),
        )
    return False
