"""`lmforge estimate`: predicted time, memory and storage of every stage for a corpus and a
cluster, from the stages' own cost models (`pipeline/stages/<stage>/cost.py`) and measured
coefficients. Nothing runs and no data is read; not to be confused with the engine's execution
plan (`pipeline/engine/plan.py`), which decides what a run will compute.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from lmforge.pipeline.estimate.cost_model import Cluster, StageCost, evaluate
from lmforge.pipeline.estimate.stage_costs import CostModel, cost_models, upstream_of

ESTIMATE_FORMAT = 1
MB = 2**20


@dataclass(slots=True)
class ProcessPrediction:
    name: str
    peak_rss_mb: float
    per_node: int
    device: str
    coordinator: bool
    remedy: str


@dataclass(slots=True)
class StagePrediction:
    stage: str
    wall_s: float
    store_bytes: float
    peak_rss_mb: float
    """The largest process's peak (coordinator included)."""
    largest_process: str
    coordinator_rss_mb: float
    processes: list[ProcessPrediction]
    size: dict[str, float]
    fits: bool = True
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Flag:
    """Something that cannot run as configured, and the setting to change."""

    stage: str
    process: str
    needs_mb: float
    available_mb: float
    change: str


def predict(stage: str, cost: StageCost, size: dict, coefficients: dict) -> StagePrediction:
    """Evaluate a stage's cost model with its fitted coefficients."""
    coef = coefficients.get(stage, {})
    processes = [
        ProcessPrediction(
            name=p.name,
            peak_rss_mb=max(0.0, evaluate(p.rss_mb, coef, stage)),
            per_node=p.per_node,
            device=p.device,
            coordinator=p.coordinator,
            remedy=p.remedy,
        )
        for p in cost.processes
    ]
    host = [p for p in processes if p.device == "host"] or processes
    largest = max(host, key=lambda p: p.peak_rss_mb)
    coordinator = next((p for p in processes if p.coordinator), largest)
    return StagePrediction(
        stage=stage,
        wall_s=max(0.0, evaluate(cost.wall_s, coef, stage)),
        store_bytes=max(0.0, evaluate(cost.store_bytes, coef, stage)),
        peak_rss_mb=largest.peak_rss_mb,
        largest_process=largest.name,
        coordinator_rss_mb=coordinator.peak_rss_mb,
        processes=processes,
        size=size,
        notes=list(cost.notes),
    )


def memory_flags(prediction: StagePrediction, cluster: Cluster) -> list[Flag]:
    """Processes that do not fit: a node's RAM (all that run on it at once; the coordinator
    beside them on the head node) or one GPU's memory."""
    flags = []
    node_mb = cluster.memory_per_node / MB if cluster.memory_per_node else None
    gpu_mb = cluster.gpu_memory / MB if cluster.gpu_memory else None
    host = [p for p in prediction.processes if p.device == "host"]
    workers = max((p.per_node * p.peak_rss_mb for p in host if not p.coordinator), default=0.0)
    for p in prediction.processes:
        if p.device == "gpu":
            needs, has = p.peak_rss_mb, gpu_mb
        elif p.coordinator:
            needs, has = p.peak_rss_mb + workers, node_mb
        else:
            needs, has = p.per_node * p.peak_rss_mb, node_mb
        if has is not None and needs > has:
            where = "one GPU" if p.device == "gpu" else "one node"
            remedy = p.remedy or (
                "a head node with more memory" if p.coordinator else "nodes with more memory"
            )
            flags.append(
                Flag(prediction.stage, f"{p.name} ({where})", round(needs), round(has), remedy)
            )
    return flags


@dataclass(slots=True)
class RunEstimate:
    corpus: dict[str, float]
    cluster: Cluster
    stages: list[StagePrediction]
    flags: list[Flag]
    coefficients_source: dict[str, Any]
    finish_s: dict[str, float]
    """When each stage finishes, stages running side by side once their inputs are ready."""

    @property
    def total_wall_s(self) -> float:
        return max(self.finish_s.values(), default=0.0)

    critical_path: list[str]
    """The chain of stages, each waiting on the one before, that ends last."""
    handed: dict[str, dict[str, float]] = field(default_factory=dict)
    """What each stage's cost model handed downstream (clean's documents, tokenize's tokens)."""

    @property
    def bound_stage(self) -> str:
        """The longest stage on the critical path: the one that bounds the run's time."""
        wall = {s.stage: s.wall_s for s in self.stages}
        return max(self.critical_path, key=wall.__getitem__)

    def to_json(self) -> dict[str, Any]:
        """The stable object `lmforge estimate --json` prints."""
        return {
            "format": ESTIMATE_FORMAT,
            "corpus": self.corpus,
            "cluster": asdict(self.cluster),
            "coefficients": self.coefficients_source,
            "stages": [_stage_json(s) for s in self.stages],
            "total_wall_s": round(self.total_wall_s, 1),
            "store_bytes": round(sum(s.store_bytes for s in self.stages)),
            "bound_stage": self.bound_stage,
            "critical_path": self.critical_path,
            "fits": not self.flags,
            "flags": [asdict(f) for f in self.flags],
        }


def _stage_json(s: StagePrediction) -> dict[str, Any]:
    return {
        "stage": s.stage,
        "wall_s": round(s.wall_s, 1),
        "peak_rss_mb": round(s.peak_rss_mb, 1),
        "largest_process": s.largest_process,
        "coordinator_rss_mb": round(s.coordinator_rss_mb, 1),
        "store_bytes": round(s.store_bytes),
        "fits": s.fits,
        "processes": [{**asdict(p), "peak_rss_mb": round(p.peak_rss_mb, 1)} for p in s.processes],
        "notes": s.notes,
    }


def estimate_run(
    config: dict, corpus: dict[str, float], cluster: Cluster, coefficients: dict
) -> RunEstimate:
    """Every stage, upstream first, each sized from the corpus and what the stages upstream of
    it hand downstream (`StageCost.outputs`)."""
    models = cost_models()
    outputs: dict[str, dict[str, float]] = {}
    stages, flags = [], []
    for name, model in models.items():
        upstream = upstream_of(models, name)
        flow = dict(corpus)
        for earlier, handed in outputs.items():  # upstream first
            if earlier in upstream:
                flow.update(handed)
        size = model.size(config, flow, cluster)
        cost = model.cost(size)
        outputs[name] = cost.outputs
        prediction = predict(name, cost, size, coefficients["stages"])
        found = memory_flags(prediction, cluster) + _problems(name, cost)
        prediction.fits = not found
        stages.append(prediction)
        flags += found
    finish = _finish_times(models, {s.stage: s.wall_s for s in stages})
    return RunEstimate(
        corpus=corpus,
        cluster=cluster,
        stages=stages,
        flags=flags,
        coefficients_source=coefficients.get("fitted_on", {}),
        finish_s=finish,
        critical_path=_critical_path(models, finish),
        handed=outputs,
    )


def _problems(stage: str, cost: StageCost) -> list[Flag]:
    return [Flag(stage, "configuration", 0, 0, text) for text in cost.problems]


def _finish_times(models: dict[str, CostModel], wall: dict[str, float]) -> dict[str, float]:
    finish: dict[str, float] = {}
    for name, model in models.items():  # upstream first
        ready = max((finish[u] for u in model.inputs if u in finish), default=0.0)
        finish[name] = ready + wall[name]
    return finish


def _critical_path(models: dict[str, CostModel], finish: dict[str, float]) -> list[str]:
    path = [max(finish, key=finish.__getitem__)] if finish else []
    while path:
        inputs = [u for u in models[path[0]].inputs if u in finish]
        if not inputs:
            break
        path.insert(0, max(inputs, key=finish.__getitem__))
    return path
