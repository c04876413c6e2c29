"""What a user asks the runner for, and the plan it makes of it before anything starts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmforge.pipeline.engine.dag import Dag
from lmforge.pipeline.engine.execute import load_stages
from lmforge.pipeline.engine.plan import Plan, make_plan
from lmforge.pipeline.engine.run_records import PipelineRecord
from lmforge.pipeline.engine.source_instances import base_name, for_config
from lmforge.pipeline.engine.workdir import Workdir
from lmforge.pipeline.storage.artifact_store import open_store
from lmforge.pipeline.storage.settings import StoreSettings


@dataclass(slots=True)
class SweepLink:
    """The sweep a pipeline run is a variant of: the run nests under the sweep's MLflow run,
    tagged with the sweep and the variant, with the swept keys as params."""

    sweep_id: str
    variant: str
    parent_run_id: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class RunRequest:
    """What the user asked for."""

    config: dict[str, Any]
    command: str = "run"
    until: str | None = None
    rerun: str | None = None
    downstream: bool = False
    verify: bool = False
    """Check the sha256 of every file of every cache hit, not only sizes."""
    lease_wait_s: float | None = None
    """`--lease-wait`: how long to wait for a stage another run computes (None: the config's
    `cluster.lease_wait_s`)."""
    sweep: SweepLink | None = None
    """Set when the run is a sweep's variant."""
    on_start: Callable[[PipelineRecord], None] | None = None
    """Called with the run's record once it has one (a sweep follows its variants' stages)."""


def plan_for(request: RunRequest) -> tuple[Dag, Plan, Workdir]:
    """The DAG, the plan and the workdir for a request (no side effects beyond reading)."""
    dag = Dag(for_config(load_stages(), request.config))
    workdir = Workdir(Path(request.config["workdir"]).expanduser().resolve())
    force: set[str] = set()
    if request.rerun:
        dag.ancestors(request.rerun)  # validates the name
        force.add(request.rerun)
        if request.downstream:
            force |= dag.descendants(request.rerun)
    cluster = request.config["cluster"]
    settings = StoreSettings.from_cluster(cluster, workdir.root)
    store = open_store(cluster.get("store_uri"), workdir.root, settings)
    store.check()
    plan = make_plan(
        dag, request.config, store, until=request.until, force=force, verify=request.verify
    )
    return dag, plan, workdir


def run_local_checks(plan: Plan, cluster: dict) -> None:
    """On a local runtime (no Ray address), each stage to run checks its config with its
    `local_check` before MLflow or Ray start (about 15 s on two cores), so that a mistake it would
    fail on once started (clean: a data path that matches no file) fails the run at once. A
    cluster's stages check on the cluster."""
    if cluster.get("ray_address"):
        return
    stages = load_stages()
    for name in plan.to_run():
        check = stages[base_name(name)].local_check
        if check is not None:
            check(plan.stages[name].typed_config)
