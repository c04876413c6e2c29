"""A sweep planned before anything starts: every variant's config composed and its stages'
cache keys computed, so a bad key or value fails in one line naming the variant."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.run_request import RunRequest, plan_for
from lmforge.pipeline.errors import ConfigError
from lmforge.pipeline.sweep.early_stop import AshaSettings, asha_settings
from lmforge.pipeline.sweep.grid import Variant, sweep_id
from lmforge.pipeline.sweep.validation import check_swept_keys
from lmforge.pipeline.training.early_stop.requests import stop_request_file


@dataclass(slots=True)
class PlannedVariant:
    variant: Variant
    overrides: list[str]
    config: dict[str, Any]
    stages: dict[str, str]
    """Stage name -> cache key."""
    to_run: list[str]
    """The stages not in the store yet."""


@dataclass(slots=True)
class SweepPlan:
    sweep_id: str
    variants: list[PlannedVariant]
    asha: AshaSettings | None
    workdir: Path
    store_location: str

    @property
    def config(self) -> dict[str, Any]:
        """The first variant's config (the workdir, cluster and tracking settings all share)."""
        return self.variants[0].config


def plan_variant(
    variant: Variant, overrides: list[str], until: str | None = None
) -> PlannedVariant:
    config = compose(overrides)
    try:
        _, plan, _ = plan_for(RunRequest(config=config, until=until))
    except ConfigError as exc:
        raise ConfigError(f"variant {' '.join(variant.overrides())}: {exc}") from exc
    stages = {name: plan.stages[name].key for name in plan.order}
    return PlannedVariant(variant, overrides, config, stages, plan.to_run())


def plan_sweep(
    shared: list[str],
    variants: list[Variant],
    early_stop: bool = False,
    grace_period: int | None = None,
    reduction_factor: float | None = None,
    until: str | None = None,
) -> SweepPlan:
    """Every variant planned (up to `until` when given); with `early_stop`, ASHA's settings
    (and `train.eval_every` set for every variant when the sweep sets none)."""
    check_swept_keys(variants)
    asha, extra = None, []
    if early_stop:
        configs = [compose(shared + v.overrides())["train"] for v in variants]
        every = configs[0]["eval_every"]
        steps = max(train["max_steps"] for train in configs)
        asha = asha_settings(steps, every, grace_period, reduction_factor)
        extra = [] if every else [f"train.eval_every={asha.eval_every}"]
    planned = [plan_variant(v, shared + extra + v.overrides(), until) for v in variants]
    workdirs = {Path(p.config["workdir"]).expanduser().resolve() for p in planned}
    if len(workdirs) > 1:
        raise ConfigError("the variants of a sweep share one workdir: do not sweep workdir")
    workdir = workdirs.pop()
    store = str(planned[0].config["cluster"].get("store_uri") or workdir / "store")
    if asha and stop_request_file(store, "-") is None:
        raise ConfigError(
            "--early-stop needs the store on a path the training workers see "
            "(cluster.store_uri is a bucket): sweep without --early-stop"
        )
    identity = sweep_id(shared, variants, early_stop, until)
    return SweepPlan(identity, planned, asha, workdir, store)
