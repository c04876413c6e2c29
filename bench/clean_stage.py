"""The real `clean` stage run in this process as its coordinator, on the Ray runtime this process
started, for the cleaning benchmarks (`clean_scale.py`, `clean_throughput.py --end-to-end`).

It runs as `lmforge run` runs a stage (`execute_stage`: temporary directory, atomic commit into
`<workdir>/store`, an MLflow run in a SQLite store under `workdir`), without the DAG around it.
"""

from __future__ import annotations

import time
from pathlib import Path

from lmforge.pipeline.config import compose
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
