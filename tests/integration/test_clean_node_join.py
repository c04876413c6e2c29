"""A node that joins the cluster while `clean` runs receives read tasks: concurrency follows the
cluster, not the CPUs counted at the start."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import ray
from ray.cluster_utils import Cluster

from lmforge.pipeline.config_tree import compose
from lmforge.pipeline.engine.execute import StageTask, execute_stage, load_stages
from lmforge.pipeline.engine.keys import cache_key
from lmforge.pipeline.engine.tracking import client, ensure_experiment
from lmforge.pipeline.estimate.calibration.synthetic_corpus import synthesize

pytestmark = pytest.mark.integration

UNITS = 10


def clean_task(workdir: Path, corpus: Path) -> StageTask:
    spec = load_stages()["clean"]
    config = compose(
        [
            "preset=tiny",
            f"data.paths=[{corpus}/*.jsonl.zst]",
            "data.read_split_mb=0.001",  # a read unit per file
        ]
    )
    sections = {"data": config["data"]}
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    mlflow = client(uri)
    experiment = ensure_experiment(mlflow, "node-join", (workdir / "art").as_uri())
    return StageTask(
        stage="clean",
        key=cache_key("clean", spec.version, sections, {}),
        version=spec.version,
        sections=sections,
        typed_config=spec.parse_config(sections),
        input_keys={},
        workdir=str(workdir),
        store_uri=None,
        tracking_uri=uri,
        mlflow_run_id=mlflow.create_run(experiment, run_name="clean").info.run_id,
    )


def test_a_node_added_mid_stage_receives_read_tasks(tmp_path):
    corpus = tmp_path / "corpus"
    synthesize(corpus, docs=UNITS * 1200, files=UNITS, seed=5)
    head = {"num_cpus": 1, "include_dashboard": False}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    try:
        ray.init(address=cluster.address)
        outcome: dict = {}
        (tmp_path / "runs").mkdir()
        task = clean_task(tmp_path / "runs", corpus)
        runner = threading.Thread(target=lambda: outcome.update(execute_stage(task)))
        runner.start()
        markers = tmp_path / "runs" / "resume" / "clean"
        deadline = time.time() + 300
        while not list(markers.glob("*/done/filter-*.json")):
            assert runner.is_alive() and time.time() < deadline, "no read unit finished"
            time.sleep(0.05)
        assert len(list(markers.glob("*/done/filter-*.json"))) < UNITS - 2
        cluster.add_node(num_cpus=1)
        runner.join(timeout=600)
        summary = outcome["summary"]
        assert summary["read_units"] == UNITS
        assert summary["read_nodes"] == 2
    finally:
        ray.shutdown()
        cluster.shutdown()
