"""The real `clean` stage run in this process as its coordinator, on the Ray runtime this process
started: the `clean` calibration case and the cleaning benchmarks (`bench/clean_scale.py`,
`bench/clean_end_to_end.py`) time it so.

It runs as `lmforge run` runs a stage (`execute_stage`: temporary directory, atomic commit into
`<workdir>/store`, an MLflow run in a SQLite store under `workdir`), without the DAG around it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.execute import StageTask, execute_stage, load_stages
from lmforge.pipeline.engine.keys import cache_key
from lmforge.pipeline.engine.tracking import client, ensure_experiment

FILTERS = (
    "normalize",
    "length",
    "language",
    "gopher_quality",
    "gopher_repetition",
    "c4",
    "blocklist",
    "toxicity",
    "pii",
)
"""The steps of the default chain, in order (`data.filters.<step>.enabled`)."""


def filters_off(*names: str) -> list[str]:
    """Overrides switching these steps of the chain off."""
    return [f"data.filters.{name}.enabled=false" for name in names]


def prepare_clean_stage(workdir: Path, overrides: list[str]) -> StageTask:
    """The stage's task with these overrides, its MLflow run created (outside any timing)."""
    spec = load_stages()["clean"]
    sections = {"data": compose(overrides)["data"]}
    key = cache_key("clean", spec.version, sections, {})
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    mlflow = client(uri)
    experiment = ensure_experiment(mlflow, "bench", (workdir / "art").as_uri())
    return StageTask(
        stage="clean",
        key=key,
        version=spec.version,
        sections=sections,
        typed_config=spec.parse_config(sections),
        input_keys={},
        workdir=str(workdir),
        store_uri=None,
        tracking_uri=uri,
        mlflow_run_id=mlflow.create_run(experiment, run_name="clean").info.run_id,
    )


def run_clean_stage(task: StageTask) -> tuple[dict, Path, float]:
    """(summary, committed artifact directory, wall seconds) of the prepared stage."""
    started = time.perf_counter()
    result = execute_stage(task)
    return result["summary"], Path(result["artifact"]), time.perf_counter() - started


def run_clean(corpus: Path, workdir: Path, extra: list[str]) -> tuple[dict, float, float]:
    """(summary, wall seconds, cores used) of the clean stage over `corpus`, filters off."""
    overrides = [f"data.paths=[{corpus}/*.jsonl.zst]", *filters_off(*FILTERS), *extra]
    task = prepare_clean_stage(workdir, overrides)
    busy = cpu_busy_seconds()
    summary, _, wall = run_clean_stage(task)
    return summary, wall, (cpu_busy_seconds() - busy) / wall


def cpu_busy_seconds() -> float:
    """Busy CPU seconds of the whole machine since boot (user+nice+system+irq+softirq+steal)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
