"""What a finished stage cost, next to what `lmforge estimate` predicts for its size.

Every stage's manifest carries it under `estimate` (and its MLflow run as `estimate_*`
metrics): `predicted_s`, `measured_s`, `predicted_peak_rss_mb`, `measured_peak_rss_mb` (the
stage's largest process: its own, or the largest a task reported), the same for its coordinator,
and the `size` and per-process `measured` values the cost model read, so predictions can be
checked and the coefficients refitted from real runs (`lmforge estimate --calibrate`). The
engine writes it as it commits each stage (`pipeline/engine/execute.py`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from lmforge.pipeline.estimate.coefficients import coefficients_path, load_coefficients
from lmforge.pipeline.estimate.cost_model import Cluster
from lmforge.pipeline.estimate.stage_costs import cost_models

log = logging.getLogger(__name__)
MB = 2**20


def upstream_view(input_manifests: dict[str, dict]) -> dict[str, dict]:
    """Each input's summary with the size its own estimate recorded (parameters, tokens...)."""
    return {
        name: {**m.get("summary", {}), **(m.get("estimate") or {}).get("size", {})}
        for name, m in input_manifests.items()
    }


def stage_record(
    *,
    stage: str,
    sections: dict,
    summary: dict,
    input_manifests: dict[str, dict],
    measured_s: float,
    process_peak_mb: float,
    cluster: Cluster,
    workdir: Path,
) -> dict[str, Any]:
    """The manifest's `estimate` entry; a cost model that fails is reported, never raised."""
    record: dict[str, Any] = {
        "measured_s": round(measured_s, 3),
        "measured_peak_rss_mb": round(process_peak_mb, 1),
        "measured_coordinator_rss_mb": round(process_peak_mb, 1),
    }
    try:
        record.update(
            _predicted(stage, sections, summary, input_manifests, process_peak_mb, cluster, workdir)
        )
    except Exception as exc:  # a record of a finished stage must never fail it
        log.warning("lmforge: no estimate recorded for %s: %s", stage, exc)
        record["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return record


def _predicted(stage, sections, summary, input_manifests, process_peak_mb, cluster, workdir):
    from lmforge.pipeline.estimate.prediction import predict

    model = cost_models().get(stage)
    if model is None:
        return {"error": f"stage {stage} declares no cost model"}
    size = model.size_of_run(sections, summary, upstream_view(input_manifests), cluster)
    path = coefficients_path(None, workdir)
    coefficients = load_coefficients(path)
    prediction = predict(stage, model.cost(size), size, coefficients["stages"])
    measured = {**model.measured_of_run(summary), "coordinator_rss_mb": process_peak_mb}
    return {
        "predicted_s": round(prediction.wall_s, 3),
        "predicted_peak_rss_mb": round(prediction.peak_rss_mb, 1),
        "predicted_coordinator_rss_mb": round(prediction.coordinator_rss_mb, 1),
        "measured_peak_rss_mb": round(max(measured.values()), 1),
        "predicted_store_bytes": round(prediction.store_bytes),
        "size": size,
        "measured": {k: round(v, 1) for k, v in measured.items()},
        "coefficients": str(path),
    }


def metrics(record: dict[str, Any]) -> dict[str, float]:
    """The record's numbers as MLflow metrics `estimate_<key>`."""
    return {
        f"estimate_{k}": float(v)
        for k, v in record.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def directory_bytes(path: Path) -> int:
    """Bytes of every file under `path` (what the stage wrote)."""
    return sum(
        (Path(root) / name).stat().st_size for root, _, files in os.walk(path) for name in files
    )


def cluster_now() -> Cluster:
    """The Ray cluster this stage runs on (this machine outside Ray), as cost models see it."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")] if ray.is_initialized() else []
    nodes = nodes or [{"Resources": {"CPU": os.cpu_count() or 1}}]
    cpus = sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)
    gpus = sum(n.get("Resources", {}).get("GPU", 0) for n in nodes)
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        memory = None
    return Cluster(
        nodes=len(nodes),
        cpus_per_node=max(1, round(cpus / len(nodes))),
        memory_per_node=memory,
        gpus_per_node=round(gpus / len(nodes)),
    )
