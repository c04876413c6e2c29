"""The contract of a stage's cost model: its size, its costs as linear forms in fitted
coefficients, and their evaluation.

A stage declares its cost beside its code, in `pipeline/stages/<stage>/cost.py`, a module with
four functions (its name and inputs are the stage's declaration's, `stage_costs.py`):

- `size(config, flow, cluster) -> dict`: the quantities its cost depends on (documents, bytes,
  tokens, parameters, CPUs...), from the composed config, what the cost models of the stages
  upstream of it said they produce, with the corpus (`flow`), and the cluster;
- `size_of_run(sections, summary, upstream, cluster) -> dict`: the same quantities for a stage
  that has run, from its config sections, its summary and its inputs' summaries;
- `measured_of_run(summary) -> dict`: measures its summary reports itself (a task's peak
  memory by kind), as `<process>_rss_mb`;
- `cost(size) -> StageCost`: its wall time, each kind of process's peak memory and the bytes it
  writes, each a linear form `{coefficient: feature}` in fitted coefficients (the `known` term is
  arithmetic with a coefficient of 1: FLOPs at a stated MFU, ZeRO's bytes per parameter), and
  the quantities it hands downstream.

A cost model is evaluated (`evaluate`) with coefficients fitted from measured runs
(`calibrate.py`, the file: `coefficients.py`). This module imports nothing heavy: `lmforge
estimate` answers at once, with no Ray and no data read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from lmforge.pipeline.errors import ConfigError

KNOWN = "known"
"""The coefficient-free term of a linear form: evaluated as is, never fitted."""

Linear = dict[str, float]
"""A cost as a linear form: coefficient name -> the feature it multiplies."""


@dataclass(frozen=True, slots=True)
class Cluster:
    """The machines a run is planned for."""

    nodes: int
    cpus_per_node: int
    memory_per_node: int | None = None
    """Bytes of RAM per node (None: not checked)."""
    gpus_per_node: int = 0
    gpu_peak_flops: float | None = None
    """One GPU's peak FLOP/s in the training dtype (data sheet, e.g. 989e12 for an H100 in bf16)."""
    gpu_memory: int | None = None
    """Bytes of memory of one GPU (None: not checked)."""

    @property
    def cpus(self) -> int:
        return self.nodes * self.cpus_per_node

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def as_size(self) -> dict[str, float]:
        """The cluster's part of a stage's size."""
        return {"nodes": self.nodes, "cpus": self.cpus, "cpus_per_node": self.cpus_per_node}


@dataclass(slots=True)
class ProcessCost:
    """One kind of process a stage runs (its coordinator, a task, a training rank)."""

    name: str
    rss_mb: Linear
    per_node: int = 1
    """How many of them run at once on one node."""
    device: str = "host"
    """`host`: counts against the node's RAM; `gpu`: against one GPU's memory."""
    remedy: str = ""
    """The setting to change when it does not fit."""
    coordinator: bool = False

    @property
    def measure(self) -> str:
        return f"{re.sub(r'[^a-z0-9]+', '_', self.name.lower()).strip('_')}_rss_mb"


@dataclass(slots=True)
class StageCost:
    """A stage's costs as linear forms, and what it hands downstream."""

    wall_s: Linear
    store_bytes: Linear
    processes: list[ProcessCost]
    outputs: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """What cannot run as configured on this cluster, each naming the setting to change."""

    def measures(self) -> dict[str, Linear]:
        """Every fitted measure by name: `wall_s`, `store_bytes`, `<process>_rss_mb`."""
        forms = {"wall_s": self.wall_s, "store_bytes": self.store_bytes}
        forms.update({p.measure: p.rss_mb for p in self.processes})
        return forms


def process_base(size: dict[str, float]) -> Linear:
    """The memory a stage's process holds before its work: a pipeline runs the stage in a Ray
    worker (`coordinator_mb`, Ray's and the stage's imports); a benchmark that measures the same
    work in a fresh process of its own marks its size `fresh_process` (`fresh_process_mb`, a
    smaller base), so the two kinds of sample fit one cost per unit of work."""
    fresh = size.get("fresh_process", 0.0)
    return {"coordinator_mb": 1 - fresh, "fresh_process_mb": fresh}


def startup_base(size: dict[str, float]) -> Linear:
    """The fixed time of a stage's work: in a pipeline, the stage's own start-up (`fixed_s`);
    timed by a benchmark from a fresh process (`fresh_process`), the interpreter's start and the
    imports too (`fresh_process_s`)."""
    fresh = size.get("fresh_process", 0.0)
    return {"fixed_s": 1 - fresh, "fresh_process_s": fresh}


def config_part(sections: dict[str, Any], name: str) -> dict[str, Any]:
    """The `name` settings among a stage's config sections, whether it declares the group
    whole (`tokenizer`) or key by key (`tokenizer.vocab_size`)."""
    if name in sections:
        return sections[name]
    prefix = f"{name}."
    return {k.removeprefix(prefix): v for k, v in sections.items() if k.startswith(prefix)}


def evaluate(form: Linear, coefficients: dict[str, float], stage: str) -> float:
    """The value of a linear form; a coefficient missing from the file is named."""
    total = 0.0
    for name, feature in form.items():
        if name == KNOWN:
            total += feature
        elif feature:
            if name not in coefficients:
                raise ConfigError(
                    f"the estimate coefficients have no {stage}.{name}: refit them with "
                    "`lmforge estimate --calibrate` (or pass --coefficients FILE)"
                )
            total += coefficients[name] * feature
    return total
